"""ptx-formal wmma ...: exit codes, one-line errors, JSON."""

from __future__ import annotations

import json

import pytest

from formal.cli import main

F16A = "wmma.load.a.sync.aligned.row.m16n16k16.f16"


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_check_legal_and_illegal(capsys):
    rc, out, _ = run(capsys, "wmma", "check", F16A, "--ptr", "0x1000", "--stride", "32")
    assert rc == 0 and "LEGAL" in out
    rc, out, _ = run(capsys, "wmma", "check", F16A, "--ptr", "0x1000", "--stride", "24")
    assert rc == 1 and "align.row_start" in out and "row 1" in out
    rc, out, _ = run(capsys, "wmma", "check", F16A, "--ptr", "0", "--stride", "8", "--json")
    d = json.loads(out)
    assert rc == 1 and not d["legal"]
    v = {x["rule"]: x for x in d["violations"]}
    assert v["stride.min"]["witness"]["same_address"] == [[0, 8], [1, 0]]


@pytest.mark.parametrize("argv", [
    ("wmma", "check", F16A, "--ptr", "zz"),
    ("wmma", "check", F16A, "--ptr", "-4"),
    ("wmma", "check", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "--ptr", "0"),
    ("wmma", "check", "wmma.load.a.sync.aligned.col.m8n8k32.s4", "--ptr", "0"),
    ("wmma", "check", "wmma.lod.a.sync.aligned.row.m16n16k16.f16", "--ptr", "0"),
    ("wmma", "check", F16A, "--ptr", "0", "--points-to", "texture"),
    ("wmma", "check", F16A),
    ("wmma", "strides", F16A),
    ("wmma", "strides", F16A, "--ptr-align", "0"),
    ("wmma", "address", F16A, "--row", "16", "--col", "0"),
    ("wmma", "probe-decode", "/nonexistent"),
    ("wmma", "maps", "--arch", "sm_99"),
])
def test_bad_input_is_one_line_exit_2(capsys, argv):
    rc, out, err = run(capsys, *argv)
    assert rc == 2
    assert err.strip().count("\n") == 0 and err.startswith("ptx-formal")
    assert "Traceback" not in err


def test_strides(capsys):
    rc, out, _ = run(capsys, "wmma", "strides", F16A, "--ptr-align", "32", "--enumerate", "256")
    assert rc == 0 and "stride ≡ 0 (mod 16), stride ≥ 16" in out and "PROVED" in out
    rc, out, _ = run(capsys, "wmma", "strides", F16A, "--ptr-align", "16", "--json", "--enumerate", "64")
    d = json.loads(out)
    assert rc == 1 and d["empty"] and d["witness"]["ptr"] == 16


def test_address_describe_errata(capsys):
    rc, out, _ = run(capsys, "wmma", "address", "wmma.load.a.sync.aligned.row.m8n8k32.s4", "--row", "1", "--col", "3",
                     "--ptr", "0x40", "--json")
    d = json.loads(out)
    assert rc == 0 and (d["index"], d["byte"], d["bit_in_byte"]) == (35, 0x40 + 17, 4)
    rc, out, _ = run(capsys, "wmma", "describe", "wmma.store.d.sync.aligned.col.m8n8k4.f64")
    assert rc == 0 and "align.row_start" in out and "column" in out
    rc, out, _ = run(capsys, "wmma", "errata", "--json")
    ids = {e["id"] for e in json.loads(out)}
    assert {"fragment-size", "default-stride-misaligned", "subbyte-order", "f64-accumulator-registers"} <= ids


def test_maps_and_prove(capsys, tmp_path):
    rc, out, _ = run(capsys, "wmma", "maps", "--arch", "sm_70")
    assert rc == 0 and "wmmae.sm70.m16n16k16.f16.a.row" in out and "third-party-empirical" in out
    rc, out, _ = run(capsys, "wmma", "prove", "--smt2", str(tmp_path))
    assert rc == 0, out[-2000:]
    assert "0 unexpected, 0 enumeration disagreements" in out
    assert list(tmp_path.glob("*.smt2"))
