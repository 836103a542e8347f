"""Proof results for the wmma obligations: Proved / Refuted (with a witness) / Unknown.

``formal.prove`` (the project-wide registry) is written separately; until it exists the
wmma obligations are plain functions returning :class:`Result`, collected by
:func:`formal.wmma.theorems.obligations`.  A result carries what DESIGN.md asks of a
proof: the obligation, the solver and its time, an SMT-LIB certificate (the negated
obligation, which any SMT solver must find ``unsat``) and, where the domain is small, the
enumeration that cross-checks the solver.

Never report ``unknown`` as proved: :attr:`Result.proved` is true only for ``proved``.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import z3

PROVED, REFUTED, UNKNOWN = "proved", "refuted", "unknown"


@dataclass
class Result:
    obligation: str                 # dotted name, e.g. wmma.align_readings_agree[wmma.load.a...]
    statement: str                  # what is claimed, in words
    status: str                     # proved | refuted | unknown
    solver: str = "z3"
    time_s: float = 0.0
    witness: dict | None = None     # refuted: a (minimal where stated) counterexample
    smt2: str | None = None         # the negated obligation (unsat <=> proved)
    cross_check: dict | None = None  # enumeration over the same domain, when small
    hypotheses: list[str] = field(default_factory=list)
    note: str = ""

    @property
    def proved(self) -> bool:
        return self.status == PROVED

    def to_dict(self, smt2: bool = False) -> dict:
        d = asdict(self)
        if not smt2:
            d.pop("smt2")
        return d

    def line(self) -> str:
        w = f"  witness: {self.witness}" if self.witness else ""
        x = ""
        if self.cross_check is not None:
            x = "  [enumeration agrees]" if self.cross_check.get("agrees") else "  [ENUMERATION DISAGREES]"
        return f"{self.status.upper():8s} {self.obligation} ({self.time_s:.2f}s){x}{w}"


def model_value(m: z3.ModelRef, v) -> Any:
    """A Python value of a Z3 term in a model (ints for bit-vectors and ints, bools)."""
    r = m.eval(v, model_completion=True)
    if z3.is_bv_value(r):
        return r.as_long()
    if z3.is_int_value(r):
        return r.as_long()
    if z3.is_true(r):
        return True
    if z3.is_false(r):
        return False
    return str(r)


def check_negation(name: str, statement: str, negated: list, witness_vars: dict[str, Any] | None = None,
                   timeout_ms: int = 60000, hypotheses: list[str] | None = None,
                   witness_fn: Callable[[z3.ModelRef], dict] | None = None,
                   minimize: list | None = None) -> Result:
    """Decide an obligation given the assertions of its NEGATION.

    unsat -> proved; sat -> refuted, with the model's values of ``witness_vars`` (or
    ``witness_fn(model)``), lexicographically minimal in the terms of ``minimize`` when
    given; unknown/timeout -> unknown.
    """
    cert = z3.Solver()
    cert.add(*negated)
    if minimize:
        s = z3.Optimize()
        s.set("timeout", timeout_ms)
        s.add(*negated)
        for t in minimize:
            s.minimize(t)
    else:
        s = z3.Solver()
        s.set("timeout", timeout_ms)
        s.add(*negated)
    t0 = time.perf_counter()
    r = s.check()
    dt = time.perf_counter() - t0
    res = Result(name, statement, UNKNOWN, "z3 " + z3.get_version_string(), dt, smt2=cert.to_smt2(),
                 hypotheses=list(hypotheses or []))
    if r == z3.unsat:
        res.status = PROVED
    elif r == z3.sat:
        res.status = REFUTED
        m = s.model()
        if witness_fn is not None:
            res.witness = witness_fn(m)
        else:
            res.witness = {k: model_value(m, v) for k, v in (witness_vars or {}).items()}
    else:
        res.note = f"z3: {s.reason_unknown()}"
    return res
