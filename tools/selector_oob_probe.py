"""Out-of-range sparsity selectors on silicon, each case in a CUDA context of its own.

Erratum S-SP-SELECTOR-OOB-TRAP claims what the H100 does with the sparsity selectors ptxas
accepts for mma.sp{,::ordered_metadata} m16n8k32 .f32.f16.f16.f32 although the text makes them
undefined (2 and 3, erratum E-SP-SEL-K32-F16F32).  run3 recorded only the first case (mma.sp,
selector 2: cudaErrorIllegalInstruction): a trap leaves the CUDA context unusable, so the other
three cases of the same process could not run.  This script runs each of the four cases in a
child process of its own (a fresh context), with random legal inputs, and records per case:
trapped or not (and the error), and if not, how many warps equal the evaluator's result under
each legal selector (0 and 1).  Undefined behaviour: recorded, never modelled.

Usage (repo root, a CUDA GPU, CuPy installed -- ``pip install -e .[gpu]``):

    PYTHONPATH=. python3 tools/selector_oob_probe.py OUT.json

Writes OUT.json in the shape of proofs/evidence/selector_oob_h100.json ("forms" lists every case
that ran, "results" one row per case), ready to replace it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

CASES = [("mma.sp.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32", 2),
         ("mma.sp.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32", 3),
         ("mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32", 2),
         ("mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32", 3)]
WARPS = 256


def run_case(opcode: str, sel: int) -> dict:
    """Child: one case, one context."""
    from formal.catalog import parse
    from formal.catalog.text import Immediates
    from formal.evaluate import evaluate
    from formal.hw.kernels import Case
    from formal.hw.runner import GPU
    from formal.vectors.regimes import random_inputs

    row = {"opcode": opcode, "sel": sel, "warps": WARPS}
    gpu = GPU()
    row["gpu"] = gpu.info.to_dict()
    f = parse(opcode)
    inp = random_inputs(f, WARPS, "normal", 1000 + sel)
    try:
        got = gpu.run_cases([Case(f, Immediates(sel=sel))], [inp])[0]
    except Exception as e:          # the trap is the observation
        row.update(trapped=True, error=f"{type(e).__name__}: {e}")
        return row
    row["trapped"] = False
    for legal in (0, 1):
        exp = evaluate(f, inp["a"], inp["b"], inp["c"], e=inp["e"], sel=legal)
        row[f"matches_sel_{legal}"] = int((exp == got).all(axis=(1, 2)).sum())
    return row


def main(out: str) -> int:
    rows = []
    for opcode, sel in CASES:
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", opcode, str(sel)],
                           capture_output=True, text=True, timeout=600)
        try:
            row = json.loads(r.stdout.strip().splitlines()[-1])
        except (IndexError, json.JSONDecodeError):
            row = {"opcode": opcode, "sel": sel, "trapped": None, "error": f"child rc={r.returncode}: {r.stderr[-800:]}"}
        rows.append(row)
        print(json.dumps(row), flush=True)
    gpu = next((r["gpu"] for r in rows if "gpu" in r), {})
    doc = {"kind": "ptx-formal out-of-range selector observation", "run": "selector_oob_probe",
           "date": time.strftime("%Y-%m-%d"), "gpu": gpu,
           "forms": [f"{r['opcode']} (sel {r['sel']})" for r in rows if r.get("trapped") is not None],
           "observation": "; ".join(f"{r['opcode'].split('.sync')[0]} sel {r['sel']}: "
                                    + ("trap: " + r.get("error", "") if r.get("trapped") else
                                       "no trap" if r.get("trapped") is False else "did not run")
                                    for r in rows),
           "note": "each case in a CUDA context of its own (tools/selector_oob_probe.py); ptxas accepts selectors 2 "
                   "and 3 for these forms (erratum E-SP-SEL-K32-F16F32), the text makes them undefined",
           "results": [{k: v for k, v in r.items() if k != "gpu"} for r in rows]}
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--one":
        print(json.dumps(run_case(sys.argv[2], int(sys.argv[3])), default=str))
        sys.exit(0)
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
