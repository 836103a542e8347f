"""Triton register-A upcast kernels outside the Hopper corpus (tests/data/kernels_upcast): the
narrow element types Triton upcasts in registers -- with bit tricks instead of ``cvt`` for s8 ->
bf16 (``prmt`` under a magic exponent, masks, a packed ``sub``) and e5m2 -> bf16 (``lop3`` masks,
shifts, a scaling ``mul``), through ``cvt`` from a 16-bit integer for s8 / u8 -> f16 and u8 -> bf16 --
built by make_hopper_corpus's
``build_triton`` with other types and tiles than the corpus's, so ``kernel check``'s exhaustive
conversion proof (formal/kernel/exact.py) is tried on code it was not written against.

    python3 tools/make_upcast_kernels.py [--out DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_hopper_corpus as C  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "kernels_upcast"


def jobs() -> dict:
    # (A type, upcast to, BM, BN, BK, warps, M, N, K): small launches (a check takes seconds)
    return {
        "up_s8_bf16_w4": C.tri_upcast("s8", "bf16", 64, 64, 32, 4, 64, 128, 128),
        "up_s8_f16_w4": C.tri_upcast("s8", "f16", 64, 64, 32, 4, 64, 128, 128),
        "up_u8_bf16_w4": C.tri_upcast("u8", "bf16", 64, 64, 64, 4, 128, 64, 128),
        "up_u8_f16_w8": C.tri_upcast("u8", "f16", 128, 64, 32, 8, 128, 128, 64),
        "up_e5m2_bf16_w4": C.tri_upcast("e5m2", "bf16", 64, 64, 32, 4, 64, 64, 64),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(OUT))
    out = Path(ap.parse_args(argv).out)
    out.mkdir(parents=True, exist_ok=True)
    manifest = {}
    for name, job in jobs().items():
        ptx, rec = C.build_triton(name, job)
        (out / f"{name}.ptx").write_text(ptx)
        rec.update(ptx=f"{name}.ptx", bytes=len(ptx.encode()), sha256=hashlib.sha256(ptx.encode()).hexdigest())
        manifest[name] = rec
        print(f"{name}: {rec['bytes']} bytes", flush=True)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
