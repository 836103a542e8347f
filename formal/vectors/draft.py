"""Vectors are built as matrices, then turned into registers and evaluated.

A :class:`Draft` is one warp's inputs at matrix level: A, B, C element encodings (A is
the *compressed* M x K/2 matrix of a sparse form, with one metadata nibble per row and
chunk), plus the coverage points it is built to hit and *where* (:class:`Target`: the
product, row and column of D).  :class:`Canvas` starts a draft from a background and
places a solved dot product into one output element ("slot") so that D[m, n] is exactly
the terms the solver chose: row m of A and column n of B are zero except at the chosen
k positions.  Slots use disjoint rows and columns (slot s -> (s, s)), so one warp can
carry min(M, N) problems per product.

:func:`to_inputs` turns drafts into the evaluator's register arrays: ``formal.layout.pack``
for dense operands; for sparse A and e the metadata module's own tables
(``FormMeta.a_slots`` / ``FormMeta.e_table``), i.e. exactly what
``formal.metadata.gather_terms`` reads back.  Matrix-level forms (``wmma.mma``, block
scaling) keep the matrices.

:func:`element` evaluates one output element from its K terms with the arithmetic model
(``formal.numerics.dot_terms``), which the solver loops use to check a candidate before
it is kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from ..catalog import Form, products_per_warp
from ..numerics.formats import decode, get_format


@dataclass
class Target:
    """Where a coverage point sits: D[product, row, col], with an optional output check."""

    point: str
    p: int
    m: int
    n: int
    check: str | None = None      # an output predicate name (see OUTPUT_CHECKS)


@dataclass
class Draft:
    points: list[str]
    why: str
    A: np.ndarray | None = None          # [P, M, Ka] (Ka = K/2 for sparse) uint64 codes
    B: np.ndarray | None = None          # [P, K, N]
    C: np.ndarray | None = None          # [P, M, N]
    nib: np.ndarray | None = None        # sparse: [M, chunks] nibbles
    sel: int | None = None
    idle_e: bool = False                 # sparse: fill non-contributing lanes' e with legal junk
    scale_a: np.ndarray | None = None    # block scaling: [M, nsf]
    scale_b: np.ndarray | None = None    # [nsf, N]
    targets: list[Target] = field(default_factory=list)
    regs: dict[str, np.ndarray] | None = None   # set for drafts made directly in registers


def is_matrix_level(form: Form) -> bool:
    """Forms whose vectors are matrices, not registers (PTX leaves wmma fragments unspecified;
    the evaluator takes block-scaled forms at matrix level; a wgmma's operands are a warpgroup's
    128 threads of registers plus a shared-memory image and descriptors, so its vectors are the
    matrices A [64, K], B [K, N], C [64, N] the instruction multiplies)."""
    return form.family in ("wmma.mma", "wgmma") or bool(form.block_scale)


def dims(form: Form) -> tuple[int, int, int, int, int]:
    """(P, M, N, K, Ka): products per warp, the shape, and A's stored width."""
    M, N, K = form.mnk
    P = products_per_warp(form) if form.family in ("mma", "mma.sp") else 1
    return P, M, N, K, (K // 2 if form.is_sparse else K)


def meta(form: Form):
    """The form's sparse metadata rules.  A sparse wgmma has none of its own in specs/metadata.toml:
    each of its warps reads 16 rows as the mma.sp form of the same types does (the evaluator's
    rule, silicon-checked), so its per-row rules (granularity, legal index pairs, chunks per row)
    are that form's; only per-row properties are read through it here."""
    from ..metadata import meta as _meta

    if form.family == "wgmma":
        from ..evaluate import _sp_twin

        return _meta(_sp_twin(form))
    return _meta(form)


def numerics_kw(form: Form, arch) -> dict[str, Any]:
    """The keyword arguments the evaluator passes to ``formal.numerics`` for this form."""
    return dict(atype=form.atype, btype=form.btype, ctype=form.c_type, dtype=form.dtype, arch=arch,
                satfinite=form.satfinite, bitop=form.bitop, rounding=form.rounding, kind=form.kind,
                stype=form.stype, shape=form.mnk, sparse=form.is_sparse)


def unit_scale(form: Form) -> int:
    """The encoding of 1.0 in the form's scale-factor type (block scaling)."""
    f = get_format(form.stype)
    return f.bias << f.mantissa


def unit_scales(form: Form) -> tuple[np.ndarray, np.ndarray]:
    """scale_a [M, nsf] and scale_b [nsf, N] all 1.0 (block-scaled forms)."""
    M, N, _ = form.mnk
    nsf = {"1X": 1, "2X": 2, "4X": 4}[form.scale_vec_effective]
    u = unit_scale(form)
    return np.full((M, nsf), u, np.uint8), np.full((nsf, N), u, np.uint8)


def element(form: Form, arch, a_terms, b_terms, c_code) -> int:
    """D of one output element from its full term vectors (length K, or K/2 for sparse);
    block-scaled forms with every scale factor 1."""
    from ..numerics import dot_terms

    a = np.asarray(a_terms, dtype=np.uint64)[None]
    b = np.asarray(b_terms, dtype=np.uint64)[None]
    c = np.asarray([c_code], dtype=np.uint64)
    kw = numerics_kw(form, arch)
    if form.block_scale:
        kw["scale_a"] = kw["scale_b"] = np.full(a.shape, unit_scale(form), np.uint8)
    return int(dot_terms(a, b, c, **kw)[0])


def spread(n: int, width: int) -> list[int]:
    """n positions spread evenly over range(width) (terms land in different blocks/groups)."""
    return sorted({(j * width) // n for j in range(n)}) if n <= width else list(range(width))


class Canvas:
    """A draft being built for one form (see module docstring)."""

    def __init__(self, form: Form, rng: np.random.Generator, background: str = "normal",
                 sel: int | None = None, nib: int | np.ndarray | None = None):
        from .regimes import random_elements

        self.form = form
        self.rng = rng
        P, M, N, K, Ka = dims(form)
        self.P, self.M, self.N, self.K, self.Ka = P, M, N, K, Ka

        def bg(t: str, shape, role: str) -> np.ndarray:
            n = int(np.prod(shape))
            if background == "zero":
                return np.zeros(shape, np.uint64)
            return random_elements(rng, t, n, background, role).reshape(shape).astype(np.uint64) & np.uint64(
                (1 << get_format(t).bits) - 1)

        self.A = bg(form.atype, (P, M, Ka), "a")
        self.B = bg(form.btype, (P, K, N), "b")
        self.C = bg(form.c_type, (P, M, N), "c")
        self.sel = None
        self.nib = None
        if form.is_sparse:
            fm = meta(form)
            self.fm = fm
            self.sel = fm.selectors[0] if sel is None else sel
            legal = np.array(fm.legal_nibbles, dtype=np.int64)
            if nib is None:
                self.nib = legal[rng.integers(0, len(legal), (M, fm.chunks_per_row))]
            else:
                self.nib = np.broadcast_to(np.asarray(nib, np.int64), (M, fm.chunks_per_row)).copy()
        self.targets: list[Target] = []
        self.slots = min(M, N) * P

    # -- geometry ----------------------------------------------------------------------------
    def slot(self, s: int) -> tuple[int, int, int]:
        q = min(self.M, self.N)
        return s // q, s % q, s % q

    def kidx(self, m: int) -> np.ndarray:
        """Logical k of each stored position of row m (identity for dense forms)."""
        if not self.form.is_sparse:
            return np.arange(self.K)
        fm = self.fm
        w, s = fm.gran.width, fm.gran.stored
        out = np.empty(self.Ka, np.int64)
        for ch in range(fm.chunks_per_row):
            offs = fm.offsets(int(self.nib[m, ch]))
            for j in range(s):
                out[ch * s + j] = ch * w + offs[j]
        return out

    # -- placing a dot product -----------------------------------------------------------------
    def place(self, s: int, terms: list[tuple[int, int]], c: int | None, point: str | None = None,
              check: str | None = None, positions: list[int] | None = None) -> tuple[int, int, int]:
        """Make D[slot s] = sum(terms) + c exactly: row m of A and column n of B hold only these terms."""
        p, m, n = self.slot(s)
        pos = positions if positions is not None else spread(len(terms), self.Ka)
        if len(pos) < len(terms):
            raise ValueError(f"{len(terms)} terms do not fit K={self.Ka}")
        ks = self.kidx(m)
        self.A[p, m, :] = 0
        self.B[p, :, n] = 0
        for (x, y), j in zip(terms, pos):
            self.A[p, m, j] = x
            self.B[p, ks[j], n] = y
        if c is not None:
            self.C[p, m, n] = c
        if point:
            self.targets.append(Target(point, p, m, n, check))
        return p, m, n

    def terms_of(self, p: int, m: int, n: int) -> tuple[np.ndarray, np.ndarray, int]:
        """The (a, b) term vectors and c of output (p, m, n), in the evaluator's term order."""
        ks = self.kidx(m)
        return self.A[p, m, :].copy(), self.B[p, ks, n].copy(), int(self.C[p, m, n])

    def draft(self, points: list[str], why: str, **kw) -> Draft:
        d = Draft(points=list(points), why=why, A=self.A.copy(), B=self.B.copy(), C=self.C.copy(),
                  nib=None if self.nib is None else self.nib.copy(), sel=self.sel,
                  targets=list(self.targets), **kw)
        if self.form.block_scale and d.scale_a is None:
            d.scale_a, d.scale_b = unit_scales(self.form)       # every block scaled by 1
        return d


# ------------------------------------------------------------------------------------------
# drafts -> evaluator inputs

def _pack(form: Form, op: str, mats: np.ndarray) -> np.ndarray:
    from .. import layout

    P = mats.shape[1]
    x = mats if P > 1 else mats[:, 0]
    return layout.pack(form, op, x)


def _sparse_regs(form: Form, A: np.ndarray, nib: np.ndarray, sel: int, idle: np.ndarray | None):
    """Compressed A [T, M, Ka] and nibbles [T, M, chunks] -> (a [T, 32, n], e [T, 32])."""
    fm = meta(form)
    op = form.operands["a"]
    T = A.shape[0]
    w_s = fm.gran.stored
    slots = fm.a_slots()                                   # [M, chunks, stored, 2] -> (lane, i)
    codes = np.zeros((T, 32, fm.a_elems), np.uint64)
    M, C = fm.rows, fm.chunks_per_row
    stored = A.reshape(T, M, C, w_s)
    codes[:, slots[..., 0], slots[..., 1]] = stored
    regs = np.zeros((T, 32, op.count), np.uint64)
    vmask = np.uint64((1 << get_format(form.atype).bits) - 1)
    for i in range(fm.a_elems):
        pos = op.elem_bits * (i % op.elems_per_reg) + op.shift
        regs[:, :, i // op.elems_per_reg] |= (codes[:, :, i] & vmask) << np.uint64(pos)
    tab = fm.e_table(sel)                                  # rows (lane, n, row, chunk, lo)
    e = np.zeros((T, 32), np.uint64)
    if idle is not None:
        e[:] = idle
        e[:, np.unique(tab[:, 0])] = 0
    for lane, _n, row, ch, lo in tab:
        e[:, lane] |= nib[:, row, ch].astype(np.uint64) << np.uint64(lo)
    return regs.astype(np.uint32), e.astype(np.uint32)


def dense_a(form: Form, A: np.ndarray, nib: np.ndarray) -> np.ndarray:
    """Compressed A [M, K/2] and its nibbles [M, chunks] -> the dense structured-sparse A [M, K]
    (matrix-level sparse forms take the dense matrix; its non-zeros define the metadata)."""
    fm = meta(form)
    w, s = fm.gran.width, fm.gran.stored
    M = A.shape[0]
    out = np.zeros((M, form.k), np.uint64)
    for m in range(M):
        for ch in range(fm.chunks_per_row):
            for j, off in enumerate(fm.offsets(int(nib[m, ch]))):
                out[m, ch * w + off] = A[m, ch * s + j]
    return out


def compress_rows(form: Form, A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dense structured-sparse A [M, K] -> (stored A [M, K/2], nibbles [M, chunks]): the inverse of
    :func:`dense_a`, by the metadata module's own compression (``formal.metadata.compress``, whose
    canonical padding the evaluator's matrix level uses too), block by block of the rows one
    metadata table covers (16 for a wgmma warp)."""
    from ..metadata.storage import _read, compress

    fm = meta(form)
    A = np.asarray(A, np.uint64)
    stored, nibs = [], []
    for r in range(0, A.shape[0], fm.rows):
        a, e = compress(fm.form, A[None, r:r + fm.rows], sel=fm.selectors[0])
        s, nib = _read(fm, a, e, fm.selectors[0], allow_ub=False)
        stored.append(np.asarray(s, np.uint64).reshape(fm.rows, -1))
        nibs.append(np.asarray(nib[0], np.int64))
    return np.concatenate(stored), np.concatenate(nibs)


def idle_words(form: Form, rng: np.random.Generator, T: int) -> np.ndarray:
    """[T, 32] words whose every nibble is a legal index pair (junk for lanes that do not contribute)."""
    fm = meta(form)
    legal = np.array(fm.legal_nibbles, dtype=np.uint64)
    nib = legal[rng.integers(0, len(legal), (T, 32, 8))]
    return np.bitwise_or.reduce(nib << (np.arange(8, dtype=np.uint64) * np.uint64(4)), axis=-1)


def to_inputs(form: Form, drafts: list[Draft], rng: np.random.Generator) -> list[dict[str, np.ndarray]]:
    """Each draft's evaluator inputs: {'a','b','c'[,'e']} registers ([32, n]) or, for
    matrix-level forms, {'A','B','C'[,'scale_a','scale_b']} matrices."""
    out: list[dict[str, np.ndarray] | None] = [None] * len(drafts)
    todo = []
    for i, d in enumerate(drafts):
        if d.regs is not None:
            out[i] = d.regs
        else:
            todo.append(i)
    if not todo:
        return out  # type: ignore[return-value]
    A = np.stack([drafts[i].A for i in todo])
    B = np.stack([drafts[i].B for i in todo])
    C = np.stack([drafts[i].C for i in todo])
    if is_matrix_level(form):
        for j, i in enumerate(todo):
            d = drafts[i]
            a = dense_a(form, A[j, 0], d.nib) if form.is_sparse else A[j, 0]
            res = {"A": a, "B": B[j, 0], "C": C[j, 0]}
            if form.block_scale:
                res["scale_a"] = d.scale_a
                res["scale_b"] = d.scale_b
            out[i] = res
        return out  # type: ignore[return-value]
    b = _pack(form, "b", B)
    c = _pack(form, "c", C)
    if form.is_sparse:
        for j, i in enumerate(todo):
            d = drafts[i]
            idle = idle_words(form, rng, 1) if d.idle_e else None
            a, e = _sparse_regs(form, A[j:j + 1, 0], d.nib[None], d.sel, idle)
            out[i] = {"a": a[0], "b": b[j], "c": c[j], "e": e[0]}
    else:
        a = _pack(form, "a", A)
        for j, i in enumerate(todo):
            out[i] = {"a": a[j], "b": b[j], "c": c[j]}
    return out  # type: ignore[return-value]


def evaluate_inputs(form: Form, inputs: list[dict[str, np.ndarray]], sels: list[int | None], arch) -> list[np.ndarray]:
    """Expected outputs by the evaluator: d [32, nd] per register-level case, D [M, N] per matrix one."""
    from ..evaluate import evaluate, evaluate_matrices

    res: list[np.ndarray | None] = [None] * len(inputs)
    if is_matrix_level(form):
        groups: dict[Any, list[int]] = {}
        for i in range(len(inputs)):
            groups.setdefault(0, []).append(i)
        for idx in groups.values():
            A = np.stack([inputs[i]["A"] for i in idx])
            B = np.stack([inputs[i]["B"] for i in idx])
            C = np.stack([inputs[i]["C"] for i in idx])
            kw = {}
            if form.block_scale:
                kw = dict(scale_a=np.stack([inputs[i]["scale_a"] for i in idx]),
                          scale_b=np.stack([inputs[i]["scale_b"] for i in idx]))
            D = evaluate_matrices(form, A, B, C, arch=arch, **kw)
            for j, i in enumerate(idx):
                res[i] = D[j]
        return res  # type: ignore[return-value]
    groups = {}
    for i, s in enumerate(sels):
        groups.setdefault(s, []).append(i)
    for s, idx in groups.items():
        a = np.stack([inputs[i]["a"] for i in idx])
        b = np.stack([inputs[i]["b"] for i in idx])
        c = np.stack([inputs[i]["c"] for i in idx])
        e = np.stack([inputs[i]["e"] for i in idx]) if form.is_sparse else None
        d = evaluate(form, a, b, c, e=e, sel=s, arch=arch)
        for j, i in enumerate(idx):
            res[i] = d[j]
    return res  # type: ignore[return-value]


def output_matrix(form: Form, d: np.ndarray) -> np.ndarray:
    """D [P, M, N] from one case's expected output (registers or a matrix)."""
    if is_matrix_level(form):
        return np.asarray(d)[None]
    from .. import layout

    D = layout.unpack(form, "d", np.asarray(d)[None])[0]
    return D if D.ndim == 3 else D[None]


# ------------------------------------------------------------------------------------------
# output checks and observed points

def _cls(code: int, t: str) -> dict[str, bool]:
    dd = decode(np.array([code], np.uint64), t)
    f = get_format(t)
    if f.cls != "float":
        v = int(dd.sig[0]) * (-1 if dd.neg[0] else 1)
        return {"zero": v == 0, "int_max": v == f.int_max, "int_min": v == f.int_min}
    sub = (not dd.zero[0]) and (not dd.nan[0]) and (not dd.inf[0]) and int(dd.sig[0]) < (1 << f.mantissa)
    return {"nan": bool(dd.nan[0]), "inf": bool(dd.inf[0]), "zero": bool(dd.zero[0]),
            "negzero": bool(dd.zero[0] and dd.neg[0]), "subnormal": bool(sub),
            "maxfinite": (code & ((1 << (f.field_bits - 1)) - 1)) == f.maxfin_code if f.signed else False}


OUTPUT_CHECKS = ("nan", "inf", "zero", "negzero", "subnormal", "maxfinite", "int_max", "int_min")


def check_output(form: Form, code: int, check: str) -> bool:
    return bool(_cls(int(code), form.dtype).get(check, False))


@lru_cache(maxsize=None)
def _elem_fields(form: Form, op: str) -> tuple[int, int, int, int, str]:
    o = form.operands[op]
    return o.count, o.elems_per_reg, o.elem_bits, o.shift, o.etype


def register_elements(form: Form, op: str, regs: np.ndarray) -> np.ndarray:
    """All element encodings held in one case's registers of an operand (layout-free)."""
    n, epr, eb, sh, t = _elem_fields(form, op)
    vbits = get_format(t).bits
    r = np.asarray(regs, dtype=np.uint64).reshape(-1, 1)
    pos = (np.arange(epr, dtype=np.uint64) * np.uint64(eb) + np.uint64(sh))[None]
    return ((r >> pos) & np.uint64((1 << vbits) - 1)).reshape(-1)


def observed_points(form: Form, inputs: dict[str, np.ndarray], expected: np.ndarray) -> list[str]:
    """Points a case hits whatever it was built for: special or subnormal inputs, special outputs."""
    pts: list[str] = []
    mats = is_matrix_level(form)
    for op, key, t in (("a", "A", form.atype), ("b", "B", form.btype), ("c", "C", form.c_type)):
        f = get_format(t)
        if f.cls != "float":
            continue
        v = np.asarray(inputs[key]).reshape(-1) if mats else register_elements(form, op, inputs[op])
        dd = decode(v.astype(np.uint64), t)
        sub = ~dd.zero & ~dd.nan & ~dd.inf & (dd.sig < (1 << f.mantissa)) if f.subnormal else np.zeros(v.shape, bool)
        for name, mask in (("nan_in", dd.nan), ("inf_in", dd.inf), ("subnormal_in", sub),
                           ("neg_zero_in", dd.zero & dd.neg)):
            if mask.any():
                pts.append(f"{name}:{op}")
    f = get_format(form.dtype)
    dv = np.asarray(expected).reshape(-1) if mats else register_elements(form, "d", expected)
    dd = decode(dv.astype(np.uint64), form.dtype)
    if f.cls == "float":
        sub = ~dd.zero & ~dd.nan & ~dd.inf & (dd.sig < (1 << f.mantissa))
        for name, mask in (("nan_out", dd.nan), ("inf_out", dd.inf), ("subnormal_out", sub),
                           ("neg_zero_out", dd.zero & dd.neg)):
            if mask.any():
                pts.append(name)
    else:
        v = np.where(dd.neg, -dd.sig, dd.sig)
        if (v == f.int_max).any():
            pts.append("int_out_max")
        if (v == f.int_min).any():
            pts.append("int_out_min")
    return pts


# a case as matrices (the inverse of to_inputs)

def case_draft(form: Form, case) -> "Draft":
    """A vector case's (:class:`formal.vectors.build.Case`) inputs as a :class:`Draft` (A compressed for sparse forms, with its nibbles)."""
    P, M, N, K, Ka = dims(form)
    if case.level == "matrix":
        A = np.asarray(case.inputs["A"], np.uint64)
        nib = None
        if form.is_sparse:           # the terms the hardware multiplies: the stored order, not the dense row
            A, nib = compress_rows(form, A)
        d = Draft([], "", A=A[None], B=np.asarray(case.inputs["B"], np.uint64)[None],
                  C=np.asarray(case.inputs["C"], np.uint64)[None], nib=nib)
        if "scale_a" in case.inputs:
            d.scale_a, d.scale_b = case.inputs["scale_a"], case.inputs["scale_b"]
        return d
    from .. import layout

    def mats(op):
        x = layout.unpack(form, op, np.asarray(case.inputs[op])[None])[0]
        return np.asarray(x, np.uint64).reshape((P,) + x.shape[-2:])

    B, C = mats("b"), mats("c")
    if form.is_sparse:
        from ..metadata.storage import _fm_sel, _read

        fm, sel = _fm_sel(form, case.sel)
        stored, nib = _read(fm, np.asarray(case.inputs["a"])[None], np.asarray(case.inputs["e"])[None], sel,
                            allow_ub=False)
        A = np.asarray(stored, np.uint64).reshape(1, M, Ka)
        return Draft([], "", A=A, B=B, C=C, nib=np.asarray(nib[0], np.int64), sel=sel)
    return Draft([], "", A=mats("a"), B=B, C=C)
