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
    BLOCK(n=16, F=25, minexp=-21, RNE, 10 fraction bits); c is read as an f16, so a
    subnormal c aligns at exponent -14 (silicon, run2 probe R16).
Zero results of every HMMA block are +0: an exact-zero sum, and (f16 accumulator: silicon,
    run2 vectors; f32 accumulator: by analogy, probes S2u/S2utf) a nonzero sum that
    rounds to zero.
m8n8k4 .f16 (all layouts and c/d types): *not on the tensor core* -- ptxas emits FP32
    FMA-pipe code (:class:`~formal.numerics.params.FmaPipe`).  f32 D: one FFMA chain
    k = 0..3 from +0, then FADD c; f16 D: (FMUL+FFMA over k 0,1), (FMUL+FFMA over k 2,3),
    FADD c + first, FADD + second, F2FP round to nearest even.  Silicon + SASS.
f16 -> f32 from an f16 C (wmma only): ptxas widens C exactly (HADD2.F32), then HMMA.16816.F32:
    the f32 block above with c read as an f32 (c_as_f32).  Silicon (run3 wmma pipelines) + SASS.
f16 D from an f32 C (wmma m16n16k16 / m8n32k16 / m32n8k16 only; key "f16.f16@c=f32"):
    HMMA.16816.F32 (the f32 block, RZ into f32) then F2FP.F16.F32 (RN into f16): rounded
    twice (:class:`~formal.numerics.params.Narrowed`).  Silicon (run3 wmma pipelines) + SASS.
tf32 -> f32 (m16n8k4, m16n8k8)
    drop the low 13 bits of each f32 operand, then BLOCK(n=8, F=25, -133, RZ, 23).
    wmma m16n16k8 (key "tf32.f32@m16n16k8"): two chained HMMA.1684 per 16x8 tile, i.e.
    n=4 (k 0-3 into c, then k 4-7).  Silicon (run3 wmma pipelines) + SASS.
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

from .params import (ArchModel, BlockFMA, Emulated, FmaChain, FmaPipe, IntegerDot, Narrowed, Popc,
                     mod4_groups)

# ---- the f16-family tensor-core blocks ------------------------------------------------

HMMA_F32 = BlockFMA(
    n=16,              # HIGH: silicon (run2 probes D8-D15 refute n=8, D4-D7 n=4) + [KM25] data
    F=25,              # HIGH: silicon (run2 probe A refutes F=26; run1 refutes F=24) + [KM25], [FTTN], [huweim]
    minexp=-133,       # HIGH: silicon (run2 probes G158 refutes -132, G159 refutes -134; bf16) + [KM25]
                       #   issue #7 (0x1.6p-146).  Unobservable with f16 inputs: their products align at
                       #   >= -28 and an f32 c at >= -126, so the floor never binds there
    rounding="rz",     # HIGH: silicon (run2 probe C refutes RNE; run1 47,138 registers) + [FHMP21], [KM25]
    out_frac=None,     # 23: full f32
    overflow="inf",    # HIGH: silicon (run2 probe H1 (bf16): +Inf, IEEE RZ max-finite refuted; H2 no overflow)
    nan_bits=0x7FFFFFFF,   # HIGH: silicon (run1: all 42,651 f16 / 22,314 bf16 NaN outputs; run2 S1a-S1f)
    zero_sign="positive",  # HIGH: silicon (run2 probes S2i cancellation, S2ii c=-0, S2iii -0 products and
                           #   c=-0, S2bf (bf16): all +0; IEEE signs refuted by S2iii/S2bf)
    rounded_zero_sign="positive",  # LOW: by analogy with the f16 accumulator (silicon, run2 vectors:
                           #   a nonzero sum that rounds to zero gives +0); reachable only from bf16/tf32
                           #   inputs (f16 products and f32 c keep |S| >= 2^-149); probes S2u, S2utf
    pin_subnormals=True,   # HIGH: silicon (run2 probe R refutes true exponents; run1 3 registers)
    c_as_f32=True,         # c is an f32 here; a subnormal f32 c aligns at -126 (pin_c; probe R32).  An f16 c
                           #   (wmma .f32.f16) is widened exactly first (SASS: HADD2.F32), so it is read as an
                           #   f32 too: silicon, run3 wmma pipelines (24 f16 x f16 + f16 -> f32 entries bit-exact)
    pin_c=True,
    truncation="magnitude",  # HIGH: silicon (run2 probe B refutes floor and RZ of the exact sum; run1)
    normalise_products=False,  # HIGH: silicon (run2 probe F refutes normalised products)
    c_entry="window",      # HIGH: silicon (run2 probe E1 refutes late c; run1 73,522 registers)
    subnormal_output="gradual",
    evidence="HIGH: silicon (H100 run1, 2304 warps each of f16 and bf16, 14 forms incl. sparse, 6 regimes, "
             "bit-exact; refutes F=24/26, n=8, RNE, floor truncation, late c, normalised/unpinned subnormals, "
             "NaN 0x7FC00000, and for bf16 IEEE RZ overflow; run2: 41 probes (A-H3, D1-D15, R, S1a-S1g, "
             "S2i-S2iii, S2bf) agree, hw-check 2,904,000 warps over all non-f64 forms bit-exact) and [KM25] "
             "H100/H200 data "
             "(NOTES §2.2). Open (LOW): the sign of a nonzero bf16/tf32 sum that rounds to zero (probes "
             "S2u, S2utf) and a subnormal f32 c's alignment (probe R32)",
)

HMMA_F16 = HMMA_F32.but(
    minexp=-21,        # HIGH: silicon (run2 probes G16 refutes no floor / -23, G16_46 refutes -20,
                       #   G16_47 refutes -22) = emin_out - 5 - neab ([KM25] model)
    rounding="rn",     # HIGH: silicon (run2 probe P refutes RZ) + [KM25] data
    nan_bits=0x7FFF,   # HIGH: silicon (H100 run1: all 43,199 NaN outputs are 0x7FFF)
    c_as_f32=False,    # HIGH: silicon (run2 probe R16: c = 2^-23, an f16 subnormal, aligns at -14, so
                       #   a 2^-44 product is cut from the window: observed 0x0002; c read as an f32
                       #   (its true exponent -23) predicts 0x0003)
    rounded_zero_sign="positive",  # HIGH: silicon (run2 vectors: 6 forms, m16n8k8/k16 dense and sparse,
                       #   a = (2^-24, 1023*2^-24), b = (2^-24, -1023*2^-24), c = +0: S = -1046528*2^-48
                       #   rounds to zero, silicon +0, the sum's sign -0)
    evidence="HIGH: silicon (H100 run1, 2304 warps, 14 forms, bit-exact; refutes NaN 0x7E00 and "
             "saturating overflow; run2: probes G16, G16_46, G16_47 fix minexp = -21, P (RNE), H16 "
             "(overflow to Inf), R16 (a subnormal f16 c aligns at -14), S2h (+0); the run2 vectors "
             "(593 on the 6 f16-accumulator HMMA forms) fix the +0 of a nonzero sum that rounds to zero) and "
             "[KM25] H100 f16 data",
)

TF32_F32 = HMMA_F32.but(
    n=8,               # HIGH: silicon (run2 probes DT4, DT5, DT7 refute n=4; run1 14,658 registers)
    tf32_conversion="truncate",  # HIGH: silicon (run1; run2 K1, K1k4 refute RN) and PTX text for wgmma
    tf32_nan="blind",  # HIGH: silicon (run1: 3,721 registers refute "keep"; run2 K2)
    evidence="HIGH: silicon (H100 run1, 2304 warps, m16n8k4/k8 dense + sparse, bit-exact; refutes n=4, "
             "RN conversion of the f32 container (115,538 registers), NaN kept from the low 13 bits "
             "(3,721 registers: a NaN whose payload is only in the dropped bits is read as Inf), NaN "
             "0x7FC00000; run2 probes K1, K1k4 (truncation), K2 (blind NaN), DT4/DT5/DT7 (n=8, n=4 "
             "refuted), S2tf (+0 for -0 products and c = -0)) and [KM25] data. Open (LOW): the sign of "
             "a nonzero sum that rounds to zero (probe S2utf)",
)

# wmma.mma m16n16k8 .f32.tf32.tf32.f32: ptxas (13.0 and 13.5, sm_90/sm_90a) emits, per 16x8 tile of D,
# HMMA.1684.F32.TF32 over k 0-3 with C, then HMMA.1684.F32.TF32 over k 4-7 with the first's D as C;
# mma.m16n8k8 tf32 is one HMMA.1688.F32.TF32 (n=8, TF32_F32).
TF32_F32_WMMA_K8 = TF32_F32.but(
    n=4,               # HIGH: silicon (H100 run3 wmma pipelines: all 8 m16n16k8 entries x 8 runs bit-exact with
                       #   n=4; n=8 (one block, the mma.m16n8k8 record) refuted by 2,588 of 16,384 elements, every
                       #   entry; k 4-7 in the first block refuted by 4,063) + SASS (2 x HMMA.1684.F32.TF32 chained)
    evidence="HIGH: silicon (H100 run3: the 8 wmma.mma m16n16k8 tf32 pipelines (every layout of A, B and C/D) "
             "x 8 runs = 16,384 outputs bit-exact; the n=8 block of mma.m16n8k8 refuted by 2,588 outputs in "
             "every entry, k 4-7 first by 4,063) + SASS (ptxas 13.0/13.5, sm_90 and sm_90a: two chained "
             "HMMA.1684.F32.TF32 per 16x8 tile, k 0-3 then k 4-7). Every other field as TF32_F32 (same HMMA "
             "datapath; not separately probed)",
)

# wmma.mma .f16 D with an .f32 C (m16n16k16, m8n32k16, m32n8k16): no HMMA reads an f32 C into an
# f16 D, so ptxas (13.0 and 13.5, sm_90/sm_90a) emits HMMA.16816.F32 and then F2FP.F16.F32.PACK_AB.
HMMA_F32_TO_F16 = Narrowed(
    inner=HMMA_F32,    # HIGH: silicon (run3: one rounding refuted by 3 outputs, see evidence) + SASS: the
                       #   f32-accumulator block, RZ into f32
    via="f32",
    rounding="rn",     # HIGH: silicon (run3: RZ refuted by 36,483 outputs) + SASS (F2FP.F16.F32 without .RZ)
    nan_bits=0x7FFF,   # MED: F2FP's NaN as silicon shows it for m8n8k4 f16 D (run1, FmaPipe out_nan_bits);
                       #   run3's entries hold no NaN
    evidence="HIGH: silicon (H100 run3: the 24 wmma.mma f16 x f16 + f32 -> f16 pipelines (3 shapes x 4 A/B "
             "layouts x 2 C/D layouts) x 8 runs = 49,152 outputs (23,649 of them overflows to Inf) bit-exact; "
             "one RNE rounding of the block sum into f16 (the f16.f16 record, the model before run3) refuted "
             "by 3 outputs (wp0035 D[7,26] run 0: silicon 0xbfae, one rounding 0xbfaf; wp0067), an RZ F2FP by "
             "36,483, C rounded to f16 then the f16-accumulator HMMA by 3,910) + SASS (ptxas 13.0/13.5, "
             "sm_90 and sm_90a: HMMA.16816.F32 then F2FP.F16.F32.PACK_AB). Open (MED): NaN bits (0x7FFF as F2FP gives for m8n8k4), the sign of a "
             "result that rounds to zero (IEEE: kept; run3 has no zero outputs here)",
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
             "c in the first HMMA by 50,686; run2 probes M1, M2, M3, L3 (k mod 4 groups, c added last in "
             "RN, all bits of c kept), M16 (two HMMA.1688 for m16n8k16), S2f8 (+0) agree) + SASS (F2FP "
             "unpack, HMMA.1688 x2 for k16, HMMA.16816 x2 for k32, FADD c last)",
)

FP8_EMULATION_F16 = FP8_EMULATION_F32.but(
    hmma=HMMA_F16,
    add_nan_bits=0x7FFF,
    evidence="HIGH: silicon (H100 run1, 2304 warps, 8 forms m16n8k16/k32, 6 regimes, bit-exact; one 16-k "
             "group for m16n8k16 refuted by 14,837 registers; run2 probe M2h agrees) + SASS (HMMA.1688.F16 "
             "x2 / HMMA.16816.F16 x2, HADD2 c last); [KM25]-derived NOTES §3.4 data agrees for m16n8k32. "
             "The HMMAs are HMMA_F16 (c pinned, +0 zeros); an intermediate zero's sign cannot reach D "
             "(a zero c takes no part in the next HMMA, whose own zero is +0)",
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
             "descending chain by 59,313) + SASS (FFMA chain k=0..3 from RZ, then FADD c + chain); run2 "
             "probes Z4 (-0 products and c = -0 give +0: FFMA from +0, FMUL first refuted) and O4 "
             "(ascending chain; one tensor-core block and a descending chain refuted)",
)

M8N8K4_F16 = M8N8K4_F32.but(
    groups=((0, 1), (2, 3)),   # FMUL(a0,b0); FFMA(a1,b1,.) | FMUL(a2,b2); FFMA(a3,b3,.)
    start="mul",
    out_nan_bits=0x7FFF,
    evidence="HIGH: silicon (H100 run1, 1152 warps x 4 products, 4 layouts x 6 regimes, bit-exact; the "
             "tensor-core block refuted by 18 registers, one f32 chain by 14; run2 probe Z4h: -0 products "
             "and c = -0 give -0, so each pair starts with FMUL, FFMA(.,.,+0) refuted) + SASS (two "
             "FMUL+FFMA pairs, FADD(FADD(c, p01), p23) in f32, F2FP.F16.F32 round to nearest even)",
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
             "step one correctly rounded FMA (PTX text; [FHMP21] A100); run2 probes D64rn/rz/rm/rp, "
             "N64a-N64e (NaN rule: canonical, a-before-b and a positive default NaN refuted again) and "
             "S2f64 (-0 kept, IEEE) agree; the order probes D64* errored (numpy 2.5 in the harness) and "
             "wait for the next run. SASS: DMMA.8 / DMMA.16",
)

# wgmma (sm_90a warpgroup MMA, M = 64) with e4m3 / e5m2 inputs runs natively (QGMMA): one block
# per 32 k with a 13-bit window and c inside it, where mma.sync emulates fp8 through f16 HMMAs.
# Every other wgmma type takes the mma.sync path of the same types (checked on silicon below).
WGMMA_FP8_F32 = HMMA_F32.but(
    n=32, F=13, out_frac=13,
    evidence="HIGH: silicon (H200 wgmma run 2026-11-28: all four e4m3/e5m2 combinations, f32 accumulator, "
             "7 input regimes incl. specials and subnormals, imm-scale-a/b = -1, scale-d = 0 and 1, 608,768 "
             "outputs bit-exact; refutes n = 16, F = 14 and a full 23-bit f32 output) + [huweim] (13 bits "
             "RZ), [DSV3]",
)

WGMMA_FP8_F16 = HMMA_F16.but(
    n=32, F=13,
    evidence="HIGH: silicon (H200 wgmma run 2026-11-28: all four e4m3/e5m2 combinations, f16 accumulator, "
             "7 input regimes, imm-scale -1, scale-d = 0 and 1, 606,720 outputs bit-exact; refutes n = 16, F = 14)",
)

INTEGER = IntegerDot(
    saturation="final",
    evidence="HIGH: silicon (H100 run1, 3456 warps, 144 s8/u8/s4/u4 forms dense + sparse, bit-exact; 6,371 "
             "registers refute per-step saturation; run2 probes I1 (wrap), I2 (final clamp, per-step "
             "refuted), I3 (s4 sign extension)) + SASS (int4 forms run on s8 IMMA after sign/zero "
             "extension; .satfinite = IADD of the IMMA partial sums to c, then SEL clamps on signed "
             "overflow: the exact final sum is clamped) + PTX text",
)

POPC = Popc(evidence="HIGH: silicon (H100 run1, 144 warps, 6 forms bit-exact; run2 probe I4) + SASS (.xor is "
                     "emulated: "
                     "BMMA.AND.POPC(a, ~b) + BMMA.AND.POPC(~a, b) + c; .and is one BMMA.AND.POPC)")

SM90 = ArchModel(
    name="sm_90",
    evidence="H100/H200. Silicon: every register-level sm_90 mma/mma.sp form reproduced bit for bit on "
             "H100 run1 (27,792 warps, 6 input regimes; tools/compare_capture.py) and run2 (hw-check "
             "2,904,000 warps over 242 non-f64 cases; 80 probes; 14,742 edge-case vectors); every sm_90 "
             "wmma load -> mma -> store pipeline on H100 run3 (276 entries x 8 runs); [KM25] "
             "published vectors agree. Open: f64 order probes (run1 decides), the sign of a bf16/tf32 sum "
             "that rounds to zero and a subnormal f32 c (probes S2u, S2utf, R32)",
    sources=("HW1", "HW2", "HW3", "SASS", "KM25", "FHMP21", "FTTN", "dfyz", "huweim", "CUT1986", "SA2", "DSV3", "PTX",
             "NOTES"),
    paths=MappingProxyType({
        "f16.f32": HMMA_F32,
        "bf16.f32": HMMA_F32,
        "f16.f16": HMMA_F16,
        "tf32.f32": TF32_F32,
        "tf32.f32@m16n16k8": TF32_F32_WMMA_K8,
        "f16.f16@c=f32": HMMA_F32_TO_F16,
        "f8.f32": FP8_EMULATION_F32,
        "f8.f16": FP8_EMULATION_F16,
        "f16.f32@m8n8k4": M8N8K4_F32,
        "f16.f16@m8n8k4": M8N8K4_F16,
        "f8.f32@m64": WGMMA_FP8_F32,
        "f8.f16@m64": WGMMA_FP8_F16,
        "f64": F64_CHAIN,
        "int": INTEGER,
        "b1": POPC,
    }),
    input_types=frozenset({"f16", "bf16", "tf32", "e4m3", "e5m2", "f64", "s8", "u8", "s4", "u4", "b1"}),
    notes=MappingProxyType({
        "sparse": "mma.sp: the stored (compressed) k order forms the blocks, with the same n (HIGH: silicon, "
                  "H100 run1: every sparse f16/bf16/tf32/fp8/int form and selector bit-exact)",
        "wgmma": "M = 64 (wgmma.mma_async): fp8 takes the native QGMMA block (paths f8.*@m64); f16, bf16, "
                 "tf32, s8/u8 and b1 take the mma.sync paths (silicon, H200 run 2026-11-28: every dense type "
                 "combination, 7 input regimes, imm-scale -1 = the input's sign flipped (NaN and -0 too), "
                 "scale-d = 0 = c of +0, bit-exact)",
    }),
)
