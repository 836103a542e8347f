"""``kernel lint``: is every matrix instruction of a module legal on its ``.target`` at its ``.version``?

mma / mma.sp / wmma: the catalog's legality (:func:`formal.catalog.legality`).
ldmatrix / stmatrix / movmatrix: the form must exist in ``specs/movement.toml`` and its
``requires`` (minimum target and PTX ISA version, arch-specific targets; checked against
ptxas 13.0 for the sm_75/sm_90 forms) must hold.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .ptx import Module, Unsupported


@dataclass
class Finding:
    line: int
    instruction: str
    legal: bool
    reasons: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"line": self.line, "instruction": self.instruction, "legal": self.legal, "reasons": self.reasons}

_MATRIX_MOVES = ("ldmatrix", "stmatrix", "movmatrix")
_OUT_OF_SCOPE = ("wgmma", "tcgen05")


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
    for ins in mod.instructions():
        h = ins.head
        if h in _OUT_OF_SCOPE:
            raise Unsupported(ins.line, ins.text, f"{h} is outside the catalog (warpgroup / tensor-memory MMA)")
        if h in ("mma", "wmma"):
            if tgt is None:
                out.append(Finding(ins.line, ins.text, False, [bad_target]))
                continue
            try:
                res = catalog.legality(ins.form, tgt.name, mod.version, sel=ins.imm.get("sel"),
                                       scale_a=ins.imm.get("scale_a"), scale_b=ins.imm.get("scale_b"))
            except catalog.BadArgument as e:
                out.append(Finding(ins.line, ins.text, False, [str(e)]))
                continue
            out.append(Finding(ins.line, ins.text, res.ok, [str(r) for r in res.reasons]))
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
