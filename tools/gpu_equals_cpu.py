"""The evaluator's GPU path (CuPy) against its CPU path, bit for bit, on every sm_90 form.

    python3 tools/gpu_equals_cpu.py prepare DIR      # CPU only: coverage vectors of every form
    python3 tools/gpu_equals_cpu.py run DIR OUT.json [--warps 2048]   # needs CuPy and a GPU

``prepare`` writes DIR/vectors.npz: for every sm_90 register-level mma / mma.sp form and
selector and every wmma.mma form, the edge-case vectors of ``formal.vectors.generate``
(every coverage model, the mechanism and probe models included) with their expected
outputs (the CPU path).  ``run`` evaluates, on the GPU: those vectors, and ``--warps``
random warps of every case in every input regime of ``formal.vectors.regimes`` (the CPU path
computed in the same run), plus the H100 witness warp of tests/data; every register must be
equal.  The record (counts per family and regime, the first differing cases) is the
evidence file ``proofs/evidence/evaluator_gpu_cpu_h100.json``.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from formal.catalog import forms  # noqa: E402
from formal.evaluate import evaluate, evaluate_matrices  # noqa: E402
from formal.vectors.regimes import REGIMES, random_inputs  # noqa: E402

ROOT = os.path.join(os.path.dirname(__file__), "..")


def cases():
    out = []
    for f in forms("sm_90", "9.0"):
        if f.family in ("mma", "mma.sp") and not f.block_scale:
            for s in (f.selectors if f.is_sparse else [None]):
                out.append((f, s))
        elif f.family == "wmma.mma":
            out.append((f, None))
    return out


def wgmma_cases():
    """Every wgmma type combination (dense and sparse) at N = 8 and 256, as matrix-level cases."""
    out, seen = [], set()
    for f in forms("sm_90a", "9.0"):
        if f.family == "wgmma" and f.mnk[1] in (8, 256):
            key = (f.opcode.replace(".sp", ""), f.is_sparse, f.mnk)
            if (f.opcode, f.mnk) not in seen:
                seen.add((f.opcode, f.mnk))
                out.append(f)
    return out


def _key(f, s):
    return f.opcode + ("" if s is None else f" sel={s}")


def prepare(d: str):
    from formal.vectors import generate

    os.makedirs(d, exist_ok=True)
    arrays, index = {}, []
    t = time.time()
    for i, (f, s) in enumerate(cases()):
        if f.is_sparse and s not in (0,) and f.selectors and s != f.selectors[0]:
            pass
        try:
            vs = generate(f, seed=20261128)
        except Exception as e:  # noqa: BLE001 - recorded, the preparation goes on
            index.append({"key": _key(f, s), "error": f"{type(e).__name__}: {e}"[:200]})
            continue
        n = 0
        for c in vs.cases:
            if f.is_sparse and c.sel != s:
                continue
            for k, v in c.inputs.items():
                arrays[f"{i}_{n}_{k}"] = np.asarray(v)
            arrays[f"{i}_{n}_want"] = np.asarray(c.expected)
            arrays[f"{i}_{n}_sel"] = np.asarray(-1 if c.sel is None else c.sel)
            n += 1
        index.append({"key": _key(f, s), "i": i, "n": n, "digest": vs.digest})
        if i % 20 == 0:
            print(f"  {i} cases, {time.time() - t:.0f} s", flush=True)
    np.savez_compressed(os.path.join(d, "vectors.npz"), **arrays)
    json.dump(index, open(os.path.join(d, "vectors_index.json"), "w"), indent=0)
    print(f"prepared {sum(x.get('n', 0) for x in index)} vectors of {len(index)} cases")


def _eval(f, inp, sel, device=None):
    if f.family == "wmma.mma":
        return evaluate_matrices(f, inp["a"], inp["b"], inp["c"], device=device)
    return evaluate(f, inp["a"], inp["b"], inp["c"], e=inp.get("e"), sel=sel, device=device)


def _family(f):
    return f"{f.family} {f.atype}->{f.dtype}"


def run(d: str, out: str, warps: int):
    import cupy  # noqa: F401 - fail early without a GPU

    rec = {"what": "formal.evaluate(..., device='cuda') == the CPU path, bit for bit", "warps_per_case_regime": warps,
           "regimes": list(REGIMES), "rows": [], "vectors": {}, "first_differences": []}
    t0 = time.time()
    # 1. the H100 witness warp (tests/data/witness_sparse_tf32_sel1.npz)
    z = np.load(os.path.join(ROOT, "tests", "data", "witness_sparse_tf32_sel1.npz"))
    w_in = {k: z[k][None] for k in ("a", "b", "c", "e")}
    from formal.catalog import parse
    wf = parse(str(z["opcode"]))
    g = _eval(wf, w_in, int(z["sel"]), "cuda")[0]
    c = _eval(wf, w_in, int(z["sel"]))[0]
    rec["witness"] = {"opcode": str(z["opcode"]), "sel": int(z["sel"]), "gpu_equals_h100": bool(np.array_equal(g, z["want"])),
                      "cpu_equals_h100": bool(np.array_equal(c, z["want"]))}
    print("witness", rec["witness"], flush=True)
    # 2. random warps, every case x regime
    for i, (f, s) in enumerate(cases()):
        for r in REGIMES:
            try:
                T = warps if f.family != "wmma.mma" else max(64, warps // 8)
                if f.family == "wmma.mma":
                    from formal.vectors.draft import is_matrix_level  # noqa: F401
                    rng = np.random.default_rng([i, REGIMES.index(r)])
                    inp = _wmma_inputs(f, T, r, rng)
                else:
                    inp = random_inputs(f, T, r, seed=1000 * i + REGIMES.index(r))
                cpu = _eval(f, inp, s)
                gpu = _eval(f, inp, s, "cuda")
                bad = int(np.sum(np.asarray(cpu) != np.asarray(gpu)))
                rec["rows"].append({"key": _key(f, s), "family": _family(f), "regime": r, "T": T, "differing": bad})
                if bad and len(rec["first_differences"]) < 20:
                    rec["first_differences"].append({"key": _key(f, s), "regime": r, "count": bad})
            except Exception as e:  # noqa: BLE001
                rec["rows"].append({"key": _key(f, s), "family": _family(f), "regime": r,
                                    "error": f"{type(e).__name__}: {e}"[:200]})
        if i % 25 == 0:
            print(f"  {i} cases, {time.time() - t0:.0f} s", flush=True)
    # 2b. wgmma (matrix level: A [T,64,K] dense or structured-sparse, B, C), every regime
    from formal.evaluate import wgmma_matrices
    from formal.vectors.regimes import random_elements
    for i, f in enumerate(wgmma_cases()):
        for r in REGIMES:
            try:
                rng = np.random.default_rng([7, i, REGIMES.index(r)])
                T = max(8, warps // 64)
                M, N, K = f.mnk
                A = random_elements(rng, f.atype, T * M * K, r, "a").reshape(T, M, K)
                if f.is_sparse:       # keep 2 of every 4 (1 of 2 for tf32) so A is structured-sparse
                    w = 2 if f.atype == "tf32" else 4
                    keep = np.zeros((T, M, K), bool)
                    for j in range(0, K, w):
                        pick = rng.permuted(np.tile(np.arange(w), (T, M, 1)), axis=2)[:, :, : w // 2]
                        np.put_along_axis(keep[:, :, j:j + w], pick, True, axis=2)
                    A = np.where(keep, A, 0)
                B = random_elements(rng, f.btype, T * K * N, r, "b").reshape(T, K, N)
                C = random_elements(rng, f.dtype, T * M * N, r, "c").reshape(T, M, N)
                A, B, C = (x.astype({8: np.uint8, 16: np.uint16}.get(_bits(t), np.uint32))
                           for x, t in ((A, f.atype), (B, f.btype), (C, f.dtype)))
                cpu = wgmma_matrices(f, A, B, C)
                gpu = wgmma_matrices(f, A, B, C, device="cuda")
                bad = int(np.sum(np.asarray(cpu) != np.asarray(gpu)))
                rec["rows"].append({"key": f.opcode, "family": f"wgmma {f.atype}->{f.dtype}", "regime": r, "T": T,
                                    "differing": bad})
                if bad and len(rec["first_differences"]) < 20:
                    rec["first_differences"].append({"key": f.opcode, "regime": r, "count": bad})
            except Exception as e:  # noqa: BLE001
                rec["rows"].append({"key": f.opcode, "family": f"wgmma {f.atype}->{f.dtype}", "regime": r,
                                    "error": f"{type(e).__name__}: {e}"[:200]})
    # 3. the coverage vectors prepared on the CPU
    path = os.path.join(d, "vectors.npz")
    if os.path.exists(path):
        V = np.load(path)
        index = json.load(open(os.path.join(d, "vectors_index.json")))
        allc = cases()
        tot = badv = 0
        for ent in index:
            if "i" not in ent:
                continue
            f, s = allc[ent["i"]]
            groups: dict = {}               # vectors of one selector evaluate as one batch
            for n in range(ent["n"]):
                p = f"{ent['i']}_{n}_"
                groups.setdefault(int(V[p + "sel"]), []).append(p)
            for sel, ps in groups.items():
                names = [k for k in ("a", "b", "c", "e", "A", "B", "C") if ps[0] + k in V.files]
                inp = {k.lower(): np.stack([V[p + k] for p in ps]) for k in names}   # wmma vectors: A, B, C
                want = np.stack([V[p + "want"] for p in ps])
                gpu = np.asarray(_eval(f, inp, None if sel < 0 else sel, "cuda"))
                bad = ~np.all((gpu == want).reshape(len(ps), -1), axis=1)
                tot += len(ps)
                badv += int(bad.sum())
                for j in np.nonzero(bad)[0][:2]:
                    if len(rec["first_differences"]) < 40:
                        rec["first_differences"].append({"key": ent["key"], "vector": ps[j]})
        rec["vectors"] = {"cases": len(index), "vectors": tot, "differing": badv,
                          "sha256_npz": hashlib.sha256(open(path, "rb").read()).hexdigest()}
        print("vectors", rec["vectors"], flush=True)
    rows = [r for r in rec["rows"] if "differing" in r]
    rec["summary"] = {"case_regimes": len(rec["rows"]), "ran": len(rows),
                      "errors": len(rec["rows"]) - len(rows),
                      "differing_case_regimes": sum(1 for r in rows if r["differing"]),
                      "seconds": round(time.time() - t0, 1)}
    print("summary", rec["summary"], flush=True)
    json.dump(rec, open(out, "w"), indent=1)


def _bits(t):
    return {"f16": 16, "bf16": 16, "e4m3": 8, "e5m2": 8, "s8": 8, "u8": 8, "b1": 8}.get(t, 32)


def _wmma_inputs(f, T, regime, rng):
    from formal.vectors.regimes import random_elements

    M, N, K = f.mnk
    A = random_elements(rng, f.atype, T * M * K, regime, "a").reshape(T, M, K)
    B = random_elements(rng, f.btype, T * K * N, regime, "b").reshape(T, K, N)
    C = random_elements(rng, f.ctype, T * M * N, regime, "c").reshape(T, M, N)
    return {"a": A, "b": B, "c": C}


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["prepare", "run"])
    ap.add_argument("dir")
    ap.add_argument("out", nargs="?")
    ap.add_argument("--warps", type=int, default=2048)
    a = ap.parse_args()
    if a.what == "prepare":
        prepare(a.dir)
    else:
        run(a.dir, a.out, a.warps)
