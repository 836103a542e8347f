"""Instructions real compilers emit (tests/data/compiler_instructions.tsv, made by
tools/make_instruction_corpus.py from our own sources: the wmma API and CuTe/CUTLASS MMA
atoms through nvcc 13.0, a Triton matmul through Triton 3.9) are legal on their module's
.target at its .version: every mma / mma.sp / wmma line parses (operands included) and the
catalog calls it legal; every ldmatrix / stmatrix / movmatrix line is read by the
transformation engine's instruction reader."""

from __future__ import annotations

import collections
from pathlib import Path

import pytest

from formal import catalog as cat
from formal.transform.steps import make_step

DATA = Path(__file__).parent / "data" / "compiler_instructions.tsv"


def _rows() -> list[tuple[str, str, str, str]]:
    rows = []
    for ln in DATA.read_text().splitlines():
        if ln and not ln.startswith("#"):
            src, target, version, ins = ln.split("\t")
            rows.append((src, target, version, ins))
    return rows


ROWS = _rows()


def test_corpus_covers_every_source_and_family():
    per = collections.Counter((s, t) for s, t, _, _ in ROWS)
    for key in [("wmma", t) for t in ("sm_80", "sm_89", "sm_90", "sm_120a")] + \
               [("cute", t) for t in ("sm_80", "sm_89", "sm_90", "sm_120a")] + \
               [("triton", t) for t in ("sm_80", "sm_89", "sm_90a")]:
        assert per[key] > 0, key
    forms = {cat.parse(ins.split()[0] if " " in ins.split("{")[0] else ins.split("{")[0]).family
             for _, _, _, ins in ROWS if ins.startswith(("mma", "wmma"))}
    assert forms == {"mma", "mma.sp", "wmma.load", "wmma.store", "wmma.mma"}
    ops = {ins.split(".")[0] for _, _, _, ins in ROWS}
    assert {"ldmatrix", "stmatrix"} <= ops
    # the spellings that motivated the corpus are in it
    text = "\n".join(ins for *_, ins in ROWS)
    assert "mma.sync.aligned.kind::mxf8f6f4.sp::ordered_metadata.block_scale" in text       # CUTLASS SM120
    assert ".f32{%f" in text                                                                # no space before {


def _verdict(target: str, version: str, ins: str) -> str:
    try:
        form, imm = cat.parse_instruction(ins)
        res = cat.legality(ins, target, version, sel=imm.get("sel"), scale_a=imm.get("scale_a"),
                           scale_b=imm.get("scale_b"))
    except cat.MalformedOpcode as e:
        return f"malformed: {e}"
    return "" if res.ok else "; ".join(map(str, res.reasons))


def test_every_matrix_instruction_is_legal_on_its_target():
    bad = []
    n = 0
    for src, target, version, ins in ROWS:
        if not ins.startswith(("mma", "wmma")):
            continue
        n += 1
        why = _verdict(target, version, ins)
        if why:
            bad.append((src, target, version, ins, why))
    assert n >= 500
    assert not bad, f"{len(bad)} of {n} not legal, e.g. {bad[:3]}"


@pytest.mark.parametrize("ins", sorted({ins for *_, ins in ROWS if not ins.startswith(("mma", "wmma"))}))
def test_movement_instructions_are_read(ins):
    step = make_step(ins)
    assert step is not None
