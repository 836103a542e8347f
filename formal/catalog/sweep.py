"""Sweep the whole instruction space through ptxas and compare with the catalog.

Five kinds of cases (``Case.category``), each assembled by :func:`formal.catalog.ptxas.assemble`
and decided by :func:`formal.catalog.legality`:

``documented``   every documented form on every target, at the highest PTX ISA version
                 the ptxas accepts (mma.sp with selector 0);
``boundary``     each form at its minimum PTX ISA version and one version below (and, for
                 spellings that PTX later removed, at the last version and one above), on
                 the oldest target that supports it;
``near-miss``    single-axis mutations of documented forms: every other vocabulary value
                 of one qualifier axis (types, shape, layouts, kind, scale_vec, flags, ...);
``selector``     every sparsity selector 0..4 of every mma.sp form, on the targets where
                 the form is legal;
``spelling``     wmma spellings that differ only in qualifier order (the seeds' examples
                 put the shape before the layout) and spellings without ``.aligned``; wgmma
                 spellings in other orders (.sp after .sync.aligned, the shape after the types,
                 .satfinite after them), without .aligned and with layout qualifiers;
``immediate``    wgmma's immediate operands (scale-d, imm-scale-a/b, imm-trans-a/b) at legal
                 and illegal values, both A sources, one or two N per type combination.

wgmma forms run on sm_90a (the only target that takes them) and, for the documented forms,
on every target; near-misses of wgmma forms keep their A source (both sources are mutated).

A disagreement (catalog legal != ptxas accepted) must match an erratum in
``specs/errata.toml`` (its ``when`` formula over the case and its ``ptxas`` direction);
anything else is *unexplained* and makes the sweep fail.

Run: ``ptx-formal ptxas-sweep [--targets ...] [--ptx ...] [--json]`` (``--write
proofs/ptxas-sweep`` regenerates the report).  The CLI calls this module, never the reverse.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any, Iterable

from .. import catalog as cat
from ..expr import Formula
from . import operands_of
from .ptxas import Probe, Ptxas, as_probe, assemble, installations
from ..specdata import load_spec

# every family-specific target ptxas knows is swept (sm_101f is not: it was renamed sm_110f in
# PTX ISA 9.0 and neither ptxas 13.0 nor 13.5 knows it, "Value 'sm_101f' is not defined for
# option 'gpu-name'"; sm_107a/sm_107f exist from PTX ISA 9.4, so only ptxas 13.5 assembles for them)
SWEEP_TARGETS = ("sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_100a", "sm_100f", "sm_103a",
                 "sm_103f", "sm_107a", "sm_107f", "sm_110a", "sm_110f", "sm_120", "sm_120a", "sm_120f", "sm_121a", "sm_121f")
FAMILY_TARGETS = ("sm_100f", "sm_103f", "sm_107f", "sm_110f", "sm_120f", "sm_121f")
BOUNDARY_EXTRA = ("sm_70", "sm_72")
CATEGORIES = ("documented", "boundary", "near-miss", "selector", "spelling", "immediate")
# targets the wgmma near-misses, spellings and immediates run on (every other target rejects
# every wgmma instruction: the documented category shows it on all of them)
WGMMA_TARGETS = ("sm_90a",)
# the two halves of the instruction space (`ptxas-sweep --family`): mma/mma.sp/wmma, and wgmma
FAMILY_GROUPS = {"wgmma": lambda f: f.is_wgmma, "warp": lambda f: not f.is_wgmma}


@dataclass
class Case:
    category: str
    probe: Probe
    target: str
    ptx: str
    note: str = ""
    mutation: tuple[str, str, str] | None = None     # (axis, from, to) for near-misses

    @property
    def spelling(self) -> str:
        return self.probe.opcode


# ----------------------------------------------------------------------------------
# the catalog's side

@lru_cache(maxsize=None)
def _catalog(spelling: str, target: str, ptx: str, sel: int | None, asource: str | None = None,
             wg: tuple | None = None) -> tuple[bool, tuple[str, ...]]:
    try:
        form = cat.parse(spelling)
        if asource and form.family == "wgmma":
            form = form.with_asource(asource)      # the probe's operand list decides where A comes from
        res = cat.legality(form, target, ptx, sel=sel, imm=dict(wg) if wg else None)
        res.notes += cat.order_notes(spelling, form)
    except cat.MalformedOpcode as e:
        return False, (f"malformed: {e}",)
    return res.ok, tuple(r.message for r in res.reasons)


def catalog_verdict(c: Case) -> tuple[bool, tuple[str, ...]]:
    f = c.probe.form
    return _catalog(c.spelling, c.target, c.ptx, c.probe.sel if f.is_sparse else None,
                    f.asource if f.family == "wgmma" else None, c.probe.wg)


# ----------------------------------------------------------------------------------
# case generation

def _ptx_versions() -> list[str]:
    return list(load_spec("targets")["ptx"]["versions"])


def _pv(v: str) -> tuple[int, int]:
    return cat._pv(v)


def catalog_ptx(px: Ptxas) -> str:
    """The highest PTX ISA version both this ptxas and the catalog know."""
    return max((v for v in _ptx_versions() if _pv(v) <= _pv(px.max_ptx)), key=_pv)


def documented_cases(targets: Iterable[str], ptx: str) -> list[Case]:
    out = []
    for t in targets:
        for f in cat.documented_forms():
            out.append(Case("documented", Probe(f, sel=0 if f.is_sparse else None), t, ptx))
    return out


def _first_legal_target(f: cat.Form, ptx: str, targets: list[str], prefer_before: str | None) -> str | None:
    ok = [t for t in targets if cat.legality(f, t, ptx, sel=0 if f.is_sparse else None).ok]
    if not ok:
        return None
    if prefer_before:   # a target that already existed one version below (a clean boundary)
        older = [t for t in ok if _pv(cat.parse_target(t).ptx) <= _pv(prefer_before)]
        if older:
            return older[0]
    return ok[0]


def boundary_cases(targets: list[str], max_ptx: str) -> list[Case]:
    """Each form at its minimum PTX version and one below; removed spellings at their
    last version and one above.  ``targets`` must be ordered oldest first."""
    versions = [v for v in _ptx_versions() if _pv(v) <= _pv(max_ptx)]
    out: list[Case] = []
    for f in cat.documented_forms():
        sel = 0 if f.is_sparse else None
        reqs = cat.requirements(f)
        lo = cat.min_ptx(f)
        maxes = [r["ptx_max"] for r in reqs if "ptx_max" in r]
        hi = min(maxes, key=_pv) if maxes else None
        if lo in versions:
            i = versions.index(lo)
            below = versions[i - 1] if i > 0 else None
            t = _first_legal_target(f, lo, targets, below)
            if t:
                out.append(Case("boundary", Probe(f, sel=sel), t, lo, note=f"min PTX {lo}"))
                if below:
                    out.append(Case("boundary", Probe(f, sel=sel), t, below, note=f"one below min PTX {lo}"))
        if hi and hi in versions:
            i = versions.index(hi)
            t = _first_legal_target(f, hi, targets, None)
            if t:
                out.append(Case("boundary", Probe(f, sel=sel), t, hi, note=f"last PTX {hi}"))
                if i + 1 < len(versions):
                    out.append(Case("boundary", Probe(f, sel=sel), t, versions[i + 1], note=f"one above last PTX {hi}"))
    return out


# axes each family prints (a mutation of an axis the spelling does not show would be invisible)
_MUT_AXES = {
    "mma": ("sparsity", "shape", "alayout", "blayout", "kind", "block_scale", "scale_vec", "satfinite",
            "dtype", "atype", "btype", "ctype", "stype", "bitop", "popc", "rounding", "sync", "aligned"),
    "wmma.load": ("matrix", "layout", "shape", "space", "type", "sync", "aligned"),
    "wmma.store": ("layout", "shape", "space", "dtype", "sync", "aligned"),
    "wmma.mma": ("bitop", "popc", "alayout", "blayout", "shape", "rounding", "dtype", "atype", "btype",
                 "ctype", "satfinite", "sync", "aligned"),
    # wgmma: layouts are mutated as the extra qualifiers they are (`layout`, below)
    "wgmma": ("sparsity", "shape", "kind", "satfinite", "dtype", "atype", "btype", "bitop", "popc", "rounding",
              "sync", "aligned", "layout"),
    "wgmma.fence": ("sync", "aligned", "shape"),
    "wgmma.commit_group": ("sync", "aligned", "shape"),
    "wgmma.wait_group": ("sync", "aligned", "shape"),
}
_MUT_AXES["mma.sp"] = _MUT_AXES["mma"]
_OPTIONAL = {"kind", "scale_vec", "rounding", "bitop", "space", "sparsity"}
_TYPE_AXIS = {"a": "atype", "b": "btype", "c": "ctype", "d": "dtype"}


@lru_cache(maxsize=None)
def _wgmma_only(axis: str) -> frozenset:
    """Vocabulary values only wgmma blocks use (kept out of the mma/wmma mutations, whose
    near-miss set stays what it was before wgmma joined the catalog)."""
    mine: set = set()
    other: set = set()
    for b in cat.spec().blocks:
        for v in b.values.get(axis, ()):
            (mine if b.family in cat.WGMMA_FAMILIES else other).add(v)
    return frozenset(mine - other)


def _vocab(axis: str, family: str | None = None) -> list[str]:
    v = cat.spec().vocab
    if axis == "type":
        vals = set(v["atype"]) | set(v["btype"]) | set(v["ctype"]) | set(v["dtype"])
        return sorted(vals if family in cat.WGMMA_FAMILIES else vals - _wgmma_only("atype") - _wgmma_only("dtype"))
    if family in cat.WGMMA_FAMILIES:
        return sorted(v[axis])
    return sorted(set(v[axis]) - _wgmma_only(axis))


def mutations(f: cat.Form) -> Iterable[tuple[cat.Form, tuple[str, str, str]]]:
    """Single-axis mutations of ``f`` (every other vocabulary value of one axis)."""
    for ax in _MUT_AXES[f.family]:
        if ax == "layout" and f.family == "wgmma":    # BLAS layout qualifiers, which no wgmma syntax has
            for lay in (("row",), ("col",), ("row", "col"), ("col", "row"), ("row", "row")):
                yield replace(f, extra=lay), ("layout", "", ".".join(lay))
            continue
        if ax in cat.BOOL_AXES:
            yield replace(f, **{ax: not getattr(f, ax)}), (ax, str(getattr(f, ax)), str(not getattr(f, ax)))
            continue
        if ax == "type":                      # wmma.load/.store: the single type, on its matrix's axis
            tax = _TYPE_AXIS[f.matrix]
            cur = getattr(f, tax)
            for v in _vocab("type"):
                if v != cur:
                    yield replace(f, **{tax: v}), ("type", cur, v)
            continue
        if ax == "matrix":                    # load.a -> load.b: the type moves with the matrix
            cur_t = getattr(f, _TYPE_AXIS[f.matrix])
            for m in ("a", "b", "c"):
                if m != f.matrix:
                    kw = {_TYPE_AXIS[f.matrix]: None, _TYPE_AXIS[m]: cur_t, "matrix": m}
                    yield replace(f, **kw), ("matrix", f.matrix, m)
            continue
        cur = getattr(f, ax)
        vals: list[str | None] = list(_vocab(ax, f.family))
        if ax in _OPTIONAL:
            vals.append(None)
        for v in vals:
            if v == cur:
                continue
            if ax == "sparsity" and f.family == "wgmma":
                g = replace(f, sparsity=v)
            elif ax == "sparsity":
                g = replace(f, sparsity=v, family="mma.sp" if v else "mma")
            else:
                g = replace(f, **{ax: v})
            yield g, (ax, str(cur or ""), str(v or ""))


def _probe_for(g: cat.Form, parent: cat.Form) -> Probe:
    try:
        ops = tuple(operands_of(g))
    except (ValueError, KeyError, TypeError, AttributeError):
        # no fragment for this spelling: the parent's registers, plus/minus the
        # operands the mutated qualifiers add or remove (metadata, scale data)
        ops = tuple(o for o in operands_of(parent) if o.name not in ("e", "scale_a", "scale_b"))
        if g.is_sparse:
            ops += (cat.Operand("e", 1, 32, "b32"),)
        if g.block_scale:
            ops += (cat.Operand("scale_a", 1, 32, "b32"), cat.Operand("scale_b", 1, 32, "b32"))
    return Probe(g, sel=0 if g.is_sparse else None, operands=ops)


def near_miss_probes(group: str | None = None) -> tuple[tuple[Probe, tuple[str, str, str], str], ...]:
    """Unique near-miss probes (probe, mutation, parent opcode), documented forms excluded.
    A wgmma spelling is a near-miss once per A source (the operand list differs).  ``group``:
    "warp" (mutations of mma / mma.sp / wmma forms), "wgmma", or None (both)."""
    if group is None:
        return _near_miss_probes("warp") + _near_miss_probes("wgmma")
    return _near_miss_probes(group)


@lru_cache(maxsize=None)
def _near_miss_probes(group: str) -> tuple[tuple[Probe, tuple[str, str, str], str], ...]:
    keep = FAMILY_GROUPS[group]
    documented = {(f.opcode, f.asource) for f in cat.documented_forms()}
    seen: set[tuple] = set()
    out = []
    for f in cat.documented_forms():
        if not keep(f):
            continue
        for g, mut in mutations(f):
            try:
                op = cat.format_form(g)
            except (ValueError, KeyError, TypeError):
                continue
            key = (op, g.asource)
            if key in documented or key in seen or op == f.opcode:
                continue
            seen.add(key)
            out.append((_probe_for(g, f), mut, f.opcode))
    return tuple(out)


def near_miss_cases(targets: Iterable[str], ptx: str) -> list[Case]:
    out = []
    for t in targets:
        for p, mut, parent in near_miss_probes():
            if p.form.is_wgmma and t not in WGMMA_TARGETS:
                continue
            out.append(Case("near-miss", p, t, ptx, note=f"from {parent}", mutation=mut))
    return out


def selector_cases(targets: Iterable[str], ptx: str, sels: Iterable[int] = (0, 1, 2, 3, 4)) -> list[Case]:
    out = []
    for t in targets:
        for f in cat.documented_forms():
            if not f.is_sparse or not cat.legality(f, t, ptx, sel=0).ok:
                continue
            for s in sels:
                out.append(Case("selector", Probe(f, sel=s), t, ptx, note=f"sel={s}"))
    return out


def _orders(f: cat.Form) -> list[str]:
    """Spellings of a wmma form that differ from the canonical one only in qualifier order,
    each also without .aligned."""
    sync = "sync"
    if f.family in ("wmma.load", "wmma.store"):
        op = f.family.split(".")[1]
        t = getattr(f, _TYPE_AXIS[f.matrix])
        middle = [x for x in (f.layout, f.shape, f.space) if x]
        spell = []
        for perm in itertools.permutations(middle):
            for aligned in (True, False):
                q = [f"wmma.{op}", f.matrix, sync] + (["aligned"] if aligned else []) + list(perm) + [t]
                spell.append(".".join(q))
        return spell
    if f.family == "wmma.mma":
        types = [f.dtype, f.ctype] if (f.atype == "f16" and f.btype == "f16") else [f.dtype, f.atype, f.btype, f.ctype]
        pre = [x for x in (f.bitop, "popc" if f.popc else None) if x]
        lay = [f.alayout, f.blayout]
        spell = []
        for order in ([*lay, f.shape], [f.shape, *lay]):
            for aligned in (True, False):
                q = ["wmma.mma", *pre, sync] + (["aligned"] if aligned else []) + order + \
                    ([f.rounding] if f.rounding else []) + types + (["satfinite"] if f.satfinite else [])
                spell.append(".".join(q))
        return spell
    return []


def _wgmma_orders(f: cat.Form) -> list[str]:
    """Spellings of a wgmma form in other qualifier orders, without .aligned, with layouts."""
    if f.family != "wgmma":
        return [f.family + ".sync"]                     # fence / commit_group / wait_group without .aligned
    sp = ["sp"] if f.sparsity else []
    sat = ["satfinite"] if f.satfinite else []
    types = [f.dtype, f.atype, f.btype]
    op = [x for x in (f.bitop, "popc" if f.popc else None) if x]
    head = ["wgmma", "mma_async"]
    out = [head + ["sync", "aligned"] + sp + [f.shape] + sat + types + op,          # .sp after .sync.aligned
           head + sp + ["sync", "aligned"] + types + [f.shape] + sat + op,          # shape after the types
           head + sp + ["sync", f.shape] + sat + types + op,                        # no .aligned
           head + sp + ["sync", "aligned", f.shape, "row", "col"] + sat + types + op]
    if f.satfinite:
        out.append(head + sp + ["sync", "aligned", f.shape] + types + op + ["satfinite"])
    return [".".join(q) for q in out]


def _wgmma_sample(per: int = 2) -> list[cat.Form]:
    """``per`` N values (the smallest and the largest) of every other wgmma form, both A sources."""
    groups: dict[tuple, list[cat.Form]] = defaultdict(list)
    for f in cat.documented_forms():
        if f.family == "wgmma":
            groups[(f.sparsity, f.dtype, f.atype, f.btype, f.satfinite, f.asource, f.mnk[2])].append(f)
        elif f.is_wgmma:
            groups[(f.family,)].append(f)
    out = []
    for fs in groups.values():
        fs = sorted(fs, key=lambda g: g.n if g.shape else 0)
        out += [fs[0]] + ([fs[-1]] if per > 1 and len(fs) > 1 else [])
    return out


def spelling_cases(targets: Iterable[str], ptx: str) -> list[Case]:
    out = []
    for t in targets:
        for f in cat.documented_forms():
            if not f.is_wmma or not f.aligned:
                continue
            for s in _orders(f):
                if s == f.opcode:
                    continue
                out.append(Case("spelling", Probe(f, spelling=s), t, ptx, note="qualifier order / .aligned"))
        if t in WGMMA_TARGETS:
            for f in _wgmma_sample():
                for s in _wgmma_orders(f):
                    if s != f.opcode:
                        out.append(Case("spelling", Probe(f, sel=0 if f.is_sparse else None, spelling=s), t, ptx,
                                        note="qualifier order / .aligned / layouts"))
    return out


# values tried for each wgmma immediate (legal ones and their neighbours)
IMM_VALUES = {"scale_d": (-1, 0, 1, 2), "imm_scale_a": (-2, -1, 0, 1, 2), "imm_scale_b": (-1, 0, 1, 2),
              "imm_trans_a": (-1, 0, 1, 2), "imm_trans_b": (-1, 0, 1, 2), "n": (-1, 0, 1, 7, 8, 1000)}


def immediate_cases(targets: Iterable[str], ptx: str) -> list[Case]:
    out = []
    for t in targets:
        if t not in WGMMA_TARGETS:
            continue
        for f in _wgmma_sample(per=1):
            names = ["n"] if f.family == "wgmma.wait_group" else \
                [cat.imm_key(r.data["name"]) for r in cat.immediates(f)] if f.family == "wgmma" else []
            for k in names:
                for v in IMM_VALUES[k]:
                    out.append(Case("immediate", Probe(f, sel=0 if f.is_sparse else None, wg=((k, v),)), t, ptx,
                                    note=f"{k}={v}"))
    return out


# ----------------------------------------------------------------------------------
# errata

@dataclass(frozen=True)
class Erratum:
    id: str
    kind: str             # ptxas-accepts | ptxas-rejects | text
    summary: str
    section: str
    when: Formula | None
    data: dict


@lru_cache(maxsize=1)
def errata() -> tuple[Erratum, ...]:
    doc = load_spec("errata")
    out = []
    for e in doc.get("erratum", []):
        w = e.get("when")
        out.append(Erratum(e["id"], e["kind"], e["summary"], e.get("section", ""),
                           Formula(w) if w else None, e))
    return tuple(out)


def case_env(c: Case, catalog_ok: bool, accepted: bool) -> dict[str, Any]:
    form = c.probe.form
    if c.spelling != form.opcode:          # the axes as written (a spelling case: order, .aligned, layouts)
        try:
            g = cat.parse(c.spelling)
            form = g.with_asource(form.asource) if g.family == "wgmma" else g
        except cat.MalformedOpcode:
            pass
    env = form.env()
    t = cat.parse_target(c.target)
    a, b = _pv(c.ptx)
    axis, frm, to = c.mutation or ("", "", "")
    env.update(target=t.name, tnum=t.number, tsuffix=t.suffix, ptx=c.ptx, ptxv=a * 10 + b,
               sel=-1 if c.probe.sel is None else c.probe.sel, category=c.category, spelling=c.spelling,
               mut_axis=axis, mut_from=frm, mut_to=to, catalog=catalog_ok, ptxas=accepted,
               documented=cat.is_documented(form), extra=".".join(form.extra))
    return env


def explain(c: Case, catalog_ok: bool, accepted: bool) -> str | None:
    """The erratum id that explains a disagreement, or None."""
    want = "ptxas-accepts" if accepted else "ptxas-rejects"
    env = case_env(c, catalog_ok, accepted)
    for e in errata():
        if e.kind != want or e.when is None:
            continue
        try:
            if e.when.eval(env):
                return e.id
        except Exception as ex:  # a broken erratum formula must not pass silently
            raise ValueError(f"erratum {e.id}: cannot evaluate 'when': {ex}") from None
    return None


# ----------------------------------------------------------------------------------
# running

@dataclass
class Row:
    category: str
    ptxas: str
    target: str
    ptx: str
    spelling: str
    sel: int | None
    catalog: bool
    reasons: list[str]
    accepted: bool
    messages: list[str]
    erratum: str | None = None
    note: str = ""
    mutation: tuple[str, str, str] | None = None
    asource: str | None = None                 # wgmma: where A came from in the instruction line
    wg: list | None = None                     # wgmma: immediates [[name, value], ...] the line used

    @property
    def agree(self) -> bool:
        return self.catalog == self.accepted


@dataclass
class SweepResult:
    ptxas: list[dict]
    targets: list[str]
    rows: list[Row] = field(default_factory=list)       # disagreements only (plus samples)
    counts: dict = field(default_factory=dict)          # (ptxas, target, category) -> Counter
    seconds: float = 0.0

    @property
    def unexplained(self) -> list[Row]:
        return [r for r in self.rows if not r.agree and r.erratum is None]

    @classmethod
    def from_dict(cls, d: dict) -> "SweepResult":
        res = cls(list(d["ptxas"]), list(d["targets"]), seconds=float(d.get("seconds", 0)))
        for c in d["counts"]:
            key = (c["ptxas"], c["target"], c["ptx"], c["category"])
            res.counts[key] = {k: v for k, v in c.items() if k not in ("ptxas", "target", "ptx", "category")}
        for r in d["disagreements"]:
            r = dict(r)
            r["mutation"] = tuple(r["mutation"]) if r.get("mutation") else None
            if r.get("wg"):
                r["wg"] = [tuple(x) for x in r["wg"]]
            res.rows.append(Row(**r))
        return res

    def to_dict(self) -> dict:
        return {
            "ptxas": self.ptxas,
            "targets": self.targets,
            "seconds": round(self.seconds, 1),
            "counts": [{"ptxas": k[0], "target": k[1], "ptx": k[2], "category": k[3], **v}
                       for k, v in sorted(self.counts.items())],
            # the first catalog reason is enough to read a row (the report JSON stays small)
            "disagreements": [_row_dict(r) for r in self.rows if not r.agree],
            "unexplained": len(self.unexplained),
        }


def _row_dict(r: Row) -> dict:
    # the first catalog reason is enough to read a row; wgmma's A source / immediates only where set
    d = dict(r.__dict__, reasons=r.reasons[:1])
    for k in ("asource", "wg"):
        if d.get(k) is None:
            d.pop(k)
    return d


def reexplain(res: SweepResult) -> SweepResult:
    """Attribute every recorded disagreement again with the current ``specs/errata.toml``
    (for a report loaded from JSON); recounts the 'explained' column."""
    for cnt in res.counts.values():
        cnt["explained"] = 0
    for r in res.rows:
        if r.agree:
            continue
        try:
            probe = as_probe(r.spelling)
        except cat.MalformedOpcode:
            r.erratum = None
            continue
        probe = replace(probe, sel=r.sel, wg=tuple(r.wg) if getattr(r, "wg", None) else None,
                        form=probe.form.with_asource(r.asource) if getattr(r, "asource", None) else probe.form)
        c = Case(r.category, probe, r.target, r.ptx, r.note, r.mutation)
        r.erratum = explain(c, r.catalog, r.accepted)
        if r.erratum:
            res.counts[(r.ptxas, r.target, r.ptx, r.category)]["explained"] += 1
    return res


def merge(base: SweepResult, extra: SweepResult) -> SweepResult:
    """``base`` with the targets ``extra`` swept added (a sweep of new targets run alone, e.g.
    ``ptxas-sweep --targets sm_100f``); counts of a target present in both come from ``extra``."""
    new_t = set(extra.targets)
    out = SweepResult(list(base.ptxas), [t for t in SWEEP_TARGETS if t in set(base.targets) | new_t],
                      seconds=base.seconds + extra.seconds)
    out.counts = {k: v for k, v in base.counts.items() if k[1] not in new_t}
    out.counts.update({k: v for k, v in extra.counts.items() if k[1] in new_t})
    out.rows = [r for r in base.rows if r.target not in new_t] + [r for r in extra.rows if r.target in new_t]
    return out


def load_report(path: str) -> SweepResult:
    with open(path) as f:
        return SweepResult.from_dict(json.load(f))


def build_cases(targets: list[str], ptx: str, categories: Iterable[str], all_targets: list[str]) -> list[Case]:
    cats = set(categories)
    cases: list[Case] = []
    if "documented" in cats:
        cases += documented_cases(targets, ptx)
    if "boundary" in cats:
        # sm_70/sm_72 too: the oldest PTX versions exist only for them (ptxas assembles
        # `.target sm_70` with -arch=sm_75, see formal.catalog.ptxas.arch_for)
        bt = sorted(set(all_targets) | set(BOUNDARY_EXTRA),
                    key=lambda t: (_pv(cat.parse_target(t).ptx), cat.parse_target(t).number))
        cases += [c for c in boundary_cases(bt, ptx) if c.target in set(targets) | set(BOUNDARY_EXTRA)]
    if "near-miss" in cats:
        cases += near_miss_cases(targets, ptx)
    if "selector" in cats:
        cases += selector_cases(targets, ptx)
    if "spelling" in cats:
        cases += spelling_cases(targets, ptx)
    if "immediate" in cats:
        cases += immediate_cases(targets, ptx)
    return cases


def sweep(ptxases: list[Ptxas] | None = None, targets: Iterable[str] = SWEEP_TARGETS,
          ptx: str | None = None, categories: Iterable[str] = CATEGORIES, jobs: int | None = None,
          progress=None, family: str | None = None) -> SweepResult:
    """Run the sweep for every ptxas in ``ptxases`` (default: every installation found).
    ``family`` = "wgmma" (the warpgroup instructions) or "warp" (mma, mma.sp, wmma) keeps
    only those cases (None: all)."""
    keep = FAMILY_GROUPS[family] if family else (lambda f: True)
    t0 = time.time()
    pxs = ptxases if ptxases is not None else installations()
    if not pxs:
        raise FileNotFoundError("no ptxas found (set $PTXAS, install the nvidia-cuda-nvcc wheel, or put ptxas on PATH)")
    targets = [cat.parse_target(t).name for t in targets]
    res = SweepResult([p.to_dict() for p in pxs], targets)
    order = sorted(targets, key=lambda t: (_pv(cat.parse_target(t).ptx), cat.parse_target(t).number))
    jobs = jobs or max(1, os.cpu_count() or 1)
    for px in pxs:
        p = cat.check_ptx(ptx) if ptx else catalog_ptx(px)
        if _pv(p) > _pv(px.max_ptx):
            continue
        cases = [c for c in build_cases(targets, p, categories, order) if keep(c.probe.form)]
        groups: dict[tuple[str, str], list[Case]] = defaultdict(list)
        for c in cases:
            groups[(c.target, c.ptx)].append(c)

        def work(key):
            cs = groups[key]
            return key, cs, assemble([c.probe for c in cs], key[0], key[1], px)

        with ThreadPoolExecutor(max_workers=jobs) as ex:
            for key, cs, vs in ex.map(work, sorted(groups)):
                for c, v in zip(cs, vs):
                    ok, reasons = catalog_verdict(c)
                    k = (px.version, c.target, c.ptx, c.category)
                    cnt = res.counts.setdefault(k, {"cases": 0, "agree": 0, "disagree": 0,
                                                     "legal": 0, "accepted": 0, "explained": 0})
                    cnt["cases"] += 1
                    cnt["legal"] += ok
                    cnt["accepted"] += v.accepted
                    if ok == v.accepted:
                        cnt["agree"] += 1
                        continue
                    cnt["disagree"] += 1
                    eid = explain(c, ok, v.accepted)
                    cnt["explained"] += eid is not None
                    res.rows.append(Row(c.category, px.version, c.target, c.ptx, c.spelling,
                                        c.probe.sel if c.probe.form.is_sparse else None, ok, list(reasons),
                                        v.accepted, v.messages, eid, c.note, c.mutation,
                                        c.probe.form.asource, [list(x) for x in c.probe.wg] if c.probe.wg else None))
                if progress:
                    progress(f"ptxas {px.version} {key[0]} PTX {key[1]}: {len(cs)} cases")
    res.seconds = time.time() - t0
    return res


# ----------------------------------------------------------------------------------
# report

def report_markdown(res: SweepResult) -> str:
    L: list[str] = []
    L.append("# ptxas sweep: the catalog vs NVIDIA's assembler\n")
    L.append("Generated by `ptx-formal ptxas-sweep` (`formal/catalog/sweep.py`); do not edit by hand.\n")
    L.append("Every case is assembled by ptxas (one instruction per line, errors attributed by line "
             "number, the accepted set re-assembled alone with exit status 0) and decided by "
             "`formal.legality`. A disagreement must be listed in `specs/errata.toml`.\n")
    L.append("ptxas used:\n")
    for p in res.ptxas:
        # the origin only ("wheel", "PATH"): a path names the machine that ran the sweep
        L.append(f"- ptxas {p['version']} (CUDA {p['release']}, highest PTX ISA {p['max_ptx']}; found on {p['origin']})")
    L.append("")
    L.append(f"Categories: {', '.join(CATEGORIES)} (see the module docstring). Wall time {res.seconds:.0f} s.\n")
    # per target summary
    L.append("## Per target\n")
    L.append("| ptxas | target | PTX | cases | agree | disagree | explained by errata | unexplained |")
    L.append("|---|---|---|---:|---:|---:|---:|---:|")
    agg: dict[tuple[str, str], Counter] = defaultdict(Counter)
    ptx_of: dict[tuple[str, str], set] = defaultdict(set)
    for (v, t, p, c), cnt in res.counts.items():
        agg[(v, t)].update(cnt)
        if c != "boundary":
            ptx_of[(v, t)].add(p)
    order = {t: i for i, t in enumerate(BOUNDARY_EXTRA + SWEEP_TARGETS)}
    tot = Counter()
    for (v, t), cnt in sorted(agg.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], 99), kv[0][1])):
        tot.update(cnt)
        ps = ", ".join(sorted(ptx_of[(v, t)], key=_pv)) or "(boundary only)"
        L.append(f"| {v} | {t} | {ps} | {cnt['cases']} | {cnt['agree']} | {cnt['disagree']} | "
                 f"{cnt['explained']} | {cnt['disagree'] - cnt['explained']} |")
    L.append(f"| **all** | | | **{tot['cases']}** | **{tot['agree']}** | **{tot['disagree']}** | "
             f"**{tot['explained']}** | **{tot['disagree'] - tot['explained']}** |")
    L.append("")
    L.append("Boundary cases run at their own PTX version (min PTX and one below) and are counted "
             "under the target they ran on.\n")
    # per category
    L.append("## Per category\n")
    L.append("| ptxas | category | cases | agree | disagree | explained |")
    L.append("|---|---|---:|---:|---:|---:|")
    byc: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for (v, t, p, c), cnt in res.counts.items():
        byc[(v, c)].update(cnt)
    for (v, c), cnt in sorted(byc.items()):
        L.append(f"| {v} | {c} | {cnt['cases']} | {cnt['agree']} | {cnt['disagree']} | {cnt['explained']} |")
    L.append("")
    # errata
    L.append("## Errata (specs/errata.toml)\n")
    L.append("| id | kind | disagreements in this sweep | summary |")
    L.append("|---|---|---:|---|")
    by_e: dict[str | None, list[Row]] = defaultdict(list)
    for r in res.rows:
        if not r.agree:
            by_e[r.erratum].append(r)
    for e in errata():
        n = len(by_e.get(e.id, [])) if e.kind != "text" else "-"
        L.append(f"| {e.id} | {e.kind} | {n} | {e.summary} |")
    L.append("")
    for e in errata():
        rows = by_e.get(e.id, [])
        L.append(f"### {e.id} ({e.kind})\n")
        L.append(f"{e.summary}. PTX ISA {e.section}.\n")
        L.append(f"Catalog: {e.data.get('catalog', '')}.\n")
        if e.kind != "text":
            per = Counter((r.ptxas, r.target) for r in rows)
            L.append(f"Disagreements in this sweep: {len(rows)}"
                     + (" (" + ", ".join(f"ptxas {v} {t}: {n}" for (v, t), n in sorted(per.items())) + ")" if rows else "")
                     + ".\n")
            cats = Counter(r.category for r in rows)
            if cats:
                L.append("By category: " + ", ".join(f"{c} {n}" for c, n in sorted(cats.items())) + ".\n")
            shown = 0
            for r in rows:
                if shown >= 3:
                    break
                shown += 1
                L.append(f"- sweep: ptxas {r.ptxas}, {r.target}, PTX {r.ptx}: `{r.spelling}`"
                         + (f" sel={r.sel}" if r.sel is not None else "")
                         + f" — catalog {'legal' if r.catalog else 'illegal'}"
                         + (f" ({r.reasons[0]})" if r.reasons else "")
                         + f"; ptxas {'accepts' if r.accepted else 'rejects'}"
                         + (f": {'; '.join(r.messages)}" if r.messages else ""))
        for x in e.data.get("evidence", []):
            if isinstance(x, str):          # a text erratum's evidence that is not a ptxas line (a proof, a probe)
                L.append(f"- evidence: {x}")
                continue
            L.append(f"- evidence: ptxas {x['ptxas']}, {x['target']}, PTX {x['ptx']}: `{x['instruction']}` — "
                     + ("accepted" if x["accepted"] else "rejected") + (f": {x['message']}" if x["message"] else ""))
        L.append("")
    un = by_e.get(None, [])
    L.append(f"## Unexplained disagreements: {len(un)}\n")
    for r in un[:200]:
        L.append(f"- [{r.category}] ptxas {r.ptxas} {r.target} PTX {r.ptx}: `{r.spelling}`"
                 + (f" sel={r.sel}" if r.sel is not None else "")
                 + f" catalog={'legal' if r.catalog else 'illegal'} ptxas={'accepted' if r.accepted else 'rejected'}"
                 + f" {'; '.join(r.messages)} {'; '.join(r.reasons[:1])}")
    if len(un) > 200:
        L.append(f"- ... and {len(un) - 200} more (see the JSON)")
    L.append("")
    return "\n".join(L)


def write_report(res: SweepResult, stem: str) -> tuple[str, str]:
    md, js = stem + ".md", stem + ".json"
    os.makedirs(os.path.dirname(md) or ".", exist_ok=True)
    with open(md, "w") as f:
        f.write(report_markdown(res))
    d = res.to_dict()
    for p in d.get("ptxas", []):
        p["path"] = os.path.basename(p.get("path", ""))   # no path of the machine that ran it
    with open(js, "w") as f:
        json.dump(d, f, indent=1, sort_keys=False)
        f.write("\n")
    return md, js
