"""Issue 19, false proofs: the type an instruction reads an element as is part of the proof.

Each mutant below assembles with ptxas 13.0 and changes the outputs (checked here with
`kernel run` against the unmutated kernel); `kernel check` used to prove every one of them.
Now each is refuted with a ``wrong-type`` witness on the mutated instruction naming the
element, the type it is encoded in and the type it is read as.  Type changes that change
nothing (a load's type of the same width, an integer cvt whose extension no one reads) stay
proved.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from formal import kernel
from formal.kernel.buffers import corpus_inputs

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "data" / "kernels"
SMALL = ROOT / "tests" / "data" / "kernels_small"
MANIFEST = json.loads((CORPUS / "manifest.json").read_text())


def mutate(name, old, new):
    meta = MANIFEST[name]
    text = (CORPUS / meta["ptx"]).read_text()
    assert old in text, old
    return text, text.replace(old, new), kernel.load_spec(CORPUS / meta["spec"])


def outputs_differ(text, mut, spec):
    inp = corpus_inputs(spec, 0)
    a = kernel.run(kernel.parse_module(text), spec, inp)
    b = kernel.run(kernel.parse_module(mut), spec, inp)
    return sum(int((np.asarray(a[c.out]) != np.asarray(b[c.out])).sum()) for c in spec.contracts)


# (kernel, old text, new text, type the data has, type the mutant reads it as)
REFUTED = [
    ("tri_f16_f32acc_sm80_w4", ".f32.f16.f16.f32", ".f32.bf16.bf16.f32", "f16", "bf16"),
    ("tri_bf16_f32acc_sm80_w8", ".f32.bf16.bf16.f32", ".f32.f16.f16.f32", "bf16", "f16"),
    ("tri_e4m3_sm89_w4", ".f32.e4m3.e4m3.f32", ".f32.e5m2.e5m2.f32", "e4m3", "e5m2"),
    ("tri_e4m3_sm89_w4", ".f32.e4m3.e4m3.f32", ".f32.e4m3.e5m2.f32", "e4m3", "e5m2"),
    ("tri_s8_sm80_w4", ".s32.s8.s8.s32", ".s32.u8.u8.s32", "s8", "u8"),
    ("tri_s8_bt_sm90_w2", ".s32.s8.s8.s32", ".s32.s8.u8.s32", "s8", "u8"),
    ("tri_e4m3_sm90_w2", "cvt.rn.f16x2.e4m3x2", "cvt.rn.f16x2.e5m2x2", "e4m3", "e5m2"),
    ("wmma_s8_acc_sm80", "m16n16k16.s32.s8.s8.s32", "m16n16k16.s32.u8.u8.s32", "s8", "u8"),
]


@pytest.mark.parametrize("name,old,new,have,read", REFUTED, ids=[f"{r[0]}:{r[2]}" for r in REFUTED])
def test_type_change_refuted_with_both_types(name, old, new, have, read):
    text, mut, spec = mutate(name, old, new)
    res = kernel.check(kernel.parse_module(mut), spec, lanes=False)
    assert res.verdict == "refuted"
    w = next(w for w in res.witnesses if w.kind == "wrong-type")
    assert new.split()[0].strip(".") in w.instruction or new in w.instruction
    assert f".{have} value" in w.arrived and f"reads it as .{read}" in w.arrived
    assert "reaches C[" in w.arrived and w.register.startswith("%") and w.cta == (0, 0, 0)
    assert outputs_differ(text, mut, spec) > 0          # the second, independent judgement


EQUIVALENT = [
    ("tri_f16_masked_sm80_w4", "ld.global.b16", "ld.global.u16"),      # same width: the bits move unchanged
    ("tri_s8_sm80_w4", "cvt.u32.u16", "cvt.s32.s16"),                  # the extension nobody reads
    ("tri_s8_masked_sm80_w4", "ld.shared.b8", "ld.shared.s8"),         # sign-extended, low byte used
]


@pytest.mark.parametrize("name,old,new", EQUIVALENT, ids=[f"{r[0]}:{r[2]}" for r in EQUIVALENT])
def test_type_change_without_effect_stays_proved(name, old, new):
    text, mut, spec = mutate(name, old, new)
    assert kernel.check(kernel.parse_module(mut), spec, lanes=False).verdict == "proved"
    assert outputs_differ(text, mut, spec) == 0


def test_output_buffer_of_another_type():
    """The contract says C is f16 (laid out where the kernel's f32 results go): C holds the low
    half of each f32 accumulator, refuted as a wrong-type store."""
    spec = kernel.load_spec(SMALL / "tiny_mma.toml")
    bufs = [b if b.name != "C" else type(b)(b.name, b.param, "f16", b.shape, (16, 2), b.extra) for b in spec.buffers]
    spec = type(spec)(spec.entry, spec.grid, spec.block, spec.shared_bytes, spec.params, tuple(bufs),
                      spec.contracts, spec.extra, spec.source)
    res = kernel.check(kernel.parse_module((SMALL / "tiny_mma.ptx").read_text()), spec, lanes=False)
    assert res.verdict == "refuted"
    w = next(w for w in res.witnesses if w.kind == "wrong-type")
    assert "encoded as .f32 (2 of its 4 bytes)" in w.arrived and ".f16" in w.wanted and w.line == 75


def test_read_check_rules():
    from formal.kernel import tags as TG
    el = lambda f, n: TG.make(TG.ELEM, 1, np.zeros((1, 1), np.int64), np.arange(n)[None, :], fmt=TG.fmt_code(f))  # noqa: E731
    assert not TG.read_check(el("f16", 2), None, "f16")[0][0]
    assert TG.read_check(el("f16", 2), None, "bf16")[0][0]
    assert not TG.read_check(el("f32", 4), None, "tf32")[0][0]        # tf32 reading of f32 data
    assert TG.read_check(el("f32", 2), None, "f16")[0][0]             # half of an f32
    assert TG.read_check(el("s8", 1), None, "u8")[0][0]
    assert not TG.read_check(el("s8", 1), None, "b8")[0][0]           # bit types do not interpret
    # s8 widened: sign extension bytes read as s16 are the value, zero bytes are not
    s8 = el("s8", 1)
    sx = np.concatenate([s8, TG.sext_bytes(s8[:, 0], 1, 1)], axis=1)
    assert not TG.read_check(sx, None, "s16")[0][0] and TG.read_check(sx, None, "u16")[0][0]
    zx = np.concatenate([s8, np.zeros((1, 1), np.int64)], axis=1)
    assert TG.read_check(zx, np.zeros((1, 2), np.uint8), "s16")[0][0]
    u8 = el("u8", 1)
    assert not TG.read_check(np.concatenate([u8, np.zeros((1, 1), np.int64)], axis=1), np.zeros((1, 2), np.uint8),
                             "s16")[0][0]


@pytest.mark.parametrize("src,verdict", [("f16", "proved"), ("bf16", "refuted")])
def test_scalar_cvt_reads_its_source_type(src, verdict):
    """tiny_mma's epilogue rounds an accumulator to f16 (cvt.rn.f16.f32) and widens it again:
    cvt.f32.f16 reads the f16 value as it is encoded, cvt.f32.bf16 misreads it."""
    text = (SMALL / "tiny_mma.ptx").read_text().replace(".reg .f32 \t%f<8>;", ".reg .f32 \t%f<8>;\n\t.reg .b16 \t%h<2>;")
    text = text.replace("\tst.global.v2.f32 \t[%rd9], {%f1, %f2};",
                        f"\tcvt.rn.f16.f32 \t%h1, %f1;\n\tcvt.f32.{src} \t%f1, %h1;\n\tst.global.v2.f32 \t[%rd9], {{%f1, %f2}};")
    assert f"cvt.f32.{src}" in text and "%h<2>" in text
    res = kernel.check(kernel.parse_module(text), kernel.load_spec(SMALL / "tiny_mma.toml"), lanes=False)
    assert res.verdict == verdict
    if verdict == "refuted":
        w = res.witnesses[0]
        assert w.kind == "wrong-type" and "cvt.f32.bf16" in w.instruction
        assert "is a .f16 value" in w.arrived and "reads it as .bf16" in w.arrived and "C[0][0]" in w.arrived
