"""Running vector sets through the hardware harness (GPU side of ``formal.vectors``).

``vectors_as_inputs(vs)`` regroups a register-level vector set into the harness's batch
convention: one :class:`formal.hw.kernels.Case` per selector with ``{'a','b','c'[,'e']}``
arrays ``[T, 32, n]`` and the expected ``d`` ``[T, 32, nd]``.

``prepare(forms, vectors_dir)`` generates the vector files on a CPU machine (Z3 is only
needed there); ``run_vectors_on_gpu(forms, out_dir, vectors_dir=...)`` runs every case of
every form in ONE kernel module on the GPU (CuPy) and compares with the expected results
stored in the files, so the GPU machine needs numpy and CuPy but neither Z3 nor the
evaluator.  Without a ``vectors_dir`` (or for a form missing there) it generates on the
spot.  It writes ``out_dir/summary.json`` and returns the same dictionary::

    {"kind": "ptx-formal vectors on GPU", "device": {...}, "arch": "sm_90",
     "forms": [{"opcode": ..., "vectors": 96, "mismatches": 0, "first_mismatch": null,
                "failed_points": []}, ...],
     "total_vectors": N, "total_mismatches": 0, "errors": [...]}
"""

from __future__ import annotations

import json
import os
import time
from typing import Callable, Iterable

import numpy as np

from ..catalog import Form, parse
from ..vectors.build import VectorSet


def file_name(opcode: str) -> str:
    return opcode.replace("::", "-") + ".npz"


def vectors_as_inputs(vs: VectorSet) -> list[dict]:
    """Register-level vector set -> [{'case', 'sel', 'ids', 'inputs', 'expected'}], one per selector."""
    from .kernels import Case as HwCase
    from ..catalog.text import Immediates

    if vs.level != "regs":
        raise ValueError(f"{vs.opcode}: matrix-level vectors do not run through the register-level harness")
    form = vs.form
    groups: dict = {}
    for c in vs.cases:
        groups.setdefault(c.sel, []).append(c)
    out = []
    for sel, cs in groups.items():
        inputs = {op: np.stack([np.asarray(c.inputs[op]) for c in cs]) for op in ("a", "b", "c", "e")
                  if op in cs[0].inputs}
        for op, x in inputs.items():
            want = np.uint64 if op != "e" and form.operands[op].reg_bits == 64 else np.uint32
            inputs[op] = x.astype(want)
        out.append({"case": HwCase(form, Immediates(sel=sel if sel is not None else 0)), "sel": sel,
                    "ids": [c.id for c in cs], "inputs": inputs,
                    "expected": np.stack([np.asarray(c.expected) for c in cs])})
    return out


def default_forms(target: str = "sm_90", ptx: str = "9.0") -> list[Form]:
    """Every register-level mma / mma.sp form of ``target`` (the forms hw-check runs)."""
    from .check import all_cases

    seen: dict[str, Form] = {}
    for c in all_cases(target, ptx):
        seen.setdefault(c.form.opcode, c.form)
    return list(seen.values())


def _forms(forms) -> list[Form]:
    if forms is None:
        return default_forms()
    return [f if isinstance(f, Form) else parse(f) for f in forms]


def prepare(forms: Iterable | None, vectors_dir: str, arch: str = "sm_90", count: int = 48, seed: int = 0,
            progress: Callable[[str], None] | None = None, coverage: Iterable[str] | None = None) -> list[str]:
    """Generate and save (npz) the vectors of every form; returns the paths written.
    ``coverage``: the coverage models to build (default: every applicable one, as ``generate``)."""
    from ..vectors.fileio import write
    from ..vectors.build import generate

    os.makedirs(vectors_dir, exist_ok=True)
    paths = []
    t0 = time.time()
    fs = _forms(forms)
    for i, f in enumerate(fs):
        p = os.path.join(vectors_dir, file_name(f.opcode))
        vs = generate(f, arch=arch, count=count, seed=seed, coverage=coverage)
        write(vs, p, "npz")
        paths.append(p)
        if progress:
            progress(f"[{time.time() - t0:7.1f}s] {i + 1}/{len(fs)} {f.opcode}: {len(vs)} vectors")
    return paths


def _load_or_generate(f: Form, vectors_dir: str | None, arch: str, count: int, seed: int) -> VectorSet:
    from ..vectors.fileio import read

    if vectors_dir:
        p = os.path.join(vectors_dir, file_name(f.opcode))
        if os.path.isfile(p):
            vs = read(p)
            if vs.opcode != f.opcode:
                raise ValueError(f"{p} holds vectors for {vs.opcode}")
            return vs
    from ..vectors.build import generate

    return generate(f, arch=arch, count=count, seed=seed)


def _ptx_for(fs: list[Form]) -> str:
    from ..catalog import min_ptx

    best = (8, 7)
    for f in fs:
        a, _, b = min_ptx(f).partition(".")
        best = max(best, (int(a), int(b or 0)))
    return f"{best[0]}.{best[1]}"


def run_vectors_on_gpu(forms: Iterable | None = None, out_dir: str = "vectors_gpu", vectors_dir: str | None = None,
                       arch: str = "sm_90", count: int = 48, seed: int = 0, gpu=None,
                       save_results: bool = False, progress: Callable[[str], None] | None = None) -> dict:
    """Run the vectors of every form on the GPU in one batch; returns (and writes) a summary.

    ``forms``: opcodes or Forms (default: every register-level sm_90 mma/mma.sp form).
    ``save_results``: also write each form's device outputs as a result file
    (``out_dir/results/<opcode>.hex``) for ``ptx-formal verify``.
    """
    from .runner import GPU
    from ..vectors.fileio import write_results
    from ..vectors.verify import compare

    os.makedirs(out_dir, exist_ok=True)
    t0 = time.time()
    log = progress or (lambda m: None)
    fs = _forms(forms)
    errors: list[str] = []
    sets: list[VectorSet] = []
    for f in fs:
        try:
            vs = _load_or_generate(f, vectors_dir, arch, count, seed)
            if vs.level != "regs":
                errors.append(f"{f.opcode}: matrix-level vectors are not run by this function")
                continue
            sets.append(vs)
        except Exception as e:  # report, never hide
            errors.append(f"{f.opcode}: {type(e).__name__}: {e}")
    log(f"[{time.time() - t0:6.1f}s] {len(sets)} vector sets ready, {sum(len(v) for v in sets)} vectors")
    gpu = gpu or GPU()
    groups = []
    for vs in sets:
        for g in vectors_as_inputs(vs):
            groups.append((vs, g))
    outs = gpu.run_cases([g["case"] for _, g in groups], [g["inputs"] for _, g in groups],
                         ptx=_ptx_for([vs.form for vs in sets]))
    log(f"[{time.time() - t0:6.1f}s] GPU done ({len(groups)} kernels)")
    got_by_set: dict[str, dict[int, np.ndarray]] = {}
    for (vs, g), d in zip(groups, outs):
        m = got_by_set.setdefault(vs.opcode, {})
        for k, cid in enumerate(g["ids"]):
            m[cid] = d[k]
    forms_out = []
    tot_v = tot_m = 0
    for vs in sets:
        got = [got_by_set[vs.opcode][c.id] for c in vs.cases]
        rep = compare(vs, got, keep=1, source="gpu")
        first = None
        if rep.mismatches:
            from dataclasses import asdict

            first = asdict(rep.mismatches[0])
        forms_out.append({"opcode": vs.opcode, "vectors": len(vs), "digest": vs.digest, "mismatches": rep.failed,
                          "first_mismatch": first, "failed_points": rep.caught_by})
        tot_v += len(vs)
        tot_m += rep.failed
        if save_results:
            rd = os.path.join(out_dir, "results")
            os.makedirs(rd, exist_ok=True)
            write_results(os.path.join(rd, file_name(vs.opcode)[:-4] + ".hex"), vs, got)
    import hashlib

    # which vectors ran: one digest over every form's (sorted), each form's in "forms"
    alld = "sha256:" + hashlib.sha256("\n".join(sorted(f"{f['opcode']} {f['digest']}" for f in forms_out)).encode()
                                      ).hexdigest()
    summary = {"kind": "ptx-formal vectors on GPU", "device": gpu.info.to_dict(), "arch": arch, "seed": seed,
               "vectors_digest": alld, "forms": forms_out, "total_forms": len(forms_out), "total_vectors": tot_v,
               "total_mismatches": tot_m, "errors": errors, "seconds": round(time.time() - t0, 1)}
    with open(os.path.join(out_dir, "summary.json"), "w") as fh:
        json.dump(summary, fh, indent=1)
    return summary
