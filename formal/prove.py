"""Proof obligations, proved twice: by Z3 and by exhaustive enumeration.

An :class:`Obligation` is one claim about the spec (``layout.injective``: "no two (lane,
reg, elem) of this fragment hold the same matrix cell").  Proving it gives one of

* :class:`Proved` - with the solver(s), the time, and an SMT-LIB2 certificate: the
  *negated* claim, which any SMT solver re-checks as ``unsat`` (:func:`recheck`);
* :class:`Refuted` - with a MINIMAL witness (the lexicographically smallest colliding pair
  of points, the smallest uncovered cell, ...);
* :class:`Unknown` - a timeout, or the two engines disagreeing.  Never counted as proved.

Every fragment has at most a few thousand points, so every claim is decided twice: Z3
decides it on bit-vector terms compiled from the spec's formulas, and numpy decides it by
enumerating the same map.  A verdict stands only when both agree, witnesses included (Z3
finds its minimal witness with ``Optimize``, enumeration by sorting); otherwise the result
is Unknown.  ``Options(engine="z3")`` / ``"enum"`` runs one engine alone (the tests run
both ways so neither rots).

Obligations come from generators in a registry: this module registers the layout
obligations; ``formal.metadata``, ``formal.wmma`` and ``formal.transform`` register theirs
with :func:`register_obligations` when imported (``prove --all`` imports them, skipping a
module only when it does not exist).  Obligations with equal ``(family, key)`` are the
same claim about the same content: they are proved once and reported for every form they
cover (:func:`dedupe`).

Layout obligation families (``layout.*``):

``resolve``     every form/operand resolves to exactly one spec entry
``regcount``    the catalog's register count equals the spec's element list times the
                element container (register counts match element widths)
``packing``     each element's value bits lie inside its container and register, and the
                elements of a register do not overlap
``range``       every held point lands inside the matrix
``injective``   no two held points hold the same cell
``surjective``  every cell is held (pigeonhole: in range + injective + |points| = |cells|,
                counted exactly; otherwise by an explicit holder table checked by Z3)
``products``    m8n8k4 .f16: the catalog's product count, and each lane in one product
``shared``      C and D have the same (lane, element) -> cell map where the text says so
``same_as``     a sparse fragment equals the dense fragment the text says it equals
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import multiprocessing
import os
import pickle
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from . import catalog as cat
from .layout import Z3_WIDTH, Layout, _as_form, _check_operand, fragment

OPTIONAL_MODULES = ("formal.metadata", "formal.wmma", "formal.transform", "formal.smem")

# =========================================================================================
# Obligations and results


@dataclass(eq=False)
class Obligation:
    """One claim.  ``run(options) -> Result`` proves it; ``cover`` lists what it certifies.

    ``family``   e.g. ``"layout.injective"`` (the report groups by family)
    ``subject``  what the claim is about, readable (a layout entry, an opcode)
    ``claim``    the claim in one line
    ``key``      content hash; obligations with equal (family, key) are proved once
    ``cover``    (opcode, column) pairs the claim certifies, e.g. (opcode, "a")
    ``section``  the PTX ISA section the claim rests on
    ``share``    obligations with the same non-empty label share one computation (a cached
                 function that decides several claims at once): a parallel run gives them to
                 one worker, so it is computed once
    """

    family: str
    subject: str
    claim: str
    run: Callable[["Options"], "Result"] | None = None
    key: str = ""
    cover: list = field(default_factory=list)
    section: str = ""
    share: str = ""

    def prove(self, options: "Options | None" = None) -> "Result":
        opts = options or Options()
        if self.run is None:
            return Unknown(self, "no prover attached to this obligation")
        t0 = time.perf_counter()
        try:
            res = self.run(opts)
        except Exception as e:  # a crash inside one obligation must not stop the others
            return Unknown(self, f"internal error: {type(e).__name__}: {e}", seconds=time.perf_counter() - t0)
        res.obligation = self
        if not res.seconds:
            res.seconds = time.perf_counter() - t0
        return res

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, "subject": self.subject, "claim": self.claim, "key": self.key,
                "section": self.section, "cover": [list(c) for c in self.cover]}


@dataclass
class Options:
    timeout_ms: int = 20000        # per Z3 query
    engine: str = "both"           # both | z3 | enum
    certificates: bool = True      # keep the SMT-LIB2 text of proofs

    def __post_init__(self) -> None:
        if self.engine not in ("both", "z3", "enum"):
            raise cat.BadArgument(f"engine must be both, z3 or enum, got {self.engine!r}")

    @property
    def z3(self) -> bool:
        return self.engine in ("both", "z3")

    @property
    def enum(self) -> bool:
        return self.engine in ("both", "enum")


@dataclass
class Proved:
    obligation: Obligation
    solver: str
    seconds: float = 0.0
    smt2: str | None = None
    note: str = ""
    status = "proved"

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "obligation": self.obligation.to_dict(), "solver": self.solver,
                "seconds": round(self.seconds, 6), "note": self.note, "certificate": self.smt2 is not None}


@dataclass
class Refuted:
    obligation: Obligation
    witness: dict
    solver: str = ""
    seconds: float = 0.0
    smt2: str | None = None
    note: str = ""
    status = "refuted"

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "obligation": self.obligation.to_dict(), "solver": self.solver,
                "seconds": round(self.seconds, 6), "witness": self.witness, "note": self.note}


@dataclass
class Unknown:
    obligation: Obligation
    reason: str
    solver: str = ""
    seconds: float = 0.0
    status = "unknown"

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "obligation": self.obligation.to_dict(), "solver": self.solver,
                "seconds": round(self.seconds, 6), "reason": self.reason}


Result = Proved | Refuted | Unknown

# =========================================================================================
# Registry


_REGISTRY: dict[str, Callable] = {}


def register_obligations(name: str, generator: Callable) -> None:
    """Contribute obligations to ``prove``: ``generator(forms) -> Iterable[Obligation]``.

    ``forms`` is the list of catalog forms being proved (every documented form for
    ``prove --all``, one form for ``prove OPCODE``); a generator that ignores forms may
    take no argument.  Registering a name again replaces the generator.
    """
    _REGISTRY[name] = generator


def registered() -> dict[str, Callable]:
    return dict(_REGISTRY)


_REPORT_SECTIONS: dict[str, Callable] = {}


def register_report_section(name: str, fn: Callable) -> None:
    """Add a section to proofs/REPORT.md: ``fn(results) -> list of Markdown lines`` gets the
    results of the families ``name.*`` (for obligations that cover no catalog form)."""
    _REPORT_SECTIONS[name] = fn


def load_optional_modules(modules: Sequence[str] = OPTIONAL_MODULES) -> dict[str, str]:
    """Import the modules that contribute obligations; returns {module: 'loaded'|'absent'}.

    A module is skipped only when it does not exist; an error inside it propagates.
    """
    out = {}
    for mod in modules:
        try:
            importlib.import_module(mod)
            out[mod] = "loaded"
        except ModuleNotFoundError as e:
            if e.name != mod:
                raise
            out[mod] = "absent"
    return out


def _call_generator(gen: Callable, forms: list[cat.Form]):
    """Call ``gen(forms)`` if it takes forms (a parameter named ``forms`` or a required
    positional one), else ``gen()``."""
    try:
        params = list(inspect.signature(gen).parameters.values())
    except (TypeError, ValueError):
        return gen(forms)
    if any(p.name == "forms" for p in params):
        return gen(forms=forms)
    if any(p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params):
        return gen(forms)
    return gen()


def _adapt(name: str, item: Any) -> Obligation:
    """An Obligation as is; a result object computed elsewhere (duck-typed: ``status``,
    ``obligation``, ``subject``/``statement``, ``witness``, ``smt2``, ``seconds``/``time_s``)
    wrapped as an obligation whose run returns it as a native result."""
    if isinstance(item, Obligation):
        return item
    status = str(getattr(item, "status", "")).lower()
    if status not in ("proved", "refuted", "unknown"):
        raise TypeError(f"obligation generator {name!r} yielded {type(item).__name__}, not an Obligation or a result")
    oname = str(getattr(item, "obligation", "") or getattr(item, "name", "") or "obligation")
    fam = oname.split("[", 1)[0] if oname.startswith(name + ".") else f"{name}.{oname.split('[', 1)[0]}"
    subject = str(getattr(item, "subject", "") or "")
    if not subject and "[" in oname:
        subject = oname.split("[", 1)[1].rstrip("]")
    claim = str(getattr(item, "statement", "") or getattr(item, "detail", "") or oname)
    tok = subject.split()[0] if subject.split() else ""
    cover = [(tok, name)] if tok.startswith(("mma", "wmma")) else []
    ob = Obligation(fam, subject or oname, claim, cover=cover)
    secs = float(getattr(item, "seconds", 0.0) or getattr(item, "time_s", 0.0) or 0.0)
    solver = str(getattr(item, "solver", "") or name)
    witness = getattr(item, "witness", None)
    smt2 = getattr(item, "smt2", None)
    detail = str(getattr(item, "detail", "") or getattr(item, "note", "") or "")

    def run(opts: Options, ob=ob) -> Result:
        if status == "proved":
            return Proved(ob, solver, secs, smt2, note=detail)
        if status == "refuted":
            return Refuted(ob, witness if isinstance(witness, dict) else {"witness": witness}, solver, secs,
                           note=detail)
        return Unknown(ob, detail or "unknown", solver, secs)

    ob.run = run
    return ob


def collect(forms: Sequence[cat.Form] | None = None, family: str | None = None) -> list[Obligation]:
    """Every registered generator's obligations for ``forms`` (default: all documented forms), deduplicated.

    With an explicit list of forms, obligations of generators that ignore ``forms`` are
    kept only when they cover one of those forms.  ``family`` (a prefix such as
    ``"layout"`` or ``"layout.injective"``) keeps only those obligations, and skips the
    generators that cannot produce them.
    """
    fs = list(cat.documented_forms()) if forms is None else list(forms)
    wanted = None if forms is None else {f.opcode for f in fs}
    obs: list[Obligation] = []
    for name in sorted(_REGISTRY):
        if family and not (family.startswith(name + ".") or family == name or name.startswith(family)):
            continue
        items = [_adapt(name, x) for x in _call_generator(_REGISTRY[name], fs)]
        if family:
            items = [o for o in items if o.family.startswith(family)]
        if wanted is not None:
            items = [o for o in items if not o.cover or any(c[0] in wanted for c in o.cover)]
        obs.extend(items)
    return dedupe(obs)


def dedupe(obs: Iterable[Obligation]) -> list[Obligation]:
    """Merge obligations with equal (family, key) (their covers are joined); keyless ones stay."""
    out: list[Obligation] = []
    seen: dict[tuple[str, str], Obligation] = {}
    for ob in obs:
        if not ob.key:
            out.append(ob)
            continue
        k = (ob.family, ob.key)
        if k in seen:
            for c in ob.cover:
                if c not in seen[k].cover:
                    seen[k].cover.append(c)
        else:
            seen[k] = ob
            out.append(ob)
    return out


def default_jobs() -> int:
    """The cores this process may use (its CPU affinity, else the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def run(obligations: Sequence[Obligation], options: Options | None = None,
        progress: Callable[[int, int, Obligation], None] | None = None, jobs: int = 1) -> list[Result]:
    """Prove every obligation; results in the obligations' order whatever ``jobs`` is.

    ``jobs > 1`` proves them in that many forked worker processes (where ``fork`` exists):
    obligations hold closures, so the workers inherit the list and receive indices, and
    send back results without their obligation (re-attached here).
    """
    opts = options or Options()
    obligations = list(obligations)
    n = len(obligations)
    if jobs > 1 and n > 1 and "fork" in multiprocessing.get_all_start_methods():
        return _run_parallel(obligations, opts, progress, min(jobs, n))
    res = []
    for i, ob in enumerate(obligations):
        if progress:
            progress(i, n, ob)
        res.append(ob.prove(opts))
    if progress and obligations:
        progress(n, n, obligations[-1])
    return res


_WORK: tuple[list[Obligation], Options] | None = None   # what forked workers inherit


def _prove_batch(idx: list[int]) -> list[tuple[int, bytes | None]]:
    obs, opts = _WORK
    out = []
    for i in idx:
        r = obs[i].prove(opts)
        r.obligation = None
        try:
            out.append((i, pickle.dumps(r)))
        except Exception:  # noqa: BLE001 - an unpicklable result is proved again in the parent
            out.append((i, None))
    return out


def _batches(obligations: list[Obligation], jobs: int) -> list[list[int]]:
    """Work units, the likely-expensive first: a family with few members is a whole theorem
    (seconds each), a family with hundreds is one cheap claim per form (batched)."""
    size: dict[str, int] = {}
    for ob in obligations:
        size[ob.family] = size.get(ob.family, 0) + 1
    order = sorted(range(len(obligations)), key=lambda i: (size[obligations[i].family], i))
    per = max(1, min(16, len(obligations) // (8 * jobs)))
    out: list[list[int]] = []
    shared: dict[str, list[int]] = {}
    for i in order:
        lab = obligations[i].share
        if lab:
            if lab in shared:
                shared[lab].append(i)
            else:
                shared[lab] = [i]
                out.append(shared[lab])
            continue
        if out and size[obligations[out[-1][0]].family] > 4 and len(out[-1]) < per \
                and obligations[out[-1][0]].family == obligations[i].family and not obligations[out[-1][0]].share:
            out[-1].append(i)
        else:
            out.append([i])
    return out


def _run_parallel(obligations: list[Obligation], opts: Options, progress, jobs: int) -> list[Result]:
    global _WORK
    n = len(obligations)
    res: list[Result | None] = [None] * n
    _WORK = (obligations, opts)
    done = 0
    try:
        with multiprocessing.get_context("fork").Pool(jobs) as pool:
            for part in pool.imap_unordered(_prove_batch, _batches(obligations, jobs)):
                for i, blob in part:
                    r = pickle.loads(blob) if blob is not None else obligations[i].prove(opts)
                    r.obligation = obligations[i]
                    res[i] = r
                    if progress:
                        progress(done, n, obligations[i])
                    done += 1
    finally:
        _WORK = None
    if progress:
        progress(n, n, obligations[-1])
    return res  # type: ignore[return-value]


def exit_code(results: Sequence[Result]) -> int:
    """0 all proved, 1 any refuted, 3 any unknown (and none refuted)."""
    st = {r.status for r in results}
    return 1 if "refuted" in st else 3 if "unknown" in st else 0


# =========================================================================================
# Z3 plumbing


def _z3():
    import z3

    return z3


def _point(prefix: str):
    z3 = _z3()
    return z3.BitVecs(f"{prefix}_lane {prefix}_reg {prefix}_elem", Z3_WIDTH)


def _solver(opts: Options):
    s = _z3().Solver()
    s.set("timeout", int(opts.timeout_ms))
    return s


def _lt_lex(a: Sequence, b: Sequence):
    """a < b lexicographically (unsigned)."""
    z3 = _z3()
    if not a:
        return z3.BoolVal(False)
    head = z3.ULT(a[0], b[0])
    if len(a) == 1:
        return head
    return z3.Or(head, z3.And(a[0] == b[0], _lt_lex(a[1:], b[1:])))


def _lexmin(constraints: Sequence, variables: Sequence, opts: Options) -> list[int] | None:
    """The lexicographically smallest assignment of ``variables`` (unsigned) satisfying ``constraints``."""
    z3 = _z3()
    o = z3.Optimize()
    o.set("timeout", int(opts.timeout_ms))
    o.add(*constraints)
    for v in variables:
        o.minimize(v)          # Optimize's default priority is lexicographic
    if o.check() != z3.sat:
        return None
    m = o.model()
    return [m.eval(v, model_completion=True).as_long() for v in variables]


def _certificate(s, ob_family: str, subject: str, claim: str) -> str:
    head = (f"; ptx-formal certificate\n; obligation: {ob_family}\n; subject: {subject}\n"
            f"; claim: {claim}\n; the assertions state the NEGATION of the claim: expected result unsat\n")
    return head + s.to_smt2()


def recheck(smt2: str, timeout_ms: int = 60000) -> str:
    """Re-check an SMT-LIB2 certificate with a fresh Z3: 'unsat' | 'sat' | 'unknown'."""
    z3 = _z3()
    s = z3.Solver()
    s.set("timeout", int(timeout_ms))
    s.from_string(smt2)
    return str(s.check())


def _check(s) -> str:
    return str(s.check())


def _combine(ob: Obligation, z: tuple | None, e: tuple | None, t0: float,
             same: Callable[[dict, dict], bool] | None = None) -> Result:
    """Combine the Z3 verdict ``z`` and the enumeration verdict ``e``.

    Each is ``("proved", smt2_or_None)``, ``("refuted", witness)`` or ``("unknown", why)``.
    """
    dt = time.perf_counter() - t0
    same = same or (lambda a, b: a == b)
    if z is not None and e is not None:
        if z[0] == "unknown":
            return Unknown(ob, f"z3: {z[1]} (enumeration: {e[0]})", "z3+enum", dt)
        if z[0] != e[0]:
            return Unknown(ob, f"the engines disagree: z3 {z[0]}, enumeration {e[0]}"
                               f" ({z[1] if z[0] == 'refuted' else e[1]})", "z3+enum", dt)
        if z[0] == "proved":
            return Proved(ob, "z3+enum", dt, z[1])
        if not same(z[1], e[1]):
            return Unknown(ob, f"the engines found different minimal witnesses: z3 {z[1]}, enumeration {e[1]}",
                           "z3+enum", dt)
        return Refuted(ob, e[1], "z3+enum", dt)
    v, solver = (z, "z3") if z is not None else (e, "enum")
    if v[0] == "proved":
        return Proved(ob, solver, dt, v[1] if solver == "z3" else None)
    if v[0] == "refuted":
        return Refuted(ob, v[1], solver, dt)
    return Unknown(ob, str(v[1]), solver, dt)


def _pt(d: dict, k: int, pre: str = "") -> dict[str, int]:
    return {"lane": int(d[pre + "lane"][k]), "reg": int(d[pre + "reg"][k]), "elem": int(d[pre + "elem"][k]),
            "i": int(d[pre + "i"][k])}


def _cell(lay: Layout, row: int, col: int, prod: int) -> dict[str, int]:
    c = {"row": int(row), "col": int(col)}
    if lay.products > 1:
        c["product"] = int(prod)
    return c


def _i_of(lay: Layout, lane: int, reg: int, elem: int) -> int:
    f = lay._full
    k = (lane * lay.nregs + reg) * lay.epr + elem
    return int(f["i"][k]) if 0 <= k < f["i"].size else reg * lay.epr + elem


def _warpify(lay: Layout, res: Result) -> Result:
    """A warpgroup layout's witness names the warp and the lane in it (the provers work on the
    thread index, ``thread = warp * warp_lanes + lane``)."""
    if lay.warps <= 1 or not isinstance(res, Refuted):
        return res

    def fix(d):
        if isinstance(d, dict):
            if "lane" in d and ("reg" in d or "i" in d) and "warp" not in d:
                th = int(d["lane"])
                out = {"warp": th // lay.warp_lanes, "lane": th % lay.warp_lanes, "thread": th}
                out.update({k: v for k, v in d.items() if k != "lane"})
                return out
            return {k: fix(v) for k, v in d.items()}
        return d

    res.witness = fix(res.witness)
    return res


def _mk(family: str, subject: str, claim: str, section: str = "") -> Obligation:
    return Obligation(family, subject, claim, section=section)


# =========================================================================================
# Generic checks on one layout (used by the layout obligations and by audit)


def _in_range_z3(lay: Layout, row, col, prod):
    z3 = _z3()
    return z3.And(z3.ULT(row, lay.rows), z3.ULT(col, lay.cols), z3.ULT(prod, lay.products))


def check_range(lay: Layout, ob: Obligation | str, opts: Options) -> Result:
    """Every held point lands inside the products x rows x cols matrix."""
    ob = ob if isinstance(ob, Obligation) else _mk(
        "layout.range", ob, f"every (lane, reg, elem) lands inside the {lay.rows}x{lay.cols} matrix")
    t0 = time.perf_counter()
    z = e = None
    if opts.z3:
        z3 = _z3()
        p = _point("p")
        r, c, q = lay.z3_terms(*p)
        cons = [lay.z3_held(*p), z3.Not(_in_range_z3(lay, r, c, q))]
        s = _solver(opts)
        s.add(*cons)
        v = _check(s)
        if v == "unsat":
            z = ("proved", _certificate(s, ob.family, ob.subject, ob.claim) if opts.certificates else None)
        elif v == "sat":
            m = _lexmin(cons, list(p), opts)
            z = ("refuted", None) if m is None else ("refuted", {"point": {"lane": m[0], "reg": m[1], "elem": m[2],
                                                                           "i": _i_of(lay, *m)}})
            if m is None:
                z = ("unknown", "z3 could not minimise the witness")
        else:
            z = ("unknown", f"z3 {v} ({s.reason_unknown()})")
    if opts.enum:
        f = lay._full
        ok = (f["row"] >= 0) & (f["row"] < lay.rows) & (f["col"] >= 0) & (f["col"] < lay.cols) \
            & (f["product"] >= 0) & (f["product"] < lay.products)
        bad = np.flatnonzero(f["held"] & ~ok)
        e = ("proved", None) if bad.size == 0 else ("refuted", {"point": _pt(f, int(bad[0]))})
    res = _combine(ob, z, e, t0, same=lambda a, b: a["point"] == b["point"])
    if isinstance(res, Refuted):
        f = lay._full
        w = res.witness["point"]
        k = (w["lane"] * lay.nregs + w["reg"]) * lay.epr + w["elem"]
        res.witness["cell"] = _cell(lay, f["row"][k], f["col"][k], f["product"][k])
        res.witness["matrix"] = {"rows": lay.rows, "cols": lay.cols, "products": lay.products}
    return _warpify(lay, res)


def _min_collision_enum(lay: Layout) -> dict | None:
    f = lay._full
    idx = np.flatnonzero(f["held"])
    if idx.size == 0:
        return None
    cell = np.stack([f["product"][idx], f["row"][idx], f["col"][idx]])
    order = np.lexsort((idx, cell[2], cell[1], cell[0]))     # by cell, then by point order
    s_idx = idx[order]
    s_cell = cell[:, order]
    same = np.all(s_cell[:, 1:] == s_cell[:, :-1], axis=0)
    if not same.any():
        return None
    # the first two points of each colliding group: start of a run of equal cells
    starts = np.flatnonzero(same & np.concatenate(([True], ~same[:-1])))
    pairs = np.stack([s_idx[starts], s_idx[starts + 1]], axis=1)
    best = pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))[0]]
    a, b = int(best[0]), int(best[1])
    return {"p": _pt(f, a), "q": _pt(f, b), "cell": _cell(lay, f["row"][a], f["col"][a], f["product"][a])}


def check_injective(lay: Layout, ob: Obligation | str, opts: Options) -> Result:
    """No two held points hold the same cell."""
    ob = ob if isinstance(ob, Obligation) else _mk(
        "layout.injective", ob, "no two (lane, reg, elem) hold the same matrix cell")
    t0 = time.perf_counter()
    z = e = None
    if opts.z3:
        z3 = _z3()
        p, q = _point("p"), _point("q")
        rp, cp, pp = lay.z3_terms(*p)
        rq, cq, pq = lay.z3_terms(*q)
        cons = [lay.z3_held(*p), lay.z3_held(*q), _lt_lex(list(p), list(q)), rp == rq, cp == cq, pp == pq]
        s = _solver(opts)
        s.add(*cons)
        v = _check(s)
        if v == "unsat":
            z = ("proved", _certificate(s, ob.family, ob.subject, ob.claim) if opts.certificates else None)
        elif v == "sat":
            m = _lexmin(cons, list(p) + list(q), opts)
            if m is None:
                z = ("unknown", "z3 could not minimise the witness")
            else:
                z = ("refuted", {"p": {"lane": m[0], "reg": m[1], "elem": m[2], "i": _i_of(lay, *m[:3])},
                                 "q": {"lane": m[3], "reg": m[4], "elem": m[5], "i": _i_of(lay, *m[3:])}})
        else:
            z = ("unknown", f"z3 {v} ({s.reason_unknown()})")
    if opts.enum:
        w = _min_collision_enum(lay)
        e = ("proved", None) if w is None else ("refuted", w)
    res = _combine(ob, z, e, t0, same=lambda a, b: (a["p"], a["q"]) == (b["p"], b["q"]))
    if isinstance(res, Refuted) and "cell" not in res.witness:
        w = res.witness["p"]
        c = lay.at(w["lane"], w["reg"], w["elem"])
        res.witness["cell"] = _cell(lay, *c)
    return _warpify(lay, res)


def _box_domain(lay: Layout) -> bool:
    """Whether the held points are exactly lanes x nregs x epr, by construction (no predicate)."""
    return (not lay.is_table and lay.active_src is None and lay.elements >= lay.nregs * lay.epr
            and lay.index_src.replace(" ", "") == "reg*epr+elem")


def _uncovered_enum(lay: Layout) -> tuple[dict | None, np.ndarray]:
    """The smallest uncovered cell (or None), and the smallest holder of every cell (-1 if none)."""
    f = lay._full
    idx = np.flatnonzero(f["held"])
    P, R, C = lay.products, lay.rows, lay.cols
    ok = (f["row"][idx] >= 0) & (f["row"][idx] < R) & (f["col"][idx] >= 0) & (f["col"][idx] < C) \
        & (f["product"][idx] >= 0) & (f["product"][idx] < P)
    idx = idx[ok]
    cell = (f["product"][idx] * R + f["row"][idx]) * C + f["col"][idx]
    holder = np.full(P * R * C, -1, dtype=np.int64)
    # the smallest holder of each cell: sort by (cell, point), keep the first of each run
    order = np.lexsort((idx, cell))
    cs, ps = cell[order], idx[order]
    first = np.ones(cs.size, dtype=bool)
    first[1:] = cs[1:] != cs[:-1]
    holder[cs[first]] = ps[first]
    miss = np.flatnonzero(holder < 0)
    if miss.size == 0:
        return None, holder
    k = int(miss[0])
    p, rc = divmod(k, R * C)
    r, c = divmod(rc, C)
    return _cell(lay, r, c, p), holder


def check_surjective(lay: Layout, ob: Obligation | str, opts: Options) -> Result:
    """Every cell of the products x rows x cols matrix is held by some point."""
    ob = ob if isinstance(ob, Obligation) else _mk(
        "layout.surjective", ob, f"every cell of the {lay.rows}x{lay.cols} matrix is held")
    t0 = time.perf_counter()
    z3 = _z3()
    ncell = lay.products * lay.rows * lay.cols
    npts = lay.lanes * lay.nregs * lay.epr
    z = e = None
    holder = None
    if opts.enum:
        w, holder = _uncovered_enum(lay)
        e = ("proved", None) if w is None else ("refuted", {"cell": w})
    if opts.z3:
        p, q = _point("p"), _point("q")
        rp, cp, pp = lay.z3_terms(*p)
        pigeon = _box_domain(lay) and npts == ncell
        if pigeon:
            # Pigeonhole, counted exactly: |points| = lanes*nregs*epr = |cells|; so in range
            # and injective implies onto.  One query refutes "out of range or colliding".
            rq, cq, pq = lay.z3_terms(*q)
            s = _solver(opts)
            s.add(z3.Or(z3.And(lay.z3_held(*p), z3.Not(_in_range_z3(lay, rp, cp, pp))),
                        z3.And(lay.z3_held(*p), lay.z3_held(*q), _lt_lex(list(p), list(q)),
                               rp == rq, cp == cq, pp == pq)))
            v = _check(s)
            if v == "unsat":
                claim = (f"{ob.claim} (pigeonhole: {lay.lanes} lanes x {lay.nregs} regs x {lay.epr} elems = "
                         f"{npts} points = {lay.products} x {lay.rows} x {lay.cols} cells; in range and injective)")
                z = ("proved", _certificate(s, ob.family, ob.subject, claim) if opts.certificates else None)
            elif v != "sat":
                z = ("unknown", f"z3 {v} ({s.reason_unknown()})")
        if z is None:
            cell_w = _z3_uncovered_or_holder(lay, holder, opts, ob)
            z = cell_w
    res = _combine(ob, z, e, t0)
    if isinstance(res, Refuted):
        res.witness["matrix"] = {"rows": lay.rows, "cols": lay.cols, "products": lay.products}
        res.witness["points"] = int(lay._full["held"].sum())
    return res


def _z3_uncovered_or_holder(lay: Layout, holder: np.ndarray | None, opts: Options, ob: Obligation) -> tuple:
    """Z3's half of surjectivity when pigeonhole does not apply.

    With an enumerated holder table: if every cell has a holder, Z3 checks the table (for
    every cell in range, the holder is held and maps to it) - a quantifier-free
    certificate.  If a cell has no holder, Z3 confirms that no held point maps to it.
    Without a table (engine=z3), a quantified query.
    """
    z3 = _z3()
    P, R, C = lay.products, lay.rows, lay.cols
    if holder is not None:
        miss = np.flatnonzero(holder < 0)
        if miss.size:
            k = int(miss[0])
            pr, rc = divmod(k, R * C)
            r, c = divmod(rc, C)
            p = _point("p")
            rp, cp, pp = lay.z3_terms(*p)
            s = _solver(opts)
            s.add(lay.z3_held(*p), rp == r, cp == c, pp == pr)
            v = _check(s)
            if v == "unsat":
                return ("refuted", {"cell": _cell(lay, r, c, pr)})
            return ("unknown", f"z3 finds a holder of the enumerated gap ({v})")
        # holder table -> If-tree over the flat cell index; check it maps back
        nb, ne = lay.nregs, lay.epr
        lane_t = holder // (nb * ne)
        reg_t = (holder // ne) % nb
        elem_t = holder % ne
        cell = z3.BitVec("cell", Z3_WIDTH)
        tl, tr, te = (_if_tree(t, cell) for t in (lane_t, reg_t, elem_t))
        rr, cc, pp = lay.z3_terms(tl, tr, te)
        s = _solver(opts)
        s.add(z3.ULT(cell, P * R * C))
        s.add(z3.Or(z3.Not(lay.z3_held(tl, tr, te)),
                    (pp * R + rr) * C + cc != cell, z3.Not(_in_range_z3(lay, rr, cc, pp))))
        v = _check(s)
        if v == "unsat":
            claim = f"{ob.claim} (by an explicit holder for each of the {P * R * C} cells)"
            return ("proved", _certificate(s, ob.family, ob.subject, claim) if opts.certificates else None)
        return ("unknown", f"z3 rejects the enumerated holder table ({v})")
    # engine=z3 alone: a quantified query (may time out -> unknown)
    r, c, pr = z3.BitVecs("r c pr", Z3_WIDTH)
    l, g, el = z3.BitVecs("l g el", Z3_WIDTH)
    rr, cc, pp = lay.z3_terms(l, g, el)
    body = z3.ForAll([l, g, el], z3.Implies(lay.z3_held(l, g, el), z3.Or(rr != r, cc != c, pp != pr)))
    cons = [z3.ULT(r, R), z3.ULT(c, C), z3.ULT(pr, P), body]
    s = _solver(opts)
    s.add(*cons)
    v = _check(s)
    if v == "unsat":
        return ("proved", _certificate(s, ob.family, ob.subject, ob.claim) if opts.certificates else None)
    if v == "sat":
        best = None
        for _ in range(64):        # tighten lexicographically: (product, row, col)
            m = s.model()
            best = [m.eval(x, model_completion=True).as_long() for x in (pr, r, c)]
            s.add(_lt_lex([pr, r, c], [z3.BitVecVal(x, Z3_WIDTH) for x in best]))
            if _check(s) != "sat":
                break
        return ("refuted", {"cell": _cell(lay, best[1], best[2], best[0])})
    return ("unknown", f"z3 {v} on the quantified surjectivity query")


def _if_tree(vals: np.ndarray, idx):
    z3 = _z3()
    n = vals.size
    bits = max(1, int(n - 1).bit_length())

    def build(lo: int, hi: int, bit: int):
        seg = vals[lo:min(hi, n)]
        if seg.size == 0 or (seg == seg[0]).all():
            return z3.BitVecVal(int(seg[0]) if seg.size else 0, Z3_WIDTH)
        mid = lo + (1 << bit)
        return z3.If(z3.Extract(bit, bit, idx) == 1, build(mid, hi, bit - 1), build(lo, mid, bit - 1))

    return build(0, 1 << bits, bits - 1)


def _bit_los(lay: Layout) -> np.ndarray:
    from .layout import _formula

    es = np.arange(lay.epr)
    v = _formula(lay.bit_lo_src).eval({"elem": es, "container": lay.elem_bits, "shift": lay.shift, "epr": lay.epr})
    return np.broadcast_to(np.asarray(v, dtype=np.int64), es.shape)


def check_packing(lay: Layout, ob: Obligation | str, opts: Options) -> Result:
    """Each element's value lies inside its container and its register; elements of a register are disjoint."""
    ob = ob if isinstance(ob, Obligation) else _mk(
        "layout.packing", ob, "element values lie inside their container and register and do not overlap")
    t0 = time.perf_counter()
    vb, cb, rb, sh = lay.value_bits, lay.elem_bits, lay.reg_bits, lay.shift
    lo = _bit_los(lay)
    z = e = None
    if opts.z3:
        z3 = _z3()
        e1, e2 = z3.BitVecs("e1 e2", Z3_WIDTH)
        lo1, lo2 = lay.z3_bit_lo(None, None, e1), lay.z3_bit_lo(None, None, e2)
        outside = z3.Or(z3.UGT(lo1 + vb, rb), z3.BoolVal(sh + vb > cb or sh < 0))
        overlap = z3.And(z3.ULT(e1, e2), z3.ULT(e2, lay.epr), z3.ULT(lo1, lo2 + vb), z3.ULT(lo2, lo1 + vb))
        cons = [z3.ULT(e1, lay.epr), z3.Or(outside, overlap)]
        s = _solver(opts)
        s.add(*cons)
        v = _check(s)
        if v == "unsat":
            z = ("proved", _certificate(s, ob.family, ob.subject, ob.claim) if opts.certificates else None)
        elif v == "sat":
            m = _lexmin(cons, [e1], opts)
            z = ("refuted", {"elem": m[0]}) if m else ("unknown", "z3 could not minimise the witness")
        else:
            z = ("unknown", f"z3 {v}")
    bad, why = None, ""
    for a in range(lay.epr):
        if lo[a] < 0 or lo[a] + vb > rb:
            bad, why = a, f"element {a} (bits [{lo[a] + vb - 1}:{lo[a]}]) spills out of the {rb}-bit register"
        elif sh + vb > cb or sh < 0:
            bad, why = a, f"a {vb}-bit value at offset {sh} does not fit its {cb}-bit container"
        else:
            hit = [b for b in range(a + 1, lay.epr) if lo[a] < lo[b] + vb and lo[b] < lo[a] + vb]
            if hit:
                bad, why = a, (f"element {a} (bits [{lo[a] + vb - 1}:{lo[a]}]) overlaps element {hit[0]} "
                               f"(bits [{lo[hit[0]] + vb - 1}:{lo[hit[0]]}])")
        if bad is not None:
            break
    if opts.enum:
        e = ("proved", None) if bad is None else ("refuted", {"elem": bad})
    res = _combine(ob, z, e, t0)
    if isinstance(res, Refuted):
        a = res.witness["elem"]
        res.witness.update(bits=f"[{lo[a] + vb - 1}:{lo[a]}]", container_bits=cb, value_bits=vb, shift=sh,
                           reg_bits=rb, why=why if a == bad else "")
    return res


def check_equal(a: Layout, b: Layout, ob: Obligation | str, opts: Options, *, bits: bool = True,
                by: str = "point", family: str = "layout.equal", names: tuple[str, str] = ("a", "b")) -> Result:
    """``a`` and ``b`` agree everywhere: same held points, same cells (and bit positions).

    ``by="point"`` compares (lane, reg, elem); ``by="element"`` compares (lane, i) - for
    operands with the same element list but different packings (C and D).  A refutation
    carries the first differing point.
    """
    ob = ob if isinstance(ob, Obligation) else _mk(family, ob, f"{names[0]} equals {names[1]} at every point")
    t0 = time.perf_counter()
    dims = ("lanes", "products", "rows", "cols") + (("nregs", "epr") if by == "point" else ("elements",))
    diff = {d: (getattr(a, d), getattr(b, d)) for d in dims if getattr(a, d) != getattr(b, d)}
    if bits and by == "point":
        for d in ("value_bits", "reg_bits"):
            if getattr(a, d) != getattr(b, d):
                diff[d] = (getattr(a, d), getattr(b, d))
    if diff:
        return Refuted(ob, {"shape": {k: {names[0]: v[0], names[1]: v[1]} for k, v in diff.items()}}, "shape",
                       time.perf_counter() - t0)
    if by == "element":
        for lay in (a, b):
            if lay.index_src.replace(" ", "") != "reg*epr+elem":
                return Unknown(ob, f"{lay.name}: element comparison needs the convention i = reg * epr + elem")
    z = e = None
    if opts.z3:
        z3 = _z3()
        if by == "point":
            p = list(_point("p"))
            pa = pb = p
            box = [z3.ULT(p[0], a.lanes), z3.ULT(p[1], a.nregs), z3.ULT(p[2], a.epr)]
            order = p
        else:
            lane, i = z3.BitVecs("p_lane p_i", Z3_WIDTH)
            pa = [lane, z3.UDiv(i, a.epr), z3.URem(i, a.epr)]
            pb = [lane, z3.UDiv(i, b.epr), z3.URem(i, b.epr)]
            box = [z3.ULT(lane, a.lanes), z3.ULT(i, a.elements)]
            order = [lane, i]
        ha, hb = a.z3_held(*pa), b.z3_held(*pb)
        ta, tb = a.z3_terms(*pa), b.z3_terms(*pb)
        differ = [x != y for x, y in zip(ta, tb)]
        if bits and by == "point":
            differ.append(a.z3_bit_lo(*pa) != b.z3_bit_lo(*pb))
        cons = box + [z3.Or(ha != hb, z3.And(ha, z3.Or(*differ)))]
        s = _solver(opts)
        s.add(*cons)
        v = _check(s)
        if v == "unsat":
            z = ("proved", _certificate(s, ob.family, ob.subject, ob.claim) if opts.certificates else None)
        elif v == "sat":
            m = _lexmin(cons, order, opts)
            if m is None:
                z = ("unknown", "z3 could not minimise the witness")
            else:
                z = ("refuted", {"point": dict(zip(("lane", "reg", "elem") if by == "point" else ("lane", "i"), m))})
        else:
            z = ("unknown", f"z3 {v} ({s.reason_unknown()})")
    if opts.enum:
        fa, fb = a._full, b._full
        if by == "point":
            ka = kb = np.arange(fa["lane"].size)
        else:
            # (lane, i) order: both boxes in (lane, reg, elem) order are (lane, i) order
            ka = np.flatnonzero(fa["i"] < a.elements)
            kb = np.flatnonzero(fb["i"] < b.elements)
        ha, hb = fa["held"][ka], fb["held"][kb]
        bad = ha != hb
        same_img = np.ones_like(bad)
        for key in ("row", "col", "product") + (("bit_lo",) if bits and by == "point" else ()):
            same_img &= fa[key][ka] == fb[key][kb]
        bad |= ha & ~same_img
        where = np.flatnonzero(bad)
        if where.size == 0:
            e = ("proved", None)
        else:
            k = int(ka[where[0]])
            e = ("refuted", {"point": ({"lane": int(fa["lane"][k]), "reg": int(fa["reg"][k]), "elem": int(fa["elem"][k])}
                                       if by == "point" else {"lane": int(fa["lane"][k]), "i": int(fa["i"][k])})})
    res = _combine(ob, z, e, t0, same=lambda x, y: x["point"] == y["point"])
    if isinstance(res, Refuted):
        w = res.witness["point"]
        for lay, nm in ((a, names[0]), (b, names[1])):
            if by == "point":
                lane, reg, elem = w["lane"], w["reg"], w["elem"]
            else:
                lane, (reg, elem) = w["lane"], divmod(w["i"], lay.epr)
            c = lay.at(lane, reg, elem)
            if c is None:
                res.witness[nm] = None
            else:
                d = _cell(lay, *c)
                k = (lane * lay.nregs + reg) * lay.epr + elem
                lo = int(lay._full["bit_lo"][k])
                d["bits"] = f"[{lo + lay.value_bits - 1}:{lo}]"
                d["i"] = int(lay._full["i"][k])
                res.witness[nm] = d
    return _warpify(a, res)


def check_single_product(lay: Layout, ob: Obligation | str, opts: Options) -> Result:
    """All elements of a lane belong to one product (a lane takes part in one MMA computation)."""
    ob = ob if isinstance(ob, Obligation) else _mk("layout.products", ob, "each lane's elements belong to one product")
    t0 = time.perf_counter()
    z = e = None
    if opts.z3:
        z3 = _z3()
        p = list(_point("p"))
        reg2, elem2 = z3.BitVecs("q_reg q_elem", Z3_WIDTH)
        q = [p[0], reg2, elem2]
        cons = [lay.z3_held(*p), lay.z3_held(*q), lay.z3_terms(*p)[2] != lay.z3_terms(*q)[2]]
        s = _solver(opts)
        s.add(*cons)
        v = _check(s)
        if v == "unsat":
            z = ("proved", _certificate(s, ob.family, ob.subject, ob.claim) if opts.certificates else None)
        elif v == "sat":
            m = _lexmin(cons, [p[0]], opts)
            z = ("refuted", {"lane": m[0]}) if m else ("unknown", "z3 could not minimise the witness")
        else:
            z = ("unknown", f"z3 {v}")
    if opts.enum:
        f = lay.enumerate()
        bad = None
        for lane in range(lay.lanes):
            ps = np.unique(f["product"][f["lane"] == lane])
            if ps.size > 1:
                bad = lane
                break
        e = ("proved", None) if bad is None else ("refuted", {"lane": bad})
    res = _combine(ob, z, e, t0)
    if isinstance(res, Refuted):
        f = lay.enumerate()
        res.witness["products"] = sorted(set(int(x) for x in f["product"][f["lane"] == res.witness["lane"]]))
    return res


def _arith(ob: Obligation, holds: bool, lhs: tuple[str, int], rhs: tuple[str, int], witness: dict, t0: float,
           opts: Options) -> Result:
    """An arithmetic claim lhs == rhs, with a (trivial, re-checkable) SMT certificate."""
    z3 = _z3()
    s = _solver(opts)
    a, b = z3.Int(lhs[0]), z3.Int(rhs[0])
    s.add(a == lhs[1], b == rhs[1], a != b)
    v = _check(s)
    if (v == "unsat") != holds:
        return Unknown(ob, f"arithmetic disagreement ({lhs} vs {rhs}: z3 {v})", "arithmetic")
    if holds:
        return Proved(ob, "arithmetic", time.perf_counter() - t0,
                      _certificate(s, ob.family, ob.subject, ob.claim) if opts.certificates else None)
    return Refuted(ob, witness, "arithmetic", time.perf_counter() - t0)


# =========================================================================================
# The layout obligations


def _h(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _params_text(params: dict) -> str:
    return "" if not params else " (" + ", ".join(f"{k}={v}" for k, v in sorted(params.items())) + ")"


def _subject(lay: Layout) -> str:
    p = f" x{lay.products}" if lay.products > 1 else ""
    return f"{lay.name} {lay.rows}x{lay.cols}{p} [{lay.nregs}x{lay.epr}]{_params_text(lay.params)}"


def layout_obligations(forms: Sequence[cat.Form]) -> list[Obligation]:
    """The layout obligations of every mma / mma.sp / wgmma form in ``forms`` (before dedupe)."""
    from . import layout as L

    obs: list[Obligation] = []
    for form in forms:
        if form.family not in L.LAYOUT_FAMILIES:
            continue
        opc = form.opcode
        ops = L.layout_operands(form)
        for op in ops:
            ents = L.resolve(form, op)
            obs.append(_resolve_ob(form, op, ents))
            if len(ents) != 1:
                continue
            ent = ents[0]
            sec = f"{ent.section}"
            base = L.layout_from_entry(ent, form, op)
            obs.append(_regcount_ob(form, op, ent, base))
            pk = Obligation("layout.packing", _packing_subject(base),
                            "element values lie inside their container and register and do not overlap",
                            key=base.packing_key, cover=[(opc, op)], section=L.spec().convention_section)
            pk.run = _bind(check_packing, base, pk)
            obs.append(pk)
            if ent.products > 1 or cat.products_per_warp(form) > 1:
                obs.append(_products_ob(form, op, ent, base))
            for params in L.param_space(form, op):
                lay = L.layout_from_entry(ent, form, op, params) if params else base
                subj = _subject(lay)
                for fam, fn, claim in (
                        ("layout.range", check_range, f"every held (lane, reg, elem) lands inside the "
                                                      f"{lay.rows}x{lay.cols} matrix"),
                        ("layout.injective", check_injective, "no two held (lane, reg, elem) hold the same cell"),
                        ("layout.surjective", check_surjective, f"every cell of the {lay.rows}x{lay.cols} matrix is held")):
                    ob = Obligation(fam, subj, claim, key=lay.map_key, cover=[(opc, op)], section=sec)
                    ob.run = _bind(fn, lay, ob)
                    obs.append(ob)
            if ent.same_as:
                ref = L.spec().by_id[ent.same_as]
                other = L.layout_from_entry(ref, form, op)
                ob = Obligation("layout.same_as", f"{ent.id} = {ref.id}{_dims_text(base)}",
                                f"{ent.id} equals {ref.id} (\"same as\", {ref.section}) at every point, bits included",
                                key=_h(base.key, other.key), cover=[(opc, op)], section=ent.section)
                ob.run = (lambda o, a=base, b=other, ob=ob: check_equal(a, b, ob, o, bits=True))
                obs.append(ob)
        # C and D share a layout where the text says so
        env = L.selector_env(form, "c")
        for rule in L.spec().shared:
            if rule.applies(env) and all(o in ops for o in rule.operands):
                ec, ed = L.resolve(form, "c"), L.resolve(form, "d")
                if len(ec) != 1 or len(ed) != 1:
                    continue
                lc = L.layout_from_entry(ec[0], form, "c")
                ld = L.layout_from_entry(ed[0], form, "d")
                ob = Obligation("layout.shared", f"C {lc.name} [{lc.nregs}x{lc.epr}] = D {ld.name} [{ld.nregs}x{ld.epr}]",
                                "C and D hold element i of every lane in the same cell", key=_h(lc.map_key, ld.map_key),
                                cover=[(opc, "c=d")], section=rule.section)
                ob.run = (lambda o, a=lc, b=ld, ob=ob: check_equal(a, b, ob, o, bits=False, by="element",
                                                                   names=("c", "d")))
                obs.append(ob)
    return obs


def _packing_subject(lay: Layout) -> str:
    return (f"{lay.nregs} x b{lay.reg_bits}, {lay.epr} x {lay.elem_bits}-bit containers, "
            f"{lay.value_bits}-bit values at offset {lay.shift}")


def _dims_text(lay: Layout) -> str:
    return f" {lay.rows}x{lay.cols} [{lay.nregs}x{lay.epr}, {lay.value_bits}b@{lay.shift}/{lay.elem_bits}]"


def _bind(fn, lay, ob):
    return lambda o: fn(lay, ob, o)


def _resolve_ob(form: cat.Form, op: str, ents) -> Obligation:
    ids = [e.id for e in ents]
    ob = Obligation("layout.resolve", f"{form.opcode} {op}", "the operand resolves to exactly one spec entry",
                    cover=[(form.opcode, op)], section="specs/fragments_mma*.toml")

    def run(opts: Options, ids=ids, ob=ob) -> Result:
        t0 = time.perf_counter()
        if len(ids) == 1:
            return Proved(ob, "catalog", time.perf_counter() - t0, None, note=ids[0])
        return Refuted(ob, {"entries": ids}, "catalog", time.perf_counter() - t0)

    ob.run = run
    return ob


def check_regcount(lay: Layout, operand: cat.Operand, ob: Obligation | str, opts: Options) -> Result:
    """The catalog's registers hold exactly the layout's element list, and (for operands read
    in full) 32 lanes' elements cover the matrix exactly."""
    ob = ob if isinstance(ob, Obligation) else _mk(
        "layout.regcount", ob, "register counts match element widths (catalog vs element list)")
    t0 = time.perf_counter()
    need_bits = lay.elements * lay.elem_bits
    have_bits = operand.count * operand.reg_bits
    cells = lay.rows * lay.cols * lay.products
    if lay.reg_bits != operand.reg_bits:
        return _arith(ob, False, ("layout_reg_bits", lay.reg_bits), ("catalog_reg_bits", operand.reg_bits),
                      {"layout_reg_bits": lay.reg_bits, "catalog_reg_bits": operand.reg_bits}, t0, opts)
    if lay.active_src is None and not lay.is_table and lay.elements * lay.lanes != cells:
        return _arith(ob, False, ("elements_x_lanes", lay.elements * lay.lanes), ("cells", cells),
                      {"elements": lay.elements, "lanes": lay.lanes, "cells": cells}, t0, opts)
    return _arith(ob, need_bits == have_bits, ("spec_bits", need_bits), ("register_bits", have_bits),
                  {"spec_elements": lay.elements, "elem_bits": lay.elem_bits, "spec_bits": need_bits,
                   "catalog_registers": operand.count, "reg_bits": operand.reg_bits, "register_bits": have_bits},
                  t0, opts)


def _regcount_ob(form: cat.Form, op: str, ent, lay: Layout) -> Obligation:
    operand = form.operands[op]
    subj = (f"{ent.id}: {ent.elements} elements x {operand.elem_bits} bits vs {operand.count} x "
            f"b{operand.reg_bits} ({operand.ptx_type})")
    ob = Obligation("layout.regcount", subj,
                    "the catalog's registers hold exactly the spec's element list (register counts match element widths)",
                    key=_h(ent.id, ent.elements, operand.elem_bits, operand.count, operand.reg_bits,
                           lay.rows, lay.cols, lay.products, lay.active_src is None),
                    cover=[(form.opcode, op)], section=ent.section)
    ob.run = lambda opts: check_regcount(lay, operand, ob, opts)
    return ob


def _products_ob(form: cat.Form, op: str, ent, lay: Layout) -> Obligation:
    cat_p = cat.products_per_warp(form)
    ob = Obligation("layout.products", f"{ent.id}: {ent.products} products (catalog: {cat_p})",
                    "the spec's and the catalog's product counts agree, and each lane's elements belong to one product",
                    key=_h(lay.map_key, cat_p), cover=[(form.opcode, op)], section=ent.section)

    def run(opts: Options) -> Result:
        t0 = time.perf_counter()
        if ent.products != cat_p:
            return _arith(ob, False, ("spec_products", ent.products), ("catalog_products", cat_p),
                          {"spec_products": ent.products, "catalog_products": cat_p}, t0, opts)
        return check_single_product(lay, ob, opts)

    ob.run = run
    return ob


register_obligations("layout", layout_obligations)

# =========================================================================================
# Reports


FAMILY_TEXT = {
    "layout.resolve": "every form/operand resolves to exactly one spec entry",
    "layout.regcount": "register counts match element widths (catalog vs spec element list)",
    "layout.packing": "element bits inside container and register, no overlap",
    "layout.range": "every held (lane, reg, elem) lands inside the matrix",
    "layout.injective": "no two (lane, reg, elem) hold the same cell",
    "layout.surjective": "every cell is held (counted exactly)",
    "layout.products": "m8n8k4 .f16: 4 products, each lane in one",
    "layout.shared": "C and D share a layout where the text says so",
    "layout.same_as": "sparse fragments equal the dense ones the text names",
}


def summarize(results: Sequence[Result]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for r in results:
        d = out.setdefault(r.obligation.family, {"obligations": 0, "covers": 0, "proved": 0, "refuted": 0, "unknown": 0})
        d["obligations"] += 1
        d["covers"] += len(r.obligation.cover)
        d[r.status] += 1
    return dict(sorted(out.items()))


def summary_table(results: Sequence[Result], timings: bool = True) -> str:
    s = summarize(results)
    tt: dict[str, float] = {}
    for r in results:
        tt[r.obligation.family] = tt.get(r.obligation.family, 0.0) + r.seconds
    head = f"{'family':22s} {'unique':>7s} {'covers':>7s} {'proved':>7s} {'refuted':>8s} {'unknown':>8s}"
    if timings:
        head += f" {'seconds':>8s}"
    lines = [head]
    for fam, d in s.items():
        line = (f"{fam:22s} {d['obligations']:7d} {d['covers']:7d} {d['proved']:7d} {d['refuted']:8d} "
                f"{d['unknown']:8d}")
        if timings:
            line += f" {tt[fam]:8.2f}"
        lines.append(line)
    tot = {k: sum(d[k] for d in s.values()) for k in ("obligations", "covers", "proved", "refuted", "unknown")}
    line = (f"{'total':22s} {tot['obligations']:7d} {tot['covers']:7d} {tot['proved']:7d} {tot['refuted']:8d} "
            f"{tot['unknown']:8d}")
    if timings:
        line += f" {sum(tt.values()):8.2f}"
    lines.append(line)
    return "\n".join(lines)


def _witness_text(w: dict) -> str:
    return json.dumps(w, sort_keys=True)


def report_markdown(results: Sequence[Result], forms: Sequence[cat.Form], modules: dict[str, str] | None = None) -> str:
    """The checked-in proofs/REPORT.md: deterministic, no timings."""
    from . import layout as L

    fam_forms = {"mma": 0, "mma.sp": 0, "wgmma": 0}
    wg_opcodes: set[str] = set()
    for f in forms:
        if f.family in fam_forms:
            fam_forms[f.family] += 1
        if f.family == "wgmma":
            wg_opcodes.add(f.opcode)
    s = summarize(results)
    out = ["# ptx-formal proof report", "",
           "Generated by `ptx-formal prove --all`; do not edit (a test regenerates it and compares). "
           "Every verdict is decided twice, by Z3 on bit-vector terms compiled from `specs/` and by exhaustive "
           "enumeration of the same maps; a verdict stands only when both agree. Identical fragments are "
           "proved once (content hash) and reported for every form they cover. Timings are not recorded here "
           "(`ptx-formal prove --all --json`, `benchmarks/bench_prove.py`).", "",
           f"Catalog: {len(forms)} documented forms, of which {fam_forms['mma']} `mma`, {fam_forms['mma.sp']} "
           f"`mma.sp` and {fam_forms['wgmma']} `wgmma.mma_async{{.sp}}` ({len(wg_opcodes)} opcodes, each with A from a "
           "descriptor and from registers) have element layouts (wmma fragments are unspecified by PTX, 9.7.14.4.1). "
           "wgmma layouts are (warp, lane, reg, elem) -> (row, col) over the 128 threads of a warpgroup.", ""]
    if modules:
        out.append("Obligation sources: layout (formal.layout)" + "".join(
            f", {m} ({st})" for m, st in sorted(modules.items())) + ".")
        out.append("")
    out += ["## Summary by obligation family", "",
            "| family | claim | unique obligations | form-operands covered | proved | refuted | unknown |",
            "|---|---|---:|---:|---:|---:|---:|"]
    claims = {}
    for r in results:
        claims.setdefault(r.obligation.family, FAMILY_TEXT.get(r.obligation.family, r.obligation.claim))
    for fam, d in s.items():
        out.append(f"| `{fam}` | {claims[fam]} | {d['obligations']} | {d['covers']} | {d['proved']} | "
                   f"{d['refuted']} | {d['unknown']} |")
    tot = {k: sum(d[k] for d in s.values()) for k in ("obligations", "covers", "proved", "refuted", "unknown")}
    out.append(f"| **total** | | {tot['obligations']} | {tot['covers']} | {tot['proved']} | {tot['refuted']} | "
               f"{tot['unknown']} |")
    out.append("")
    bad = [r for r in results if r.status != "proved"]
    out += ["## Refuted and unknown", ""]
    if not bad:
        out += ["None.", ""]
    else:
        out += ["| family | subject | status | witness / reason |", "|---|---|---|---|"]
        for r in sorted(bad, key=lambda r: (r.obligation.family, r.obligation.subject)):
            info = _witness_text(r.witness) if r.status == "refuted" else r.reason
            out.append(f"| `{r.obligation.family}` | {r.obligation.subject} | {r.status} | `{info}` |")
        out.append("")
    # per form
    status: dict[tuple[str, str], list[str]] = {}
    for r in results:
        for opc, col in r.obligation.cover:
            status.setdefault((opc, col), []).append(r.status)
    entry_of: dict[tuple[str, str], str] = {}
    for r in results:
        if r.obligation.family == "layout.resolve" and r.status == "proved":
            entry_of[tuple(r.obligation.cover[0])] = r.note

    def cell(opc: str, col: str) -> str:
        st = status.get((opc, col))
        if not st:
            return ""
        if "refuted" in st:
            return "✗"
        if "unknown" in st:
            return "?"
        return "✓"

    out += ["## Per form", "",
            "Each cell: ✓ every obligation on that operand proved (resolve, regcount, packing, range, injective, "
            "surjective, and where they apply products, same_as), ✗ one refuted, ? one unknown. "
            "`C=D`: the shared-layout obligation; — where the text gives C and D separate layouts (m8n8k4 .f16 with "
            ".ctype != .dtype). The entry ids name the `[[fragment]]` of the spec files.", ""]
    for fam in ("mma", "mma.sp", "wgmma"):
        base_cols = ["a", "d", "e"] if fam == "wgmma" else ["a", "b", "c", "d", "scale_a", "scale_b", "c=d"]
        fs = [f for f in forms if f.family == fam]
        if fam == "wgmma":          # one row per opcode: its A-from-registers form has every layout operand
            fs = list({f.opcode: f for f in fs if f.asource != "desc"}.values())
        if not fs:
            continue
        opcs = {f.opcode for f in fs}
        extra = sorted({col for (opc, col) in status if opc in opcs and col not in base_cols})
        cols = base_cols + extra
        heads = [c if c != "c=d" else "C=D" for c in cols]
        title = f"`{fam}` ({len(fs)} forms)" if fam != "wgmma" else \
            f"`wgmma.mma_async{{.sp}}` ({len(fs)} opcodes; a = A in registers, e = sparse metadata nibbles)"
        out += [f"### {title}", "",
                "| form | " + " | ".join(heads) + " |", "|---|" + "---|" * len(cols)]
        for f in fs:
            opc = f.opcode
            ops = L.layout_operands(f)
            cells = []
            for c in cols:
                mark = cell(opc, c)
                if not mark and (c in ops or c == "c=d"):
                    mark = "—"          # an operand with no claim here (e.g. C=D for per-type layouts)
                ent = entry_of.get((opc, c))
                cells.append(f"{mark} `{ent}`" if (mark and ent and c in ("a", "b", "c", "e")) else mark)
            out.append(f"| `{opc}` | " + " | ".join(cells) + " |")
        out.append("")
    for name in sorted(_REPORT_SECTIONS):
        mine = [r for r in results if r.obligation.family.startswith(name + ".")]
        if mine:
            out += _REPORT_SECTIONS[name](mine)
    out += ["## Spec entries", "",
            "| entry | operands | section | evidence | forms |", "|---|---|---|---|---:|"]
    uses: dict[str, set] = {}
    for (opc, col), ent in entry_of.items():
        uses.setdefault(ent, set()).add(opc)
    for e in L.spec().entries:
        out.append(f"| `{e.id}` | {', '.join(e.operands)} | {e.section} | {e.evidence} | {len(uses.get(e.id, ()))} |")
    out.append("")
    return "\n".join(out)


def write_certificates(results: Sequence[Result], directory) -> int:
    """Write the SMT-LIB2 certificate of every proof under ``directory/<family>/``; returns how many."""
    from pathlib import Path

    root = Path(directory)
    n = 0
    used: set[str] = set()
    for r in results:
        if r.status != "proved" or not getattr(r, "smt2", None):
            continue
        fam = r.obligation.family
        base = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in r.obligation.subject)[:120].strip("_")
        name = f"{base}.{(r.obligation.key or _h(r.obligation.subject))[:8]}.smt2"
        while f"{fam}/{name}" in used:
            name = "_" + name
        used.add(f"{fam}/{name}")
        d = root / fam
        d.mkdir(parents=True, exist_ok=True)
        cover = r.obligation.cover
        extra = "".join(f"; covers: {opc} {col}\n" for opc, col in cover[:20])
        if len(cover) > 20:
            extra += f"; ... and {len(cover) - 20} more\n"
        (d / name).write_text(extra + r.smt2)
        n += 1
    return n


# =========================================================================================
# Auditing someone else's layout (formal.audit_layout; ptx-formal layout audit)


@dataclass
class AuditReport:
    """The verdict on a candidate layout: proved bijective and equal to the spec, or not."""

    form: str
    operand: str
    params: dict
    results: list            # formal.prove results: range, injective, surjective, equal
    spec_layout: Layout
    candidate: Layout

    @property
    def ok(self) -> bool:
        return all(r.status == "proved" for r in self.results)

    @property
    def status(self) -> str:
        st = [r.status for r in self.results]
        return "refuted" if "refuted" in st else "unknown" if "unknown" in st else "proved"

    @property
    def first_difference(self) -> dict | None:
        for r in self.results:
            if r.obligation.family == "audit.equal" and r.status == "refuted":
                return r.witness
        return None

    def to_dict(self) -> dict[str, Any]:
        return {"form": self.form, "operand": self.operand, "params": self.params, "status": self.status,
                "results": [r.to_dict() for r in self.results]}


def audit_layout(candidate: Layout, form_or_opcode, operand: str, *, compare_bits: bool = True,
                 timeout_ms: int = 20000, **params: int) -> AuditReport:
    """Prove ``candidate`` bijective and equal to the spec's layout of (form, operand).

    Equality is checked point by point over (lane, reg, elem): same cell, same product,
    and (with ``compare_bits``) the same bit position and width.  A refutation carries the
    FIRST differing (lane, reg, elem) (lexicographic), found by enumeration and confirmed
    minimal by Z3.
    """
    form = _as_form(form_or_opcode)
    op = _check_operand(form, operand)
    ref = fragment(form, op, **params)
    opts = Options(timeout_ms=timeout_ms)
    subject = f"{form.opcode} {op} (candidate {candidate.name or 'layout'})"
    res = [check_range(candidate, subject, opts), check_injective(candidate, subject, opts),
           check_surjective(candidate, subject, opts),
           check_equal(candidate, ref, subject, opts, bits=compare_bits, family="audit.equal",
                       names=("candidate", "spec"))]
    for r in res[:3]:
        r.obligation.family = "audit." + r.obligation.family.split(".", 1)[1]
    return AuditReport(form.opcode, op, dict(ref.params), res, ref, candidate)


def compare_observed(form_or_opcode, operand: str, observed, **params):
    """Prove an observed fragment (a silicon one-hot table) equal to the spec's, or refute it
    with the first differing (warp, lane, reg, elem): :func:`audit_layout` on
    :func:`formal.layout.observed_layout`.  Returns the audit report (``.ok``, ``.first_difference``)."""
    from . import layout as L

    cand = L.observed_layout(form_or_opcode, operand, observed, **params)
    return audit_layout(cand, form_or_opcode, operand, compare_bits=False, **params)
