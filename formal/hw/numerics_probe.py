"""Run the numerics probes (``formal.numerics.probes.PROBES``) on a GPU and decide them.

Each probe is one warp of one register-level ``mma.sync`` form: the probe's matrices
(A row 0, B column 0 and C[0][0] set, everything else 0) are packed into fragment
registers with ``formal.layout.pack``, run through the lead's harness
(``formal.hw.kernels.Case``, ``formal.hw.runner.GPU().run_cases``), unpacked with
``formal.layout.unpack`` and judged with ``formal.numerics.fit.decide``: which of the
probe's hypotheses predicted the observed D[0][0], and whether every other output
equals the sm_90 model's expectation.  ``m8n8k4`` .f16 forms compute four independent
products per warp; the probe is placed in all four and they must agree.

The probes cover what run1's random inputs could not settle (signs of exact zeros,
minexp floors, block boundaries, tf32 input handling, ``.satfinite``, the f64 chain
order and NaN rule, the first step of the m8n8k4 FMA-pipe emulation, ...).  Probes
whose form does not run on sm_90 are listed as skipped.

Running (CUDA GPU + CuPy; about 10 s: one module of ~90 one-warp kernels, assembled by
ptxas once)::

    python -m formal.hw.numerics_probe OUT_DIR            # writes OUT_DIR/numerics_probes.json
    python -m formal.hw.numerics_probe OUT_DIR --simulate # no GPU: the sm_90 model plays the GPU

Never aborts on one probe: a failing module is retried probe by probe, and every
error is recorded in that probe's entry.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from typing import Any

import numpy as np

from ..catalog import Form, legality, parse
from .kernels import Case

TARGET = "sm_90a"
PTX = "8.7"


def probe_opcode(probe) -> str:
    """The sm_90 register-level mma opcode that runs ``probe`` (row.col; .satfinite,
    .rnd, .bitop.popc as the probe's form asks)."""
    f = probe.form
    parts = ["mma.sync.aligned", f["shape"], "row.col"]
    if f.get("satfinite"):
        parts.append("satfinite")
    parts += [f["dtype"], f["atype"], f["btype"], f["ctype"]]
    if f.get("bitop"):
        parts += [f["bitop"], "popc"]
    if f.get("rounding"):
        parts.append(f["rounding"])
    return ".".join(parts)


def probe_form(probe) -> Form:
    """Parsed form, checked against the probe's types and sm_90 legality (ValueError if not)."""
    form = parse(probe_opcode(probe))
    f = probe.form
    got = (form.atype, form.btype, form.ctype, form.dtype, form.mnk)
    want = (f["atype"], f["btype"], f["ctype"], f["dtype"], probe.mnk)
    if tuple(str(x).lstrip(".") if isinstance(x, str) else x for x in got) != want:
        raise ValueError(f"{probe.id}: opcode {form.opcode} has types {got}, probe wants {want}")
    res = legality(form, TARGET, PTX)
    if not res.ok:
        raise ValueError(f"{probe.id}: {form.opcode} does not run on {TARGET} ({res.reasons[0].message})")
    return form


def probe_inputs(probe, form: Form) -> dict[str, np.ndarray]:
    """Register inputs {'a','b','c'}: [1, 32, n] each (matrices from ``probe.matrices()``)."""
    from .. import layout

    A, B, C = probe.matrices()
    zero_a = np.zeros((1, 32, form.operands["a"].count), np.uint64 if form.operands["a"].reg_bits == 64 else np.uint32)
    shape_a = layout.unpack(form, "a", zero_a).shape
    if len(shape_a) == 4:   # several independent products per warp (m8n8k4 .f16): the probe in each
        A, B, C = (np.broadcast_to(x, (shape_a[1],) + x.shape) for x in (A, B, C))
    return {"a": layout.pack(form, "a", A[None]), "b": layout.pack(form, "b", B[None]),
            "c": layout.pack(form, "c", C[None])}


def executable_probes(probes=None):
    """([(probe, form)], [(probe id, reason)]): the probes that run on sm_90, and the rest."""
    from ..numerics.probes import PROBES

    ok, skipped = [], []
    for p in (PROBES if probes is None else probes):
        try:
            ok.append((p, probe_form(p)))
        except Exception as e:  # unknown opcode, illegal on sm_90: reported, not fatal
            skipped.append((p.id, f"{type(e).__name__}: {e}"))
    return ok, skipped


def _unpack_d(form: Form, d: np.ndarray) -> tuple[np.ndarray, bool]:
    """D registers [1, 32, n] -> (D [M, N] of product 0, all products equal)."""
    from .. import layout

    D = layout.unpack(form, "d", d)[0]
    if D.ndim == 3:
        return D[0], bool(all(np.array_equal(D[0], D[i]) for i in range(1, D.shape[0])))
    return D, True


def decide_one(probe, form: Form, d_regs: np.ndarray) -> dict[str, Any]:
    """Verdict record of one probe from its captured D registers."""
    from ..numerics.fit import decide

    D, same = _unpack_d(form, np.asarray(d_regs))
    (v,) = decide({probe.id: D})
    width = 16 if D.dtype == np.uint64 else 8 if D.dtype == np.uint32 else 4
    return {"id": probe.id, "feature": probe.feature, "opcode": form.opcode,
            "observed": f"{v.observed:#0{width + 2}x}", "matching": v.survivors,
            "model_ok": v.model_ok,
            "other_outputs_ok": "<other outputs differ>" not in v.predictions,
            "products_agree": same,
            "predictions": {k: (f"{b:#0{width + 2}x}" if b >= 0 else None) for k, b in v.predictions.items()}}


def simulate(cases: list[tuple[Any, Form]]) -> list[np.ndarray]:
    """No GPU: the sm_90 model's registers for every probe (a self-check of the pipeline)."""
    from ..evaluate import evaluate

    return [evaluate(f, **{k: v for k, v in probe_inputs(p, f).items()}, arch="sm_90") for p, f in cases]


def _run_gpu(gpu, cases: list[tuple[Any, Form]], errors: dict[str, str]) -> dict[str, np.ndarray]:
    """Run all probes in one module; on failure retry one by one (errors recorded per probe)."""
    inputs = {}
    for p, f in cases:
        try:
            inputs[p.id] = probe_inputs(p, f)
        except Exception as e:
            errors[p.id] = f"inputs: {type(e).__name__}: {e}"
    todo = [(p, f) for p, f in cases if p.id in inputs]
    try:
        outs = gpu.run_cases([Case(f) for _, f in todo], [inputs[p.id] for p, _ in todo], ptx=PTX, target=TARGET)
        return {p.id: o for (p, _), o in zip(todo, outs)}
    except Exception as e:  # one bad kernel must not cost the others: run them singly
        first = f"{type(e).__name__}: {e}"
    res = {}
    for p, f in todo:
        try:
            res[p.id] = gpu.run_cases([Case(f)], [inputs[p.id]], ptx=PTX, target=TARGET)[0]
        except Exception as e:
            errors[p.id] = f"run: {type(e).__name__}: {e} (batched run failed first: {first[:200]})"
    return res


def run_numerics_probes(out_dir: str, gpu=None, probes=None, simulate_only: bool = False) -> dict:
    """Run every sm_90-executable probe, decide it, write ``out_dir/numerics_probes.json``.

    ``gpu``: a ``formal.hw.runner.GPU`` (created when None); ``simulate_only``: the sm_90
    model plays the GPU.  Returns the report dict (also written as JSON).
    """
    t0 = time.time()
    os.makedirs(out_dir, exist_ok=True)
    cases, skipped = executable_probes(probes)
    errors: dict[str, str] = {}
    device: dict[str, Any] = {}
    if simulate_only:
        outs = {p.id: o for (p, _), o in zip(cases, simulate(cases))}
        device = {"name": "simulated (sm_90 model)"}
    else:
        try:
            if gpu is None:
                from .runner import GPU
                gpu = GPU()
            device = gpu.info.to_dict()
            outs = _run_gpu(gpu, cases, errors)
        except Exception as e:  # no GPU at all: report it, still write the file
            outs = {}
            device = {"error": f"{type(e).__name__}: {e}"}
    results = []
    for p, f in cases:
        if p.id in errors or p.id not in outs:
            results.append({"id": p.id, "feature": p.feature, "opcode": f.opcode,
                            "error": errors.get(p.id, "no output")})
            continue
        try:
            rec = decide_one(p, f, outs[p.id])
            rec["d_registers"] = [[f"{int(x):x}" for x in lane] for lane in np.asarray(outs[p.id])[0]]
            results.append(rec)
        except Exception as e:
            results.append({"id": p.id, "feature": p.feature, "opcode": f.opcode,
                            "error": f"decode: {type(e).__name__}: {e}", "trace": traceback.format_exc()[-800:]})
    decided = [r for r in results if "error" not in r]
    report = {
        "device": device, "target": TARGET, "ptx": PTX, "seconds": round(time.time() - t0, 2),
        "probes": len(results), "decided": len(decided),
        "model_ok": sum(r["model_ok"] and r["other_outputs_ok"] and r["products_agree"] for r in decided),
        "refine": [r["id"] for r in decided
                   if not (r["model_ok"] and r["other_outputs_ok"] and r["products_agree"])],
        "errors": [r["id"] for r in results if "error" in r],
        "skipped": [{"id": i, "reason": why} for i, why in skipped],
        "results": results,
    }
    with open(os.path.join(out_dir, "numerics_probes.json"), "w") as fh:
        json.dump(report, fh, indent=1)
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m formal.hw.numerics_probe",
                                 description="Run the sm_90 numerics probes on a GPU and decide their hypotheses.")
    ap.add_argument("out_dir")
    ap.add_argument("--simulate", action="store_true", help="no GPU: the sm_90 model plays the hardware")
    args = ap.parse_args(argv)
    rep = run_numerics_probes(args.out_dir, simulate_only=args.simulate)
    print(f"{rep['decided']}/{rep['probes']} probes decided in {rep['seconds']} s on "
          f"{rep['device'].get('name', rep['device'])}; sm_90 model confirmed by {rep['model_ok']}")
    for r in rep["results"]:
        if "error" in r:
            print(f"  ERROR {r['id']}: {r['error'][:200]}")
        elif r["id"] in rep["refine"]:
            print(f"  REFINE {r['id']} ({r['feature']}): observed {r['observed']}, matching {r['matching']}"
                  + ("" if r["other_outputs_ok"] else "; other outputs differ")
                  + ("" if r["products_agree"] else "; products disagree"))
    print(f"written: {os.path.join(args.out_dir, 'numerics_probes.json')}")
    return 0 if not rep["errors"] and "error" not in rep["device"] else 1


if __name__ == "__main__":
    sys.exit(main())
