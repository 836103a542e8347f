"""formal.wmma.check_pipeline_data: silicon load -> wmma.mma -> store against evaluate_matrices.

The checked-in slice (specs/observed/wmma_pipeline_slice_sm90.*) is from run3 (H100, 2026-11-22):
one entry per type combination plus wp0000, and every run of the three entries where the sm_90
arithmetic model before run3 and silicon differed (wp0035, wp0067: f16 x f16 + f32 -> f16; wp0216:
tf32 m16n16k8).  The tests check its provenance (the inputs are what the harness generates from the
seed, bit for bit), compare its silicon D with the evaluator bit for bit -- every entry, every
element: no known gaps are left (formal.numerics.sm90 has run3's two wmma lowerings as records) --
check that the readings those records replaced differ from silicon exactly where the old model did,
and that the checker reports a mismatch exactly where one is planted.  With run3's directory on the
machine, all 276 entries.
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
RUN3 = Path("/work/hwdata/run3/wmma")
# the slice's entries that the sm_90 model before run3 got wrong: the formal.numerics path key of the record
# that fixed them, and the superseded reading (a refuted hypothesis of formal.numerics.fit.sm90_alternatives)
KNOWN = {"wp0035": ("f16.f16@c=f32", "one rounding (f16 block, f32 c)"),
         "wp0067": ("f16.f16@c=f32", "one rounding (f16 block, f32 c)"),
         "wp0216": ("tf32.f32@m16n16k8", "n=8 (one block)")}


def _superseded(key: str, name: str):
    from formal.numerics.fit import sm90_alternatives
    return sm90_alternatives()[key][name]


def _doc():
    return json.loads(SLICE.read_text())


def test_slice_provenance():
    d = _doc()
    m = d["meta"]
    assert m["device"]["name"] == "NVIDIA H100 80GB HBM3" and m["target"] == "sm_90" and m["ptx"] == "7.8"
    assert "580.159.04" in m["slice"]["device"] and m["slice"]["run"].startswith("run3")
    assert m["execution"]["status_counts"] == {"ok": 1074}
    types = {tuple(W.cat.parse(e["opcode"]).__getattribute__(t) for t in ("atype", "ctype", "dtype")) for e in d["entries"]}
    assert len(types) == 12 and len(d["entries"]) == 14        # one entry per type combination + wp0035, wp0067
    assert {"wp0000", *KNOWN} <= {e["kernel"] for e in d["entries"]}
    z = np.load(SLICE.with_suffix(".npz"))
    for e in d["entries"]:
        assert e["status"] == "ok" and e["error"] is None
        assert z[f"{e['kernel']}.D"].shape[0] == e["runs"] == (8 if e["kernel"] in KNOWN else 2)


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


def test_silicon_d_matches_the_evaluator_everywhere():
    """Every D in the slice equals evaluate_matrices bit for bit: no known gaps, no alternatives open."""
    r = check_pipeline_data(SLICE)
    assert r.counts == {"match": 14} and r.ok


def _first_difference(got, D):
    diff = np.argwhere(np.asarray(got).astype(np.uint64) != D.astype(np.uint64))
    run, row, col = (int(x) for x in diff[0])
    return run, row, col, hex(int(got[run, row, col])), hex(int(D[run, row, col])), len(diff), \
        len(set(diff[:, 0].tolist()))


def test_the_superseded_readings_differ_from_silicon_where_the_old_model_did():
    """The model before run3 (one RN rounding of an f16 D read from an f32 C; one n=8 tf32 block for
    m16n16k8) against the slice's silicon: it differs exactly at the elements the first run3 check
    reported, and equals silicon on the entries of those paths it got right."""
    from formal import evaluate as ev
    from formal.numerics import MODELS, mma_matrices

    z = np.load(SLICE.with_suffix(".npz"))
    first = {"wp0035": (0, 7, 26, "0xbfaf", "0xbfae", 2, 2), "wp0067": (3, 24, 0, "0xc5ed", "0xc5ec", 1, 1),
             "wp0216": (0, 0, 0, "0x3ff32a67", "0x3ff32a66", 313, 8)}
    paths = {key for key, _ in KNOWN.values()}
    checked = 0
    for e in _doc()["entries"]:
        f = W.cat.parse(e["opcode"])
        k = e["kernel"]
        key, _ = MODELS["sm_90"].path(f.atype, f.btype, f.ctype, f.dtype, shape=f.mnk)
        if key not in paths:
            continue
        A, B, C, D = (z[f"{k}.{x}"] for x in "ABCD")
        name = next(n for kk, n in KNOWN.values() if kk == key)
        old = np.asarray(mma_matrices(A, B, C, **dict(ev._numerics_kw(f, "sm_90"), arch=_superseded(key, name))))
        checked += 1
        if k in KNOWN:
            assert _first_difference(old, D) == first[k], k
        else:                                      # the model before run3 got this entry right
            assert np.array_equal(old.astype(np.uint64), D.astype(np.uint64)), k
    assert checked == 4          # wp0035, wp0067, wp0216 and the slice's other f16 x f16 + f32 -> f16 entry


def test_compare_reports_missing_d(tmp_path):
    """An entry without D (a kernel that did not run) is no_silicon_output, and still evaluated."""
    d = _doc()
    z = dict(np.load(SLICE.with_suffix(".npz")))
    del z["wp0000.D"]
    d["entries"][0]["error"] = "run: CUDA_ERROR_MISALIGNED_ADDRESS (planted)"
    out = tmp_path / "p.json"
    out.write_text(json.dumps(d))
    np.savez(out.with_suffix(".npz"), **z)
    r = check_pipeline_data(out)
    w = next(e for e in r.entries if e.kernel == "wp0000")
    assert w.status == "no_silicon_output" and w.detail["evaluator"] == "ok" and "planted" in w.detail["error"]
    assert "no silicon output for 1 entries" in r.text()


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
    assert r.counts == {"match": 14} and r.ok
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


@pytest.mark.skipif(not RUN3.exists(), reason="run3 data not on this machine")
def test_run3_directory(tmp_path):
    """All 276 entries x 8 runs match bit for bit; the superseded readings are refuted by exactly the 10
    entries the first run3 check reported (2 f16 x f16 + f32 -> f16, all 8 tf32 m16n16k8)."""
    from formal import evaluate as ev
    from formal.numerics import mma_matrices

    r = check_pipeline_data(RUN3)
    assert r.counts == {"match": 276} and len(r.entries) == 276 and r.ok
    doc = json.loads((RUN3 / "wmma_pipeline.json").read_text())
    refuted, applies = [], 0
    with np.load(RUN3 / "wmma_pipeline.npz") as z:
        for e in doc["entries"]:
            f = W.cat.parse(e["opcode"])
            key = ("f16.f16@c=f32" if (f.atype, f.ctype, f.dtype) == ("f16", "f32", "f16") else
                   "tf32.f32@m16n16k8" if f.atype == "tf32" else None)
            if key is None:
                continue
            applies += 1
            name = next(n for kk, n in KNOWN.values() if kk == key)
            k = e["kernel"]
            A, B, C, D = (z[f"{k}.{x}"] for x in "ABCD")
            old = np.asarray(mma_matrices(A, B, C, **dict(ev._numerics_kw(f, "sm_90"), arch=_superseded(key, name))))
            if not np.array_equal(old.astype(np.uint64), D.astype(np.uint64)):
                refuted.append(k)
    assert applies == 32
    assert refuted == ["wp0035", "wp0067"] + [f"wp{k:04d}" for k in range(216, 224)]
    # extract_slice reproduces the checked-in slice's arrays
    out = P.extract_slice(RUN3, tmp_path / "s.json", per_type=1, all_runs=tuple(KNOWN))
    a, b = np.load(out.with_suffix(".npz")), np.load(SLICE.with_suffix(".npz"))
    assert sorted(a.files) == sorted(b.files) and all(np.array_equal(a[f], b[f]) for f in a.files)
    shutil.rmtree(tmp_path)


@pytest.mark.skipif(not RUN2.exists(), reason="run2 data not on this machine")
def test_run2_directory():
    r = check_pipeline_data(RUN2)
    assert r.counts == {"no_silicon_output": 276}
