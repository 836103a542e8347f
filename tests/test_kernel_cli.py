"""`ptx-formal kernel`: exit codes 0/1/2/3, npz in and out, JSON."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import numpy as np

from formal import kernel
from formal.cli import main

DATA = Path(__file__).parent / "data" / "kernels_small"
PTX, SPEC = str(DATA / "tiny_mma.ptx"), str(DATA / "tiny_mma.toml")


def cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def test_run_roundtrip(tmp_path):
    spec = kernel.load_spec(SPEC)
    inp = kernel.make_inputs(spec, seed=2, names=["A", "B"])
    np.savez(tmp_path / "in.npz", **inp)
    rc, out, err = cli("kernel", "run", PTX, "--spec", SPEC, "--inputs", str(tmp_path / "in.npz"),
                       "--out", str(tmp_path / "out.npz"))
    assert rc == 0, err
    with np.load(tmp_path / "out.npz") as z:
        got = {k: z[k] for k in z.files}
    assert set(got) == {"A", "B", "C"} and np.array_equal(got["A"], inp["A"])
    assert np.array_equal(got["C"], kernel.run(kernel.parse_module(Path(PTX).read_text()), spec, inp)["C"])


def test_check_and_lint_json():
    rc, out, _ = cli("kernel", "check", PTX, "--spec", SPEC, "--json")
    assert rc == 0 and json.loads(out)["verdict"] == "proved"
    rc, out, _ = cli("kernel", "lint", PTX, "--json")
    d = json.loads(out)
    assert rc == 0 and d["legal"] and len(d["findings"]) == 3


def test_refuted_exits_1():
    rc, out, _ = cli("kernel", "check", str(DATA / "tiny_mma_no_trans.ptx"), "--spec", SPEC)
    assert rc == 1 and out.startswith("refuted") and "line 61" in out


def test_illegal_exits_1(tmp_path):
    p = tmp_path / "old.ptx"
    p.write_text(Path(PTX).read_text().replace(".target sm_80", ".target sm_75"))
    rc, out, _ = cli("kernel", "lint", str(p))
    assert rc == 1 and "ILLEGAL" in out and "line 66" in out


def test_bad_input_exits_2(tmp_path):
    p = tmp_path / "bad.ptx"
    p.write_text(Path(PTX).read_text().replace("add.u32 \t%r38, %r37, %r36;", "add.u32 \t%r38 %r37, %r36;"))
    rc, _, err = cli("kernel", "check", str(p), "--spec", SPEC)
    assert rc == 2 and ":72:" in err and "Traceback" not in err
    rc, _, err = cli("kernel", "check", PTX, "--spec", str(tmp_path / "missing.toml"))
    assert rc == 2 and err.count("\n") == 1
    bad = tmp_path / "s.toml"
    bad.write_text(Path(SPEC).read_text().replace('param = "tiny_mma_param_2"', 'param = "nope"'))
    rc, _, err = cli("kernel", "run", PTX, "--spec", str(bad))
    assert rc == 2 and "nope" in err
    rc, _, err = cli("kernel", "check", PTX, "--spec", SPEC, "--ctas", "99")   # the grid has one CTA
    assert rc == 2 and "CTA 99 is not in the grid" in err and err.count("\n") == 1


def test_unsupported_exits_3(tmp_path):
    p = tmp_path / "atom.ptx"
    p.write_text(Path(PTX).read_text().replace("\tbar.sync \t0;", "\tatom.shared.add.u32 \t%r39, [%r8], 1;"))
    rc, _, err = cli("kernel", "run", str(p), "--spec", SPEC)
    assert rc == 3 and "line 43" in err and "atom" in err
