"""Dense structured-sparse A <-> (A registers, metadata registers); the sparse dot-product terms.

Shapes (T = number of independent instances, lanes = 32)::

    A_dense  [T, M, K]        element encodings, right-aligned (an e2m1 code is 4 bits even
                              where its register container is a byte)
    a_regs   [T, 32, nregs]   uint32, element i of a lane at register i // epr,
                              bits [pos + bits - 1 : pos], pos = elem_bits * (i % epr) + shift
    e_regs   [T, 32]          uint32, the metadata operand e of each lane

``compress`` raises :class:`NotSparse` (with a witness: which instance, row, chunk and
which non-zero does not fit) instead of returning a result for a matrix that breaks the
granularity.  ``decompress`` and ``gather_terms`` raise :class:`InvalidMetadata` for a
metadata nibble that the ISA calls undefined (which lane, which bits, which rule).

Zeros: a float element is zero when its value is (+0 or -0); an integer when it is 0.
A chunk keeps a -0 when there is room, so ``decompress(compress(A)) == A`` bit for bit
whenever every chunk has at most ``stored`` non-(+0) encodings; otherwise a dropped -0
comes back as +0 (equal in value).

Example (a 2:4 row, f16)::

    >>> import numpy as np
    >>> op = "mma.sp::ordered_metadata.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
    >>> A = np.zeros((16, 16), dtype=np.uint16); A[0, 1] = 0x3C00; A[0, 3] = 0x4000
    >>> a, e = compress(op, A, sel=0)
    >>> hex(int(e[0, 0]) & 0xF)          # row 0, chunk 0 holds columns 1 and 3: idx 1, 3
    '0xd'
    >>> bool((decompress(op, a, e, sel=0)[0] == A).all())
    True
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ..catalog import BadArgument, Form, _selector_rule
from ..numerics.codes import as_codes, as_int
from ..specdata import load_spec
from . import codec
from .spec import FormMeta, check_selector, meta

# ----------------------------------------------------------------------------------
# errors with witnesses

@dataclass
class SparsityWitness:
    instance: int
    row: int
    chunk: int
    columns: list[int]            # non-zero logical columns of the chunk
    extra: int                    # the first non-zero that does not fit
    granularity: str
    width: int
    stored: int

    def to_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        c0 = self.chunk * self.width
        return (f"row {self.row}, chunk {self.chunk} (columns {c0}..{c0 + self.width - 1}) of instance "
                f"{self.instance} has non-zeros at columns {self.columns}; granularity {self.granularity} "
                f"stores at most {self.stored} per chunk{' in at most two pairs' if self.granularity == '4:8' else ''}"
                f": column {self.extra} is one too many [PTX ISA 9.7.14.6.1]")


class NotSparse(ValueError):
    """A dense A that the form's granularity cannot store; ``.witness`` says where."""

    def __init__(self, witness: SparsityWitness):
        super().__init__(str(witness))
        self.witness = witness


@dataclass
class MetadataWitness:
    instance: int
    lane: int
    nibble: int
    bits: tuple[int, int]         # (high, low) bit of the nibble in e
    row: int
    chunk: int
    value: int                    # the nibble
    rules: list[dict] = field(default_factory=list)   # id, message, section, text

    def to_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        why = "; ".join(f"{r['message']} [{r['id']}, PTX ISA {r['section']}]" for r in self.rules)
        return (f"instance {self.instance}, lane {self.lane}, e bits [{self.bits[0]}:{self.bits[1]}] = "
                f"0b{self.value:04b} (row {self.row}, chunk {self.chunk}): {why} -- undefined behaviour")


class UndefinedBehavior(ValueError):
    """An input whose result the PTX ISA leaves undefined (the evaluator refuses to guess)."""


@dataclass
class SelectorWitness:
    opcode: str
    sel: int
    legal: list[int]
    section: str                  # where the ISA lists the legal values
    text: str                     # the ISA's sentence

    def to_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        return (f"selector {self.sel} is not legal for {self.opcode}: legal values {self.legal} "
                f"(PTX ISA {self.section}; any other value is undefined behaviour)")


class UndefinedSelector(UndefinedBehavior, BadArgument):
    """A sparsity selector outside the form's legal values (9.7.14.6.1); ``.witness`` says which and why."""

    def __init__(self, witness: SelectorWitness):
        super().__init__(str(witness))
        self.witness = witness


class InvalidMetadata(UndefinedBehavior):
    """A metadata nibble the ISA calls undefined behaviour; ``.witness`` says where and why."""

    def __init__(self, witness: MetadataWitness):
        super().__init__(str(witness))
        self.witness = witness


# ----------------------------------------------------------------------------------
# helpers

def _fm_sel(form: Form | str | FormMeta, sel: int | None) -> tuple[FormMeta, int]:
    fm = form if isinstance(form, FormMeta) else meta(form)
    if sel is None:
        sel = fm.selectors[0]
    sel = as_int(sel, "sel")
    try:
        check_selector(fm, sel)
    except BadArgument:
        r = _selector_rule(fm.form)
        raise UndefinedSelector(SelectorWitness(fm.form.opcode, sel, list(fm.selectors),
                                                r.section if r else "9.7.14.6.1",
                                                r.data.get("text", "") if r else "")) from None
    return fm, sel


def element_bits(fm: FormMeta) -> int:
    return int(load_spec("formats")[fm.form.atype]["bits"])


def zero_masks(fm: FormMeta, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(value is non-zero, encoding is non-zero) for element encodings of the A type."""
    f = load_spec("formats")[fm.form.atype]
    bits = int(f["bits"])
    anybits = codes != 0
    if f["class"] == "float" and f.get("signed", True):
        value = (codes & np.uint64((1 << (bits - 1)) - 1)) != 0
    else:
        value = anybits
    return value, anybits


def _as_codes(fm: FormMeta, A: Any) -> tuple[np.ndarray, bool]:
    arr = np.asarray(A)
    if arr.dtype.kind not in "ui":
        raise BadArgument(f"A must hold element encodings as integers (got dtype {arr.dtype}); "
                          f"encode values first (formal.numerics)")
    squeeze = arr.ndim == 2
    if squeeze:
        arr = arr[None]
    if arr.ndim != 3 or arr.shape[1:] != (fm.rows, fm.k):
        raise BadArgument(f"A must have shape [M, K] or [T, M, K] with M x K = {fm.rows} x {fm.k}, got {np.shape(A)}")
    arr = as_codes(arr, element_bits(fm), f"A (.{fm.form.atype} encodings)")
    return arr.astype(np.uint64), squeeze


def pack_a(fm: FormMeta, a_codes: np.ndarray) -> np.ndarray:
    """A element encodings [T, 32, a_elems] -> registers [T, 32, nregs] (uint32)."""
    op = fm.form.operands["a"]
    T = a_codes.shape[0]
    regs = np.zeros((T, 32, op.count), dtype=np.uint64)
    for i in range(fm.a_elems):
        pos = op.elem_bits * (i % op.elems_per_reg) + op.shift
        regs[:, :, i // op.elems_per_reg] |= a_codes[:, :, i] << np.uint64(pos)
    return regs.astype(np.uint32)


def _unpack_a(fm: FormMeta, a_regs: Any) -> np.ndarray:
    op = fm.form.operands["a"]
    regs = np.asarray(a_regs)
    if regs.ndim == 2:
        regs = regs[None]
    if regs.ndim != 3 or regs.shape[1:] != (32, op.count) or regs.dtype.kind not in "ui":
        raise BadArgument(f"a_regs must be integers of shape [T, 32, {op.count}], got {regs.shape} {regs.dtype}")
    regs = regs.astype(np.uint64)
    bits = element_bits(fm)
    out = np.zeros(regs.shape[:2] + (fm.a_elems,), dtype=np.uint64)
    for i in range(fm.a_elems):
        pos = op.elem_bits * (i % op.elems_per_reg) + op.shift
        out[:, :, i] = (regs[:, :, i // op.elems_per_reg] >> np.uint64(pos)) & np.uint64((1 << bits) - 1)
    return out


def _e_array(e_regs: Any, T: int | None = None) -> np.ndarray:
    e = np.asarray(e_regs)
    if e.ndim == 1:
        e = e[None]
    if e.ndim != 2 or e.shape[1] != 32 or e.dtype.kind not in "ui":
        raise BadArgument(f"e_regs must be integers of shape [T, 32], got {e.shape} {e.dtype}")
    if T is not None and e.shape[0] != T:
        raise BadArgument(f"e_regs has {e.shape[0]} instances, a_regs has {T}")
    return e.astype(np.uint64) & np.uint64(0xFFFFFFFF)


def first_not_fitting(fm: FormMeta, mask: int) -> int:
    """Column of the first non-zero (in increasing order) after which the chunk no longer fits."""
    prefix = 0
    for p in range(fm.gran.width):
        if mask >> p & 1:
            prefix |= 1 << p
            if not codec.representable(fm, prefix):
                return p
    raise ValueError("mask is representable")


# ----------------------------------------------------------------------------------
# compress / decompress

def compress(form: Form | str, A_dense: Any, sel: int | None = None, order: str = "ascending"):
    """Dense A (encodings) -> (a_regs [T,32,nregs] uint32, e_regs [T,32] uint32).

    ``sel`` defaults to the smallest legal selector; lanes that do not contribute metadata
    under ``sel`` get e = 0.  ``order='descending'`` writes every chunk's indices in
    reversed order (plain ``.sp`` only).  Raises :class:`NotSparse` with a witness.
    """
    fm, sel = _fm_sel(form, sel)
    A, _ = _as_codes(fm, A_dense)
    T = A.shape[0]
    w, s, C = fm.gran.width, fm.gran.stored, fm.chunks_per_row
    chunks = A.reshape(T, fm.rows, C, w)
    nzv, nzb = zero_masks(fm, chunks)
    weights = (1 << np.arange(w)).astype(np.int64)
    mask_v = (nzv.astype(np.int64) * weights).sum(-1)
    mask_b = (nzb.astype(np.int64) * weights).sum(-1)
    fits = np.asarray(codec.representable(fm, mask_v), dtype=bool)
    if not fits.all():
        t, r, c = (int(x) for x in np.argwhere(~fits)[0])
        m = int(mask_v[t, r, c])
        raise NotSparse(SparsityWitness(t, r, c, [c * w + p for p in range(w) if m >> p & 1],
                                        c * w + first_not_fitting(fm, m), fm.gran.id, w, s))
    mask = np.where(np.asarray(codec.representable(fm, mask_b), dtype=bool), mask_b, mask_v)
    nib = np.asarray(codec.encode_nibble(fm, mask, order, invalid=-1), dtype=np.int64)
    assert (nib >= 0).all(), "encoder found no nibble for a representable chunk"
    stored = np.stack([np.take_along_axis(chunks, np.asarray(codec.offset(fm, j, nib))[..., None], -1)[..., 0]
                       for j in range(s)], axis=-1)                       # [T, M, C, s]
    slots = fm.a_slots()                                                  # [M, C, s, 2]
    a_codes = np.zeros((T, 32, fm.a_elems), dtype=np.uint64)
    a_codes[:, slots[..., 0], slots[..., 1]] = stored
    e = np.zeros((T, 32), dtype=np.uint64)
    tab = fm.e_table(sel)
    contrib = nib[:, tab[:, 2], tab[:, 3]].astype(np.uint64) << tab[:, 4].astype(np.uint64)
    for p in range(tab.shape[0]):                                         # nibbles are disjoint: + is |
        e[:, tab[p, 0]] |= contrib[:, p]
    return pack_a(fm, a_codes), e.astype(np.uint32)


def _read(fm: FormMeta, a_regs: Any, e_regs: Any, sel: int, allow_ub: bool):
    a_codes = _unpack_a(fm, a_regs)
    T = a_codes.shape[0]
    e = _e_array(e_regs, T)
    slots = fm.a_slots()
    stored = a_codes[:, slots[..., 0], slots[..., 1]]                     # [T, M, C, s]
    tab = fm.e_table(sel)
    nib = np.zeros((T, fm.rows, fm.chunks_per_row), dtype=np.int64)
    nib[:, tab[:, 2], tab[:, 3]] = ((e[:, tab[:, 0]] >> tab[:, 4].astype(np.uint64)) & np.uint64(15)).astype(np.int64)
    if not allow_ub:
        legal = np.zeros(16, dtype=bool)
        legal[list(fm.legal_nibbles)] = True
        bad = ~legal[nib]
        if bad.any():
            t, r, c = (int(x) for x in np.argwhere(bad)[0])
            hit = tab[(tab[:, 2] == r) & (tab[:, 3] == c)][0]
            v = int(nib[t, r, c])
            rules = [{"id": ru.id, "message": ru.describe(v), "section": ru.section, "text": ru.text}
                     for ru in fm.broken_rules(v)]
            raise InvalidMetadata(MetadataWitness(t, int(hit[0]), int(hit[1]), (int(hit[4]) + 3, int(hit[4])),
                                                  r, c, v, rules))
    return stored, nib


def decompress(form: Form | str, a_regs: Any, e_regs: Any, sel: int | None = None) -> np.ndarray:
    """(a_regs, e_regs) -> dense A [T, M, K] (encodings, uint64).  Raises :class:`InvalidMetadata`."""
    fm, sel = _fm_sel(form, sel)
    stored, nib = _read(fm, a_regs, e_regs, sel, allow_ub=False)
    T = stored.shape[0]
    w, s = fm.gran.width, fm.gran.stored
    out = np.zeros((T, fm.rows, fm.chunks_per_row, w), dtype=np.uint64)
    for j in range(s):
        off = np.asarray(codec.offset(fm, j, nib), dtype=np.int64)
        np.put_along_axis(out, off[..., None], stored[..., j][..., None], -1)
    return out.reshape(T, fm.rows, fm.k)


def gather_terms(form: Form | str, a_regs: Any, e_regs: Any, sel: int | None = None, allow_ub: bool = False):
    """The sparse dot-product terms: (vals [T, M, K/2] encodings, kidx [T, M, K/2] logical k).

    For output row m the hardware multiplies stored element c (compressed column c, in
    register order) by B[kidx[m, c], n].  With ``allow_ub=True`` invalid nibbles are not
    rejected and are read literally (stored j -> offset(j, nib)): a repeated index then
    yields two terms with the same k (the 'sum' reading of undefined behaviour).
    """
    fm, sel = _fm_sel(form, sel)
    stored, nib = _read(fm, a_regs, e_regs, sel, allow_ub=allow_ub)
    T = stored.shape[0]
    w, s, C = fm.gran.width, fm.gran.stored, fm.chunks_per_row
    kidx = np.stack([np.asarray(codec.offset(fm, j, nib), dtype=np.int64) for j in range(s)], axis=-1)
    kidx = kidx + (np.arange(C) * w)[None, None, :, None]
    return stored.reshape(T, fm.rows, C * s), kidx.reshape(T, fm.rows, C * s)


def is_sparse(form: Form | str, A_dense: Any) -> bool:
    """Whether every chunk of A fits the form's granularity."""
    try:
        compress(form, A_dense)
        return True
    except NotSparse:
        return False


def sparse_terms(form: Form | str, A_dense: Any, order: str = "ascending"):
    """Matrix level: the terms the hardware multiplies for a dense structured-sparse A.

    ``compress`` then ``gather_terms``: (vals [T, M, K/2] encodings, kidx [T, M, K/2]).
    Where a chunk has fewer non-zeros than stored slots, the padding zeros sit at the
    lowest free columns (compress's canonical choice).  That choice is visible in D only
    through 0 * B[k] for a non-finite B[k] (0 * Inf = NaN): with finite B every choice
    gives the same D.
    """
    fm = meta(form) if not isinstance(form, FormMeta) else form
    a, e = compress(fm.form, A_dense, sel=fm.selectors[0], order=order)
    return gather_terms(fm.form, a, e, sel=fm.selectors[0])
