"""The H100 harness for movements (formal/hw/transform_probe.py), without a GPU:
the kernels assemble for sm_90, the value compiler agrees with Formula.eval, and the
decoder accepts the proved prediction and rejects corrupted dumps."""

import os
import re
import shutil
import subprocess

import numpy as np
import pytest

from formal.expr import Formula
from formal.hw import transform_probe as tp


@pytest.fixture(scope="module")
def probes():
    return tp.all_probes()


def test_probe_set_covers_the_movements(probes):
    names = {p.name for p in probes}
    for need in ("ldmatrix_x4_a_m16n8k16", "ldmatrix_x2_trans_b_m16n8k16", "accumulator_to_a_f16",
                 "movmatrix_transpose_8x8", "sparse_a_m16n8k32_is_dense_a_m16n8k16", "stmatrix_x2_c_f16_rowmajor"):
        assert need in names
    kinds = " ".join(names)
    for m in ("f4e", "b4e", "rc8", "ecl", "ecr", "rc16", "shfl.up", "shfl.down", "shfl.bfly", "shfl.idx",
              "ldmatrix.x1", "ldmatrix.x2.trans", "ldmatrix.x4", "stmatrix.x1", "stmatrix.x4.trans", "movmatrix",
              "cvt.f16x2", "cvt.bf16x2"):
        assert m in kinds, m
    chained = [p for p in probes if p.mma_chain]
    assert len(chained) >= 8                      # recipes chained into an mma on the H100
    assert any(p.mma_sources for p in probes)     # accumulators produced by a real mma


def _run_u32(lines, lane):
    """A tiny interpreter for the integer PTX the value compiler emits."""
    regs = {"%hl": lane}
    preds = {}
    m32 = 0xFFFFFFFF
    for ln in lines:
        op, rest = ln.rstrip(";").split(" ", 1)
        args = [a.strip() for a in rest.split(",")]
        val = lambda a: regs[a] if a.startswith("%") else int(a, 0)
        if op == "mov.u32":
            regs[args[0]] = val(args[1]) & m32
        elif op.startswith("setp."):
            cmp = op.split(".")[1]
            a, b = val(args[1]), val(args[2])
            r = {"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b}[cmp]
            if len(op.split(".")) == 4:          # setp.ne.and.u32 p, a, b, q
                comb = op.split(".")[2]
                r = (r and preds[args[3]]) if comb == "and" else (r or preds[args[3]])
            preds[args[0]] = r
        elif op.startswith("selp"):
            regs[args[0]] = val(args[1]) if preds[args[3]] else val(args[2])
        else:
            a, b = val(args[1]), val(args[2]) if len(args) > 2 else 0
            f = {"add.u32": lambda: a + b, "sub.u32": lambda: a - b, "mul.lo.u32": lambda: a * b,
                 "div.u32": lambda: a // b, "rem.u32": lambda: a % b, "shl.b32": lambda: a << b,
                 "shr.u32": lambda: a >> b, "and.b32": lambda: a & b, "or.b32": lambda: a | b,
                 "xor.b32": lambda: a ^ b, "min.u32": lambda: min(a, b), "max.u32": lambda: max(a, b),
                 "not.b32": lambda: ~a, "neg.s32": lambda: -a}[op]
            regs[args[0]] = f() & m32
    return regs


@pytest.mark.parametrize("src", [
    "2 * ((lane % 16) * 16 + (lane // 16) * 8)",
    "16 * (2 * (lane % 8) + lane // 8)",
    "0x7654 if lane & 1 else 0x3210",
    "4 * (lane >> 2) + 2 + ((lane & 3) >> 1)",
    "((lane * 7919) ^ (lane << 11)) & 0xffff",
    "(lane * 0x9E3779B1) >> 16",             # wraps mod 2^32 in PTX, like Z3 and the engine's values
    "max(lane, 7) - min(lane, 3) + (lane in [1, 5, 9])",
    "1 if lane < 8 and lane != 3 or lane == 30 else 0",
])
def test_value_compiler_matches_formula(src):
    c = tp._Compiler("hx")
    r = c.compile(Formula(src), {"lane": "%hl"})
    for lane in range(32):
        # 32-bit unsigned, as PTX computes it and as formal.expr's Z3 reading does
        want = Formula(src).z3({"lane": lane}, 32)
        import z3
        assert _run_u32(c.lines, lane)[r] == z3.simplify(want).as_long(), (src, lane)


def test_decoder_accepts_prediction_and_rejects_corruption(probes):
    for p in probes:
        p.kernel("x")
        inp = p.inputs(seed=3)
        dump = tp.predicted_dump(p, inp)
        res = p.check(dump, inp)
        assert res["mismatches"] == 0 and res.get("mma_mismatches", 0) == 0, (p.name, res)
        bad = dump.copy()
        regs = list(p.out_regs.values())
        if regs:
            o = regs[0]
            bad[o + 5] ^= 0x00010001                 # flip a bit in two elements of lane 5
            r2 = p.check(bad, inp)
            assert r2["mismatches"] + r2.get("mma_mismatches", 0) > 0, p.name
        elif p.mma_chain or p.prog.targets:
            bad[p.out_smem] ^= 0x1
            assert p.check(bad, inp)["mismatches"] > 0, p.name


def test_encodings_are_exact():
    codes = np.arange(1, 257)
    for fmt in ("f16", "bf16", "f32"):
        assert (tp.decode(tp.encode(codes, fmt), fmt) == codes).all()


@pytest.mark.ptxas
@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not on PATH")
def test_every_probe_kernel_assembles_for_sm90(tmp_path, probes):
    mods = tp.kernels(probes)
    src = "\n".join(m.split("\n", 4)[4] if i else m for i, (_, m) in enumerate(mods))
    f = tmp_path / "probes.ptx"
    f.write_text(src)
    r = subprocess.run(["ptxas", "-arch=sm_90", str(f), "-o", str(tmp_path / "probes.cubin")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[:2000]
    # one entry per probe
    assert len(re.findall(r"\.visible \.entry", src)) == len(probes)
