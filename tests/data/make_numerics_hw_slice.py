"""Build ``numerics_hw_slice.npz``: a compact, checked-in slice of the H100 run1 capture.

    python tests/data/make_numerics_hw_slice.py /path/to/hwdata/run1

Picks a few warps from the batches that matter most for the sm_90 model (the paths the
first model got wrong -- m8n8k4 .f16 on the FMA pipe, fp8 m16n8k16, f64 NaN payloads --
and the special-value regimes of the other paths).  Within a batch, the warps where a
*refuted* alternative disagrees most with silicon are taken first, so the slice keeps
the evidence.  Only silicon outputs are stored; inputs are regenerated from the seeds.
"""
from __future__ import annotations

import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))

from compare_capture import load_run  # noqa: E402

from formal.catalog import parse  # noqa: E402
from formal.evaluate import ARCH_TARGETS, evaluate  # noqa: E402
from formal.vectors.regimes import random_inputs  # noqa: E402
from formal.numerics import MODELS  # noqa: E402
from formal.numerics.params import mod4_groups  # noqa: E402

S = MODELS["sm_90"]
#: (opcode substring, regimes, warps per batch, refuted alternative used to rank warps)
PLAN = [
    ("f64.f64.f64.f64", ("special", "bits"), 2, "nan"),
    ("mma.sync.aligned.m8n8k4.", ("special", "bits"), 4, "old"),         # .f16 (f64 is above)
    ("m16n8k16.row.col.f16.e", ("special", "finite"), 4, "old"),
    ("m16n8k16.row.col.f32.e", ("special", "finite"), 4, "old"),
    ("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2", ("special",), 4, "old"),
    ("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", ("special", "extreme"), 4, None),
    ("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", ("special", "extreme"), 4, None),
    ("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16", ("special",), 4, None),
    ("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", ("special", "bits"), 4, None),
    ("mma.sp::ordered_metadata.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", ("special",), 2, None),
    ("mma.sp.sync.aligned.m16n8k64.row.col.f32.e4m3.e4m3.f32", ("special",), 2, None),
    ("mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.s8.s32", ("extreme",), 4, "int"),
    ("mma.sync.aligned.m8n8k32.row.col.satfinite.s32.s4.s4.s32", ("extreme",), 4, "int"),
    ("m16n8k256.row.col.s32.b1.b1.s32.xor.popc", ("bits",), 2, None),
]


def _alternatives():
    old16 = ((32, mod4_groups(32)), (16, (tuple(range(16)),)))
    alts = {
        "old": S.with_path("f16.f32@m8n8k4", S.paths["f16.f32"]).with_path("f16.f16@m8n8k4", S.paths["f16.f16"])
        .with_path("f8.f32", S.paths["f8.f32"].but(groups=old16))
        .with_path("f8.f16", S.paths["f8.f16"].but(groups=old16)),
        "nan": S.replace_path("f64", nan_rule="canonical"),
        "int": S.replace_path("int", saturation="per_step"),
    }
    for k, m in alts.items():
        MODELS[f"_slice_{k}"] = m
        ARCH_TARGETS[f"_slice_{k}"] = ARCH_TARGETS["sm_90"]
    return alts


def main(run_dir: str, out: str = os.path.join(HERE, "numerics_hw_slice.npz")):
    _alternatives()
    man, outs = load_run(run_dir)
    meta, arrays = [], {}
    for case in man["cases"]:
        op = case["opcode"]
        plan = next((p for p in PLAN if p[0] in op and case["regime"] in p[1]), None)
        if plan is None:
            continue
        if "m16n8k16.row.col.f32.e" in plan[0] and ".f16." in op.split("row.col.")[1][:5]:
            continue
        form = parse(op)
        inp = random_inputs(form, case["warps"], case["regime"], case["seed"])
        got = outs[case["key"]]
        kw = dict(e=inp.get("e"), sel=case["sel"])
        d = evaluate(form, inp["a"], inp["b"], inp["c"], arch="sm_90", **kw)
        assert np.array_equal(d, got), op
        score = np.zeros(got.shape[0])
        if plan[3]:
            alt = evaluate(form, inp["a"], inp["b"], inp["c"], arch=f"_slice_{plan[3]}", **kw)
            score = (alt != got).sum(axis=(1, 2)).astype(float)
        idx = sorted(np.argsort(-score, kind="stable")[:plan[2]].tolist())
        key = f"b{len(meta)}"
        arrays[key] = got[idx]
        meta.append({"key": key, "opcode": op, "sel": case["sel"], "regime": case["regime"], "seed": case["seed"],
                     "batch_warps": case["warps"], "warps": idx, "digest": case["digest"],
                     "refuted_registers": int(score[idx].sum()) if plan[3] else None, "refuted_model": plan[3]})
    arrays["manifest"] = np.frombuffer(json.dumps({"gpu": man["gpu"], "seed": man["seed"], "numpy": man["numpy"],
                                                   "source": "hwdata/run1", "batches": meta}).encode(), np.uint8)
    np.savez_compressed(out, **arrays)
    print(f"{len(meta)} batches, {sum(len(m['warps']) for m in meta)} warps -> {out} ({os.path.getsize(out)} bytes)")


if __name__ == "__main__":
    main(sys.argv[1])
