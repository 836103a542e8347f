"""The wmma obligations in ``formal.prove``'s registry (``ptx-formal prove --all``).

Registered at import of :mod:`formal.wmma`.  Three groups:

* ``wmma.memory.*`` -- per wmma.load/.store form (state spaces merged: the address rules do
  not depend on them): the two readings of the alignment rule agree, overlap <=> stride
  below the default, the default-stride table = the leading-dimension size;
* ``wmma.theorem.*`` -- the prose theorems over every fragment map.  The claims that are
  *counterexamples* (a hypothesis is needed; f16 <-> f32 accumulator reinterpretation is
  map dependent) are registered as existence claims ("two rule-consistent maps give
  different results"), so that the expected outcome is Proved and the witness is kept;
* ``wmma.map.covers`` -- every observed fragment map covers its matrix (a consequence of
  the rules every observation must meet).  Duplication, row-vs-col and load-vs-store are
  observations, not requirements: ``ptx-formal wmma maps --properties`` reports them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json

from .. import prove as P
from . import maps, memory, theorems
from .results import Result

SECTION = "9.7.14.4"


def _key(*parts) -> str:
    return hashlib.sha1(repr(parts).encode()).hexdigest()[:16]


def _native(ob: P.Obligation, r: Result, opts: P.Options, existential: bool = False):
    """A formal.wmma Result as a formal.prove result (existential: refuted <=> the example exists)."""
    cc = r.cross_check
    if cc is not None and not cc.get("agrees", True):
        return P.Unknown(ob, f"Z3 and enumeration disagree: {cc}", r.solver, r.time_s)
    if r.status == "unknown":
        return P.Unknown(ob, r.note or "unknown", r.solver, r.time_s)
    if existential:
        if r.status == "refuted":
            return P.Proved(ob, r.solver, r.time_s, None,
                            note="example (satisfiable query; the model is the certificate): " + json.dumps(r.witness))
        return P.Refuted(ob, {"no_example": "the solver proved that no such pair of maps exists"}, r.solver, r.time_s,
                         r.smt2 if opts.certificates else None)
    if r.status == "proved":
        return P.Proved(ob, r.solver, r.time_s, r.smt2 if opts.certificates else None, note=r.note)
    return P.Refuted(ob, r.witness or {}, r.solver, r.time_s, note=r.note)


_SHARED: dict = {}   # fn -> its output: one theorem function decides several obligations


def _once(fn):
    def call():
        if fn not in _SHARED:
            _SHARED[fn] = fn()
        return _SHARED[fn]
    return call


def _ob(family: str, subject: str, claim: str, fn, cover, existential: bool = False, section: str = SECTION,
        pick: str | None = None) -> P.Obligation:
    ob = P.Obligation(family, subject, claim, key=_key(family, subject), cover=list(cover), section=section,
                      share=f"wmma:{fn.__qualname__}" if pick else "")
    if pick:
        fn = _once(fn)

    def run(opts: P.Options, ob=ob):
        out = fn()
        rs = out if isinstance(out, list) else [out]
        r = next((x for x in rs if x.obligation == pick), None) if pick else rs[0]
        if r is None:
            return P.Unknown(ob, f"no result named {pick}")
        return _native(ob, r, opts, existential)
    ob.run = run
    return ob


_THEOREMS = [
    # (family, claim, function, result name to pick, existential)
    ("wmma.theorem.pipeline", "load -> wmma.mma -> store writes F(A, B, C) to every cell of D, for every shape and every "
     "surjective fragment maps (any holder of a duplicated cell read)", theorems.pipeline_general, None, False),
    ("wmma.theorem.pipeline_small", "the same on m2n2k2 with every map fully symbolic and D = A*B + C mod 8",
     theorems.pipeline_small, None, False),
    ("wmma.theorem.pipeline_needs_coverage", "some A map that misses a cell makes the stored D wrong",
     lambda: theorems.pipeline_small(covers=False, width=4), None, True),
    ("wmma.theorem.elementwise", "a uniform, in-place elementwise op on a loaded fragment denotes the op on the "
     "matrix (scaling a fragment scales the matrix)", theorems.elementwise_general, None, False),
    ("wmma.theorem.elementwise_needs_uniform", "a lane-dependent op gives different matrices under two "
     "rule-consistent maps", theorems.elementwise_counterexamples, "wmma.theorem.elementwise_needs_non_uniform", True),
    ("wmma.theorem.elementwise_needs_order", "reordering elements gives different matrices under two rule-consistent maps",
     theorems.elementwise_counterexamples, "wmma.theorem.elementwise_needs_reordered", True),
    ("wmma.theorem.elementwise_needs_uniform_dup", "on a duplicated fragment a lane-dependent op makes the result depend "
     "on which copy wmma.mma reads", theorems.elementwise_counterexamples,
     "wmma.theorem.elementwise_needs_uniform[duplicated]", True),
    ("wmma.theorem.store_load_roundtrip", "store(load(X)) = X when the store map is the load map",
     theorems.store_load_roundtrip_general, None, False),
    ("wmma.theorem.accumulator_f16_to_f32_undefined", "two rule-consistent (.f16, .f32) accumulator map pairs give "
     "different results for an in-place .f16 -> .f32 conversion", theorems.accumulator_reinterpretation,
     "wmma.theorem.accumulator_reinterpretation[f16->f32]", True),
    ("wmma.theorem.accumulator_f32_to_f16_undefined", "the same for .f32 -> .f16", theorems.accumulator_reinterpretation,
     "wmma.theorem.accumulator_reinterpretation[f32->f16]", True),
    ("wmma.theorem.accumulator_equal_maps", "with equal .f16 and .f32 maps the in-place conversion is exact",
     theorems.accumulator_reinterpretation, "wmma.theorem.accumulator_reinterpretation[equal maps]", False),
    ("wmma.theorem.accumulator_sm70_observed", "on the published sm_70 maps an in-place .f16 -> .f32 conversion moves "
     "values between cells", theorems.accumulator_reinterpretation_observed, None, True),
]


def obligations_for(forms) -> list[P.Obligation]:
    fs = [f for f in forms if f.is_wmma]
    if not fs:
        return []
    out: list[P.Obligation] = []
    cover_all = [(f.opcode, "wmma") for f in fs]
    for fam, claim, fn, pick, ex in _THEOREMS:
        out.append(_ob(fam, "every wmma form", claim, fn, cover_all, ex, "9.7.14.4.1", pick))
    for name in ("s4", "u4", "b1.xor", "b1.and"):
        cov = [(f.opcode, "wmma") for f in fs if f.atype in ("s4", "u4", "b1") or f.btype in ("s4", "u4", "b1")
               or (f.family != "wmma.mma" and f.shape in ("m8n8k32", "m8n8k128"))]
        out.append(_ob("wmma.theorem.subbyte_order_invariance", name, "the in-byte order of sub-byte elements "
                       "cannot change load -> mma -> store", theorems.subbyte_order_invariance, cov or cover_all,
                       False, "9.7.14.4.2", f"wmma.theorem.subbyte_order_invariance[{name}]"))
    # per form: the memory rules
    groups: dict[str, list] = {}
    for f in fs:
        if f.family in ("wmma.load", "wmma.store"):
            base = dataclasses.replace(f, space=None, aligned=True).opcode     # same memory view
            groups.setdefault(base, []).append(f)
    for base, members in groups.items():
        try:
            view = memory.memory_view(base)
        except Exception:  # noqa: BLE001 - an undocumented spelling in `forms` has no memory view
            continue
        cov = [(f.opcode, "memory") for f in members]
        out.append(_ob("wmma.memory.align_readings_agree", base, "each instance start aligned <=> ptr and stride * "
                       "elemsize multiples of the fragment size", lambda v=view: memory.prove_align_readings_agree(v),
                       cov, section="9.7.14.4.2"))
        out.append(_ob("wmma.memory.overlap_iff_below_default", base, "two cells share an address <=> stride < default",
                       lambda v=view: memory.prove_overlap_iff_below_default(v), cov, section="9.7.14.4.3"))
        out.append(_ob("wmma.memory.default_is_leading_size", base, "default-stride table = leading-dimension size",
                       lambda v=view: memory.prove_default_is_leading_size(v), cov, section="9.7.14.4.2"))
    # observed maps must cover their matrices
    for m in maps.all_maps():
        out.append(_ob("wmma.map.covers", f"{m.id} ({m.evidence})", "every cell of the matrix is held by some slot",
                       lambda m=m: maps.prove_covers(m), [], section="9.7.14.4.1"))
    return out


def register() -> None:
    P.register_obligations("wmma", obligations_for)
