"""formal.smem: the wgmma matrix descriptor codec, the swizzles, the operand address map (numpy
and Z3), gather, the audits of CuTe / Triton layouts, and the smem.* obligations.

Cross-checks, each against something written independently of formal.smem:
* the 500 descriptor readouts of the H200 run (tests/data/wgmma_silicon_slice.npz): the bytes the
  silicon read through each descriptor;
* tests/wgmma_silicon_checks.smem_address (the silicon check's own model) and
  formal.hw.wgmma_probe.desc (the harness's own descriptor encoder);
* Triton 3.9's own NVMMA shared layouts (the installed wheel, in a subprocess);
* the PTX ISA's example layouts and CuTe's atoms as printed (literal strings).
"""
from __future__ import annotations

import copy
import json
import subprocess
import sys

import numpy as np
import pytest

import wgmma_silicon_checks as chk
from formal import prove as P
from formal.hw import wgmma_probe as wp
from formal.smem import address as A
from formal.smem import codec
from formal.transform import smem_layouts as peers
from formal.smem import proofs as SP
from formal.smem import spec as S


# ------------------------------------------------------------------------------------- codec

def test_decode_the_brief_example():
    d = codec.decode(0x4000004000010040)
    assert (d.start, d.lbo, d.sbo, d.base_offset, d.swizzle, d.reserved) == (0x40, 1, 0x40, 0, 1, 0)
    assert (d.start_bytes, d.lbo_bytes, d.sbo_bytes, d.mode.name) == (1024, 16, 1024, "128B")
    assert codec.encode(d) == 0x4000004000010040


def test_field_table_is_the_isa_table():
    f = {x.name: (x.hi, x.lo) for x in S.fields()}
    assert f == {"start": (13, 0), "lbo": (29, 16), "sbo": (45, 32), "base_offset": (51, 49), "swizzle": (63, 62)}
    assert {m.name: m.code for m in S.modes()} == {"none": 0, "128B": 1, "64B": 2, "32B": 3}
    assert S.reserved_mask() == (3 << 14) | (3 << 30) | (7 << 46) | (0x3FF << 52)
    owned = 0
    for x in S.fields():
        assert owned & x.mask == 0
        owned |= x.mask
    assert owned | S.reserved_mask() == (1 << 64) - 1 and owned & S.reserved_mask() == 0


def test_make_equals_the_probe_harness_encoder():
    rng = np.random.default_rng(1)
    for _ in range(300):
        start, lbo, sbo = (int(x) * 16 for x in rng.integers(0, 1 << 14, 3))
        sw = [0, 32, 64, 128][int(rng.integers(0, 4))]
        base = int(rng.integers(0, 8))
        assert codec.make(start, lbo, sbo, sw if sw else "none", base) == wp.desc(start, lbo, sbo, sw, base)


@pytest.mark.parametrize("kw,field", [({"start": 1 << 18}, "start"), ({"start": 24}, "start"), ({"lbo": -16}, "lbo"),
                                      ({"sbo": 1 << 18}, "sbo"), ({"base_offset": 8}, "base_offset")])
def test_make_names_the_field_out_of_range(kw, field):
    with pytest.raises(codec.DescriptorError) as e:
        codec.make(**kw)
    assert e.value.field == field and field in str(e.value)


def test_encode_names_the_field_and_decode_keeps_undescribed_bits():
    with pytest.raises(codec.DescriptorError, match="sbo = 16384"):
        codec.encode({"sbo": 1 << 14})
    with pytest.raises(codec.DescriptorError, match="unknown descriptor field 'stride'"):
        codec.encode({"stride": 1})
    with pytest.raises(codec.DescriptorError, match="outside 64 bits"):
        codec.decode(1 << 64)
    v = 0x4000004000010040 | (1 << 14) | (1 << 55)
    d = codec.decode(v)
    assert d.reserved == (1 << 14) | (1 << 55) and codec.encode(d) == v and not codec.is_legal(v)
    assert any("[14, 55]" in w for w in codec.warnings(d))


def test_isa_encode_wraps_as_written():
    assert codec.isa_encode(0x40010) == 0x1          # (x & 0x3FFFF) >> 4: the 2^18 bit is dropped
    assert codec.isa_encode(1024) == 64


# ------------------------------------------------------------------------------------- the address map

@pytest.fixture(scope="module")
def readouts():
    """The readout probes rebuilt (deterministic) and the silicon's outputs for them."""
    z = np.load(chk.__file__.replace("wgmma_silicon_checks.py", "data/wgmma_silicon_slice.npz"))
    probes = wp.readout_probes()
    return probes, {p.key: z[p.key] for p in probes}


def test_silicon_readouts_are_the_default_model(readouts):
    """The 500 descriptor readouts of the H200 run: every operand element was read from the byte
    formal.smem computes from the descriptor value alone (operand A [64, K], B [K, N])."""
    probes, outs = readouts
    n = 0
    for p in probes:
        i = p.info
        name = "b" if i["operand"] == "B" else "a"
        op = A.operand(name, i["atype"], i["n"] if name == "b" else None, i["major"])
        byte, _ = A.addresses(int(i["desc"], 16), op)
        mine = byte if name == "a" else byte.T
        got = wp.observed_readout(p, outs[p.key])
        inside = mine + max(1, i["bits"] // 8) <= 16384      # the probe's address-coded region
        assert np.array_equal(got[inside], mine[inside]), p.key
        n += 1
    assert n == 500


def test_the_refuted_models_disagree_with_silicon(readouts):
    probes, outs = readouts
    wrong = {"swizzle_on=relative": 0, "base_offset=added": 0, "base_offset=ignored": 0}
    for p in probes:
        i = p.info
        name = "b" if i["operand"] == "B" else "a"
        op = A.operand(name, i["atype"], i["n"] if name == "b" else None, i["major"])
        got = wp.observed_readout(p, outs[p.key])
        for m in wrong:
            byte, _ = A.addresses(int(i["desc"], 16), op, A.Model.parse(m))
            mine = byte if name == "a" else byte.T
            inside = mine + max(1, i["bits"] // 8) <= 16384
            wrong[m] += not np.array_equal(got[inside], mine[inside])
    assert wrong["swizzle_on=relative"] >= 100 and wrong["base_offset=added"] >= 90 and \
        wrong["base_offset=ignored"] >= 90, wrong


def test_equals_the_silicon_checks_own_model():
    """tests/wgmma_silicon_checks.smem_address is a separate implementation: equal on random
    descriptors of every operand, major-ness, swizzle, width, start and base offset."""
    rng = np.random.default_rng(5)
    for _ in range(150):
        opnd = ["A", "B"][int(rng.integers(0, 2))]
        at = ["f16", "tf32", "e4m3"][int(rng.integers(0, 3))]
        major = "MN" if at == "f16" and rng.integers(0, 2) else "K"
        sw = [0, 32, 64, 128][int(rng.integers(0, 4))]
        n = int(rng.integers(1, 33)) * 8
        bits = S.type_bits()[at]
        cfg = {"start": int(rng.integers(0, 512)) * 16, "lbo": int(rng.integers(0, 256)) * 16,
               "sbo": int(rng.integers(1, 256)) * 16, "sw": sw, "base": int(rng.integers(0, 8)) if sw else 0}
        info = {"cfg": cfg, "bits": bits, "K": 256 // bits, "n": n, "operand": opnd, "major": major}
        op = A.operand(opnd.lower(), at, n if opnd == "B" else None, major)
        byte, _ = A.addresses(codec.make(cfg["start"], cfg["lbo"], cfg["sbo"], sw or "none", cfg["base"]), op)
        assert np.array_equal(byte if opnd == "A" else byte.T, chk.smem_address(info)), info


@pytest.mark.parametrize("model", ["", "swizzle_on=relative", "base_offset=added", "lbo_k_swizzled=used"])
def test_z3_term_equals_numpy(model):
    import z3
    m = A.Model.parse(model)
    rng = np.random.default_rng(3)
    for major, bits in (("K", 16), ("K", 32), ("K", 8), ("K", 1), ("MN", 16)):
        for sw in ("none", "32B", "64B", "128B"):
            f = A.address_formula(major, sw, bits, m)
            for _ in range(10):
                env = {"mn": int(rng.integers(0, 256)), "k": int(rng.integers(0, 256 // bits)),
                       "sa": int(rng.integers(0, 1 << 14)), "lbo": int(rng.integers(0, 1 << 14)),
                       "sbo": int(rng.integers(0, 1 << 14)), "bo": int(rng.integers(0, 8))}
                zt = A.z3_address(major, sw, bits, env, m)
                assert z3.simplify(zt).as_long() == int(f.eval(env)) % (1 << 32)


def test_element_address_by_hand():
    # 128B K-major f16, SBO 1024: row r of an 8-row group is 128 bytes on, chunk c ^ (r & 7)
    d = codec.make(0, 16, 1024, "128B")
    op = A.operand("b", "f16", 64)
    assert A.element_address(d, op, 1, 0) == (0x90, 0)       # row 1: chunk 0 ^ 1 = 1
    assert A.element_address(d, op, 1, 8) == (0x80, 0)       # chunk 1 ^ 1 = 0
    assert A.element_address(d, op, 9, 15) == (1024 + 128 + 14, 0)   # 8-row group 1 (SBO), row 1: chunk 1 ^ 1 = 0
    # b1: 256 bits of K per row, 8 elements per byte, bit = k % 8 (no swizzle)
    d = codec.make(0, 128, 256, "none")
    b1 = A.operand("a", "b1")
    assert A.element_address(d, b1, 0, 9) == (1, 1)
    assert A.element_address(d, b1, 1, 0) == (16, 0)
    assert A.element_address(d, b1, 0, 128) == (128, 0)      # second core matrix along K: LBO
    with pytest.raises(S.SmemError, match="outside the 64 x 256"):
        A.element_address(d, b1, 64, 0)


def test_operand_rules():
    assert A.operand("b", "f16", 256).k == 16 and A.operand("b.sp", "f16", 8).k == 32
    assert A.operand("a", "tf32").k == 8 and A.operand("a", "e4m3").k == 32 and A.operand("a", "b1").k == 256
    with pytest.raises(S.SmemError, match="only for f16/bf16"):
        A.operand("b", "e4m3", 64, "MN")
    with pytest.raises(S.SmemError, match="needs N"):
        A.operand("b", "f16")
    with pytest.raises(S.SmemError, match="does not take b1"):
        A.operand("b.sp", "b1", 64)
    with pytest.raises(S.SmemError, match="8..256"):
        A.operand("b", "f16", 12)


def test_gather_and_read_operand():
    rng = np.random.default_rng(9)
    img = rng.integers(0, 256, (3, 1 << 14), dtype=np.uint8)
    d = codec.make(1024, 16, 1024, "128B")
    op = A.operand("b", "f16", 64)
    codes = A.gather(img, d, op)
    byte, _ = A.addresses(d, op)
    want = img[:, byte].astype(np.uint16) | (img[:, byte + 1].astype(np.uint16) << 8)
    assert codes.dtype == np.uint16 and codes.shape == (3, 64, 16) and np.array_equal(codes, want)
    B = A.read_operand(img, d, "b", "f16", n=64)
    assert B.shape == (3, 16, 64) and np.array_equal(B, np.swapaxes(want, -1, -2))
    Aop = A.read_operand(img[0], codec.make(0, 16, 512, "64B"), "a", "tf32")
    assert Aop.shape == (64, 8) and Aop.dtype == np.uint32
    bits = A.gather(img[0], codec.make(0, 128, 256, "none"), A.operand("a", "b1"))
    assert bits.shape == (64, 256) and int(bits[0, 9]) == (int(img[0, 1]) >> 1) & 1
    with pytest.raises(S.SmemError, match=r"element \(mn=\d+, k=\d+\) is read from shared byte"):
        A.gather(img[:, :4096], d, op)
    assert np.array_equal(A.gather(img[:, 1024:], d, op, image_base=1024), codes)


def test_model_choices_are_recorded_both_ways():
    for name, c in S.choices().items():
        assert {"question", "text", "silicon", "evidence", "default", "options"} <= set(c), name
        assert c["default"] in c["options"] and c["silicon"] in c["options"]
    assert A.Model.default() == A.SILICON
    with pytest.raises(S.SmemError, match="swizzle_on"):
        A.Model.parse("swizzle_on=sideways")
    with pytest.raises(S.SmemError, match="unknown model choice"):
        A.Model.parse("colour=red")


def test_packed_strides_are_cutes_tile_to_shape():
    p = A.packed("K", "128B", 16, 128, 16)
    assert (p.lbo, p.sbo, p.footprint) == (16, 1024, 16384)
    p = A.packed("MN", "128B", 16, 128, 16)        # two 64-wide atoms along N, two 8-row atoms along K
    assert (p.lbo, p.sbo, p.footprint) == (1024, 2048, 4096)
    p = A.packed("K", "none", 16, 64, 16)          # core matrices: SBO next 8 rows, LBO next 16 bytes of K
    assert (p.lbo, p.sbo, p.footprint) == (1024, 128, 2048)


# ------------------------------------------------------------------------------------- peers

def test_cute_atoms_print_as_cute_prints_them():
    assert peers.cute_atom_text("Layout_K_SW128_Atom", 16) == "Sw<3,4,3> o smem_ptr[16b](unset) o (_8,_64):(_64,_1)"
    assert peers.cute_atom_text("Layout_MN_SW128_Atom", 16) == "Sw<3,4,3> o smem_ptr[16b](unset) o (_64,_8):(_1,_64)"
    assert peers.cute_atom_text("Layout_K_INTER_Atom", 8) == "Sw<0,4,3> o smem_ptr[8b](unset) o (_8,_16):(_16,_1)"
    u = peers.parse_cute("cute::GMMA::Layout_MN_SW64_Atom<cute::bfloat16_t>")
    assert (u.rows, u.cols, u.bits, u.major, u.swizzle) == (32, 8, 16, "MN", (2, 4, 3))


TRITON_ORACLE = r'''
import sys, json, os
sys.stderr = open(os.devnull, "w")
from triton._C.libtriton import ir, gluon_ir
from triton.experimental.gluon.language import _layouts as Ls
ctx = ir.context(); ir.load_dialects(ctx)
b = gluon_ir.GluonOpBuilder(ctx)
out = []
for sw in (0, 32, 64, 128):
    for bits in (8, 16, 32):
        for tr in (False, True):
            for shape in ([64, 64], [128, 128], [64, 256], [256, 64], [8, 128], [128, 8], [16, 32], [32, 16], [64, 32]):
                contig = shape[0] if tr else shape[1]
                if sw and contig * bits // 8 < sw:
                    continue      # Triton aborts the process on these (no TMA block shape)
                r = b.to_linear_layout(Ls.NVMMASharedLayout(swizzle_byte_width=sw, element_bitwidth=bits,
                                                             transposed=tr)._to_ir(b), shape)
                out.append((sw, bits, tr, shape, r.offset_bases, r.alignment))
print(json.dumps(out))
'''


def test_triton_nvmma_shared_equals_tritons_own_conversion():
    """Our NVMMA shared layout (written from the encoding's semantics) against the installed
    Triton's C++ conversion: the element at every offset, 174 configurations."""
    pytest.importorskip("triton")
    p = subprocess.run([sys.executable, "-c", TRITON_ORACLE], capture_output=True, text=True, timeout=120)
    if p.returncode != 0 or not p.stdout.strip():
        pytest.skip(f"triton's layout conversion is not callable here: {p.stderr[-200:]}")
    cases = json.loads(p.stdout.splitlines()[-1])
    assert len(cases) == 174
    for sw, bits, tr, shape, bases, align in cases:
        enc = peers.Nvmma(sw, tr, bits)
        el = peers.triton_offsets(enc, tuple(shape))
        m = S.mode(sw if sw else "none")
        swz = A.swizzle(el * bits // 8, m) * 8 // bits          # the byte swizzle, back in elements
        o = np.arange(1 << len(bases))
        d0 = np.zeros_like(o)
        d1 = np.zeros_like(o)
        for i, (a, c) in enumerate(bases):
            on = (o >> i) & 1 == 1
            d0[on] ^= a
            d1[on] ^= c
        assert np.array_equal(swz[d0, d1], o), (sw, bits, tr, shape)
        assert align == S.raw()["peers"]["triton"]["alignment"][str(sw)]


NV = "#ttg.nvmma_shared<{{swizzlingByteWidth = {}, transposed = {}, elementBitWidth = {}}}>"


@pytest.mark.parametrize("sw,tr,bits,op,shape", [(128, "false", 16, "a", (128, 64)), (64, "false", 8, "a", (64, 128)),
                                                 (32, "true", 16, "b", (64, 64)), (128, "false", 16, "b", (32, 128)),
                                                 (128, "true", 32, "b", (64, 64))])
def test_triton_layouts_are_proved(sw, tr, bits, op, shape):
    rep = peers.audit(peers.parse_triton(NV.format(sw, tr, bits), op, shape), op)
    assert rep.status == "proved", rep.reason
    assert rep.proof.z3 == "unsat" and rep.proof.enumeration == "agrees"


def test_triton_swizzle_0_with_32_byte_rows_is_refuted():
    """Triton's swizzle-0 layout is plain row-major: with 32-byte rows no descriptor reads it (the
    canonical no-swizzle layout has 16-byte core-matrix rows); the first wrong element is row 1."""
    rep = peers.audit(peers.parse_triton(NV.format(0, "false", 16), "a", (64, 16)), "a")
    assert rep.status == "refuted"
    assert rep.witness["element"] == [1, 0] and rep.witness["user_byte"] == 32 and rep.witness["read_byte"] == 16


def test_a_wrong_descriptor_is_refuted_at_the_first_wrong_element():
    u = peers.parse_triton(NV.format(128, "false", 16), "a", (64, 64))
    ok = peers.audit(u, "a", desc=codec.make(0, 16, 1024, "128B"))
    assert ok.status == "proved"
    bad = peers.audit(u, "a", desc=codec.make(0, 16, 512, "128B"))          # SBO in 8-row groups of 64 bytes
    assert bad.status == "refuted" and bad.witness["element"] == [8, 0]
    # the descriptor reads row 8 at 512, whose 128B swizzle phase is (512 >> 7) & 7 = 4: chunk 0 ^ 4
    assert bad.witness["user_byte"] == 1024 and bad.witness["read_byte"] == 512 + 4 * 16
    wrong_mode = peers.audit(u, "a", desc=codec.make(0, 16, 1024, "64B"))
    assert wrong_mode.status == "refuted" and "swizzle is 64B" in wrong_mode.reason


def test_cute_swizzle_on_elements_is_not_a_wgmma_swizzle():
    u = peers.parse_cute("Sw<3,3,3> o _0 o (_8,_64):(_64,_1)", bits=16)
    rep = peers.audit(peers.cute_tile(u, 64, 64), "a")
    assert rep.status == "refuted" and "Swizzle<B,4,3> on byte addresses" in rep.reason


def test_bad_inputs_are_smem_errors():
    for text in ("#ttg.nvmma_shared<{swizzlingByteWidth = 96, transposed = false, elementBitWidth = 16}>",
                 "#ttg.nvmma_shared<{swizzlingByteWidth = 128, transposed = maybe, elementBitWidth = 16}>",
                 "#ttg.blocked<{}>"):
        with pytest.raises(S.SmemError):
            peers.parse_triton(text, "a", (64, 64))
    with pytest.raises(S.SmemError, match="not a multiple"):
        peers.parse_triton(NV.format(128, "false", 16), "a", (64, 32))
    with pytest.raises(S.SmemError, match="element width"):
        peers.parse_cute("(8,64):(64,1)")
    with pytest.raises(S.SmemError, match="CuTe element type"):
        peers.parse_cute("GMMA::Layout_K_SW128_Atom<double>")


# ------------------------------------------------------------------------------------- obligations

def _all_obligations():
    return SP.all_obligations() + peers.all_obligations()     # formal.smem's own and the examples / peers'


def _by(family, pred=lambda s: True):
    return [o for o in _all_obligations() if o.family == family and pred(o.subject)]


def test_registry_and_a_slice_of_obligations_both_engines():
    obs = _all_obligations()
    assert len(obs) >= 150 and len({(o.family, o.key) for o in obs}) == len(obs)
    pick = (_by("smem.codec.roundtrip") + _by("smem.codec.isa_encode") + _by("smem.swizzle")
            + _by("smem.tile", lambda s: s.startswith("a/b/a.sp K-major 128B 16-bit"))
            + _by("smem.tile", lambda s: "used" in s)[:1] + _by("smem.descarith.no_carry")
            + _by("smem.isa_example.canonical") + _by("smem.peer.triton")[:2])
    for eng in ("z3", "enum"):
        for ob in pick:
            r = ob.prove(P.Options(engine=eng))
            assert r.status == "proved", (eng, ob.family, ob.subject, getattr(r, "reason", None))


def test_the_examples_that_must_exist():
    notes = {}
    for fam in ("smem.isa_example.collides", "smem.descarith.bound_is_exact", "smem.descarith.lbo_bound_is_exact",
                "smem.kadvance.relative_breaks_it"):
        (ob,) = _by(fam)
        r = ob.prove()
        assert r.status == "proved", (fam, r)
        notes[fam] = json.loads(r.note.split(": ", 1)[1])
    assert notes["smem.isa_example.collides"] == {"mn1": 1, "k1": 0, "mn2": 0, "k2": 8}
    assert notes["smem.descarith.bound_is_exact"] == {"d": 0, "u": 1 << 14}       # 2^18 bytes
    assert notes["smem.descarith.lbo_bound_is_exact"] == {"d": 0, "u": 1 << 16}   # 2^20 bytes
    assert codec.decode((1 << 14) & 0xFFFFFFFF).start == 0                          # the start field wrapped


def _mutate(monkeypatch, stride):
    good = S.canonical("K", "128B")
    bad = S.Canonical(good.major, good.swizzle, good.isa, good.isa_swizzle, good.shape, stride(good.stride))
    real = S.canonical
    monkeypatch.setattr(S, "canonical", lambda major, sw: bad if (S.normalize_major(major), S.mode(sw).name) ==
                        ("K", "128B") else real(major, sw))
    A.address_formula.cache_clear()


def test_a_wrong_canonical_layout_is_refuted(monkeypatch):
    """Mutant specs of K-major 128B.  Rows 4T elements apart (the 64B layout's stride): one
    instruction tile (32 bytes of K) still fits, but the atom's 128-byte rows collide, so the
    atom obligation is refuted and the tile one is not.  Chunks T/2 apart along K: the tile
    obligation is refuted too.  Every engine refutes alone."""
    try:
        _mutate(monkeypatch, lambda st: (("4 * T", "SBO"), st[1]))
        (ob,) = _by("smem.atom", lambda s: s.startswith("K-major 128B 16-bit"))
        for eng in ("z3", "enum", "both"):
            assert ob.prove(P.Options(engine=eng)).status == "refuted", eng
        (ob,) = _by("smem.tile", lambda s: s.startswith("a/b/a.sp K-major 128B 16-bit"))
        assert ob.prove().status == "proved"
        _mutate(monkeypatch, lambda st: (st[0], ("1", "T // 2")))
        (ob,) = _by("smem.tile", lambda s: s.startswith("a/b/a.sp K-major 128B 16-bit"))
        for eng in ("z3", "enum"):
            r = ob.prove(P.Options(engine=eng))
            assert r.status == "refuted", (eng, r)
        assert r.witness == {"N": 8, "start": 0}          # enumeration: the first N and start that fail
    finally:
        A.address_formula.cache_clear()


def test_lbo_used_is_needed_for_the_sparse_b_32B_k_major_tile():
    """The text's layout (LBO ignored) collides for 64 bytes of K in 32-byte rows; Triton's reading
    (next atom at LBO) is injective (erratum E-WGMMA-SMEM-K32B-TF32-EXAMPLE)."""
    (g,) = [x for x in SP._groups() if x.k_bytes == 64]
    assert SP._tile_ob(g, "K", "32B", 16, A.Model(lbo_k_swizzled="used")).prove().status == "proved"
    r = SP._tile_ob(g, "K", "32B", 16, A.SILICON).prove()
    assert r.status == "refuted"
