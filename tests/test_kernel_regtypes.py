"""`kernel lint` checks the declared type of every mma / wmma fragment register against
what ptxas accepts for that operand (specs/operand_registers.toml, swept by
tools/sweep_operand_registers.py).

The corpus stays legal; hand-mutated kernels (one fragment moved into registers of the
wrong type or width) are flagged on the instruction's PTX line, and ptxas rejects every
mutant on that same line (tests marked ptxas); a type ptxas accepts but the ISA text does
not name (.f64 fragments in .u64 registers) is a warning, never illegal.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from formal import catalog, kernel
from formal.catalog import ptxas as P
from formal.specdata import load_spec

ROOT = Path(__file__).resolve().parent.parent
TINY = (ROOT / "tests/data/kernels_small/tiny_mma.ptx").read_text()
MMA = ("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 \t{%f1, %f2, %f3, %f4}, {%r25, %r26, %r27, %r28}, "
       "{%r32, %r33}, {%f1, %f2, %f3, %f4};")
assert MMA in TINY


def _f16_a_in_f32() -> str:
    """A fragment copied into .f32 registers (width right, type wrong)."""
    movs = "".join(f"\tmov.b32 \t%g{i}, %r{25 + i};\n" for i in range(4))
    return TINY.replace(".reg .f32 \t%f<8>;", ".reg .f32 \t%f<8>;\n\t.reg .f32 \t%g<4>;").replace(
        "\t" + MMA, movs + "\t" + MMA.replace("{%r25, %r26, %r27, %r28}", "{%g0, %g1, %g2, %g3}"))


def _f32_acc_in_u32() -> str:
    """Accumulators declared .u32 (the other instructions on them retyped so only the mma is wrong)."""
    return (TINY.replace(".reg .f32 \t%f<8>;", ".reg .u32 \t%f<8>;").replace("mov.f32 \t%f", "mov.u32 \t%f")
            .replace(", 0f00000000;", ", 0;").replace("st.global.v2.f32", "st.global.v2.b32"))


def _f16_b_in_b64() -> str:
    """B fragment in 64-bit registers (wrong width)."""
    cvts = "".join(f"\tcvt.u64.u32 \t%q{i}, %r{32 + i};\n" for i in range(2))
    return TINY.replace(".reg .b64 \t%rd<12>;", ".reg .b64 \t%rd<12>;\n\t.reg .b64 \t%q<2>;").replace(
        "\t" + MMA, cvts + "\t" + MMA.replace("{%r32, %r33}", "{%q0, %q1}"))


def _wmma(a_type: str) -> str:
    """A one-warp wmma kernel (f16 in, f32 out) whose A fragment registers are .{a_type}."""
    return f""".version 7.8
.target sm_80
.address_size 64
.visible .entry k(.param .u64 p)
{{
\t.reg .{a_type} \t%a<8>;
\t.reg .b32 \t%r<8>;
\t.reg .f32 \t%f<8>;
\t.reg .b64 \t%rd<2>;
\tld.param.u64 \t%rd1, [p];
\twmma.load.a.sync.aligned.row.m16n16k16.global.f16 \t{{%a0, %a1, %a2, %a3, %a4, %a5, %a6, %a7}}, [%rd1], 16;
\twmma.load.b.sync.aligned.col.m16n16k16.global.f16 \t{{%r0, %r1, %r2, %r3, %r4, %r5, %r6, %r7}}, [%rd1], 16;
\twmma.mma.sync.aligned.row.col.m16n16k16.f32.f32 \t{{%f0, %f1, %f2, %f3, %f4, %f5, %f6, %f7}}, {{%a0, %a1, %a2, %a3, %a4, %a5, %a6, %a7}}, {{%r0, %r1, %r2, %r3, %r4, %r5, %r6, %r7}}, {{%f0, %f1, %f2, %f3, %f4, %f5, %f6, %f7}};
\twmma.store.d.sync.aligned.row.m16n16k16.global.f32 \t[%rd1], {{%f0, %f1, %f2, %f3, %f4, %f5, %f6, %f7}}, 16;
\tret;
}}
"""


def _f64(reg: str) -> str:
    """An f64 mma whose fragments are declared .{reg}."""
    return f""".version 7.8
.target sm_80
.address_size 64
.visible .entry k()
{{
\t.reg .{reg} \t%d<6>;
\tmov.b64 \t%d0, 0;
\tmov.b64 \t%d1, 0;
\tmov.b64 \t%d2, 0;
\tmov.b64 \t%d3, 0;
\tmma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 \t{{%d4, %d5}}, {{%d0}}, {{%d1}}, {{%d2, %d3}};
\tret;
}}
"""


# name -> (PTX, the flagged operand, its registers' declared type, the instructions taking them)
MUTANTS = {
    "f16 A in .f32": (_f16_a_in_f32(), "operand a", ".f32", ("mma.sync",)),
    "f32 C/D in .u32": (_f32_acc_in_u32(), "operand d", ".u32", ("mma.sync",)),
    "f16 B in .b64": (_f16_b_in_b64(), "operand b", ".b64", ("mma.sync",)),
    "wmma f16 A in .f32": (_wmma("f32"), "operand a", ".f32", ("wmma.load.a", "wmma.mma")),
}


def _illegal_lines(text: str) -> set:
    return {f.line for f in kernel.lint(kernel.parse_module(text)) if not f.legal}


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_mutants_are_flagged_on_their_lines(name):
    text, operand, declared, takers = MUTANTS[name]
    fs = kernel.lint(kernel.parse_module(text))
    bad = [f for f in fs if not f.legal]
    want = {n for n, ln in enumerate(text.splitlines(), 1) if ln.lstrip().startswith(takers)}
    assert bad and {f.line for f in bad} == want, [(f.line, f.reasons) for f in fs]
    why = " ".join(bad[0].reasons)
    assert operand in why and f"declared {declared}" in why and "ptxas accepts" in why


def test_unmutated_kernels_are_legal_without_warnings():
    for text in (TINY, _wmma("b32"), _wmma("f16x2")):
        fs = kernel.lint(kernel.parse_module(text))
        assert fs and all(f.legal and not f.warnings for f in fs), [(f.line, f.reasons) for f in fs]


def test_f64_fragments_in_integer_registers_warn_but_stay_legal():
    (f,) = kernel.lint(kernel.parse_module(_f64("u64")))
    assert f.legal and f.warnings and "ptxas accepts it, the PTX ISA names .f64" in f.warnings[0]
    (f,) = kernel.lint(kernel.parse_module(_f64("f64")))
    assert f.legal and not f.warnings
    (f,) = kernel.lint(kernel.parse_module(_f64("b64")))
    assert f.legal and not f.warnings


def _corpus():
    for p in sorted((ROOT / "tests/data/kernels").glob("*.ptx")) + sorted((ROOT / "tests/data/kernels_small").glob("*.ptx")):
        if "wgmma" not in p.name:
            yield p


def test_corpus_fragment_registers_are_legal():
    n = 0
    for p in _corpus():
        for f in kernel.lint(kernel.parse_module(p.read_text(), path=str(p))):
            assert not any("declared" in r for r in f.reasons + f.warnings), (p.name, f.line, f.reasons, f.warnings)
            n += f.instruction.lstrip().startswith(("mma", "wmma"))
    assert n > 500


def test_table_accepts_every_form_type_and_only_its_width():
    """Each entry lists the fragment's own register type (.f16x2, .b32, .f32, .s32, .f64) and
    only registers of the fragment's width: the sweep cannot have recorded garbage."""
    from formal.kernel.parse import _TYPE_BITS
    table = load_spec("operand_registers")["accepted"]
    seen = set()
    for target, ptx in (("sm_90a", "8.7"), ("sm_120a", "8.8")):
        for fam in ("mma", "mma.sp", "wmma.mma", "wmma.load", "wmma.store"):
            for form in catalog.forms(target, ptx, family=fam):
                for name, op in form.operands.items():
                    if name not in ("a", "b", "c", "d", "r"):
                        continue
                    key = form.matrix if fam == "wmma.load" else ("d" if fam == "wmma.store" else name)
                    acc = table[fam][key][op.etype]
                    assert op.ptx_type in acc or f"b{op.reg_bits}" in acc, (form.opcode, name, acc)
                    assert {_TYPE_BITS[t] for t in acc} == {op.reg_bits}, (form.opcode, name, acc)
                    seen.add((fam, key, op.etype))
    assert len(seen) > 100


# ---- ptxas agrees --------------------------------------------------------------------------

PTXAS = P.find()
needs_ptxas = pytest.mark.skipif(PTXAS is None, reason="no ptxas found")


def _ptxas(text: str) -> tuple[int, str]:
    return P._run_module(PTXAS.path, text, "sm_80")


@needs_ptxas
@pytest.mark.ptxas
@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_ptxas_rejects_each_mutant_on_the_lines_lint_flags(name):
    text = MUTANTS[name][0]
    rc, out = _ptxas(text)
    lines = {int(m) for m in re.findall(r"line (\d+); error", out)}
    assert rc != 0 and lines == _illegal_lines(text), out


@needs_ptxas
@pytest.mark.ptxas
def test_ptxas_accepts_what_lint_calls_legal():
    for text in (TINY, _wmma("b32"), _wmma("f16x2"), _f64("u64"), _f64("f64"), _f64("s64")):
        rc, out = _ptxas(text)
        assert rc == 0, out


@needs_ptxas
@pytest.mark.ptxas
@pytest.mark.slow
def test_table_reproduces_with_ptxas():
    """A sample of the sweep, rerun: every type ptxas accepts for a sampled form is in the
    table (the table is the union over each key's variants, so it may list more)."""
    import sys
    import tempfile
    sys.path.insert(0, str(ROOT / "tools"))
    import sweep_operand_registers as sw

    table = load_spec("operand_registers")["accepted"]
    reps = sw.representatives()
    keys = sorted(reps, key=str)[:: max(1, len(reps) // 12)]
    with tempfile.TemporaryDirectory() as t:
        for key in keys:
            form, target, ptx, name = reps[key][-1]
            natural = {n: op.ptx_type for n, op in form.operands.items()}
            acc = {c for c in sw.CANDIDATES
                   if sw._accepts(PTXAS.path, sw._kernel(form, target, ptx, {**natural, name: c}), target, Path(t))[0]}
            fam, opk, et = key
            assert acc <= set(table[fam][opk][et]), (form.opcode, name, acc)
