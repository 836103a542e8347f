"""proofs/evidence/wmma_h100.json against the checked-in condensed data (specs/observed/):
every number in the record is recomputed here from another file, and from the run itself
when run3's directories are on the machine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from formal import evidence as EV
from formal.specdata import spec_dir
from formal.wmma import alignment as A
from formal.wmma import check_pipeline_data
from formal.wmma import evidence as E

REC = json.loads((EV.EVIDENCE / "wmma_h100.json").read_text())
OBS = spec_dir() / "observed"
RUN3 = Path("/work/hwdata/run3")
RUN4 = Path("/work/hwdata/run4")


def test_record_header_and_readme_cells():
    assert REC["date"] == "2026-11-22" and REC["run"] == "run3"
    g = REC["gpu"]
    assert g["name"] == "NVIDIA H100 80GB HBM3" and g["driver_version"] == "580.159.04" and g["cuda_runtime"] == "13.2"
    for k in ("summary_runs", "summary_result"):
        assert REC[k] and "|" not in REC[k] and "\n" not in REC[k] and len(REC[k]) < 400
    assert REC["summary_runs"] == "798 load/store probes, 276 pipelines x 8 runs, 7,124 alignment probes (of 7,124)"
    assert "276/276 pipelines bit-exact" in REC["summary_result"]
    assert "predicts all 7,118 probes" in REC["summary_result"]
    # the README table row is built from the two phrases
    assert f"| {REC['summary_runs']} | {REC['summary_result']} |" in EV.table()


def test_maps_part_matches_the_observed_file():
    meta = json.loads((OBS / "wmma_sm90_h100.json").read_text())["meta"]
    m = REC["maps"]
    assert m["probes"] == meta["run"]["probes"] == meta["run"]["probes_with_data"] == 798
    assert m["status"] == meta["run"]["status_counts"] == {"ok": 798}
    assert m["families"] == m["families_total"] == meta["coverage"]["families"] == len(meta["coverage"]["observed"]) == 114
    assert m["anomalies"] == 0


def test_pipeline_part_matches_the_slice():
    p = REC["pipelines"]
    assert p["entries"] == 276 and p["runs_per_entry"] == 8 and p["counts"] == {"match": 276}
    assert p["mismatches"] == []
    # the checked-in slice is a subset of the run: every entry of it matches too
    r = check_pipeline_data(OBS / "wmma_pipeline_slice_sm90.json")
    assert r.counts == {"match": len(r.entries)} and len(r.entries) == 14


def test_alignment_part_matches_the_summary():
    a = REC["alignment"]
    s = A.load_summary()
    assert a["status"] == s["meta"]["status_counts"]
    assert a["jobs"] == a["sweep_probes"] + sum(a["reruns"].values()) == 7124
    assert sum(a["status"].values()) == a["sweep_probes"] == 7118        # run3 + run4: every probe ran
    assert a["wrong_data"] == len(s["wrong_data"]) == a["wrong_data_reproduced"] == 282
    assert a["sass_model_checked"] == a["sass_model_agrees"] == 7118
    st = {e["id"]: e["status"] for e in A.errata_status(A.summary_doc(), s["wrong_data"])}
    assert a["errata"] == st
    assert a["sass_model_checked"] - a["sass_model_agrees"] == s["meta"]["sass_model"]["disagreements"]


@pytest.mark.skipif(not all(p.is_dir() for p in (RUN3 / "wmma", RUN3 / "wmma_align", RUN4 / "a2")),
                    reason="run3/run4 data not on this machine")
def test_record_is_rebuilt_from_run3_and_run4():
    assert json.loads(json.dumps(E.build(RUN3 / "wmma", [RUN3 / "wmma_align", RUN4 / "a2"]))) == REC
