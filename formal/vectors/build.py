"""Deterministic test vectors for one form: :func:`generate` -> :class:`VectorSet`.

A vector set is a list of :class:`Case` (one warp each): the inputs (each lane's
registers, or for matrix-level forms the matrices), the expected output computed by
``formal.evaluate`` for the chosen architecture model, the coverage points the case hits
(by construction and by observation) and a sentence saying why it exists.  The same
seed, form, arch, coverage selection and tool version give the same vectors.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

from ..catalog import BadArgument, Form, parse

FORMAT_NAME = "ptx-formal-vectors"
FORMAT_VERSION = 1


class VectorError(BadArgument):
    """Bad request or bad vector/result file (the CLI prints one line and exits 2)."""


@dataclass
class Case:
    id: int
    opcode: str
    sel: int | None
    points: list[str]                      # what the case was built for
    why: str
    inputs: dict[str, np.ndarray]          # regs: a [32,na] b c (e [32]); matrix: A B C (scale_a scale_b)
    expected: np.ndarray                   # d [32, nd] or D [M, N]
    targets: list[dict] = field(default_factory=list)   # where built points sit in D
    level: str = "regs"
    seen: list[str] = field(default_factory=list)       # further points it hits (observed)

    @property
    def all_points(self) -> list[str]:
        return self.points + [p for p in self.seen if p not in self.points]


@dataclass
class VectorSet:
    opcode: str
    arch: str
    seed: int
    level: str
    cases: list[Case]
    header: dict[str, Any] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)     # solver timings (not written: files stay reproducible)

    @property
    def form(self) -> Form:
        return parse(self.opcode)

    def points(self) -> dict[str, list[int]]:
        """coverage point -> ids of the cases that hit it."""
        out: dict[str, list[int]] = {}
        for c in self.cases:
            for p in c.all_points:
                out.setdefault(p, []).append(c.id)
        return dict(sorted(out.items()))

    def __len__(self) -> int:
        return len(self.cases)

    @property
    def digest(self) -> str:
        """sha256 of the vectors themselves (see :func:`digest`)."""
        return digest(self)


def _canon(x) -> bytes:
    a = np.ascontiguousarray(np.asarray(x).astype("<u8"))
    return repr(a.shape).encode() + a.tobytes()


def digest(vs: "VectorSet") -> str:
    """sha256 over a canonical serialisation of a vector set: the form, the arch model and
    every case's id, selector, inputs and expected output (as little-endian uint64 arrays
    with their shapes).  Annotations (points, why) and solver timings are not part of it:
    two files with the same digest hold the same vectors, whatever their format."""
    h = hashlib.sha256()
    h.update(f"{FORMAT_NAME}|{vs.opcode}|{vs.arch}|{vs.level}|{len(vs.cases)}".encode())
    for c in vs.cases:
        h.update(f"|case {c.id} sel={c.sel}".encode())
        for k in sorted(c.inputs):
            h.update(f"|{k}".encode() + _canon(c.inputs[k]))
        h.update(b"|expected" + _canon(c.expected))
    return "sha256:" + h.hexdigest()


def _tool_version() -> str:
    from .. import __version__

    return __version__


def check_form(form: Form, arch) -> None:
    from ..evaluate import EvalError, check_available

    if form.family not in ("mma", "mma.sp", "wmma.mma", "wgmma"):
        raise VectorError(f"{form.opcode}: vectors are for mma, mma.sp, wmma.mma and wgmma.mma_async forms, "
                          f"not {form.family}")
    try:
        check_available(form, arch)              # a name, or an ArchModel by its base target
    except EvalError as e:
        raise VectorError(str(e)) from None


def _seed_for(seed: int, opcode: str, what: str) -> np.random.Generator:
    h = hashlib.sha256(f"{seed}|{opcode}|{what}".encode()).digest()
    return np.random.Generator(np.random.PCG64(int.from_bytes(h[:8], "little")))


def _d_positions(form: Form) -> dict[tuple[int, int, int], tuple[int, int, int]]:
    """(product, row, col) of D -> (lane, register, element) holding it."""
    from .. import layout

    lay = layout.fragment(form, "d")
    en = lay.enumerate()
    out = {}
    prod = en.get("product", np.zeros_like(en["lane"]))
    held = en.get("held", np.ones_like(en["lane"], dtype=bool))
    for i in np.flatnonzero(held):
        out[(int(prod[i]), int(en["row"][i]), int(en["col"][i]))] = (int(en["lane"][i]), int(en["reg"][i]),
                                                                     int(en["elem"][i]))
    return out


def from_drafts(form: Form, arch, seed: int, drafts: list, level: str = "regs", header: dict | None = None) -> VectorSet:
    """A vector set from ready drafts (expected outputs from the evaluator for ``arch``)."""
    from .draft import evaluate_inputs, is_matrix_level, to_inputs

    inputs = to_inputs(form, drafts, _seed_for(seed, form.opcode, "registers"))
    lvl = "matrix" if is_matrix_level(form) else "regs"
    sels = [d.sel if form.is_sparse and lvl == "regs" else None for d in drafts]     # matrices have no selector
    expected = evaluate_inputs(form, inputs, sels, arch)
    pos = {} if lvl == "matrix" else _d_positions(form)
    cases = []
    for i, (d, inp, exp) in enumerate(zip(drafts, inputs, expected)):
        tg = []
        for t in d.targets:
            rec = {"point": t.point, "product": t.p, "row": t.m, "col": t.n, "check": t.check}
            if lvl == "regs":
                lane, reg, el = pos[(t.p, t.m, t.n)]
                rec.update(lane=lane, reg=reg, elem=el)
            tg.append(rec)
        cases.append(Case(i, form.opcode, sels[i], list(d.points), d.why, inp,
                          np.asarray(exp), tg, lvl))
    vs = VectorSet(form.opcode, getattr(arch, "name", str(arch)), seed, lvl, cases)
    vs.header = dict(header or {}, format=FORMAT_NAME, version=FORMAT_VERSION, tool=f"ptx-formal {_tool_version()}",
                     opcode=form.opcode, arch=vs.arch, seed=seed, level=lvl, cases=len(cases))
    vs.header["digest"] = digest(vs)
    return to_matrix_level(vs) if level == "matrix" else vs


def to_matrix_level(vs: VectorSet) -> VectorSet:
    """The same vectors as matrices: A [M, K] (sparse: the dense structured-sparse A), B [K, N],
    C [M, N] and the expected D, one case per product (m8n8k4 .f16 warps hold 4), so a
    simulator without PTX fragment layouts can run them.  Expected D is recomputed with
    ``formal.evaluate_matrices`` (for sparse forms the dense A's non-zeros define the
    metadata); targets keep their row and column."""
    from ..evaluate import evaluate_matrices
    from .draft import case_draft, dense_a

    form = vs.form
    if vs.level == "matrix":
        return vs
    cases: list[Case] = []
    for c in vs.cases:
        d = case_draft(form, c)
        for p in range(d.B.shape[0]):
            A = dense_a(form, d.A[p], d.nib) if form.is_sparse else d.A[p]
            inp = {"A": np.asarray(A, np.uint64), "B": np.asarray(d.B[p], np.uint64),
                   "C": np.asarray(d.C[p], np.uint64)}
            tg = [{k: v for k, v in t.items() if k not in ("lane", "reg", "elem", "product")}
                  for t in c.targets if t.get("product", 0) == p]
            why = c.why + (f" (product {p} of warp case {c.id})" if d.B.shape[0] > 1 else "")
            cases.append(Case(len(cases), c.opcode, None, list(c.points), why, inp, None, tg, "matrix",  # type: ignore
                              list(c.seen)))
    if cases:
        D = evaluate_matrices(form, np.stack([x.inputs["A"] for x in cases]), np.stack([x.inputs["B"] for x in cases]),
                              np.stack([x.inputs["C"] for x in cases]), arch=vs.arch)
        for x, dd in zip(cases, D):
            x.expected = np.asarray(dd)
    out = VectorSet(vs.opcode, vs.arch, vs.seed, "matrix", cases)
    out.header = dict(vs.header, level="matrix", cases=len(cases), from_level="regs")
    out.header["digest"] = digest(out)
    out.stats = vs.stats
    return out


def generate(opcode: str | Form, arch: str = "sm_90", count: int = 0, seed: int = 0,
             coverage: Iterable[str] | None = None, timeout_ms: int = 20000, level: str = "regs") -> VectorSet:
    """Vectors for one form: every applicable coverage model (or those named) plus
    ``count`` random warps.  Expected outputs come from ``formal.evaluate`` with ``arch``.
    ``level="matrix"``: matrices instead of registers (:func:`to_matrix_level`); forms
    whose vectors are always matrices (wmma.mma, block scaling) ignore it."""
    from . import coverage as cov
    from .draft import (check_output, evaluate_inputs, is_matrix_level, observed_points, output_matrix,
                        to_inputs)

    form = opcode if isinstance(opcode, Form) else parse(opcode)
    check_form(form, arch)
    if count < 0:
        raise VectorError(f"--count must be >= 0, got {count}")
    names = list(coverage) if coverage is not None else [m for m in cov.applicable(form) if m != "random"]
    unknown = [n for n in names if n not in cov.MODELS and n != "random"]
    if unknown:
        raise VectorError(f"unknown coverage model {unknown[0]!r}; known: {', '.join(cov.MODELS)}, random")
    skipped = [n for n in names if n in cov.MODELS and not cov.MODELS[n].applies(form)]
    if coverage is not None and "random" in names and count == 0:
        count = 16
    ctx = cov.Ctx(form, arch, seed, timeout_ms=timeout_ms)
    drafts = []
    for n in names:
        if n == "random" or n in skipped:
            continue
        for d in cov.MODELS[n].build(ctx):
            drafts.append(d)
    drafts += cov.random_drafts(ctx, count)
    rng = _seed_for(seed, form.opcode, "registers")
    inputs = to_inputs(form, drafts, rng)
    regs_level = not is_matrix_level(form)
    sels = [d.sel if form.is_sparse and regs_level else None for d in drafts]     # matrices have no selector
    expected = evaluate_inputs(form, inputs, sels, arch)
    if level not in ("regs", "matrix"):
        raise VectorError(f"level must be 'regs' or 'matrix', not {level!r}")
    want_level = level
    level = "matrix" if is_matrix_level(form) else "regs"
    pos = {} if level == "matrix" else _d_positions(form)
    dropped = []
    cases = []
    for i, (d, inp, exp) in enumerate(zip(drafts, inputs, expected)):
        D = output_matrix(form, exp)
        targets = []
        bad_points = set()
        for t in d.targets:
            code = int(D[t.p, t.m, t.n])
            if t.check and not check_output(form, code, t.check):
                dropped.append({"case": i, "point": t.point, "row": t.m, "col": t.n,
                                "reason": f"wanted a {t.check} D, the {getattr(arch, 'name', arch)} model gives "
                                          f"0x{code:x}"})
                bad_points.add(t.point)
                continue
            rec = {"point": t.point, "product": t.p, "row": t.m, "col": t.n, "check": t.check}
            if level == "regs":
                lane, reg, el = pos[(t.p, t.m, t.n)]
                rec.update(lane=lane, reg=reg, elem=el)
            targets.append(rec)
        kept_target_points = {t["point"] for t in targets}
        pts = [p for p in d.points if p not in bad_points or p in kept_target_points]
        seen = [p for p in observed_points(form, inp, exp) if p not in pts]
        if sels[i] is not None and f"selector:{sels[i]}" not in pts:
            seen.append(f"selector:{sels[i]}")
        cases.append(Case(i, form.opcode, sels[i], pts, d.why, inp, np.asarray(exp),
                          targets, level, seen))
    import z3

    vs = VectorSet(form.opcode, getattr(arch, "name", str(arch)), seed, level, cases)
    vs.header = {
        "format": FORMAT_NAME, "version": FORMAT_VERSION, "tool": f"ptx-formal {_tool_version()}",
        "z3": z3.get_version_string(), "opcode": form.opcode, "arch": vs.arch, "seed": seed, "count": count,
        "level": level, "coverage": [n for n in names if n not in skipped] + (["random"] if count else []),
        "not_applicable": skipped, "cases": len(cases),
        "operands": {k: {"count": o.count, "reg_bits": o.reg_bits, "type": o.etype}
                     for k, o in form.operands.items()},
        "points": {p: len(ids) for p, ids in vs.points().items()},
        "not_covered": dict(sorted(ctx.not_covered.items())),
        "solver": {p: {k: v for k, v in r.items() if k not in ("seconds", "cached")}
                   for p, r in sorted(ctx.stats.items())},
        "dropped": dropped,
    }
    vs.header["digest"] = digest(vs)
    if want_level == "matrix":
        return to_matrix_level(vs)
    vs.stats = {p: dict(r) for p, r in sorted(ctx.stats.items())}
    return vs
