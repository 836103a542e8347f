"""Check a device-under-test's outputs against the expected results of a vector set.

:func:`verify` compares every destination register (every D element at matrix level)
bit for bit and reports, per coverage point, how many of the cases that hit it pass,
plus the first mismatches with the case's inputs, its points and why it exists.  The
same report serves :func:`formal.vectors.audit` (a Python model instead of a device).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ..numerics.formats import get_format
from .build import VectorSet


@dataclass
class Mismatch:
    case: int
    sel: int | None
    points: list[str]
    why: str
    where: dict[str, int]              # lane, reg (register level) and row, col of D when known
    got: str
    expected: str
    differing: int                     # registers (or D elements) that differ in this case
    inputs: dict[str, Any] = field(default_factory=dict)   # hex, as in the vector file

    def line(self) -> str:
        loc = ", ".join(f"{k} {v}" for k, v in self.where.items())
        sel = f" sel={self.sel}" if self.sel is not None else ""
        return (f"case {self.case}{sel} [{', '.join(self.points)}] {loc}: got {self.got}, expected {self.expected} "
                f"({self.differing} differ) -- {self.why}")


@dataclass
class PointResult:
    cases: int = 0
    passed: int = 0
    failed_ids: list[int] = field(default_factory=list)
    built_failed: int = 0          # failing cases that were built for this point (not merely observed)

    @property
    def ok(self) -> bool:
        return not self.failed_ids


@dataclass
class VerifyReport:
    opcode: str
    arch: str
    cases: int
    failed: int
    points: dict[str, PointResult]
    mismatches: list[Mismatch]
    errors: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.failed == 0 and not self.errors

    @property
    def caught_by(self) -> list[str]:
        """The coverage points that exposed a difference: a case built for the point fails there."""
        return [p for p, r in self.points.items() if r.built_failed]

    @property
    def failing_points(self) -> list[str]:
        """Every point with a failing case (built for it, or merely hitting it)."""
        return [p for p, r in self.points.items() if r.failed_ids]

    def to_dict(self, max_mismatches: int = 5) -> dict:
        return {"opcode": self.opcode, "arch": self.arch, "cases": self.cases, "failed": self.failed,
                "ok": self.ok, "caught_by": self.caught_by, "failing_points": self.failing_points,
                "errors": self.errors,
                "points": {p: {"cases": r.cases, "passed": r.passed, "failed": r.failed_ids[:20]}
                           for p, r in self.points.items()},
                "mismatches": [asdict(m) for m in self.mismatches[:max_mismatches]], **self.extra}

    def table(self, max_mismatches: int = 5) -> str:
        w = max([len(p) for p in self.points] + [5])
        lines = [f"{self.opcode}  (expected results: {self.arch} model)",
                 f"{'point':{w}s} {'cases':>6s} {'pass':>6s}  failing cases (* = built for the point)"]
        for p, r in self.points.items():
            bad = "" if r.ok else ", ".join(map(str, r.failed_ids[:8])) + (" ..." if len(r.failed_ids) > 8 else "")
            lines.append(f"{p:{w}s} {r.cases:6d} {r.passed:6d}  {'* ' if r.built_failed else ''}{bad}")
        if self.mismatches:
            lines.append("")
            lines.append("first mismatches:")
            for m in self.mismatches[:max_mismatches]:
                lines.append("  " + m.line())
                for k, v in m.inputs.items():
                    lines.append(f"      {k}= {v}")
        for e in self.errors:
            lines.append(f"error: {e}")
        lines.append("")
        lines.append(f"{self.cases} cases, {self.failed} mismatching" + ("" if self.failed else " -- all pass"))
        return "\n".join(lines)


def _d_position_map(vs: VectorSet) -> dict[tuple[int, int, int], tuple[int, int, int]] | None:
    """(lane, reg, elem) -> (product, row, col) of D, when the layout is available."""
    try:
        from .build import _d_positions

        return {v: k for k, v in _d_positions(vs.form).items()}
    except Exception:  # the report still works without row/col
        return None


def _inputs_hex(vs: VectorSet, case) -> dict[str, str]:
    from .fileio import _elem_bits, _reg_bits, mat_to_hex, regs_to_hex

    form = vs.form
    out = {}
    for k, x in case.inputs.items():
        if case.level == "matrix":
            out[k] = mat_to_hex(x, _elem_bits(form, k))
        else:
            out[k] = regs_to_hex(x, 32 if k == "e" else _reg_bits(form, k))
    return out


def _target_differs(t: dict, g: np.ndarray, exp: np.ndarray, level: str, dop) -> bool:
    if level == "matrix":
        return int(g[t["row"], t["col"]]) != int(exp[t["row"], t["col"]])
    if "lane" not in t:
        return bool((g != exp).any())
    x = int(g[t["lane"], t["reg"]]) ^ int(exp[t["lane"], t["reg"]])
    eb = dop.elem_bits
    return (x >> (t.get("elem", 0) * eb)) & ((1 << eb) - 1) != 0


def compare(vs: VectorSet, got: list[np.ndarray], keep: int = 5, source: str = "results") -> VerifyReport:
    """Compare outputs (one per case, in vector order) with the expected ones."""
    form = vs.form
    points: dict[str, PointResult] = {}
    mism: list[Mismatch] = []
    failed = 0
    pos = None
    dop = form.operands.get("d")
    width = 16 if (vs.level == "regs" and dop is not None and dop.reg_bits == 64) else 8
    epr = dop.elems_per_reg if dop is not None else 1
    for case, g in zip(vs.cases, got):
        exp = np.asarray(case.expected)
        g = np.asarray(g)
        bad = g.astype(np.uint64) != exp.astype(np.uint64)
        nbad = int(bad.sum())
        tmap: dict[str, list[dict]] = {}
        for t in case.targets:
            tmap.setdefault(t["point"], []).append(t)
        for p in case.all_points:
            r = points.setdefault(p, PointResult())
            r.cases += 1
            # a point placed at particular D elements fails only if one of those differs
            fail = any(_target_differs(t, g, exp, vs.level, dop) for t in tmap[p]) if (nbad and p in tmap) \
                else bool(nbad)
            if fail:
                r.failed_ids.append(case.id)
                r.built_failed += p in case.points
            else:
                r.passed += 1
        if not nbad:
            continue
        failed += 1
        if len(mism) >= keep:
            continue
        i, j = (int(x) for x in np.argwhere(bad)[0])
        if vs.level == "matrix":
            where = {"row": i, "col": j}
            w = max(1, -(-get_format(form.dtype).bits // 4))
        else:
            where = {"lane": i, "reg": j}
            w = width
            if pos is None:
                pos = _d_position_map(vs) or {}
            # which element of the register differs first, and where it sits in D
            eb = dop.elem_bits
            xo = int(g[i, j]) ^ int(exp[i, j])
            el = next((e for e in range(epr) if (xo >> (e * eb)) & ((1 << eb) - 1)), 0)
            hit = pos.get((i, j, el))
            if hit is not None:
                if epr > 1:
                    where["elem"] = el
                if hit[0]:
                    where["product"] = hit[0]
                where.update(row=hit[1], col=hit[2])
        mism.append(Mismatch(case.id, case.sel, list(case.all_points), case.why, where,
                             f"{int(g[i, j]):0{w}x}", f"{int(exp[i, j]):0{w}x}", nbad, _inputs_hex(vs, case)))
    return VerifyReport(vs.opcode, vs.arch, len(vs.cases), failed, dict(sorted(points.items())), mism,
                        extra={"source": source})


def verify(vectors, results, keep: int = 5) -> VerifyReport:
    """``vectors``: a VectorSet or a path; ``results``: a list of outputs or a result file path."""
    from .fileio import read, read_results

    vs = read(vectors) if isinstance(vectors, str) else vectors
    if isinstance(results, str):
        got = read_results(results, vs)
        src = results
    else:
        got = list(results)
        src = "results"
        if len(got) != len(vs.cases):
            from .build import VectorError

            raise VectorError(f"{len(got)} results for {len(vs.cases)} cases")
    return compare(vs, got, keep=keep, source=src)
