"""A small algebra of layouts: finite maps between named integer spaces.

A :class:`Map` sends points of a box of named input dimensions to points of a box of
named output dimensions, e.g. a fragment ``(lane:32, reg:4, elem:2) -> (row:16, col:16)``
or a shared-memory tile ``(row:16, col:16) -> (offset:256)``.  It is the Triton
``LinearLayout`` idea (hardware dims -> logical dims, named) without the restriction to
GF(2)-linear maps: any map written as formulas of ``formal/expr.py`` or given as a table.

Every map can be evaluated two independent ways, and every claim about maps is checked
both ways:

* ``eval(env)`` -- numpy, elementwise; enumerates a whole domain in one call;
* ``z3(env)``   -- Z3 bit-vector terms (unsigned, 32 bits), for proofs.

Operations (each states what it requires and what it guarantees)::

    f.compose(g)      x -> g(f(x))          requires f.outs names == g.ins names and
                                            f(dom f) within dom g (proved, else an error
                                            with the first point that falls outside)
    f.invert()        y -> x with f(x) = y  requires f injective (else NotInvertible with
                                            two points of equal image); onto="box" also
                                            requires every output point hit.  The inverse
                                            is a table certified by Z3: g(f(x)) = x on
                                            dom f and f(g(y)) = y on dom g.
    f.restrict(...)   f on a sub-domain     fix a dim (dropped), shrink it to a range,
                                            or add a predicate
    f.product(g)      Triton ``L1 * L2``    input dims: union; a dim in both has size
                                            s1 * s2 and value x1 + s1 * x2; outputs
                                            likewise y1 + S1 * y2 (g tiles f)
    f.equals(g)       Proof: same domain and f(x) == g(x) everywhere
    f.injective() / f.surjective() / f.bijective() / f.in_range()   Proofs

A :class:`Proof` is ``proved`` / ``refuted`` (with the lexicographically smallest
witness, in the order of the input dims) / ``unknown`` (solver timeout; never proved).
Z3 and enumeration must agree on the verdict and on the witness; if they do not, the
result is ``unknown`` with the disagreement in ``detail`` (that is a bug to report).

Worked example::

    >>> tile = Map.from_formulas([("row", 16), ("col", 16)], [("offset", 256)],
    ...                          {"offset": "row * 16 + col"}, name="rowmajor16")
    >>> tile.bijective().status
    'proved'
    >>> inv = tile.invert()           # (offset) -> (row, col), certified
    >>> inv.eval({"offset": 37})
    {'row': 2, 'col': 5}
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from .expr import Formula

WIDTH = 32          # bit-vector width of every Z3 term
ENUM_LIMIT = 1 << 20  # largest domain enumerated for cross-checks
DEFAULT_TIMEOUT_MS = 30_000


class AlgebraError(ValueError):
    """An operation whose requirements do not hold (one-line message, with a witness)."""

    def __init__(self, message: str, witness: dict | None = None):
        super().__init__(message)
        self.witness = witness


class NotInvertible(AlgebraError):
    """Raised by invert(); ``undecided`` is True when the solver gave no verdict (the map
    may well be invertible: that is Unknown, not a refutation)."""

    undecided = False


@dataclass(frozen=True)
class Dim:
    name: str
    size: int

    def __str__(self) -> str:
        return f"{self.name}:{self.size}"


def _dims(spec: Iterable) -> tuple[Dim, ...]:
    out = []
    for d in spec:
        if isinstance(d, Dim):
            out.append(d)
        else:
            n, s = d
            out.append(Dim(str(n), int(s)))
    names = [d.name for d in out]
    if len(set(names)) != len(names):
        raise AlgebraError(f"duplicate dimension names {names}")
    for d in out:
        if d.size < 1:
            raise AlgebraError(f"dimension {d} has no points")
    return tuple(out)


# ---------------------------------------------------------------------------------------
# Proof results

@dataclass
class Proof:
    """Outcome of one obligation.  ``bool(proof)`` is True only when proved."""

    status: str                      # "proved" | "refuted" | "unknown"
    claim: str
    witness: dict | None = None      # smallest counterexample (refuted)
    detail: str = ""
    seconds: float = 0.0
    z3: str = ""                     # the solver's own verdict ("unsat", "sat", "unknown")
    enumeration: str = ""            # "agrees" / "skipped (domain too large)" / disagreement
    smt2: str | None = None          # the negated obligation as SMT-LIB (unsat = proved)

    def __bool__(self) -> bool:
        return self.status == "proved"

    def to_dict(self) -> dict:
        d = {"status": self.status, "claim": self.claim, "seconds": round(self.seconds, 4),
             "z3": self.z3, "enumeration": self.enumeration}
        if self.witness is not None:
            d["witness"] = self.witness
        if self.detail:
            d["detail"] = self.detail
        return d

    def __str__(self) -> str:
        s = f"{self.status.upper()}: {self.claim}"
        if self.witness is not None:
            s += f"  witness {self.witness}"
        if self.detail:
            s += f"  ({self.detail})"
        return s


def _bv(name: str):
    import z3
    return z3.BitVec(name, WIDTH)


def _val(x) -> Any:
    import z3
    if isinstance(x, int):
        return z3.BitVecVal(x, WIDTH)
    if isinstance(x, bool):
        return z3.BitVecVal(int(x), WIDTH)
    if isinstance(x, z3.BoolRef):
        return z3.If(x, z3.BitVecVal(1, WIDTH), z3.BitVecVal(0, WIDTH))
    return x


def _as_bool(x):
    import z3
    if isinstance(x, z3.BoolRef):
        return x
    if isinstance(x, bool):
        return z3.BoolVal(x)
    return _val(x) != 0


def _model_int(model, v) -> int:
    return model.eval(v, model_completion=True).as_long()


def minimize_witness(solver, variables: Sequence[tuple[str, Any]], timeout_ms: int) -> dict | None:
    """Lexicographically smallest model of ``solver`` over ``variables`` (in order).

    Each variable is fixed in turn to its least satisfiable value (binary search with
    push/pop), so the witness is the smallest (first variable most significant).
    Returns None if the solver times out along the way."""
    import z3

    fixed: dict[str, int] = {}
    for name, v in variables:
        lo, hi = 0, None
        if solver.check() != z3.sat:
            return None
        hi = _model_int(solver.model(), v)
        while lo < hi:
            mid = (lo + hi) // 2
            solver.push()
            solver.add(z3.ULE(v, mid))
            r = solver.check()
            if r == z3.sat:
                hi = min(mid, _model_int(solver.model(), v))
            elif r == z3.unsat:
                lo = mid + 1
            else:
                solver.pop()
                return None
            solver.pop()
        solver.add(v == hi)
        fixed[name] = hi
    return fixed


def _solver(timeout_ms: int):
    import z3
    s = z3.SolverFor("QF_BV")
    s.set("timeout", int(timeout_ms))
    return s


def decide(claim: str, negation_builder: Callable[[], tuple[list, list[tuple[str, Any]]]],
           enum_witness: Callable[[], dict | None] | None, timeout_ms: int = DEFAULT_TIMEOUT_MS,
           describe: Callable[[dict], str] | None = None) -> Proof:
    """Decide ``claim`` by Z3 (its negation unsat = proved) and, where given, enumeration.

    ``negation_builder()`` returns (constraints, ordered witness variables);
    ``enum_witness()`` returns the lexicographically smallest counterexample or None.
    Both must agree (verdict and witness), else the result is ``unknown``."""
    import z3

    t0 = time.perf_counter()
    cons, wvars = negation_builder()
    s = _solver(timeout_ms)
    s.add(*cons)
    smt2 = s.to_smt2()
    r = s.check()
    z3_verdict = str(r)
    witness = None
    if r == z3.sat:
        witness = minimize_witness(s, wvars, timeout_ms)
        if witness is None:
            r = z3.unknown
            z3_verdict = "unknown (during minimisation)"
    enum_note = "skipped"
    ew = None
    if enum_witness is not None:
        ew = enum_witness()
        if r == z3.unsat and ew is None or r == z3.sat and ew == witness:
            enum_note = "agrees"
        elif r == z3.unknown:
            enum_note = "no Z3 verdict; enumeration " + ("found " + str(ew) if ew else "found none")
        else:
            return Proof("unknown", claim, witness=ew or witness,
                         detail=f"Z3 ({z3_verdict}, witness {witness}) and enumeration "
                                f"(witness {ew}) disagree -- please report",
                         seconds=time.perf_counter() - t0, z3=z3_verdict, enumeration="DISAGREES")
    secs = time.perf_counter() - t0
    if r == z3.unsat:
        return Proof("proved", claim, seconds=secs, z3="unsat", enumeration=enum_note, smt2=smt2)
    if r == z3.sat:
        return Proof("refuted", claim, witness=witness, seconds=secs, z3="sat", enumeration=enum_note,
                     detail=describe(witness) if describe else "")
    return Proof("unknown", claim, seconds=secs, z3=z3_verdict, enumeration=enum_note,
                 detail="solver timed out or gave up; not proved")


# ---------------------------------------------------------------------------------------
# Maps

class Map:
    """A finite map ``ins -> outs`` between boxes of named integer dimensions.

    Subclasses implement ``_eval`` (numpy) and ``_z3`` (Z3); the domain is the box of
    ``ins`` intersected with ``_dom_eval`` / ``_dom_z3`` (default: the whole box)."""

    ins: tuple[Dim, ...]
    outs: tuple[Dim, ...]
    name: str = ""

    # -- to implement -------------------------------------------------------------------
    def _eval(self, env: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def _z3(self, env: Mapping[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def _dom_eval(self, env: Mapping[str, np.ndarray]) -> np.ndarray | None:
        return None

    def _dom_z3(self, env: Mapping[str, Any]):
        return None

    # -- public evaluation ----------------------------------------------------------------
    @property
    def in_names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.ins)

    @property
    def out_names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.outs)

    def size(self) -> int:
        return int(np.prod([d.size for d in self.ins], dtype=np.int64))

    def signature(self) -> str:
        a = ", ".join(map(str, self.ins))
        b = ", ".join(map(str, self.outs))
        return f"({a}) -> ({b})"

    def __repr__(self) -> str:
        return f"<Map {self.name or '?'} {self.signature()}>"

    def eval(self, env: Mapping[str, Any]) -> dict[str, Any]:
        """Evaluate at a point (ints) or at many points (equal-shape numpy arrays)."""
        scalar = all(not isinstance(v, np.ndarray) for v in env.values())
        arr = {k: np.asarray(env[k], dtype=np.int64) for k in self.in_names}
        out = self._eval(arr)
        if scalar:
            return {k: int(np.asarray(v)) for k, v in out.items()}
        return {k: np.broadcast_to(np.asarray(v, dtype=np.int64), np.shape(next(iter(arr.values())))).copy()
                if arr else np.asarray(v) for k, v in out.items()}

    def box(self) -> dict[str, np.ndarray]:
        """Every point of the input box, first dim slowest (C order)."""
        grids = np.meshgrid(*[np.arange(d.size, dtype=np.int64) for d in self.ins], indexing="ij")
        return {d.name: g.reshape(-1) for d, g in zip(self.ins, grids)}

    def domain_mask(self, env: Mapping[str, np.ndarray]) -> np.ndarray:
        n = len(next(iter(env.values()))) if env else 1
        m = self._dom_eval(env)
        return np.ones(n, dtype=bool) if m is None else np.asarray(m, dtype=bool).reshape(-1) & True

    def points(self) -> dict[str, np.ndarray]:
        """The domain (box filtered by the domain predicate), first dim slowest."""
        b = self.box()
        m = self.domain_mask(b)
        return {k: v[m] for k, v in b.items()}

    def enumerate(self) -> dict[str, np.ndarray]:
        """Domain points and their images, one flat array per dimension name."""
        p = self.points()
        out = self._eval(p)
        res = dict(p)
        for k, v in out.items():
            res[k] = np.broadcast_to(np.asarray(v, dtype=np.int64), p[self.in_names[0]].shape).copy() \
                if self.ins else np.asarray(v)
        return res

    def z3(self, env: Mapping[str, Any]) -> dict[str, Any]:
        """Z3 terms of the outputs; ``env`` maps input names to bit-vectors or ints."""
        return {k: _val(v) for k, v in self._z3({k: _val(env[k]) for k in self.in_names}).items()}

    def z3_domain(self, env: Mapping[str, Any]):
        """Z3 predicate: env is a point of the domain."""
        import z3
        env = {k: _val(env[k]) for k in self.in_names}
        parts = [z3.ULT(env[d.name], d.size) for d in self.ins]
        extra = self._dom_z3(env)
        if extra is not None:
            parts.append(_as_bool(extra))
        return z3.And(*parts) if parts else z3.BoolVal(True)

    def z3_vars(self, prefix: str = "") -> dict[str, Any]:
        return {d.name: _bv(prefix + d.name) for d in self.ins}

    def table(self) -> "TableMap":
        """This map as an explicit table (same domain)."""
        return TableMap.from_map(self)

    # -- obligations ------------------------------------------------------------------------
    def _check_enum(self) -> bool:
        return self.size() <= ENUM_LIMIT

    def in_range(self, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> Proof:
        """Every domain point maps inside the box of ``outs``."""
        import z3

        def neg():
            v = self.z3_vars("x_")
            o = self.z3(v)
            bad = z3.Or(*[z3.UGE(o[d.name], d.size) for d in self.outs]) if self.outs else z3.BoolVal(False)
            return [self.z3_domain(v), bad], list(v.items())

        def enum():
            e = self.enumerate()
            bad = np.zeros(len(e[self.in_names[0]]), dtype=bool)
            for d in self.outs:
                bad |= (e[d.name] < 0) | (e[d.name] >= d.size)
            return _first(e, self.in_names, bad)

        return decide(f"{self.name or 'map'} maps {self.signature()} into its output box", neg,
                      enum if self._check_enum() else None, timeout_ms)

    def injective(self, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> Proof:
        """No two domain points share an image.  Witness: the smallest point x that has an
        earlier point y with the same image (``x.*`` and ``y.*`` keys)."""
        import z3

        def neg():
            x = self.z3_vars("x_")
            y = self.z3_vars("y_")
            fx, fy = self.z3(x), self.z3(y)
            same = z3.And(*[fx[k] == fy[k] for k in self.out_names]) if self.outs else z3.BoolVal(True)
            # y lexicographically before x: the witness is the first point that collides
            lt = _lex_lt([y[k] for k in self.in_names], [x[k] for k in self.in_names])
            return ([self.z3_domain(x), self.z3_domain(y), lt, same],
                    [("x." + k, x[k]) for k in self.in_names] + [("y." + k, y[k]) for k in self.in_names])

        def enum():
            e = self.enumerate()
            seen: dict[tuple, int] = {}
            n = len(e[self.in_names[0]])
            keys = np.stack([e[k] for k in self.out_names], axis=1) if self.outs else np.zeros((n, 0), dtype=np.int64)
            for i in range(n):
                key = tuple(keys[i].tolist())
                if key in seen:
                    j = seen[key]
                    w = {"x." + k: int(e[k][i]) for k in self.in_names}
                    w.update({"y." + k: int(e[k][j]) for k in self.in_names})
                    return w
                seen[key] = i
            return None

        return decide(f"{self.name or 'map'} {self.signature()} is injective", neg,
                      enum if self._check_enum() else None, timeout_ms)

    def surjective(self, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> Proof:
        """Every point of the output box is hit.  Enumeration finds a preimage table g;
        Z3 checks the certificate f(g(y)) = y for every y (or, if some y is missed, that
        no domain point reaches it).  Witness: the smallest output point not hit."""
        import z3

        t0 = time.perf_counter()
        claim = f"{self.name or 'map'} {self.signature()} is onto its output box"
        if not self._check_enum():
            return Proof("unknown", claim, detail="domain too large to build the certificate")
        e = self.enumerate()
        out_box = _box(self.outs)
        hit = np.zeros(int(np.prod([d.size for d in self.outs])), dtype=bool)
        flat = _flat_index(e, self.outs)
        ok = flat >= 0
        hit[flat[ok]] = True
        missing = np.nonzero(~hit)[0]
        if len(missing):
            y = {k: int(out_box[k][missing[0]]) for k in self.out_names}
            # Z3 confirms: no domain point maps to y
            x = self.z3_vars("x_")
            fx = self.z3(x)
            s = _solver(timeout_ms)
            s.add(self.z3_domain(x), *[fx[k] == y[k] for k in self.out_names])
            r = s.check()
            if r == z3.unsat:
                return Proof("refuted", claim, witness=y, detail="no domain point maps here",
                             seconds=time.perf_counter() - t0, z3="unsat (no preimage)", enumeration="agrees")
            return Proof("unknown", claim, witness=y, seconds=time.perf_counter() - t0, z3=str(r),
                         enumeration="DISAGREES" if r == z3.sat else "no Z3 verdict",
                         detail="enumeration found a missed point that Z3 did not confirm")
        # certificate: g(y) = the first preimage of y
        pre = np.full(len(hit), -1, dtype=np.int64)
        idx = np.arange(len(flat))[::-1]
        pre[flat[idx]] = idx          # earliest preimage wins
        g = {k: e[k][pre] for k in self.in_names}
        gm = TableMap(self.outs, self.ins, {k: g[k].reshape([d.size for d in self.outs]) for k in self.in_names},
                      name="preimage")

        def neg():
            y = {d.name: _bv("y_" + d.name) for d in self.outs}
            gy = gm.z3(y)
            fgy = self.z3(gy)
            bad = z3.Or(z3.Not(self.z3_domain(gy)), *[fgy[k] != y[k] for k in self.out_names])
            return [gm.z3_domain(y), bad], list(y.items())

        p = decide(claim + " (certificate f(g(y)) = y)", neg, lambda: None, timeout_ms)
        p.claim = claim
        return p

    def bijective(self, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> Proof:
        """Injective and onto the output box."""
        a = self.injective(timeout_ms)
        if a.status != "proved":
            a.claim = f"{self.name or 'map'} {self.signature()} is a bijection (fails: not injective)"
            return a
        b = self.surjective(timeout_ms)
        if b.status != "proved":
            b.claim = f"{self.name or 'map'} {self.signature()} is a bijection (fails: not onto)"
            return b
        return Proof("proved", f"{self.name or 'map'} {self.signature()} is a bijection",
                     seconds=a.seconds + b.seconds, z3="unsat", enumeration="agrees")

    def equals(self, other: "Map", timeout_ms: int = DEFAULT_TIMEOUT_MS, names: tuple[str, str] = ("f", "g")) -> Proof:
        """Same input box, same domain, same image at every point.  Witness: the smallest
        point where they differ (with both images under ``<f>.*`` / ``<g>.*``)."""
        import z3

        _same_box(self.ins, other.ins, "equals")
        if set(self.out_names) != set(other.out_names):
            raise AlgebraError(f"equals: output dims differ: {self.out_names} vs {other.out_names}")
        fn, gn = names

        def neg():
            x = self.z3_vars("x_")
            fx, gx = self.z3(x), other.z3(x)
            df, dg = self.z3_domain(x), other.z3_domain(x)
            differ = z3.Or(df != dg, z3.And(df, z3.Or(*[fx[k] != gx[k] for k in self.out_names])))
            return [z3.And(*[z3.ULT(x[d.name], d.size) for d in self.ins]), differ], list(x.items())

        def enum():
            b = self.box()
            mf, mg = self.domain_mask(b), other.domain_mask(b)
            fx, gx = self._eval(b), other._eval(b)
            bad = mf != mg
            for k in self.out_names:
                bad |= mf & (np.broadcast_to(fx[k], mf.shape) != np.broadcast_to(gx[k], mf.shape))
            return _first(b, self.in_names, bad)

        def describe(w):
            f = self.eval(w) if self.domain_mask({k: np.array([v]) for k, v in w.items()})[0] else "outside domain"
            g = other.eval(w) if other.domain_mask({k: np.array([v]) for k, v in w.items()})[0] else "outside domain"
            return f"{fn}{_fmt(w)} = {_fmt(f)} but {gn}{_fmt(w)} = {_fmt(g)}"

        return decide(f"{self.name or fn} == {other.name or gn} on {self.signature()}", neg,
                      enum if self._check_enum() else None, timeout_ms, describe)

    # -- operations -------------------------------------------------------------------------
    def compose(self, other: "Map", check: bool = True, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> "Map":
        """x -> other(self(x)).  Requires: self's output names == other's input names and
        self(dom self) within dom other (proved when ``check``)."""
        if set(self.out_names) != set(other.in_names):
            raise AlgebraError(f"compose: outputs {self.out_names} of {self.name or 'f'} do not match "
                               f"inputs {other.in_names} of {other.name or 'g'}")
        c = Composed(self, other)
        if check:
            p = c.image_within(timeout_ms)
            if p.status == "refuted":
                raise AlgebraError(f"compose: {self.name or 'f'} maps {_fmt(p.witness)} outside the domain of "
                                   f"{other.name or 'g'} ({p.detail})", p.witness)
            if p.status != "proved":
                raise AlgebraError(f"compose: could not prove the image lies in the domain ({p.detail})")
        return c

    def invert(self, onto: str = "box", timeout_ms: int = DEFAULT_TIMEOUT_MS) -> "TableMap":
        """The inverse map.  Requires injectivity (else NotInvertible with the two points);
        with onto="box" also that every output point is hit (else NotInvertible with the
        missed point); with onto="image" the inverse's domain is the image.
        Guarantees (proved by Z3 on the returned table): g(f(x)) = x on dom f and
        f(g(y)) = y on dom g."""
        p = self.injective(timeout_ms)
        if p.status == "refuted":
            w = p.witness
            x = {k[2:]: v for k, v in w.items() if k.startswith("x.")}
            y = {k[2:]: v for k, v in w.items() if k.startswith("y.")}
            raise NotInvertible(f"{self.name or 'map'} is not injective: {_fmt(y)} and {_fmt(x)} both map to "
                                f"{_fmt(self.eval(x))}", w)
        if p.status != "proved":
            e = NotInvertible(f"could not prove {self.name or 'map'} injective ({p.detail})")
            e.undecided = True
            raise e
        if onto == "box":
            q = self.surjective(timeout_ms)
            if q.status == "refuted":
                raise NotInvertible(f"{self.name or 'map'} misses {_fmt(q.witness)} of its output box "
                                    f"(use onto='image' for a partial inverse)", q.witness)
            if q.status != "proved":
                e = NotInvertible(f"could not prove {self.name or 'map'} onto ({q.detail})")
                e.undecided = True
                raise e
        e = self.enumerate()
        flat = _flat_index(e, self.outs)
        if (flat < 0).any():
            raise NotInvertible(f"{self.name or 'map'} leaves its output box (see in_range())")
        shape = [d.size for d in self.outs]
        n = int(np.prod(shape))
        tabs = {}
        for k in self.in_names:
            t = np.full(n, -1, dtype=np.int64)
            t[flat] = e[k]
            tabs[k] = t.reshape(shape)
        defined = np.zeros(n, dtype=bool)
        defined[flat] = True
        g = TableMap(self.outs, self.ins, tabs, defined=defined.reshape(shape),
                     name=f"inverse({self.name or 'map'})")
        cert = g.certify_inverse_of(self, timeout_ms)
        if not cert:
            e = NotInvertible(f"inverse certificate failed: {cert}")
            e.undecided = cert.status == "unknown"
            raise e
        g.certificate = cert
        return g

    def restrict(self, where: str | None = None, **dims) -> "Map":
        """Restrict the domain.  ``dim=v`` (int) fixes a dim and drops it; ``dim=(lo, hi)``
        or ``range(lo, hi)`` keeps lo <= dim < hi (the new dim counts from 0);
        ``where="formula"`` adds a predicate over the input names."""
        return Restricted(self, dims, where)

    def product(self, other: "Map") -> "Map":
        """Triton's ``L1 * L2``: see the module docstring."""
        return Product(self, other)

    def rename(self, **names: str) -> "Map":
        """Rename dimensions (inputs or outputs): ``rename(i='register')``."""
        return Renamed(self, names)

    def fuse(self, dims: Sequence[str], new: str) -> "Map":
        """Merge input dims (listed slowest first) into one: new = ((d0 * s1) + d1) * s2 + ..."""
        return Fused(self, list(dims), new)

    def split(self, dim: str, parts: Sequence[tuple[str, int]]) -> "Map":
        """Split input dim into parts (slowest first), inverse of ``fuse``."""
        return Split(self, dim, list(parts))

    def image_within(self, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> Proof:
        raise AlgebraError("image_within applies to a composition")


def _lex_lt(a: list, b: list):
    import z3
    if not a:
        return z3.BoolVal(False)
    return z3.Or(z3.ULT(a[0], b[0]), z3.And(a[0] == b[0], _lex_lt(a[1:], b[1:])))


def _box(dims: Sequence[Dim]) -> dict[str, np.ndarray]:
    grids = np.meshgrid(*[np.arange(d.size, dtype=np.int64) for d in dims], indexing="ij")
    return {d.name: g.reshape(-1) for d, g in zip(dims, grids)}


def _flat_index(e: Mapping[str, np.ndarray], dims: Sequence[Dim]) -> np.ndarray:
    """Row-major index of points in the box of ``dims``; -1 where outside."""
    n = len(next(iter(e.values())))
    idx = np.zeros(n, dtype=np.int64)
    ok = np.ones(n, dtype=bool)
    for d in dims:
        v = np.asarray(e[d.name], dtype=np.int64)
        ok &= (v >= 0) & (v < d.size)
        idx = idx * d.size + np.clip(v, 0, d.size - 1)
    return np.where(ok, idx, -1)


def _first(env: Mapping[str, np.ndarray], names: Sequence[str], bad: np.ndarray) -> dict | None:
    """The lexicographically smallest point where ``bad`` (points are in C order)."""
    bad = np.asarray(bad).reshape(-1)
    idx = np.nonzero(bad)[0]
    if len(idx) == 0:
        return None
    i = idx[0]
    return {k: int(env[k][i]) for k in names}


def _fmt(p: Any) -> str:
    if isinstance(p, dict):
        return "(" + ", ".join(f"{k}={v}" for k, v in p.items()) + ")"
    return str(p)


def _same_box(a: Sequence[Dim], b: Sequence[Dim], op: str) -> None:
    if tuple(a) != tuple(b):
        raise AlgebraError(f"{op}: input boxes differ: ({', '.join(map(str, a))}) vs ({', '.join(map(str, b))})")


# ---------------------------------------------------------------------------------------
# Leaves

class FormulaMap(Map):
    """Outputs given as formulas (``formal/expr.py``) over the input names."""

    def __init__(self, ins, outs, formulas: Mapping[str, Formula | str], let: Mapping[str, str] | None = None,
                 where: str | Formula | None = None, name: str = ""):
        self.ins, self.outs, self.name = _dims(ins), _dims(outs), name
        let = dict(let or {})
        self.formulas = {}
        for d in self.outs:
            if d.name not in formulas:
                raise AlgebraError(f"{name or 'map'}: no formula for output {d.name!r}")
            f = formulas[d.name]
            self.formulas[d.name] = f if isinstance(f, Formula) else Formula(str(f), let=let)
        extra = set(formulas) - set(self.out_names)
        if extra:
            raise AlgebraError(f"{name or 'map'}: formulas for unknown outputs {sorted(extra)}")
        self.where = where if (where is None or isinstance(where, Formula)) else Formula(str(where), let=let)
        for f in list(self.formulas.values()) + ([self.where] if self.where else []):
            unbound = f.names - set(self.in_names)
            if unbound:
                raise AlgebraError(f"{name or 'map'}: formula {f} uses unknown names {sorted(unbound)}")

    def _eval(self, env):
        return {k: f.eval(env) for k, f in self.formulas.items()}

    def _z3(self, env):
        return {k: f.z3(env, WIDTH) for k, f in self.formulas.items()}

    def _dom_eval(self, env):
        return None if self.where is None else self.where.eval(env)

    def _dom_z3(self, env):
        return None if self.where is None else self.where.z3(env, WIDTH)


class TableMap(Map):
    """Outputs given as arrays indexed by the inputs (shape = input sizes); ``defined``
    (optional bool array) is the domain.  Z3 reads the tables as constant arrays."""

    certificate: Proof | None = None

    def __init__(self, ins, outs, tables: Mapping[str, np.ndarray], defined: np.ndarray | None = None, name: str = ""):
        self.ins, self.outs, self.name = _dims(ins), _dims(outs), name
        shape = tuple(d.size for d in self.ins)
        self.tables = {}
        for d in self.outs:
            t = np.asarray(tables[d.name], dtype=np.int64)
            if t.shape != shape:
                raise AlgebraError(f"table for {d.name} has shape {t.shape}, expected {shape}")
            self.tables[d.name] = t
        self.defined = None if defined is None else np.asarray(defined, dtype=bool).reshape(shape)

    @classmethod
    def from_map(cls, m: Map, name: str | None = None) -> "TableMap":
        b = m.box()
        mask = m.domain_mask(b)
        out = m._eval(b)
        shape = [d.size for d in m.ins]
        tabs = {k: np.where(mask, np.broadcast_to(np.asarray(v, dtype=np.int64), mask.shape), -1).reshape(shape)
                for k, v in out.items()}
        return cls(m.ins, m.outs, tabs, defined=None if mask.all() else mask.reshape(shape),
                   name=name or m.name)

    def _flat(self, env):
        idx = 0
        for d in self.ins:
            idx = idx * d.size + np.clip(np.asarray(env[d.name], dtype=np.int64), 0, d.size - 1)
        return idx

    def _eval(self, env):
        i = self._flat(env)
        return {k: t.reshape(-1)[i] for k, t in self.tables.items()}

    def _dom_eval(self, env):
        if self.defined is None:
            return None
        return self.defined.reshape(-1)[self._flat(env)]

    @cached_property
    def _muxes(self):
        """Per table, a function index -> balanced If-tree over the index bits (bit-blasts
        far better than an SMT array store chain)."""
        tabs = dict(self.tables)
        if self.defined is not None:
            tabs["__defined__"] = self.defined.astype(np.int64)
        return {k: t.reshape(-1) for k, t in tabs.items()}

    def _mux(self, key, idx):
        import z3
        flat = self._muxes[key]
        n = len(flat)
        k = max(1, (n - 1).bit_length())
        vals = [z3.BitVecVal(int(v) & 0xFFFFFFFF, WIDTH) for v in flat]
        vals += [vals[-1]] * ((1 << k) - n)
        cache: dict = {}
        for level in range(k):
            b = z3.Extract(level, level, idx) == 1
            nxt = []
            for i in range(0, len(vals), 2):
                lo, hi = vals[i], vals[i + 1]
                if z3.eq(lo, hi):
                    nxt.append(lo)
                    continue
                key2 = (lo.get_id(), hi.get_id())
                if key2 not in cache:
                    cache[key2] = z3.If(b, hi, lo)
                nxt.append(cache[key2])
            vals = nxt
        return vals[0]

    def _z3_index(self, env):
        idx = _val(0)
        for d in self.ins:
            idx = idx * d.size + env[d.name]
        return idx

    def _z3(self, env):
        i = self._z3_index(env)
        return {k: self._mux(k, i) for k in self.tables}

    def _dom_z3(self, env):
        if self.defined is None:
            return None
        return self._mux("__defined__", self._z3_index(env)) != 0

    def certify_inverse_of(self, f: Map, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> Proof:
        """Prove this table is the inverse of ``f``: g(f(x)) = x for x in dom f, and
        f(g(y)) = y for y in dom g (so it is exact, not just an enumeration artefact)."""
        import z3

        def neg1():
            x = f.z3_vars("x_")
            fx = f.z3(x)
            gfx = self.z3(fx)
            bad = z3.Or(z3.Not(self.z3_domain(fx)), *[gfx[k] != x[k] for k in f.in_names])
            return [f.z3_domain(x), bad], list(x.items())

        p = decide(f"{self.name}(f(x)) = x", neg1, None, timeout_ms)
        if not p:
            return p

        def neg2():
            y = self.z3_vars("y_")
            gy = self.z3(y)
            fgy = f.z3(gy)
            bad = z3.Or(z3.Not(f.z3_domain(gy)), *[fgy[k] != y[k] for k in f.out_names])
            return [self.z3_domain(y), bad], list(y.items())

        q = decide(f"f({self.name}(y)) = y", neg2, None, timeout_ms)
        if not q:
            return q
        return Proof("proved", f"{self.name} is the inverse of {f.name or 'f'}", seconds=p.seconds + q.seconds,
                     z3="unsat", enumeration="table built by enumeration")


def from_formulas(ins, outs, formulas, let=None, where=None, name="") -> FormulaMap:
    return FormulaMap(ins, outs, formulas, let=let, where=where, name=name)


def from_table(ins, outs, tables, defined=None, name="") -> TableMap:
    return TableMap(ins, outs, tables, defined=defined, name=name)


def from_function(ins, outs, fn: Callable[..., Mapping[str, int]], name: str = "") -> TableMap:
    """Tabulate a Python function of the input names (called once per point)."""
    ins, outs = _dims(ins), _dims(outs)
    b = _box(ins)
    n = len(next(iter(b.values())))
    tabs = {d.name: np.zeros(n, dtype=np.int64) for d in outs}
    defined = np.ones(n, dtype=bool)
    for i in range(n):
        r = fn(**{k: int(v[i]) for k, v in b.items()})
        if r is None:
            defined[i] = False
            continue
        for d in outs:
            tabs[d.name][i] = int(r[d.name])
    shape = [d.size for d in ins]
    return TableMap(ins, outs, {k: v.reshape(shape) for k, v in tabs.items()},
                    defined=None if defined.all() else defined.reshape(shape), name=name)


Map.from_formulas = staticmethod(from_formulas)  # type: ignore[attr-defined]
Map.from_table = staticmethod(from_table)  # type: ignore[attr-defined]
Map.from_function = staticmethod(from_function)  # type: ignore[attr-defined]


def identity(dims, name: str = "id") -> FormulaMap:
    dims = _dims(dims)
    return FormulaMap(dims, dims, {d.name: d.name for d in dims}, name=name)


# ---------------------------------------------------------------------------------------
# Composite maps

class Composed(Map):
    def __init__(self, f: Map, g: Map):
        self.f, self.g = f, g
        self.ins, self.outs = f.ins, g.outs
        self.name = f"{g.name or 'g'}∘{f.name or 'f'}"

    def _eval(self, env):
        y = self.f._eval(env)
        n = np.shape(next(iter(env.values()))) if env else ()
        y = {k: np.broadcast_to(np.asarray(v, dtype=np.int64), n) for k, v in y.items()}
        return self.g._eval(y)

    def _z3(self, env):
        return self.g._z3({k: _val(v) for k, v in self.f._z3(env).items()})

    def _dom_eval(self, env):
        return self.f._dom_eval(env)

    def _dom_z3(self, env):
        return self.f._dom_z3(env)

    def image_within(self, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> Proof:
        """f maps its domain into g's domain."""
        import z3
        f, g = self.f, self.g

        def neg():
            x = f.z3_vars("x_")
            fx = f.z3(x)
            return [f.z3_domain(x), z3.Not(g.z3_domain(fx))], list(x.items())

        def enum():
            e = f.enumerate()
            ys = {k: e[k] for k in g.in_names}
            bad = np.zeros(len(e[f.in_names[0]]), dtype=bool) if f.ins else np.zeros(1, dtype=bool)
            for d in g.ins:
                bad |= (ys[d.name] < 0) | (ys[d.name] >= d.size)
            inside = ~bad
            if inside.any():
                m = np.ones_like(bad)
                sub = {k: np.where(inside, v, 0) for k, v in ys.items()}
                m = g.domain_mask(sub)
                bad |= inside & ~m
            return _first(e, f.in_names, bad)

        return decide(f"image of {f.name or 'f'} lies in the domain of {g.name or 'g'}", neg,
                      enum if f._check_enum() else None, timeout_ms)


class Restricted(Map):
    def __init__(self, m: Map, dims: Mapping[str, Any], where: str | None):
        self.m = m
        self.fixed: dict[str, int] = {}
        self.offset: dict[str, int] = {}
        ins = []
        for d in m.ins:
            if d.name in dims:
                v = dims[d.name]
                if isinstance(v, (int, np.integer)):
                    if not 0 <= int(v) < d.size:
                        raise AlgebraError(f"restrict: {d.name}={v} outside 0..{d.size - 1}")
                    self.fixed[d.name] = int(v)
                    continue
                lo, hi = (v.start, v.stop) if isinstance(v, range) else tuple(v)
                if not 0 <= lo < hi <= d.size:
                    raise AlgebraError(f"restrict: {d.name} range [{lo}, {hi}) outside 0..{d.size}")
                self.offset[d.name] = int(lo)
                ins.append(Dim(d.name, int(hi - lo)))
            else:
                ins.append(d)
        unknown = set(dims) - set(m.in_names)
        if unknown:
            raise AlgebraError(f"restrict: unknown dims {sorted(unknown)}")
        self.ins, self.outs = tuple(ins), m.outs
        self.where = None if where is None else Formula(where)
        if self.where is not None and self.where.names - set(self.in_names):
            raise AlgebraError(f"restrict: predicate uses unknown names {sorted(self.where.names - set(self.in_names))}")
        self.name = f"{m.name or 'map'}|" + ",".join([f"{k}={v}" for k, v in dims.items()] + ([where] if where else []))

    def _inner_env(self, env, z=False):
        e = {}
        for d in self.m.ins:
            if d.name in self.fixed:
                e[d.name] = _val(self.fixed[d.name]) if z else self.fixed[d.name]
            elif d.name in self.offset:
                e[d.name] = env[d.name] + self.offset[d.name]
            else:
                e[d.name] = env[d.name]
        if not z and env:
            shape = np.shape(next(iter(env.values())))
            e = {k: np.broadcast_to(np.asarray(v, dtype=np.int64), shape) for k, v in e.items()}
        return e

    def _eval(self, env):
        return self.m._eval(self._inner_env(env))

    def _z3(self, env):
        return self.m._z3(self._inner_env(env, z=True))

    def _dom_eval(self, env):
        inner = self.m._dom_eval(self._inner_env(env))
        own = None if self.where is None else self.where.eval(env)
        if inner is None:
            return own
        return inner if own is None else np.logical_and(inner, own)

    def _dom_z3(self, env):
        import z3
        parts = [p for p in (self.m._dom_z3(self._inner_env(env, z=True)),
                             None if self.where is None else self.where.z3(env, WIDTH)) if p is not None]
        if not parts:
            return None
        return z3.And(*[_as_bool(p) for p in parts])


class Product(Map):
    def __init__(self, a: Map, b: Map):
        self.a, self.b = a, b
        ins, outs = [], []
        for d in a.ins:
            e = next((x for x in b.ins if x.name == d.name), None)
            ins.append(Dim(d.name, d.size * (e.size if e else 1)))
        ins += [d for d in b.ins if d.name not in a.in_names]
        for d in a.outs:
            e = next((x for x in b.outs if x.name == d.name), None)
            outs.append(Dim(d.name, d.size * (e.size if e else 1)))
        outs += [d for d in b.outs if d.name not in a.out_names]
        self.ins, self.outs = tuple(ins), tuple(outs)
        self.name = f"{a.name or 'f'}*{b.name or 'g'}"
        self._asz = {d.name: d.size for d in a.ins}
        self._aosz = {d.name: d.size for d in a.outs}

    def _split(self, env, z):
        ea, eb = {}, {}
        for d in self.a.ins:
            v = env[d.name]
            if d.name in self.b.in_names:
                ea[d.name] = (z3_urem(v, d.size) if z else v % d.size)
                eb[d.name] = (z3_udiv(v, d.size) if z else v // d.size)
            else:
                ea[d.name] = v
        for d in self.b.ins:
            if d.name not in self.a.in_names:
                eb[d.name] = env[d.name]
        return ea, eb

    def _join(self, ya, yb):
        out = {}
        for k in self.out_names:
            if k in ya and k in yb:
                out[k] = ya[k] + self._aosz[k] * yb[k]
            else:
                out[k] = ya[k] if k in ya else yb[k]
        return out

    def _eval(self, env):
        ea, eb = self._split(env, False)
        return self._join(self.a._eval(ea), self.b._eval(eb))

    def _z3(self, env):
        ea, eb = self._split(env, True)
        ya = {k: _val(v) for k, v in self.a._z3(ea).items()}
        yb = {k: _val(v) for k, v in self.b._z3(eb).items()}
        return self._join(ya, yb)

    def _dom_eval(self, env):
        ea, eb = self._split(env, False)
        ma, mb = self.a._dom_eval(ea), self.b._dom_eval(eb)
        if ma is None:
            return mb
        return ma if mb is None else np.logical_and(ma, mb)

    def _dom_z3(self, env):
        import z3
        ea, eb = self._split(env, True)
        parts = [p for p in (self.a._dom_z3(ea), self.b._dom_z3(eb)) if p is not None]
        return z3.And(*[_as_bool(p) for p in parts]) if parts else None


def z3_urem(v, n):
    import z3
    return z3.URem(_val(v), n)


def z3_udiv(v, n):
    import z3
    return z3.UDiv(_val(v), n)


class Renamed(Map):
    def __init__(self, m: Map, names: Mapping[str, str]):
        unknown = set(names) - set(m.in_names) - set(m.out_names)
        if unknown:
            raise AlgebraError(f"rename: unknown dims {sorted(unknown)}")
        self.m, self.map = m, dict(names)
        self.back = {v: k for k, v in names.items() if k in m.in_names}
        self.ins = tuple(Dim(names.get(d.name, d.name) if d.name in names else d.name, d.size) for d in m.ins)
        self.outs = tuple(Dim(names.get(d.name, d.name), d.size) for d in m.outs)
        _dims(self.ins), _dims(self.outs)
        self.name = m.name

    def _inner(self, env):
        return {d.name: env[self.map.get(d.name, d.name)] for d in self.m.ins}

    def _outer(self, out):
        return {self.map.get(k, k): v for k, v in out.items()}

    def _eval(self, env):
        return self._outer(self.m._eval(self._inner(env)))

    def _z3(self, env):
        return self._outer(self.m._z3(self._inner(env)))

    def _dom_eval(self, env):
        return self.m._dom_eval(self._inner(env))

    def _dom_z3(self, env):
        return self.m._dom_z3(self._inner(env))


class Fused(Map):
    def __init__(self, m: Map, dims: list[str], new: str):
        if not set(dims) <= set(m.in_names):
            raise AlgebraError(f"fuse: unknown dims {sorted(set(dims) - set(m.in_names))}")
        self.m, self.dims, self.new = m, dims, new
        self.sizes = {d.name: d.size for d in m.ins}
        total = int(np.prod([self.sizes[d] for d in dims]))
        ins, placed = [], False
        for d in m.ins:
            if d.name in dims:
                if not placed:
                    ins.append(Dim(new, total))
                    placed = True
            else:
                ins.append(d)
        self.ins, self.outs, self.name = _dims(ins), m.outs, m.name

    def _inner(self, env, z):
        e = {k: v for k, v in env.items() if k != self.new}
        v = env[self.new]
        for d in reversed(self.dims):
            s = self.sizes[d]
            e[d] = z3_urem(v, s) if z else v % s
            v = z3_udiv(v, s) if z else v // s
        return e

    def _eval(self, env):
        return self.m._eval(self._inner(env, False))

    def _z3(self, env):
        return self.m._z3(self._inner(env, True))

    def _dom_eval(self, env):
        return self.m._dom_eval(self._inner(env, False))

    def _dom_z3(self, env):
        return self.m._dom_z3(self._inner(env, True))


class Split(Map):
    def __init__(self, m: Map, dim: str, parts: list[tuple[str, int]]):
        sizes = {d.name: d.size for d in m.ins}
        if dim not in sizes:
            raise AlgebraError(f"split: unknown dim {dim!r}")
        if int(np.prod([s for _, s in parts])) != sizes[dim]:
            raise AlgebraError(f"split: sizes {parts} do not multiply to {sizes[dim]}")
        self.m, self.dim, self.parts = m, dim, parts
        ins = []
        for d in m.ins:
            ins += [Dim(n, s) for n, s in parts] if d.name == dim else [d]
        self.ins, self.outs, self.name = _dims(ins), m.outs, m.name

    def _inner(self, env):
        e = {k: v for k, v in env.items() if k not in dict(self.parts)}
        v = 0
        for n, s in self.parts:
            v = v * s + env[n]
        e[self.dim] = v
        return e

    def _eval(self, env):
        return self.m._eval(self._inner(env))

    def _z3(self, env):
        return self.m._z3(self._inner(env))

    def _dom_eval(self, env):
        return self.m._dom_eval(self._inner(env))

    def _dom_z3(self, env):
        return self.m._dom_z3(self._inner(env))


# ---------------------------------------------------------------------------------------
# GF(2)-linearity (Triton linear layouts)

def linear_bases(m: Map) -> dict[str, list[dict[str, int]]]:
    """The image of each power-of-two input point (other inputs 0): Triton's bases."""
    bases: dict[str, list[dict[str, int]]] = {}
    zero = {d.name: 0 for d in m.ins}
    for d in m.ins:
        if d.size & (d.size - 1):
            raise AlgebraError(f"dimension {d} is not a power of two (a linear layout needs 2^k points)")
        bl = []
        b = 1
        while b < d.size:
            p = dict(zero)
            p[d.name] = b
            bl.append(m.eval(p))
            b <<= 1
        bases[d.name] = bl
    return bases


def is_linear(m: Map, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> Proof:
    """f(x) == XOR over set bits of x of the basis images (and f(0) == 0)."""
    bases = linear_bases(m)
    lin = linear_map(m.ins, m.outs, bases, name=f"linear({m.name or 'map'})")
    p = m.equals(lin, timeout_ms, names=(m.name or "f", "xor-of-bases"))
    p.claim = f"{m.name or 'map'} {m.signature()} is GF(2)-linear"
    return p


def linear_map(ins, outs, bases: Mapping[str, Sequence[Mapping[str, int] | Sequence[int]]], name: str = "") -> FormulaMap:
    """A map given by XOR of bases: out = XOR_{dim, bit set} bases[dim][bit].

    A basis entry is a dict {out: value} or a list of values in ``outs`` order."""
    ins, outs = _dims(ins), _dims(outs)
    terms: dict[str, list[str]] = {d.name: [] for d in outs}
    for d in ins:
        bl = bases.get(d.name, [])
        if len(bl) != (d.size.bit_length() - 1) or (1 << len(bl)) != d.size:
            raise AlgebraError(f"linear map: dim {d} needs {d.size.bit_length() - 1} bases, got {len(bl)}")
        for bit, b in enumerate(bl):
            vals = b if isinstance(b, Mapping) else dict(zip([o.name for o in outs], b))
            for o in outs:
                v = int(vals.get(o.name, 0))
                if v:
                    terms[o.name].append(f"(((({d.name}) >> {bit}) & 1) * {v})")
    formulas = {k: (" ^ ".join(v) if v else "0") for k, v in terms.items()}
    return FormulaMap(ins, outs, formulas, name=name)
