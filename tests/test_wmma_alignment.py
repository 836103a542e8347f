"""The alignment sweep (formal.hw.wmma_probe.alignment_probes / run_wmma_alignment_probes) and its
analysis (formal.wmma.alignment) without a GPU: kernels assemble, the text's verdicts agree with
check_access, the SASS survey matches the kernels, and the analysis can fail -- a simulated
device that breaks the SASS model or returns wrong data is caught."""

from __future__ import annotations

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
        from formal import ptxas
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
    if isinstance(p, W.Probe):
        return "fault" if p.name == "wl0016" else "ok"
    return "fault" if A.predict(p.manifest())["fault"] else "ok"


@pytest.fixture(scope="module")
def model_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("align")
    an = W.run_wmma_alignment_probes(out, families=SMALL, simulate=_model, workers=3, log=lambda s: None)
    return out, an


def test_simulated_run_agrees_with_the_model_and_is_isolated(model_run):
    out, an = model_run
    doc = A.load_run(out)
    assert an["status_counts"].keys() <= {"ok", "fault"} and an["ran"] == an["probes"]
    assert an["sass_model"]["disagreements"] == 0 and an["wrong_data"]["count"] == 0
    assert not an["address_check_failures"]
    faults = [e for e in doc["probes"] if e["status"] == "fault"]
    assert faults and all(e["error_class"] == "misaligned" for e in faults)
    # text-legal faults exist (.shared LDSM) and text-illegal successes (generic 4-byte loads)
    assert an["text"]["registers"]["text_allows_what_faults"] > 0
    assert an["text"]["elements"]["text_forbids_what_works"] > 0
    st = {e["id"]: e["status"] for e in an["errata"]}
    assert st["shared-ldsm-row-alignment"] == "confirmed" and st["generic-global-access-width"] == "confirmed"
    assert st["f64-accumulator-registers"] == "confirmed"
    re = {r["name"]: r["status"] for r in an["reruns"]}
    assert re["wl0016"] == "fault" and re["wl0063"] == "ok" and re["wp0000"] == "ok"
    # the data of every non-faulting probe equals its family's reference
    assert {e["data"] for e in doc["probes"] if e["status"] == "ok"} <= {"same", "reference"}
    raw = np.load(out / "wmma_alignment_raw.npz")
    assert set(doc["references"].values()) <= set(raw.files)
    # the text report names what it found
    txt = A.report_text(an)
    assert "SASS model" in txt and "erratum shared-ldsm-row-alignment: confirmed" in txt


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
    """A probe that does not fault but loads other registers is reported, and refutes the claim."""
    fam = ["wmma.load.a.sync.aligned.row.m16n16k16.s8"]
    an = W.run_wmma_alignment_probes(tmp_path, families=fam, simulate=_model, workers=2, reruns=False, log=lambda s: None)
    doc = A.load_run(tmp_path)
    victim = next(e for e in doc["probes"] if e["status"] == "ok" and e["space"] == "" and e["offset"] == 32)
    victim["data"] = "differs"                   # as _compare_with_references marks a mismatch
    an = A.analyse(doc)
    assert an["wrong_data"]["count"] == 1 and victim["name"] in an["wrong_data"]["examples"][0]
    assert {e["id"]: e["status"] for e in an["errata"]}["generic-global-access-width"] == "refuted"


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
    """Run on a silicon result (the lead's run3): every probe has a verdict or says why not."""
    doc = A.load_run(os.environ["WMMA_ALIGNMENT_RUN"])
    an = A.analyse(doc)
    print(json.dumps({k: an[k] for k in ("status_counts", "sass_model", "wrong_data", "errata")}, indent=1))
    assert an["wrong_data"]["count"] == 0
