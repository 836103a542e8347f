"""Write a kernel spec TOML for every module of the Hopper corpus from its manifest record
(formal.kernel.manifest: launch, buffers, scalars, [[tensormap]] parameters, contract), so that
`ptx-formal kernel run|check FILE.ptx --spec FILE.toml` works on the corpus as on any kernel.

    python3 tools/make_hopper_specs.py            # -> tests/data/kernels_hopper/specs/<module>.toml
    python3 tools/make_hopper_specs.py --check    # exit 1 if a checked-in spec differs
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from formal.kernel import manifest  # noqa: E402

CORPUS = ROOT / "tests" / "data" / "kernels_hopper"
OUT = CORPUS / "specs"


def render(name: str, meta: dict) -> str:
    head = (f"# {name}: generated from manifest.json by tools/make_hopper_specs.py (do not edit)\n"
            f"# {meta['computes']}\n")
    return head + manifest.to_toml(manifest.spec_dict(meta))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    metas = json.loads((CORPUS / "manifest.json").read_text())
    OUT.mkdir(exist_ok=True)
    bad = []
    for name, meta in sorted(metas.items()):
        text = render(name, meta)
        path = OUT / f"{name}.toml"
        if args.check:
            if not path.exists() or path.read_text() != text:
                bad.append(name)
        else:
            path.write_text(text)
    if bad:
        print("specs differ from the manifest: " + ", ".join(bad), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
