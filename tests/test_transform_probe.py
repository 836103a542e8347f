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


# ---------------------------------------------------------------------------------------
# Numeric encodings and the cvt packing probes, against a host model that shares nothing
# with the engine: PTX 9.7.9.21 as written (d[31:16] = convert(a), d[15:0] = convert(b))
# and IEEE round-to-nearest-even via NumPy (f16) / ml_dtypes (bf16).

import json
from pathlib import Path

import ml_dtypes

RUN2 = Path(__file__).resolve().parent.parent / "recipes" / "hw" / "transform_probes_h100_run2.json"
_HOST = {"f16": np.float16, "bf16": ml_dtypes.bfloat16}


def _probe(name):
    p = next(q for q in tp.semantic_probes() if q.name == name)
    p.kernel("x")
    return p


def _cvt_host_dump(p, inp, fmt, a_upper=True):
    """The output buffer of `cvt.rn.<fmt>x2.f32 d, a, b` computed from the probe's input buffer."""
    a = inp["buf"][p.in_regs["a"]:p.in_regs["a"] + 32].view(np.float32)
    b = inp["buf"][p.in_regs["b"]:p.in_regs["b"] + 32].view(np.float32)
    ca = a.astype(_HOST[fmt]).view(np.uint16).astype(np.uint32)
    cb = b.astype(_HOST[fmt]).view(np.uint16).astype(np.uint32)
    out = np.zeros(p.out_words, np.uint32)
    out[p.out_regs["d"]:p.out_regs["d"] + 32] = (ca << 16 | cb) if a_upper else (cb << 16 | ca)
    return out


@pytest.mark.parametrize("name,fmt", [("cvt.f16x2", "f16"), ("cvt.bf16x2", "bf16")])
def test_cvt_probe_matches_independent_host_model(name, fmt):
    p = _probe(name)
    assert p.format == fmt                           # from the cvt destination type
    other = "f16" if fmt == "bf16" else "bf16"
    for t in range(4):
        inp = p.inputs(seed=tp.trial_seed(t))
        assert p.check(_cvt_host_dump(p, inp, fmt), inp)["mismatches"] == 0
        # operands swapped: every element is wrong, and the report names the partner column
        r = p.check(_cvt_host_dump(p, inp, fmt, a_upper=False), inp)
        assert r["mismatches"] == 64
        f = r["first"]
        assert (f["got"]["row"], f["got"]["col"]) == (f["expected"]["row"], 1 - f["expected"]["col"])
        # the right values in the wrong format: the report says which format the bits are in
        r = p.check(_cvt_host_dump(p, inp, other), inp)
        assert r["mismatches"] > 0 and r["first"]["got"]["code"] is None
        alt = r["first"]["got"]["same_bits_as"]
        assert [(x["format"], x["row"], x["col"]) for x in alt] == [
            (other, r["first"]["expected"]["row"], r["first"]["expected"]["col"])]


def test_run2_cvt_bf16x2_record_is_the_f16_decoding_defect():
    """The H100 run2 record of cvt.bf16x2 (252 mismatches, first: lane 0, d, element 0, bits
    0x4278, got null) is exactly what the spec's bf16 result looks like through the old,
    f16-decoding probe -- and the fixed probe expects those very bits."""
    rec = next(q for q in json.loads(RUN2.read_text())["probes"] if q["name"] == "cvt.bf16x2")
    f = rec["first_mismatch"]
    assert (rec["mismatches"], f["lane"], f["register"], f["element"], f["got_bits"]) == (252, 0, "d", 0, "0x4278")
    p = _probe("cvt.bf16x2")
    inp0 = p.inputs(seed=tp.trial_seed(0))
    # fixed probe: the expected bits of (lane 0, d, element 0) in trial 0 are what silicon gave
    exp = int(tp.encode(inp0["codes"][f["expected"]["row"], f["expected"]["col"]], "bf16"))
    assert exp == 0x4278
    assert p.check(_cvt_host_dump(p, inp0, "bf16"), inp0)["mismatches"] == 0
    # the run2 probe's f16 reading of the spec's bf16 results reproduces the record exactly;
    # the other operand order does not
    p.fmt16 = "f16"
    total, first = 0, None
    for t in range(rec["trials"]):
        inp = p.inputs(seed=tp.trial_seed(t))
        r = p.check(_cvt_host_dump(p, inp, "bf16"), inp)
        total += r["mismatches"]
        first = first or r["first"]
        assert p.check(_cvt_host_dump(p, inp, "bf16", a_upper=False), inp)["mismatches"] == 64
    assert total == rec["mismatches"]
    assert {k: first[k] for k in ("lane", "register", "element", "expected", "got_bits")} == \
        {k: f[k] for k in ("lane", "register", "element", "expected", "got_bits")}
    # ... and the new report would have said so: not an f16 code, but the bf16 code of (0, 0)
    assert first["got"]["code"] is None
    assert first["got"]["same_bits_as"] == [{"format": "bf16", "value": 62, "code": 62, "row": 0, "col": 0}]


def test_encode_refuses_codes_the_format_cannot_hold():
    assert (tp.decode(tp.encode(np.arange(-3, 2049), "f16"), "f16") == np.arange(-3, 2049)).all()
    assert (tp.decode(tp.encode(np.arange(-3, 257), "bf16"), "bf16") == np.arange(-3, 257)).all()
    for fmt, code in (("f16", 2049), ("bf16", 257), ("f32", (1 << 24) + 1)):
        with pytest.raises(ValueError, match="not exactly representable"):
            tp.encode(np.array([1, code]), fmt)


def test_every_numeric_probe_uses_exact_codes(probes):
    for p in probes:
        if p.numeric:
            assert not p.skip, (p.name, p.skip)
            codes = p.inputs(seed=tp.trial_seed(0))["codes"]
            for fmt in {p.elem_fmt(16), p.elem_fmt(32)}:
                assert (tp.decode(tp.encode(codes, fmt), fmt) == codes).all(), (p.name, fmt)


def test_formats16_come_from_types_not_names(probes):
    by = {p.name: p for p in probes}
    assert tp.formats16(by["accumulator_to_a_bf16"].prog) == {"bf16"}
    assert tp.formats16(by["accumulator_to_a_f16"].prog) == {"f16"}
    assert tp.formats16(by["cvt.bf16x2"].prog) == {"bf16"}
    assert tp.formats16(by["tf32_accumulator_to_a"].prog) == set()
    # a bf16 pack feeding an f16 operand: no single encoding, so the probe refuses to run it
    from formal.transform import library
    r = next(x for x in library() if x.name == "accumulator_to_a_f16")
    text = Path(r.path).read_text().replace("cvt.rn.f16x2.f32", "cvt.rn.bf16x2.f32")
    p = tp.Probe("mixed", "recipe", tp.parse_text(text, "mixed"))
    assert p.skip.startswith("16-bit elements in several formats")


def test_describe_reports_value_nearest_code_and_other_formats():
    codes = np.array([[62, 25], [3, 4]])
    d = tp.describe(0x4278, "bf16", codes)                     # exactly a code
    assert (d["code"], d["row"], d["col"]) == (62, 0, 0)
    d = tp.describe(0x4278, "f16", codes)                      # 3.234375 as f16: bf16 62
    assert d["code"] is None and d["value"] == 3.234375
    assert d["nearest"] == {"code": 3, "row": 1, "col": 0, "distance": 0.234375}
    assert d["same_bits_as"] == [{"format": "bf16", "value": 62, "code": 62, "row": 0, "col": 0}]
    d = tp.describe(0x7E00, "f16", codes)                      # NaN: no nearest, still JSON-safe
    assert d["value"] == "nan" and "nearest" not in d
    json.dumps(d, allow_nan=False)
    raw = np.array([[0x5A5A, 0x1234]])
    d = tp.describe(0x5A5B, "raw", raw, 16)                    # raw: nearest by Hamming distance
    assert d["code"] is None and d["nearest"] == {"code": 0x5A5A, "row": 0, "col": 0, "distance": 1}
    assert d["same_bits_as"] == []


def test_mismatch_report_is_self_explaining(probes):
    """A failing register element reports the expected bits and what the element holds."""
    p = next(q for q in probes if q.name == "ldmatrix_x4_a_m16n8k16")
    p.kernel("x")
    inp = p.inputs(seed=tp.trial_seed(1))
    dump = tp.predicted_dump(p, inp)
    o = p.out_regs["a0"]
    dump[o], dump[o + 1] = dump[o + 1], dump[o]           # lanes 0 and 1 swapped
    f = p.check(dump, inp)["first"]
    assert (f["lane"], f["register"], f["element"], f["format"]) == (0, "a0", 0, "f16")
    assert int(f["expected_bits"], 16) == int(tp.encode(inp["codes"][0, 0], "f16"))
    assert (f["got"]["row"], f["got"]["col"]) == (0, 2)   # lane 1 holds A[0][2..3]
    json.dumps(f, allow_nan=False)


def test_run_transform_probes_plumbing_with_a_host_gpu(tmp_path, monkeypatch):
    """run_transform_probes end to end on a stand-in GPU whose 'kernels' are host models:
    the cvt probes compute PTX's cvt on the input buffer, the recipe returns zeros.  Checks
    the summary fields (date, trials, format, trial of the first mismatch) and that a
    mismatching trial leaves replayable raw buffers."""
    from formal.hw import runner

    probes = [_probe("cvt.f16x2"), _probe("cvt.bf16x2"),
              next(q for q in tp.recipe_probes() if q.name == "prmt_transpose_2x2_f16")]
    names = {f"tp{i}": p for i, p in enumerate(probes)}

    class _CP:
        uint32 = np.uint32
        asarray = staticmethod(np.asarray)
        asnumpy = staticmethod(np.asarray)

        @staticmethod
        def zeros(n, dt):
            return np.zeros(n, dt)

        class cuda:
            class runtime:
                @staticmethod
                def deviceSynchronize():
                    pass

    class _Mod:
        def get_function(self, n):
            p = names[n]

            def k(grid, block, args):
                d_in, d_out = args
                if p.name.startswith("cvt."):
                    d_out[:] = _cvt_host_dump(p, {"buf": d_in}, p.format)
            return k

    class _GPU:
        def __init__(self, device=0):
            self.cp = _CP
            self.info = runner.DeviceInfo("Host stand-in", (9, 0), "0", "0", "0")

        def load(self, src, target):
            assert src.count(".entry") == len(probes)
            return _Mod()

    monkeypatch.setattr(runner, "GPU", _GPU)
    monkeypatch.setattr(tp, "all_probes", lambda: probes)
    s = tp.run_transform_probes(tmp_path, trials=2)
    by = {r["name"]: r for r in s["probes"]}
    assert s["trials"] == 2 and s["date"][:2] == "20" and s["n_probes"] == 3
    assert by["cvt.f16x2"]["mismatches"] == by["cvt.bf16x2"]["mismatches"] == 0
    assert (by["cvt.f16x2"]["format"], by["cvt.bf16x2"]["format"]) == ("f16", "bf16")
    bad = by["prmt_transpose_2x2_f16"]
    assert bad["mismatches"] > 0 and bad["first_mismatch"]["trial"] == 0 and "got" in bad["first_mismatch"]
    assert bad["dumps"] == ["dumps/prmt_transpose_2x2_f16.t0.npz", "dumps/prmt_transpose_2x2_f16.t1.npz"]
    z = np.load(tmp_path / bad["dumps"][1])
    p = probes[2]
    inp = p.inputs(seed=tp.trial_seed(1))
    assert (z["inp"] == inp["buf"]).all() and (z["codes"] == inp["codes"]).all()
    assert p.check(z["out"], inp)["mismatches"] > 0
    assert json.loads((tmp_path / "transform_probes.json").read_text()) == json.loads(json.dumps(s))
