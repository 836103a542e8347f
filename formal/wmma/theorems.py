"""Theorems the wmma text states in prose, proved over EVERY fragment map the rules allow.

PTX leaves the fragment map unspecified (9.7.14.4.1); what the rules do fix is modelled
here, and nothing more:

* a *fragment map* M sends each slot (lane, element) of a fragment to a cell (row, col) of
  its matrix; wmma.load puts mem[M(s)] in slot s; wmma.store writes slot s to cell M(s);
* M covers the matrix (surjective): otherwise wmma.mma could not compute D = A*B + C from
  the registers.  Cells may be held by several slots (.f16 A/B: 16 elements per lane over
  256 cells);
* wmma.mma is *some* function F of the matrices its operands denote, returned as the D
  fragment under the D map: ``d[s] = F(den(a), den(b), den(c))[M_D(s)]``, where
  ``den(frag)[cell] = frag[sec(cell)]`` reads ONE holder ``sec(cell)`` of each cell (any
  one: which copy the hardware reads is unspecified too).  F is uninterpreted, so every
  arithmetic the text allows (unspecified accumulation order, rounding, subnormal
  handling; integer wrap/saturation; xor/and + popc) is covered.

Results are :class:`~formal.wmma.results.Result` (Proved / Refuted with a witness /
Unknown).  The general theorems use uninterpreted sorts for slots, cells and values, so
they hold for every shape at once; each also has a finite instance on a small shape
with fully symbolic maps and concrete arithmetic, and, where a hypothesis is dropped,
the refutation that shows why it is needed.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import z3

from .. import catalog as cat
from .results import PROVED, REFUTED, UNKNOWN, Result, check_negation, model_value

# ----------------------------------------------------------------------------------
# general proofs over uninterpreted sorts


def _surjective(M, sec, C) -> z3.BoolRef:
    c = z3.Const("c_" + str(M), C)
    return z3.ForAll([c], M(sec(c)) == c)


def den_load_identity(tag: str = "") -> Result:
    """Lemma: for a surjective map M with holder choice sec (M(sec(c)) = c), the matrix a
    loaded fragment denotes is the matrix in memory: den(load(mem)) = mem, as arrays."""
    S, C, V = z3.DeclareSort("Slot" + tag), z3.DeclareSort("Cell" + tag), z3.DeclareSort("Val" + tag)
    M = z3.Function("M" + tag, S, C)
    sec = z3.Function("sec" + tag, C, S)
    mem = z3.Const("mem" + tag, z3.ArraySort(C, V))
    s, c = z3.Const("s", S), z3.Const("c", C)
    frag = z3.Lambda([s], mem[M(s)])
    den = z3.Lambda([c], frag[sec(c)])
    return check_negation(f"wmma.theorem.den_load_identity[{tag or 'any'}]",
                          "for every surjective map and every choice of holder: den(load(mem)) = mem",
                          [_surjective(M, sec, C), den != mem],
                          hypotheses=["the map covers the matrix (a holder sec(c) with M(sec(c)) = c exists)"])


def pipeline_general() -> Result:
    """load A, B, C -> mma -> store D writes F(A, B, C) at every cell, for every surjective map.

    Two steps, each decided by Z3 over uninterpreted sorts (so for every shape and type at
    once): the lemma den(load(mem)) = mem for each of A, B, C (:func:`den_load_identity`),
    then, with the denoted matrices equal to the ones in memory, every slot of the D
    fragment carries F(A, B, C) at its cell and every cell of D is written.
    """
    lemmas = [den_load_identity(x) for x in ("A", "B", "C")]
    SD = z3.DeclareSort("SlotD")
    CA, CB, CC = (z3.DeclareSort(n) for n in ("CellA", "CellB", "CellC"))      # D's cells are C's (M x N)
    VA, VB, VC, VD = (z3.DeclareSort(n) for n in ("ValA", "ValB", "ValC", "ValD"))
    MD = z3.Function("MD", SD, CC)
    sD = z3.Function("secD", CC, SD)
    memA = z3.Const("memA", z3.ArraySort(CA, VA))
    memB = z3.Const("memB", z3.ArraySort(CB, VB))
    memC = z3.Const("memC", z3.ArraySort(CC, VC))
    denA = z3.Const("denA", z3.ArraySort(CA, VA))       # den(load(memA)) etc.
    denB = z3.Const("denB", z3.ArraySort(CB, VB))
    denC = z3.Const("denC", z3.ArraySort(CC, VC))
    F = z3.Function("F", z3.ArraySort(CA, VA), z3.ArraySort(CB, VB), z3.ArraySort(CC, VC), z3.ArraySort(CC, VD))
    s = z3.Const("s", SD)
    d = z3.Lambda([s], F(denA, denB, denC)[MD(s)])       # the D fragment wmma.mma returns
    s0, sx = z3.Const("s0", SD), z3.Const("sx", SD)
    c0 = z3.Const("c0", CC)
    main = check_negation(
        "wmma.theorem.pipeline[general].compose",
        "with den(load(mem)) = mem for A, B, C: every D slot carries F(A, B, C) at its cell and every cell is written",
        [denA == memA, denB == memB, denC == memC, _surjective(MD, sD, CC),
         z3.Or(d[s0] != F(memA, memB, memC)[MD(s0)], z3.ForAll([sx], MD(sx) != c0))])
    parts = lemmas + [main]
    status = PROVED if all(p.proved for p in parts) else (REFUTED if any(p.status == REFUTED for p in parts) else UNKNOWN)
    return Result("wmma.theorem.pipeline[general]",
                  "for every shape and every surjective fragment maps M_A, M_B, M_C, M_D (any holder of a duplicated "
                  "cell read by wmma.mma), load -> wmma.mma -> store writes F(A, B, C)[cell] to every cell of D, where "
                  "F is the matrix-level mma of the matrices in memory",
                  status, main.solver, sum(p.time_s for p in parts), None,
                  "\n".join(f"; ---- {p.obligation}\n{p.smt2}" for p in parts),
                  hypotheses=["each map covers its matrix (surjective)", "wmma.load: slot s holds mem[M(s)]",
                              "wmma.mma: d[s] = F(den(a), den(b), den(c))[M_D(s)], F any function of the three matrices",
                              "wmma.store: slot s is written to cell M_D(s)"],
                  note="steps: " + "; ".join(p.line() for p in parts))


def elementwise_general() -> Result:
    """A uniform, order-preserving elementwise op on a loaded fragment is the op on the matrix."""
    S, C, V = z3.DeclareSort("Slot"), z3.DeclareSort("Cell"), z3.DeclareSort("Val")
    M = z3.Function("M", S, C)
    sec = z3.Function("sec", C, S)
    f = z3.Function("f", V, V)                 # the same op for every thread and element
    mem = z3.Const("mem", z3.ArraySort(C, V))
    s, c = z3.Const("s", S), z3.Const("c", C)
    frag2 = z3.Lambda([s], f(mem[M(s)]))       # f applied to every register element, in place
    c0 = z3.Const("c0", C)
    s1, s2 = z3.Consts("s1 s2", S)
    denoted_wrong = frag2[sec(c0)] != f(mem[c0])
    inconsistent = z3.And(M(s1) == M(s2), frag2[s1] != frag2[s2])
    return check_negation(
        "wmma.theorem.elementwise[general]",
        "for every surjective fragment map M and every op f: applying f to every element of a loaded "
        "fragment (same f in every thread, elements kept in place) gives a fragment that denotes f applied "
        "to every element of the matrix, and its duplicated elements still agree (scaling a fragment "
        "scales the matrix)",
        [_surjective(M, sec, C), z3.Or(denoted_wrong, inconsistent)],
        hypotheses=["uniform: the same f, with the same parameters, in every thread and for every element",
                    "order unchanged: the new value of a slot depends only on the old value of that slot",
                    "the map covers the matrix"])


def store_load_roundtrip_general() -> Result:
    """store(load(X)) = X when the store map is the load map (the C/D fragment contract)."""
    S, C, V = z3.DeclareSort("Slot"), z3.DeclareSort("Cell"), z3.DeclareSort("Val")
    M = z3.Function("M", S, C)
    sec = z3.Function("sec", C, S)
    mem = z3.Const("mem", z3.ArraySort(C, V))
    s0 = z3.Const("s0", S)
    c0 = z3.Const("c0", C)
    sx = z3.Const("sx", S)
    frag = z3.Lambda([z3.Const("s", S)], mem[M(z3.Const("s", S))])
    wrong = frag[s0] != mem[M(s0)]                  # the store writes frag[s0] at M(s0)
    unwritten = z3.ForAll([sx], M(sx) != c0)
    return check_negation(
        "wmma.theorem.store_load_roundtrip[general]",
        "if wmma.store uses the map wmma.load.c uses (same shape, type, layout), storing a loaded "
        "accumulator writes back exactly the matrix: every cell is written, each with its own value",
        [_surjective(M, sec, C), z3.Or(wrong, unwritten)],
        hypotheses=["store map = load map (observed: formal.wmma.maps.prove_same_map)", "the map covers the matrix"])


# ----------------------------------------------------------------------------------
# finite instances: small shapes, fully symbolic maps, concrete arithmetic

W = 8   # value width of the counterexample instances (small values read well in witnesses)


@dataclass
class SymMap:
    """A fully symbolic map from n_slots slots onto n_cells cells (plus a holder choice)."""

    name: str
    n_slots: int
    n_cells: int
    covers: bool = True
    width: int = W

    def __post_init__(self):
        self.m = [z3.BitVec(f"{self.name}_M{s}", 8) for s in range(self.n_slots)]
        self.sec = [z3.BitVec(f"{self.name}_sec{c}", 8) for c in range(self.n_cells)]
        self.free = [z3.BitVec(f"{self.name}_free{c}", self.width) for c in range(self.n_cells)]

    def constraints(self, bijective: bool = False) -> list:
        out = [z3.ULT(v, self.n_cells) for v in self.m] + [z3.ULT(v, self.n_slots) for v in self.sec]
        if self.covers:
            out += [self.lookup(self.sec[c]) == c for c in range(self.n_cells)]
        if bijective:
            out.append(z3.Distinct(*self.m))
        return out

    def lookup(self, s) -> z3.BitVecRef:
        e = z3.BitVecVal(0, 8)
        for k in range(self.n_slots):
            e = z3.If(s == k, self.m[k], e)
        return e

    def load(self, mem: list) -> list:
        """slot s <- mem[M(s)]"""
        return [_select(mem, self.m[s]) for s in range(self.n_slots)]

    def den(self, frag: list) -> list:
        """cell c <- frag[sec(c)], the holder wmma.mma reads; a cell without holder reads a free value."""
        out = []
        for c in range(self.n_cells):
            v = _select(frag, self.sec[c])
            if not self.covers:
                v = z3.If(self.lookup(self.sec[c]) == c, v, self.free[c])
            out.append(v)
        return out

    def store(self, frag: list, old: list) -> list:
        """mem'[c] = frag[s] for the last slot s with M(s) = c (unwritten cells keep `old`)."""
        out = list(old)
        for s in range(self.n_slots):
            out = [z3.If(self.m[s] == c, frag[s], out[c]) for c in range(self.n_cells)]
        return out

    def value(self, mo: z3.ModelRef) -> list[int]:
        return [model_value(mo, v) for v in self.m]


def _select(vals: list, i) -> z3.BitVecRef:
    e = vals[0]
    for k in range(1, len(vals)):
        e = z3.If(i == k, vals[k], e)
    return e


def _matmul_add(A, B, C, m, n, k):
    return [sum((A[i * k + p] * B[p * n + j] for p in range(k)), C[i * n + j]) for i in range(m) for j in range(n)]


def _memo(fn):
    """Cache a pure theorem (same arguments, same spec -> same result): the prove registry,
    ``wmma prove`` and the tests ask for the same seconds-long Z3 query in one process."""
    cache: dict = {}

    @functools.wraps(fn)
    def call(*args, **kw):
        key = (args, tuple(sorted(kw.items())))
        if key not in cache:
            cache[key] = fn(*args, **kw)
        r = cache[key]
        return list(r) if isinstance(r, list) else r
    return call


@_memo
def pipeline_small(m: int = 2, n: int = 2, k: int = 2, lanes: int = 2, covers: bool = True, width: int = 3) -> Result:
    """The pipeline theorem on an m x n x k shape with every map fully symbolic.

    A has twice as many slots as cells (duplication, as .f16 A/B); B, C and D as many.
    Values are ``width``-bit integers and the matrix-level mma is D = A*B + C modulo
    2**width (any concrete F would do; the general theorem covers every F).  With
    ``covers=False`` the A map need not cover A: Z3 then finds a map and a matrix for which
    the stored D is wrong (the hypothesis is necessary).
    """
    W = width
    na, nb, nc = m * k, k * n, m * n
    MA = SymMap("A", 2 * na, na, covers, W)
    MB, MC, MD = SymMap("B", nb, nb, width=W), SymMap("C", nc, nc, width=W), SymMap("D", nc, nc, width=W)
    memA = [z3.BitVec(f"memA{i}", W) for i in range(na)]
    memB = [z3.BitVec(f"memB{i}", W) for i in range(nb)]
    memC = [z3.BitVec(f"memC{i}", W) for i in range(nc)]
    old = [z3.BitVec(f"memD{i}", W) for i in range(nc)]
    X = _matmul_add(MA.den(MA.load(memA)), MB.den(MB.load(memB)), MC.den(MC.load(memC)), m, n, k)
    d = [_select(X, MD.m[s]) for s in range(MD.n_slots)]
    stored = MD.store(d, old)
    want = _matmul_add(memA, memB, memC, m, n, k)
    cons = MA.constraints() + MB.constraints() + MC.constraints() + MD.constraints()
    if not covers:
        # the A map may miss cells; wmma.mma still reads a holder of every cell that has one
        held = [z3.Implies(z3.Or(*[v == c for v in MA.m]), MA.lookup(MA.sec[c]) == c) for c in range(na)]
        cons = [z3.ULT(v, MA.n_cells) for v in MA.m] + [z3.ULT(v, MA.n_slots) for v in MA.sec] + held + \
            MB.constraints() + MC.constraints() + MD.constraints()
    bad = z3.Or(*[stored[c] != want[c] for c in range(nc)])

    def wit(mo):
        return {"A_map": MA.value(mo), "A_cells_uncovered": sorted(set(range(na)) - set(MA.value(mo))),
                "A": [model_value(mo, v) for v in memA], "B": [model_value(mo, v) for v in memB],
                "C": [model_value(mo, v) for v in memC],
                "stored_D": [model_value(mo, v) for v in stored], "expected_D": [model_value(mo, v) for v in want]}
    name = f"wmma.theorem.pipeline[m{m}n{n}k{k}{'' if covers else ', A map not covering'}]"
    stmt = (f"m{m}n{n}k{k}, {lanes} lanes, every fragment map symbolic (A: {2 * na} slots over {na} cells): "
            f"load -> mma (D = A*B + C mod 2^{W}) -> store gives A*B + C in every cell of D"
            + ("" if covers else ", even when the A map misses a cell"))
    return check_negation(name, stmt, cons + [bad], witness_fn=wit, timeout_ms=120000,
                          hypotheses=["maps cover their matrices"] if covers else ["(coverage of A dropped)"])


def _fixed_map(values: list[int]) -> list:
    return [z3.BitVecVal(v, 8) for v in values]


def elementwise_counterexamples(cells: int = 4, lanes: int = 2) -> list[Result]:
    """Why the two hypotheses of the elementwise theorem are needed: dropping either, two
    maps consistent with the rules (bijections) denote different matrices."""
    E = cells // lanes
    out = []
    for which in ("non-uniform", "reordered"):
        M1, M2 = SymMap("M1", cells, cells), SymMap("M2", cells, cells)
        X = [z3.BitVec(f"X{c}", W) for c in range(cells)]

        def op(frag):
            if which == "non-uniform":     # add 1 in lane 0 only (a lane-dependent parameter)
                return [fv + 1 if s // E == 0 else fv for s, fv in enumerate(frag)]
            # swap elements 0 and 1 of every lane (order of elements changed), op = identity
            return [frag[(s // E) * E + (1 - s % E if s % E < 2 else s % E)] for s in range(len(frag))]
        d1 = M1.den(op(M1.load(X)))
        d2 = M2.den(op(M2.load(X)))
        bad = z3.Or(*[d1[c] != d2[c] for c in range(cells)])

        def wit(mo, M1=M1, M2=M2, X=X, d1=d1, d2=d2):
            return {"map1": M1.value(mo), "map2": M2.value(mo), "X": [model_value(mo, v) for v in X],
                    "result_with_map1": [model_value(mo, v) for v in d1],
                    "result_with_map2": [model_value(mo, v) for v in d2]}
        r = check_negation(f"wmma.theorem.elementwise_needs_{which.replace('-', '_')}",
                           f"({which} op) the matrix a fragment denotes after the op is the same for every "
                           f"rule-consistent map ({cells} cells, {lanes} lanes)",
                           M1.constraints(True) + M2.constraints(True) + [bad], witness_fn=wit,
                           hypotheses=["maps are bijections (as C/D fragments)",
                                       "op: " + ("x + 1 in lane 0 only" if which == "non-uniform" else "swap elements 0 and 1 of each lane")])
        out.append(r)
    # duplication: a lane-dependent op makes the two copies of a cell disagree, so which copy
    # wmma.mma reads (unspecified) changes the result
    M = SymMap("Mdup", 2 * cells, cells)
    sec2 = [z3.BitVec(f"sec2_{c}", 8) for c in range(cells)]
    X = [z3.BitVec(f"X{c}", W) for c in range(cells)]
    E2 = 2 * cells // lanes
    frag = [fv + 1 if s // E2 == 0 else fv for s, fv in enumerate(M.load(X))]
    d1 = M.den(frag)
    d2 = [_select(frag, sec2[c]) for c in range(cells)]
    cons = M.constraints() + [z3.ULT(v, M.n_slots) for v in sec2] + [M.lookup(sec2[c]) == c for c in range(cells)]

    def witd(mo):
        return {"map": M.value(mo), "holder_read_1": [model_value(mo, v) for v in M.sec],
                "holder_read_2": [model_value(mo, v) for v in sec2], "X": [model_value(mo, v) for v in X],
                "result_1": [model_value(mo, v) for v in d1], "result_2": [model_value(mo, v) for v in d2]}
    out.append(check_negation("wmma.theorem.elementwise_needs_uniform[duplicated]",
                              f"(lane-dependent op on a fragment holding each of {cells} cells twice) the denoted "
                              "matrix does not depend on which copy wmma.mma reads",
                              cons + [z3.Or(*[d1[c] != d2[c] for c in range(cells)])], witness_fn=witd,
                              hypotheses=["op: x + 1 in lane 0 only"]))
    return out


@_memo
def accumulator_reinterpretation(cells: int = 4, lanes: int = 2) -> list[Result]:
    """Why converting an .f16 accumulator fragment to .f32 (or back) element by element is undefined.

    The rules fix the f16 C map and the f32 C map independently (both unspecified), so the
    claim 'converting each element in place gives the converted matrix' is refuted: Z3
    exhibits an f16 map and an f32 map, both bijections, for which it fails.  The same pair
    with equal maps makes the conversion work: two rule-consistent map pairs, two results.
    """
    out = []
    for src, dst in (("f16", "f32"), ("f32", "f16")):
        Ms, Md = SymMap("M" + src, cells, cells), SymMap("M" + dst, cells, cells)
        X = [z3.BitVec(f"X{c}", W) for c in range(cells)]
        # element i of the source fragment becomes element i of the destination (the value
        # conversion itself is irrelevant here: take it exact, i.e. the identity on values)
        got = Md.den(Ms.load(X))
        bad = z3.Or(*[got[c] != X[c] for c in range(cells)])

        def wit(mo, Ms=Ms, Md=Md, X=X, got=got):
            xs = [model_value(mo, v) for v in X]
            g = [model_value(mo, v) for v in got]
            first = next(c for c in range(cells) if g[c] != xs[c])
            ms, md = Ms.value(mo), Md.value(mo)
            return {f"{src}_map": ms, f"{dst}_map": md, "X": xs, "converted_matrix": g, "cell": first,
                    "cell_gets_value_of": ms[md.index(first)]}
        out.append(check_negation(
            f"wmma.theorem.accumulator_reinterpretation[{src}->{dst}]",
            f"converting every element of a .{src} accumulator fragment to .{dst} in place (element order "
            f"unchanged) yields a fragment denoting the converted matrix, for every rule-consistent pair of "
            f"(.{src}, .{dst}) maps ({cells} cells, {lanes} lanes)",
            Ms.constraints(True) + Md.constraints(True) + [bad], witness_fn=wit, minimize=Ms.m + Md.m,
            hypotheses=["both maps are bijections (C/D fragments hold each element once)",
                        "the rules relate the .f16 and .f32 accumulator maps in no way",
                        "the value conversion is exact (identity on values), so only the maps matter"]))
    # the converse: with equal maps the conversion is exact
    M = SymMap("Mboth", cells, cells)
    X = [z3.BitVec(f"X{c}", W) for c in range(cells)]
    got = M.den(M.load(X))
    out.append(check_negation("wmma.theorem.accumulator_reinterpretation[equal maps]",
                              "when the .f16 and .f32 accumulator maps are the same map, in-place conversion "
                              "denotes the converted matrix",
                              M.constraints(True) + [z3.Or(*[got[c] != X[c] for c in range(cells)])]))
    return out


def accumulator_reinterpretation_observed() -> Result:
    """The published maps: on sm_70 the .f16 and .f32 m16n16k16 accumulator maps differ, so an
    in-place conversion moves values between cells; on sm_75/sm_80 they coincide."""
    from .maps import find, third_party
    tp = third_party()
    m16 = find(tp, archs="sm_70", matrix="c", types="f16", layout="row")[0]
    m32 = find(tp, archs="sm_70", matrix="c", types="f32", layout="row")[0]
    a, b = m16.single(), m32.single()
    moved = [(l, i) for l in range(32) for i in range(8) if a[l, i] != b[l, i]]
    t0 = time.perf_counter()
    # Z3: is there a slot where the two published maps differ? (the minimal one)
    from .maps import prove_same_map
    same = prove_same_map(m16, m32, "sm_70 f16 vs f32 accumulator")
    r = Result("wmma.theorem.accumulator_reinterpretation[sm_70 observed]",
               "on sm_70 (third-party maps) an in-place .f16 -> .f32 accumulator conversion leaves every cell "
               "holding its own converted value",
               REFUTED if moved else PROVED, same.solver, time.perf_counter() - t0)
    if moved:
        l, i = moved[0]
        r.witness = {"lane": l, "element": i, "f16_cell": list(m16.cell(a[l, i])), "f32_cell": list(m32.cell(b[l, i])),
                     "moved_elements": len(moved), "of": 256,
                     "meaning": f"after conversion, cell {tuple(m32.cell(b[l, i]))} holds the value of cell {tuple(m16.cell(a[l, i]))}"}
    r.cross_check = {"agrees": same.status == r.status, "z3": same.line()}
    r.hypotheses = ["maps: specs/observed/wmma_third_party.toml (third-party-empirical)"]
    return r


# ----------------------------------------------------------------------------------
# sub-byte element order in memory


def _subbyte_perm(k: int, elem_bits: int) -> list[int]:
    """pi[j] = the LE element index whose bits the MSB-first reading calls element j
    (within one instance of K elements starting on a byte boundary), from the spec formulas."""
    from .memory import spec
    a = spec().address
    base = {"ptr": 0, "elem_bits": elem_bits}
    le = {int(a["bit"].eval(dict(base, index=j))): j for j in range(k)}
    return [le.get(int(a["bit_msb_first"].eval(dict(base, index=j))), -1) for j in range(k)]


def subbyte_order_invariance() -> list[Result]:
    """The in-byte order of .s4/.u4/.b1 elements (erratum subbyte-order) cannot change
    load A (.row) -> load B (.col) -> wmma.mma -> store D, for every sub-byte wmma.mma form."""
    out = []
    seen = set()
    for f in cat.documented_forms():
        if f.family != "wmma.mma" or f.atype not in ("s4", "u4", "b1"):
            continue
        key = (f.atype, f.bitop, f.alayout, f.blayout)
        if key in seen:
            continue
        seen.add(key)
        M, N, K = f.mnk
        eb = 1 if f.atype == "b1" else 4
        pi = _subbyte_perm(K, eb)
        name = f"wmma.theorem.subbyte_order_invariance[{f.atype}{'.' + f.bitop if f.bitop else ''}]"
        stmt = (f"{f.shape} .{f.atype} (A .{f.alayout}, B .{f.blayout}, the only layouts the syntax allows): every "
                f"element of D is the same whether a byte holds its lower-indexed element in its low or high bits")
        if sorted(pi) != list(range(K)):
            out.append(Result(name, stmt, REFUTED, "enumeration", 0.0, {"not_a_permutation": pi}))
            continue
        if (f.alayout, f.blayout) != ("row", "col"):
            out.append(Result(name, stmt, REFUTED, "catalog", 0.0, {"layouts": [f.alayout, f.blayout],
                              "why": "A row and B col are both contiguous along K only for .row x .col"}))
            continue
        # one element of D: row of A and column of B are both instances of K elements along k
        a = [z3.BitVec(f"a{j}", eb) for j in range(K)]
        b = [z3.BitVec(f"b{j}", eb) for j in range(K)]
        c = z3.BitVec("c", 32)
        if f.atype == "b1":
            op = (lambda x, y: x ^ y) if f.bitop == "xor" else (lambda x, y: x & y)
            dot = lambda p: sum(z3.ZeroExt(31, op(a[p[j]], b[p[j]])) for j in range(K))  # noqa: E731
        else:
            ext = z3.SignExt if f.atype == "s4" else z3.ZeroExt
            dot = lambda p: sum(ext(28, a[p[j]]) * ext(28, b[p[j]]) for j in range(K))  # noqa: E731
        ident = list(range(K))
        r = check_negation(name, stmt, [dot(ident) + c != dot(pi) + c], timeout_ms=120000,
                           hypotheses=["instances of the leading dimension start on byte boundaries (true of every "
                                       "legal access: align.row_start with a fragment of whole bytes)",
                                       "the same in-byte order applies to A and B (one memory system)",
                                       "D = sum over k + C in 32 bits, then wrap or .satfinite: a function of (sum, C)"])
        r.cross_check = {"agrees": True, "permutation": pi[:16] + (["..."] if K > 16 else [])}
        # enumeration on random vectors
        rng = np.random.default_rng(0)
        ok = True
        for _ in range(200):
            av = rng.integers(0, 1 << eb, K)
            bv = rng.integers(0, 1 << eb, K)
            if f.atype == "b1":
                g = (av ^ bv) if f.bitop == "xor" else (av & bv)
                v1, v2 = int(g.sum()), int(g[pi].sum())
            else:
                sa = np.where(av >= 8, av - 16, av) if f.atype == "s4" else av
                sb = np.where(bv >= 8, bv - 16, bv) if f.atype == "s4" else bv
                v1, v2 = int((sa * sb).sum()), int((sa[pi] * sb[pi]).sum())
            ok &= v1 == v2
        r.cross_check["agrees"] = ok
        r.cross_check["random_vectors"] = 200
        out.append(r)
    return out


# ----------------------------------------------------------------------------------
# obligations

@dataclass(frozen=True)
class Obligation:
    name: str
    statement: str
    run: Callable[[], Result | list[Result]]
    slow: bool = False


def obligations(per_form: bool = True, target: str = "sm_90", ptx: str = "8.5") -> list[Obligation]:
    """Every wmma obligation: theorems, map properties and per-form memory rules."""
    from . import maps, memory
    obs = [
        Obligation("wmma.theorem.pipeline[general]", "load -> mma -> store computes F(A, B, C) for every map", pipeline_general),
        Obligation("wmma.theorem.pipeline[m2n2k2]", "the same, finite, fully symbolic maps", pipeline_small),
        Obligation("wmma.theorem.pipeline[m2n2k2, A map not covering]", "coverage is needed",
                   lambda: pipeline_small(covers=False)),
        Obligation("wmma.theorem.elementwise[general]", "uniform elementwise ops commute with every map", elementwise_general),
        Obligation("wmma.theorem.elementwise_needs_*", "dropping a hypothesis: two maps, two results", elementwise_counterexamples),
        Obligation("wmma.theorem.store_load_roundtrip[general]", "store(load(X)) = X", store_load_roundtrip_general),
        Obligation("wmma.theorem.accumulator_reinterpretation", "f16 <-> f32 accumulator conversion is map dependent",
                   accumulator_reinterpretation),
        Obligation("wmma.theorem.accumulator_reinterpretation[sm_70 observed]", "the published sm_70 maps",
                   accumulator_reinterpretation_observed),
        Obligation("wmma.theorem.subbyte_order_invariance", "sub-byte in-byte order is unobservable", subbyte_order_invariance),
        Obligation("wmma.map.*", "properties of every observed map", lambda: maps.properties()),
    ]
    if per_form:
        for v in memory.memory_forms(target, ptx):
            if v.space:          # the state space does not enter the address rules
                continue
            obs.append(Obligation(f"wmma.memory[{v.opcode}]", "alignment readings agree; overlap <=> stride < default; "
                                  "default = leading-dimension size",
                                  lambda v=v: [memory.prove_align_readings_agree(v), memory.prove_overlap_iff_below_default(v),
                                               memory.prove_default_is_leading_size(v)], slow=True))
    return obs


def run_all(per_form: bool = False, include_slow: bool = False) -> list[Result]:
    out: list[Result] = []
    for ob in obligations(per_form):
        if ob.slow and not include_slow:
            continue
        r = ob.run()
        out += r if isinstance(r, list) else [r]
    return out


# expected outcome of each named obligation (refutations that are the point of the theorem)
EXPECTED_REFUTED = (
    "wmma.theorem.pipeline[m2n2k2, A map not covering]",
    "wmma.theorem.elementwise_needs_non_uniform",
    "wmma.theorem.elementwise_needs_reordered",
    "wmma.theorem.elementwise_needs_uniform[duplicated]",
    "wmma.theorem.accumulator_reinterpretation[f16->f32]",
    "wmma.theorem.accumulator_reinterpretation[f32->f16]",
    "wmma.theorem.accumulator_reinterpretation[sm_70 observed]",
)
