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
