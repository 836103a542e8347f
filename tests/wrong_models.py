"""Deliberately wrong hardware models, one per mechanism (for tests/test_audit_mechanisms.py).

Each is a register-level model like a user's simulator: it unpacks the fragments with
``formal.layout`` and computes D with ``formal.numerics`` under a wrong parameter (or
with a wrong input handling), so exactly one mechanism differs from the sm_90 model."""

import numpy as np

from formal import layout
from formal.catalog import parse
from formal.numerics import mma_matrices
from formal.numerics.archs import SM90
from formal.numerics.sm90 import HMMA_F32, HMMA_F16

BF16 = "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
F16F16 = "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16"
F16F32 = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
TF32 = "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"
F64 = "mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64"
E4M3 = "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32"
E4M3_F16 = "mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e5m2.f16"


def regs_model(arch, name, c_transform=None):
    """A register-level model computing D with ``arch`` (an ArchModel), c optionally altered."""
    def model(opcode, a, b, c, e=None, sel=None):
        f = parse(opcode)
        A, B, C = (np.asarray(layout.unpack(f, op, x)) for op, x in (("a", a), ("b", b), ("c", c)))
        if c_transform is not None:
            C = c_transform(C)
        lead = B.shape[:-2]
        A, B, C = (x.reshape((-1,) + x.shape[-2:]) for x in (A, B, C))
        D = mma_matrices(A, B, C, atype=f.atype, btype=f.btype, ctype=f.ctype, dtype=f.dtype, arch=arch,
                         shape=f.mnk, rounding=f.rounding)
        return layout.pack(f, "d", D.reshape(lead + D.shape[-2:]))
    model.__name__ = name
    return model


def _cut_c_low_bits(C):
    return C & np.uint64(~np.uint64(0xFF) & np.uint64(0xFFFFFFFF))      # f32 c keeps 15 of 23 fraction bits


#: (name, form, model, the coverage point built for the mechanism, most terms a minimal witness needs)
WRONG = [
    ("floor -126 with c = 0 (MMA-Sim, bf16)", BF16, regs_model(SM90.replace_path("bf16.f32", minexp=-126), "floor126_bf16"),
     "mech:acc_floor", 3),
    ("floor -14 with c = 0 (MMA-Sim, f16 -> f16)", F16F16,
     regs_model(SM90.replace_path("f16.f16", minexp=-14), "floor14_f16"), "mech:acc_floor", 3),
    ("floor -126 with c = 0 (tf32)", TF32, regs_model(SM90.replace_path("tf32.f32", minexp=-126), "floor126_tf32"),
     "mech:acc_floor", 3),
    ("NaN precedence c, a, b (f64)", F64, regs_model(SM90.replace_path("f64", nan_priority=("c", "a", "b")),
                                                     "nan_cab"), "mech:nan_precedence", 3),
    ("NaN precedence a first (MMA-Sim, f64)", F64,
     regs_model(SM90.replace_path("f64", nan_priority=("a", "b", "c")), "nan_abc"), "mech:nan_precedence", 3),
    ("fp8 as one native block, no k mod 4 groups (e4m3 -> f32)", E4M3,
     regs_model(SM90.with_path("f8.f32", HMMA_F32.but(n=None)), "fp8_native_f32"), "mech:fp8_groups", 4),
    ("fp8 as one native block (e4m3.e5m2 -> f16)", E4M3_F16,
     regs_model(SM90.with_path("f8.f16", HMMA_F16.but(n=None)), "fp8_native_f16"), "mech:fp8_groups", 4),
    ("RN instead of truncation (f16 -> f32)", F16F32,
     regs_model(SM90.replace_path("f16.f32", rounding="rn"), "rn_f16"), "mech:rounding", 3),
    ("RN instead of truncation (bf16 -> f32)", BF16,
     regs_model(SM90.replace_path("bf16.f32", rounding="rn"), "rn_bf16"), "mech:rounding", 3),
    ("c with 8 fraction bits dropped (bf16 -> f32)", BF16,
     regs_model(SM90, "coarse_c", c_transform=_cut_c_low_bits), "mech:c_precision", 3),
    ("fp8: c inside the first HMMA (e4m3 -> f32)", E4M3,
     regs_model(SM90.with_path("f8.f32", SM90.paths["f8.f32"].but(c_add="window")), "fp8_c_in_window"),
     "mech:fp8_late_c", 3),
]


# ------------------------------------------------------------------------------------------
# Independent implementations (issue 19): the sm_90 HMMA block of numerics.md §2 written out
# again from its description in plain Python integers -- no formal.numerics, no formal.layout --
# with one mechanism changed.  Matrix level: model(opcode, A, B, C) -> D on raw encodings.

_FMTS = {"f16": (5, 10, 0), "bf16": (8, 7, 0), "tf32": (8, 10, 13), "f32": (8, 23, 0)}  # exp bits, frac bits, low bits dropped
_NAN = {"f32": 0x7FFFFFFF, "f16": 0x7FFF}
#: sm_90 HMMA per (inputs, accumulator): terms per block, accumulator floor, final rounding
_SM90_BLOCK = {("f16", "f32"): (16, -133, "rz"), ("bf16", "f32"): (16, -133, "rz"), ("tf32", "f32"): (8, -133, "rz"),
               ("f16", "f16"): (16, -21, "rn")}
_WINDOW = 25                    # fraction bits kept below 2**E


def _dec(code: int, t: str):
    """(kind, neg, sig, e, frac bits): a finite value is sig * 2**(e - frac bits); e is the
    exponent field (subnormals and zeros at emin).  tf32 is read from its f32 container with
    the low 13 bits dropped (a NaN whose payload sits only there reads as Inf)."""
    eb, mb, low = _FMTS[t]
    code = int(code) >> low
    neg = (code >> (eb + mb)) & 1
    ef = (code >> mb) & ((1 << eb) - 1)
    fr = code & ((1 << mb) - 1)
    bias = (1 << (eb - 1)) - 1
    if ef == (1 << eb) - 1:
        return ("nan" if fr else "inf"), neg, 0, 0, mb
    if ef == 0:
        return "fin", neg, fr, 1 - bias, mb
    return "fin", neg, fr | (1 << mb), ef - bias, mb


def _enc(neg: int, S: int, lsb: int, t: str, mode: str, keep: int | None = None) -> int:
    """(-1)**neg * S * 2**lsb (S >= 0) rounded once into t (RZ, or RN ties to even) keeping
    ``keep`` fraction bits (all of t's when None), gradual underflow, +-Inf on overflow even in
    RZ; every zero result is +0."""
    eb, mb, _ = _FMTS[t]
    keep = mb if keep is None else keep
    bias = (1 << (eb - 1)) - 1
    if S == 0:
        return 0
    q = max(S.bit_length() - 1 + lsb, 1 - bias) - keep        # exponent of the result's last kept bit
    sh = q - lsb
    if sh <= 0:
        m = S << -sh
    else:
        m, rem = S >> sh, S & ((1 << sh) - 1)
        if mode == "rn" and (rem > (1 << (sh - 1)) or (rem == (1 << (sh - 1)) and m & 1)):
            m += 1
    if m == 0:
        return 0
    if m >> (keep + 1):
        m, q = m >> 1, q + 1
    m <<= mb - keep
    ef = 0 if m < (1 << mb) else q + keep + bias
    if ef >= (1 << eb) - 1:
        return (neg << (eb + mb)) | (((1 << eb) - 1) << mb)
    return (neg << (eb + mb)) | (ef << mb) | (m & ((1 << mb) - 1))


def _block(terms, c, dtype: str, floor, mode: str, zero_exp) -> int:
    """One block FMA: terms = [(a, b)] and c decoded; returns the dtype code.  ``zero_exp``:
    None, zero products take no part; else an exact-zero factor aligns at that exponent."""
    nan = c[0] == "nan"
    infs = {c[1]} if c[0] == "inf" else set()
    add = []                                                    # (neg, magnitude, lsb, alignment exponent)
    for x, y in terms:
        if x[0] == "nan" or y[0] == "nan":
            nan = True
        elif x[0] == "inf" or y[0] == "inf":
            if (x[0] == "fin" and x[2] == 0) or (y[0] == "fin" and y[2] == 0):
                nan = True                                      # Inf * 0
            else:
                infs.add(x[1] ^ y[1])
        elif x[2] and y[2]:
            add.append((x[1] ^ y[1], x[2] * y[2], x[3] + y[3] - x[4] - y[4], x[3] + y[3]))
        elif zero_exp is not None:                              # the mechanism: a zero product aligns
            add.append((0, 0, 0, (x[3] if x[2] else zero_exp) + (y[3] if y[2] else zero_exp)))
    if nan or len(infs) == 2:
        return _NAN[dtype]
    if infs:
        return _enc(infs.pop(), 1, 1 << 12, dtype, "rz")         # far beyond the range: +-Inf
    if c[0] == "fin" and c[2]:
        add.append((c[1], c[2], c[3] - c[4], c[3]))
    E = max([e for *_, e in add], default=None)
    if floor is not None:
        E = floor if E is None else max(E, floor)
    if E is None:
        return 0
    grid = E - _WINDOW
    S = 0
    for neg, mag, lsb, _ in add:                                # each term truncated toward zero, then summed
        m = mag << (lsb - grid) if lsb >= grid else mag >> (grid - lsb)
        S += -m if neg else m
    return _enc(int(S < 0), abs(S), grid, dtype, mode)


def _types(opcode: str):
    parts = opcode.split(".")
    d, a, b, c = parts[-4:]
    return a, b, c, d


def independent_model(name: str, zero_exp=None, no_floor: bool = False):
    """Matrix-level sm_90 HMMA model (f16/bf16/tf32 -> f32, f16 -> f16 mma.sync forms), with an
    exact zero factor aligned at ``zero_exp`` or without the accumulator floor when asked."""
    def model(opcode, A, B, C):
        at, bt, ct, dt = _types(opcode)
        n, floor, mode = _SM90_BLOCK[(at, dt)]
        if no_floor:
            floor = None
        A, B, C = np.asarray(A), np.asarray(B), np.asarray(C)
        T, M, K = A.shape
        N = B.shape[2]
        D = np.zeros((T, M, N), np.uint32 if dt == "f32" else np.uint16)
        for t in range(T):
            da = [[_dec(x, at) for x in row] for row in A[t].tolist()]
            db = [[_dec(x, bt) for x in col] for col in B[t].T.tolist()]
            for m in range(M):
                for j in range(N):
                    acc = _dec(int(C[t, m, j]), ct)
                    out = 0
                    for k0 in range(0, K, n):          # chained blocks: each takes the last one's D as c
                        out = _block(list(zip(da[m][k0:k0 + n], db[j][k0:k0 + n])), acc, dt, floor, mode, zero_exp)
                        acc = _dec(out, dt)
                    D[t, m, j] = out
        return D
    model.__name__ = name
    return model


F16F32_K8 = "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32"
BF16_K8 = "mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32"
TF32_K4 = "mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32"

#: (name, form, model, the cause the audit must name, a word its "what" must contain)
INDEPENDENT = [
    ("right (independent, f16 -> f32)", F16F32, independent_model("right_f16"), None, None),
    ("right (independent, bf16 -> f32)", BF16, independent_model("right_bf16"), None, None),
    ("right (independent, tf32 -> f32)", TF32, independent_model("right_tf32"), None, None),
    ("right (independent, f16 -> f16)", F16F16, independent_model("right_f16f16"), None, None),
    ("zero operand at exponent -126 (MMA-Sim, f16 -> f32)", F16F32, independent_model("zero126_f16", zero_exp=-126),
     "mech:zero_align", "-126"),
    ("zero operand at exponent -126 (MMA-Sim, bf16 -> f32)", BF16, independent_model("zero126_bf16", zero_exp=-126),
     "mech:zero_align", "-126"),
    ("zero operand at exponent -126 (MMA-Sim, tf32 -> f32)", TF32, independent_model("zero126_tf32", zero_exp=-126),
     "mech:zero_align", "-126"),
    ("no floor on the alignment exponent (MMA-Sim, f16 -> f16)", F16F16, independent_model("nofloor_f16", no_floor=True),
     "mech:acc_floor", "no floor"),
]
