"""Near-miss illegal forms: each differs from a legal form in one respect, and the catalog
must say *why* (a substring of a reason) and *where* (the PTX ISA section it cites).

Also: bad targets / PTX versions and malformed spellings raise the exit-2 errors with a
one-line message naming the offending token and the closest valid spelling.
"""

from __future__ import annotations

import pytest

from formal import BadArgument, MalformedOpcode, legality, parse

MMA = "9.7.14.5.14"
SP = "9.7.14.6"
BS = "9.7.14.3"
WL, WS, WM = "9.7.14.4.3", "9.7.14.4.4", "9.7.14.4.5"

# (opcode, target, ptx, sel, expected reason substring, expected section substring)
NEAR_MISSES = [
    # -- dense mma: type restrictions (Description) --------------------------------------
    ("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f32", "sm_90", "9.0", None,
     ".dtype must equal .ctype for .m16n8k16", MMA),
    ("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f16", "sm_90", "9.0", None,
     ".dtype must equal .ctype for .m16n8k32", MMA),
    ("mma.sync.aligned.m8n8k4.row.col.f16.f16.f16.f32", "sm_90", "9.0", None,
     "when .ctype is .f32, .dtype must also be .f32 for .m8n8k4", MMA),
    ("mma.sync.aligned.m16n8k8.row.col.f32.bf16.tf32.f32", "sm_90", "9.0", None,
     ".atype must equal .btype for .m16n8k8", MMA),
    ("mma.sync.aligned.m16n8k8.row.col.f16.f16.f16.f32", "sm_90", "9.0", None,
     ".dtype must equal .ctype for .m16n8k8", MMA),
    # -- layouts other than .row.col ------------------------------------------------------
    ("mma.sync.aligned.m16n8k16.col.col.f32.f16.f16.f32", "sm_90", "9.0", None, ".alayout .col is not allowed", MMA),
    ("mma.sync.aligned.m16n8k16.row.row.f32.bf16.bf16.f32", "sm_90", "9.0", None, ".blayout .row is not allowed", MMA),
    ("mma.sync.aligned.m8n8k4.col.row.f64.f64.f64.f64", "sm_90", "9.0", None, ".alayout .col is not allowed", MMA),
    ("mma.sync.aligned.m16n8k32.col.col.s32.s8.s8.s32", "sm_90", "9.0", None, ".alayout .col is not allowed", MMA),
    # -- targets and PTX versions -----------------------------------------------------------
    ("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32", "sm_80", "9.0", None, "requires sm_89 or higher", MMA),
    ("mma.sync.aligned.m16n8k16.row.col.f32.e4m3.e5m2.f32", "sm_89", "8.6", None, "requires PTX ISA 8.7 or later", MMA),
    ("mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16", "sm_89", "8.6", None, "requires PTX ISA 8.7 or later", MMA),
    ("mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e3m2.e2m1.f32", "sm_90", "9.0", None, "requires sm_120a", MMA),
    ("mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e4m3.e4m3.f32", "sm_100a", "9.0", None, "requires sm_120a", MMA),
    ("mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e3m2.e2m1.f32", "sm_120f", "8.7", None,
     "target sm_120f requires PTX ISA 8.8 or later", "11.1.2"),
    ("mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e3m2.e2m1.f32", "sm_120", "9.0", None, "requires sm_120a", MMA),
    ("mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64", "sm_80", "9.0", None, "requires sm_90 or higher", MMA),
    ("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64.rn", "sm_75", "9.0", None, "requires sm_80 or higher", MMA),
    ("mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64", "sm_90", "7.7", None, "requires PTX ISA 7.8 or later", MMA),
    ("mma.sync.aligned.m8n8k128.row.col.s32.b1.b1.s32.and.popc", "sm_75", "9.0", None, "requires sm_80 or higher", MMA),
    ("mma.sync.aligned.m16n8k128.row.col.s32.b1.b1.s32.and.popc", "sm_80", "7.0", None,
     "requires PTX ISA 7.1 or later", MMA),
    ("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "sm_75", "9.0", None, "requires sm_80 or higher", MMA),
    ("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32", "sm_75", "6.4", None, "requires PTX ISA 6.5 or later", MMA),
    ("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "sm_101a", "9.0", None, "renamed sm_110a", "11.1.2"),
    # -- flags and type mixing ----------------------------------------------------------------
    ("mma.sync.aligned.m16n8k16.row.col.satfinite.f32.f16.f16.f32", "sm_90", "9.0", None,
     ".satfinite is not allowed", MMA),
    ("mma.sync.aligned.m16n8k8.row.col.satfinite.f32.tf32.tf32.f32", "sm_90", "9.0", None,
     ".satfinite is not allowed", MMA),
    ("mma.sync.aligned.m16n8k32.row.col.s32.s8.u4.s32", "sm_90", "9.0", None, "is not allowed in 'Integer type'", MMA),
    ("mma.sync.aligned.m16n8k32.row.col.s32.u4.s8.s32", "sm_90", "9.0", None, "is not allowed in 'Integer type'", MMA),
    ("mma.aligned.m16n8k16.row.col.f32.f16.f16.f32", "sm_90", "9.0", None, "missing mandatory qualifier .sync", MMA),
    ("mma.sync.m16n8k16.row.col.f32.f16.f16.f32", "sm_90", "9.0", None, "missing mandatory qualifier .aligned", MMA),
    ("mma.sync.aligned.m16n8k128.row.col.s32.b1.b1.s32.popc", "sm_90", "9.0", None, "bit operation is missing", MMA),
    # -- block scaling ------------------------------------------------------------------------
    ("mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.f32.e2m1.e2m1.f32.ue4m3", "sm_120a", "9.0", None,
     "mxf4nvf4 requires an explicit .scale_vec_size", MMA),
    ("mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue4m3", "sm_120a",
     "9.0", None, ".stype .ue4m3 with .kind::mxf4nvf4 requires .scale_vec::4X", BS),
    ("mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue8m0", "sm_120a",
     "9.0", None, ".scale_vec_size .scale_vec::4X is not allowed", MMA),
    ("mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue8m0", "sm_120a",
     "9.0", None, ".scale_vec::4X with .stype .ue8m0 (.kind::mxf4nvf4) requires PTX ISA 9.1", MMA),
    ("mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::2X.f32.e4m3.e4m3.f32.ue8m0", "sm_120a",
     "9.0", None, ".scale_vec_size .scale_vec::2X is not allowed", MMA),
    ("mma.sync.aligned.m16n8k32.row.col.f32.e3m2.e3m2.f32", "sm_120a", "9.0", None, ".kind is missing", MMA),
    ("mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.f32.e2m1.e2m1.f32.ue8m0", "sm_90a", "9.0", None,
     "requires sm_120a", MMA),
    # -- sparse: selectors per shape (9.7.14.6.1) ----------------------------------------------
    ("mma.sp.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32", "sm_90", "9.0", 2,
     "sparsity selector 2 is out of range for m16n8k32 (allowed 0, 1)", "9.7.14.6.1"),
    ("mma.sp.sync.aligned.m16n8k32.row.col.f32.bf16.bf16.f32", "sm_90", "9.0", 3,
     "sparsity selector 3 is out of range for m16n8k32 (allowed 0, 1)", "9.7.14.6.1"),
    ("mma.sp.sync.aligned.m16n8k16.row.col.f32.tf32.tf32.f32", "sm_90", "9.0", 2,
     "sparsity selector 2 is out of range for m16n8k16 (allowed 0, 1)", "9.7.14.6.1"),
    ("mma.sp.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "sm_90", "9.0", 4,
     "sparsity selector 4 is out of range for m16n8k16 (allowed 0, 1, 2, 3)", "9.7.14.6.1"),
    ("mma.sp.sync.aligned.m16n8k64.row.col.s32.s8.s8.s32", "sm_90", "9.0", 1,
     "sparsity selector 1 is out of range for m16n8k64 (allowed 0)", "9.7.14.6.1"),
    ("mma.sp.sync.aligned.m16n8k64.row.col.s32.u4.u4.s32", "sm_90", "9.0", 2,
     "sparsity selector 2 is out of range for m16n8k64 (allowed 0, 1)", "9.7.14.6.1"),
    ("mma.sp.sync.aligned.m16n8k128.row.col.s32.u4.u4.s32", "sm_90", "9.0", 1,
     "sparsity selector 1 is out of range for m16n8k128 (allowed 0)", "9.7.14.6.1"),
    ("mma.sp.sync.aligned.m16n8k64.row.col.f32.e4m3.e5m2.f32", "sm_90", "9.0", 1,
     "sparsity selector 1 is out of range for m16n8k64 (allowed 0)", "9.7.14.6.1"),
    ("mma.sp::ordered_metadata.sync.aligned.m16n8k128.row.col.kind::mxf4.block_scale.f32.e2m1.e2m1.f32.ue8m0",
     "sm_120a", "9.0", 1, "sparsity selector 1 is out of range for m16n8k128 (allowed 0)", "9.7.14.6.1"),
    # -- sparse: variants, kinds, targets ----------------------------------------------------------
    ("mma.sp.sync.aligned.m16n8k64.row.col.kind::f8f6f4.f32.e3m2.e2m1.f32", "sm_120a", "9.0", 0,
     "sparsity variant .sp is not allowed", SP),
    ("mma.sp::ordered_metadata.sync.aligned.m16n8k128.row.col.kind::mxf4.block_scale.f32.e2m1.e2m1.f32.ue8m0",
     "sm_120f", "9.0", 0, "requires one of sm_120a, sm_121a", SP),
    ("mma.sp::ordered_metadata.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "sm_90", "8.4", 0,
     "requires PTX ISA 8.5 or later", SP),
    ("mma.sp.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "sm_75", "9.0", 0, "requires sm_80 or higher", SP),
    ("mma.sp.sync.aligned.m16n8k32.row.col.f16.bf16.bf16.f16", "sm_90", "9.0", 0, ".dtype .f16 is not allowed", SP),
    ("mma.sp.sync.aligned.m16n8k64.row.col.f16.e4m3.e4m3.f16", "sm_120a", "9.0", 0, ".dtype .f16 is not allowed", SP),
    # -- wmma ------------------------------------------------------------------------------------------
    ("wmma.load.a.sync.aligned.col.m8n8k32.s4", "sm_90", "9.0", None, ".layout .col is not allowed in 'Sub-byte loads'", WL),
    ("wmma.load.b.sync.aligned.row.m8n8k128.b1", "sm_90", "9.0", None,
     ".layout .row is not allowed in 'Single-bit loads'", WL),
    ("wmma.mma.sync.aligned.col.col.m8n8k32.s32.s4.s4.s32", "sm_90", "9.0", None, ".alayout .col is not allowed", WM),
    ("wmma.mma.sync.aligned.row.col.m16n16k16.s32.s8.u8.s32", "sm_90", "9.0", None,
     "the values for .atype and .btype must be the same for integer wmma", WM),
    ("wmma.mma.sync.aligned.row.col.m16n16k16.f32.bf16.bf16.f32", "sm_75", "9.0", None, "requires sm_80 or higher", WM),
    ("wmma.load.a.sync.aligned.row.m16n16k16.bf16", "sm_75", "9.0", None, "requires sm_80 or higher", WL),
    ("wmma.mma.sync.aligned.row.col.m16n16k8.f32.tf32.tf32.f16", "sm_90", "9.0", None, ".ctype .f16 is not allowed", WM),
    ("wmma.load.c.sync.aligned.row.m16n16k8.f16", "sm_90", "9.0", None, ".ctype .f16 is not allowed", WL),
    ("wmma.load.a.sync.aligned.row.m16n16k16.shared::cta.f16", "sm_80", "7.7", None, "requires PTX ISA 7.8 or later", WL),
    ("wmma.store.d.sync.aligned.row.m16n16k16.shared::cta.f32", "sm_80", "7.7", None, "requires PTX ISA 7.8 or later", WS),
    ("wmma.load.a.sync.row.m16n16k16.f16", "sm_90", "9.0", None, "missing mandatory qualifier .aligned", WL),
    ("wmma.mma.sync.row.col.m16n16k16.f32.f32", "sm_70", "6.3", None, "missing mandatory qualifier .aligned", WM),
    ("wmma.load.a.sync.aligned.row.m16n16k16.f16", "sm_70", "6.0", None,
     "the .aligned modifier of wmma is spelled from PTX ISA 6.3", WL),
    ("wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32.satfinite", "sm_70", "6.5", None,
     ".satfinite on floating point wmma.mma was removed in PTX ISA 6.5", WM),
    ("wmma.mma.sync.aligned.row.col.m16n16k16.s32.s8.s8.s32", "sm_70", "6.3", None, "requires sm_72 or higher", WM),
    ("wmma.load.a.sync.aligned.row.m16n16k16.u8", "sm_70", "6.3", None, "requires sm_72 or higher", WL),
    ("wmma.mma.sync.aligned.row.col.m8n8k32.s32.s4.s4.s32", "sm_72", "6.3", None, "requires sm_75 or higher", WM),
    ("wmma.mma.and.popc.sync.aligned.row.col.m8n8k128.s32.b1.b1.s32", "sm_75", "9.0", None,
     "requires sm_80 or higher", WM),
    ("wmma.store.d.sync.aligned.row.m8n8k4.f64", "sm_75", "9.0", None, "requires sm_80 or higher", WS),
    ("wmma.mma.sync.aligned.row.col.m16n16k16.f64.f64.f64.f64", "sm_90", "9.0", None, ".shape .m16n16k16 is not allowed", WM),
]


def test_enough_near_misses():
    assert len(NEAR_MISSES) >= 40


@pytest.mark.parametrize("opcode,target,ptx,sel,reason,section", NEAR_MISSES,
                         ids=[f"{i:02d}" for i in range(len(NEAR_MISSES))])
def test_near_miss(opcode, target, ptx, sel, reason, section):
    res = legality(opcode, target, ptx, sel=sel)
    assert not res.ok, f"{opcode} should be illegal on {target} PTX {ptx}"
    hits = [r for r in res.reasons if reason in r.message]
    assert hits, f"expected a reason containing {reason!r}, got {[r.message for r in res.reasons]}"
    assert any(section in r.section for r in hits), [r.section for r in hits]


def test_near_misses_are_near():
    # each near miss is one change away from a legal spelling: the same spelling is legal
    # somewhere, or a spelling differing in one qualifier/target/version/selector is listed
    # below as legal (guards against a table of forms illegal for trivial reasons)
    legal_twins = {
        "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16": ("sm_90", "9.0", None),
        "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32": ("sm_89", "9.0", None),
        "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3":
            ("sm_120a", "9.0", None),
        "mma.sp.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32": ("sm_90", "9.0", 1),
        "wmma.load.a.sync.aligned.row.m8n8k32.s4": ("sm_90", "9.0", None),
        "wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32.satfinite": ("sm_70", "6.4", None),
        "wmma.load.a.sync.row.m16n16k16.f16": ("sm_70", "6.2", None),
    }
    for op, (t, p, s) in legal_twins.items():
        assert legality(op, t, p, sel=s).ok, op


def test_scale_selectors_out_of_range():
    op = "mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.f32.e2m1.e2m1.f32.ue8m0"
    assert legality(op, "sm_120a", "9.0", scale_a=(2, 1), scale_b=(2, 3)).ok     # the seed's example
    res = legality(op, "sm_120a", "9.0", scale_a=(1, 0), scale_b=(0, 4))
    msgs = [r.message for r in res.reasons]
    assert any("byte-id-a 1 is not valid for .scale_vec::2X (allowed 0, 2)" in m for m in msgs), msgs
    assert any("thread-id-b 4" in m for m in msgs), msgs
    assert all("9.7.14.3" in r.section for r in res.reasons)


def test_selector_on_dense_mma_is_an_error():
    res = legality("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "sm_90", "9.0", sel=0)
    assert not res.ok and "only an operand of mma.sp" in res.reasons[0].message


def test_every_reason_cites_a_section():
    for op, t, p, s, *_ in NEAR_MISSES:
        for r in legality(op, t, p, sel=s).reasons:
            assert r.section and r.section[0].isdigit(), (op, r)


# ---- bad arguments and malformed spellings (exit 2 in the CLI) -------------------------------

@pytest.mark.parametrize("target,ptx,needle", [
    ("sm_99", "9.0", "unknown target 'sm_99' (did you mean sm_90?)"),
    ("sm_90b", "9.0", "unknown target"),
    ("gfx90a", "9.0", "unknown target"),
    ("sm_90", "9.9", "unknown PTX ISA version '9.9' (did you mean 9.5?)"),
    ("sm_90", "x", "unknown PTX ISA version"),
])
def test_bad_arguments(target, ptx, needle):
    with pytest.raises(BadArgument) as e:
        legality("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", target, ptx)
    assert needle in str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("opcode,needle,token,suggestion", [
    ("mma.sync.aligned.m16n8k16.row.col.f32.bf61.bf16.f32", "unknown qualifier '.bf61'", "bf61", "bf16"),
    ("mma.sync.aligned.m16n8k16.row.col.kind::mxf5.f32.f16.f16.f32", "unknown qualifier '.kind::mxf5'",
     "kind::mxf5", "kind::mxf4"),
    ("mma.sync.aligned.m16n8k17.row.col.f32.f16.f16.f32", "unknown shape '.m16n8k17'", "m16n8k17", "m16n8k16"),
    ("mma.sp::ordered.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "unknown sparsity variant",
     "sp::ordered", "sp::ordered_metadata"),
    ("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32.sattfinite", "unknown qualifier '.sattfinite'",
     "sattfinite", "satfinite"),
    ("wmma.load.a.sync.aligned.row.m16n16k16.globl.f16", "unknown qualifier '.globl'", "globl", "global"),
    ("wmma.lod.a.sync.aligned.row.m16n16k16.f16", "unknown wmma operation", "lod", "load"),
    ("mmma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "unknown instruction", "mmma", "mma"),
])
def test_malformed_with_closest_spelling(opcode, needle, token, suggestion):
    with pytest.raises(MalformedOpcode) as e:
        parse(opcode)
    assert needle in str(e.value)
    assert e.value.token == token and e.value.suggestion == suggestion
    assert f"closest valid spelling: '.{suggestion}'" in str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("opcode,needle", [
    ("mma.sync.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "duplicate qualifier '.sync'"),
    ("mma.sync.aligned.m16n8k16.m16n8k16.row.col.f32.f16.f16.f32", "duplicate qualifier '.m16n8k16'"),
    ("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16", "takes 4 type qualifiers"),
    ("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32.f32", "takes 4 type qualifiers"),
    ("mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.f32.e2m1.e2m1.f32", "takes 5 type qualifiers"),
    ("wmma.mma.sync.aligned.row.col.m16n16k16.f32", "takes 2 (.dtype.ctype) or 4"),
    ("wmma.load.a.sync.aligned.row.m16n16k16.f16.f16", "takes one type qualifier"),
    ("mma.sync.aligned.m16n8k16.row.f32.f16.f16.f32", "takes two layout qualifiers"),
    ("mma.sync.aligned.row.col.f32.f16.f16.f32", "missing shape qualifier"),
    ("wmma.load.sync.aligned.row.m16n16k16.f16", "must name its matrix"),
    ("mma..sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "empty qualifier"),
    ("", "empty instruction"),
])
def test_malformed_structure(opcode, needle):
    with pytest.raises(MalformedOpcode) as e:
        parse(opcode)
    assert needle in str(e.value)
    assert "\n" not in str(e.value)
