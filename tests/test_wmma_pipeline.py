"""formal.wmma.check_pipeline_data: silicon load -> wmma.mma -> store against evaluate_matrices.

The checked-in slice (specs/observed/wmma_pipeline_slice_sm90.*) is from run2 (H100, 2026-11-22),
which produced no D: its pipeline phase ran in a CUDA context already dead from an earlier fault.
So the slice holds the inputs and the recorded error.  The tests check its provenance (the inputs
are what the harness generates from the seed, bit for bit), that every form is evaluated, and
that the checker reports a mismatch exactly where one is planted.  When a slice with silicon D is
checked in (run3), test_silicon_d_matches_the_evaluator checks it bit for bit.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from formal import evaluate_matrices
from formal.hw import wmma_probe as W
from formal.specdata import spec_dir
from formal.wmma import check_pipeline_data
from formal.wmma import pipeline as P

SLICE = spec_dir() / "observed" / "wmma_pipeline_slice_sm90.json"
RUN2 = Path("/work/hwdata/run2/wmma")


def _doc():
    return json.loads(SLICE.read_text())


def test_slice_provenance():
    d = _doc()
    m = d["meta"]
    assert m["device"]["name"] == "NVIDIA H100 80GB HBM3" and m["target"] == "sm_90" and m["ptx"] == "7.8"
    assert "580.159.04" in m["slice"]["device"] and m["slice"]["run"].startswith("run2")
    types = {tuple(W.cat.parse(e["opcode"]).__getattribute__(t) for t in ("atype", "ctype", "dtype")) for e in d["entries"]}
    assert len(types) == 12 and len(d["entries"]) == 12        # one entry per type combination, wp0000 among them
    assert any(e["kernel"] == "wp0000" for e in d["entries"])


def test_slice_inputs_are_the_harness_inputs():
    """Inputs come from the seed: pipeline_inputs(probe, seed) regenerates run2's arrays bit for bit."""
    probes = {p.name: p for p in W.pipeline_probes()}
    z = np.load(SLICE.with_suffix(".npz"))
    for e in _doc()["entries"]:
        p = probes[e["kernel"]]
        assert p.opcode == e["opcode"] and p.extra["store"] == e["store"]
        gen = W.pipeline_inputs(p, e["seed"] if "seed" in e else int(e["kernel"][2:]))
        for x in "ABC":
            assert np.array_equal(z[f"{e['kernel']}.{x}"], gen[x][e["source_runs"]]), (e["kernel"], x)


def test_run2_slice_has_no_silicon_output_and_every_form_evaluates():
    r = check_pipeline_data(SLICE)
    assert r.counts == {"no_silicon_output": 12} and not r.ok
    assert all(e.detail["evaluator"] == "ok" for e in r.entries)
    w = next(e for e in r.entries if e.kernel == "wp0000")
    assert "MISALIGNED" in w.detail["error"]
    assert "no silicon output for 12 entries" in r.text()


def _with_d(tmp_path, plant=None) -> Path:
    """A copy of the slice whose D is the evaluator's (plant: (kernel, run, row, col) gets one bit flipped)."""
    d = _doc()
    z = dict(np.load(SLICE.with_suffix(".npz")))
    for e in d["entries"]:
        k = e["kernel"]
        D = np.asarray(evaluate_matrices(e["opcode"], z[f"{k}.A"], z[f"{k}.B"], z[f"{k}.C"], arch="sm_90")).copy()
        if plant and plant[0] == k:
            D[plant[1:]] ^= D.dtype.type(1)
        z[f"{k}.D"] = D
    out = tmp_path / "p.json"
    out.write_text(json.dumps(d))
    np.savez(out.with_suffix(".npz"), **z)
    return out


def test_checker_matches_and_localises_a_planted_difference(tmp_path):
    r = check_pipeline_data(_with_d(tmp_path))
    assert r.counts == {"match": 12} and r.ok
    k = "wp0000"
    r = check_pipeline_data(_with_d(tmp_path, (k, 1, 3, 5)))
    bad = [e for e in r.entries if e.status == "mismatch"]
    assert [e.kernel for e in bad] == [k] and not r.ok
    d = bad[0].detail
    assert (d["run"], d["row"], d["col"], d["differing_elements"], d["differing_runs"]) == (1, 3, 5, 1, 1)
    assert d["mode"] == "bits" and int(d["silicon"], 16) ^ int(d["expected"], 16) == 1
    assert "MISMATCH wp0000" in r.text()


def test_compare_reports_shape_errors_and_missing_d():
    e = _doc()["entries"][0]
    z = np.load(SLICE.with_suffix(".npz"))
    A, B, C = (z[f"{e['kernel']}.{x}"] for x in "ABC")
    assert P.compare(e["opcode"], e["store"], A, B, C, None)[0] == "no_silicon_output"
    assert P.compare(e["opcode"], e["store"], A, B, C, np.zeros((1, 2, 2), np.uint16))[0] == "evaluator_error"


def test_bad_path_is_a_bad_argument(tmp_path):
    from formal.catalog import BadArgument
    with pytest.raises(BadArgument):
        check_pipeline_data(tmp_path)
    with pytest.raises(BadArgument):
        check_pipeline_data(tmp_path / "x.txt")


def test_silicon_d_matches_the_evaluator():
    """Every D in the checked-in slice equals evaluate_matrices bit for bit (none yet: run2 made none)."""
    z = np.load(SLICE.with_suffix(".npz"))
    if not any(f.endswith(".D") for f in z.files):
        pytest.skip("the checked-in slice has no silicon D yet (run2 produced none; replace with a run3 slice)")
    r = check_pipeline_data(SLICE)
    assert r.ok, r.text()


@pytest.mark.skipif(not RUN2.exists(), reason="run2 data not on this machine")
def test_run2_directory(tmp_path):
    r = check_pipeline_data(RUN2)
    assert r.counts == {"no_silicon_output": 276}
    # extract_slice reproduces the checked-in slice's arrays
    out = P.extract_slice(RUN2, tmp_path / "s.json", per_type=1)
    a, b = np.load(out.with_suffix(".npz")), np.load(SLICE.with_suffix(".npz"))
    assert sorted(a.files) == sorted(b.files) and all(np.array_equal(a[f], b[f]) for f in a.files)
    shutil.rmtree(tmp_path)
