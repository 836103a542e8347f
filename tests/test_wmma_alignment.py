"""The alignment sweep (formal.hw.wmma_probe.alignment_probes / run_wmma_alignment_probes) and its
analysis (formal.wmma.alignment) without a GPU: kernels assemble, the text's verdicts agree with
check_access, the SASS survey matches the kernels, and the analysis can fail -- a simulated
device that breaks the SASS model or returns wrong data is caught."""

from __future__ import annotations

import dataclasses
import json
import os
import random
import shutil
import subprocess

import numpy as np
import pytest

from formal.hw import wmma_probe as W
from formal.wmma import alignment as A
from formal.wmma import memory as M

PROBES, KERNELS = W.alignment_probes()
SMALL = ["wmma.load.a.sync.aligned.row.m16n16k16.s8", "wmma.store.d.sync.aligned.row.m8n8k4.f64",
         "wmma.load.a.sync.aligned.row.m8n8k32.s4", "wmma.load.b.sync.aligned.col.m32n8k16.f16",
         "wmma.load.a.sync.aligned.col.m16n16k16.u8"]


def _ptxas():
    try:
        from formal.catalog import ptxas
        p = ptxas.find("13.0") or ptxas.find()
        if p is not None:
            return p.path
    except Exception:  # noqa: BLE001
        pass
    return shutil.which("ptxas")


def test_sweep_shape():
    fams = {p.family for p in PROBES}
    assert len(fams) == 114 and len(KERNELS) == 114 * 7
    by_kernel: dict[str, list] = {}
    for p in PROBES:
        by_kernel.setdefault(p.kernel, []).append(p)
    for k in KERNELS:
        ps = by_kernel[k.kernel]
        assert sorted(p.offset for p in ps if p.purpose == "offset") == list(W.ALIGN_OFFSETS)
        if k.mode == "omitted":
            assert all(p.stride == M.memory_view(k.family).default_stride for p in ps)
        else:
            v = M.memory_view(k.family)
            aligns = {p.pitch_align for p in ps if p.base_align == 256}
            # every pitch alignment a whole-byte stride >= default can have, down to the element size
            # (and the canonical stride's own pitch, probed at offset 0)
            canon = W.safe_stride(v) * v.elem_bits // 8
            want = {a for a in W.PITCH_ALIGNS if a * 8 >= v.elem_bits} | {canon & -canon}
            assert aligns == want, (k.family, aligns)
    # run2's fault is in the sweep, legal under both readings and predicted to fault
    p = next(p for p in PROBES if p.opcode == "wmma.load.a.sync.aligned.row.m16n16k16.shared.s8" and p.stride == 24
             and p.offset == 0)
    assert p.legal["registers"]["legal"] and p.legal["elements"]["legal"]
    assert A.predict(p.manifest())["fault"]


def test_text_verdicts_agree_with_check_access():
    rng = random.Random(5)
    for p in rng.sample(PROBES, 60):
        for rd in M.READINGS:
            r = M.check_access(p.opcode, (1 << 20) | (W.ALIGN_PRE + p.offset), p.stride if p.mode == "operand" else None,
                               reading=rd, points_to=p.window)
            assert r.legal == p.legal[rd]["legal"], (p.name, rd)
            assert sorted({v.rule for v in r.violations}) == sorted(p.legal[rd]["rules"])


def test_stride_modulus_by_enumeration_equals_the_z3_derivation():
    views = [v for v in M.memory_forms("sm_90", "7.8") if not v.space]
    for v in random.Random(1).sample(views, 12):
        for rd in M.READINGS:
            z = M.legal_strides(v.form, ptr_align=256, enumerate_strides=0, reading=rd).modulus
            assert W._stride_modulus(v.etype, v.matrix, v.form.shape, v.layout, rd) == z, (v.opcode, rd)


def test_survey_covers_exactly_the_sweep_kernels():
    s = A.load_survey()
    assert s is not None and s["meta"]["evidence"] == "ptxas" and s["meta"]["ptxas"].startswith("13.0")
    keys = {(k.family, k.form.space or "", k.window, k.mode) for k in KERNELS}
    assert set(s["index"]) == keys
    for e in s["kernels"]:
        assert e["ops"] and e["immediates_multiple_of_width"]
        assert e["width"] == max(A.access_width(o) for o in e["ops"])
        # loads emit loads, stores stores
        assert all(o.startswith("LD" if e["kind"] == "load" else "ST") for o in e["ops"])


def test_survey_facts_the_errata_rely_on():
    idx = A.load_survey()["index"]
    # run2's fault: .shared .s8 A row -> ldmatrix; the generic form -> 4-byte loads
    assert idx[("wmma.load.a.sync.aligned.row.m16n16k16.s8", "shared", "shared", "operand")]["ops"] == {"LDSM.16.M88.2": 1}
    assert idx[("wmma.load.a.sync.aligned.row.m16n16k16.s8", "", "shared", "operand")]["width"] == 4
    # f64 row accumulators: one 16-byte access; col: two 8-byte ones
    assert idx[("wmma.load.c.sync.aligned.row.m8n8k4.f64", "", "global", "operand")]["width"] == 16
    assert idx[("wmma.store.d.sync.aligned.col.m8n8k4.f64", "", "global", "operand")]["width"] == 8
    # the stride mode does not change the code (why the sweep omits the stride for two kernels only)
    for (fam, space, window, mode), e in idx.items():
        if mode == "omitted":
            assert idx[(fam, space, window, "operand")]["ops"] == e["ops"]


@pytest.mark.ptxas
def test_every_alignment_and_rerun_kernel_assembles_for_sm90(tmp_path):
    exe = _ptxas()
    if exe is None:
        pytest.skip("ptxas not found")
    rmem, rpipe = W._rerun_probes()
    assert {p.name for p in rmem + rpipe} >= set(W.RUN2_FAILED)
    src = tmp_path / "align.ptx"
    src.write_text(W.ptxtext.header(W.TARGET, W.PTX_VERSION) + "\n" + "\n".join(k.ptx for k in KERNELS)
                   + "\n" + "\n".join(p.ptx for p in rmem + rpipe))
    r = subprocess.run([exe, "-arch=sm_90", str(src), "-o", str(tmp_path / "a.cubin")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[:2000]


@pytest.mark.ptxas
def test_survey_rows_reproduce(tmp_path):
    """Redo the survey for a few families with the local ptxas + cuobjdump and compare with the checked-in rows."""
    if _ptxas() is None or A._find_tool("cuobjdump") is None:
        pytest.skip("ptxas / cuobjdump not found (set CUOBJDUMP)")
    doc = A.survey(families=SMALL)
    idx = A.load_survey()["index"]
    for e in doc["kernels"]:
        want = idx[(e["family"], e["space"], e["window"], e["mode"])]
        assert (e["ops"], e["width"]) == (want["ops"], want["width"]), e


def test_run2_reruns_are_run2s_kernels():
    """The re-runs rebuild run2's probes exactly (values from run2's manifest, 2026-11-22)."""
    rmem, rpipe = W._rerun_probes()
    by = {p.name: p for p in rmem + rpipe}
    p = by["wl0016"]
    assert (p.opcode, p.variant, p.window, p.stride, p.run_bytes, p.n_ids, p.code_bits) == \
        ("wmma.load.a.sync.aligned.row.m16n16k16.shared.s8", "padded", "shared", 24, 768, 696, 10)
    p = by["wl0063"]
    assert (p.opcode, p.variant, p.stride, p.run_bytes, p.n_ids, p.code_bits) == \
        ("wmma.load.a.sync.aligned.col.m8n32k16.f16", "default", 8, 768, 320, 9)
    assert by["wp0000"].opcode == "wmma.mma.sync.aligned.row.row.m16n16k16.f16.f16"
    # the map run no longer uses run2's padded stride for .shared: a pitch multiple of 16 bytes
    new = {q.name: q for q in W.memory_probes("load")}
    assert new["wl0016"].stride == 32


@pytest.mark.parametrize("bits", [1, 4, 8, 16, 32, 64])
def test_place_and_extract_roundtrip(bits):
    fam = {1: "wmma.load.a.sync.aligned.row.m8n8k128.b1", 4: "wmma.load.b.sync.aligned.col.m8n8k32.u4",
           8: "wmma.load.a.sync.aligned.col.m32n8k16.s8", 16: "wmma.load.b.sync.aligned.row.m8n32k16.bf16",
           32: "wmma.load.c.sync.aligned.col.m16n16k16.s32", 64: "wmma.load.c.sync.aligned.row.m8n8k4.f64"}[bits]
    v = M.memory_view(fam)
    cells, _ = W.align_codes(fam)
    rng = np.random.default_rng(bits)
    for stride in sorted(W._pitch_strides(v).values())[:3]:
        buf = rng.integers(0, 256, 4096, dtype=np.uint8)
        out = W._place(v, buf, 300, stride, cells)
        assert np.array_equal(W._extract(v, out, 300, stride), cells)
        # nothing outside the cells changed (bit level)
        bitsbuf = np.unpackbits(buf, bitorder="little")
        bitsout = np.unpackbits(out, bitorder="little")
        inside = np.zeros(bitsbuf.size, bool)
        for i in W._cell_index(fam, stride).reshape(-1):
            inside[8 * 300 + i * bits: 8 * 300 + (i + 1) * bits] = True
        assert np.array_equal(bitsbuf[~inside], bitsout[~inside])


# -- the whole run on a simulated device, and the analysis failing where it must ----------------

def _model(p):
    """The stand-in device that does what the SASS model says (a fault, the right data, or the data at
    the rounded-down pitch where ptxas shifts the stride)."""
    if isinstance(p, W.Probe):
        return "fault" if p.name == "wl0016" else "ok"
    return {"ok": "ok", "fault": "fault", "wrong_data": "rounded"}[A.predict(p.manifest())["outcome"]]


@pytest.fixture(scope="module")
def model_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("align")
    an = W.run_wmma_alignment_probes(out, families=SMALL, simulate=_model, workers=3, log=lambda s: None)
    return out, an


def test_simulated_run_agrees_with_the_model_and_is_isolated(model_run):
    out, an = model_run
    doc = A.load_run(out)
    assert an["status_counts"].keys() <= {"ok", "fault"} and an["ran"] == an["probes"]
    assert an["sass_model"]["disagreements"] == 0 and an["sass_model"]["checked"] == an["ran"]
    # the stride-shifting kernels (.s4, .f16 B col) moved wrong data; every one decodes to the model's pitch
    want = [e["name"] for e in doc["probes"] if A.predict(e)["outcome"] == "wrong_data"]
    assert want and sorted(an["wrong_data"]["decoded"]) == sorted(want) and an["wrong_data"]["count"] == len(want)
    for name, d in an["wrong_data"]["decoded"].items():
        e = next(x for x in doc["probes"] if x["name"] == name)
        assert d["pattern"] == "rounded_pitch" and d["reproduces"] and d["rounded_pitch"] == A.predict(e)["rounded_pitch"]
    assert {d["kind"] for d in an["wrong_data"]["decoded"].values()} == {"load"}
    assert not an["address_check_failures"]
    faults = [e for e in doc["probes"] if e["status"] == "fault"]
    assert faults and all(e["error_class"] == "misaligned" for e in faults)
    # text-legal faults exist (.shared LDSM) and text-illegal successes (generic 4-byte loads)
    assert an["text"]["registers"]["text_allows_what_faults"] > 0
    assert an["text"]["elements"]["text_forbids_what_works"] > 0
    st = {e["id"]: e["status"] for e in an["errata"]}
    assert st == {"default-stride-misaligned": "pending", "f64-accumulator-registers": "confirmed",
                  "shared-ldsm-row-alignment": "confirmed", "shared-ldsm-subbyte-pitch-rounded": "confirmed",
                  "generic-global-access-width": "confirmed", "shared-lds-access-width": "confirmed",
                  "space-dependent-alignment": "confirmed", "stride-low-bits-dropped": "confirmed"}
    re = {r["name"]: r["status"] for r in an["reruns"]}
    assert re["wl0016"] == "fault" and re["wl0063"] == "ok" and re["wp0000"] == "ok"
    # the data of every non-faulting probe equals its family's reference, unless the model says otherwise
    assert {e["data"] for e in doc["probes"] if e["status"] == "ok" and e["name"] not in want} <= {"same", "reference"}
    raw = np.load(out / "wmma_alignment_raw.npz")
    assert set(doc["references"].values()) <= set(raw.files)
    # the text report names what it found
    txt = A.report_text(an)
    assert "SASS model" in txt and "erratum shared-ldsm-row-alignment: confirmed" in txt
    assert "load rounded_pitch" in txt and "NOT reproduced" not in txt


def test_analysis_refutes_a_device_that_breaks_the_model(tmp_path):
    """A device that also faults at 16-byte aligned bases through .shared (LDSM wanting 32) refutes the erratum's claim."""
    fam = ["wmma.load.a.sync.aligned.row.m16n16k16.s8"]

    def strict(p):
        if isinstance(p, W.Probe):
            return "ok"
        if p.space.startswith("shared") and p.purpose == "offset" and p.base_align == 16:
            return "fault"
        return _model(p)
    an = W.run_wmma_alignment_probes(tmp_path, families=fam, simulate=strict, workers=2, reruns=False, log=lambda s: None)
    st = {e["id"]: e for e in an["errata"]}
    assert st["shared-ldsm-row-alignment"]["status"] == "refuted"
    assert "offset=16" in st["shared-ldsm-row-alignment"]["witnesses"][0]
    assert an["sass_model"]["disagreements"] == 3          # .shared (both stride modes) and .shared::cta
    g = next(g for g in an["groups"] if g["space"] == "shared" and g["mode"] == "operand")
    assert g["base_fault"] == [4, 8, 16] and g["needs_base"] == 32


def test_analysis_catches_wrong_data(tmp_path):
    """A probe that does not fault but loads other registers where the model says right data is reported,
    and refutes the claim; so does wrong data at another pitch than the model's."""
    fam = ["wmma.load.a.sync.aligned.row.m16n16k16.s8"]
    an = W.run_wmma_alignment_probes(tmp_path, families=fam, simulate=_model, workers=2, reruns=False, log=lambda s: None)
    doc = A.load_run(tmp_path)
    victim = next(e for e in doc["probes"] if e["status"] == "ok" and e["space"] == "" and e["offset"] == 32)
    victim["data"] = "differs"                   # as _compare_with_references marks a mismatch
    an = A.analyse(doc)
    assert an["wrong_data"]["count"] == 1 and victim["name"] in an["wrong_data"]["examples"][0]
    assert {e["id"]: e["status"] for e in an["errata"]}["generic-global-access-width"] == "refuted"
    assert an["sass_model"]["disagreements"] == 1


def test_claims_check_the_decoded_pitch_and_the_twin():
    """A wrong-data probe where the model predicts it must decode to the model's rounded pitch; a twin
    claim fails when the twins differ."""
    p = next(q for q in PROBES if q.family == "wmma.load.a.sync.aligned.row.m16n16k16.f16" and q.space == ""
             and q.window == "global" and q.mode == "operand" and q.stride == 17)
    e = dict(p.manifest(), status="ok", data="differs")
    good = {"pattern": "rounded_pitch_in_groups_of_8", "rounded_pitch": 32, "reproduces": True, "starts": [0, 32]}
    st = {r["id"]: r for r in A.errata_status({"kernels": [], "probes": [e]}, {p.name: good})}
    assert st["generic-global-access-width"]["outcomes"] == {"below wrong_data": 1}
    assert st["generic-global-access-width"]["status"] == "partial"
    for bad in (dict(good, rounded_pitch=30), dict(good, reproduces=False), dict(good, pattern="other"), None):
        st = {r["id"]: r for r in A.errata_status({"kernels": [], "probes": [e]}, {p.name: bad} if bad else {})}
        assert st["generic-global-access-width"]["status"] == "refuted", bad
        assert "claim: wrong_data, rows 32 B apart" in st["generic-global-access-width"]["witnesses"][0]
    # twins: generic into shared vs generic into global
    t = next(q for q in PROBES if q.family == p.family and q.space == "" and q.window == "shared" and q.mode == "operand"
             and q.stride == 17)
    f = dict(t.manifest(), status="ok", data="differs")
    wrong = {p.name: good, t.name: dict(good)}
    st = {r["id"]: r for r in A.errata_status({"kernels": [], "probes": [e, f]}, wrong)}
    assert st["space-dependent-alignment"]["status"] == "confirmed"
    assert st["space-dependent-alignment"]["outcomes"] == {"wrong_data as its twin": 1}
    wrong[t.name] = dict(good, starts=[0, 34])
    st = {r["id"]: r for r in A.errata_status({"kernels": [], "probes": [e, f]}, wrong)}
    assert st["space-dependent-alignment"]["status"] == "refuted"
    st = {r["id"]: r for r in A.errata_status({"kernels": [], "probes": [e, dict(f, data="same")]}, wrong)}
    assert st["space-dependent-alignment"]["outcomes"] == {"ok, twin wrong_data": 1}


def test_compare_with_references_marks_mismatching_data():
    ps = [p for p in PROBES if p.family == SMALL[0] and p.purpose == "offset"][:3]
    outcomes = {p.name: {"regs": np.arange(4), "wrote_outside": 0} for p in ps}
    outcomes[ps[2].name]["regs"] = np.arange(4) + 1
    entries = [{} for _ in ps]
    refs = W._compare_with_references(ps, entries, outcomes)
    assert refs[SMALL[0]] == ps[0].name
    assert [e["data"] for e in entries] == ["reference", "same", "differs"]


def test_alignment_cli_usage():
    assert W.main(["--alignment"]) == 2
    assert W.main([]) == 2


@pytest.mark.skipif(not os.environ.get("WMMA_ALIGNMENT_RUN"), reason="set WMMA_ALIGNMENT_RUN=DIR to check a silicon run")
def test_a_silicon_alignment_run():
    """Run on a silicon result (the lead's run3): every probe has a verdict or says why not, and every
    probe that moved wrong data is explained by a rounded-down pitch."""
    doc = A.load_run(os.environ["WMMA_ALIGNMENT_RUN"])
    an = A.analyse(doc)
    print(json.dumps({k: an[k] for k in ("status_counts", "sass_model", "errata")}, indent=1))
    assert all(v["pattern"] in A.ROUNDED_PATTERNS and v["reproduces"] for v in an["wrong_data"]["decoded"].values())
    assert an["sass_model"]["disagreements"] == 0
    assert not any(e["status"] == "refuted" for e in an["errata"])


# -- what a probe that did not fault really read / wrote ----------------------------------------

def _map(fam):
    from formal.wmma import maps as mp
    return next(x for x in mp.all_maps() if x.evidence == "silicon" and x.provenance["opcode"] == fam)


def _rounded_pitch_device(p, r: int, groups_of_8: bool):
    """The registers a device returns that reads instance ld at ld * r (or in groups of 8) bytes from the
    base, through the observed map -- built here element by element from the memory's bits, independently
    of formal.wmma.alignment.read_fragment."""
    view = M.memory_view(p.family)
    m = _map(p.family)
    bits = np.unpackbits(W.align_inputs(p)["mem"], bitorder="little")
    eb = view.elem_bits
    base = W.ALIGN_PRE + p.offset
    fields = np.zeros((32, m.elements), np.uint64)
    for lane in range(32):
        for i in range(m.elements):
            (row, col), = m.slots[lane][i]
            ld, pos = (row, col) if view.layout == "row" else (col, row)
            start = (ld // 8) * 8 * p.pitch_bytes + (ld % 8) * r if groups_of_8 else ld * r
            a = 8 * (base + start) + pos * eb
            fields[lane, i] = sum(int(bits[a + b]) << b for b in range(eb))
    return W.register_words(fields, view.reg_bits, m.elems_per_reg).astype(W._RAW[view.reg_bits])


def _probe(fam, stride, space="", window="global"):
    return next(q for q in PROBES if q.family == fam and q.space == space and q.window == window
                and q.mode == "operand" and q.offset == 0 and q.stride == stride)


@pytest.mark.parametrize("fam,stride,groups", [("wmma.load.a.sync.aligned.row.m16n16k16.f16", 17, True),
                                               ("wmma.load.c.sync.aligned.row.m16n16k16.f32", 17, False),
                                               ("wmma.load.c.sync.aligned.col.m8n32k16.f16", 9, True),
                                               ("wmma.load.a.sync.aligned.row.m8n8k32.s4", 34, False),
                                               ("wmma.load.b.sync.aligned.col.m8n8k128.b1", 136, False)])
def test_decode_wrong_data_locates_every_instance(tmp_path, fam, stride, groups):
    p = _probe(fam, stride)
    pr = A.predict(p.manifest())
    assert pr["outcome"] == "wrong_data" and pr["shift"] > 0
    r = pr["rounded_pitch"]
    assert r == p.pitch_bytes // pr["unit"] * pr["unit"] != p.pitch_bytes
    e = dict(p.manifest(), status="ok", data="differs", predicted=pr)
    np.savez(tmp_path / "raw.npz", **{p.name: _rounded_pitch_device(p, r, groups)})
    doc = {"meta": {"target": "sm_90", "ptx": "7.8"}, "probes": [e], "_raw": str(tmp_path / "raw.npz")}
    d = A.decode_wrong_data(doc)[p.name]
    v = M.memory_view(fam)
    want = "rounded_pitch_in_groups_of_8" if groups else "rounded_pitch"
    assert d["pattern"] == want and d["kind"] == "load" and d["method"] == "search" and d["reproduces"]
    assert d["starts"] == A.instance_starts(v.n_ld, p.pitch_bytes, r, groups) and d["misaligned_starts"] == 0
    assert d["rounded_pitch"] == r and pr["unit"] in d["units"]
    # the registers of the exact pitch are not wrong data: they decode to 'exact'
    np.savez(tmp_path / "raw.npz", **{p.name: _rounded_pitch_device(p, p.pitch_bytes, False)})
    assert A.decode_wrong_data(doc)[p.name]["pattern"] == "exact"
    # registers found nowhere in memory are not decoded
    np.savez(tmp_path / "raw.npz", **{p.name: _rounded_pitch_device(p, r, groups) ^ 0x5})
    assert A.decode_wrong_data(doc)[p.name]["pattern"] == "other"


def _store_device(p, r: int):
    """Memory after a store that writes the family's registers (through the observed map) as a matrix with
    pitch r -- W._place with stride r / element size, independently of formal.wmma.alignment.write_fragment;
    returns (the matrix at the exact cells, bytes changed outside the matrix)."""
    view = M.memory_view(p.family)
    m = _map(p.family)
    _, words = W.align_codes(p.family)
    fields = W.register_fields(words.astype(np.uint64), view.reg_bits, m.elems_per_reg)
    mat = np.zeros((view.rows, view.cols), np.uint64)
    for lane in range(32):
        for i in range(m.elements):
            (row, col), = m.slots[lane][i]
            mat[row, col] = fields[lane, i]
    before = W.align_inputs(p)["mem"]
    base = W.ALIGN_PRE + p.offset
    after = W._place(view, before, base, r * 8 // view.elem_bits, mat)
    mask = W._cell_mask(view, p.run_bytes, base, p.stride)
    return W._extract(view, after, base, p.stride), int(((before != after) & ~mask).sum())


@pytest.mark.parametrize("fam,stride", [("wmma.store.d.sync.aligned.row.m16n16k16.f16", 17),
                                        ("wmma.store.d.sync.aligned.row.m16n16k16.f32", 17)])
def test_decode_wrong_data_finds_where_a_store_wrote(tmp_path, fam, stride):
    p = _probe(fam, stride)
    pr = A.predict(p.manifest())
    assert pr["outcome"] == "wrong_data"
    matrix, outside = _store_device(p, pr["rounded_pitch"])
    assert outside > 0                                   # the rows that moved overwrite memory past the matrix
    e = dict(p.manifest(), status="ok", data="differs", predicted=pr, wrote_outside=outside)
    np.savez(tmp_path / "raw.npz", **{p.name: matrix})
    doc = {"meta": {"target": "sm_90", "ptx": "7.8"}, "probes": [e], "_raw": str(tmp_path / "raw.npz")}
    d = A.decode_wrong_data(doc)[p.name]
    assert d["kind"] == "store" and d["method"] == "simulation" and d["pattern"] == "rounded_pitch"
    assert d["rounded_pitch"] == pr["rounded_pitch"] and d["wrote_outside"] == outside and d["hypotheses"] >= 3
    # the same cells but another count of bytes written outside fit no hypothesis
    doc["probes"] = [dict(e, wrote_outside=outside + 1)]
    assert A.decode_wrong_data(doc)[p.name]["pattern"] == "other"


def test_read_and_write_fragment_are_inverse():
    for fam in ("wmma.load.a.sync.aligned.row.m8n8k32.s4", "wmma.load.b.sync.aligned.col.m16n16k16.bf16"):
        p = _probe(fam, sorted(W._pitch_strides(M.memory_view(fam)).values())[-1])
        v = M.memory_view(fam)
        m = _map(fam)
        mem = W.align_inputs(p)["mem"]
        starts = A.instance_starts(v.n_ld, p.pitch_bytes, p.pitch_bytes)
        regs = A.read_fragment(v, m, mem, W.ALIGN_PRE, starts)
        cells, _ = W.align_codes(fam)          # the family's matrix is at the exact pitch: the map's cells
        tab = m.single()
        want = W.register_words(cells.reshape(-1)[tab], v.reg_bits, m.elems_per_reg)
        assert np.array_equal(regs, want)
        assert np.array_equal(A.write_fragment(v, m, mem, W.ALIGN_PRE, starts, regs), mem)


def test_instance_patterns():
    assert A._instance_patterns([0, 32, 64], 34) == ["rounded_pitch", "rounded_pitch_in_groups_of_8"]
    assert A._instance_patterns([0, 34, 68], 34) == ["exact"]
    starts = [ld * 32 for ld in range(8)] + [272 + ld * 32 for ld in range(8)]
    assert A._instance_patterns(starts, 34) == ["rounded_pitch_in_groups_of_8"]
    assert A.instance_starts(16, 34, 32, True) == starts
    assert A._instance_patterns([0, 30, 64], 34) == []


def test_model_outcome():
    # exact pitch: faults below the width
    assert A.model_outcome(16, 256, 24, 8, None)["outcome"] == "fault"
    assert A.model_outcome(16, 8, 32, 32, None)["outcome"] == "fault"
    assert A.model_outcome(16, 16, 32, 32, None)["outcome"] == "ok"
    # shifted stride: the pitch is rounded down to the unit; never faults for the pitch when unit >= width
    m = A.model_outcome(4, 256, 34, 2, 4)
    assert (m["outcome"], m["rounded_pitch"]) == ("wrong_data", 32)
    assert A.model_outcome(4, 2, 34, 2, 4)["outcome"] == "fault"            # the base is never rounded
    # LDSM sub-byte: rounded to 4 bytes, then needs 16
    assert [A.model_outcome(16, 256, P, P & -P, 4)["outcome"] for P in (16, 17, 18, 20, 24, 32)] == \
        ["ok", "wrong_data", "wrong_data", "fault", "fault", "ok"]


SASS_S4 = [("ULDC", "UR4, c[0x0][0x230]"), ("USHF.R.U32.HI", "UR4, URZ, 0x3, UR4"), ("LOP3.LUT", "R2, R11, 0x3, RZ, 0xc0, !PT"),
           ("SHF.R.U32.HI", "R7, RZ, 0x2, R11"), ("IMAD.WIDE.U32", "R2, R7, UR4, R2"), ("LD.E", "R9, desc[UR4][R8.64]")]


def test_stride_shift_reads_the_shift_of_the_stride_register():
    assert A.stride_shift(SASS_S4) == 3
    # the lane shift (SHF of R11, not the stride) does not count; an unshifted stride is 0
    assert A.stride_shift([("LDC", "R9, c[0x0][0x230]"), ("SHF.R.U32.HI", "R7, RZ, 0x2, R13"),
                           ("IMAD.WIDE.U32", "R2, R7, R9, R2")]) == 0
    # through a copy, and not after the register is reused
    assert A.stride_shift([("LDC", "R21, c[0x0][0x230]"), ("IMAD.MOV.U32", "R3, RZ, RZ, R21"),
                           ("SHF.R.U32.HI", "R0, RZ, 0x1, R3")]) == 1
    assert A.stride_shift([("LDC", "R21, c[0x0][0x230]"), ("IMAD.WIDE.U32", "R2, R21, 0x8, R6"),
                           ("IADD3", "R21, R2, 0x4, RZ"), ("SHF.R.U32.HI", "R0, RZ, 0x1, R21")]) == 0
    assert A.stride_shift([("LDC", "R1, c[0x0][0x28]")]) is None            # no stride operand
    with pytest.raises(ValueError):
        A.stride_shift([("LDC", "R21, c[0x0][0x230]"), ("SHF.R.U32.HI", "R0, RZ, 0x1, R21"),
                        ("SHF.R.U32.HI", "R1, RZ, 0x2, R21")])


@pytest.mark.ptxas
def test_stride_shifts_reproduce_from_ptxas():
    """Redo the stride shifts for a few families with the local ptxas + cuobjdump: the checked-in column."""
    if _ptxas() is None or A._find_tool("cuobjdump") is None:
        pytest.skip("ptxas / cuobjdump not found (set CUOBJDUMP)")
    fams = SMALL + ["wmma.store.d.sync.aligned.col.m8n32k16.f32", "wmma.load.a.sync.aligned.row.m8n8k128.b1"]
    got = A.stride_shift_survey(families=fams)["shifts"]
    rec = A.stride_shifts()
    assert got and all(rec[k] == v for k, v in got.items()), {k: (v, rec[k]) for k, v in got.items() if rec[k] != v}
    assert got[("wmma.load.a.sync.aligned.row.m8n8k32.s4", "shared", "shared", "operand")] == 3
    assert got[("wmma.load.a.sync.aligned.row.m8n8k128.b1", "", "global", "operand")] == 5
    assert got[("wmma.store.d.sync.aligned.col.m8n32k16.f32", "", "global", "operand")] == 1
    assert got[("wmma.load.a.sync.aligned.row.m16n16k16.s8", "", "global", "operand")] == 0


def test_overlap_of_merged_runs(tmp_path):
    regs = {"wa00000": np.arange(4), "wa00001": np.arange(4)}
    np.savez(tmp_path / "a.npz", **regs)
    np.savez(tmp_path / "b.npz", wa00000=np.arange(4), wa00001=np.arange(4) + 1)
    a = {"meta": {"target": "sm_90"}, "kernels": [], "_raw": str(tmp_path / "a.npz"),
         "probes": [{"name": "wa00000", "status": "ok"}, {"name": "wa00001", "status": "ok"}]}
    b = dict(a, _raw=str(tmp_path / "b.npz"))
    o = A.merge_runs([a, b])["meta"]["overlap"]
    assert o == {"probes": 2, "same_outcome": 2, "raw_compared": 2, "raw_identical": 1, "differing": ["wa00001"]}
    b2 = dict(b, probes=[{"name": "wa00000", "status": "fault", "error_class": "misaligned"}])
    o = A.merge_runs([a, b2])["meta"]["overlap"]
    assert (o["probes"], o["same_outcome"], o["differing"]) == (1, 0, ["wa00000"])


def test_partial_and_sides():
    """A claim whose below side never ran is 'partial', unless the erratum only claims the working side."""
    p = next(q for q in PROBES if q.family == "wmma.store.d.sync.aligned.row.m8n8k4.f64" and q.space == "" and
             q.offset == 16 and q.mode == "operand")
    e = dict(p.manifest(), status="ok", data="same", predicted=A.predict(p.manifest()))
    st = {r["id"]: r for r in A.errata_status({"kernels": [], "probes": [e]})}
    assert st["f64-accumulator-registers"]["status"] == "partial" and st["f64-accumulator-registers"]["missing"] == "below"
    f = dict(e, offset=8, base_align=8, status="fault", error_class="misaligned", data=None)
    st = {r["id"]: r for r in A.errata_status({"kernels": [], "probes": [e, f]})}
    assert st["f64-accumulator-registers"]["status"] == "confirmed"
    st = {r["id"]: r for r in A.errata_status({"kernels": [], "probes": [e, dict(f, status="ok", data="same")]})}
    assert st["f64-accumulator-registers"]["status"] == "refuted"


def test_merge_runs_later_verdicts_win():
    a = {"meta": {"target": "sm_90"}, "kernels": [{"kernel": "wk0000"}], "reruns": [],
         "probes": [{"name": "wa00000", "status": "ok"}, {"name": "wa00001", "status": "not_run"}], "_raw": "a.npz"}
    b = {"meta": {"target": "sm_90"}, "kernels": [{"kernel": "wk0000"}, {"kernel": "wk0001"}], "reruns": [],
         "probes": [{"name": "wa00001", "status": "fault"}, {"name": "wa00000", "status": "not_run"},
                    {"name": "wa00002", "status": "ok"}], "_raw": "b.npz"}
    m = A.merge_runs([a, b])
    assert [(e["name"], e["status"]) for e in m["probes"]] == [("wa00000", "ok"), ("wa00001", "fault"), ("wa00002", "ok")]
    assert len(m["kernels"]) == 2 and m["_raws"] == ["a.npz", "b.npz"]
    assert m["meta"]["execution"]["status_counts"] == {"ok": 2, "fault": 1}
    with pytest.raises(ValueError):
        A.merge_runs([a, dict(b, meta={"target": "sm_80"})])


def test_resume_runs_only_the_named_probes_with_their_names(tmp_path):
    fam = "wmma.load.a.sync.aligned.row.m16n16k16.s8"
    ps = [p for p in PROBES if p.family == fam]
    only = {ps[3].name, ps[20].name}
    an = W.run_wmma_alignment_probes(tmp_path, simulate=_model, workers=2, reruns=False, log=lambda s: None,
                                     only=only)
    doc = A.load_run(tmp_path)
    ref = next(p.name for p in ps if p.space == "" and p.window == "global" and p.mode == "omitted" and p.offset == 0)
    assert {e["name"] for e in doc["probes"]} == only | {ref}        # plus the family's reference probe
    got = {e["name"]: (e["offset"], e["stride"], e["space"]) for e in doc["probes"]}
    assert all(got[p.name] == (p.offset, p.stride, p.space) for p in ps if p.name in got)
    assert an["ran"] == 3


# -- the checked-in summary of run3 + run4 (specs/observed/wmma_alignment_sm90.json) ---------------

SUMMARY = A.load_summary()
RUNS = ("/work/hwdata/run3/wmma_align", "/work/hwdata/run4/a2")


def test_summary_provenance_size_and_coverage():
    p = A.spec_dir() / A.SUMMARY_FILE
    assert p.stat().st_size < 400_000
    m = SUMMARY["meta"]
    assert m["evidence"] == "silicon" and m["device"]["name"] == "NVIDIA H100 80GB HBM3"
    assert m["provenance"]["run"].startswith("run3 + run4") and "580.159.04" in m["provenance"]["device"]
    assert m["status_counts"] == {"ok": 6324, "fault": 794} and m["ran"] == 7118
    assert len(m["merged"]) == 2 and m["merged"][1]["deadline_s"] == 300.0
    # nondeterminism check: the 66 probes both runs ran (the family references) agree bit for bit
    assert m["overlap"] == {"probes": 66, "same_outcome": 66, "raw_compared": 66, "raw_identical": 66, "differing": []}
    assert [r["status"] for r in SUMMARY["reruns"]] == ["fault", "ok", "ok", "ok", "ok", "ok"]
    assert SUMMARY["references"] == {"checked": 102, "agree": 102, "disagree": []}
    # one row per sweep kernel, probes in the sweep's order and naming
    d = A.summary_doc()
    assert len(SUMMARY["kernels"]) == len(KERNELS) and len(d["probes"]) == len(PROBES)
    for q, p in zip(d["probes"], PROBES):
        assert (q["name"], q["family"], q["opcode"], q["offset"], q["stride"], q["pitch_bytes"], q["base_align"],
                q["pitch_align"], q["purpose"]) == (p.name, p.family, p.opcode, p.offset, p.stride, p.pitch_bytes,
                                                    p.base_align, p.pitch_align, p.purpose)
    assert all(q["status"] != "not_run" for q in d["probes"])
    # the stride shift of every kernel: None exactly where the stride operand is omitted
    for k in d["kernels"]:
        assert (k["stride_shift"] is None) == (k["mode"] == "omitted"), k["kernel"]
    assert {k["stride_shift"] for k in d["kernels"]} == {None, 0, 1, 3, 5}


ERRATA = {"default-stride-misaligned": ("confirmed", {"at or above ok": 4}),
          "f64-accumulator-registers": ("confirmed", {"at or above ok": 76, "below fault": 38}),
          "shared-ldsm-row-alignment": ("confirmed", {"at or above ok": 512, "below fault": 456}),
          "shared-ldsm-subbyte-pitch-rounded": ("confirmed", {"at or above ok": 84, "below fault": 60,
                                                              "below wrong_data": 24}),
          "generic-global-access-width": ("confirmed", {"at or above ok": 3746, "below fault": 190,
                                                        "below wrong_data": 198}),
          "shared-lds-access-width": ("confirmed", {"at or above ok": 1700, "below fault": 88, "below wrong_data": 60}),
          "space-dependent-alignment": ("confirmed", {"ok as its twin": 1030, "fault as its twin": 54,
                                                      "wrong_data as its twin": 66}),
          "stride-low-bits-dropped": ("confirmed", {"at or above ok": 704, "below fault": 24, "below wrong_data": 282})}


def test_summary_decides_the_errata_as_recorded():
    d = A.summary_doc()
    st = {e["id"]: e for e in A.errata_status(d, SUMMARY["wrong_data"])}
    rec = {e["id"]: e for e in SUMMARY["errata"]}
    assert {k: (v["status"], v["outcomes"]) for k, v in st.items()} == ERRATA
    assert {k: (v["status"], v["outcomes"]) for k, v in rec.items()} == ERRATA
    # every erratum's status line in the spec names its verdict, and its text quotes the counts
    spec = {e["id"]: e for e in M.spec().errata}
    for k, (status, outcomes) in ERRATA.items():
        assert spec[k]["status"].split(" ")[0] in ("confirmed", "decided"), k
        assert "run3 + run4" in spec[k]["silicon"] or k == "default-stride-misaligned", k
    assert "968 probes" in spec["shared-ldsm-row-alignment"]["status"]
    assert "1,010 pitch probes" in spec["stride-low-bits-dropped"]["status"]


def test_the_state_space_errata_partition_the_sweep():
    """Every probe is decided by exactly one of the four state-space errata."""
    d = A.summary_doc()
    spec = {e["id"]: e for e in M.spec().errata}
    sass = {k["kernel"]: k["sass"] for k in d["kernels"]}
    ids = ("shared-ldsm-row-alignment", "shared-ldsm-subbyte-pitch-rounded", "generic-global-access-width",
           "shared-lds-access-width")
    for q in d["probes"]:
        assert sum(A._selected(q, spec[i]["select"], sass) for i in ids) == 1, q["name"]


def test_summary_the_model_predicts_every_probe():
    """The SASS model (widest access + stride shift) against each of the 7,118 outcomes of the summary."""
    d = A.summary_doc()
    n = {"ok": 0, "fault": 0, "wrong_data": 0}
    for q in d["probes"]:
        pr = A.predict(q)
        assert pr["outcome"] == A._observed(q), q["name"]
        n[pr["outcome"]] += 1
    assert n == {"ok": 6042, "fault": 794, "wrong_data": 282}
    assert SUMMARY["meta"]["sass_model"]["checked"] == 7118 and SUMMARY["meta"]["sass_model"]["disagreements"] == 0


def test_summary_wrong_data_is_all_decoded_at_the_rounded_pitch():
    wd = SUMMARY["wrong_data"]
    assert len(wd) == 282
    assert {(v["kind"], v["method"]) for v in wd.values()} == {("load", "search"), ("store", "simulation")}
    assert sum(v["kind"] == "store" for v in wd.values()) == 75
    probes = {q["name"]: q for q in A.summary_doc()["probes"]}
    for name, v in wd.items():
        assert v["pattern"] in A.ROUNDED_PATTERNS and v["reproduces"] and v["misaligned_starts"] == 0, name
        assert v["pattern"] in A._instance_patterns(v["starts"], v["pitch"])
        assert v["rounded_pitch"] == A.predict(probes[name])["rounded_pitch"] < v["pitch"]
        if v["kind"] == "store":
            assert v["wrote_outside"] > 0
    assert wd["wa00006"]["starts"][:10] == [0, 32, 64, 96, 128, 160, 192, 224, 272, 304]
    assert wd["wa02430"]["starts"][:3] == [0, 64, 128]
    assert wd["wa04944"]["starts"] == [0, 16, 32, 48, 64, 80, 96, 112]      # .shared .s4, 17-byte pitch
    assert sum(v["wrote_outside"] for v in wd.values() if v["kind"] == "store") == 4403


def test_summary_outcome_table():
    t = A.outcome_table(A.summary_doc())
    ldsm = next(r for r in t if r["space"] == "shared" and r["access"] == "LDSM" and r["elem_bits"] == 16)
    assert ldsm["base"][8] == {"F": 48} and ldsm["base"][16] == {"ok": 48}
    assert ldsm["pitch"][2] == {"F": 24}                  # LDSM: the exact pitch, so a fault, not wrong rows
    sub = next(r for r in t if r["space"] == "shared" and r["access"] == "LDSM" and r["elem_bits"] == 4)
    assert sub["pitch"] == {1: {"W": 4}, 2: {"W": 4}, 4: {"F": 4}, 8: {"F": 4}, 32: {"ok": 4}}
    gen = next(r for r in t if r["space"] == "generic" and r["window"] == "global" and r["kind"] == "load"
               and r["access"] == "LD.E" and r["elem_bits"] == 16)
    assert gen["pitch"][2] == {"W": 30}
    # no probe with base and pitch at or above its access width ever faulted or moved wrong data
    for q in A.summary_doc()["probes"]:
        w = (q["predicted"] or {}).get("width")
        if w and min(q["base_align"], q["pitch_align"] or 1) >= w:
            assert q["status"] == "ok" and q["data"] != "differs", q["name"]


@pytest.mark.skipif(not all(os.path.isdir(r) for r in RUNS), reason="run3 / run4 data not on this machine")
def test_summary_is_the_runs_condensed():
    doc = A.merge_runs([A.load_run(r) for r in RUNS])
    s = A.summarize(doc, SUMMARY["meta"]["provenance"])
    assert json.loads(json.dumps(s)) == SUMMARY


def test_the_sm90_note_is_added_above_the_memory_semantics():
    """memory.check_access is the text's verdict alone; alignment.check_access adds what ptxas's sm_90
    code does (the SASS model sits above the memory semantics, formal.wmma.memory never imports it)."""
    op = "wmma.load.a.sync.aligned.row.m16n16k16.shared.s8"
    text, model = M.check_access(op, 0x100, 24), A.check_access(op, 0x100, 24)
    assert text.legal and model.legal and text.violations == model.violations
    assert not any("sm_90" in n for n in text.notes)
    assert [n for n in model.notes if n not in text.notes] == [A.sm90_note(text.view, 0x100, 24, True, None, True)]
    assert "faults on the H100" in model.notes[-1]
