"""Holdout check of `kernel run` / `kernel check` on sm_90a Triton kernels the corpus does not hold:
seeded random configurations (types, tiles, warps, K, pointer / TMA / persistent) built with
tools/make_hopper_corpus.py's own builders, run on the GPU, compared bit for bit.

    python3 tools/hopper_holdout.py build                 # CPU: .devdata/holdout (PTX + manifest)
    python3 tools/run_hopper_kernels.py --corpus .devdata/holdout --out OUT --seeds 0 1     # device
    python3 tools/hopper_holdout.py compare OUT           # CPU: proofs/evidence/kernels_hopper_holdout_h200.json
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))
DIR = ROOT / ".devdata" / "holdout"


def jobs(seed: int = 2026, count: int = 8) -> dict:
    import make_hopper_corpus as C
    rnd = random.Random(seed)
    J = {}
    for i in range(count):
        ta = rnd.choice(["f16", "bf16", "e4m3", "e5m2", "f32", "s8"])
        tc = {"s8": "s32"}.get(ta, rnd.choice(["f16", "f32"]))
        acc = "s32" if ta == "s8" else "f32"
        prec = "tf32" if ta == "f32" else "ieee"
        bm, bn = rnd.choice([64, 128]), rnd.choice([64, 128])
        bk = {"f32": 32, "e4m3": 128, "e5m2": 128, "s8": 64}.get(ta, 64)
        w = 8 if bm == 128 else rnd.choice([4, 8]) if bn == 128 else 4
        m, n, k = bm * rnd.choice([1, 2]), bn * rnd.choice([1, 2]), bk * rnd.choice([2, 4, 8])
        kind = rnd.choice(["ptr", "tma", "persist"])
        name = f"h{i}_{kind}_{ta}_{tc}_{bm}x{bn}x{bk}_w{w}_k{k}"     # drawn types (persist: f16 stands in for s8 / f32)
        if kind == "ptr":
            job = C.tri_ptr(ta, tc, acc, prec, bm, bn, bk, w, 3, m, n, k, bt=rnd.choice([False, True]),
                            masked=rnd.choice([False, True]))
        elif kind == "tma":
            job = C.tri_tma(ta, tc, acc, bm, bn, bk, w, 3, m, n, k, bkmajor=rnd.choice([False, True]))
        else:
            if ta in ("s8", "f32"):
                ta, tc = "f16", "f16"
            job = C.tri_persistent(ta, tc, bm, bn, bk, w, 3, 2 * m, 2 * n, k)
        J[name] = job
    return J


def build() -> int:
    import make_hopper_corpus as C
    DIR.mkdir(parents=True, exist_ok=True)
    man = {}
    for name, job in jobs().items():
        ptx, rec = C.build_triton(name, job)
        (DIR / f"{name}.ptx").write_text(ptx)
        rec.update(ptx=f"{name}.ptx", bytes=len(ptx.encode()), sha256=hashlib.sha256(ptx.encode()).hexdigest())
        man[name] = rec
        print(name, flush=True)
    (DIR / "manifest.json").write_text(json.dumps(man, indent=1) + "\n")
    return 0


def compare(outdir: str) -> int:
    import numpy as np

    import run_hopper_kernels as R
    from formal import kernel
    from formal.kernel import manifest
    man = json.loads((DIR / "manifest.json").read_text())
    rec = json.loads((Path(outdir) / "kernels_hopper_h100.json").read_text())
    z = {}
    for f in sorted(Path(outdir).glob("kernels_hopper_h100_outputs_*.npz")):
        z.update(dict(np.load(f)))
    res, bad_total, n_total = {}, 0, 0
    for name, meta in man.items():
        mod = kernel.parse_module((DIR / meta["ptx"]).read_text(), path=meta["ptx"])
        sp = manifest.load(meta)
        r = {"ptx_sha256": meta["sha256"], "what": meta.get("what", ""), "launches": []}
        for seed in (0, 1):
            inp = R.hopper_inputs(meta, seed)
            lr = next(x for x in rec["kernels"][name]["launches"] if x["seed"] == seed)
            same_in = {k: hashlib.sha256(np.ascontiguousarray(v).tobytes()).hexdigest() for k, v in inp.items()} \
                == lr["inputs_sha256"]
            out = kernel.run(mod, sp, inp)
            for key in lr["outputs_sha256"]:
                want = z[f"{name}/{seed}_{key}"]
                got = np.asarray(out[key]).reshape(want.shape).astype(want.dtype)
                bad = int((got != want).sum())
                bad_total += bad
                n_total += want.size
                r["launches"].append({"seed": seed, "buffer": key, "elements": int(want.size), "differing": bad,
                                      "inputs_equal": same_in, "witnesses": len(out.witnesses),
                                      "gpu_sha256": lr["outputs_sha256"][key]})
        t = time.time()
        r["check"] = kernel.check(mod, sp).verdict
        r["check_seconds"] = round(time.time() - t, 1)
        res[name] = r
        print(name, [(x["seed"], x["differing"]) for x in r["launches"]], r["check"], flush=True)
    ev = {"what": "kernel run / kernel check on sm_90a Triton kernels outside the corpus (tools/hopper_holdout.py, "
                  "seeded configurations), their outputs on the GPU (tools/run_hopper_kernels.py, seeds 0 and 1)",
          "device": rec.get("gpu", "NVIDIA H200"), "triton": next(iter(man.values())).get("compiler", ""),
          "kernels": res, "elements": n_total, "differing": bad_total,
          "proved": sum(r["check"] == "proved" for r in res.values())}
    (ROOT / "proofs" / "evidence" / "kernels_hopper_holdout_h200.json").write_text(json.dumps(ev, indent=1) + "\n")
    print(f"{len(res)} kernels, {n_total} elements, {bad_total} differing, {ev['proved']} proved")
    return 1 if bad_total else 0


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "build":
        sys.exit(build())
    if len(sys.argv) == 3 and sys.argv[1] == "compare":
        sys.exit(compare(sys.argv[2]))
    sys.exit(__doc__)
