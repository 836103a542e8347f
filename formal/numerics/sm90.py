"""The sm_90 (H100 / H200) arithmetic model, in one place.

This is the model that must equal silicon bit for bit.  It is a table of parameter
records (:mod:`formal.numerics.params`); the algorithm they parameterise is
:mod:`formal.numerics.block` (numerics.md §2), and every number below carries its
evidence.  To refine it from hardware captures, change a number here; hypotheses
under test are listed in :mod:`formal.numerics.probes`.

Per instruction (numerics.md §3):

``mma.sync`` / ``wmma`` f16 or bf16 -> f32 (SASS HMMA.16816 / HMMA.1688)
    BLOCK(n=16, F=25, minexp=-133, RZ, 23 fraction bits); m16n8k8 is one 8-term block.
f16 -> f16
    BLOCK(n=16, F=25, minexp=-21, RNE, 10 fraction bits); c is read as an f32.
m8n8k4 with .ctype f16 / .dtype f32
    the f16 -> f32 block with the f16 c widened exactly (LOW: untested).
tf32 -> f32 (m16n8k4, m16n8k8)
    drop the low 13 bits of each f32 operand, then BLOCK(n=8, F=25, -133, RZ, 23).
e4m3 / e5m2 (m16n8k16, m16n8k32): *software emulation* by ptxas [CUT1986]
    1. every element converted exactly to f16;
    2. d1 = HMMA over {k : k mod 4 in {0, 1}} with C = 0;
    3. d2 = HMMA over {k : k mod 4 in {2, 3}} with C = d1;
    4. D = d2 + c, one IEEE add rounded to nearest even (FADD/HADD): c is never truncated.
    (m16n8k16: one HMMA over all 16 k: LOW, a guess from the register layout.)
f64 (DMMA; m8n8k4, m16n8k4/8/16)
    a chain of correctly rounded f64 FMAs, c first, k ascending (order MED-LOW).
s8/u8/s4/u4 -> s32
    exact; wrap mod 2**32, or clamp the exact final sum with .satfinite.
b1
    c + popc(row AND/XOR col), wrap.
"""
from __future__ import annotations

from types import MappingProxyType

from .params import (ArchModel, BlockFMA, Emulated, FmaChain, FmaPipe, IntegerDot, Popc, mod4_groups)

# ---- the f16-family tensor-core blocks ------------------------------------------------

HMMA_F32 = BlockFMA(
    n=16,              # HIGH: [KM25] data; n=8 fails 637/2000 H100 f16 vectors (numerics.md §2.2)
    F=25,              # HIGH: 23 + 2 extra alignment bits ([KM25], [FTTN] >=2, [huweim] 25-bit, [dfyz])
    minexp=-133,       # HIGH for bf16 ([KM25] issue #7 value 0x1.6p-146), MED for f16
    rounding="rz",     # HIGH: final normalisation truncates ([FHMP21], [KM25])
    out_frac=None,     # 23: full f32
    overflow="inf",    # MED: [KM25]'s exceptional-case script asserts Inf (probes H1/H2)
    nan_bits=0x7FFFFFFF,   # LOW-MED: canonical NaN assumed (probe S1)
    zero_sign="positive",  # LOW: [KM25] model returns +0 (probe S2)
    pin_subnormals=True,   # HIGH that subnormals are supported, pinning MED (probe R)
    c_as_f32=True,
    truncation="magnitude",  # HIGH: floor variant fails 340-408/2000 vectors
    normalise_products=False,  # HIGH: normalised variant fails 159/2000
    c_entry="window",      # HIGH: late-c fails 89/2000
    subnormal_output="gradual",
    evidence="HIGH (n, F, RZ, truncation, c in window: [KM25] H100/H200 data reproduced bit-exactly, "
             "NOTES §2.2; [dfyz] wgmma bf16); MED: minexp for f16, overflow->Inf; LOW: NaN bits, zero sign",
)

HMMA_F16 = HMMA_F32.but(
    minexp=-21,        # MED: regularity minexp = emin_out - 5 - neab ([KM25] model); probe
    rounding="rn",     # HIGH: f16 accumulators round to nearest even ([KM25] data)
    nan_bits=0x7FFF,   # LOW: canonical f16 NaN assumed
    evidence="HIGH (n, F, RNE: [KM25] H100 mma.sync f16 data); MED minexp; LOW NaN bits, zero sign, "
             "subnormal f16 c read at its true exponent",
)

TF32_F32 = HMMA_F32.but(
    n=8,               # MED: published vectors have 4 products (probe D with k up to 7)
    tf32_conversion="truncate",  # HIGH for wgmma (PTX text), MED for mma.sync ([KM25] models RZ); probe K1
    tf32_nan="blind",  # LOW: a NaN whose payload is only in the dropped bits becomes Inf (probe K2)
    evidence="HIGH F/RZ ([KM25] data); MED n=8 and input truncation; LOW low-payload NaN",
)

FP8_EMULATION_F32 = Emulated(
    via="f16",
    hmma=HMMA_F32,
    # SASS (ptxas 13.0, sm_90a): m16n8k32 -> F2FP.F16.E4M3/E5M2.UNPACK_B + 2x HMMA.16816,
    # m16n8k16 -> 2x HMMA.1688 (8-term blocks); the low f16x2 half of each fp8 register
    # (k mod 4 in {0,1}) feeds the first HMMA (C = RZ), the high half the second; then FADD/HADD2 c.
    groups=((32, mod4_groups(32)), (16, mod4_groups(16))),
    c_add="rn",
    add_nan_bits=0x7FFFFFFF,
    evidence="HIGH: silicon (H100, run1: 0 mismatches in 576 warps per form over 6 regimes, m16n8k16 and "
             "m16n8k32, every e4m3/e5m2 pair, dense and sparse) + SASS (F2FP unpack, HMMA.1688 x2 for k16, "
             "HMMA.16816 x2 for k32, FADD c last)",
)

FP8_EMULATION_F16 = FP8_EMULATION_F32.but(
    hmma=HMMA_F16,
    add_nan_bits=0x7FFF,
    evidence="HIGH: silicon (H100, run1: 0 mismatches in 576 warps per form over 6 regimes, m16n8k16 and "
             "m16n8k32) + SASS (HMMA.1688.F16 x2 / HMMA.16816.F16 x2, HADD2 c last); [KM25]-derived "
             "NOTES §3.4 data agrees for m16n8k32",
)

# m8n8k4 .f16 on sm_90 is NOT a tensor-core instruction: ptxas (13.0, sm_90a) emits
# SHFL + HADD2.F32 (exact f16->f32) + FMUL/FFMA/FADD + F2FP.F16.F32.PACK_AB.  The
# HFMA2.MMA seen in the SASS summary is only `HFMA2.MMA Rx, -RZ, RZ, 0, 0` (a zero move).
M8N8K4_F32 = FmaPipe(
    groups=((0, 1, 2, 3),),    # FFMA(a0,b0,RZ); FFMA(a1,b1,.); FFMA(a2,b2,.); FFMA(a3,b3,.)
    start="fma_zero",
    nan_bits=0x7FFFFFFF,       # FFMA/FADD canonical NaN
    evidence="HIGH: silicon (H100, run1: every output of 4 layouts x 2 c types x 6 regimes, "
             "48 warps x 4 products each) + SASS (FFMA chain k=0..3 from RZ, then FADD c + chain)",
)

M8N8K4_F16 = M8N8K4_F32.but(
    groups=((0, 1), (2, 3)),   # FMUL(a0,b0); FFMA(a1,b1,.) | FMUL(a2,b2); FFMA(a3,b3,.)
    start="mul",
    out_nan_bits=0x7FFF,
    evidence="HIGH: silicon (H100, run1: 4 layouts x 6 regimes) + SASS (two FMUL+FFMA pairs, "
             "FADD(FADD(c, p01), p23) in f32, F2FP.F16.F32 round to nearest even)",
)

F64_CHAIN = FmaChain(
    order="ascending", c_first=True,
    nan_rule="propagate",
    nan_priority=("b", "c", "a"),   # per step: a NaN b_k wins, then the accumulator, then a_k
    default_nan=0xFFF8000000000000,  # Inf*0 / Inf-Inf: negative quiet NaN
    nan_bits=0x7FFFFFFFFFFFFFFF,     # only used by nan_rule="canonical" variants
    evidence="HIGH: silicon (H100, run1: every f64 form, all 5 rounding spellings, 6 regimes; all 33,389 NaN "
             "outputs reproduced by the per-step NaN rule, every other NaN priority fails 2-15%; finite "
             "outputs bit-exact with the ascending c-first chain); each step one correctly rounded FMA "
             "(PTX text; [FHMP21] A100). SASS: DMMA.8 (m8n8k4) / DMMA.16 (m16n8k4/8/16), the .rnd "
             "spelling honoured (rz/rm/rp outputs differ from rn and match the chain in that mode)",
)

INTEGER = IntegerDot(
    saturation="final",
    evidence="HIGH exact + wrap (PTX text); MED that .satfinite clamps the exact final sum (probe I2)",
)

POPC = Popc(evidence="HIGH (PTX text; exact integer arithmetic)")

SM90 = ArchModel(
    name="sm_90",
    evidence="H100/H200. HIGH where [KM25]'s published hardware vectors pin the parameter; see each path",
    sources=("KM25", "FHMP21", "FTTN", "dfyz", "huweim", "CUT1986", "SA2", "DSV3", "PTX", "NOTES"),
    paths=MappingProxyType({
        "f16.f32": HMMA_F32,
        "bf16.f32": HMMA_F32,
        "f16.f16": HMMA_F16,
        "tf32.f32": TF32_F32,
        "f8.f32": FP8_EMULATION_F32,
        "f8.f16": FP8_EMULATION_F16,
        "f16.f32@m8n8k4": M8N8K4_F32,
        "f16.f16@m8n8k4": M8N8K4_F16,
        "f64": F64_CHAIN,
        "int": INTEGER,
        "b1": POPC,
    }),
    input_types=frozenset({"f16", "bf16", "tf32", "e4m3", "e5m2", "f64", "s8", "u8", "s4", "u4", "b1"}),
    notes=MappingProxyType({
        "sparse": "mma.sp: the stored (compressed) k order forms the blocks, with the same n (LOW)",
        "wgmma": "not modelled here: QGMMA fp8 is BLOCK(32, 13, -133, RZ, 13) with C inside the window",
    }),
)
