"""Grade MMA-Sim's wgmma model (arXiv 2511.10909, github.com/microsoft/MMA-Sim) per form against
the H200's recorded wgmma outputs.

    python3 tools/mmasim_wgmma_grade.py MMASIM_CHECKOUT --python VENV/bin/python [-o FILE]

MMASIM_CHECKOUT is a checkout of MMA-Sim (not part of this repository: nothing of it is copied
here); ``--python`` an interpreter with PyTorch, which MMA-Sim needs (this tool itself needs
only the repo's dependencies).  Inputs: the random numerics probes of the checked-in silicon
slice (tests/data/wgmma_silicon_slice.npz: runs "nu" and "vnu", seven regimes, four CTAs
each, every dense wgmma type combination MMA-Sim models, N = 8).  A CTA run with scale-d = 0
is given to MMA-Sim with C = +0 (what the H200 did, docs/wgmma.md); MMA-Sim has no imm-scale,
scale-d, sparse, integer or b1 wgmma, so those probes are not graded.

MMA-Sim runs in a child process (``mmasim.simulator.nv_ptx.wgmma("Hopper", QUALIFIER)`` on
tensors viewed from the raw encodings).  Per form: elements compared, differing, the first
differing element (its CTA, row, column, inputs, the silicon's, the evaluator's and MMA-Sim's
D), that element reduced to the fewest non-zero terms on which MMA-Sim still differs from the
evaluator (the H200-exact model; the reduced input itself never ran on silicon), and the known
variants (formal.vectors' mechanisms) that reproduce MMA-Sim's value.  Writes
proofs/evidence/mmasim_wgmma_grading.json (digests of every array compared).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))

from formal.catalog import parse  # noqa: E402
from formal.hw import wgmma_probe as wp  # noqa: E402
from formal.numerics import mma_matrices  # noqa: E402

SLICE = os.path.join(ROOT, "tests", "data", "wgmma_silicon_slice.npz")
OUT = os.path.join(ROOT, "proofs", "evidence", "mmasim_wgmma_grading.json")
MMASIM_TYPES = {"f16", "bf16", "tf32", "e4m3", "e5m2"}

# The child: MMA-Sim on raw encodings (requests: "IN_NPZ OUT_NPZ" lines; keys q<i>, A<i>, B<i>, C<i>).
CHILD = r'''
import sys
import numpy as np
import torch
sys.path.insert(0, sys.argv[1])
from mmasim.simulator.nv_ptx import wgmma
TT = {"f16": (np.uint16, np.int16, torch.float16), "bf16": (np.uint16, np.int16, torch.bfloat16),
      "tf32": (np.uint32, np.int32, torch.float32), "f32": (np.uint32, np.int32, torch.float32),
      "e4m3": (np.uint8, np.uint8, torch.float8_e4m3fn), "e5m2": (np.uint8, np.uint8, torch.float8_e5m2)}
def tens(x, t):
    u, s, tt = TT[t]
    return torch.from_numpy(np.ascontiguousarray(x.astype(u).view(s))).view(tt)
sims = {}
for line in sys.stdin:
    src, dst = line.split()
    z = np.load(src)
    out = {}
    for i in range(len([k for k in z.files if k.startswith("q")])):
        q = str(z[f"q{i}"])
        _, d, a, b = q.split(".")
        sim = sims.setdefault(q, wgmma("Hopper", q))
        A, B, C = z[f"A{i}"], z[f"B{i}"], z[f"C{i}"]
        D = [sim(tens(A[t], a), tens(B[t], b), tens(C[t], d)) for t in range(A.shape[0])]
        out[f"D{i}"] = np.stack([x.contiguous().view(torch.int16 if d == "f16" else torch.int32).numpy()
                                 for x in D]).view(np.uint16 if d == "f16" else np.uint32)
    np.savez(dst, **out)
    print("done", flush=True)
'''


class MMASim:
    """MMA-Sim in a child process."""

    def __init__(self, checkout: str, python: str):
        self.dir = tempfile.mkdtemp(prefix="mmasim_")
        self.n = 0
        self.p = subprocess.Popen([python, "-c", CHILD, checkout], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True)

    def run(self, batches):
        """[(qualifier, A [T,64,K], B [T,K,N], C [T,64,N])] -> [D [T,64,N]] (raw encodings)."""
        self.n += 1
        src, dst = (os.path.join(self.dir, f"{s}{self.n}.npz") for s in ("in", "out"))
        arrays = {}
        for i, (q, A, B, C) in enumerate(batches):
            arrays.update({f"q{i}": np.array(q), f"A{i}": A, f"B{i}": B, f"C{i}": C})
        np.savez(src, **arrays)
        self.p.stdin.write(f"{src} {dst}\n")
        self.p.stdin.flush()
        if self.p.stdout.readline().strip() != "done":
            raise RuntimeError("MMA-Sim's child process failed (see its stderr)")
        z = np.load(dst)
        return [z[f"D{i}"] for i in range(len(batches))]

    def close(self):
        self.p.stdin.close()
        self.p.wait()


def digest(*arrays) -> str:
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def opcode(k) -> str:
    return f"wgmma.mma_async.sync.aligned.m64n{k.n}k{k.k}.{k.dtype}.{k.atype}.{k.btype}"


def qualifier(k) -> str:
    return f"m64n{k.n}k{k.k}.{k.dtype}.{k.atype}.{k.btype}"


def hexes(x, bits):
    return [f"0x{int(v):0{(bits + 3) // 4}x}" for v in np.asarray(x).ravel()]


def reference(form, A, B, C):
    f = form
    return mma_matrices(A, B, C, atype=f.atype, btype=f.btype, ctype=f.c_type, dtype=f.dtype, arch="sm_90",
                        shape=f.mnk)


def causes(form, a, b, c, got) -> list[str]:
    """Known variants (formal.vectors' mechanisms and other architecture models) whose value
    on this element is MMA-Sim's."""
    from formal.vectors.distinguish import eval_terms
    from formal.vectors.witness import _candidates

    out = []
    for label, what, model in _candidates(form, "sm_90"):
        try:
            v = int(eval_terms(form, model, a[None], b[None], np.array([c], np.uint64))[0])
        except Exception:
            continue
        if v == int(got):
            out.append(f"{label}: {what}")
    return out


def reduce(sim, form, q, a, b, c):
    """Greedy: zero one term (its a and b: a zero a alone still takes part in MMA-Sim's
    alignment) or c while MMA-Sim still differs from the evaluator on the element.  Each round
    tries every removal in one call: candidate i is element (i % 8, i % 8) of CTA i // 8."""
    K, N = form.mnk[2], form.mnk[1]
    cur = (a.copy(), b.copy(), int(c))
    while True:
        cands = []
        for k in np.flatnonzero((cur[0] != 0) | (cur[1] != 0)):
            x, y = cur[0].copy(), cur[1].copy()
            x[k] = y[k] = 0
            cands.append((x, y, cur[2]))
        if cur[2]:
            cands.append((cur[0], cur[1], 0))
        if not cands:
            return cur
        T = (len(cands) + N - 1) // N
        A = np.zeros((T, 64, K), np.uint64)
        B = np.zeros((T, K, N), np.uint64)
        C = np.zeros((T, 64, N), np.uint64)
        for i, (x, y, z) in enumerate(cands):
            t, j = divmod(i, N)
            A[t, j], B[t, :, j], C[t, j, j] = x, y, z
        d, ref = sim.run([(q, A, B, C)])[0], reference(form, A, B, C)
        ok = [i for i in range(len(cands)) if int(d[i // N, i % N, i % N]) != int(ref[i // N, i % N, i % N])]
        if not ok:
            return cur
        cur = cands[ok[0]]


def audit_vectors(sim, form, q) -> dict:
    """formal.vectors' audit of MMA-Sim on the form's coverage vectors (every mechanism's
    reduced inputs, 8 random warps): the expected values are the evaluator's, not silicon's."""
    from formal.vectors import generate
    from formal.vectors.audit import audit

    def model(opcode, A, B, C):
        return sim.run([(q, np.asarray(A, np.uint64), np.asarray(B, np.uint64), np.asarray(C, np.uint64))])[0]

    model.__name__ = "mmasim"
    vs = generate(form, count=8, level="matrix")
    r = audit(form, model, vectors=vs, max_witnesses=3)
    out = {"vectors_digest": r.digest, "cases": len(vs.cases),
           "elements": int(sum(np.asarray(c.expected).size for c in vs.cases)),
           "failed_elements": int(r.failed_elements or 0),
           "causes": [{"cause": c["cause"], "what": c["what"], "elements": c["elements"]} for c in r.causes]}
    if r.witnesses:
        w = r.witnesses[0]
        out["witness"] = {"case": w.case, "row": w.row, "col": w.col, "cause": w.cause, "expected": w.expected,
                          "got": w.got, "reduced": w.reduced}
    return out


def grade(checkout: str, python: str) -> dict:
    import wgmma_silicon_checks as chk

    outs = dict(np.load(SLICE))
    probes = [p for p in wp.all_probes(list(wp.GROUPS))
              if p.key in outs and p.info["kind"] == "random" and p.kernel.atype in MMASIM_TYPES]
    sim = MMASim(checkout, python)
    forms: dict[str, dict] = {}
    try:
        for p in probes:
            k = p.kernel
            form = parse(opcode(k))
            A, B, C = chk.operand_matrices(p)
            fl = p.inputs["flags"].astype(bool)
            C = np.where(fl[:, None, None], C, np.uint64(0))        # scale-d = 0: c = +0 on the H200
            T = min(len(outs[p.key]), A.shape[0])
            A, B, C = A[:T], B[:T], C[:T]
            sil = chk.observed_d(p, outs[p.key][:T])
            ref = chk.evaluated(p, T)
            got = sim.run([(qualifier(k), A, B, C)])[0]
            e = forms.setdefault(form.opcode, {"form": form.opcode, "qualifier": qualifier(k), "probes": [],
                                               "elements": 0, "differing": 0, "evaluator_differs_from_silicon": 0,
                                               "differing_by_regime": {}, "_h": hashlib.sha256()})
            e["probes"].append(p.key)
            e["elements"] += int(sil.size)
            diff = got.astype(np.uint64) != sil.astype(np.uint64)
            e["differing"] += int(diff.sum())
            e["evaluator_differs_from_silicon"] += int((ref.astype(np.uint64) != sil.astype(np.uint64)).sum())
            reg = p.key.rsplit(".", 1)[1]
            e["differing_by_regime"][reg] = e["differing_by_regime"].get(reg, 0) + int(diff.sum())
            for x in (A, B, C, sil, got):
                e["_h"].update(np.ascontiguousarray(x).tobytes())
            if diff.any() and "first_witness" not in e:
                t, m, n = (int(v) for v in np.argwhere(diff)[0])
                ab, db = wp.EBITS[k.atype], 16 if k.dtype == "f16" else 32
                a, b, c = A[t, m].copy(), B[t, :, n].copy(), C[t, m, n]
                w = {"probe": p.key, "cta": t, "row": m, "col": n, "a_row": hexes(a, ab), "b_col": hexes(b, ab),
                     "c": hexes(c, db)[0], "silicon": hexes(sil[t, m, n], db)[0],
                     "evaluator": hexes(ref[t, m, n], db)[0], "mmasim": hexes(got[t, m, n], db)[0],
                     "reproduced_by": causes(form, a, b, int(c), got[t, m, n])}
                ra, rb, rc = reduce(sim, form, qualifier(k), a, b, int(c))
                A1 = np.zeros((1, 64, k.k), np.uint64)
                B1 = np.zeros((1, k.k, k.n), np.uint64)
                C1 = np.zeros((1, 64, k.n), np.uint64)
                A1[0, 0], B1[0, :, 0], C1[0, 0, 0] = ra, rb, rc
                rg = sim.run([(qualifier(k), A1, B1, C1)])[0][0, 0, 0]
                live = [int(i) for i in np.flatnonzero((ra != 0) | (rb != 0))]
                w["reduced"] = {"terms": {str(i): [hexes(ra[i], ab)[0], hexes(rb[i], ab)[0]] for i in live},
                                "c": hexes(rc, db)[0], "evaluator": hexes(reference(form, A1, B1, C1)[0, 0, 0], db)[0],
                                "mmasim": hexes(rg, db)[0],
                                "reproduced_by": causes(form, ra, rb, int(rc), rg)}
                e["first_witness"] = w
        for e in forms.values():
            e["sha256_inputs_silicon_mmasim"] = e.pop("_h").hexdigest()
            e["vectors"] = audit_vectors(sim, parse(e["form"]), e["qualifier"])
    finally:
        sim.close()
    commit = subprocess.run(["git", "-C", checkout, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    return {"kind": "mmasim-wgmma-grading",
            "mmasim": {"repo": "https://github.com/microsoft/MMA-Sim", "commit": commit, "paper": "arXiv:2511.10909",
                       "entry": "mmasim.simulator.nv_ptx.wgmma('Hopper', 'm64nNkK.D.A.B')(A, B, C)"},
            "silicon": {"record": "proofs/evidence/wgmma_silicon.json", "slice": "tests/data/wgmma_silicon_slice.npz",
                        "slice_sha256": hashlib.sha256(open(SLICE, "rb").read()).hexdigest(),
                        "gpu": "NVIDIA H200 (sm_90), 2026-11-28"},
            "translation": "scale-d = 0 CTAs are given C = +0; MMA-Sim has no imm-scale, scale-d, .sp, integer or b1 "
                           "wgmma, so those probes are not graded",
            "tool": "tools/mmasim_wgmma_grade.py",
            "forms": sorted(forms.values(), key=lambda e: e["form"])}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkout", help="a checkout of MMA-Sim")
    ap.add_argument("--python", default=sys.executable, help="an interpreter with PyTorch (default: this one)")
    ap.add_argument("-o", "--output", default=OUT)
    a = ap.parse_args(argv)
    if not os.path.isdir(os.path.join(a.checkout, "mmasim")):
        print(f"mmasim_wgmma_grade: error: {a.checkout} is not an MMA-Sim checkout (no mmasim/)", file=sys.stderr)
        return 2
    rec = grade(a.checkout, a.python)
    with open(a.output, "w") as f:
        json.dump(rec, f, indent=1)
        f.write("\n")
    for e in rec["forms"]:
        print(f"{e['form']:55s} {e['elements']:7d} {e['differing']:6d}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
