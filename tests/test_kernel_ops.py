"""Instruction classes of the kernel interpreter, one PTX snippet each, against references
computed independently (Python integers, numpy / ml_dtypes IEEE arithmetic, the ISA's words)."""

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from formal import kernel

HEAD = """.version 8.0
.target sm_80
.address_size 64
.visible .entry t(.param .u64 t_param_0, .param .u64 t_param_1, .param .u32 t_param_2)
{
  .reg .pred %p<8>;
  .reg .b16 %h<8>;
  .reg .b32 %r<40>;
  .reg .f32 %f<8>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [t_param_0];
  ld.param.u64 %rd2, [t_param_1];
  mov.u32 %r0, %tid.x;
  mul.wide.u32 %rd3, %r0, 16;
  add.s64 %rd4, %rd1, %rd3;
  add.s64 %rd5, %rd2, %rd3;
  ld.global.v4.u32 {%r1, %r2, %r3, %r4}, [%rd4];
  mov.u32 %r10, 0;
  mov.u32 %r11, 0;
  mov.u32 %r12, 0;
  mov.u32 %r13, 0;
"""
TAIL = """
  st.global.v4.u32 [%rd5], {%r10, %r11, %r12, %r13};
  ret;
}
"""
L0 = HEAD.count("\n")          # a body's first line is L0 + 1 (L0 + 2 when it starts with a newline)
SPEC = {"grid": [1], "block": [32], "params": {"t_param_2": 7},
        "buffer": [{"name": "In", "param": "t_param_0", "type": "s32", "shape": [32, 4]},
                   {"name": "Out", "param": "t_param_1", "type": "s32", "shape": [32, 4]}]}


def go(body, x, spec=None):
    """Run BODY on 32 threads: In[t] = x[t] in %r1..%r4, Out[t] = %r10..%r13."""
    spec = kernel.load_spec(spec or SPEC)
    mod = kernel.parse_module(HEAD + body + TAIL)
    out = kernel.run(mod, spec, {"In": np.asarray(x, dtype=np.uint32).reshape(32, 4)})
    return out["Out"].astype(np.uint64)


def rand_u32(seed, n=128):
    return np.random.default_rng(seed).integers(0, 1 << 32, size=n, dtype=np.uint64).astype(np.uint32)


def s32(v):
    v = int(v) & 0xFFFFFFFF
    return v - (1 << 32) if v >> 31 else v


def test_integer_arithmetic():
    x = rand_u32(1).reshape(32, 4)
    x[:, 1] |= 1                                          # non-zero divisors
    body = """
  mul.hi.s32 %r10, %r1, %r2;
  div.s32 %r11, %r1, %r2;
  rem.s32 %r12, %r1, %r2;
  mad.lo.s32 %r13, %r1, %r2, %r3;
"""
    got = go(body, x)
    for t in range(32):
        a, b, c = s32(x[t, 0]), s32(x[t, 1]), s32(x[t, 2])
        q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)          # C: toward zero
        assert got[t, 0] == ((a * b) >> 32) & 0xFFFFFFFF
        assert got[t, 1] == q & 0xFFFFFFFF
        assert got[t, 2] == (a - q * b) & 0xFFFFFFFF
        assert got[t, 3] == (a * b + c) & 0xFFFFFFFF


def test_bit_operations():
    x = rand_u32(2).reshape(32, 4)
    body = """
  shr.s32 %r20, %r1, 7;
  bfe.s32 %r21, %r1, 4, 9;
  lop3.b32 %r22, %r1, %r2, %r3, 0x96;
  popc.b32 %r23, %r1;
  clz.b32 %r24, %r2;
  brev.b32 %r25, %r3;
  bfi.b32 %r26, %r1, %r2, 8, 12;
  add.u32 %r10, %r20, %r21;
  xor.b32 %r11, %r22, %r26;
  shl.b32 %r27, %r23, 16;
  or.b32 %r12, %r27, %r24;
  mov.b32 %r13, %r25;
"""
    got = go(body, x)
    for t in range(32):
        a, b, c = int(x[t, 0]), int(x[t, 1]), int(x[t, 2])
        shr = (s32(a) >> 7) & 0xFFFFFFFF
        f = (a >> 4) & 0x1FF
        bfe = (f - (1 << 9) if f >> 8 else f) & 0xFFFFFFFF
        lop = a ^ b ^ c                                              # 0x96 = a xor b xor c
        bfi = (b & ~(0xFFF << 8) | ((a & 0xFFF) << 8)) & 0xFFFFFFFF
        assert got[t, 0] == (shr + bfe) & 0xFFFFFFFF
        assert got[t, 1] == lop ^ bfi
        assert got[t, 2] == (bin(a).count("1") << 16 | (32 - b.bit_length()))
        assert got[t, 3] == int(f"{c:032b}"[::-1], 2)


def _round_f32(q: Fraction) -> np.float32:
    """Exact rounding of a rational to binary32, ties to even (a reference independent of numpy's)."""
    g = np.float32(float(q))
    cands = [np.nextafter(g, np.float32(-np.inf)), g, np.nextafter(g, np.float32(np.inf))]
    best = min(cands, key=lambda c: (abs(Fraction(float(c)) - q), int(np.float32(c).view(np.uint32)) & 1))
    return np.float32(best)


def test_float32_arithmetic_is_correctly_rounded():
    rng = np.random.default_rng(3)
    v = (rng.standard_normal((32, 4)) * np.exp2(rng.integers(-20, 20, (32, 4)))).astype(np.float32)
    v[:, 2] = -v[:, 0] * v[:, 1] * np.float32(1 + 2 ** -20)           # cancellation: fma matters
    body = """
  fma.rn.f32 %r10, %r1, %r2, %r3;
  add.rn.f32 %r11, %r1, %r2;
  mul.rn.f32 %r12, %r1, %r4;
  sub.f32 %r13, %r3, %r4;
"""
    got = go(body, v.view(np.uint32)).astype(np.uint32).view(np.float32)
    for t in range(32):
        a, b, c, d = (Fraction(float(x)) for x in v[t])
        assert got[t, 0] == _round_f32(a * b + c)
    assert np.array_equal(got[:, 1], v[:, 0] + v[:, 1])
    assert np.array_equal(got[:, 2], v[:, 0] * v[:, 3])
    assert np.array_equal(got[:, 3], v[:, 2] - v[:, 3])


def test_conversions():
    rng = np.random.default_rng(4)
    v = (rng.standard_normal((32, 4)) * 300).astype(np.float32)
    body = """
  cvt.rn.f16.f32 %h1, %r1;
  cvt.rn.bf16.f32 %h2, %r2;
  mov.b32 %r10, {%h1, %h2};
  cvt.rna.tf32.f32 %r11, %r3;
  cvt.rn.f16x2.f32 %r12, %r1, %r2;
  cvt.rzi.s32.f32 %r13, %r4;
"""
    got = go(body, v.view(np.uint32))
    f16 = v[:, 0].astype(np.float16).view(np.uint16).astype(np.uint64)
    bf16 = v[:, 1].astype(ml_dtypes.bfloat16).view(np.uint16).astype(np.uint64)
    assert np.array_equal(got[:, 0], f16 | (bf16 << 16))          # mov pack: first element in the low half
    bits = v[:, 2].view(np.uint32).astype(np.uint64)
    assert np.array_equal(got[:, 1], (bits + 0x1000) & 0xFFFFE000)  # round half away on the dropped 13 bits
    f16b = v[:, 1].astype(np.float16).view(np.uint16).astype(np.uint64)
    assert np.array_equal(got[:, 2], (f16 << 16) | f16b)           # "a in the upper half, b in the lower"
    assert np.array_equal(got[:, 3], np.trunc(v[:, 3]).astype(np.int64).astype(np.uint64) & 0xFFFFFFFF)


def test_predicates_branches_and_divergence():
    x = np.zeros((32, 4), np.uint32)
    x[:, 0] = np.arange(32)
    body = """
  setp.lt.u32 %p1, %r1, 16;
  @%p1 bra LOW;
  add.u32 %r10, %r1, 1000;
  bra.uni JOIN;
LOW:
  mov.u32 %r14, 0;
  mov.u32 %r15, 0;
LOOP:
  add.u32 %r14, %r14, %r15;
  add.u32 %r15, %r15, 1;
  setp.le.u32 %p2, %r15, %r1;
  @%p2 bra LOOP;
  mov.u32 %r10, %r14;
JOIN:
  selp.b32 %r11, 7, 9, %p1;
  @!%p1 mov.u32 %r12, 5;
  ld.param.u32 %r13, [t_param_2];
"""
    got = go(body, x)
    t = np.arange(32)
    assert np.array_equal(got[:, 0], np.where(t < 16, t * (t + 1) // 2, t + 1000))
    assert np.array_equal(got[:, 1], np.where(t < 16, 7, 9))
    assert np.array_equal(got[:, 2], np.where(t < 16, 0, 5))
    assert np.all(got[:, 3] == 7)


def test_shuffles_and_permutes():
    x = rand_u32(5).reshape(32, 4)
    body = """
  shfl.sync.bfly.b32 %r10, %r1, 5, 31, -1;
  shfl.sync.idx.b32 %r11, %r1, %r2, 31, -1;
  shfl.sync.down.b32 %r12|%p1, %r1, 3, 31, -1;
  prmt.b32 %r13, %r1, %r2, 0x7150;
"""
    got = go(body, x)
    lane = np.arange(32)
    assert np.array_equal(got[:, 0], x[lane ^ 5, 0])
    assert np.array_equal(got[:, 1], x[x[:, 1] & 31, 0])
    assert np.array_equal(got[:, 2], x[np.where(lane + 3 <= 31, lane + 3, lane), 0])
    pool = [(int(x[t, 0]) | (int(x[t, 1]) << 32)) for t in range(32)]      # {b, a} bytes 0..7
    want = [sum(((p >> (8 * s)) & 0xFF) << (8 * k) for k, s in enumerate([0, 5, 1, 7])) for p in pool]
    assert np.array_equal(got[:, 3], np.array(want, dtype=np.uint64))


def test_ldmatrix_through_shared_memory():
    """ldmatrix .x1 and .x1.trans of one 8x8 b16 matrix written to shared memory:
    'lane L receives row L/4, elements 2*(L%4) and 2*(L%4)+1' (ISA Figure 104)."""
    x = np.zeros((32, 4), np.uint32)
    M = np.arange(64, dtype=np.uint32).reshape(8, 8) + 0x100
    x[:, 0] = (M.reshape(32, 2)[:, 0]) | (M.reshape(32, 2)[:, 1] << 16)    # thread t holds elements 2t, 2t+1
    body = """
  .shared .align 16 .b8 tile[128];
  mov.u32 %r20, tile;
  shl.b32 %r21, %r0, 2;
  add.u32 %r22, %r20, %r21;
  st.shared.b32 [%r22], %r1;
  bar.sync 0;
  and.b32 %r23, %r0, 7;
  shl.b32 %r24, %r23, 4;
  add.u32 %r25, %r20, %r24;
  ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%r10}, [%r25];
  ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%r11}, [%r25];
"""
    got = go(body, x)
    L = np.arange(32)
    lo, hi = M[L // 4, 2 * (L % 4)], M[L // 4, 2 * (L % 4) + 1]
    assert np.array_equal(got[:, 0], lo | (hi.astype(np.uint64) << 16))
    Mt = M.T
    assert np.array_equal(got[:, 1], Mt[L // 4, 2 * (L % 4)] | (Mt[L // 4, 2 * (L % 4) + 1].astype(np.uint64) << 16))


def _witness_run(body):
    spec = kernel.load_spec(SPEC)
    mod = kernel.parse_module(HEAD + body + TAIL)
    return kernel.run(mod, spec, {"In": np.zeros((32, 4), np.uint32)}).witnesses


def test_out_of_bounds_and_misaligned_are_reported():
    w = _witness_run("  st.global.u32 [%rd5+16], %r0;\n")              # thread 31 writes past Out
    assert [x.kind for x in w] == ["out-of-bounds"] and w[0].lane == 31 and w[0].line == L0 + 1
    w = _witness_run("  ld.global.v2.u32 {%r10, %r11}, [%rd4+4];\n")
    assert w and w[0].kind == "undefined" and "aligned" in w[0].wanted


def test_cp_async_read_before_wait():
    body = """
  .shared .align 16 .b8 buf[512];
  mov.u32 %r20, buf;
  shl.b32 %r21, %r0, 4;
  add.u32 %r22, %r20, %r21;
  cp.async.ca.shared.global [%r22], [%rd4], 16;
  cp.async.commit_group;
  ld.shared.u32 %r10, [%r22];
  cp.async.wait_group 0;
  ld.shared.u32 %r11, [%r22];
"""
    w = _witness_run(body)
    assert [x.kind for x in w] == ["async-pending"] and w[0].line == L0 + 8


@pytest.mark.parametrize("ins,line", [("  atom.global.add.u32 %r10, [%rd4], 1;\n", L0 + 1),
                                      ("  wgmma.fence.sync.aligned;\n", L0 + 1)])
def test_unsupported_names_the_line(ins, line):
    with pytest.raises(kernel.Unsupported) as e:
        go(ins, np.zeros((32, 4), np.uint32))
    assert e.value.line == line and e.value.instruction.startswith(ins.strip().split()[0])


def test_collective_under_divergence_is_undefined():
    body = """
  setp.lt.u32 %p1, %r0, 16;
  @%p1 bra SKIP;
  shfl.sync.bfly.b32 %r10, %r1, 1, 31, -1;
SKIP:
"""
    w = _witness_run(body)
    assert any(x.kind == "undefined" and x.line == L0 + 4 for x in w), [str(x) for x in w]


def test_votes_masks_and_hints():
    x = np.zeros((32, 4), np.uint32)
    x[:, 0] = np.arange(32)
    body = """
  setp.lt.u32 %p1, %r1, 5;
  vote.sync.ballot.b32 %r10, %p1, -1;
  vote.sync.any.pred %p2, %p1, -1;
  selp.u32 %r11, 1, 0, %p2;
  activemask.b32 %r12;
  createpolicy.fractional.L2::evict_last.b64 %rd6, 1.0;
  bar.warp.sync -1;
  cvt.u32.u64 %r13, %rd6;
"""
    got = go(body, x)
    assert np.all(got[:, 0] == 0b11111) and np.all(got[:, 1] == 1)
    assert np.all(got[:, 2] == 0xFFFFFFFF) and np.all(got[:, 3] == 0)


def test_approximate_arithmetic_is_refused_by_run():
    with pytest.raises(kernel.Unsupported) as e:
        go("  ex2.approx.f32 %r10, %r1;\n", np.zeros((32, 4), np.uint32))
    assert "bit for bit" in e.value.why


def test_shift_value_formula_agrees_with_the_movement_spec():
    """shl/shr have a value formula (specs/ptx_ops.toml, the kernel interpreter) and a bit-movement
    formula (specs/movement.toml [shift], the recipe engine): the two must be one semantics."""
    from formal.expr import Formula
    from formal.kernel import values as V
    from formal.specdata import load_spec
    mv = load_spec("movement")["shift"]
    rng = np.random.default_rng(9)
    for t in ("b16", "b32", "b64", "s32", "u64"):
        w = int(t[1:])
        a = rng.integers(0, 1 << 63, size=64, dtype=np.uint64) & np.uint64((1 << w) - 1)
        for op in ("shl", "shr"):
            if op == "shl" and t.startswith("s"):
                continue
            for n in (0, 1, 7, 8, w - 1, w, w + 3):
                got = V.int_op(op, [op, t], t, a, np.full(64, n, np.uint64))
                src, ok = Formula(mv[op]["src_bit"]), Formula(mv[op]["from_src"])
                want = np.zeros(64, np.uint64)
                for bit in range(w):
                    nn = min(n, w)
                    if ok.eval({"bit": bit, "n": nn, "w": w}):
                        sb = src.eval({"bit": bit, "n": nn, "w": w})
                        want |= ((a >> np.uint64(sb)) & np.uint64(1)) << np.uint64(bit)
                    elif t.startswith("s") and op == "shr":            # arithmetic: the sign fills
                        want |= ((a >> np.uint64(w - 1)) & np.uint64(1)) << np.uint64(bit)
                assert np.array_equal(got, want), (t, op, n)


@pytest.mark.parametrize("barrier,race", [("bar.warp.sync -1;", False), ("bar.sync 0;", False), ("", True)])
def test_warp_barrier_orders_shared_memory_within_the_warp(barrier, race):
    body = f"""
  .shared .align 16 .b8 buf[128];
  mov.u32 %r20, buf;
  shl.b32 %r21, %r0, 2;
  add.u32 %r22, %r20, %r21;
  st.shared.u32 [%r22], %r0;
  {barrier}
  xor.b32 %r23, %r21, 4;
  add.u32 %r24, %r20, %r23;
  ld.shared.u32 %r10, [%r24];
"""
    w = _witness_run(body)
    assert [x.kind for x in w] == (["race"] if race else [])


def test_local_const_and_global_variables():
    mod_text = HEAD.replace(".visible .entry", ".const .align 4 .b32 ctab[4] = {11, 22, 33, 44};\n"
                            ".global .align 4 .b32 gtab[2] = {5, 6};\n.visible .entry") + """
  .local .align 8 .b8 depot[16];
  mov.u32 %r20, depot;
  st.local.u32 [%r20+4], %r0;
  ld.local.u32 %r10, [%r20+4];
  and.b32 %r21, %r0, 3;
  shl.b32 %r22, %r21, 2;
  mov.u32 %r23, ctab;
  add.u32 %r24, %r23, %r22;
  ld.const.u32 %r11, [%r24];
  mov.u64 %rd6, gtab;
  ld.global.u32 %r12, [%rd6+4];
  cvta.global.u64 %rd7, %rd6;
  ld.u32 %r13, [%rd7];
""" + TAIL
    spec = kernel.load_spec(SPEC)
    res = kernel.run(kernel.parse_module(mod_text), spec, {"In": np.zeros((32, 4), np.uint32)})
    out = res["Out"]
    t = np.arange(32)
    assert np.array_equal(out[:, 0], t)                                   # per-thread local memory
    assert np.array_equal(out[:, 1], np.array([11, 22, 33, 44])[t % 4])
    assert np.all(out[:, 2] == 6) and np.all(out[:, 3] == 5)
    assert res.witnesses == []


def test_run_returns_its_witnesses_and_steps():
    """kernel.run returns a RunResult: the buffers (a mapping, as before) with this run's
    witnesses and step count; nothing is left on the function between runs."""
    spec = kernel.load_spec(SPEC)
    bad = kernel.run(kernel.parse_module(HEAD + "  st.global.u32 [%rd5+16], %r0;\n" + TAIL), spec)
    good = kernel.run(kernel.parse_module(HEAD + TAIL), spec)
    assert [w.kind for w in bad.witnesses] == ["out-of-bounds"] and good.witnesses == []   # each its own
    assert bad.steps == good.steps + 1 > 1
    assert set(good) == {"In", "Out"} and dict(good).keys() == good.buffers.keys()
    assert good["Out"].shape == (32, 4) and np.all(good["Out"] == 0)
    assert not hasattr(kernel.run, "last_witnesses") and not hasattr(kernel.run, "last_steps")
