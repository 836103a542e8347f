"""Every example instruction quoted in the PTX ISA seeds parses, prints back canonically,
has the register counts the example writes, and is legal on its documented target.

The examples are extracted from the seed texts by a small parser (not hand-picked): an
opcode ``mma...``/``wmma...`` immediately followed by an operand list that starts with a
register vector ``{%Rd0, ...`` / ``{x0, ...`` or an address ``[ptr]``, up to the ``;``.
Syntax lines (``d, a, b, c``, ``{.satfinite}``, ``{.ss}``) are not matched.
"""

from __future__ import annotations

import glob
import os
import re
from collections import Counter

import pytest

from formal import catalog as cat
from formal import legality, parse, parse_instruction
from formal.catalog.examples import _vectors

SEEDS = os.environ.get("PTX_FORMAL_SEEDS", os.path.join(os.path.dirname(__file__), "..", "..", "shared", "seeds"))
SEED_FILES = sorted(glob.glob(os.path.join(SEEDS, "*.txt")))

# opcode, then an operand list starting with a register vector or an address, up to ';'
_EXAMPLE = re.compile(r"(?<![\w.])(w?mma(?:\.[A-Za-z0-9_:]+)+)\s*((?:\{\s*[%A-Za-z]|\[)[^;]*);", re.S)


def extract_examples(text: str) -> list[str]:
    """Whole example instructions (opcode and operands, whitespace normalised) in a text."""
    return [m.group(1) + " " + " ".join(m.group(2).split()) + ";" for m in _EXAMPLE.finditer(text)]


def _all_examples() -> list[str]:
    seen: dict[str, None] = {}
    for fn in SEED_FILES:
        with open(fn, encoding="utf-8", errors="replace") as f:
            for ex in extract_examples(f.read()):
                seen.setdefault(ex, None)
    return list(seen)


CHECKED_IN = os.path.join(os.path.dirname(__file__), "data", "seed_examples.txt")


def _checked_in() -> list[str]:
    with open(CHECKED_IN, encoding="utf-8") as f:
        return [l.rstrip("\n") for l in f if l.strip() and not l.startswith("#")]


# CI has no seed texts: the examples come from the checked-in extraction, which
# test_checked_in_examples_match_the_seeds compares with a fresh one whenever the seeds exist.
EXAMPLES = _all_examples() if SEED_FILES else _checked_in()
needs_seeds = pytest.mark.skipif(not SEED_FILES, reason=f"seed texts not found under {SEEDS} (set PTX_FORMAL_SEEDS)")


@needs_seeds
def test_checked_in_examples_match_the_seeds():
    assert _checked_in() == _all_examples(), "regenerate tests/data/seed_examples.txt from the seeds"


def _documented_target(form: cat.Form) -> tuple[str, str]:
    """The target and PTX version the text documents for a form, read off its requirements:
    the a-target of an arch rule, the first listed target, else sm_<highest 'sm' floor>;
    PTX = the highest 'introduced in' version (and at least the target's own)."""
    reqs = cat.requirements(form)
    arch = [r["arch"] for r in reqs if "arch" in r]
    listed = [r["targets"][0] for r in reqs if "targets" in r]
    if arch:
        target = arch[0]
    elif listed:
        target = listed[0]
    else:
        target = f"sm_{max(int(r['sm']) for r in reqs if 'sm' in r)}"
    ptx = max([cat.min_ptx(form), cat.parse_target(target).ptx], key=cat._pv)
    return target, ptx


def test_extractor_finds_the_examples():
    # the seeds quote examples of every family; a parser that silently finds nothing fails here
    fams = Counter(parse(e).family for e in EXAMPLES)
    assert len(EXAMPLES) >= 70, len(EXAMPLES)
    assert fams["mma"] >= 30 and fams["mma.sp"] >= 15, fams
    assert fams["wmma.load"] >= 8 and fams["wmma.store"] >= 4 and fams["wmma.mma"] >= 6, fams
    # and no syntax line slipped in (they use placeholders such as .shape / .atype)
    for e in EXAMPLES:
        assert not re.search(r"\.(shape|layout|alayout|atype|dtype|spvariant|kind)\.", e.split()[0] + "."), e


def test_extractor_on_a_flattened_text():
    # seed 004 is a flattened rendering: instructions run into the next heading
    text = ("{%Rc0, %Rc1};Examples of alternate floating point type\n.reg .b32 %Ra<2>, %Rb<1>;\n"
            "mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32\n{%Rd0, %Rd1, %Rd2, %Rd3},\n{%Ra0, %Ra1},\n"
            "{%Rb0},\n{%Rc0, %Rc1, %Rc2, %Rc3};Examples of x mma.sync.aligned.shape.row.col{.satfinite}.s32 d, a;")
    assert extract_examples(text) == [
        "mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32 {%Rd0, %Rd1, %Rd2, %Rd3}, {%Ra0, %Ra1}, {%Rb0}, "
        "{%Rc0, %Rc1, %Rc2, %Rc3};"]


@pytest.mark.parametrize("example", EXAMPLES)
def test_seed_example(example):
    op, operands = cat.split_instruction(example)
    form, imm = parse_instruction(example, strict=False)   # the text writes placeholders (bidA, ...)
    # round trip: the canonical spelling parses to the same form and prints itself
    assert parse(form.opcode) == form
    assert parse(form.opcode).opcode == form.opcode
    # the same qualifiers (the ISA's examples sometimes write them in another order)
    assert sorted(op.split(".")) == sorted(form.opcode.split(".")), (op, form.opcode)
    # register counts: each vector the example writes has the catalog's register count
    names = ["r"] if form.family in ("wmma.load", "wmma.store") else ["d", "a", "b", "c"]
    for name, vec in zip(names, _vectors(operands)):
        if any("..." in x for x in vec):
            continue                      # "{x0,...,x7}": an ellipsis, not a count
        assert len(vec) == form.operands[name].count, (name, vec, form.operands[name])
    # legal on the target (and PTX version) the text documents for it
    target, ptx = _documented_target(form)
    res = legality(example, target, ptx, sel=imm.get("sel"), scale_a=imm.get("scale_a"), scale_b=imm.get("scale_b"))
    assert res.ok, (example, target, ptx, [str(r) for r in res.reasons])


def test_documented_target_examples():
    # the helper reads the text's requirements, checked on three known cases
    assert _documented_target(parse("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32")) == ("sm_89", "8.4")
    assert _documented_target(parse("mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e3m2.e2m3.f32")) == ("sm_120a", "8.7")
    assert _documented_target(parse("wmma.store.d.sync.m16n16k16.row.f32")) == ("sm_70", "6.0")
