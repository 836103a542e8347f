"""Is one lane's 32-bit metadata word legal?  Which chunk, which bits, which rule if not.

Example::

    >>> r = check_word("mma.sp::ordered_metadata.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", 0, 0x44444441)
    >>> r.valid, r.errors[0]["bits"], r.errors[0]["rules"][0]["id"]
    (False, [3, 0], 'increasing')
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..catalog import BadArgument, Form
from .spec import FormMeta, meta, readings


@dataclass
class CheckResult:
    opcode: str
    sel: int
    lane: int
    word: int
    valid: bool
    contributes: bool             # is this lane's e read under sel?
    selector_legal: bool
    nibbles: list[dict] = field(default_factory=list)   # every nibble the hardware reads
    notes: list[str] = field(default_factory=list)

    @property
    def errors(self) -> list[dict]:
        return [n for n in self.nibbles if not n["ok"]]

    def to_dict(self) -> dict:
        d = asdict(self)
        d["word"] = f"0x{self.word:08x}"
        return d

    def text(self) -> str:
        head = f"{self.opcode}  sel={self.sel}  lane {self.lane}  e=0x{self.word:08x}"
        lines = [head, f"  {'VALID' if self.valid else 'INVALID'}"]
        lines += [f"  {n}" for n in self.notes]
        for n in self.nibbles:
            hi, lo = n["bits"]
            loc = f"bits [{hi}:{lo}] = 0b{n['value']:04b} -> row {n['row']}, columns {n['cols'][0]}..{n['cols'][1]}"
            if n["ok"]:
                lines.append(f"    ok   {loc}: stored elements at columns {n['columns']}")
            else:
                for r in n["rules"]:
                    lines.append(f"    BAD  {loc}: {r['message']}  [rule {r['id']}, PTX ISA {r['section']}]")
        return "\n".join(lines)


def check_word(form: Form | str | FormMeta, sel: int, word: int, lane: int | None = None) -> CheckResult:
    """Check ``word`` as the e register of ``lane`` (default: the first lane read under ``sel``)."""
    fm = form if isinstance(form, FormMeta) else meta(form)
    if not isinstance(word, int) or not 0 <= word < 1 << 32:
        raise BadArgument(f"metadata word must be a 32-bit unsigned integer, got {word!r}")
    if lane is not None and not 0 <= lane < 32:
        raise BadArgument(f"lane must be in 0..31, got {lane}")
    sel_ok = sel in fm.selectors
    if not sel_ok:
        lane = 0 if lane is None else lane
        res = CheckResult(fm.form.opcode, sel, lane, word, False, False, False)
        rd = "; ".join(f"{r.id}: {r.text}" for r in readings("selector"))
        res.notes.append(f"selector {sel} is not legal for this form (legal: {list(fm.selectors)}); "
                         f"PTX ISA 9.7.14.6.1: any other value results in undefined behavior "
                         f"(readings an implementation could adopt -- {rd})")
        return res
    tab = fm.e_table(sel)
    if lane is None:
        lane = int(tab[0, 0])
    rows = tab[tab[:, 0] == lane]
    res = CheckResult(fm.form.opcode, sel, lane, word, True, bool(len(rows)), True)
    if not len(rows):
        readers = sorted({int(x) for x in tab[:, 0] if x // 4 == lane // 4})
        res.notes.append(f"lane {lane} does not contribute metadata under sel={sel}: its e is ignored "
                         f"(this group's metadata comes from lanes {readers}; {fm.layout.figure}, "
                         f"PTX ISA {fm.layout.section})")
        return res
    w = fm.gran.width
    for _lane, n, row, ch, lo in rows:
        v = (word >> int(lo)) & 0xF
        broken = fm.broken_rules(v)
        ent = {"nibble": int(n), "bits": [int(lo) + 3, int(lo)], "value": v, "row": int(row), "chunk": int(ch),
               "cols": [int(ch) * w, int(ch) * w + w - 1], "ok": not broken,
               "rules": [{"id": r.id, "message": r.describe(v), "section": r.section, "text": r.text} for r in broken]}
        if not broken:
            ent["columns"] = [int(ch) * w + o for o in fm.offsets(v)]
        res.nibbles.append(ent)
    res.valid = not res.errors
    covered = 0
    for _lane, _n, _r, _c, lo in rows:
        covered |= 0xF << int(lo)
    if word & ~covered & 0xFFFFFFFF:
        res.notes.append(f"bits 0x{word & ~covered & 0xFFFFFFFF:08x} are not read by the hardware")
    return res
