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
m8n8k4 .f16 (all layouts and c/d types): *not on the tensor core* -- ptxas emits FP32
    FMA-pipe code (:class:`~formal.numerics.params.FmaPipe`).  f32 D: one FFMA chain
    k = 0..3 from +0, then FADD c; f16 D: (FMUL+FFMA over k 0,1), (FMUL+FFMA over k 2,3),
    FADD c + first, FADD + second, F2FP round to nearest even.  Silicon + SASS.
tf32 -> f32 (m16n8k4, m16n8k8)
    drop the low 13 bits of each f32 operand, then BLOCK(n=8, F=25, -133, RZ, 23).
e4m3 / e5m2 (m16n8k16, m16n8k32): *software emulation* by ptxas [CUT1986]
    1. every element converted exactly to f16 (F2FP.F16.E4M3/E5M2.UNPACK_B);
    2. d1 = HMMA over {k : k mod 4 in {0, 1}} with C = 0;
    3. d2 = HMMA over {k : k mod 4 in {2, 3}} with C = d1;
    4. D = d2 + c, one IEEE add rounded to nearest even (FADD/HADD2): c is never truncated.
    m16n8k32 uses HMMA.16816 (16-term blocks), m16n8k16 HMMA.1688 (8-term blocks).
f64 (DMMA; m8n8k4, m16n8k4/8/16)
    a chain of correctly rounded f64 FMAs, c first, k ascending, in the instruction's
    rounding mode; NaN: per step the b operand's NaN, else the accumulator's, else a's,
    quieted (payload and sign kept); an invalid step gives 0xFFF8000000000000.
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
    nan_bits=0x7FFFFFFF,   # HIGH: silicon (H100 run1: all 42,651 f16 / 22,314 bf16 NaN outputs are 0x7FFFFFFF)
    zero_sign="positive",  # LOW: [KM25] model returns +0; run1 has no exact-zero sum (probe S2)
    pin_subnormals=True,   # HIGH that subnormals are supported, pinning MED (probe R)
    c_as_f32=True,
    truncation="magnitude",  # HIGH: floor variant fails 340-408/2000 vectors
    normalise_products=False,  # HIGH: normalised variant fails 159/2000
    c_entry="window",      # HIGH: late-c fails 89/2000
    subnormal_output="gradual",
    evidence="HIGH: silicon (H100 run1, 2304 warps each of f16 and bf16, 14 forms incl. sparse, 6 regimes, "
             "bit-exact; refutes F=24/26, n=8, RNE, floor truncation, late c, normalised/unpinned subnormals, "
             "NaN 0x7FC00000, and for bf16 IEEE RZ overflow) and [KM25] H100/H200 data (NOTES §2.2); "
             "minexp (-132/-133/-134 agree on all run1 data) MED, probes G*; zero sign LOW (no exact zero "
             "in run1; probes S2)",
)

HMMA_F16 = HMMA_F32.but(
    minexp=-21,        # MED: regularity minexp = emin_out - 5 - neab ([KM25] model); probe
    rounding="rn",     # HIGH: f16 accumulators round to nearest even ([KM25] data)
    nan_bits=0x7FFF,   # HIGH: silicon (H100 run1: all 43,199 NaN outputs are 0x7FFF)
    evidence="HIGH: silicon (H100 run1, 2304 warps, 14 forms, bit-exact; refutes NaN 0x7E00 and "
             "saturating overflow) and [KM25] H100 f16 data; minexp (-20/-21/-22 agree on run1) and the "
             "subnormal f16 c MED (probes G16*, R16); zero sign LOW (no exact zero in run1; probes S2)",
)

TF32_F32 = HMMA_F32.but(
    n=8,               # MED: published vectors have 4 products (probe D with k up to 7)
    tf32_conversion="truncate",  # HIGH: silicon (H100 run1; RN conversion refuted) and PTX text for wgmma
    tf32_nan="blind",  # HIGH: silicon (H100 run1: 3,721 registers refute "keep")
    evidence="HIGH: silicon (H100 run1, 2304 warps, m16n8k4/k8 dense + sparse, bit-exact; refutes n=4, "
             "RN conversion of the f32 container (115,538 registers), NaN kept from the low 13 bits "
             "(3,721 registers: a NaN whose payload is only in the dropped bits is read as Inf), NaN "
             "0x7FC00000) and [KM25] data; zero sign LOW (probes S2)",
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
    evidence="HIGH: silicon (H100 run1, 3456 warps, 16 forms: m16n8k16/k32 dense and m16n8k64 sparse, every "
             "e4m3/e5m2 pair, 6 regimes, bit-exact; one 16-k group for m16n8k16 refuted by 4,412 registers, "
             "c in the first HMMA by 50,686) + SASS (F2FP unpack, HMMA.1688 x2 for k16, HMMA.16816 x2 for "
             "k32, FADD c last)",
)

FP8_EMULATION_F16 = FP8_EMULATION_F32.but(
    hmma=HMMA_F16,
    add_nan_bits=0x7FFF,
    evidence="HIGH: silicon (H100 run1, 2304 warps, 8 forms m16n8k16/k32, 6 regimes, bit-exact; one 16-k "
             "group for m16n8k16 refuted by 14,837 registers) + SASS (HMMA.1688.F16 x2 / HMMA.16816.F16 x2, "
             "HADD2 c last); [KM25]-derived NOTES §3.4 data agrees for m16n8k32",
)

# m8n8k4 .f16 on sm_90 is NOT a tensor-core instruction: ptxas (13.0, sm_90a) emits
# SHFL + HADD2.F32 (exact f16->f32) + FMUL/FFMA/FADD + F2FP.F16.F32.PACK_AB.  The
# HFMA2.MMA seen in the SASS summary is only `HFMA2.MMA Rx, -RZ, RZ, 0, 0` (a zero move).
M8N8K4_F32 = FmaPipe(
    groups=((0, 1, 2, 3),),    # FFMA(a0,b0,RZ); FFMA(a1,b1,.); FFMA(a2,b2,.); FFMA(a3,b3,.)
    start="fma_zero",
    nan_bits=0x7FFFFFFF,       # FFMA/FADD canonical NaN
    evidence="HIGH: silicon (H100 run1, 2304 warps x 4 products, 4 layouts x 2 c types x 6 regimes, "
             "bit-exact; the tensor-core block refuted by 167,999 registers, a 2+2 split by 84,847, a "
             "descending chain by 59,313) + SASS (FFMA chain k=0..3 from RZ, then FADD c + chain); "
             "start FFMA(.,.,RZ) vs FMUL (sign of zero) from SASS only",
)

M8N8K4_F16 = M8N8K4_F32.but(
    groups=((0, 1), (2, 3)),   # FMUL(a0,b0); FFMA(a1,b1,.) | FMUL(a2,b2); FFMA(a3,b3,.)
    start="mul",
    out_nan_bits=0x7FFF,
    evidence="HIGH: silicon (H100 run1, 1152 warps x 4 products, 4 layouts x 6 regimes, bit-exact; the "
             "tensor-core block refuted by 18 registers, one f32 chain by 14) + SASS (two FMUL+FFMA pairs, "
             "FADD(FADD(c, p01), p23) in f32, F2FP.F16.F32 round to nearest even)",
)

F64_CHAIN = FmaChain(
    order="ascending", c_first=True,
    nan_rule="propagate",
    nan_priority=("b", "c", "a"),   # per step: a NaN b_k wins, then the accumulator, then a_k
    default_nan=0xFFF8000000000000,  # Inf*0 / Inf-Inf: negative quiet NaN
    nan_bits=0x7FFFFFFFFFFFFFFF,     # only used by nan_rule="canonical" variants
    evidence="HIGH: silicon (H100 run1, 5760 warps, 20 forms = 4 shapes x 5 rounding spellings, 6 regimes, "
             "bit-exact; descending order refuted by 234,526 registers, c last by 213,062, a canonical NaN "
             "by all 33,389 NaN outputs, other NaN priorities by 2,384-2,614, a positive default NaN by "
             "949); .rz/.rm/.rp honoured (89,684-112,730 of 129,024 registers each differ from .rn); each "
             "step one correctly rounded FMA (PTX text; [FHMP21] A100). SASS: DMMA.8 / DMMA.16",
)

INTEGER = IntegerDot(
    saturation="final",
    evidence="HIGH: silicon (H100 run1, 3456 warps, 144 s8/u8/s4/u4 forms dense + sparse, bit-exact; 6,371 "
             "registers refute per-step saturation) + SASS (int4 forms run on s8 IMMA after sign/zero "
             "extension; .satfinite = IADD of the IMMA partial sums to c, then SEL clamps on signed "
             "overflow: the exact final sum is clamped) + PTX text",
)

POPC = Popc(evidence="HIGH: silicon (H100 run1, 144 warps, 6 forms bit-exact) + SASS (.xor is emulated: "
                     "BMMA.AND.POPC(a, ~b) + BMMA.AND.POPC(~a, b) + c; .and is one BMMA.AND.POPC)")

SM90 = ArchModel(
    name="sm_90",
    evidence="H100/H200. Silicon: every register-level sm_90 mma/mma.sp form reproduced bit for bit on "
             "H100 run1 (27,792 warps, 6 input regimes; tools/compare_capture.py); [KM25] published "
             "vectors agree. Open: zero signs, minexp floors, block boundaries (probes)",
    sources=("HW1", "SASS", "KM25", "FHMP21", "FTTN", "dfyz", "huweim", "CUT1986", "SA2", "DSV3", "PTX", "NOTES"),
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
        "sparse": "mma.sp: the stored (compressed) k order forms the blocks, with the same n (HIGH: silicon, "
                  "H100 run1: every sparse f16/bf16/tf32/fp8/int form and selector bit-exact)",
        "wgmma": "not modelled here: QGMMA fp8 is BLOCK(32, 13, -133, RZ, 13) with C inside the window",
    }),
)
