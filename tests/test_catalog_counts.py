"""The issue's "Done when": ``ptx-formal list --target T --ptx P`` lists every form the text
documents for T.  The expected counts are derived BY HAND from the syntax tables
(9.7.14.4.3-5, 9.7.14.5.14, 9.7.14.6.3), the prose type restrictions and the Target /
PTX ISA Notes -- not from the implementation.  Each number is written as the product it
comes from.
"""

from __future__ import annotations

import io
import json
from collections import Counter
from contextlib import redirect_stdout

import pytest

from formal import forms
from formal.cli import main

# ---- dense mma (9.7.14.5.14) ---------------------------------------------------------------
# f16: m8n8k4 alayout{row,col} x blayout{row,col} x dtype{f16,f32} x ctype{f16,f32} = 16,
#      minus "ctype f32 => dtype f32" (2*2 layouts) = 12; m16n8k8 and m16n8k16 "dtype == ctype": 2 + 2
F16_M8N8K4 = 2 * 2 * 2 * 2 - 2 * 2
F16_K8, F16_K16 = 2, 2
# alternate fp: m16n8k4 tf32 1; m16n8k8 atype==btype in {bf16, tf32} 2; m16n8k16 bf16 1
ALT = 1 + 2 + 1
# fp8 (sm_89): shapes {k16, k32} x (dtype == ctype in {f16, f32}) x atype{e4m3,e5m2} x btype{e4m3,e5m2}
FP8 = 2 * 2 * 2 * 2
# f64: each shape x rounding spelled {none, .rn, .rz, .rm, .rp} (E-F64-ROUNDING)
F64_PER_SHAPE = 5
# integer: 3 shapes x {.satfinite or not} x atype{u,s} x btype{u,s}, for 8-bit and for 4-bit
INT8_PER_SHAPE = INT4_PER_SHAPE = 2 * 2 * 2
# b1: 3 shapes x bitOp{xor, and}
B1_PER_SHAPE = 2
# kind::f8f6f4 (sm_120a): m16n8k32 x (dtype == ctype: 2) x 5 x 5
KIND_F8F6F4 = 2 * 5 * 5
# block scaling: mxf4 scale_vec{omitted, 2X} x ue8m0 = 2; mxf4nvf4 {2X+ue8m0, 4X+ue4m3} (+ 4X+ue8m0 from 9.1);
# mxf8f6f4 scale_vec{omitted, 1X} x 5 x 5
MXF4, MXF4NVF4_90, MXF4NVF4_91, MXF8F6F4 = 2, 2, 3, 2 * 5 * 5

MMA_SM80 = F16_M8N8K4 + F16_K8 + F16_K16 + ALT + 1 * F64_PER_SHAPE + 3 * INT8_PER_SHAPE + 3 * INT4_PER_SHAPE + 3 * B1_PER_SHAPE
MMA_SM89 = MMA_SM80 + FP8
MMA_SM90 = MMA_SM89 + 3 * F64_PER_SHAPE                      # f64 m16n8k{4,8,16}: sm_90
MMA_SM120A_90 = MMA_SM90 + KIND_F8F6F4 + MXF4 + MXF4NVF4_90 + MXF8F6F4
# sm_75: f16 m8n8k4 + m16n8k8, int8 m8n8k16, int4 m8n8k32, b1 m8n8k128 .xor only (.and: sm_80)
MMA_SM75 = F16_M8N8K4 + F16_K8 + INT8_PER_SHAPE + INT4_PER_SHAPE + 1

# ---- mma.sp (9.7.14.6.3): variants {sp, sp::ordered_metadata} unless stated ----------------
# f16 {k16, k32} x (dtype == ctype: 2); bf16 {k16, k32}; tf32 {k8, k16}; int8 {k32, k64} and
# int4 {k64, k128} x sat 2 x 2 x 2; fp8 k64 f32 x 2 x 2 (sm_89)
SP_SM80 = 2 * (2 * 2 + 2 + 2 + 2 * 2 * 2 * 2 + 2 * 2 * 2 * 2)
SP_SM89 = SP_SM80 + 2 * (2 * 2)
# sm_120a (ordered_metadata only): kind::f8f6f4 k64 (d==c: 2) x 5 x 5; mxf4 2; mxf4nvf4 2 (9.0); mxf8f6f4 2 x 5 x 5
SP_SM120A_90 = SP_SM89 + 2 * 5 * 5 + 2 + 2 + 2 * 5 * 5
SP_SM120F_90 = SP_SM120A_90 - 2 - 2                         # mxf4/mxf4nvf4: sm_120a and sm_121a only

# ---- wmma (9.7.14.4.3-5), PTX >= 7.8: spaces {generic, .global, .shared, .shared::cta} = 4 --
SPACES = 4
LOAD_F16_BLOCK = 3 * (3 * 3 * 2 * SPACES)        # a, b: {f16,s8,u8}; c: {f16,f32,s32}; 3 shapes; 2 layouts
LOAD_BF16 = 2 * (3 * 2 * SPACES)                 # a, b bf16 (its c .f32 is the f16 block's)
LOAD_TF32 = LOAD_F64 = 3 * (1 * 2 * SPACES)      # a, b, c; one shape
LOAD_SUBBYTE = 2 * (2 * 1 * SPACES) + 2 * SPACES  # a row / b col x {s4,u4}; c s32 x 2 layouts
LOAD_B1 = 2 * (1 * SPACES) + 2 * SPACES           # a row / b col; c s32 x 2 layouts
WMMA_LOAD_SM80 = LOAD_F16_BLOCK + LOAD_BF16 + LOAD_TF32 + LOAD_F64 + LOAD_SUBBYTE + LOAD_B1
WMMA_LOAD_SM75 = LOAD_F16_BLOCK + LOAD_SUBBYTE + LOAD_B1
STORE = 3 * 3 * 2 * SPACES                       # {f16,f32,s32} x 3 shapes x 2 layouts
STORE_SUBBYTE = 2 * 2 * SPACES                   # s32 x {m8n8k32, m8n8k128} x 2 layouts
STORE_TF32 = STORE_F64 = 2 * SPACES
WMMA_STORE_SM80 = STORE + STORE_SUBBYTE + STORE_TF32 + STORE_F64
WMMA_STORE_SM75 = STORE + STORE_SUBBYTE
# wmma.mma: f16 4 layouts x 3 shapes x d 2 x c 2 (.satfinite removed in 6.5); integer 4 x 3 x
# (atype == btype: 2) x sat 2; bf16 4 x 3; tf32 4; f64 4 x rnd{none,rn,rz,rm,rp}; sub-byte
# row.col x (s4 or u4) x sat 2; b1 {xor, and}
WMMA_MMA_SM80 = 4 * 3 * 2 * 2 + 4 * 3 * 2 * 2 + 4 * 3 + 4 + 4 * 5 + 2 * 2 + 2
WMMA_MMA_SM75 = 4 * 3 * 2 * 2 + 4 * 3 * 2 * 2 + 2 * 2 + 1

WMMA80 = {"wmma.load": WMMA_LOAD_SM80, "wmma.store": WMMA_STORE_SM80, "wmma.mma": WMMA_MMA_SM80}

EXPECTED = {
    ("sm_75", "9.0"): {"mma": MMA_SM75, "wmma.load": WMMA_LOAD_SM75, "wmma.store": WMMA_STORE_SM75,
                       "wmma.mma": WMMA_MMA_SM75},
    ("sm_80", "9.0"): {"mma": MMA_SM80, "mma.sp": SP_SM80, **WMMA80},
    ("sm_89", "9.0"): {"mma": MMA_SM89, "mma.sp": SP_SM89, **WMMA80},
    ("sm_90", "9.0"): {"mma": MMA_SM90, "mma.sp": SP_SM89, **WMMA80},
    ("sm_100a", "9.0"): {"mma": MMA_SM90, "mma.sp": SP_SM89, **WMMA80},
    ("sm_120a", "9.0"): {"mma": MMA_SM120A_90, "mma.sp": SP_SM120A_90, **WMMA80},
    ("sm_120a", "9.1"): {"mma": MMA_SM120A_90 + 1, "mma.sp": SP_SM120A_90 + 1, **WMMA80},
    ("sm_120f", "9.0"): {"mma": MMA_SM120A_90, "mma.sp": SP_SM120F_90, **WMMA80},
}


def test_hand_counts_are_the_numbers_we_think():
    # the arithmetic above, spelled out once so a slip in a product is visible
    assert (MMA_SM80, MMA_SM89, MMA_SM90, MMA_SM120A_90, MMA_SM75) == (79, 95, 110, 214, 31)
    assert (SP_SM80, SP_SM89, SP_SM120A_90, SP_SM120F_90) == (80, 88, 192, 188)
    assert (WMMA_LOAD_SM80, WMMA_STORE_SM80, WMMA_MMA_SM80) == (352, 104, 138)


def _cli_counts(target: str, ptx: str) -> dict[str, int]:
    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = main(["list", "--target", target, "--ptx", ptx, "--count"])
    assert rc == 0
    out = {}
    for line in buf.getvalue().splitlines():
        k, v = line.split()
        out[k] = int(v)
    return out


@pytest.mark.parametrize("target,ptx", sorted(EXPECTED))
def test_list_counts(target, ptx):
    exp = dict(EXPECTED[(target, ptx)])
    exp["total"] = sum(exp.values())
    assert _cli_counts(target, ptx) == exp


def _selectors_by_class(fs) -> dict[tuple[str, str], set[tuple[int, ...]]]:
    out: dict[tuple[str, str], set] = {}
    for f in fs:
        out.setdefault((f.shape, f.atype), set()).add(tuple(f.selectors))
    return out


def test_sparse_selectors_listed_per_shape():
    # 9.7.14.6.1, read by hand: k16 f16/bf16 and k8 tf32: {0,1,2,3}; k32 f16/bf16, k16 tf32,
    # k32 int8, k64 int4: {0,1}; k64 int8, k128 int4, k64 fp8/f8f6f4, k128 e2m1: {0}
    sp = forms("sm_120a", "9.1", "mma.sp")
    got = _selectors_by_class(sp)
    four, two, one = (0, 1, 2, 3), (0, 1), (0,)
    want = {("m16n8k16", "f16"): four, ("m16n8k16", "bf16"): four, ("m16n8k8", "tf32"): four,
            ("m16n8k32", "f16"): two, ("m16n8k32", "bf16"): two, ("m16n8k16", "tf32"): two,
            ("m16n8k32", "u8"): two, ("m16n8k32", "s8"): two, ("m16n8k64", "u4"): two, ("m16n8k64", "s4"): two,
            ("m16n8k64", "u8"): one, ("m16n8k64", "s8"): one, ("m16n8k128", "u4"): one, ("m16n8k128", "s4"): one,
            ("m16n8k128", "e2m1"): one}
    for t in ("e4m3", "e5m2", "e3m2", "e2m3", "e2m1"):
        want[("m16n8k64", t)] = one
    assert got == {k: {v} for k, v in want.items()}
    # both variants are listed for every non-kind form
    variants = Counter((f.sparsity, f.kind is None) for f in sp)
    assert variants[("sp", True)] == variants[("sp::ordered_metadata", True)] == SP_SM89 // 2
    assert variants[("sp", False)] == 0


def test_list_json_has_operands_and_selectors():
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert main(["list", "--target", "sm_90", "--ptx", "9.0", "--family", "mma.sp", "--json"]) == 0
    rows = json.loads(buf.getvalue())
    assert len(rows) == SP_SM89
    for r in rows:
        assert set(r["operands"]) == {"a", "b", "c", "d", "e"} and r["selectors"]
    # a known row, read off the seed example (mma.sp m16n8k16 f16: A 2 regs, B 2, C/D 2 f16x2)
    row = next(r for r in rows if r["opcode"] == "mma.sp.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16")
    assert [row["operands"][k]["count"] for k in "abcd"] == [2, 2, 2, 2] and row["selectors"] == [0, 1, 2, 3]


def test_every_listed_form_is_legal_and_every_family_target_nonempty():
    from formal import legality

    for (t, p), fams in EXPECTED.items():
        fs = forms(t, p)
        assert Counter(f.family for f in fs) == Counter({k: v for k, v in fams.items() if v})
        for f in fs[::17]:
            assert legality(f, t, p).ok
