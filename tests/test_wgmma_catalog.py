"""wgmma in the catalog (PTX ISA 9.1 9.7.15): the forms, where A comes from, the immediates,
targets and versions, the reasons with their sections, and the agreement with ptxas (a fast
sample here; the whole product and 91,039 near-misses in proofs/ptxas-sweep-wgmma.json)."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from formal import catalog as cat
from formal.catalog import ptxas as P
from formal.catalog import sweep as S
from formal.cli import main

ROOT = Path(__file__).resolve().parent.parent
WG = "9.7.15.5.2"
SP = "9.7.15.6.3"
F32BF16 = "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16"


def _d(n):
    return "{" + ", ".join(f"%f{i}" for i in range(n)) + "}"


# ---- the product, counted from the ISA's own lists -------------------------------------------

def test_counts_follow_the_syntax_blocks():
    n8 = 32                      # N = 8 .. 256 step 8 (9.7.15.2)
    ni = 18                      # 8, 16, 24, 32, 48, ..., 256 (integer and b1)
    dense = 2 * n8 + n8 + n8 + 2 * 4 * n8 + 2 * 4 * ni + ni     # f16 (2 dtypes), bf16, tf32, fp8, int (+sat), b1
    sparse = 2 * n8 + n8 + n8 + 2 * 4 * n8 + 2 * 4 * ni
    fs = cat.forms(family="wgmma")
    by = {k: [f for f in fs if f.listing == k] for k in ("wgmma.mma_async", "wgmma.mma_async.sp")}
    assert len({f.opcode for f in by["wgmma.mma_async"]}) == dense == 546
    assert len({f.opcode for f in by["wgmma.mma_async.sp"]}) == sparse == 528
    # one form per A source, and nothing else
    assert len(by["wgmma.mma_async"]) == 2 * dense and {f.asource for f in fs if f.family == "wgmma"} == {"desc", "reg"}
    assert sorted(f.opcode for f in fs if f.family != "wgmma") == [
        "wgmma.commit_group.sync.aligned", "wgmma.fence.sync.aligned", "wgmma.wait_group.sync.aligned"]
    # legal on sm_90a only; the mma/wmma listings are unchanged by wgmma
    assert not [f for f in cat.forms("sm_90", "9.0") if f.is_wgmma]
    assert not [f for f in cat.forms("sm_100a", "9.0") if f.is_wgmma]
    assert len([f for f in cat.forms("sm_90a", "9.0") if f.is_wgmma]) == 2 * (dense + sparse) + 3


def test_every_documented_opcode_round_trips():
    for f in cat.forms(family="wgmma"):
        g = cat.parse(f.opcode)
        assert g.with_asource(f.asource) == f and g.asource is None


# ---- where A comes from ------------------------------------------------------------------

def test_operands_per_a_source():
    f = cat.parse(F32BF16)
    ops = f.operands
    assert (ops["d"].count, ops["d"].ptx_type) == (64, "f32")                # N/2 .f32
    assert (ops["a"].count, ops["a"].elems_per_reg, ops["a"].etype) == (4, 2, "bf16")
    assert (ops["a_desc"].count, ops["a_desc"].reg_bits, ops["b_desc"].ptx_type) == (1, 64, "b64")
    assert "a_desc" not in f.with_asource("reg").operands and "a" not in f.with_asource("desc").operands
    h = cat.parse("wgmma.mma_async.sp.sync.aligned.m64n256k32.f16.f16.f16").with_asource("reg")
    assert (h.operands["d"].count, h.operands["d"].ptx_type, h.operands["a"].count, h.operands["e"].count) == \
        (64, "f16x2", 4, 1)                                                      # N/4 .f16x2; sp-meta
    b1 = cat.parse("wgmma.mma_async.sync.aligned.m64n24k256.s32.b1.b1.and.popc").with_asource("reg")
    assert (b1.operands["d"].count, b1.operands["a"].elems_per_reg) == (12, 32)


def test_the_operand_list_decides_the_a_source():
    d = _d(64)
    f, imm = cat.parse_instruction(f"{F32BF16} {d}, %rd1, %rd2, %p, 1, -1, 0, 1;")
    assert f.asource == "desc" and imm == {"scale_d": "%p", "imm_scale_a": 1, "imm_scale_b": -1, "imm_trans_a": 0,
                                           "imm_trans_b": 1}
    f, imm = cat.parse_instruction(f"{F32BF16} {d}, {{%r0, %r1, %r2, %r3}}, %rd2, !%p, 1, 1, 0;")
    assert f.asource == "reg" and imm["scale_d"] == "!%p" and "imm_trans_a" not in imm
    # imm-trans-a exists only with A from a descriptor (the register syntax line has none)
    with pytest.raises(cat.MalformedOpcode, match="takes 7 operands"):
        cat.parse_instruction(f"{F32BF16} {d}, {{%r0, %r1, %r2, %r3}}, %rd2, 1, 1, 1, 0, 0;")
    with pytest.raises(cat.MalformedOpcode, match="64 registers"):
        cat.parse_instruction(f"{F32BF16} {_d(32)}, %rd1, %rd2, 1, 1, 1, 0, 0;")
    with pytest.raises(cat.MalformedOpcode, match="E-WGMMA-DESC-IMMEDIATE"):
        cat.parse_instruction(f"{F32BF16} {d}, 0x4000004000010001, %rd2, 1, 1, 1, 0, 0;")
    f, imm = cat.parse_instruction("wgmma.mma_async.sp.sync.aligned.m64n8k64.s32.s8.u8 {%r0, %r1, %r2, %r3}, "
                                   "%rd0, %rd1, %r9, 0, %p;")
    assert f.asource == "desc" and f.is_sparse and imm == {"sel": 0, "scale_d": "%p"}


# ---- legality: the ISA's examples, targets, versions, reasons --------------------------------

ISA_EXAMPLES = [   # 9.7.15.5.2 / 9.7.15.6.3 / 9.7.15.7 examples (register names of our pool)
    "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f0, %f1, %f2, %f3}, {%r0, %r1, %r2, %r3}, %rd1, 1, -1, -1, 1;",
    "wgmma.mma_async.sync.aligned.m64n16k8.f32.tf32.tf32 {%f0, %f1, %f2, %f3, %f4, %f5, %f6, %f7}, %rd0, %rd1, 0, -1, -1;",
    "wgmma.mma_async.sync.aligned.m64n8k32.f16.e4m3.e5m2 {%r0, %r1}, %rd0, %rd1, %p, -1, 1;",
    "wgmma.mma_async.sync.aligned.m64n8k32.s32.s8.s8.satfinite {%r0, %r1, %r2, %r3}, {%r4, %r5, %r6, %r7}, %rd1, 1;",
    "wgmma.mma_async.sync.aligned.m64n8k32.s32.u8.s8 {%r0, %r1, %r2, %r3}, %rd0, %rd1, %p;",
    "wgmma.mma_async.sync.aligned.m64n8k256.s32.b1.b1.and.popc {%r0, %r1, %r2, %r3}, {%r4, %r5, %r6, %r7}, %rd1, %p;",
    "wgmma.mma_async.sp.sync.aligned.m64n8k64.s32.s8.u8 {%r0, %r1, %r2, %r3}, %rd0, %rd1, %r8, 0, %p;",
    "wgmma.fence.sync.aligned;", "wgmma.commit_group.sync.aligned;", "wgmma.wait_group.sync.aligned 0;",
]


@pytest.mark.parametrize("line", ISA_EXAMPLES)
def test_isa_examples_are_legal_on_sm_90a(line):
    f, imm = cat.parse_instruction(line)
    imm = {k: v for k, v in imm.items() if k != "sel"}
    assert cat.legality(f, "sm_90a", "8.4", sel=0 if f.is_sparse else None, imm=imm).ok
    for t in ("sm_90", "sm_100a", "sm_120a"):
        r = cat.legality(f, t, "9.0", imm=imm)
        assert not r.ok and any("requires sm_90a" in x.message for x in r.reasons), (t, line)


NEAR_MISSES = [   # (opcode, ptx, sel, imm, reason substring, section)
    (F32BF16, "7.8", None, None, "requires PTX ISA 8.0 or later", WG),
    ("wgmma.mma_async.sp.sync.aligned.m64n64k32.f32.f16.f16", "8.1", 0, None, "requires PTX ISA 8.2 or later", SP),
    ("wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.u8", "8.3", None, None, "requires PTX ISA 8.4 or later", WG),
    ("wgmma.mma_async.sp.sync.aligned.m64n64k64.s32.u8.s8", "8.3", 0, None, "requires PTX ISA 8.4 or later", SP),
    ("wgmma.mma_async.sync.aligned.m64n64k16.f16.bf16.bf16", "9.0", None, None, ".dtype .f16 is not allowed", WG),
    ("wgmma.mma_async.sync.aligned.m64n64k8.f16.tf32.tf32", "9.0", None, None, ".dtype .f16 is not allowed", WG),
    ("wgmma.mma_async.sync.aligned.m64n64k16.satfinite.f32.f16.f16", "9.0", None, None, ".satfinite is not allowed", WG),
    ("wgmma.mma_async.sync.aligned.m64n40k32.s32.s8.s8", "9.0", None, None, ".shape .m64n40k32 is not allowed", WG),
    ("wgmma.mma_async.sync.aligned.m64n64k32.s32.e4m3.s8", "9.0", None, None, "is not allowed", WG),
    ("wgmma.mma_async.sync.aligned.m64n64k256.s32.b1.b1.xor.popc", "9.0", None, None, "bit operation .xor", WG),
    ("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16", "9.0", None, {"imm_scale_a": 0},
     "imm-scale-a 0 is not a valid value (allowed -1, 1)", WG),
    ("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16", "9.0", None, {"imm_trans_b": 2},
     "imm-trans-b 2 is not a valid value (allowed 0, 1)", WG),
    ("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16", "9.0", None, {"scale_d": 2},
     "scale-d 2 is not a valid value (allowed 0, 1)", WG),
    ("wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32", "9.0", None, {"imm_trans_b": 0},
     "imm-trans-b is not an operand", WG),
    ("wgmma.mma_async.sp.sync.aligned.m64n64k32.f32.f16.f16", "9.0", 2, None,
     "sparsity selector 2 is out of range for m64n64k32 (allowed 0, 1); the operand description says", "9.7.15.6.3"),
    ("wgmma.mma_async.sp.sync.aligned.m64n64k64.f32.e4m3.e4m3", "9.0", 1, None,
     "sparsity selector 1 is out of range for m64n64k64 (allowed 0)", "9.7.15.6.3"),
    ("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16", "9.0", 0, None,
     "only an operand of wgmma.mma_async.sp", "9.7.15.6.3"),
    ("wgmma.mma_async.sync.m64n64k16.f32.f16.f16", "9.0", None, None, "missing mandatory qualifier .aligned", WG),
    ("wgmma.fence.sync", "9.0", None, None, "missing mandatory qualifier .aligned", "9.7.15.7.1"),
    ("wgmma.mma_async.sync.aligned.m64n64k16.col.row.f32.f16.f16", "9.0", None, None,
     "qualifier .col is a PTX qualifier, but no wgmma syntax allows it", WG),
    ("wgmma.mma_async.sp::ordered_metadata.sync.aligned.m64n64k32.f32.f16.f16", "9.0", 0, None,
     "sparsity variant .sp::ordered_metadata is not allowed", SP),
    ("wgmma.wait_group.sync.aligned", "9.0", None, {"n": -1}, "N -1 is not a valid value", "9.7.15.7.3"),
]


@pytest.mark.parametrize("op,ptx,sel,imm,why,section", NEAR_MISSES, ids=[f"{i}" for i in range(len(NEAR_MISSES))])
def test_near_misses_say_why_and_where(op, ptx, sel, imm, why, section):
    r = cat.legality(op, "sm_90a", ptx, sel=sel, imm=imm)
    assert not r.ok
    hits = [x for x in r.reasons if why in x.message]
    assert hits, [str(x) for x in r.reasons]
    assert hits[0].section.startswith(section), (hits[0].section, section)


def test_readings_of_the_text():
    # E-WGMMA-INT-N240-N256: the shape table's n240/n256 integer shapes are legal
    assert cat.legality("wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.s8", "sm_90a", "9.0").ok
    # E-WGMMA-SATFINITE-POSITION: after the types (the examples' place) is legal, with an order note
    r = cat.legality("wgmma.mma_async.sync.aligned.m64n8k32.s32.s8.s8.satfinite", "sm_90a", "9.0")
    assert r.ok and any("E-QUALIFIER-ORDER" in n for n in r.notes)
    # an opcode alone is decided for both A sources; an immediate that only one has says which
    r = cat.legality(F32BF16, "sm_90a", "9.0", imm={"imm_trans_a": 1})
    assert not r.ok and [x.message for x in r.reasons] == [
        "imm-trans-a is not an operand of wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 with A in "
        "registers (with A in registers)"]


def test_cli_check_and_list():
    out = io.StringIO()
    with redirect_stdout(out):
        rc = main(["check", F32BF16, "-t", "sm_90a", "--ptx", "8.0"])
    text = out.getvalue()
    assert rc == 0 and "a: 4 x .b32" in text and "operands (A in registers): d, a, b-desc, scale-d" in text
    out = io.StringIO()
    with redirect_stdout(out):
        rc = main(["check", "wgmma.mma_async.sp.sync.aligned.m64n64k64.f32.e4m3.e4m3 " + _d(32)
                   + ", %rd0, %rd1, %r9, 1, 1, 1, 1;", "-t", "sm_90a"])
    assert rc == 1 and "sparsity selector 1 is out of range" in out.getvalue()
    out = io.StringIO()
    with redirect_stdout(out):
        rc = main(["list", "--family", "wgmma", "--count", "--json"])
    assert rc == 0 and json.loads(out.getvalue()) == {"wgmma.mma_async": 1092, "wgmma.mma_async.sp": 1056,
                                                      "wgmma.fence": 1, "wgmma.commit_group": 1,
                                                      "wgmma.wait_group": 1, "total": 2151}
    assert main(["list", "--family", "wgmma.mma_async.sp", "--count"]) == 0
    assert main(["list", "--family", "wgmm"]) == 2


# ---- ptxas -------------------------------------------------------------------------------------

def test_recorded_sweep_agrees_and_is_large():
    """proofs/ptxas-sweep-wgmma.json (ptxas 13.0, `ptxas-sweep --family wgmma`): the whole product on
    13 targets, >= 10,000 near-misses, every disagreement explained by today's errata."""
    res = S.reexplain(S.load_report(str(ROOT / "proofs" / "ptxas-sweep-wgmma.json")))
    assert not res.unexplained
    cases = {}
    for (v, t, p, c), cnt in res.counts.items():
        cases[c] = cases.get(c, 0) + cnt["cases"]
    assert cases["near-miss"] >= 10_000 and cases["documented"] == 13 * 2151
    assert {r.erratum for r in res.rows if not r.agree} == {"E-WGMMA-ALIGNED-OPTIONAL", "E-WGMMA-LAYOUT-QUALIFIERS"}


PX = P.find("13.0") or P.find()


def _near_misses(forms):
    """The sweep's single-axis mutations of ``forms`` that are not documented spellings."""
    documented = {(f.opcode, f.asource) for f in cat.documented_forms()}
    out = []
    for f in forms:
        for g, mut in S.mutations(f):
            op = cat.format_form(g)
            if (op, g.asource) not in documented and op != f.opcode:
                out.append((S._probe_for(g, f), mut, f.opcode))
    return out


def test_near_misses_are_single_axis_mutations_keeping_the_a_source():
    forms = [f for f in cat.documented_forms() if f.is_wgmma][::37]
    nm = _near_misses(forms)
    assert len(nm) > 1000
    for probe, (axis, frm, to), parent in nm:
        p = next(f for f in forms if f.opcode == parent and f.asource == probe.form.asource)
        diff = [a for a in cat.AXES + ("extra",) if getattr(p, a) != getattr(probe.form, a)]
        assert diff == (["extra"] if axis == "layout" else [axis]), (parent, probe.opcode, diff)
    assert {m[0] for _, m, _ in nm} >= {"shape", "atype", "btype", "dtype", "sparsity", "satfinite", "bitop",
                                         "sync", "aligned", "layout"}


@pytest.mark.ptxas
@pytest.mark.skipif(PX is None, reason="needs ptxas")
def test_sample_agrees_with_ptxas():
    """A fast sample of what the recorded sweep covers: documented forms (both A sources), near-misses,
    spellings, immediates and selectors, on sm_90a and sm_90."""
    ptx = S.catalog_ptx(PX)
    docs = [f for f in cat.documented_forms() if f.is_wgmma][::23]
    cases = [S.Case("documented", P.Probe(f, sel=0 if f.is_sparse else None), t, ptx) for f in docs
             for t in ("sm_90a", "sm_90")]
    cases += [S.Case("near-miss", p, "sm_90a", ptx, mutation=m) for p, m, _ in _near_misses(docs[::4])]
    cases += S.spelling_cases(["sm_90a"], ptx)[-200::7]
    cases += S.immediate_cases(["sm_90a"], ptx)[::5]
    cases += [c for c in S.selector_cases(["sm_90a"], ptx) if c.probe.form.is_wgmma][::40]
    vs = P.assemble([c.probe for c in cases], "sm_90a", ptx, PX)
    bad, legal = [], 0
    for c, v in zip(cases, vs):
        if c.target != "sm_90a":
            continue
        ok, reasons = S.catalog_verdict(c)
        legal += ok
        if ok != v.accepted and S.explain(c, ok, v.accepted) is None:
            bad.append((c.category, c.spelling, c.probe.wg, ok, v.messages[:1], reasons[:1]))
    assert not bad, bad[:5]
    assert legal > 50 and len(cases) - legal > 100
    off = [c for c in cases if c.target == "sm_90"]
    vs = P.assemble([c.probe for c in off], "sm_90", ptx, PX)
    assert not any(v.accepted for v in vs) and not any(S.catalog_verdict(c)[0] for c in off)
