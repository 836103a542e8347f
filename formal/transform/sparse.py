"""The sparse A fragment is the dense half-K A fragment plus metadata.

For ``mma.sp`` the A operand is the compressed M x K/2 matrix (9.7.14.6).  Three facts,
each proved by Z3 with an enumeration cross-check:

1. **structure** -- the compressed A layout of the sparse form equals the dense A layout
   of the half-K form (e.g. ``mma.sp.m16n8k32`` vs ``mma.m16n8k16``), register for register;
2. **chunks** -- the metadata engineer's reading of the A fragment (``formal.metadata``:
   each element's row, chunk and stored slot j) equals the one derived from the dense
   layout: compressed column c is chunk ``c // stored``, slot ``c % stored``;
3. **decompression** -- with the metadata nibble ``nib`` of its chunk, the element at
   (lane, reg, elem) stands for logical column ``width * chunk + offset(j, nib)`` (the
   offset formula of ``specs/metadata.toml``); for every legal nibble the map is injective
   (no two stored elements claim one logical position).
"""

from __future__ import annotations

import numpy as np

from .. import algebra as alg
from .. import catalog as cat
from ..algebra import Proof
from .spaces import LayoutMap, TransformError


def dense_opcode_for(sparse_opcode: str) -> str:
    """The dense form with half the K of a sparse form (same types)."""
    f = cat.parse(sparse_opcode)
    if not f.is_sparse:
        raise TransformError(f"{f.opcode} is not a sparse mma")
    m, n, k = f.mnk
    op = f.opcode
    op = op.replace("mma.sp::ordered_metadata.", "mma.").replace("mma.sp.", "mma.")
    op = op.replace(f"m{m}n{n}k{k}", f"m{m}n{n}k{k // 2}")
    cat.parse(op)
    return op


def structure(sparse_opcode: str, dense_opcode: str | None = None) -> Proof:
    from ..layout import fragment

    dense_opcode = dense_opcode or dense_opcode_for(sparse_opcode)
    s = LayoutMap(fragment(sparse_opcode, "a"))
    d = LayoutMap(fragment(dense_opcode, "a"))
    if s.ins != d.ins or s.outs != d.outs:
        return Proof("refuted", f"compressed A of {sparse_opcode} == dense A of {dense_opcode}",
                     detail=f"domains differ: {s.signature()} vs {d.signature()}")
    p = s.equals(d, names=("sparse", "dense"))
    p.claim = f"compressed A of {cat.parse(sparse_opcode).opcode} == dense A of {cat.parse(dense_opcode).opcode}"
    return p


def _meta(sparse_opcode: str):
    from ..metadata.spec import meta
    return meta(sparse_opcode)


def chunks(sparse_opcode: str, dense_opcode: str | None = None) -> Proof:
    """formal.metadata's (row, chunk, j) of each A element == (row, c // stored, c % stored)
    of the dense layout's (row, c)."""
    from ..layout import fragment

    dense_opcode = dense_opcode or dense_opcode_for(sparse_opcode)
    fm = _meta(sparse_opcode)
    lay = fragment(dense_opcode, "a")
    st = fm.gran.stored
    tab = fm.a_table()          # lane, i, row, chunk, j, ccol
    shape = (32, lay.nregs, lay.epr)
    cols = {"row": np.zeros(shape, np.int64), "chunk": np.zeros(shape, np.int64), "j": np.zeros(shape, np.int64)}
    held = np.zeros(shape, bool)
    for lane, i, row, ch, j, _c in tab:
        r, e = divmod(int(i), lay.epr)
        cols["row"][lane, r, e], cols["chunk"][lane, r, e], cols["j"][lane, r, e] = row, ch, j
        held[lane, r, e] = True
    ins = [("lane", 32), ("reg", lay.nregs), ("elem", lay.epr)]
    outs = [("row", lay.rows), ("chunk", fm.chunks_per_row), ("j", st)]
    theirs = alg.TableMap(ins, outs, cols, defined=held, name="formal.metadata A chunks")
    to_chunk = alg.from_formulas([("row", lay.rows), ("col", lay.cols)], outs,
                                 {"row": "row", "chunk": f"col // {st}", "j": f"col % {st}"}, name="c -> (c // s, c % s)")
    ours = alg.Composed(LayoutMap(lay), to_chunk)
    ours.name = "dense layout"
    p = ours.equals(theirs, names=("dense", "metadata"))
    p.claim = (f"formal.metadata's (row, chunk, slot) of each A element of {fm.form.opcode} == (row, c // {st}, "
               f"c % {st}) of the dense {cat.parse(dense_opcode).opcode} layout")
    return p


def decompressed(sparse_opcode: str, dense_opcode: str | None = None) -> alg.Map:
    """(lane, reg, elem, nib) -> logical (row, col) of the M x K matrix, for legal nibbles."""
    from ..layout import fragment

    dense_opcode = dense_opcode or dense_opcode_for(sparse_opcode)
    fm = _meta(sparse_opcode)
    lay = fragment(dense_opcode, "a")
    st, w = fm.gran.stored, fm.gran.width
    legal = list(fm.legal_nibbles)
    off = fm.gran.offset.src
    dense = LayoutMap(lay)
    to_logical = alg.from_formulas(
        [("row", lay.rows), ("col", lay.cols), ("nib", 16)], [("row", fm.rows), ("col", fm.k)],
        {"row": "row", "col": f"{w} * (col // {st}) + ({off})"},
        let={"j": f"col % {st}"}, where=f"nib in {legal}", name="decompress")

    class _M(alg.Map):
        def __init__(self):
            self.ins = alg._dims([("lane", 32), ("reg", lay.nregs), ("elem", lay.epr), ("nib", 16)])
            self.outs = to_logical.outs
            self.name = f"decompressed A of {fm.form.opcode}"

        def _eval(self, env):
            rc = dense._eval(env)
            shape = np.shape(env["lane"])
            return to_logical._eval({"row": np.broadcast_to(rc["row"], shape), "col": np.broadcast_to(rc["col"], shape),
                                     "nib": env["nib"]})

        def _z3(self, env):
            rc = dense._z3(env)
            return to_logical._z3({"row": rc["row"], "col": rc["col"], "nib": env["nib"]})

        def _dom_eval(self, env):
            z = np.zeros_like(env["nib"])
            return np.logical_and(dense._dom_eval(env), to_logical._dom_eval({"nib": env["nib"], "row": z, "col": z}))

        def _dom_z3(self, env):
            import z3
            return z3.And(dense._dom_z3(env), to_logical._dom_z3({"nib": env["nib"], "row": 0, "col": 0}))

    return _M()


def decompression_injective(sparse_opcode: str) -> list[Proof]:
    """For each legal nibble n (the same in every chunk): no two A elements decompress to one
    logical position."""
    fm = _meta(sparse_opcode)
    m = decompressed(sparse_opcode)
    out = []
    for n in fm.legal_nibbles:
        p = m.restrict(nib=n).injective()
        p.claim = f"with every metadata nibble = {n:#06b}, the A elements of {fm.form.opcode} decompress to distinct positions"
        out.append(p)
    return out


def prove_all(sparse_opcode: str) -> list[Proof]:
    return [structure(sparse_opcode), chunks(sparse_opcode)] + decompression_injective(sparse_opcode)
