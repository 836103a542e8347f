"""Observed wmma fragment maps (specs/observed/) and their proved properties."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from formal.expr import Formula
from formal.wmma import maps as mp

# every test here that needs maps.properties() (about 15 s, cached per process) runs on one xdist
# worker with test_wmma_theorems' run_all, which needs the same report (pyproject: --dist loadgroup)
pytestmark = pytest.mark.xdist_group("wmma_map_properties")

REF = Path(__file__).resolve().parent / "data" / "reference_layouts.json"   # copy of shared/reference/layouts.json
TP = mp.third_party()


def _one(**kw):
    ms = mp.find(TP, **kw)
    assert len(ms) == 1, (kw, [m.id for m in ms])
    return ms[0]


def test_third_party_maps_carry_provenance():
    assert len(TP) == 20
    for m in TP:
        assert m.evidence == "third-party-empirical"
        p = m.provenance
        assert p["repo"] == "wmmae/wmma_extension" and p["function"].startswith("foreach_ij")
        assert all(len(f["commit"]) == 40 for f in p["files"])
        assert m.archs and set(m.archs) <= {"sm_70", "sm_75", "sm_80"}


@pytest.mark.skipif(not REF.exists(), reason="shared/reference/layouts.json not present")
def test_third_party_maps_agree_with_the_reference_transcription():
    """Two transcriptions of the same source (ours and layouts.json) give the same tables."""
    ref = [e for e in json.loads(REF.read_text())["entries"] if e.get("kind") == "wmma"]
    assert len(ref) == 12
    lane = np.repeat(np.arange(32), 16)
    for e in ref:
        n = e["num_elems"]
        lane = np.repeat(np.arange(32), n)
        i = np.tile(np.arange(n), 32)
        rr = np.asarray(Formula(e["row"]).eval({"lane": lane, "i": i})) * np.ones_like(lane)
        cc = np.asarray(Formula(e["col"]).eval({"lane": lane, "i": i})) * np.ones_like(lane)
        arch = {"wmma.m16n16k16.f16.sm70": "sm_70", "wmma.m16n16k16.f16.sm75+": "sm_75",
                "wmma.m16n16k8.tf32.sm80": "sm_80"}[e["instruction"]]
        op = e["operand"]
        matrix = op[0].lower()
        kw = dict(archs=arch, matrix=matrix)
        if matrix == "c":
            kw["types"] = op.split(".")[1] if "." in op else "f32"
            kw["layout"] = "row"
        else:
            kw["layout"] = op.split(".")[1] if "." in op else "row"
        if "tf32" in e["instruction"]:
            kw["shape"] = "m16n16k8"
        else:
            kw["shape"] = "m16n16k16"
        m = _one(**kw)
        cols = m.cols
        assert np.array_equal(m.single().reshape(-1), (rr * cols + cc).reshape(-1)), e["id"]


def test_every_published_map_covers_its_matrix():
    for m in TP:
        r = mp.prove_covers(m)
        assert r.proved and r.cross_check["agrees"], r.line()


def test_sm75_f16_multiplicands_hold_every_cell_twice_in_the_same_lane():
    for matrix in "ab":
        m = _one(archs="sm_75", matrix=matrix, types="f16", layout="row")
        inj = mp.prove_injective(m)
        assert inj.status == "refuted" and inj.cross_check["agrees"]
        assert inj.cross_check["max_multiplicity"] == 2 and inj.cross_check["duplicated_cells"] == 256
        held = inj.witness["held_by"]
        assert len(held) == 2 and held[0]["lane"] == held[1]["lane"]
        assert held[1]["element"] - held[0]["element"] == 8
        assert mp.prove_half_duplicates(m).proved
        s = m.summary()
        assert s["distinct_cells_per_lane"] == [(8, 32)]          # 16 elements per lane, 8 distinct


def test_sm70_f16_multiplicands_duplicate_across_lanes():
    a = _one(archs="sm_70", matrix="a", types="f16", layout="row")
    inj = mp.prove_injective(a)
    assert inj.status == "refuted"
    lanes = [h["lane"] for h in inj.witness["held_by"]]
    assert lanes == [0, 8]                                     # lanes differing in bit 3 hold A twice
    hd = mp.prove_half_duplicates(a)
    assert hd.status == "refuted" and hd.witness == {"lane": 0, "element": 0} and hd.cross_check["agrees"]
    b = _one(archs="sm_70", matrix="b", types="f16", layout="col")
    lanes = [h["lane"] for h in mp.prove_injective(b).witness["held_by"]]
    assert lanes == [0, 4]                                     # bit 2 for B


def test_accumulator_maps_are_bijections():
    for m in mp.find(TP, matrix="c"):
        assert mp.prove_injective(m).proved
        assert m.summary()["multiplicity_histogram"] == [(1, m.rows * m.cols)]


def test_row_and_col_layouts():
    r = mp.prove_same_map(_one(archs="sm_70", matrix="a", types="f16", layout="row"),
                          _one(archs="sm_70", matrix="a", types="f16", layout="col"))
    assert r.status == "refuted" and r.cross_check["agrees"]
    # lane 0, element 1: row-major gives (0, 1) (col = i); col-major gives (1, 0) (row = i & 3)
    assert r.witness["slot"]["lane"] == 0 and r.witness["slot"]["element"] == 1
    assert r.witness["cells"] == [[[0, 1]], [[1, 0]]]
    for arch, shape, t in (("sm_75", "m16n16k16", "f16"), ("sm_80", "m16n16k8", "tf32")):
        for matrix in "ab":
            r = mp.prove_same_map(_one(archs=arch, matrix=matrix, types=t, layout="row", shape=shape),
                                  _one(archs=arch, matrix=matrix, types=t, layout="col", shape=shape))
            assert r.proved and r.cross_check["agrees"]


def test_sm70_f16_and_f32_accumulators_differ():
    r = mp.prove_same_map(_one(archs="sm_70", matrix="c", types="f16", layout="row"),
                          _one(archs="sm_70", matrix="c", types="f32", layout="row"))
    assert r.status == "refuted"
    # hand: f16 lane 0 i 2 -> (0, 2); f32 lane 0 i 2 -> (2 * 1, 0) = (2, 0)
    assert r.witness["slot"]["element"] == 2 and r.witness["cells"] == [[[0, 2]], [[2, 0]]]
    assert r.cross_check["differing_slots"] == 128


def test_synthetic_map_missing_a_cell_is_refuted_with_the_smallest_cell():
    m = mp.from_formulas("t", "m16n16k16", "c", 8, "(lane >> 2) + 8 * ((i >> 1) & 1)",
                         "min(2 * (lane & 3) + (i & 1) + 8 * ((i >> 2) & 1), 14)")
    r = mp.prove_covers(m)
    assert r.status == "refuted" and r.witness == {"uncovered": [0, 15]} and r.cross_check["agrees"]


def test_from_formulas_rejects_cells_outside():
    with pytest.raises(ValueError):
        mp.from_formulas("t", "m16n16k16", "c", 8, "lane", "i")


def test_observed_json_format_roundtrip(tmp_path):
    m = _one(archs="sm_75", matrix="c", types="f16", layout="row")
    cells = m.single().reshape(-1).tolist()
    doc = {"meta": {"archs": ["sm_90"], "evidence": "silicon", "device": {"name": "test"}},
           "maps": [{"id": "x", "opcode": "wmma.load.c.sync.aligned.row.m16n16k16.f16", "kind": "load",
                     "shape": "m16n16k16", "matrix": "c", "type": "f16", "layout": "row", "rows": 16, "cols": 16,
                     "elements": 8, "elems_per_reg": 2, "cells": cells, "multi": {}, "anomalies": {}}]}
    p = tmp_path / "wmma_sm90_test.json"
    p.write_text(json.dumps(doc))
    (got,) = mp.load_observed_json(p)
    assert got.evidence == "silicon" and np.array_equal(got.single(), m.single())
    assert mp.prove_same_map(got, m).proved


def test_properties_report_has_no_unknowns_and_cross_checks_agree():
    rs = mp.properties(list(TP))
    assert rs and all(r.status in ("proved", "refuted") for r in rs)
    assert all(r.cross_check["agrees"] for r in rs)


# -- the sm_90 silicon observations (specs/observed/wmma_sm90_h100.json, run3) ------------------

SM90 = [m for m in mp.all_maps() if m.evidence == "silicon"]
BY_ID = {m.id: m for m in SM90}


@pytest.fixture(scope="module")
def props():
    return {r.obligation: r for r in mp.properties()}


def test_sm90_file_provenance_and_coverage():
    (f,) = [p for p in mp.observed_files() if p.name == "wmma_sm90_h100.json"]
    meta = json.loads(f.read_text())["meta"]
    assert meta["device"]["name"] == "NVIDIA H100 80GB HBM3" and meta["target"] == "sm_90" and meta["ptx"] == "7.8"
    assert "580.159.04" in meta["provenance"]["device"] and meta["provenance"]["run"].startswith("run3")
    assert meta["run"] == {"errors": {}, "probes": 798, "probes_with_data": 798, "status_counts": {"ok": 798}}
    assert meta["execution"]["status_counts"] == {"ok": 1074}           # with the 276 pipeline kernels
    assert meta["coverage"]["families"] == 114 and len(meta["coverage"]["observed"]) == 114
    assert meta["coverage"]["not_observed"] == []
    # only map files are picked up (the SASS survey, the pipeline slice and the alignment summary live beside it)
    assert all(json.loads(p.read_text()).get("maps") is not None for p in mp.observed_files())
    assert len(SM90) == 114 and len({(m.kind, m.shape, m.matrix, m.types, m.layout) for m in SM90}) == 114
    assert sum(m.kind == "store" for m in SM90) == 26


def test_sm90_every_variant_was_observed_and_agrees():
    """Each form in 4 to 7 variants (strides, spaces, pointer windows), 798 maps in all; every one the same."""
    n = 0
    for m in SM90:
        vs = m.provenance["variants"]
        assert 3 <= len(vs) <= 6 and all(v["same_as_canonical"] and v["n_differing"] == 0 for v in vs), m.id
        assert m.provenance["variant"] == "default/global"
        assert not any(v for k, v in m.provenance["anomalies"].items() if k != "tf32_low_bits")
        n += 1 + len(vs)
    assert n == 798


def test_sm90_f16_a_is_the_published_sm75_sm80_map():
    m = BY_ID["sm90.load.m16n16k16.a.f16.row"]
    r = mp.prove_same_map(m, _one(archs="sm_80", matrix="a", types="f16", layout="row"))
    assert r.proved and r.cross_check["agrees"]
    assert mp.prove_half_duplicates(m).proved                      # elements i and i+8 of each lane agree
    # and its first 8 elements are the mma.m16n8k16 .f16 A fragment (PTX ISA 9.7.14.5.8)
    lane = np.repeat(np.arange(32), 8)
    i = np.tile(np.arange(8), 32)
    g, t = lane >> 2, lane % 4
    row = g + 8 * ((i >> 1) & 1)
    col = t * 2 + (i & 1) + 8 * (i >= 4)
    assert np.array_equal(m.single()[:, :8].reshape(-1), row * 16 + col)
    assert mp.prove_same_map(m, _one(archs="sm_70", matrix="a", types="f16", layout="row")).status == "refuted"


@pytest.mark.parametrize("t", ["s8", "u8"])
def test_sm90_8bit_a_is_the_mma_m16n8k16_integer_fragment(t):
    """Formula from PTX ISA 9.7.14.5.9 (mma.m16n8k16 .s8/.u8 A): row = groupID + 8 * (i >= 4),
    col = threadID_in_group * 4 + (i & 3); 8 elements per lane, each cell once."""
    m = BY_ID[f"sm90.load.m16n16k16.a.{t}.row"]
    lane = np.repeat(np.arange(32), 8)
    i = np.tile(np.arange(8), 32)
    row = (lane >> 2) + 8 * (i >= 4)
    col = (lane % 4) * 4 + (i & 3)
    assert np.array_equal(m.single().reshape(-1), row * 16 + col)
    assert mp.prove_injective(m).proved and mp.prove_covers(m).proved


def test_sm90_accumulator_is_two_mma_m16n8_c_tiles():
    """C/D m16n16k16 (every type, both layouts, load and store): elements 0-3 are the mma m16n8 C
    fragment (PTX ISA 9.7.14.5.8: row = groupID + 8 * (i >= 2), col = threadID_in_group * 2 + (i & 1))
    of columns 0-7, elements 4-7 the same of columns 8-15 -- written by hand from the ISA text."""
    lane = np.repeat(np.arange(32), 8)
    i = np.tile(np.arange(8), 32)
    row = (lane >> 2) + 8 * ((i >> 1) & 1)
    col = (lane % 4) * 2 + (i & 1) + 8 * (i >> 2)
    want = row * 16 + col
    ms = [m for m in SM90 if m.shape == "m16n16k16" and m.matrix in "cd"]
    assert len(ms) == 12
    for m in ms:
        assert np.array_equal(m.single().reshape(-1), want), m.id


def test_sm90_f16_multiplicands_of_the_thin_shapes_hold_every_cell_four_times():
    for mid in ("sm90.load.m8n32k16.a.f16.row", "sm90.load.m32n8k16.b.f16.col"):
        m = BY_ID[mid]
        assert m.summary()["multiplicity_histogram"] == [(4, 128)]
        assert mp.prove_periodic(m, 4).proved
        r = mp.prove_periodic(m, 2)
        assert r.status == "refuted" and r.cross_check["agrees"]
        assert mp.prove_half_duplicates(m).proved                 # period 4 implies period 8


def test_prove_periodic_finds_the_first_break():
    m = BY_ID["sm90.load.m16n16k16.a.f16.row"]
    r = mp.prove_periodic(m, 4)
    assert r.status == "refuted" and r.witness == {"lane": 0, "element": 0} and r.cross_check["agrees"]
    with pytest.raises(ValueError):
        mp.prove_periodic(m, 16)


def test_sm90_property_report(props):
    """The report over every map (``ptx-formal wmma maps --arch sm_90 --properties``)."""
    assert all(r.status in ("proved", "refuted") and r.cross_check["agrees"] for r in props.values())
    for m in SM90:
        assert props[f"wmma.map.covers[{m.id}]"].proved
        assert props[f"wmma.map.variants_agree[{m.id}]"].proved
    dup = {m.id for m in SM90 if not props[f"wmma.map.injective[{m.id}]"].proved}
    assert dup == {f"sm90.load.{s}.{x}.f16.{l}" for s, x in (("m16n16k16", "a"), ("m16n16k16", "b"), ("m8n32k16", "a"),
                                                           ("m32n8k16", "b")) for l in ("row", "col")}
    # row and col layouts: the same map for every sm_90 pair
    rc = [r for k, r in props.items() if k.startswith("wmma.map.same[sm90") and ".row == sm90" in k and k.endswith(".col]")]
    assert len(rc) == 54 and all(r.proved for r in rc)            # 114 forms less the 6 sub-byte A row / B col
    # load.c = store.d for every accumulator form, and the accumulator types share one map
    ls = [r for k, r in props.items() if k.startswith("wmma.map.same[sm90.load") and "== sm90.store" in k]
    assert len(ls) == 26 and all(r.proved for r in ls)            # 13 accumulator types x shapes, 2 layouts
    acc = [r for k, r in props.items() if k.startswith("wmma.map.same[sm90") and r.statement.endswith("accumulators)")]
    assert len(acc) == 24 and all(r.proved for r in acc)
    # the .f16 multiplicand = the .bf16 one (its first half / quarter where it duplicates)
    bf = [r for k, r in props.items() if k.startswith("wmma.map.same[sm90") and "bf16 map" in r.statement]
    assert len(bf) == 12 and all(r.proved for r in bf)
    assert props["wmma.map.same[sm90.load.m8n32k16.a.f16.row[:4] == sm90.load.m8n32k16.a.bf16.row]"].proved
    # against the published maps: sm_75/sm_80 equal, sm_70 not
    pub = {k: r for k, r in props.items() if k.startswith("wmma.map.same[sm90") and "wmmae." in k}
    assert len(pub) == 22                  # m16n16k16 .f16 A, B, C f16/f32 vs sm_70 and sm_75 (16); tf32 vs sm_80 (6)
    assert all(r.proved for k, r in pub.items() if "wmmae.sm7" not in k or "wmmae.sm75" in k)
    assert all(r.status == "refuted" for k, r in pub.items() if "wmmae.sm70" in k) and \
        sum("wmmae.sm70" in k for k in pub) == 8


# -- the CLI over the same report: `wmma maps --properties` and `wmma prove` (maps.properties() is
# computed once per process; the module's xdist group keeps them on the fixture's worker)

def _cli(capsys, *argv):
    from formal.cli import main

    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_maps_and_prove(capsys, tmp_path):
    rc, out, _ = _cli(capsys, "wmma", "maps", "--arch", "sm_70")
    assert rc == 0 and "wmmae.sm70.m16n16k16.f16.a.row" in out and "third-party-empirical" in out
    rc, out, _ = _cli(capsys, "wmma", "prove", "--smt2", str(tmp_path))
    assert rc == 0, out[-2000:]
    assert "0 unexpected, 0 enumeration disagreements" in out
    assert list(tmp_path.glob("*.smt2"))


def test_maps_sm90_properties(capsys):
    rc, out, _ = _cli(capsys, "wmma", "maps", "--arch", "sm_90", "--properties")
    assert rc == 0
    assert "sm90.load.m16n16k16.a.f16.row" in out and "silicon" in out
    assert "PROVED   wmma.map.same[sm90.load.m16n16k16.a.f16.row == wmmae.sm75.m16n16k16.f16.a.row]" in out
    assert "PROVED   wmma.map.half_duplicates[sm90.load.m16n16k16.a.f16.row]" in out
    assert "PROVED   wmma.map.periodic[sm90.load.m8n32k16.a.f16.row, 4]" in out
    assert "PROVED   wmma.map.injective[sm90.load.m16n16k16.a.s8.row]" in out
    assert "PROVED   wmma.map.same[sm90.load.m16n16k16.c.f16.row == sm90.store.m16n16k16.d.f16.row]" in out
    assert "REFUTED  wmma.map.same[sm90.load.m16n16k16.c.f32.row == wmmae.sm70.m16n16k16.c.f32.row]" in out
    last = out.strip().splitlines()[-1]
    assert last.startswith("# 114 maps, ") and "covers 114 proved" in last and "enumeration agrees with Z3" in last
