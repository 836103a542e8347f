"""The checked-in hardware evidence (proofs/evidence/) is complete and is what the README says:
every register-level form the catalog lists for sm_90 ran on the H100 with >= 10,000 warps per
(form, selector) and zero mismatches, and the README table is generated from the records."""

from __future__ import annotations

import json
from pathlib import Path

from formal.evidence import BEGIN, END, EVIDENCE, table
from formal.catalog import parse
from formal.hw.check import all_cases

ROOT = Path(__file__).resolve().parent.parent


def _rec(name):
    return json.loads((EVIDENCE / name).read_text())


def test_hw_check_covers_every_sm90_register_level_case():
    rec = _rec("hw_check_h100.json")
    assert rec["gpu"]["name"].startswith("NVIDIA H100") and rec["gpu"]["compute_capability"] == "9.0"
    got = {(r["opcode"], r["sel"]): r for r in rec["results"]}
    want = {(c.form.opcode, c.imm.sel if c.form.is_sparse else None) for c in all_cases("sm_90", "9.0")}
    assert want <= set(got), sorted(want - set(got))[:5]
    for key in want:
        r = got[key]
        assert r["trials"] >= 10_000, key
        assert r["mismatches"] == 0 and not r["error"], key
        assert set(r["per_regime"]) == set(rec["regimes"]), key
    assert rec["mismatched_warps"] == 0 and rec["errors"] == 0


def test_vectors_and_probes_records():
    v = _rec("vectors_h100.json")
    assert v["total_mismatches"] == 0 and not v["errors"] and v["total_forms"] == len(
        {c.form.opcode for c in all_cases("sm_90", "9.0")})
    n = _rec("numerics_probes_h100.json")
    assert n["probes"] == n["decided"] == n["model_ok"] and not n["errors"]
    m = _rec("metadata_probes_h100.json")
    assert m["cases"] == m["match"] == len([c for c in all_cases("sm_90", "9.0") if c.form.is_sparse])


def test_a_million_warps_of_one_form_in_under_a_minute():
    rec = _rec("hw_million_h100.json")
    assert {r["results"][0]["opcode"] for r in rec["runs"]} == {
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"}
    for r in rec["runs"]:
        assert r["gpu"]["name"].startswith("NVIDIA H100") and r["forms"] == r["cases"] == 1
        assert r["trials"] >= 1_000_000 and r["mismatched_warps"] == 0 and r["errors"] == 0
        assert set(r["results"][0]["per_regime"]) == set(r["regimes"]) and len(r["regimes"]) == 6
        assert r["seconds"] <= r["wall_s"] < 60


def test_standalone_cuda_harness_ran_on_the_h100():
    """tools/device_session.py step cuda_template: the template built by nvcc for 15 forms covering
    every register kind it handles, each run on its hex vectors, its results verified."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("device_session", ROOT / "tools" / "device_session.py")
    ds = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ds)
    CUDA_TEMPLATE_FORMS = ds.CUDA_TEMPLATE_FORMS
    rec = _rec("cuda_template_h100.json")
    assert rec["gpu"]["name"].startswith("NVIDIA H100")
    assert [r["opcode"] for r in rec["forms"]] == [parse(op).opcode for op in CUDA_TEMPLATE_FORMS]
    for r in rec["forms"]:
        assert r["nvcc_rc"] == 0 and r["harness_rc"] == 0 and r["ok"] and r["failed"] == 0 and not r["errors"]
        assert r["cases"] >= 48 and "0 mismatching" in r["harness_out"]
    kinds = {parse(r["opcode"]).atype for r in rec["forms"]} | {parse(r["opcode"]).sparsity for r in rec["forms"]}
    assert {"f16", "bf16", "tf32", "s8", "s4", "b1", "f64", "e4m3", "u4"} <= kinds


def test_readme_table_is_generated():
    text = (ROOT / "README.md").read_text()
    assert BEGIN in text and END in text
    block = text[text.index(BEGIN) + len(BEGIN):text.index(END)].strip("\n")
    assert block == table().strip("\n"), "regenerate: python3 -m formal.evidence --readme README.md"
