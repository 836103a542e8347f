"""The wmma GPU probe (formal.hw.wmma_probe) without a GPU: codes, packing, kernels, decoding.

The kernels are assembled with ptxas for sm_90 (so the H100 run cannot fail on syntax); the
host side is exercised end to end against a simulated device that follows the kernels'
contract under a known map, and must recover that map exactly.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import numpy as np
import pytest

from formal.hw import wmma_probe as W
from formal.wmma import maps as mp
from formal.wmma import memory as M

LOADS = W.memory_probes("load")
STORES = W.memory_probes("store")
PIPES = W.pipeline_probes()


def _ptxas():
    try:
        from formal.catalog import ptxas
        p = ptxas.find()
        if p is not None:
            return p.path
    except Exception:  # noqa: BLE001 - fall back to PATH
        pass
    return shutil.which("ptxas")


# -- codes and packing -----------------------------------------------------------------------

@pytest.mark.parametrize("etype,n", [("f16", 1500), ("bf16", 700), ("tf32", 900), ("f32", 2000), ("s32", 300),
                                     ("f64", 100), ("s8", 1000), ("u4", 300), ("b1", 1300)])
def test_codes_roundtrip_and_catch_constants(etype, n):
    c = W.coder_for(etype, n)
    ids = np.arange(n)
    raws = np.stack([c.encode(ids, r) for r in range(c.runs)])
    got, ok = c.decode(raws)
    assert ok.all() and (got == ids).all()
    assert c.runs == 2 * max(1, -(-c.bits // (c.bits if c.elem_bits >= 16 else c.elem_bits)))
    # a register slot that does not come from memory holds the same value in every run
    const = np.stack([raws[0][:5]] * c.runs)
    _, ok = c.decode(const)
    assert not ok.any()


def test_float_codes_are_finite_normal_numbers():
    import ml_dtypes
    for etype, dt in (("f16", np.float16), ("bf16", ml_dtypes.bfloat16)):
        c = W.coder_for(etype, 2048)
        for r in range(c.runs):
            v = c.encode(np.arange(2048), r).astype(np.uint16).view(dt).astype(np.float32)
            assert np.isfinite(v).all() and (np.abs(v) >= 1.0).all()
    c = W.coder_for("tf32", 2048)
    v = c.encode(np.arange(2048), 0)
    assert ((v & 0x1FFF) != 0).all() and ((v & 0x1000) == 0).all()        # marker: nonzero, no rounding carry


def test_pack_is_little_endian_within_bytes():
    assert W.pack(np.array([1, 2, 3]), 4, 2).tolist() == [0x21, 0x03]
    assert W.pack(np.array([1, 0, 0, 1, 0, 0, 0, 0, 1]), 1, 2).tolist() == [0x09, 0x01]
    assert W.pack(np.array([0x1234, 0xABCD]), 16, 4).tolist() == [0x34, 0x12, 0xCD, 0xAB]
    rng = np.random.default_rng(0)
    for eb in (1, 4, 8, 16, 32, 64):
        v = rng.integers(0, 1 << min(eb, 62), 37).astype(np.uint64)
        assert (W.unpack(W.pack(v, eb, 512), eb, 37) == v).all()


def test_register_fields_lowest_bits_first():
    w = np.array([[0x87654321]], np.uint32)
    assert W.register_fields(w, 32, 8).tolist() == [[1, 2, 3, 4, 5, 6, 7, 8]]
    assert W.register_fields(w, 32, 2).tolist() == [[0x4321, 0x8765]]
    assert (W.register_words(W.register_fields(w, 32, 32), 32, 32) == w).all()


# -- kernels ----------------------------------------------------------------------------------

def test_probe_counts_and_variants():
    assert len(LOADS) == 88 * 4 + 88 * 3       # generic: 4 variants; .global/.shared/.shared::cta: padded
    assert len(STORES) == 26 * 4 + 26 * 3
    assert len(PIPES) == 138 * 2
    for p in LOADS + STORES:
        ops = re.findall(r"^\s*(wmma\.\S+)", p.ptx, re.M)
        assert ops == [p.opcode]
        line = next(l for l in p.ptx.splitlines() if "wmma." in l)
        assert line.rstrip(";").endswith("%rs") == p.stride_operand
        assert (p.variant == "padded") == (p.stride > M.memory_view(p.opcode).default_stride)
        # every probed access is legal under the spec (base 256-aligned + PRE_BYTES) under the 'elements'
        # reading; under 'registers' only the default stride of two forms is not (erratum default-stride-misaligned)
        stride = p.stride if p.stride_operand else None
        assert M.check_access(p.opcode, 4096 + W.PRE_BYTES, stride, reading="elements").legal
        reg_ok = M.check_access(p.opcode, 4096 + W.PRE_BYTES, stride).legal
        assert reg_ok == p.extra["legal_under"]["registers"]
        special = (p.variant != "padded" and re.search(r"(a\.sync\.aligned\.col\.m8n32k16|b\.sync\.aligned\.row\.m32n8k16)"
                                                     r"(\.\S+)?\.f16$", p.opcode))
        assert reg_ok != bool(special), p.opcode


def test_pipeline_kernels_use_matching_loads_and_store():
    for p in PIPES[:40]:
        f = p.opcode
        lines = [l.strip() for l in p.ptx.splitlines() if l.strip().startswith("wmma.")]
        assert [l.split()[0] for l in lines] == [p.extra["loads"]["a"], p.extra["loads"]["b"], p.extra["loads"]["c"],
                                                 f, p.extra["store"]]


@pytest.mark.ptxas
def test_every_kernel_assembles_for_sm90(tmp_path):
    exe = _ptxas()
    if exe is None:
        pytest.skip("ptxas not found")
    src = tmp_path / "wmma_probes.ptx"
    src.write_text(W.module_text(LOADS + STORES + PIPES))
    r = subprocess.run([exe, "-arch=sm_90", str(src), "-o", str(tmp_path / "m.cubin")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[:2000]


# -- end to end on a simulated device -----------------------------------------------------------

def _random_maps(seed=1):
    rng = np.random.default_rng(seed)
    cache = {}

    def maps_for(opcode):
        v = M.memory_view(opcode)
        key = (v.form.shape, "c" if v.matrix in "cd" else v.matrix, v.etype, v.layout)
        if key not in cache:
            E, n = v.regs * v.elems_per_reg, v.rows * v.cols
            tab = np.concatenate([rng.permutation(n), rng.integers(0, n, 32 * E - n)])
            cache[key] = rng.permutation(tab).reshape(32, E)
        return cache[key]
    return maps_for


def _sample(p):
    """A representative subset: every type, both kinds, every variant of a few shapes."""
    return any(s in p.opcode for s in ("m16n16k16.f16", "m8n32k16.s8", "m8n8k32", "m8n8k128", "m8n8k4", "m16n16k8",
                                       "m32n8k16.bf16", "m16n16k16.s32", "m8n32k16.f32"))


def test_simulated_run_recovers_the_maps(tmp_path):
    maps_for = _random_maps()
    paths = W.run_wmma_probes(tmp_path, backend=W.SimulatedBackend(maps_for), log=lambda s: None, only=_sample,
                              pipeline_runs=4)
    obs = next(p for p in paths if p.name == "wmma_sm90_observed.json")
    doc = json.loads(obs.read_text())
    assert doc["meta"]["memory_packing"].startswith("little-endian") and doc["meta"]["evidence"] == "silicon"
    kinds = {m["kind"] for m in doc["maps"]}
    assert kinds == {"load", "store"} and len(doc["maps"]) > 100
    for m in doc["maps"]:
        assert not any(m["anomalies"].get(k) for k in ("undecodable", "outside_matrix", "written_outside_matrix",
                                                       "garbage", "unwritten_cells")), m["id"]
    for m in mp.load_observed_json(obs):
        assert np.array_equal(m.single(), maps_for(m.provenance["opcode"])), m.id
    # pipeline: the simulated device stores C as D, so D must come back equal to C
    pj = json.loads((tmp_path / "wmma_pipeline.json").read_text())
    z = np.load(tmp_path / "wmma_pipeline.npz")
    n = 0
    for e in pj["entries"]:
        assert e["error"] is None
        vc, vd = M.memory_view(e["loads"]["c"]), M.memory_view(e["store"])
        assert z[e["kernel"] + ".A"].shape[1:] == (vc.rows, M.memory_view(e["loads"]["a"]).cols)
        if vc.etype == vd.etype:
            n += 1
            assert np.array_equal(z[e["kernel"] + ".C"].astype(np.uint64), z[e["kernel"] + ".D"].astype(np.uint64))
    assert n > 10
    # the condensed file (one map per form) keeps the variants' agreement
    c = W.condense(obs, tmp_path / "condensed.json")
    cm = mp.load_observed_json(c)
    assert all(v["same_as_canonical"] for m in cm for v in m.provenance["variants"])
    assert len({m.id for m in cm}) == len(cm)


class _Faulty(W.SimulatedBackend):
    """Reads with the default stride whatever the operand says, and zeroes lane 3's first register."""

    def run(self, mod, p, inputs):
        if p.kind != "load":
            return super().run(mod, p, inputs)
        q = W.Probe(**{**p.__dict__, "stride": M.memory_view(p.opcode).default_stride})
        out = super().run(mod, q, inputs)
        out["dump"][:, 3, 0] = 0
        return out


def test_decoder_reports_a_device_that_breaks_the_contract(tmp_path):
    maps_for = _random_maps(2)
    only = lambda p: p.kind == "load" and "m16n16k16.f16" in p.opcode and p.window == "global"  # noqa: E731
    paths = W.run_wmma_probes(tmp_path, backend=_Faulty(maps_for), log=lambda s: None, only=only, with_pipeline=False)
    doc = json.loads(next(p for p in paths if p.name == "wmma_sm90_observed.json").read_text())
    for m in doc["maps"]:
        assert m["anomalies"]["undecodable"], m["id"]                     # the zeroed register
        wrong = sum(1 for k, c in enumerate(m["cells"]) if c >= 0 and c != maps_for(m["opcode"]).reshape(-1)[k])
        if m["variant"].startswith("padded"):
            assert wrong > 0 or m["anomalies"]["outside_matrix"], m["id"]   # the ignored stride shows
        else:
            assert wrong == 0


# -- the fault-isolated execution of the map run ------------------------------------------------

def test_isolated_run_attributes_faults_and_keeps_going(tmp_path):
    """The map run on the stand-in device through real worker processes: the faulting probes
    are recorded as such (and only they), everything else is decoded as before."""
    maps_for = _random_maps(3)
    only = lambda p: "m16n16k16" in p.opcode and (".f16" in p.opcode or ".s8" in p.opcode)  # noqa: E731
    faults = {"wl0016", "wl0001", "wp0000"}
    paths = W.run_wmma_probes(tmp_path, simulate=W.SimulatedBackend(maps_for), sim_faults=faults, only=only,
                              pipeline_runs=2, workers=3, log=lambda s: None)
    man = json.loads((tmp_path / "wmma_probe_manifest.json").read_text())
    assert man["meta"]["execution"]["mode"] == "isolated"
    st = man["status"]
    assert {n for n, r in st.items() if r["status"] != "ok"} == faults - {"wp0000"}
    assert all(st[n]["error_class"] == "misaligned" for n in faults - {"wp0000"})
    assert set(man["errors"]) == faults - {"wp0000"}
    doc = json.loads(next(p for p in paths if p.name == "wmma_sm90_observed.json").read_text())
    got = {m["id"] for m in doc["maps"]}
    assert not any(".padded.shared" in i and "shared.s8" in i for i in got if "wl0016" in i)
    assert len(doc["maps"]) == sum(1 for r in st.values() if r["status"] == "ok")
    for m in mp.load_observed_json(next(p for p in paths if p.name == "wmma_sm90_observed.json")):
        assert np.array_equal(m.single(), maps_for(m.provenance["opcode"])), m.id
    pj = json.loads((tmp_path / "wmma_pipeline.json").read_text())
    e = {x["kernel"]: x for x in pj["entries"]}
    assert e["wp0000"]["status"] == "fault" and "misaligned" in e["wp0000"]["error"]
    assert all(x["status"] == "ok" for k, x in e.items() if k != "wp0000")
    z = np.load(tmp_path / "wmma_pipeline.npz")
    assert "wp0000.D" not in z.files and "wp0001.D" in z.files


def test_map_run_padded_strides_are_16_byte_pitches_legal_under_both_readings():
    for p in LOADS + STORES:
        if p.variant == "padded":
            v = M.memory_view(p.opcode)
            assert (p.stride * v.elem_bits) % 128 == 0, p.opcode
            assert all(p.extra["legal_under"].values()), p.opcode


def test_condense_records_coverage_and_provenance(tmp_path):
    maps_for = _random_maps(4)
    only = lambda p: p.kind == "load" and "m16n16k16.f16" in p.opcode and "a.sync" in p.opcode  # noqa: E731
    paths = W.run_wmma_probes(tmp_path, backend=W.SimulatedBackend(maps_for), only=only, with_pipeline=False,
                              log=lambda s: None)
    obs = next(p for p in paths if p.name == "wmma_sm90_observed.json")
    c = W.condense(obs, tmp_path / "c.json", provenance={"run": "test"})
    meta = json.loads(c.read_text())["meta"]
    assert meta["provenance"] == {"run": "test"}
    cov = meta["coverage"]
    assert cov["families"] == 114 and cov["observed"] == ["load:wmma.load.a.sync.aligned.col.m16n16k16.f16",
                                                          "load:wmma.load.a.sync.aligned.row.m16n16k16.f16"]
    assert len(cov["not_observed"]) == 112
