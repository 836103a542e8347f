"""The instruction catalog: opcode strings <-> structured forms, enumeration, legality.

A *form* is one concrete spelling of a warp-level matrix instruction with every
qualifier axis made explicit (:class:`Form`).  ``parse`` turns an opcode string into
a form and ``Form.opcode`` prints it back in the ISA's canonical qualifier order::

    >>> f = parse("mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.bf16.bf16.f32")
    >>> f.family, f.sparsity, f.shape, f.atype, f.dtype
    ('mma.sp', 'sp::ordered_metadata', 'm16n8k32', 'bf16', 'f32')

``legality(opcode, target, ptx, sel)`` checks a form against the rules in
``specs/{mma,mma_sp,wmma}.toml`` and returns every reason it is illegal, each with the
PTX ISA section it comes from.  ``forms(target, ptx, family)`` enumerates the documented
forms (the product of each syntax block, filtered by the prose constraints and, when a
target is given, by the target/PTX requirements), each with its register operands.

``parse_instruction(line)`` reads a whole instruction the way ptxas does: the qualifier
orders ptxas accepts (``specs/spelling.toml``; a legal spelling in another order than the
text's is legal with a note), the operand count, the register-vector sizes of the form's
fragments and the immediates as PTX constant expressions (``const_expr``); a bad line raises
:class:`MalformedOpcode` (exit 2), an immediate out of range is a reason of ``legality``
(exit 1)::

    >>> parse_instruction("mma.sp.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
    ...                   "{%f0,%f1,%f2,%f3}, {%r0,%r1}, {%r2,%r3}, {%f4,%f5,%f6,%f7}, %r4, 0x1")[1]
    {'sel': 1}

Legality is decided in the order Sail uses: syntax first (is this a documented
spelling?), then the prose constraints, then target and PTX version, then the operand
immediates (sparsity selector, block-scale selectors).
"""

from __future__ import annotations

import difflib
import itertools
import re
from dataclasses import asdict, dataclass, field, fields, replace
from functools import cached_property, lru_cache
from typing import Any, Iterable, Iterator

from ..expr import Formula, FormulaError
from ..specdata import load_spec

# ----------------------------------------------------------------------------------
# errors

class MalformedOpcode(ValueError):
    """The input cannot be read as an instruction spelling at all (exit code 2)."""

    def __init__(self, message: str, token: str | None = None, suggestion: str | None = None):
        super().__init__(message)
        self.token = token
        self.suggestion = suggestion


class BadArgument(ValueError):
    """A bad target, PTX version or selector argument (exit code 2)."""


# ----------------------------------------------------------------------------------
# spec loading

FAMILY_FILES = {"mma": "mma", "mma.sp": "mma_sp", "wmma.load": "wmma", "wmma.store": "wmma", "wmma.mma": "wmma",
                "wgmma": "wgmma", "wgmma.fence": "wgmma", "wgmma.commit_group": "wgmma", "wgmma.wait_group": "wgmma"}
FAMILIES = ("mma", "mma.sp", "wmma.load", "wmma.store", "wmma.mma",
            "wgmma", "wgmma.fence", "wgmma.commit_group", "wgmma.wait_group")
# the warpgroup instructions (PTX ISA 9.7.15); "wgmma" is wgmma.mma_async, dense or `.sp`
WGMMA_FAMILIES = ("wgmma", "wgmma.fence", "wgmma.commit_group", "wgmma.wait_group")
# where wgmma's matrix A comes from (not spelled in the opcode: the operand list decides)
A_SOURCES = ("desc", "reg")

STR_AXES = ("sparsity", "matrix", "shape", "alayout", "blayout", "layout", "space", "kind",
            "scale_vec", "dtype", "atype", "btype", "ctype", "stype", "bitop", "rounding", "asource")
BOOL_AXES = ("sync", "aligned", "block_scale", "satfinite", "popc")
AXES = ("family",) + STR_AXES + BOOL_AXES

AXIS_LABEL = {
    "sparsity": "sparsity variant", "matrix": "matrix", "shape": ".shape", "alayout": ".alayout",
    "blayout": ".blayout", "layout": ".layout", "space": "state space", "kind": ".kind",
    "scale_vec": ".scale_vec_size", "dtype": ".dtype", "atype": ".atype", "btype": ".btype",
    "ctype": ".ctype", "stype": ".stype", "bitop": "bit operation", "rounding": "rounding modifier",
    "sync": ".sync", "aligned": ".aligned", "block_scale": ".block_scale", "satfinite": ".satfinite",
    "popc": ".popc", "asource": "A source",
}


def _pv(v: str) -> tuple[int, int]:
    """PTX ISA version string -> comparable tuple."""
    a, _, b = str(v).partition(".")
    return int(a), int(b or 0)


@dataclass(frozen=True)
class SyntaxBlock:
    family: str
    id: str
    group: str
    text: str
    section: str
    values: dict[str, tuple]          # axis -> allowed values ('' = unset, False = absent)

    def axes(self) -> list[str]:
        return list(self.values)


@dataclass(frozen=True)
class Rule:
    """A constraint, requirement or selector rule from a spec file."""

    family: str
    kind: str                         # 'constraint' | 'require' | 'selector' | 'products' | 'fragment' | 'immediate'
    when: Formula | None
    data: dict
    section: str

    def applies(self, env: dict) -> bool:
        return True if self.when is None else bool(self.when.eval(env))


@dataclass(frozen=True)
class Spec:
    blocks: tuple[SyntaxBlock, ...]
    rules: tuple[Rule, ...]
    vocab: dict[str, frozenset]       # axis -> every value any block allows
    scale_selectors: dict[str, dict]
    scale_vec_default: dict[str, str]
    default_stride: dict[str, dict]

    def rules_of(self, family: str, kind: str) -> list[Rule]:
        return list(self._rules_by_kind.get((family, kind), ()))

    @cached_property
    def _rules_by_kind(self) -> dict[tuple[str, str], tuple[Rule, ...]]:
        # rules_of runs for every form the sweeps build (hundreds of thousands of calls)
        out: dict[tuple[str, str], list[Rule]] = {}
        for r in self.rules:
            out.setdefault((r.family, r.kind), []).append(r)
        return {k: tuple(v) for k, v in out.items()}


def _blocks_and_rules(doc: dict, default_family: str | None) -> tuple[list[SyntaxBlock], list[Rule]]:
    sec = str(doc.get("section", ""))
    fsec = dict(doc.get("family_section", {}))      # wmma: one instruction section per family
    blocks: list[SyntaxBlock] = []
    for b in doc.get("syntax", []):
        fam = b.get("family", default_family)
        vals: dict[str, tuple] = {}
        for ax in STR_AXES + BOOL_AXES:
            if ax in b:
                vals[ax] = tuple(b[ax])
        blocks.append(SyntaxBlock(fam, b["id"], b.get("group", ""), b.get("text", ""),
                                  b.get("section", fsec.get(fam, sec)), vals))
    fams = sorted({blk.family for blk in blocks})
    rules: list[Rule] = []
    for kind in ("constraint", "require", "selector", "products", "fragment", "immediate"):
        for r in doc.get(kind, []):
            when = r.get("when")
            f = Formula(when) if when not in (None, "", "True") else None
            data = {k: v for k, v in r.items() if k not in ("when",)}
            # a rule in a multi-family file applies to every family of the file
            for fam in ([default_family] if default_family else fams):
                base = sec + ".1" if kind == "fragment" else fsec.get(fam, sec)
                section = r.get("section", base + {
                    "constraint": " (Description)", "require": " (PTX ISA Notes / Target ISA Notes)",
                    "selector": "", "products": "", "fragment": "", "immediate": ""}[kind])
                rules.append(Rule(fam, kind, f, data, section))
    return blocks, rules


@lru_cache(maxsize=1)
def spec() -> Spec:
    blocks: list[SyntaxBlock] = []
    rules: list[Rule] = []
    mma, mma_sp, wmma = load_spec("mma"), load_spec("mma_sp"), load_spec("wmma")
    wgmma, wgmma_sp = load_spec("wgmma"), load_spec("wgmma_sp")
    for doc, fam in ((mma, "mma"), (mma_sp, "mma.sp"), (wmma, None), (wgmma, None), (wgmma_sp, "wgmma")):
        b, r = _blocks_and_rules(doc, fam)
        blocks += b
        rules += r
    vocab: dict[str, set] = {ax: set() for ax in STR_AXES}
    for blk in blocks:
        for ax, vals in blk.values.items():
            if ax in vocab:
                vocab[ax].update(v for v in vals if v != "")
    sel = {s["scale_vec"]: s for s in mma.get("scale_selector", [])}
    return Spec(tuple(blocks), tuple(rules), {k: frozenset(v) for k, v in vocab.items()}, sel,
                dict(mma.get("scale_vec_default", {})), dict(wmma.get("default_stride", {})))


# ----------------------------------------------------------------------------------
# targets

@dataclass(frozen=True)
class Target:
    name: str
    number: int
    suffix: str          # '', 'a' or 'f'
    ptx: str             # PTX ISA version that introduced the target string

    @property
    def family(self) -> str | None:
        fams = load_spec("targets")["families"]
        for fam, members in fams.items():
            if self.number in members:
                return fam
        return None


_TARGET_RE = re.compile(r"^(?:sm|compute)_(\d+)([af]?)$")


def parse_target(name: str) -> Target:
    """``"sm_90a"`` -> Target; raises :class:`BadArgument` for unknown targets."""
    spec_t = load_spec("targets")["targets"]
    s = str(name).strip().lower()
    m = _TARGET_RE.match(s)
    if not m or f"sm_{m.group(1)}{m.group(2)}" not in spec_t:
        close = difflib.get_close_matches(s, list(spec_t), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise BadArgument(f"unknown target {name!r}{hint}; known: {', '.join(spec_t)}")
    canon = f"sm_{m.group(1)}{m.group(2)}"
    return Target(canon, int(m.group(1)), m.group(2), spec_t[canon]["ptx"])


def check_ptx(ptx: str | float) -> str:
    versions = load_spec("targets")["ptx"]["versions"]
    s = str(ptx).strip()
    if re.fullmatch(r"\d+", s):
        s += ".0"
    if s not in versions:
        close = difflib.get_close_matches(s, versions, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise BadArgument(f"unknown PTX ISA version {ptx!r}{hint}; known: {versions[0]} .. {versions[-1]}")
    return s


def all_targets() -> list[str]:
    return list(load_spec("targets")["targets"])


# ----------------------------------------------------------------------------------
# forms

@dataclass(frozen=True)
class Operand:
    """One register operand of a form: ``count`` registers of ``reg_bits`` bits."""

    name: str                 # a, b, c, d, e, scale_a, scale_b, r (wmma.load/.store fragment)
    count: int
    reg_bits: int             # 32 or 64
    ptx_type: str             # f16x2, b32, f32, s32, f64
    etype: str | None = None  # element type held
    elems_per_reg: int = 1
    elem_bits: int = 32       # container bits of one element
    shift: int = 0            # bit position of the element inside its container

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Form:
    """One concrete instruction form with every qualifier axis explicit.

    String axes that an instruction does not use are ``None``.  For wmma.load/.store the
    element type sits on the axis of the matrix it moves (``atype`` for ``wmma.load.a``,
    ``dtype`` for ``wmma.store.d``).
    """

    family: str
    sparsity: str | None = None
    matrix: str | None = None
    shape: str | None = None
    alayout: str | None = None
    blayout: str | None = None
    layout: str | None = None
    space: str | None = None
    kind: str | None = None
    scale_vec: str | None = None
    dtype: str | None = None
    atype: str | None = None
    btype: str | None = None
    ctype: str | None = None
    stype: str | None = None
    bitop: str | None = None
    rounding: str | None = None
    sync: bool = True
    aligned: bool = True
    block_scale: bool = False
    satfinite: bool = False
    popc: bool = False
    # wgmma only: where matrix A comes from, "desc" (shared memory, operand a-desc) or "reg"
    # (registers, operand a); None = not stated (an opcode without its operand list)
    asource: str | None = None
    # PTX qualifiers no syntax block of these instructions has (specs/spelling.toml
    # [vocabulary] flags, and "f16.f16" for the four-type f16 wmma.mma spelling): a form
    # with any is illegal with the syntax rule
    extra: tuple[str, ...] = ()

    # -- geometry ------------------------------------------------------------------
    @cached_property
    def mnk(self) -> tuple[int, int, int]:
        m = re.fullmatch(r"m(\d+)n(\d+)k(\d+)", self.shape or "")
        if not m:
            raise ValueError(f"form has no shape: {self}")
        return int(m.group(1)), int(m.group(2)), int(m.group(3))

    @property
    def m(self) -> int:
        return self.mnk[0]

    @property
    def n(self) -> int:
        return self.mnk[1]

    @property
    def k(self) -> int:
        return self.mnk[2]

    @property
    def is_sparse(self) -> bool:
        return self.family == "mma.sp" or (self.family == "wgmma" and self.sparsity == "sp")

    @property
    def is_wmma(self) -> bool:
        return self.family.startswith("wmma")

    @property
    def is_wgmma(self) -> bool:
        return self.family in WGMMA_FAMILIES

    @property
    def c_type(self) -> str | None:
        """The element type the accumulator input C is read as: ``ctype``; wgmma's opcode
        spells no C type because D is read and written in place, so there it is ``dtype``."""
        return self.dtype if self.family == "wgmma" else self.ctype

    @property
    def listing(self) -> str:
        """The instruction name a listing counts the form under (wgmma.mma_async[.sp] for the
        family "wgmma"; the family otherwise)."""
        if self.family == "wgmma":
            return "wgmma.mma_async" + (".sp" if self.sparsity else "")
        return self.family

    def with_asource(self, asource: str | None) -> "Form":
        """The same wgmma form with matrix A from ``asource`` ("desc" | "reg" | None)."""
        if asource not in (None,) + A_SOURCES:
            raise BadArgument(f"A source must be one of {', '.join(A_SOURCES)}, got {asource!r}")
        return replace(self, asource=asource)

    @property
    def asources(self) -> tuple[str, ...]:
        """The A sources this form stands for: its own, or both when the opcode alone was given."""
        if self.family != "wgmma":
            return ()
        return (self.asource,) if self.asource else A_SOURCES

    @property
    def scale_vec_effective(self) -> str | None:
        """The .scale_vec_size in force (the ISA's defaults: mxf4 -> 2X, mxf8f6f4 -> 1X)."""
        if not self.block_scale:
            return None
        return self.scale_vec or spec().scale_vec_default.get(self.kind or "")

    # -- expression environment -------------------------------------------------------
    def env(self) -> dict[str, Any]:
        """Axis values for spec predicates ('' for unset strings)."""
        e: dict[str, Any] = {"family": self.family}
        for ax in STR_AXES:
            v = getattr(self, ax)
            e[ax] = "" if v is None else v
        for ax in BOOL_AXES:
            e[ax] = bool(getattr(self, ax))
        return e

    def axes(self) -> dict[str, Any]:
        """The axes as a plain dict (unset strings omitted)."""
        out: dict[str, Any] = {"family": self.family}
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name == "family" or v is None or (f.name == "extra" and not v):
                continue
            out[f.name] = v
        if self.block_scale:
            out["scale_vec_effective"] = self.scale_vec_effective
        if self.shape:
            out["m"], out["n"], out["k"] = self.mnk
        return out

    # -- printing -----------------------------------------------------------------------
    @property
    def opcode(self) -> str:
        """The canonical spelling (qualifiers in the ISA syntax order)."""
        return format_form(self)

    def __str__(self) -> str:
        return self.opcode

    # -- operands ------------------------------------------------------------------------
    @cached_property
    def operands(self) -> dict[str, Operand]:
        return {o.name: o for o in operands_of(self)}

    @property
    def selectors(self) -> tuple[int, ...] | None:
        """Legal sparsity-selector values (mma.sp and wgmma.mma_async.sp only)."""
        if not self.is_sparse:
            return None
        r = _selector_rule(self)
        return tuple(r.data["values"]) if r else None


def _dot(*parts: str | None) -> str:
    return "".join(f".{p}" for p in parts if p)


def format_form(f: Form) -> str:
    s = _format_form(f)
    return s + _dot(*(x for x in f.extra if x != "f16.f16"))


def _format_form(f: Form) -> str:
    if f.family in ("mma", "mma.sp"):
        head = "mma" + (f".{f.sparsity}" if f.sparsity else "")
        types = [f.dtype, f.atype, f.btype, f.ctype] + ([f.stype] if f.stype else [])
        return head + _dot("sync" if f.sync else None, "aligned" if f.aligned else None, f.shape,
                           f.alayout, f.blayout, f"kind::{f.kind}" if f.kind else None,
                           "block_scale" if f.block_scale else None,
                           f"scale_vec::{f.scale_vec}" if f.scale_vec else None,
                           "satfinite" if f.satfinite else None, *types, f.bitop,
                           "popc" if f.popc else None, f.rounding)
    if f.family in ("wmma.load", "wmma.store"):
        op = f.family.split(".")[1]
        t = {"a": f.atype, "b": f.btype, "c": f.ctype, "d": f.dtype}.get(f.matrix or "", None)
        return f"wmma.{op}" + _dot(f.matrix, "sync" if f.sync else None, "aligned" if f.aligned else None,
                                     f.layout, f.shape, f.space, t)
    if f.family == "wmma.mma":
        if f.atype == "f16" and f.btype == "f16" and "f16.f16" not in f.extra:
            types = [f.dtype, f.ctype]          # the f16 syntax names only .dtype.ctype
        else:
            types = [f.dtype, f.atype, f.btype, f.ctype]
        return "wmma.mma" + _dot(f.bitop, "popc" if f.popc else None, "sync" if f.sync else None,
                                 "aligned" if f.aligned else None, f.alayout, f.blayout, f.shape,
                                 f.rounding, *types, "satfinite" if f.satfinite else None)
    if f.family == "wgmma":
        # 9.7.15.5.2 / 9.7.15.6.3: wgmma.mma_async{.sp}.sync.aligned.shape{.satfinite}.dtype.atype.btype{.op.popc}
        return "wgmma.mma_async" + _dot(f.sparsity, "sync" if f.sync else None, "aligned" if f.aligned else None,
                                        f.shape, f.alayout, f.blayout, f"kind::{f.kind}" if f.kind else None,
                                        "satfinite" if f.satfinite else None, f.dtype, f.atype, f.btype, f.ctype,
                                        f.stype, f.bitop, "popc" if f.popc else None, f.rounding)
    if f.family in WGMMA_FAMILIES:
        return f.family + _dot("sync" if f.sync else None, "aligned" if f.aligned else None, f.shape, f.dtype,
                               f.atype, f.btype, f.bitop, "popc" if f.popc else None)
    raise ValueError(f"unknown family {f.family!r}")


# ----------------------------------------------------------------------------------
# parsing

_SHAPE_RE = re.compile(r"^m\d+n\d+k\d+$")


def _vocab() -> dict[str, set[str]]:
    return {k: set(v) for k, v in _vocab_cached().items()}


@lru_cache(maxsize=1)
def _vocab_cached() -> dict[str, frozenset[str]]:
    v = spec().vocab
    ptx = load_spec("spelling").get("vocabulary", {})
    types = set(v["dtype"]) | set(v["atype"]) | set(v["btype"]) | set(v["ctype"]) | set(v["stype"])
    out = {
        "shape": set(v["shape"]), "layout": {"row", "col"}, "type": types | set(ptx.get("type", [])),
        "kind": {f"kind::{k}" for k in v["kind"]},
        "scale_vec": {f"scale_vec::{s}" for s in v["scale_vec"]},
        "rounding": set(v["rounding"]) | set(ptx.get("rounding", [])), "bitop": set(v["bitop"]),
        "space": set(v["space"]) | set(ptx.get("space", [])),
        "flag": {"sync", "aligned", "block_scale", "satfinite", "popc"},
        "sparsity": set(v["sparsity"]),
        "ptx_flag": set(ptx.get("flag", [])) - {"sync", "aligned", "block_scale", "satfinite", "popc"},
    }
    return {k: frozenset(x) for k, x in out.items()}


def _order_rule(family: str) -> dict:
    for r in load_spec("spelling").get("order", []):
        if family in r["family"]:
            return r
    return {"lead": 1, "before": []}


def _all_tokens() -> list[str]:
    out: set[str] = {"mma", "wmma", "load", "store", "a", "b", "c", "d", "wgmma", "mma_async", "fence",
                     "commit_group", "wait_group"}
    for vals in _vocab().values():
        out |= vals
    return sorted(out)


def _suggest(tok: str, pool: Iterable[str] | None = None) -> str | None:
    pool = list(pool) if pool is not None else _all_tokens()
    close = difflib.get_close_matches(tok, pool, n=1, cutoff=0.5)
    return close[0] if close else None


def _malformed(opcode: str, tok: str, why: str, pool: Iterable[str] | None = None) -> MalformedOpcode:
    sug = _suggest(tok, pool)
    msg = f"{why} '.{tok}' in '{opcode}'"
    if sug:
        msg += f" (closest valid spelling: '.{sug}')"
    return MalformedOpcode(msg, tok, sug)


def split_instruction(text: str) -> tuple[str, str]:
    """Split 'opcode operands;' into the opcode and the operand text."""
    s = text.strip().rstrip(";").strip()
    if not s:
        raise MalformedOpcode("empty instruction")
    # the operands may follow the opcode without a space: CuTe's inline asm writes
    # "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32{%0, %1, ...}" and ptxas takes it
    m = re.match(r"([^\s{\[]+)(.*)", s, re.S)
    if not m:
        raise MalformedOpcode(f"no opcode in {s[:80]!r}")
    return m.group(1), m.group(2).strip()


def parse(opcode: str) -> Form:
    """Parse an opcode string (operands, if present, are ignored) into a :class:`Form`.

    Raises :class:`MalformedOpcode` naming the offending qualifier and the closest valid
    spelling when the string is not an instruction spelling at all.
    """
    if not isinstance(opcode, str):
        raise MalformedOpcode(f"opcode must be a string, got {type(opcode).__name__}")
    op, _ = split_instruction(opcode)
    toks = op.split(".")
    if any(t == "" for t in toks):
        raise MalformedOpcode(f"empty qualifier (two dots in a row, or a trailing dot) in '{op}'")
    head = toks[0]
    if head not in ("mma", "wmma", "wgmma"):
        raise _malformed(op, head, "unknown instruction", ["mma", "wmma", "wgmma"])
    vocab = _vocab_cached()
    ax: dict[str, Any] = {"sync": False, "aligned": False}
    rest: list[str]
    if head == "mma":
        rest = toks[1:]
        # the sparsity variant may stand anywhere after 'mma' (ptxas accepts CUTLASS's
        # mma.sync.aligned.kind::mxf8f6f4.sp::ordered_metadata...; specs/spelling.toml)
        sps = [t for t in rest if t in vocab["sparsity"]]
        if len(sps) > 1:
            raise MalformedOpcode(f"duplicate sparsity variant in '{op}'", sps[1])
        if sps:
            ax["family"], ax["sparsity"] = "mma.sp", sps[0]
            rest = [t for t in rest if t != sps[0]]
        elif rest and rest[0].startswith("sp") and rest[0] not in vocab["flag"]:
            raise _malformed(op, rest[0], "unknown sparsity variant", vocab["sparsity"])
        else:
            ax["family"] = "mma"
    elif head == "wgmma":
        ops_ = ("mma_async", "fence", "commit_group", "wait_group")
        if len(toks) < 2 or toks[1] not in ops_:
            raise _malformed(op, toks[1] if len(toks) > 1 else "", "unknown wgmma operation", ops_)
        ax["family"] = "wgmma" if toks[1] == "mma_async" else f"wgmma.{toks[1]}"
        rest = toks[2:]
        if toks[1] == "mma_async":
            # .sp may stand anywhere after the lead, as for mma (ptxas takes
            # wgmma.mma_async.sync.aligned.sp...; specs/spelling.toml)
            sps = [t for t in rest if t in vocab["sparsity"]]
            if len(sps) > 1:
                raise MalformedOpcode(f"duplicate sparsity variant in '{op}'", sps[1])
            if sps:
                ax["sparsity"] = sps[0]
                rest = [t for t in rest if t != sps[0]]
    else:
        if len(toks) < 2 or toks[1] not in ("load", "store", "mma"):
            raise _malformed(op, toks[1] if len(toks) > 1 else "", "unknown wmma operation", ["load", "store", "mma"])
        ax["family"] = f"wmma.{toks[1]}"
        rest = toks[2:]
        if toks[1] in ("load", "store"):
            allowed = ["a", "b", "c"] if toks[1] == "load" else ["d"]
            if not rest or rest[0] not in allowed:
                got = rest[0] if rest else ""
                raise _malformed(op, got, f"wmma.{toks[1]} must name its matrix ({'/'.join('.' + a for a in allowed)}), got",
                                 allowed)
            ax["matrix"] = rest[0]
            rest = rest[1:]

    types: list[str] = []
    layouts: list[str] = []
    seen: set[str] = set()

    def once(key: str, tok: str) -> None:
        if key in seen:
            raise MalformedOpcode(f"duplicate qualifier '.{tok}' in '{op}'", tok)
        seen.add(key)

    extra: list[str] = []
    _check_order(op, ax["family"], rest, vocab)
    for t in rest:
        if t in vocab["flag"]:
            once(t, t)
            ax[t] = True
        elif t in vocab["ptx_flag"]:
            once(t, t)
            extra.append(t)
        elif _SHAPE_RE.match(t):
            if t not in vocab["shape"]:
                raise _malformed(op, t, "unknown shape", vocab["shape"])
            once("shape", t)
            ax["shape"] = t
        elif t in vocab["layout"]:
            layouts.append(t)
        elif t in vocab["type"]:
            types.append(t)
        elif t in vocab["kind"]:
            once("kind", t)
            ax["kind"] = t.split("::", 1)[1]
        elif t in vocab["scale_vec"]:
            once("scale_vec", t)
            ax["scale_vec"] = t.split("::", 1)[1]
        elif t in vocab["rounding"]:
            once("rounding", t)
            ax["rounding"] = t
        elif t in vocab["bitop"]:
            once("bitop", t)
            ax["bitop"] = t
        elif t in vocab["space"]:
            once("space", t)
            ax["space"] = t
        else:
            pool = [x for vs in vocab.values() for x in vs]
            if t.startswith("kind::"):
                pool = list(vocab["kind"])
            elif t.startswith("scale_vec::"):
                pool = list(vocab["scale_vec"])
            raise _malformed(op, t, "unknown qualifier", pool)

    fam = ax["family"]
    if fam in WGMMA_FAMILIES:
        return _wgmma_form(op, ax, layouts, types, extra)
    if "shape" not in ax:
        raise MalformedOpcode(f"missing shape qualifier (e.g. '.m16n8k16') in '{op}'")
    # layouts
    if fam in ("mma", "mma.sp", "wmma.mma"):
        if len(layouts) != 2:
            raise MalformedOpcode(f"{fam} takes two layout qualifiers (.alayout.blayout), got {len(layouts)} in '{op}'")
        ax["alayout"], ax["blayout"] = layouts
    else:
        if len(layouts) != 1:
            raise MalformedOpcode(f"{fam} takes one layout qualifier (.row or .col), got {len(layouts)} in '{op}'")
        ax["layout"] = layouts[0]
    # types, by position
    if fam in ("mma", "mma.sp"):
        want = 5 if ax.get("block_scale") else 4
        if len(types) != want:
            names = ".dtype.atype.btype.ctype" + (".stype" if want == 5 else "")
            extra = "" if want == 5 or len(types) != 5 else " (a fifth type, .stype, needs .block_scale)"
            raise MalformedOpcode(f"{fam} takes {want} type qualifiers ({names}), got {len(types)} in '{op}'{extra}")
        ax["dtype"], ax["atype"], ax["btype"], ax["ctype"] = types[:4]
        if want == 5:
            ax["stype"] = types[4]
    elif fam == "wmma.mma":
        if len(types) == 2:
            ax["dtype"], ax["ctype"] = types
            ax["atype"] = ax["btype"] = "f16"   # "For wmma.mma without explicit .atype and .btype: ... implicitly set to .f16"
        elif len(types) == 4:
            ax["dtype"], ax["atype"], ax["btype"], ax["ctype"] = types
            if types[1] == types[2] == "f16":
                extra.append("f16.f16")        # the undocumented four-type f16 spelling
        else:
            raise MalformedOpcode(f"wmma.mma takes 2 (.dtype.ctype) or 4 (.dtype.atype.btype.ctype) type qualifiers, got {len(types)} in '{op}'")
    else:
        if len(types) != 1:
            raise MalformedOpcode(f"{fam} takes one type qualifier, got {len(types)} in '{op}'")
        ax[{"a": "atype", "b": "btype", "c": "ctype", "d": "dtype"}[ax["matrix"]]] = types[0]
    ax["extra"] = tuple(extra)
    return Form(**ax)


def _wgmma_form(op: str, ax: dict[str, Any], layouts: list[str], types: list[str], extra: list[str]) -> Form:
    """The rest of parse() for the wgmma instructions: layout qualifiers (which no wgmma syntax
    has; ptxas takes and ignores them, erratum E-WGMMA-LAYOUT-QUALIFIERS) make the form illegal,
    types are .dtype.atype.btype by position."""
    fam = ax["family"]
    extra = list(extra) + layouts
    if fam == "wgmma":
        if "shape" not in ax:
            raise MalformedOpcode(f"missing shape qualifier (e.g. '.m64n128k16') in '{op}'")
        if len(types) != 3:
            raise MalformedOpcode(f"wgmma.mma_async takes 3 type qualifiers (.dtype.atype.btype), got {len(types)} in '{op}'")
        ax["dtype"], ax["atype"], ax["btype"] = types
    else:
        extra += types                   # fence / commit_group / wait_group name no type
    ax["extra"] = tuple(extra)
    return Form(**ax)


def _check_order(op: str, family: str, rest: list[str], vocab: dict) -> None:
    """The qualifier-order rules ptxas enforces beyond the positional layouts and types
    (specs/spelling.toml [[order]]); the lead tokens are checked by the caller."""
    pools = dict(vocab, popc={"popc"})
    for first, second in _order_rule(family).get("before", []):
        i = [k for k, t in enumerate(rest) if t in pools[first]]
        j = [k for k, t in enumerate(rest) if t in pools[second]]
        if i and j and i[0] > j[0]:
            raise MalformedOpcode(f"'.{rest[j[0]]}' must come after '.{rest[i[0]]}' in '{op}' (ptxas rejects the "
                                  f"other order)", rest[j[0]])


# ----------------------------------------------------------------------------------
# whole instructions: operands, checked the way ptxas checks them

_MAX_EXPR_DEPTH = 64
_MAX_LITERAL = 2 ** 64

_TOKEN_RE = re.compile(r"\s*(?:(0[bB][01]+|0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)([uU]?)(?![0-9A-Za-z_.])"
                       r"|(<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%~!&|^()<>?:]))")


def const_expr(text: str, what: str = "immediate") -> int:
    """Evaluate a PTX integer constant expression (PTX ISA 4.6 "Constant Expressions"):
    decimal, hex (0x), octal (leading 0), binary (0b) literals with an optional U
    suffix; unary + - ~ !, the C binary operators, ?: and parentheses, as ptxas takes
    them for immediate operands.  Raises :class:`MalformedOpcode` for anything else
    (a register or name, a float, '08', division by zero, runaway nesting).

        >>> const_expr("0x1"), const_expr("01"), const_expr("4-3*1"), const_expr("-1"), const_expr("1U")
        (1, 1, 1, -1, 1)
    """
    src = text.strip()
    toks: list[tuple[str, Any]] = []
    pos = 0
    while pos < len(src):
        if src[pos:].strip() == "":
            break
        m = _TOKEN_RE.match(src, pos)
        if not m:
            raise MalformedOpcode(f"{what} {text.strip()!r} is not an integer constant expression")
        if m.group(1) is not None:
            lit = m.group(1)
            v = int(lit, 8) if re.fullmatch(r"0[0-7]+", lit) else int(lit, 0)
            if v >= _MAX_LITERAL:
                raise MalformedOpcode(f"{what} {text.strip()!r}: literal {lit} does not fit 64 bits")
            toks.append(("num", v))
        else:
            toks.append(("op", m.group(3)))
        pos = m.end()
    if not toks:
        raise MalformedOpcode(f"{what} is empty")
    i = 0

    def peek() -> str | None:
        return toks[i][1] if i < len(toks) and toks[i][0] == "op" else None

    def take() -> tuple[str, Any]:
        nonlocal i
        if i >= len(toks):
            raise MalformedOpcode(f"{what} {text.strip()!r} ends early")
        i += 1
        return toks[i - 1]

    binops = [("||",), ("&&",), ("|",), ("^",), ("&",), ("==", "!="), ("<", ">", "<=", ">="),
              ("<<", ">>"), ("+", "-"), ("*", "/", "%")]

    def unary(depth: int) -> int:
        if depth > _MAX_EXPR_DEPTH:
            raise MalformedOpcode(f"{what} {text.strip()[:40]!r}...: nested too deeply")
        kind, v = take()
        if kind == "num":
            return v
        if v == "(":
            x = ternary(depth + 1)
            if take() != ("op", ")"):
                raise MalformedOpcode(f"{what} {text.strip()!r}: missing ')'")
            return x
        if v in ("-", "+", "~", "!"):
            x = unary(depth + 1)
            return {"-": -x, "+": x, "~": ~x, "!": int(not x)}[v]
        raise MalformedOpcode(f"{what} {text.strip()!r}: unexpected '{v}'")

    def binary(level: int, depth: int) -> int:
        if level == len(binops):
            return unary(depth)
        x = binary(level + 1, depth)
        while peek() in binops[level]:
            op = take()[1]
            y = binary(level + 1, depth)
            if op in ("/", "%") and y == 0:
                raise MalformedOpcode(f"{what} {text.strip()!r}: division by zero")
            if op in ("<<", ">>") and not 0 <= y < 64:
                raise MalformedOpcode(f"{what} {text.strip()!r}: shift by {y}")
            x = {"||": lambda: int(bool(x) or bool(y)), "&&": lambda: int(bool(x) and bool(y)),
                 "|": lambda: x | y, "^": lambda: x ^ y, "&": lambda: x & y,
                 "==": lambda: int(x == y), "!=": lambda: int(x != y), "<": lambda: int(x < y),
                 ">": lambda: int(x > y), "<=": lambda: int(x <= y), ">=": lambda: int(x >= y),
                 "<<": lambda: x << y, ">>": lambda: x >> y, "+": lambda: x + y, "-": lambda: x - y,
                 "*": lambda: x * y,
                 "/": lambda: abs(x) // abs(y) * (1 if (x >= 0) == (y >= 0) else -1),
                 "%": lambda: abs(x) % abs(y) * (1 if x >= 0 else -1)}[op]()
        return x

    def ternary(depth: int) -> int:
        c = binary(0, depth)
        if peek() == "?":
            take()
            a = ternary(depth + 1)
            if take() != ("op", ":"):
                raise MalformedOpcode(f"{what} {text.strip()!r}: '?' without ':'")
            b = ternary(depth + 1)
            return a if c else b
        return c

    v = ternary(0)
    if i != len(toks):
        raise MalformedOpcode(f"{what} {text.strip()!r}: unexpected '{toks[i][1]}'")
    return v


_REG_RE = re.compile(r"%?[A-Za-z_$][A-Za-z0-9_$]*")
_FLOAT_IMM_RE = re.compile(r"0[fF][0-9a-fA-F]{8}|0[dD][0-9a-fA-F]{16}")


def split_operands(text: str) -> list[str]:
    """Top-level comma split of an operand list (commas inside {} and [] stay)."""
    if len(text) > 100_000:
        raise MalformedOpcode("operand list longer than 100,000 characters")
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch in "{[":
            depth += 1
            if depth > 1:
                raise MalformedOpcode(f"nested braces or brackets in operand list {_clip(text)!r}")
        elif ch in "}]":
            depth -= 1
            if depth < 0:
                raise MalformedOpcode(f"unbalanced '{ch}' in operand list {_clip(text)!r}")
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if depth:
        raise MalformedOpcode(f"unclosed '{{' or '[' in operand list {_clip(text)!r}")
    parts.append(cur.strip())
    if any(p == "" for p in parts):
        raise MalformedOpcode(f"empty operand in {_clip(text)!r}")
    return parts


def _clip(s: str, n: int = 80) -> str:
    s = " ".join(s.split())
    return s if len(s) <= n else s[:n] + "..."


def _register(x: str, what: str) -> str:
    if not _REG_RE.fullmatch(x) or x == "_":
        raise MalformedOpcode(f"{what} must be a register, got {_clip(x)!r}")
    return x


def _vector(x: str, what: str, count: int | None, dest: bool) -> list[str]:
    """A register vector {r0, ...} of exactly ``count`` elements (ptxas: 'Vector expected',
    'Illegal vector size'); the sink '_' only in a destination, float immediates only in
    a source."""
    if not (x.startswith("{") and x.endswith("}")):
        n = "registers" if count is None else f"{count} register{'s' * (count != 1)}"
        raise MalformedOpcode(f"{what} must be a vector {{...}} of {n}, got {_clip(x)!r}")
    items = [t.strip() for t in x[1:-1].split(",")]
    if any(t == "" for t in items):
        raise MalformedOpcode(f"{what}: empty element in {_clip(x)!r}")
    if count is not None and len(items) != count:
        raise MalformedOpcode(f"{what} must be a vector of {count} register{'s' * (count != 1)}, got {len(items)} in {_clip(x)!r}")
    for t in items:
        if t == "_":
            if not dest:
                raise MalformedOpcode(f"{what}: the sink '_' is only allowed in the destination")
        elif _FLOAT_IMM_RE.fullmatch(t):
            if dest:
                raise MalformedOpcode(f"{what}: an immediate {t!r} cannot be a destination")
        else:
            _register(t, f"{what} element")
    return items


def _address(x: str, what: str) -> str:
    m = re.fullmatch(r"\[\s*([^\]+\-]+?)\s*(?:([+-])\s*(.+?))?\s*\]", x)
    if not m:
        raise MalformedOpcode(f"{what} must be an address [reg], [reg+imm] or [var], got {_clip(x)!r}")
    base = m.group(1)
    if not _REG_RE.fullmatch(base):
        const_expr(base, what)
    if m.group(3) is not None:
        const_expr(m.group(2) + m.group(3), f"{what} offset")
    return x


def check_operands(form: Form, operands: str) -> dict[str, Any]:
    """Check an operand list against ``form`` the way ptxas does: operand count, the
    register-vector sizes of the form's fragments, registers where registers go, constant
    expressions where immediates go.  Returns the immediates (``sel``, ``scale_a``,
    ``scale_b``, ``stride``); raises :class:`MalformedOpcode` naming the operand.

    Register types are not checked (they are declared elsewhere in the module)."""
    parts = split_operands(operands)
    if form.is_wgmma:
        return _check_wgmma_operands(form, parts)
    try:
        ops: dict[str, Operand] | None = form.operands
    except (KeyError, ValueError):
        ops = None                       # an undocumented form: no fragment sizes to hold it to
    out: dict[str, Any] = {}
    if form.family in ("mma", "mma.sp"):
        names = ["d", "a", "b", "c"] + (["e", "f"] if form.is_sparse else [])
        if form.block_scale:
            names += ["scale-a-data", "{byte-id-a, thread-id-a}", "scale-b-data", "{byte-id-b, thread-id-b}"]
    elif form.family == "wmma.mma":
        names = ["d", "a", "b", "c"]
    elif form.family == "wmma.load":
        names = ["r", "[p]", "stride"]
    else:
        names = ["[p]", "r", "stride"]
    optional = 1 if form.family in ("wmma.load", "wmma.store") else 0
    if not len(names) - optional <= len(parts) <= len(names):
        want = f"{len(names) - optional} or {len(names)}" if optional else str(len(names))
        raise MalformedOpcode(f"{form.family} takes {want} operands ({', '.join(names)}), got {len(parts)}")
    for name, x in zip(names, parts):
        what = f"operand {name}"
        if name in ("d", "a", "b", "c", "r"):
            dest = name == "d" or (name == "r" and form.family == "wmma.load")
            if ops is None:
                _vector(x, what, None, dest)
            else:
                op = ops[name]
                _vector(x, f"{what} ({op.count} x .{op.ptx_type})", op.count, dest)
        elif name == "e" or name.startswith("scale-"):
            # a register or a one-register vector (CUTLASS writes {%14} for scale-a-data)
            _register(x[1:-1].strip() if x.startswith("{") and x.endswith("}") else x, what)
        elif name == "f":
            out["sel"] = const_expr(x, "sparsity selector f")
        elif name.startswith("{byte-id"):
            inner = x[1:-1].split(",") if x.startswith("{") and x.endswith("}") else []
            if len(inner) != 2:
                raise MalformedOpcode(f"{what} must be a pair {{imm, imm}}, got {_clip(x)!r}")
            # "unsigned 16-bit integer values": immediates (range-checked) or 16-bit
            # registers (CUTLASS 4.2 passes "h" operands; their value is not known here)
            vals = [None if _REG_RE.fullmatch(v.strip()) else const_expr(v, f"{what} element") for v in inner]
            if None not in vals:
                out["scale_a" if name.endswith("a}") else "scale_b"] = tuple(vals)
        elif name == "[p]":
            _address(x, what)
        elif name == "stride":
            if not _REG_RE.fullmatch(x):
                out["stride"] = const_expr(x, "stride")
    return out


def wgmma_operand_names(form: Form) -> list[str]:
    """The operand list of a wgmma instruction whose A source is known (9.7.15.5.2, 9.7.15.6.3,
    9.7.15.7.3): d, a | a-desc, b-desc, [sp-meta, sp-sel,] then the form's immediates."""
    if form.family == "wgmma.wait_group":
        return ["N"]
    if form.family != "wgmma":
        return []
    if form.asource is None:
        raise ValueError("the operand list of wgmma.mma_async depends on where A comes from")
    names = ["d", "a" if form.asource == "reg" else "a-desc", "b-desc"]
    if form.is_sparse:
        names += ["sp-meta", "sp-sel"]
    try:
        return names + [r.data["name"] for r in immediates(form)]
    except (ValueError, KeyError):
        return names


def asource_of(operands: str) -> str | None:
    """wgmma's A source from an operand list: a vector {...} in second place is A in
    registers, anything else (a register, an immediate) a descriptor; None if there is no
    second operand."""
    parts = split_operands(operands)
    if len(parts) < 2:
        return None
    return "reg" if parts[1].startswith("{") else "desc"


def _check_wgmma_operands(form: Form, parts: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    fam = form.family
    if fam in ("wgmma.fence", "wgmma.commit_group"):
        raise MalformedOpcode(f"{fam} takes no operands, got {len(parts)}")
    if fam == "wgmma.wait_group":
        if len(parts) != 1:
            raise MalformedOpcode(f"wgmma.wait_group takes 1 operand (N), got {len(parts)}")
        out["n"] = const_expr(parts[0], "operand N")
        return out
    if form.asource is None:
        form = form.with_asource("reg" if len(parts) > 1 and parts[1].startswith("{") else "desc")
    out["asource"] = form.asource
    names = wgmma_operand_names(form)
    if len(parts) != len(names):
        src = "in registers" if form.asource == "reg" else "from a descriptor"
        raise MalformedOpcode(f"{form.listing} with A {src} takes {len(names)} operands ({', '.join(names)}), "
                              f"got {len(parts)}")
    try:
        ops: dict[str, Operand] | None = form.operands
    except (KeyError, ValueError):
        ops = None
    for name, x in zip(names, parts):
        what = f"operand {name}"
        if name in ("d", "a"):
            if ops is None:
                _vector(x, what, None, name == "d")
            else:
                op = ops[name]
                _vector(x, f"{what} ({op.count} x .{op.ptx_type})", op.count, name == "d")
        elif name in ("a-desc", "b-desc"):
            # "The 64-bit register operands a-desc and b-desc" (ptxas also takes an integer
            # constant: erratum E-WGMMA-DESC-IMMEDIATE)
            if not _REG_RE.fullmatch(x) or x == "_":
                raise MalformedOpcode(f"{what} must be a 64-bit register (the matrix descriptor), got {_clip(x)!r} "
                                      "(ptxas also takes an integer constant: erratum E-WGMMA-DESC-IMMEDIATE)")
        elif name == "sp-meta":
            _register(x, what)
        elif name == "sp-sel":
            out["sel"] = const_expr(x, "sparsity selector sp-sel")
        elif name == "scale-d":
            y = x.strip()
            if y.startswith("!") and _REG_RE.fullmatch(y[1:].strip()):
                out["scale_d"] = "!" + y[1:].strip()
            elif _REG_RE.fullmatch(y):
                out["scale_d"] = y
            else:
                out["scale_d"] = const_expr(y, what)
        else:
            out[imm_key(name)] = const_expr(x, what)
    return out


def parse_instruction(text: str, strict: bool = True) -> tuple[Form, dict[str, Any]]:
    """Parse a whole instruction line; returns the form and the immediates found.

    With ``strict`` (default) the operands are checked like ptxas checks them
    (:func:`check_operands`) and a bad list raises :class:`MalformedOpcode`; without, the
    immediates are read where they can be and anything else is ignored.  For ``mma.sp``
    the sparsity selector ``f`` is returned as ``sel``; for ``.block_scale`` forms the
    selector pairs ``{byte-id, thread-id}`` as ``scale_a``/``scale_b``.
    """
    op, operands = split_instruction(text)
    form = parse(op)
    if not operands:
        return form, {}
    if form.is_wgmma:
        # the operand list decides where A comes from (an opcode alone leaves it open)
        if strict:
            imm = check_operands(form, operands)
            return form.with_asource(imm.pop("asource", None)), imm
        try:
            imm = check_operands(form, operands)
            return form.with_asource(imm.pop("asource", None)), imm
        except MalformedOpcode:
            pass
        try:
            src = asource_of(operands)
        except MalformedOpcode:
            return form, {}
        return form.with_asource(src) if form.family == "wgmma" else form, {}
    if strict:
        return form, check_operands(form, operands)
    out: dict[str, Any] = {}
    try:
        parts = split_operands(operands)
    except MalformedOpcode:
        return form, out
    nbase = 4
    if form.is_sparse and len(parts) > 5:
        try:
            out["sel"] = const_expr(parts[5])
        except MalformedOpcode:
            pass
        nbase = 6
    if form.block_scale and len(parts) >= nbase + 4:
        for key, idx in (("scale_a", nbase + 1), ("scale_b", nbase + 3)):
            m = re.fullmatch(r"\{\s*([^,]+)\s*,\s*([^,]+)\s*\}", parts[idx])
            try:
                if m:
                    out[key] = (const_expr(m.group(1)), const_expr(m.group(2)))
            except MalformedOpcode:
                pass
    return form, out


# ----------------------------------------------------------------------------------
# legality

@dataclass
class Reason:
    message: str
    section: str
    kind: str                 # syntax | constraint | target | ptx | selector | argument
    text: str = ""            # the ISA sentence the rule quotes

    def to_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        return f"{self.message} [PTX ISA {self.section}]"


@dataclass
class Legality:
    opcode: str
    form: Form | None
    target: str
    ptx: str
    sel: int | None
    reasons: list[Reason] = field(default_factory=list)
    matched: list[str] = field(default_factory=list)   # syntax blocks the form belongs to
    notes: list[str] = field(default_factory=list)     # e.g. a qualifier order other than the text's

    @property
    def ok(self) -> bool:
        return not self.reasons

    def __bool__(self) -> bool:
        return self.ok

    def to_dict(self) -> dict:
        return {
            "opcode": self.opcode,
            "canonical": self.form.opcode if self.form else None,
            "target": self.target,
            "ptx": self.ptx,
            "sel": self.sel,
            "legal": self.ok,
            "reasons": [r.to_dict() for r in self.reasons],
            "syntax": self.matched,
            "notes": self.notes,
            "form": self.form.axes() if self.form else None,
            "operands": {k: v.to_dict() for k, v in self.form.operands.items()} if (self.form and self.ok) else None,
        }


def _block_mismatches(form: Form, blk: SyntaxBlock) -> list[str]:
    env = form.env()
    bad: list[str] = []
    if blk.family != form.family:
        return ["family"]
    for ax in STR_AXES + BOOL_AXES:
        v = env[ax]
        if ax in blk.values:
            if v not in blk.values[ax]:
                bad.append(ax)
        else:
            if ax in BOOL_AXES:
                if v != (ax in ("sync", "aligned")):   # .sync/.aligned mandatory, flags absent
                    bad.append(ax)
            elif v != "":
                bad.append(ax)
    if form.extra:
        bad.append("extra")
    return bad


def syntax_blocks(form: Form) -> list[SyntaxBlock]:
    """The syntax blocks that document this form (empty when none does)."""
    return list(_syntax_blocks(form))


@lru_cache(maxsize=65536)
def _syntax_blocks(form: Form) -> tuple[SyntaxBlock, ...]:
    return tuple(b for b in spec().blocks if not _block_mismatches(form, b))


def _fmt_val(ax: str, v: Any) -> str:
    if ax in BOOL_AXES:
        return f".{ax}" if v else f"no .{ax}"
    if v in ("", None):
        return "(omitted)"
    if ax == "kind":
        return f".kind::{v}"
    if ax == "scale_vec":
        return f".scale_vec::{v}"
    return f".{v}"


def _syntax_reasons(form: Form) -> list[Reason]:
    return [replace(r) for r in _syntax_reasons_cached(form)]


@lru_cache(maxsize=65536)
def _syntax_reasons_cached(form: Form) -> tuple[Reason, ...]:
    cands = [b for b in spec().blocks if b.family == form.family]

    # the closest syntax blocks: fewest mismatching axes, and among those the ones that keep
    # the axes a user picks first (shape, kind, sparsity variant, matrix)
    def score(b: SyntaxBlock) -> tuple[int, int]:
        mism = _block_mismatches(form, b)
        return len(mism), sum(ax in ("shape", "kind", "sparsity", "matrix") for ax in mism)

    scored = [(score(b), b) for b in cands]
    best = min(s for s, _ in scored)
    reasons: list[Reason] = []
    seen: set[str] = set()
    env = form.env()
    for score, blk in scored:
        if score != best:
            continue
        for ax in _block_mismatches(form, blk):
            v = env.get(ax)
            if ax == "extra":
                for x in form.extra:
                    msg, sec = _extra_reason(form, x, blk)
                    if msg not in seen:
                        seen.add(msg)
                        reasons.append(Reason(msg, sec, "syntax", blk.text))
                continue
            if ax in ("sync", "aligned") and not v:
                msg = f"missing mandatory qualifier .{ax}"
            elif ax in blk.values and v in ("", None) and ax in STR_AXES:
                allowed = ", ".join(_fmt_val(ax, x) for x in blk.values[ax])
                msg = (f"{AXIS_LABEL[ax]} is missing in '{blk.group}' "
                       f"({blk.text.split(';')[0].strip()}); allowed: {allowed}")
            elif ax in blk.values:
                allowed = ", ".join(_fmt_val(ax, x) for x in blk.values[ax])
                msg = (f"{AXIS_LABEL[ax]} {_fmt_val(ax, v)} is not allowed in "
                       f"'{blk.group}' ({blk.text.split(';')[0].strip()}); allowed: {allowed}")
            else:
                msg = f"{_fmt_val(ax, v)} is not allowed in '{blk.group}' ({blk.text.split(';')[0].strip()})"
            if msg not in seen:
                seen.add(msg)
                reasons.append(Reason(msg, f"{blk.section} (Syntax)", "syntax", blk.text))
    return tuple(reasons)


def _extra_reason(form: Form, x: str, blk: SyntaxBlock) -> tuple[str, str]:
    if x == "f16.f16":
        d = load_spec("spelling")["wmma_f16_types"]
        return d["message"].format(dtype=form.dtype, ctype=form.ctype), d["section"]
    return (f"qualifier .{x} is a PTX qualifier, but no {form.family} syntax allows it "
            f"('{blk.group}': {blk.text.split(';')[0].strip()})", f"{blk.section} (Syntax)")


@lru_cache(maxsize=None)
def _formula(src: str) -> Formula:
    return Formula(src)


def _constraint_reasons(form: Form) -> list[Reason]:
    return [replace(r) for r in _constraint_reasons_cached(form)]


@lru_cache(maxsize=65536)
def _constraint_reasons_cached(form: Form) -> tuple[Reason, ...]:
    env = form.env()
    out = []
    for r in spec().rules_of(form.family, "constraint"):
        if r.applies(env) and not bool(_formula(r.data["require"]).eval(env)):
            out.append(Reason(r.data["message"].format(**env), r.section, "constraint", r.data.get("text", "")))
    return tuple(out)


def _family_members(fam: str) -> list[int]:
    return list(load_spec("targets")["families"].get(fam, []))


def _target_ok(r: dict, t: Target, ptx: str) -> tuple[bool, str]:
    """Whether target t satisfies requirement r's target part; the message if not."""
    if "sm" in r:
        n = int(r["sm"])
        return t.number >= n, f"requires sm_{n} or higher"
    if "targets" in r:
        ts = list(r["targets"])
        return t.name in ts, f"requires one of {', '.join(ts)}"
    if "arch" in r:
        arch = r["arch"]
        if t.name == arch:
            return True, ""
        fam, fptx = r.get("family"), r.get("family_ptx")
        arch_n = int(re.match(r"sm_(\d+)", arch).group(1))
        members = _family_members(fam) if fam else []
        in_family = (t.suffix in ("a", "f") and t.number in members and arch_n in members
                     and members.index(t.number) >= members.index(arch_n))
        if in_family and fptx and _pv(ptx) >= _pv(fptx):
            return True, ""
        fam_targets = [f"sm_{n}{s}" for n in members[members.index(arch_n):] for s in ("f", "a")
                       if f"sm_{n}{s}" != arch] if fam and arch_n in members else []
        msg = f"requires {arch}"
        if fam_targets and fptx:
            msg += f", or from PTX ISA {fptx} a {fam} family target ({', '.join(fam_targets)})"
        if in_family:
            msg += f"; on {t.name} it needs PTX ISA {fptx} or later"
        return False, msg
    return True, ""


def _requirement_reasons(form: Form, t: Target, ptx: str) -> list[Reason]:
    env = form.env()
    out: list[Reason] = []
    seen: set[str] = set()

    def add(msg: str, sec: str, kind: str, text: str) -> None:
        if msg not in seen:
            seen.add(msg)
            out.append(Reason(msg, sec, kind, text))

    for r in spec().rules_of(form.family, "require"):
        if not r.applies(env):
            continue
        d = r.data
        ok, msg = _target_ok(d, t, ptx)
        if not ok:
            add(msg, r.section, "target", d.get("text", ""))
        if "ptx" in d and _pv(ptx) < _pv(d["ptx"]):
            add(d.get("message", "requires PTX ISA {ptx} or later").format(ptx=d["ptx"]), r.section, "ptx",
                d.get("text", ""))
        if "ptx_max" in d and _pv(ptx) > _pv(d["ptx_max"]):
            add(d.get("message", "not allowed after PTX ISA {ptx_max}").format(ptx_max=d["ptx_max"]), r.section,
                "ptx", d.get("text", ""))
    if _pv(ptx) < _pv(t.ptx):
        add(f"target {t.name} requires PTX ISA {t.ptx} or later", "11.1.2 (.target, PTX ISA Notes)", "ptx",
            f"Target string {t.name} introduced in PTX ISA version {t.ptx}.")
    removed = load_spec("targets")["targets"][t.name].get("removed_in")
    if removed and _pv(ptx) >= _pv(removed):
        new = load_spec("targets")["targets"][t.name]["renamed"]
        add(f"target {t.name} is renamed {new} from PTX ISA {removed}", "11.1.2 (.target, Notes)", "ptx",
            f"Targets sm_{{101,101f,101a}} are renamed to targets sm_{{110,110f,110a}} from PTX ISA version {removed}.")
    return out


def _selector_rule(form: Form) -> Rule | None:
    env = form.env()
    for r in spec().rules_of("wgmma" if form.family == "wgmma" else "mma.sp", "selector"):
        if r.applies(env):
            return r
    return None


def _selector_reasons(form: Form, sel: int | None, scale_a, scale_b) -> list[Reason]:
    out: list[Reason] = []
    if sel is not None:
        if not form.is_sparse:
            if form.is_wgmma:
                out.append(Reason(f"a sparsity selector ({sel}) is only an operand of wgmma.mma_async.sp",
                                  "9.7.15.6.3", "argument"))
            else:
                out.append(Reason(f"a sparsity selector ({sel}) is only an operand of mma.sp", "9.7.14.6.3", "argument"))
        else:
            r = _selector_rule(form)
            vals = list(r.data["values"]) if r else [0, 1, 2, 3]
            if sel not in vals:
                allowed = ", ".join(map(str, vals))
                msg = f"sparsity selector {sel} is out of range for {form.shape} (allowed {allowed})"
                if r and r.data.get("note_when") and _formula(r.data["note_when"]).eval(form.env()):
                    msg += f"; {r.data['note']}"
                if form.is_wgmma and 0 <= sel <= 3:
                    msg += ("; the operand description says 'values in the range 0..3', the table does not "
                            "(erratum E-WGMMA-SPSEL-RANGE)")
                out.append(Reason(msg, r.section if r else "9.7.14.6.1", "selector", r.data.get("text", "") if r else ""))
    for name, pair in (("a", scale_a), ("b", scale_b)):
        if pair is None:
            continue
        if not form.block_scale:
            out.append(Reason(f"scale selectors are only operands of .block_scale forms", "9.7.14.3", "argument"))
            continue
        tab = spec().scale_selectors.get(form.scale_vec_effective or "", {})
        byte_id, thread_id = pair
        for comp, val in ((f"byte-id-{name}", byte_id), (f"thread-id-{name}", thread_id)):
            allowed = tab.get(comp.replace("-", "_"), [])
            if val not in allowed:
                out.append(Reason(f"{comp} {val} is not valid for .scale_vec::{form.scale_vec_effective} "
                                  f"(allowed {', '.join(map(str, allowed))}); undefined behaviour",
                                  "9.7.14.3 (Table 37)", "selector"))
    return out


def legality(opcode: str | Form, target: str = "sm_90", ptx: str | float = "9.0", sel: int | None = None,
             scale_a: tuple[int, int] | None = None, scale_b: tuple[int, int] | None = None,
             imm: dict[str, Any] | None = None) -> Legality:
    """Decide whether ``opcode`` is legal on ``target`` with PTX ISA ``ptx``.

    Raises :class:`MalformedOpcode` / :class:`BadArgument` for input that is not an
    instruction spelling or an unknown target/version; otherwise returns a
    :class:`Legality` whose ``.ok`` is the verdict and ``.reasons`` every reason.

    ``imm`` holds wgmma's immediate operands as :func:`parse_instruction` returns them
    (``scale_d``, ``imm_scale_a``, ``imm_scale_b``, ``imm_trans_a``, ``imm_trans_b``; ``n`` of
    wgmma.wait_group).  A wgmma form whose A source is not stated (an opcode alone) is decided
    for both sources: legal when legal with both, else every reason labelled with its source.
    """
    form = opcode if isinstance(opcode, Form) else parse(opcode)
    t = parse_target(target)
    p = check_ptx(ptx)
    res = Legality(opcode if isinstance(opcode, str) else form.opcode, form, t.name, p, sel)
    if form.family == "wgmma" and form.asource is None:
        per = {src: _reasons(form.with_asource(src), t, p, sel, scale_a, scale_b, imm) for src in A_SOURCES}
        res.matched = sorted({b.id for src in A_SOURCES for b in syntax_blocks(form.with_asource(src))})
        common = [r for r in per["desc"] if any(r.message == q.message for q in per["reg"])]
        res.reasons += common
        for src, label in (("desc", "with A from a descriptor"), ("reg", "with A in registers")):
            for r in per[src]:
                if not any(r.message == q.message for q in common):
                    res.reasons.append(replace(r, message=f"{r.message} ({label})"))
    else:
        res.matched = [b.id for b in syntax_blocks(form)]
        res.reasons += _reasons(form, t, p, sel, scale_a, scale_b, imm)
    if isinstance(opcode, str):
        res.notes += order_notes(split_instruction(opcode)[0], form)
    return res


def _reasons(form: Form, t: Target, p: str, sel, scale_a, scale_b, imm) -> list[Reason]:
    out: list[Reason] = []
    if not syntax_blocks(form):
        out += _syntax_reasons(form)
    else:
        out += _constraint_reasons(form)
        out += _requirement_reasons(form, t, p)
    out += _selector_reasons(form, sel, scale_a, scale_b)
    if imm and form.is_wgmma:          # mma's immediates (selectors) are checked above; wmma's stride is free
        out += _immediate_reasons(form, imm)
    return out


def immediates(form: Form) -> list[Rule]:
    """The immediate operands of a wgmma form, in operand order ([[immediate]] of
    specs/wgmma.toml); the A source must be known when it matters (imm-trans-a)."""
    env = form.env()
    return [r for r in spec().rules_of(form.family, "immediate") if r.applies(env)]


def imm_key(name: str) -> str:
    """'imm-scale-a' -> 'imm_scale_a' (the key of parse_instruction's immediates)."""
    return name.replace("-", "_").lower()


def _immediate_reasons(form: Form, imm: dict[str, Any]) -> list[Reason]:
    out: list[Reason] = []
    rules = {imm_key(r.data["name"]): r for r in immediates(form)}
    for key, val in imm.items():
        if key in ("sel", "scale_a", "scale_b", "asource"):
            continue
        r = rules.get(key)
        if r is None:
            out.append(Reason(f"{key.replace('_', '-')} is not an operand of {form.opcode}"
                              + (f" with A {'from a descriptor' if form.asource == 'desc' else 'in registers'}"
                                 if form.asource else ""), spec_section(form), "argument"))
            continue
        if isinstance(val, str):          # a predicate register (scale-d): any value at run time
            if not r.data.get("predicate"):
                out.append(Reason(f"{r.data['name']} must be an integer constant, got {val!r}", r.section, "argument",
                                  r.data.get("text", "")))
            continue
        if "values" in r.data and val not in r.data["values"]:
            allowed = ", ".join(map(str, r.data["values"]))
            out.append(Reason(f"{r.data['name']} {val} is not a valid value (allowed {allowed})", r.section,
                              "immediate", r.data.get("text", "")))
        if "min" in r.data and val < r.data["min"]:
            out.append(Reason(f"{r.data['name']} {val} is not a valid value (a non-negative integer constant)",
                              r.section, "immediate", r.data.get("text", "")))
    return out


def spec_section(form: Form) -> str:
    """The instruction's own PTX ISA section."""
    blocks = [b for b in spec().blocks if b.family == form.family]
    if form.family == "wgmma" and form.sparsity:
        return "9.7.15.6.3"
    return blocks[0].section if blocks else ""


def order_notes(op: str, form: Form) -> list[str]:
    """A spelling whose qualifiers are the canonical ones in another order: ptxas accepts
    it (specs/spelling.toml), the text writes only its own order (erratum E-QUALIFIER-ORDER)."""
    got, canon = op.split("."), form.opcode.split(".")
    if got == canon or sorted(got) != sorted(canon):
        return []
    return [f"qualifier order differs from the text's ({form.opcode}); ptxas accepts this order "
            f"[erratum E-QUALIFIER-ORDER]"]


def is_documented(form: Form) -> bool:
    """In some syntax block and satisfying every prose constraint (ignoring targets); a wgmma
    opcode whose A source is open is documented when it is with both sources."""
    if form.family == "wgmma" and form.asource is None:
        return all(is_documented(form.with_asource(s)) for s in A_SOURCES)
    return bool(syntax_blocks(form)) and not _constraint_reasons(form)


# ----------------------------------------------------------------------------------
# enumeration

def _block_forms(blk: SyntaxBlock) -> Iterator[Form]:
    axes = list(blk.values)
    for combo in itertools.product(*(blk.values[a] for a in axes)):
        kw: dict[str, Any] = {"family": blk.family}
        for a, v in zip(axes, combo):
            kw[a] = (None if v == "" else v) if a in STR_AXES else bool(v)
        yield Form(**kw)


@lru_cache(maxsize=1)
def documented_forms() -> tuple[Form, ...]:
    """Every form the text documents, for any target (deduplicated, spec order)."""
    seen: dict[Form, None] = {}
    for blk in spec().blocks:
        for f in _block_forms(blk):
            if f not in seen and not _constraint_reasons(f):
                seen[f] = None
    return tuple(seen)


def _family_match(form: Form, family: str | None) -> bool:
    if family in (None, "", "all"):
        return True
    fam = family.strip()
    if fam == "wgmma":
        return form.is_wgmma
    if fam in ("wgmma.mma_async", "wgmma.mma_async.sp"):
        return form.listing == fam
    if fam in ("sp", "sparse"):
        fam = "mma.sp"
    if fam == "wmma":
        return form.is_wmma
    if fam in ("mma.sp::ordered_metadata", "mma.sp.ordered_metadata"):
        return form.sparsity == "sp::ordered_metadata"
    if fam == "mma.sp.sp" or fam == "mma.sp-plain":
        return form.sparsity == "sp"
    return form.family == fam


def check_family(family: str | None) -> None:
    ok = {None, "", "all", "sp", "sparse", "wmma", "mma.sp::ordered_metadata", "wgmma.mma_async", "wgmma.mma_async.sp",
          *FAMILIES}
    if family not in ok:
        close = difflib.get_close_matches(str(family), [x for x in ok if x], n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise BadArgument(f"unknown family {family!r}{hint}; known: mma, mma.sp, mma.sp::ordered_metadata, wmma, "
                          "wmma.load, wmma.store, wmma.mma, wgmma, wgmma.mma_async, wgmma.mma_async.sp, wgmma.fence, "
                          "wgmma.commit_group, wgmma.wait_group")


def forms(target: str | None = None, ptx: str | float | None = None, family: str | None = None) -> list[Form]:
    """Every documented form legal on ``target`` with PTX ``ptx`` (either may be None = any)."""
    check_family(family)
    out = [f for f in documented_forms() if _family_match(f, family)]
    if target is None and ptx is None:
        return out
    t = parse_target(target or "sm_121a")
    p = check_ptx(ptx) if ptx is not None else load_spec("targets")["ptx"]["versions"][-1]
    if target is None:
        # any target: keep forms legal on at least one target at this PTX version
        ts = [parse_target(n) for n in all_targets()]
        return [f for f in out if any(not _requirement_reasons(f, tt, p) for tt in ts)]
    return [f for f in out if not _requirement_reasons(f, t, p)]


# ----------------------------------------------------------------------------------
# operands (register counts and types)

def _format(name: str) -> dict:
    return load_spec("formats")[name]


def element_container(t: str, kind: str | None) -> tuple[int, int]:
    """(container bits, shift) of one element of type t under .kind."""
    conts = load_spec("formats").get("containers", {})
    if kind and f"kind::{kind}" in conts and t in conts[f"kind::{kind}"]:
        c = conts[f"kind::{kind}"][t]
        return int(c["container"]), int(c.get("shift", 0))
    return int(_format(t)["container"]), 0


def _ptx_reg_type(t: str, bits: int) -> str:
    if t == "f16":
        return "f16x2"
    return {"f32": "f32", "s32": "s32", "f64": "f64"}.get(t, "b64" if bits == 64 else "b32")


def products_per_warp(form: Form) -> int:
    env = form.env()
    for r in spec().rules_of(form.family if form.family in ("mma", "mma.sp") else "mma", "products"):
        if form.family in ("mma", "mma.sp") and r.applies(env):
            return int(r.data["count"])
    return 1


def _mma_operand(form: Form, name: str, rows: int, cols: int, t: str, threads: int = 32) -> Operand:
    lanes = threads // products_per_warp(form)
    elems = rows * cols // lanes
    cbits, shift = element_container(t, form.kind)
    reg_bits = 64 if t == "f64" else 32
    total = elems * cbits
    if total % reg_bits:
        raise ValueError(f"{form.opcode}: operand {name} holds {total} bits per lane, not a whole number of registers")
    return Operand(name, total // reg_bits, reg_bits, _ptx_reg_type(t, reg_bits), t,
                   reg_bits // cbits, cbits, shift)


def operands_of(form: Form) -> list[Operand]:
    return list(_operands_cached(form))


@lru_cache(maxsize=65536)
def _operands_cached(form: Form) -> tuple[Operand, ...]:
    # a pure function of the (frozen) form and the spec; the sweeps ask again for the same parents
    return tuple(_operands(form))


# wgmma: a 64-bit shared-memory matrix descriptor (9.7.15.5.1.2.2) is one .b64 register
def _descriptor(name: str) -> Operand:
    return Operand(name, 1, 64, "b64", None, 1, 64)


def _operands(form: Form) -> list[Operand]:
    if form.family == "wgmma":
        # 9.7.15.5.1.1 / 9.7.15.6.2: the 128 threads of the warpgroup share each fragment; A in
        # registers is the M x K (sparse: M x K/2) matrix, D the M x N accumulator
        m, n, k = form.mnk
        ka = k // 2 if form.is_sparse else k
        ops = [_mma_operand(form, "d", m, n, form.dtype, threads=128)]
        if form.asource in (None, "reg"):
            ops.append(_mma_operand(form, "a", m, ka, form.atype, threads=128))
        if form.asource in (None, "desc"):
            ops.append(_descriptor("a_desc"))
        ops.append(_descriptor("b_desc"))
        if form.is_sparse:
            ops.append(Operand("e", 1, 32, "b32", None, 1, 32))      # sp-meta
        return ops
    if form.family in WGMMA_FAMILIES:
        return []
    if form.family in ("mma", "mma.sp"):
        m, n, k = form.mnk
        ka = k // 2 if form.is_sparse else k
        ops = [_mma_operand(form, "a", m, ka, form.atype), _mma_operand(form, "b", k, n, form.btype),
               _mma_operand(form, "c", m, n, form.ctype), _mma_operand(form, "d", m, n, form.dtype)]
        if form.is_sparse:
            ops.append(Operand("e", 1, 32, "b32", None, 1, 32))
        if form.block_scale:
            ops.append(Operand("scale_a", 1, 32, "b32", form.stype, 4, 8))
            ops.append(Operand("scale_b", 1, 32, "b32", form.stype, 4, 8))
        return ops
    # wmma: register counts are tabulated in specs/wmma.toml (fragments are opaque)
    def frag(name: str, matrix: str, t: str) -> Operand:
        return Operand(name, *_wmma_fragment(form.family, form.shape, matrix, t))

    if form.family == "wmma.load":
        t = {"a": form.atype, "b": form.btype, "c": form.ctype}[form.matrix]
        return [frag("r", form.matrix, t)]
    if form.family == "wmma.store":
        return [frag("r", "c", form.dtype)]
    return [frag("a", "a", form.atype), frag("b", "b", form.btype), frag("c", "c", form.ctype),
            frag("d", "c", form.dtype)]


@lru_cache(maxsize=4096)
def _wmma_fragment(family: str, shape: str, matrix: str, t: str) -> tuple:
    """The fragment operand's fields after its name (cached: the same few dozen are asked for
    by every form of a sweep)."""
    env = {"type": t, "matrix": matrix, "shape": shape}
    for r in spec().rules_of(family, "fragment"):
        if r.applies(env):
            regs = r.data["regs"]
            regs = int(Formula(regs).eval(env)) if isinstance(regs, str) else int(regs)
            ptype = r.data["ptx_type"]
            reg_bits = 64 if ptype == "f64" else 32
            cbits, shift = element_container(t, None)
            return (regs, reg_bits, ptype, t, max(1, reg_bits // cbits), cbits, shift)
    raise ValueError(f"no wmma fragment entry for type {t} matrix {matrix} shape {shape}")


def default_stride(form: Form) -> int | None:
    """wmma.load/.store default stride in elements (9.7.14.4.2)."""
    if form.family not in ("wmma.load", "wmma.store"):
        return None
    mat = "c" if form.matrix in ("c", "d") else form.matrix
    return int(spec().default_stride[form.shape][f"{mat}_{form.layout}"])


def describe(form: Form) -> dict[str, Any]:
    """A JSON-able description: axes, operands, selectors."""
    d = {"opcode": form.opcode, "axes": form.axes(),
         "operands": {k: v.to_dict() for k, v in form.operands.items()}}
    if form.is_sparse:
        d["selectors"] = list(form.selectors or ())
    if form.block_scale:
        d["scale_selectors"] = spec().scale_selectors.get(form.scale_vec_effective or "", {})
    return d


def requirements(form: Form) -> list[dict]:
    """The target/PTX requirements that apply to a form (for explain/listing)."""
    env = form.env()
    return [dict(r.data, section=r.section) for r in spec().rules_of(form.family, "require") if r.applies(env)]


def min_ptx(form: Form) -> str:
    vs = [r["ptx"] for r in requirements(form) if "ptx" in r]
    return max(vs, key=_pv) if vs else "6.0"
