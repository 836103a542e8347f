"""Audit a hardware model (simulator, RTL reference, emulator) against the spec.

``formal.vectors.audit(opcode, model, arch="sm_90")`` runs the coverage vectors of
:mod:`formal.vectors` plus random ones through the user's model and through the
evaluator, and returns an :class:`AuditReport`: per coverage point which cases pass,
:attr:`AuditReport.caught_by` (the coverage points that exposed a difference), and for a
failing model element-level witnesses (the A row, B column and c feeding a wrong output
element, encodings and values, reduced with the model in the loop to the fewest terms that
still fail: :mod:`formal.vectors.witness`), the root causes (the smallest set of known wrong
variants that reproduce every failing element) and the points that fail only through other
elements of their warps.  :func:`identify` says which of the evaluator's architecture models
a model behaves like, on vectors built to tell every pair apart.

A *concrete* model has the evaluator's signature::

    def model(opcode, a, b, c, e=None, sel=None, arch=None):   # a, b, c: [T, 32, nregs]
        return d                                                 # [T, 32, nregs_d]

(``arch`` is passed only if the function accepts it; ``e``/``sel`` only for mma.sp).
For ``wmma.mma`` and block-scaled forms, where vectors are matrices, it is called as
``model(opcode, A, B, C)`` (``scale_a=``, ``scale_b=`` for block scaling) and returns D.

A *symbolic* model is one output element written with Z3 bit-vectors (wrap it with
:func:`z3_model`)::

    @formal.vectors.audit.z3_model
    def element(a, b, c):          # a, b: lists of K BitVecs (element widths), c: BitVec
        return d                   # BitVec of the D element's width

For ``mma.sp`` the K/2 stored terms are passed in the hardware's order, b already
gathered at each term's k.  Then, besides the vectors (the symbolic model is lifted to a
concrete one, element by element), Z3 searches directly for an input on which the model
and a Z3 encoding of the reference differ (:mod:`formal.vectors.z3num`): integer and b1
forms exactly over all K terms; floating-point forms over a slice of ``k_active``
non-zero terms (default 2) at spread positions, the others +0, every encoding (NaN, Inf,
subnormal) allowed.  The answer is Proved (for that slice), Refuted with a minimal
witness (fewest non-zero elements; cross-checked against the numpy evaluator), or Unknown
(timeout, or a path without a Z3 encoding) -- never a timeout reported as proved.
"""

from __future__ import annotations

import inspect
import sys
import time
import types
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import numpy as np

from ..catalog import Form, parse

# ------------------------------------------------------------------------------------------
# symbolic models


class SymbolicModel:
    """A user's Z3 model of one output element, usable as a concrete model too (lifted)."""

    def __init__(self, element: Callable, name: str | None = None):
        self.element = element
        self.__name__ = name or getattr(element, "__name__", "symbolic_model")
        self._cache: dict[tuple, Any] = {}

    def __call__(self, opcode, *args, **kw):
        return lift(self, opcode, *args, **kw)

    def __repr__(self) -> str:
        return f"z3_model({self.__name__})"


def z3_model(fn: Callable) -> SymbolicModel:
    """Mark ``fn(a, b, c) -> d`` (Z3 bit-vectors of one output element) as a symbolic model."""
    return fn if isinstance(fn, SymbolicModel) else SymbolicModel(fn)


def _elem_widths(form: Form) -> tuple[int, int, int, int]:
    from ..numerics.formats import get_format

    return tuple(get_format(t).bits for t in (form.atype, form.btype, form.c_type, form.dtype))  # type: ignore


class _Compiled:
    """A symbolic element model with its inputs as variables, evaluated by substitution."""

    def __init__(self, sm: SymbolicModel, form: Form, K: int):
        import z3

        wa, wb, wc, wd = _elem_widths(form)
        self.a = [z3.BitVec(f"a{i}", wa) for i in range(K)]
        self.b = [z3.BitVec(f"b{i}", wb) for i in range(K)]
        self.c = z3.BitVec("c", wc)
        self.term = sm.element(list(self.a), list(self.b), self.c)
        if not z3.is_bv(self.term) or self.term.size() != wd:
            raise TypeError(f"{sm!r} must return a {wd}-bit BitVec for .{form.dtype}, got {self.term!r}")
        self.widths = (wa, wb, wc)
        self.memo: dict[tuple, int] = {}

    def __call__(self, av, bv, cv) -> int:
        import z3

        key = (tuple(int(x) for x in av), tuple(int(x) for x in bv), int(cv))
        r = self.memo.get(key)
        if r is None:
            wa, wb, wc = self.widths
            sub = [(x, z3.BitVecVal(int(v), wa)) for x, v in zip(self.a, key[0])]
            sub += [(x, z3.BitVecVal(int(v), wb)) for x, v in zip(self.b, key[1])]
            sub.append((self.c, z3.BitVecVal(key[2], wc)))
            r = z3.simplify(z3.substitute(self.term, *sub)).as_long()
            self.memo[key] = r
        return r


def lift(sm: SymbolicModel, opcode, a, b, c, e=None, sel=None, arch=None, **kw):
    """Evaluate a symbolic element model on register (or matrix) inputs, element by element."""
    from .. import layout
    from .draft import is_matrix_level

    form = opcode if isinstance(opcode, Form) else parse(opcode)
    M, N, K = form.mnk
    mats = is_matrix_level(form)
    if mats:
        A, B, C = np.asarray(a), np.asarray(b), np.asarray(c)
        if A.ndim == 2:
            A, B, C = A[None], B[None], C[None]
        P = 1
    else:
        B = layout.unpack(form, "b", b)
        C = layout.unpack(form, "c", c)
        if form.is_sparse:
            from ..metadata import gather_terms

            vals, kidx = gather_terms(form, a, e, sel)
        else:
            A = layout.unpack(form, "a", a)
        P = B.shape[1] if B.ndim == 4 else 1
    T = B.shape[0]
    Kt = K // 2 if (form.is_sparse and not mats) else K
    key = (form.opcode, Kt)
    comp = sm._cache.get(key)
    if comp is None:
        comp = sm._cache[key] = _Compiled(sm, form, Kt)
    D = np.zeros((T, P, M, N), np.uint64)
    for t in range(T):
        for p in range(P):
            Bp = B[t, p] if P > 1 else B[t]
            Cp = C[t, p] if P > 1 else C[t]
            for m in range(M):
                if form.is_sparse and not mats:
                    av, kk = vals[t, m], kidx[t, m]
                else:
                    av, kk = (A[t, p, m] if P > 1 else A[t, m]), np.arange(K)
                for n in range(N):
                    D[t, p, m, n] = comp(av, Bp[kk, n], Cp[m, n])
    if mats:
        return D[:, 0]
    return layout.pack(form, "d", D if P > 1 else D[:, 0])


# ------------------------------------------------------------------------------------------
# reports


@dataclass
class SymbolicResult:
    status: str                          # "proved" | "refuted" | "unknown"
    slice: str                           # what was searched
    seconds: float
    reason: str = ""
    witness: dict[str, Any] | None = None   # a, b, c codes (hex), model's d, reference d

    def line(self) -> str:
        s = f"symbolic: {self.status.upper()} over {self.slice} ({self.seconds:.2f}s)"
        if self.reason:
            s += f" -- {self.reason}"
        if self.witness:
            w = self.witness
            s += (f"\n  witness: a={w['a']} b={w['b']} c={w['c']} -> model {w['model_d']}, "
                  f"reference {w['reference_d']}")
        return s


@dataclass
class AuditReport:
    opcode: str
    arch: str
    model: str
    vectors: Any                          # formal.vectors.VerifyReport
    symbolic: SymbolicResult | None = None
    errors: list[str] = field(default_factory=list)
    witnesses: list = field(default_factory=list)     # formal.vectors.witness.ElementWitness (reduced)
    causes: list[dict] = field(default_factory=list)  # root-cause groups (smallest set of mechanisms)
    failed_elements: int = 0                          # every failing output element (no limit)
    failed_elements_examined: int = 0                 # of which grouped by cause (witness.ELEMENT_LIMIT)
    background_points: list[str] = field(default_factory=list)   # fail only through other elements
    digest: str = ""

    @property
    def ok(self) -> bool:
        sym_ok = self.symbolic is None or self.symbolic.status != "refuted"
        return self.vectors.ok and sym_ok and not self.errors

    @property
    def caught_by(self) -> list[str]:
        out = list(self.vectors.caught_by)
        if self.symbolic is not None and self.symbolic.status == "refuted":
            out.append("symbolic")
        return out

    @property
    def mismatches(self):
        return self.vectors.mismatches

    @property
    def failed_elements_truncated(self) -> bool:
        """More elements failed than were grouped by cause (the causes cover the first ones)."""
        return self.failed_elements_examined < self.failed_elements

    def _grouped(self) -> str:
        return (f" (causes grouped over the first {self.failed_elements_examined}: the rest were only counted)"
                if self.failed_elements_truncated else "")

    def to_dict(self) -> dict:
        return {"opcode": self.opcode, "arch": self.arch, "model": self.model, "ok": self.ok,
                "vectors_digest": self.digest, "caught_by": self.caught_by, "errors": self.errors,
                "failed_elements": self.failed_elements,
                "failed_elements_truncated": self.failed_elements_truncated,
                "failed_elements_examined": self.failed_elements_examined, "causes": self.causes,
                "background_points": self.background_points,
                "witnesses": [w.to_dict() for w in self.witnesses], "vectors": self.vectors.to_dict(),
                "symbolic": asdict(self.symbolic) if self.symbolic else None}

    def table(self) -> str:
        lines = [f"audit of {self.model} against the {self.arch} model: {'PASS' if self.ok else 'FAIL'}"
                 + (f"  (vectors {self.digest})" if self.digest else "")]
        if not self.ok and self.causes:
            lines.append(f"{self.failed_elements} failing output elements{self._grouped()}, explained by:")
            for g in self.causes:
                lines.append(f"  {g['cause']}: {g['elements']} elements in {len(g['cases'])} cases -- {g['what']}")
        if self.witnesses:
            lines.append("element witnesses (reduced: fewest terms that still fail):")
            for w in self.witnesses:
                lines += ["  " + x for x in w.lines()]
        if self.background_points:
            lines.append("points failing only through other elements of their warps (not their own): "
                         + ", ".join(self.background_points))
        lines.append(self.vectors.table(max_mismatches=0 if self.witnesses else 5))
        if self.symbolic is not None:
            lines.append(self.symbolic.line())
        for e in self.errors:
            lines.append(f"error: {e}")
        return "\n".join(lines)

    def markdown(self) -> str:
        v = self.vectors
        out = [f"# Audit of `{self.model}`: {'PASS' if self.ok else 'FAIL'}", "",
               f"* form: `{self.opcode}`", f"* reference: the `{self.arch}` model of ptx-formal",
               f"* vectors: {v.cases} cases, digest `{self.digest}`",
               f"* failing cases: {v.failed}; failing output elements: {self.failed_elements}{self._grouped()}",
               f"* caught by: {', '.join(f'`{p}`' for p in self.caught_by) or '-'}", ""]
        if self.causes:
            out += ["## Root causes (smallest set of known mechanisms reproducing the failures)", "",
                    "| cause | what | elements | cases | points |", "|---|---|---|---|---|"]
            for g in self.causes:
                out.append(f"| `{g['cause']}` | {g['what']} | {g['elements']} | {len(g['cases'])} | "
                           f"{', '.join(g['points'][:6])}{' ...' if len(g['points']) > 6 else ''} |")
            out.append("")
        if self.witnesses:
            out += ["## Element witnesses", ""]
            for w in self.witnesses:
                out.append("```")
                out += w.lines()
                out.append("```")
            out.append("")
        if self.background_points:
            out += ["Points failing only through other elements of their warps: "
                    + ", ".join(f"`{p}`" for p in self.background_points), ""]
        out += ["## Coverage points", "", "| point | cases | pass | built for it and failing |", "|---|---|---|---|"]
        for p, r in v.points.items():
            out.append(f"| `{p}` | {r.cases} | {r.passed} | {r.built_failed or ''} |")
        for e in self.errors:
            out.append(f"\nerror: {e}")
        return "\n".join(out) + "\n"

    __str__ = table


# ------------------------------------------------------------------------------------------
# running a concrete model on a vector set


def _call(model: Callable, form: Form, args: tuple, kw: dict, arch: str):
    try:
        sig = inspect.signature(model)
        params = sig.parameters
        takes_kw = any(p.kind == p.VAR_KEYWORD for p in params.values())
        if "arch" in params or takes_kw:
            kw = dict(kw, arch=arch)
    except (TypeError, ValueError):
        pass
    return model(form.opcode, *args, **kw)


class ModelOutputError(ValueError):
    """The model returned something that is not D: wrong shape, not integers, out of range."""


def _out_bits(form: Form, level: str) -> tuple[int, str]:
    """Width of one value the model returns: a D register (register level) or a D element."""
    from .draft import is_matrix_level

    if level == "matrix" or is_matrix_level(form):
        from ..numerics.formats import get_format

        return get_format(form.dtype).bits, f"D element (.{form.dtype})"
    return form.operands["d"].reg_bits, "D register"


def _check_output(out, want: tuple, dtype, bits: int, what: str) -> np.ndarray:
    """The model's D (as ``dtype``), or ModelOutputError: D must be raw encodings, integers
    within the register (or element) width, of the expected shape.  A NaN float or d + 2**32
    is not an answer to compare bits with; it is the model's failure."""
    try:
        x = np.asarray(out)
    except Exception as e:
        raise ModelOutputError(f"{type(out).__name__} that is not an array ({type(e).__name__})") from None
    if x.dtype == object or not (np.issubdtype(x.dtype, np.integer)):
        raise ModelOutputError(f"an array of {x.dtype} (D must be raw {bits}-bit encodings, an integer array)")
    if x.shape != want:
        raise ModelOutputError(f"shape {list(x.shape)}, expected {list(want)}")
    if x.size:
        lo, hi = int(x.min()), int(x.max())
        if lo < 0 or hi >= (1 << bits):
            bad = lo if lo < 0 else hi
            raise ModelOutputError(f"value {bad:#x} outside the {bits}-bit range of a {what} "
                                   f"(D must be raw encodings in 0..2**{bits}-1)")
    return x.astype(dtype)


def run_model(model: Callable, vs, arch: str) -> tuple[list[np.ndarray], list[str]]:
    """The model's outputs for every case (in vector order) and any errors it raised."""
    form = vs.form
    got: list[np.ndarray | None] = [None] * len(vs.cases)
    errors = []
    groups: dict[Any, list[int]] = {}
    for i, c in enumerate(vs.cases):
        groups.setdefault(c.sel, []).append(i)
    for sel, idx in groups.items():
        cs = [vs.cases[i] for i in idx]
        try:
            if vs.level == "matrix":
                args = tuple(np.stack([c.inputs[k] for c in cs]) for k in ("A", "B", "C"))
                kw = {}
                if "scale_a" in cs[0].inputs:
                    kw = {k: np.stack([c.inputs[k] for c in cs]) for k in ("scale_a", "scale_b")}
            else:
                args = tuple(np.stack([c.inputs[k] for c in cs]) for k in ("a", "b", "c"))
                kw = {"e": np.stack([c.inputs["e"] for c in cs]), "sel": sel} if form.is_sparse else {}
            exp0 = np.asarray(cs[0].expected)
            out = _check_output(_call(model, form, args, kw, arch), (len(cs),) + exp0.shape, exp0.dtype,
                                *_out_bits(form, vs.level))
            for j, i in enumerate(idx):
                got[i] = out[j]
        except Exception as e:  # the model's failure is a finding, not a crash
            if getattr(e, "abort_audit", False):       # a model past its time limit ends the audit
                raise
            name = getattr(model, "__name__", "model")
            msg = str(e) if getattr(e, "model_message", False) else f"{name} raised {type(e).__name__}: {e}"
            if isinstance(e, ModelOutputError):
                msg = f"{name} returned {e}"
            errors.append(msg + (f" (sel={sel})" if sel is not None else ""))
            for i in idx:
                got[i] = np.full(np.asarray(vs.cases[i].expected).shape, 0xDEADBEEF,
                                 dtype=np.asarray(vs.cases[i].expected).dtype)
    return got, errors  # type: ignore[return-value]


# ------------------------------------------------------------------------------------------
# the solver search


def symbolic_search(form: Form, sm: SymbolicModel, arch: str = "sm_90", k_active: int | None = None,
                    timeout_s: float = 60.0, minimize: bool = True) -> SymbolicResult:
    """Search for an input where the symbolic model and the reference differ (one output element)."""
    import z3

    from ..numerics.formats import get_format
    from . import z3num as Z
    from .draft import dims, element, spread

    t0 = time.perf_counter()
    _, _, _, K, Ka = dims(form)
    integer = get_format(form.dtype).cls != "float"
    k = Ka if (integer and k_active is None) else min(Ka, k_active or 2)
    slice_txt = (f"all {Ka} terms of one output element (exact)" if k == Ka else
                 f"{k} of {Ka} terms non-zero (the others +0), any encodings, one output element")
    try:
        ref = Z.reference_element(form, arch)
    except (Z.NoEncoding, KeyError) as e:
        return SymbolicResult("unknown", slice_txt, time.perf_counter() - t0, f"no Z3 reference: {e}")
    A = Z.elems(form.atype, "a", Ka)
    B = Z.elems(form.btype, "b", Ka)
    C = Z.Elem(form.c_type, "c")
    d_ref = ref(A, B, C)
    try:
        d_usr = sm.element([x.bv for x in A], [x.bv for x in B], C.bv)
    except Exception as e:
        return SymbolicResult("unknown", slice_txt, time.perf_counter() - t0,
                              f"the model raised {type(e).__name__}: {e}")
    if not z3.is_bv(d_usr) or d_usr.size() != d_ref.size():
        return SymbolicResult("unknown", slice_txt, time.perf_counter() - t0,
                              f"the model must return a {d_ref.size()}-bit BitVec, got {d_usr!r}")
    pos = set(spread(k, Ka))
    s = z3.SolverFor("QF_BV")
    s.set("timeout", int(timeout_s * 1000))
    for i in range(Ka):
        if i not in pos:
            s.add(A[i].bv == 0, B[i].bv == 0)
    s.add(d_usr != d_ref)
    r = s.check()
    if r == z3.unsat:
        return SymbolicResult("proved", slice_txt, time.perf_counter() - t0, "no input in the slice differs")
    if r != z3.sat:
        return SymbolicResult("unknown", slice_txt, time.perf_counter() - t0, f"solver: {s.reason_unknown()}")
    mdl = s.model()
    if minimize:  # fewest non-zero elements: try to zero each remaining one
        cand = [x for x in A + B + [C] if mdl.eval(x.bv, model_completion=True).as_long() != 0]
        for x in cand:
            s.push()
            s.add(x.bv == 0)
            for y in A + B + [C]:
                if y is not x and mdl.eval(y.bv, model_completion=True).as_long() == 0:
                    s.add(y.bv == 0)
            if s.check() == z3.sat:
                mdl = s.model()
            s.pop()
    val = lambda x: mdl.eval(x, model_completion=True).as_long()  # noqa: E731
    av, bv_, cv = [val(x.bv) for x in A], [val(x.bv) for x in B], val(C.bv)
    ref_d, usr_d = val(d_ref), val(d_usr)
    # the witness must stand on the numpy evaluator too: otherwise the Z3 reference is at fault
    np_d = element(form, arch, np.array(av, np.uint64), np.array(bv_, np.uint64), cv)
    wd = -(-d_ref.size() // 4)
    w = {"a": [f"{x:x}" for x in av], "b": [f"{x:x}" for x in bv_], "c": f"{cv:x}",
         "model_d": f"{usr_d:0{wd}x}", "reference_d": f"{ref_d:0{wd}x}", "evaluator_d": f"{np_d:0{wd}x}"}
    if np_d != ref_d:
        return SymbolicResult("unknown", slice_txt, time.perf_counter() - t0,
                              "internal: the Z3 reference disagrees with the evaluator on the witness", w)
    return SymbolicResult("refuted", slice_txt, time.perf_counter() - t0, "", w)


# ------------------------------------------------------------------------------------------
# the entry point


def _runner(model: Callable, vs, arch: str):
    """inputs (a list of dicts like a case's) -> the model's outputs, for the reducer."""
    from .build import Case, VectorSet

    def run(inputs, case):
        cs = [Case(i, vs.opcode, case.sel, [], "", x, np.asarray(case.expected), [], case.level)
              for i, x in enumerate(inputs)]
        tmp = VectorSet(vs.opcode, vs.arch, vs.seed, vs.level, cs)
        got, errs = run_model(model, tmp, arch)
        if errs:
            raise RuntimeError(errs[0])
        return got
    return run


def explain(vs, got, arch, model: Callable | None = None, max_witnesses: int = 8, reduce: bool = True,
            caught=()):
    """Element witnesses, root-cause groups and background-only points of a failing run
    (``model`` enables the reduction; without it, e.g. for a device's result file, the
    witnesses are the original elements)."""
    from .witness import ELEMENT_LIMIT, count_failing, failing_elements, reduce_element, root_causes

    form = vs.form
    elems = failing_elements(vs, got, limit=ELEMENT_LIMIT)
    total = len(elems) if len(elems) < ELEMENT_LIMIT else count_failing(vs, got)
    try:
        causes = root_causes(form, arch, elems, vs, got)
    except Exception as e:        # grouping is a convenience; the witnesses stand without it
        causes = [{"cause": "unexplained", "what": f"grouping failed: {type(e).__name__}: {e}",
                   "elements": len(elems), "cases": sorted({w.case for w in elems}), "points": []}]
    # witnesses: per cause, then per failing built point, the first element (built ones first)
    pick = []
    seen_ids = set()

    def take(w):
        if id(w) not in seen_ids and len(pick) < max_witnesses:
            seen_ids.add(id(w))
            pick.append(w)

    ordered = sorted(elems, key=lambda w: (w.points == ["background"], w.terms))
    for g in causes:
        w = next((w for w in ordered if w.cause == g["cause"]), None)
        if w is not None:
            take(w)
    for p in caught:
        w = next((w for w in ordered if p in w.points), None)
        if w is not None:
            take(w)
    if model is not None and reduce:
        run = _runner(model, vs, arch)
        for w in pick:
            w.reduced = reduce_element(vs, w, run, arch)
    # points whose failures never involve an element built for them or holding their input
    direct = {p for w in elems for p in w.points + w.tags}
    return Explained(pick, causes, total, direct, len(elems))


@dataclass
class Explained:
    """What :func:`explain` found: ``total`` failing elements, of which the first ``examined``
    (at most ``witness.ELEMENT_LIMIT``) were grouped by cause and drawn witnesses from."""

    witnesses: list
    causes: list
    total: int
    direct: set
    examined: int

    @property
    def truncated(self) -> bool:
        return self.examined < self.total

    def __iter__(self):            # (witnesses, causes, total, direct), as before
        return iter((self.witnesses, self.causes, self.total, self.direct))


def audit(opcode: str | Form, model: Callable, arch: str = "sm_90", count: int = 64, seed: int = 0,
          coverage=None, symbolic: Callable | None = None, k_active: int | None = None,
          timeout_s: float = 60.0, vectors=None, level: str = "regs", reduce: bool = True,
          max_witnesses: int = 8) -> AuditReport:
    """Audit ``model`` for ``opcode`` against the ``arch`` model (see the module docstring).

    ``symbolic``: a Z3 element model to search with (taken from ``model`` when it is a
    :class:`SymbolicModel`).  ``vectors``: a ready :class:`formal.vectors.VectorSet` to
    reuse instead of generating (coverage vectors + ``count`` random ones).  ``level``:
    ``"matrix"`` calls the model with matrices ``model(opcode, A, B, C) -> D`` (no fragment
    layouts needed).  Failing elements are reduced (``reduce``) and grouped by root cause.
    """
    from . import compare, generate

    form = opcode if isinstance(opcode, Form) else parse(opcode)
    vs = vectors if vectors is not None else generate(form, arch=arch, count=count, seed=seed, coverage=coverage,
                                                     level=level)
    if vs.opcode != form.opcode:
        raise ValueError(f"the vectors are for {vs.opcode}, not {form.opcode}")
    got, errors = run_model(model, vs, arch)
    rep = compare(vs, got, keep=5, source=getattr(model, "__name__", "model"))
    sym = symbolic if symbolic is not None else (model if isinstance(model, SymbolicModel) else None)
    sres = None
    if sym is not None:
        sres = symbolic_search(form, z3_model(sym), arch, k_active=k_active, timeout_s=timeout_s)
    out = AuditReport(form.opcode, str(getattr(arch, "name", arch)), getattr(model, "__name__", repr(model)), rep,
                      sres, errors, digest=vs.header.get("digest", "") or vs.digest)
    if rep.failed and not errors:
        ex = explain(vs, got, arch, model, max_witnesses, reduce, rep.caught_by)
        out.witnesses, out.causes, out.failed_elements = ex.witnesses, ex.causes, ex.total
        out.failed_elements_examined = ex.examined
        if not ex.truncated:       # beyond the examined elements a point's own failures are not known
            out.background_points = [p for p in rep.failing_points if p not in ex.direct]
    return out


# ------------------------------------------------------------------------------------------
# which published model does a device / simulator behave like?


@dataclass
class IdentifyReport:
    opcode: str
    model: str
    archs: list[str]                         # the models compared (those with a path for the form)
    mismatches: dict[str, int]               # arch -> failing output elements
    identified: list[str]                    # archs with no mismatch (several when their records are equal)
    deviations: dict[str, list]              # arch -> first element witnesses where the model departs from it
    pairs: dict[str, dict]                   # "x|y" -> {"witnesses": n, "identical": bool}
    cases: int = 0
    digest: str = ""
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.identified) and not self.errors

    def to_dict(self) -> dict:
        return {"opcode": self.opcode, "model": self.model, "identified": self.identified,
                "mismatches": self.mismatches, "archs": self.archs, "cases": self.cases, "vectors_digest": self.digest,
                "pairs": self.pairs, "errors": self.errors,
                "deviations": {k: [w.to_dict() for w in v] for k, v in self.deviations.items()}}

    def table(self) -> str:
        best = sorted(self.archs, key=lambda a: self.mismatches.get(a, 1 << 30))
        lines = [f"identify {self.model} on {self.opcode}: "
                 + (f"behaves like {', '.join(self.identified)}" if self.identified else
                    f"matches no model; closest {best[0]} ({self.mismatches[best[0]]} elements differ)"),
                 f"  {self.cases} model-distinguishing cases (vectors {self.digest})"]
        for a in best:
            lines.append(f"  {a:8s} {self.mismatches[a]:6d} differing elements")
            for w in self.deviations.get(a, [])[:1]:
                lines += ["      " + x for x in w.lines()]
        same = [k for k, v in self.pairs.items() if v["identical"]]
        if same:
            lines.append("  identical records (no input can tell them apart): " + ", ".join(same))
        none = [k for k, v in self.pairs.items() if not v["identical"] and not v["witnesses"]]
        if none:
            lines.append("  no distinguishing input found for: " + ", ".join(none))
        for e in self.errors:
            lines.append(f"error: {e}")
        return "\n".join(lines)

    __str__ = table


_PAIRS: dict[tuple, tuple] = {}


def identify_models(form: Form, archs=None) -> dict:
    """name -> model that ``identify`` compares: the evaluator's architecture models with a path
    for the form (``archs`` to choose), plus, for an fp8 wgmma, the sm_90 ``mma.sync`` fp8 path
    (f16 HMMAs, c added last): what a simulator that reuses its mma.sync model for wgmma computes
    (the H200 refuted it for wgmma, docs/wgmma.md)."""
    from ..numerics.archs import MODELS, get_model
    from . import distinguish as X

    out = {a: a for a in (archs or list(MODELS)) if X.supports(form, a)}
    if form.family == "wgmma" and archs is None and "sm_90" in out:
        from ..numerics.fit import sm90_alternatives

        key, _ = get_model("sm_90").path(form.atype, form.btype, form.c_type, form.dtype, shape=form.mnk)
        for alt in sm90_alternatives().get(key, {}).values():
            if alt.name == "sm_90 mma.sync fp8 path":
                out[alt.name] = alt
    return out


def _pair_witnesses(form: Form, models: dict, seed: int, want: int):
    """({pair: {"witnesses", "identical"}}, [(point, Witness)]) of the pairwise searches: a
    pure function of its arguments (the models by name), cached per process (regs and matrix
    level share it)."""
    from .build import _seed_for
    from . import distinguish as X

    names = tuple(models)
    key = (form.opcode, names, seed, want)
    if key not in _PAIRS:
        pool = X.Pool(form, _seed_for(seed, form.opcode, "identify"))
        pairs: dict[str, dict] = {}
        placed = []
        for i, x in enumerate(names):
            for y in names[i + 1:]:
                k = f"{x}|{y}"
                if X.same_record(form, models[x], models[y]):
                    pairs[k] = {"witnesses": 0, "identical": True}
                    continue
                ws = X.search(form, models[x], models[y], pool=pool, want=want)
                pairs[k] = {"witnesses": len(ws), "identical": False}
                placed += [(f"distinguish:{x}|{y}", w) for w in ws]
        _PAIRS[key] = (pairs, tuple(placed))
    return _PAIRS[key]


def distinguishing_vectors(opcode: str | Form, archs=None, seed: int = 0, want: int = 2, level: str = "regs"):
    """Vectors on which every pair of architecture models (that serve the form) differ:
    (VectorSet with sm_90 expectations, {pair: {"witnesses", "identical"}}, names of the models
    compared; :func:`identify_models` says which)."""
    from .build import _seed_for, from_drafts
    from .draft import Canvas

    form = opcode if isinstance(opcode, Form) else parse(opcode)
    models = identify_models(form, archs)
    names = list(models)
    pairs, placed = _pair_witnesses(form, models, seed, want)
    pairs = {k: dict(v) for k, v in pairs.items()}
    drafts = []
    cv = None
    pts: list[str] = []
    for pt, w in placed:
        if cv is None:
            cv = Canvas(form, _seed_for(seed, form.opcode, f"identify|{len(drafts)}"), "zero")
            pts = []
        nz = [k for k in range(len(w.a)) if w.a[k] or w.b[k]]
        cv.place(len(cv.targets), [(w.a[k], w.b[k]) for k in nz], w.c, point=pt, positions=nz)
        if pt not in pts:
            pts.append(pt)
        if len(cv.targets) >= cv.slots:
            drafts.append(cv.draft(pts, "inputs on which two architecture models differ"))
            cv = None
    if cv is not None and cv.targets:
        drafts.append(cv.draft(pts, "inputs on which two architecture models differ"))
    ref = "sm_90" if "sm_90" in names else names[0]
    vs = from_drafts(form, ref, seed, drafts, level=level, header={"purpose": "identify", "archs": names})
    return vs, pairs, names


def identify(opcode: str | Form, model: Callable, archs=None, seed: int = 0, level: str = "regs",
             max_deviations: int = 2, prepared=None) -> IdentifyReport:
    """Which of the evaluator's architecture models ``model`` behaves like, on vectors built
    to tell every pair apart, and where it departs from each.  ``prepared``: the result of
    :func:`distinguishing_vectors` to reuse."""
    from .build import Case, VectorSet
    from .draft import evaluate_inputs, is_matrix_level
    from .witness import count_failing, evaluate_inputs_level, failing_elements

    form = opcode if isinstance(opcode, Form) else parse(opcode)
    vs, pairs, names = prepared or distinguishing_vectors(form, archs, seed, level=level)
    name = getattr(model, "__name__", repr(model))
    rep = IdentifyReport(form.opcode, name, names, {}, [], {}, pairs, len(vs.cases), vs.header.get("digest", ""))
    if not vs.cases:
        rep.identified = list(names)
        rep.mismatches = {a: 0 for a in names}
        return rep
    got, errors = run_model(model, vs, str(names[0]))
    if errors:
        rep.errors = errors
        return rep
    models = identify_models(form, archs)
    for a in names:
        inputs = [c.inputs for c in vs.cases]
        if vs.level == "matrix" and not is_matrix_level(form):
            exp = evaluate_inputs_level(form, inputs, [None] * len(inputs), models[a], "matrix")
        else:
            exp = evaluate_inputs(form, inputs, [c.sel for c in vs.cases], models[a])
        va = VectorSet(vs.opcode, a, vs.seed, vs.level,
                       [Case(c.id, c.opcode, c.sel, c.points, c.why, c.inputs, np.asarray(e), c.targets, c.level)
                        for c, e in zip(vs.cases, exp)])
        el = failing_elements(va, got, limit=max_deviations * 64)
        rep.mismatches[a] = len(el) if len(el) < max_deviations * 64 else count_failing(va, got)
        if el:
            rep.deviations[a] = sorted(el, key=lambda w: w.terms)[:max_deviations]
    rep.identified = [a for a in names if rep.mismatches[a] == 0]
    return rep


# ``formal.vectors.audit(...)``: the module is callable, so ``import formal.vectors.audit`` and the
# attribute ``formal.vectors.audit`` both work as the issue spells them.
class _CallableModule(types.ModuleType):
    def __call__(self, *args, **kw):
        return audit(*args, **kw)


sys.modules[__name__].__class__ = _CallableModule
