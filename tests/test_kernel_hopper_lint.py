"""`kernel lint` on sm_90a modules (issue 21): every construct of the Hopper corpus is read, every
wgmma is checked by the catalog (the operand list decides where A comes from) and every wgmma
fragment register against what ptxas accepts (specs/operand_registers.toml, [accepted."wgmma"],
swept by tools/sweep_operand_registers.py --wgmma-only).  Mutants are flagged on their lines and
ptxas rejects them on those same lines."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from formal import catalog, kernel
from formal.catalog import ptxas as P
from formal.specdata import load_spec

ROOT = Path(__file__).resolve().parent.parent
HOPPER = ROOT / "tests" / "data" / "kernels_hopper"
MODULES = sorted(HOPPER.glob("*.ptx")) + [ROOT / "tests/data/kernels/tri_f16_wgmma_sm90_w4.ptx"]
RS = (HOPPER / "cute_gmma_rs_f16.ptx").read_text()      # register-A wgmma, accumulators in .f32, A in .b32


def _wgmma_lines(text: str) -> set[int]:
    return {i for i, ln in enumerate(text.splitlines(), 1) if re.match(r"\s*(@\S+\s+)?wgmma\.", ln)}


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.stem)
def test_corpus_module_lints_legal(path):
    text = path.read_text()
    fs = kernel.lint(kernel.parse_module(text, path=str(path)))
    assert all(f.legal and not f.warnings for f in fs), [(f.line, f.reasons, f.warnings) for f in fs if not f.legal]
    # every wgmma line of the module is a finding (fence, mma_async, commit_group, wait_group)
    assert {f.line for f in fs if f.instruction.startswith("wgmma")} == _wgmma_lines(text)


def test_register_a_is_decided_by_the_operand_list():
    mod = kernel.parse_module(RS)
    forms = [i.form for fn in mod.functions.values() for i in fn.instrs if i.opcode.startswith("wgmma.mma_async")]
    assert forms and {f.asource for f in forms} == {"reg"}
    mod = kernel.parse_module((HOPPER / "cute_gmma_ss_f16.ptx").read_text())
    forms = [i.form for fn in mod.functions.values() for i in fn.instrs if i.opcode.startswith("wgmma.mma_async")]
    assert forms and {f.asource for f in forms} == {"desc"}


def _acc_in_u32() -> str:
    """The accumulators declared .u32 (ptxas: .f32 accumulators only in .b32 / .f32)."""
    return RS.replace(".reg .f32 \t%f<609>;", ".reg .f32 \t%f<609>;\n\t.reg .u32 \t%q<32>;").replace(
        "{%f576,  %f575,  %f574,", "{%q0,  %q1,  %q2,", 1)


def _a_in_u32() -> str:
    """Register A (f16 pairs) declared .u32 (ptxas: only .b32 / .f16x2)."""
    return RS.replace(".reg .b32 \t%r<148>;", ".reg .b32 \t%r<148>;\n\t.reg .u32 \t%q<4>;").replace(
        "{%r80, %r82, %r84, %r86}", "{%q0, %q1, %q2, %q3}", 1)


def _first_mma_line(text: str) -> int:
    return next(i for i, ln in enumerate(text.splitlines(), 1) if "wgmma.mma_async" in ln)


MUTANTS = {
    "target_sm_90": (RS.replace(".target sm_90a", ".target sm_90"), "sm_90", None),
    "acc_u32": (_acc_in_u32(), "sm_90a", "operand d"),
    "a_u32": (_a_in_u32(), "sm_90a", "operand a"),
}


def _illegal(text):
    return [f for f in kernel.lint(kernel.parse_module(text)) if not f.legal]


def test_mutants_are_flagged_on_their_lines():
    bad = _illegal(MUTANTS["target_sm_90"][0])
    assert {f.line for f in bad} == _wgmma_lines(RS)             # every wgmma needs sm_90a
    assert all("sm_90a" in " ".join(f.reasons) for f in bad)
    for name in ("acc_u32", "a_u32"):
        text, _, what = MUTANTS[name]
        bad = _illegal(text)
        assert [f.line for f in bad] == [_first_mma_line(text)], name
        assert what in bad[0].reasons[0] and "declared .u32" in bad[0].reasons[0], bad[0].reasons


def test_table_lists_each_wgmma_operand_type_and_only_its_width():
    from formal.kernel.parse import _TYPE_BITS
    table = load_spec("operand_registers")["accepted"]["wgmma"]
    seen = set()
    for form in catalog.forms("sm_90a", "8.7", family="wgmma"):
        if form.family != "wgmma":
            continue
        for src in ("desc", "reg"):
            f = form.with_asource(src)
            for name, op in f.operands.items():
                if name in ("d", "a"):
                    acc = table[name][op.etype]
                    assert op.ptx_type in acc or f"b{op.reg_bits}" in acc, (f.opcode, name, acc)
                    assert {_TYPE_BITS[t] for t in acc} == {op.reg_bits}, (f.opcode, name, acc)
                    seen.add((name, op.etype))
    assert len(seen) == 11


PTXAS = P.find()


@pytest.mark.skipif(PTXAS is None, reason="no ptxas found")
@pytest.mark.ptxas
@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_ptxas_rejects_each_mutant_on_the_lines_lint_flags(name):
    text, arch, _ = MUTANTS[name]
    rc, out = P._run_module(PTXAS.path, text, arch)
    lines = {int(m) for m in re.findall(r"line (\d+); error", out)}
    assert rc != 0 and lines == {f.line for f in _illegal(text)}, out
