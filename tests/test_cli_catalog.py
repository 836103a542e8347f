"""``ptx-formal check`` / ``ptx-formal list``: exit codes 0/1/2, --json, --csv, --count."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout

import pytest

from formal.cli import main


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


# ---- check ----------------------------------------------------------------------------------------

def test_check_legal_exit_0():
    rc, out, err = run("check", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "--target", "sm_80", "--ptx", "7.0")
    assert rc == 0 and err == ""
    assert "LEGAL on sm_80 with PTX ISA 7.0" in out
    assert "a: 4 x .f16x2" in out and "d: 4 x .f32" in out


def test_check_illegal_exit_1_with_reason_and_section():
    rc, out, _ = run("check", "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32", "--target", "sm_80")
    assert rc == 1
    assert "ILLEGAL" in out and "requires sm_89 or higher" in out and "[PTX ISA 9.7.14.5.14" in out


def test_check_issue_examples():
    cases = [
        ("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f32", [], ".dtype must equal .ctype for .m16n8k16"),
        ("mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.f32.e2m1.e2m1.f32.ue8m0",
         ["-t", "sm_120a"], "mxf4nvf4 requires an explicit .scale_vec_size"),
        ("mma.sp.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32", ["--sel", "2"],
         "sparsity selector 2 is out of range for m16n8k32 (allowed 0, 1)"),
    ]
    for op, extra, msg in cases:
        rc, out, _ = run("check", op, *extra)
        assert rc == 1 and msg in out, out


def test_check_parses_the_issue_opcodes():
    for op, t in [("mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.bf16.bf16.f32", "sm_90"),
                  ("wmma.load.a.sync.aligned.row.m16n16k16.global.f16", "sm_90"),
                  ("mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3",
                   "sm_120a")]:
        rc, out, _ = run("check", op, "-t", t, "--sel", "0") if "sp::" in op else run("check", op, "-t", t)
        assert rc == 0, out


def test_check_whole_instruction_takes_the_selector_immediate():
    ins = ("mma.sp.sync.aligned.m16n8k32.row.col.f32.bf16.bf16.f32 {%Rd0, %Rd1, %Rd2, %Rd3}, {%Ra0, %Ra1, %Ra2, %Ra3}, "
           "{%Rb0, %Rb1, %Rb2, %Rb3}, {%Rc0, %Rc1, %Rc2, %Rc3}, %Re, 0x3;")
    rc, out, _ = run("check", ins)
    assert rc == 1 and "(sel=3)" in out and "sparsity selector 3 is out of range" in out
    rc, out, _ = run("check", ins, "--sel", "1")          # --sel overrides the immediate
    assert rc == 0


def test_check_canonical_spelling_shown():
    rc, out, _ = run("check", "wmma.load.b.sync.aligned.m16n16k16.row.f16")
    assert rc == 0 and "canonical: wmma.load.b.sync.aligned.row.m16n16k16.f16" in out


def test_check_scale_selectors():
    op = "mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.f32.e2m1.e2m1.f32.ue8m0"
    assert run("check", op, "-t", "sm_120a", "--scale-a", "2,1", "--scale-b", "2,3")[0] == 0
    rc, out, _ = run("check", op, "-t", "sm_120a", "--scale-a", "1,0")
    assert rc == 1 and "byte-id-a 1 is not valid" in out
    rc, _, err = run("check", op, "-t", "sm_120a", "--scale-a", "x")
    assert rc == 2 and "--scale-a must be" in err


def test_check_json():
    rc, out, _ = run("check", "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f32", "--json")
    d = json.loads(out)
    assert rc == 1 and d["legal"] is False and d["target"] == "sm_90" and d["ptx"] == "9.0"
    assert d["reasons"][0]["message"] == ".dtype must equal .ctype for .m16n8k16"
    assert d["reasons"][0]["section"].startswith("9.7.14.5.14") and d["reasons"][0]["kind"] == "constraint"
    assert d["form"]["shape"] == "m16n8k16" and d["form"]["m"] == 16
    rc, out, _ = run("check", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "--json")
    d = json.loads(out)
    assert rc == 0 and d["legal"] and d["operands"]["a"]["count"] == 4 and d["operands"]["a"]["ptx_type"] == "f16x2"
    assert d["syntax"] == ["f16"]


@pytest.mark.parametrize("argv,needle", [
    (["check", "mma.sync.aligned.m16n8k16.row.col.f32.bf61.f16.f32"], "closest valid spelling: '.bf16'"),
    (["check", "mma.sync.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"], "duplicate qualifier '.sync'"),
    (["check", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16"], "takes 4 type qualifiers"),
    (["check", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "--target", "sm_99"], "unknown target 'sm_99'"),
    (["check", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "--ptx", "10.1"], "unknown PTX ISA version"),
    (["check", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "--sel", "zz"], "invalid"),
    (["list", "--family", "wmmma"], "unknown family 'wmmma'"),
    (["list", "--json", "--csv"], "exclusive"),
    (["list", "--target", "sm_1000"], "unknown target"),
    (["nonsense-command"], "invalid choice"),
])
def test_bad_input_exit_2_one_line(argv, needle):
    rc, out, err = run(*argv)
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and needle in err and "Traceback" not in err


# ---- list -------------------------------------------------------------------------------------------

def test_list_count():
    rc, out, _ = run("list", "--target", "sm_90", "--ptx", "9.0", "--count")
    counts = dict(line.split() for line in out.splitlines())
    assert rc == 0 and set(counts) == {"mma", "mma.sp", "wmma.load", "wmma.store", "wmma.mma", "total"}
    assert int(counts["total"]) == sum(int(v) for k, v in counts.items() if k != "total")


def test_list_family_filters():
    def total(*a):
        rc, out, _ = run("list", "--target", "sm_90", "--ptx", "9.0", "--count", *a)
        return int(dict(line.split() for line in out.splitlines())["total"])
    assert total("--family", "wmma") == total("--family", "wmma.load") + total("--family", "wmma.store") + \
        total("--family", "wmma.mma")
    assert total("--family", "mma.sp") == 2 * total("--family", "mma.sp::ordered_metadata")  # both variants on sm_90


def test_list_text_and_csv():
    rc, out, err = run("list", "--target", "sm_80", "--ptx", "9.0", "--family", "mma")
    lines = out.splitlines()
    assert rc == 0 and "# 79 forms" in err and len(lines) == 79
    assert any(line.startswith("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 ") for line in lines)
    rc, out, _ = run("list", "--target", "sm_80", "--ptx", "9.0", "--family", "mma.sp", "--csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert rc == 0 and len(rows) == 80
    r = next(r for r in rows if r["opcode"] == "mma.sp.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32")
    assert r["selectors"] == "0 1" and "e:1xb32" in r["registers"] and r["shape"] == "m16n8k32"


def test_list_json():
    rc, out, _ = run("list", "--target", "sm_80", "--ptx", "9.0", "--family", "wmma.mma", "--json")
    rows = json.loads(out)
    assert rc == 0 and len(rows) == 138
    f64 = [r for r in rows if r["axes"].get("atype") == "f64"]
    assert len(f64) == 20 and all(r["operands"]["c"]["count"] == 2 for r in f64)   # E-WMMA-F64-CFRAG


def test_list_without_target_lists_every_documented_form():
    rc, out, _ = run("list", "--count")
    total = int(dict(line.split() for line in out.splitlines())["total"])
    from formal.catalog import documented_forms
    assert rc == 0 and total == len(documented_forms())


def test_console_script_end_to_end():
    exe = os.path.join(os.path.dirname(sys.executable), "ptx-formal")
    if not os.path.exists(exe):
        pytest.skip("ptx-formal console script not installed in this environment")
    p = subprocess.run([exe, "check", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "-t", "sm_80"],
                       capture_output=True, text=True)
    assert p.returncode == 0 and "LEGAL" in p.stdout
    p = subprocess.run([exe, "check", "mma.sync.aligned.m16n8k16.row.col.f32.bf61.f16.f32"], capture_output=True, text=True)
    assert p.returncode == 2 and p.stdout == "" and len(p.stderr.strip().splitlines()) == 1
