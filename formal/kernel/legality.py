"""``kernel lint``: is every matrix instruction of a module legal on its ``.target`` at its ``.version``?

mma / mma.sp / wmma: the catalog's legality (:func:`formal.catalog.legality`), and the
declared type of every fragment register (:func:`register_types`, from
``specs/operand_registers.toml``: what ptxas accepts, swept by
``tools/sweep_operand_registers.py``).
ldmatrix / stmatrix / movmatrix: the form must exist in ``specs/movement.toml`` and its
``requires`` (minimum target and PTX ISA version, arch-specific targets; checked against
ptxas 13.0 for the sm_75/sm_90 forms) must hold.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .parse import Module, Unsupported


@dataclass
class Finding:
    line: int
    instruction: str
    legal: bool
    reasons: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)   # legal (ptxas accepts), but outside the ISA text

    def to_json(self) -> dict:
        return {"line": self.line, "instruction": self.instruction, "legal": self.legal, "reasons": self.reasons,
                "warnings": self.warnings}

_MATRIX_MOVES = ("ldmatrix", "stmatrix", "movmatrix")
_OUT_OF_SCOPE = ("tcgen05",)


def _ver(v: str) -> tuple[int, int]:
    a, _, b = v.partition(".")
    return int(a), int(b or 0)


def lint_module(mod: Module) -> list:
    from .. import catalog
    out = []
    target = mod.target
    try:
        tgt = catalog.parse_target(target)
    except catalog.BadArgument as e:
        tgt = None
        bad_target = str(e)
    seen = set()
    for fn, ins in ((fn, ins) for fn in mod.functions.values() for ins in fn.instrs):
        if (ins.line, ins.text) in seen:          # a .func body inlined at a call site: linted once
            continue
        seen.add((ins.line, ins.text))
        h = ins.head
        if h in _OUT_OF_SCOPE:
            raise Unsupported(ins.line, ins.text, f"{h} is outside the catalog (tensor-memory MMA)")
        if h in ("mma", "wmma", "wgmma"):
            if tgt is None:
                out.append(Finding(ins.line, ins.text, False, [bad_target]))
                continue
            try:
                if h == "wgmma":       # the A source is the operand list's (parse_instruction decided it)
                    imm = {k: v for k, v in ins.imm.items() if k != "sel" and not isinstance(v, str)}
                    res = catalog.legality(ins.form, tgt.name, mod.version, sel=ins.imm.get("sel"), imm=imm)
                else:
                    res = catalog.legality(ins.form, tgt.name, mod.version, sel=ins.imm.get("sel"),
                                           scale_a=ins.imm.get("scale_a"), scale_b=ins.imm.get("scale_b"))
            except catalog.BadArgument as e:
                out.append(Finding(ins.line, ins.text, False, [str(e)]))
                continue
            bad, warn = register_types(ins, fn)
            reasons = [str(r) for r in res.reasons] + bad
            out.append(Finding(ins.line, ins.text, res.ok and not bad, reasons, warn))
        elif h in _MATRIX_MOVES:
            out.append(_move_finding(ins, tgt, mod.version, target))
    return out


def _move_finding(ins, tgt, version, target):
    from ..transform.spaces import TransformError
    from ..transform.steps import make_step
    try:
        st = make_step(ins.text.replace("%", ""))
    except TransformError as e:
        return Finding(ins.line, ins.text, False, [f"not a documented form: {e}"])
    req = st.entry.get("requires", {}) if hasattr(st, "entry") else {}
    reasons = []
    if tgt is None:
        return Finding(ins.line, ins.text, False, [f"unknown target {target!r}"])
    sec = st.section
    if req.get("arch_specific"):
        if tgt.number < req["min_sm"] or tgt.suffix not in ("a", "f"):
            reasons.append(f"{st.entry['id']} needs an architecture-specific target sm_{req['min_sm']}a or later "
                           f"(family targets included), not {tgt.name} ({sec})")
    elif tgt.number < req.get("min_sm", 0):
        reasons.append(f"{st.entry['id']} requires sm_{req['min_sm']} or higher, the module targets {tgt.name} ({sec})")
    mp = req.get("min_ptx")
    if mp and _ver(version) < _ver(mp):
        reasons.append(f"{st.entry['id']} requires PTX ISA {mp} or later, the module is .version {version} ({sec})")
    return Finding(ins.line, ins.text, not reasons, reasons)


# ---------------------------------------------------------------------------------------
# fragment register types (the module's .reg declarations; `ptx-formal check` sees none)

def _operand_vectors(ins) -> dict:
    """{catalog operand name: Vec} of an mma / wmma instruction."""
    from .parse import Vec
    fam = ins.form.family
    if fam == "wgmma":
        from ..catalog import wgmma_operand_names
        names = tuple(wgmma_operand_names(ins.form))
    elif fam.startswith("wgmma"):
        return {}
    elif fam in ("mma", "mma.sp", "wmma.mma"):
        names = ("d", "a", "b", "c")
    elif fam == "wmma.load":
        names = ("r",)
    else:
        names = (None, "r")
    return {n: o for n, o in zip(names, ins.ops) if n and isinstance(o, Vec)}


def _table_key(form, name: str) -> str:
    if form.family == "wmma.load":
        return form.matrix
    return "d" if form.family == "wmma.store" else name


def _text_types(ptx_type: str, bits: int) -> set:
    """Register types the ISA text allows for a fragment of ``ptx_type``: that type, the
    bit-size type of its width (compatible with every type of that size), and for an
    integer or bit-size fragment every integer / every type of that width."""
    from .parse import _TYPE_BITS
    same = {t for t, b in _TYPE_BITS.items() if b == bits}
    if ptx_type.startswith("b"):
        return same
    ints = {t for t in same if t[0] in "bsu"}
    return ints if ptx_type[0] in "su" else {ptx_type, f"b{bits}"}


def register_types(ins, fn) -> tuple[list[str], list[str]]:
    """(reasons, warnings) for the declared types of an mma / wmma instruction's fragment
    registers: a type ptxas rejects for that operand is a reason (illegal); one ptxas accepts
    although the ISA's fragment type differs is a warning."""
    from ..specdata import load_spec
    from .parse import _TYPE_BITS, Reg
    try:
        ops = ins.form.operands
    except (KeyError, ValueError):
        return [], []
    table = load_spec("operand_registers")["accepted"].get(ins.form.family, {})
    reasons, warnings = [], []
    for name, vec in _operand_vectors(ins).items():
        op = ops.get(name)
        if op is None:
            continue
        key = _table_key(ins.form, name)
        accepted = table.get(key, {}).get(op.etype)
        by_type: dict[str, list[str]] = {}          # declared type -> registers (one message each)
        for r in vec.items:
            t = fn.reg_types.get(r.name) if isinstance(r, Reg) else None
            if t is not None:
                by_type.setdefault(t, []).append(r.name)
        for t, regs in by_type.items():
            what = (f"operand {key} ({op.count} x .{op.ptx_type}, .{op.etype} elements): {', '.join(regs)} "
                    f"{'is' if len(regs) == 1 else 'are'} declared .{t}")
            if accepted is None:
                if _TYPE_BITS.get(t) != op.reg_bits:     # a form the sweep did not reach: its width at least
                    reasons.append(f"{what}, a {_TYPE_BITS.get(t)}-bit register where a {op.reg_bits}-bit one goes")
            elif t not in accepted:
                reasons.append(f"{what}; ptxas accepts .{', .'.join(accepted)} here "
                               f"(specs/operand_registers.toml)")
            elif t not in _text_types(op.ptx_type, op.reg_bits):
                warnings.append(f"{what}; ptxas accepts it, the PTX ISA names .{op.ptx_type} registers")
    return reasons, warnings
