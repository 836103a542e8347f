"""Silicon confirmation of the Hopper mutants (tests/data/kernels_hopper/mutants): run each on the H100
with tools/run_hopper_kernels.py's machinery (the mutants' manifest.json is in the corpus format) and
compare its outputs with the H100's recorded outputs of the unmutated kernel.

On the device (one H100/H200):
    PYTHONUNBUFFERED=1 python3 tools/run_hopper_kernels.py --corpus tests/data/kernels_hopper/mutants \\
        --out $OUT/mut --seeds 0 --gpu-timeout 10 --budget 540
    python3 tools/run_hopper_mutants.py --compare $OUT/mut        # prints and writes $OUT/mut/mutants_h100.json
Here, with the device's folder brought back:
    python3 tools/run_hopper_mutants.py --compare DIR [--write]   # --write: into proofs/evidence/kernel_mutants_hopper.json

Per mutant: "differs" (some output's sha256 is not the unmutated kernel's on the H100), "same", "hang"
(the launch timed out: a deadlock mutant), "error" (a CUDA error), "missing".  Silicon is not a judge of
a hazard mutant (an in-flight register write or a missing fence may happen to give the right bytes on one
run): for those "same" is recorded, not counted against the checker; a descriptor / data-path mutant
that gives "same" would be a checker false alarm worth a look, and a rewrite that "differs" a false proof.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MUT = ROOT / "tests" / "data" / "kernels_hopper" / "mutants"
RECORDS = ROOT / "proofs" / "evidence" / "kernels_hopper_h100.json"
EVIDENCE = ROOT / "proofs" / "evidence" / "kernel_mutants_hopper.json"
DATA = {"swizzle-mismatch", "missing-subtile-offset", "sbo-stride", "sbo-bytes", "warpgroup-rows", "imm-trans"}


def compare(dev: Path) -> dict:
    man = json.loads((MUT / "manifest.json").read_text())
    base = json.loads(RECORDS.read_text())["kernels"]
    got = json.loads((dev / "kernels_hopper_h100.json").read_text())
    got = got.get("kernels", got)
    out = {}
    for name, meta in man.items():
        mu = meta["mutant"]
        rec = got.get(name)
        if rec is None:
            out[name] = {"outcome": "missing"}
            continue
        if rec.get("status") != "ok" or not rec.get("launches"):
            err = str(rec.get("error", ""))
            out[name] = {"outcome": "hang" if "timeout" in err.lower() or rec.get("status") == "timeout" else "error",
                         "error": err[:200]}
            continue
        want = next(x for x in base[mu["kernel"]]["launches"] if x["seed"] == 0)
        la = next(x for x in rec["launches"] if x["seed"] == 0)
        if la.get("inputs_sha256") != want["inputs_sha256"]:
            out[name] = {"outcome": "error", "error": "inputs differ from the unmutated kernel's run"}
            continue
        diff = sorted(k for k, h in want["outputs_sha256"].items() if la.get("outputs_sha256", {}).get(k) != h)
        out[name] = {"outcome": "differs" if diff else "same", "outputs_differ": diff}
    for name, r in out.items():
        mu = man[name]["mutant"]
        r["class"], r["expect"] = mu["class"], mu["expect"]
        r["concern"] = ((mu["expect"] == "proved" and r["outcome"] != "same")
                        or (mu["class"] in DATA and r["outcome"] == "same"))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--compare", required=True, metavar="DIR", help="the --out folder of the device run")
    ap.add_argument("--write", action="store_true", help="record in proofs/evidence/kernel_mutants_hopper.json")
    args = ap.parse_args(argv)
    dev = Path(args.compare)
    res = compare(dev)
    for n, r in res.items():
        print(f"{n:40s} {r['class']:24s} {r['outcome']:8s} {r.get('outputs_differ', r.get('error', ''))}"
              + ("  <-- look" if r["concern"] else ""))
    (dev / "mutants_h100.json").write_text(json.dumps(res, indent=1) + "\n")
    if args.write:
        ev = json.loads(EVIDENCE.read_text())
        ev["h100"] = res
        EVIDENCE.write_text(json.dumps(ev, indent=1) + "\n")
    return 1 if any(r["concern"] for r in res.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
