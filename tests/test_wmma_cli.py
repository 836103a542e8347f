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
    ("wmma", "pipeline-check", "/nonexistent"),
    ("wmma", "alignment", "/nonexistent"),
    ("wmma", "probe-decode", "/nonexistent", "--provenance", "novalue"),
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


def test_pipeline_check_and_alignment(capsys):
    from formal.specdata import spec_dir
    rc, out, _ = run(capsys, "wmma", "pipeline-check", str(spec_dir() / "observed" / "wmma_pipeline_slice_sm90.json"))
    assert rc == 0 and "{'match': 14}" in out and "MISMATCH" not in out     # run3 slice
    assert "tf32xtf32+f32->f32" in out and "f16xf16+f32->f16             {'match': 3}" in out
    rc, out, _ = run(capsys, "wmma", "alignment")
    assert rc == 0 and "16 bytes" in out and "run3 + run4" in out
    assert "erratum shared-ldsm-row-alignment: confirmed (968 probes ran" in out
    assert "erratum f64-accumulator-registers: confirmed" in out and "below fault 38" in out
    assert "erratum stride-low-bits-dropped: confirmed" in out and "below wrong_data 282" in out
    assert "LDSM (16)" in out and "8:48F" in out                    # .shared, 16-bit LDSM, base offset 8
    assert "LD.E (4) >>3" in out                                    # .s4 through a generic pointer: stride >> 3
    rc, out, _ = run(capsys, "wmma", "alignment", "--json")
    d = json.loads(out)
    assert {e["id"]: e["status"] for e in d["errata"]}["generic-global-access-width"] == "confirmed"
    rc, out, _ = run(capsys, "wmma", "errata")
    assert rc == 0 and "silicon: run3:" in out and "status: confirmed by silicon" in out


def test_check_notes_the_sm90_code(capsys):
    rc, out, _ = run(capsys, "wmma", "check", "wmma.load.a.sync.aligned.row.m16n16k16.shared.s8", "--ptr", "0x100",
                     "--stride", "24")
    assert rc == 0 and "LDSM.16.M88.2" in out and "faults on the H100" in out
    rc, out, _ = run(capsys, "wmma", "check", F16A, "--ptr", "0x1004", "--stride", "18")
    assert rc == 1 and "runs on the H100" in out
    rc, out, _ = run(capsys, "wmma", "check", F16A, "--ptr", "0x1000", "--stride", "17")
    assert rc == 1 and "rounded-down pitch" in out and "stride-low-bits-dropped" in out
    rc, out, _ = run(capsys, "wmma", "check", F16A, "--ptr", "0x1000", "--stride", "8")
    assert rc == 1 and "sm_90" not in out                   # an overlap is not a question of alignment


def test_pipeline_check_planted_mismatch_exits_1(capsys, tmp_path):
    import numpy as np

    from formal.specdata import spec_dir
    src = spec_dir() / "observed" / "wmma_pipeline_slice_sm90.json"
    with np.load(src.with_suffix(".npz")) as z:
        arrays = {k: z[k] for k in z.files}
    D = arrays["wp0000.D"].copy()
    D[0, 2, 7] ^= D.dtype.type(1)          # one bit of one element of one run
    arrays["wp0000.D"] = D
    dst = tmp_path / "p.json"
    dst.write_text(src.read_text())
    np.savez(dst.with_suffix(".npz"), **arrays)
    rc, out, _ = run(capsys, "wmma", "pipeline-check", str(dst))
    assert rc == 1 and "MISMATCH wp0000" in out and "{'mismatch': 1, 'match': 13}" in out
    rc, out, _ = run(capsys, "wmma", "pipeline-check", str(dst), "--json")
    d = json.loads(out)
    (bad,) = [e for e in d["entries"] if e["status"] == "mismatch"]
    assert rc == 1 and (bad["detail"]["run"], bad["detail"]["row"], bad["detail"]["col"]) == (0, 2, 7)
