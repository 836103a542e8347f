"""Fuzz the command line and the public Python API with malformed input (issue 11).

The contract (README "Exit codes"): no Python traceback ever reaches the user; every exit
code is one of 0 1 2 3 (4 = internal error, a bug: this suite fails on it); exit 2 prints
exactly one line on stderr that names what is wrong (and never echoes a huge input back).

* ``test_reproducers``: every malformed input issue 11 reported, each with its expected code.
* ``test_generated``: table-driven cases generated from the argparse parser itself, so a
  subcommand or option added later is fuzzed without editing this file: every positional
  and every option of every subcommand gets the malformed values of its kind (numbers,
  choices, input files, output paths, free text), plus structural cases (missing, unknown,
  repeated arguments).  The default run takes a deterministic sample of at least 1,000
  cases; ``pytest -m slow tests/test_fuzz_cli.py`` runs all of them.
* ``test_hypothesis_cli`` / ``test_hypothesis_api``: Hypothesis (derandomized, so CI is not
  flaky) mutates the same baselines with arbitrary text, and calls the public API entry
  points of ``formal/__init__.py`` with arbitrary arguments: they may raise the project's
  typed errors or ValueError / TypeError, never IndexError, AssertionError, OverflowError...

Work that is slow for a *valid* input (a 2^32 scan, the whole catalog, ptxas runs) is
replaced by a sentinel during fuzzing: reaching it means the input was accepted.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import random
import shlex
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import formal
from formal.cli import build_parser, main

ROOT = Path(__file__).resolve().parent.parent
OP = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
SP = "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32"
WL = "wmma.load.a.sync.aligned.row.m16n16k16.global.f16"
RECIPE = str(ROOT / "recipes" / "ldmatrix_x2_a_m16n8k8.recipe")
SLICE = str(ROOT / "specs" / "observed" / "wmma_pipeline_slice_sm90.json")
CUTE_B = "((4,8),(2,2)):((16,1),(8,64))"
EXIT_CODES = {0, 1, 2, 3}


# ------------------------------------------------------------------------------ files

@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz")
    f = {}
    f["regfile"] = d / "regfile"
    f["regfile"].write_text("a regular file\n")
    f["dir"] = d / "adir"
    f["dir"].mkdir()
    f["empty"] = d / "empty.txt"
    f["empty"].write_bytes(b"")
    f["binary"] = d / "binary.recipe"
    f["binary"].write_bytes(bytes(range(256)) * 4)
    f["latin1"] = d / "latin1.recipe"
    f["latin1"].write_bytes("caf\xe9 = row\n".encode("latin-1"))
    f["badjson"] = d / "bad.json"
    f["badjson"].write_text('{"rows": [1, 2,')
    f["deepjson"] = d / "deep.json"
    f["deepjson"].write_text("[" * 100_000 + "]" * 100_000)
    f["listjson"] = d / "list.json"
    f["listjson"].write_text("[1, 2, 3]")
    f["objjson"] = d / "obj.json"
    f["objjson"].write_text('{"kernels": 5, "rows": "x", "meta": null}')
    f["emptynpz"] = d / "empty.npz"
    f["emptynpz"].write_bytes(b"")
    good = d / "good.npz"
    np.savez(good, a=np.zeros((2, 32, 4), np.uint32), b=np.zeros((2, 32, 2), np.uint32),
             c=np.zeros((2, 32, 4), np.uint32))
    f["good_npz"] = good
    f["truncnpz"] = d / "trunc.npz"
    f["truncnpz"].write_bytes(good.read_bytes()[:200])
    f["zero_npz"] = d / "zero.npz"
    np.savez(f["zero_npz"], a=np.zeros((0, 32, 4), np.uint32), b=np.zeros((0, 32, 2), np.uint32),
             c=np.zeros((0, 32, 4), np.uint32))
    f["shape_npz"] = d / "shape.npz"
    np.savez(f["shape_npz"], a=np.zeros((2, 31, 4), np.int8), b=np.zeros(3), c=np.array(7), sel=np.arange(3))
    f["pickle_npz"] = d / "pickle.npz"
    np.savez(f["pickle_npz"], a=np.array([{"x": 1}], dtype=object))
    f["zip"] = d / "not_npz.zip"
    with zipfile.ZipFile(f["zip"], "w") as z:
        z.writestr("a.txt", "hello")
    f["huge_tile"] = d / "huge.recipe"
    f["huge_tile"].write_text(Path(RECIPE).read_text().replace("tile 16x8 b16", "tile 100000x100000 b16"))
    f["hex_garbage"] = d / "garbage.hex"
    f["hex_garbage"].write_text("# ptx-formal-vectors {\"opcode\": 5}\n" + "zz" * 500 + "\n")
    f["crlf_hex"] = d / "crlf.hex"
    f["crlf_hex"].write_bytes(b"# ptx-formal-vectors {}\r\nxx\r\n")
    f["py_exit"] = d / "exits.py"
    f["py_exit"].write_text("import sys\nsys.exit(0)\n")
    f["py_raise"] = d / "raises.py"
    f["py_raise"].write_text("def f(lane, reg, elem):\n    raise IndexError('boom')\n")
    f["py_exit_in_f"] = d / "exit_in_f.py"
    f["py_exit_in_f"].write_text("import sys\ndef f(lane, reg, elem):\n    sys.exit(0)\n")
    f["py_huge"] = d / "huge.py"
    f["py_huge"].write_text("def f(lane, reg, elem):\n    return (10**30, -1)\n")
    f["table_bad"] = d / "table.csv"
    f["table_bad"].write_text("lane,reg,elem,row,col\n0,0,0,99999999999999999999,x\n1,2\n")
    f["missing"] = d / "no" / "such" / "file"
    f["under_file"] = f["regfile"] / "out.txt"
    f["missing_dir_out"] = d / "nodir" / "out.txt"
    f["out"] = d / "out"
    f["out"].mkdir()
    return {k: str(v) for k, v in f.items()}


# ------------------------------------------------------------------------------ running

class _Reached(Exception):
    """Sentinel: an expensive engine was reached, i.e. the input was accepted."""


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def assert_contract(argv, rc, out, err, allow_reached=True):
    where = f"argv={_show(argv)}\nexit {rc}\nstderr: {err[-2000:]}"
    if rc == 4 and allow_reached and "_Reached" in err:
        return "accepted"
    assert "Traceback (most recent call last)" not in out + err, where
    assert rc in EXIT_CODES, where
    if rc == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1, where
        assert lines[0].startswith("ptx-formal"), where
        assert len(lines[0]) <= 600, f"an error line of {len(lines[0])} characters (inputs must be cut)\n{where}"
    return "ok"


def _show(argv) -> str:
    return " ".join(shlex.quote(a if len(a) < 80 else a[:60] + f"...({len(a)} chars)") for a in argv)


@pytest.fixture(scope="module", autouse=True)
def scratch_cwd(tmp_path_factory):
    """Fuzzed output options (``--write 1``, ``-o x``) write into a scratch directory, never the checkout."""
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(tmp_path_factory.mktemp("cwd"))
        yield


@pytest.fixture(scope="module", autouse=True)
def cheap_engines():
    """Replace the engines that are slow for a valid input (a minute or more) by the sentinel."""
    import formal.metadata
    import formal.metadata.proofs
    import formal.prove
    import formal.catalog.ptxas
    import formal.catalog.sweep
    import formal.transform
    import formal.vectors
    import formal.wmma.alignment
    import formal.wmma.maps
    import formal.wmma.theorems
    from formal.cli import layout as cli_layout

    def reached(*a, **k):
        raise _Reached("an expensive engine was reached")

    real_run, real_generate = formal.prove.run, formal.vectors.generate

    def run_small(obs, *a, **k):
        if len(obs) > 200:
            reached()
        return real_run(obs, *a, **k)

    def generate_small(form, *a, **k):
        if k.get("coverage") is None or (k.get("count") or 0) > 64:
            reached()
        return real_generate(form, *a, **k)

    with pytest.MonkeyPatch.context() as mp:
        for mod, name in [(formal.metadata, "scan"), (formal.metadata.proofs, "all_obligations"),
                          (formal.catalog.sweep, "sweep"), (formal.catalog.ptxas, "assemble"),
                          (formal.wmma.theorems, "run_all"), (formal.wmma.alignment, "write_survey"),
                          (formal.wmma.maps, "properties"), (formal.transform, "library"),
                          (cli_layout, "all_figures")]:
            mp.setattr(mod, name, reached)
        mp.setattr(formal.prove, "run", run_small)
        mp.setattr(formal.vectors, "generate", generate_small)
        yield


# ------------------------------------------------------------------------------ reproducers

def reproducers(f: dict) -> list[tuple[list[str], int]]:
    """Issue 11's reproducers (and their siblings), each with the exit code it must give."""
    u = f["under_file"]
    return [
        # output paths under a regular file / in a missing directory: checked before the work
        (["eval", OP, "-i", f["good_npz"], "--out", u], 2),
        (["transform", RECIPE, "--smt2", u], 2),
        (["prove", OP, "--smt2", u], 2),
        (["vectors", OP, "--coverage", "specials", "-o", u], 2),
        (["vectors", OP, "--cuda", f["missing_dir_out"]], 2),
        (["layout", OP, "-o", "a", "--svg", u], 2),
        (["layout", "--all-figures", u], 2),
        (["errata", "--write", u], 2),
        (["metadata", "explain", SP, "--svg", u], 2),
        (["wmma", "prove", "--smt2", u], 2),
        (["ptxas-sweep", "--from-json", str(ROOT / "proofs" / "ptxas-sweep.json"), "--write", u + "/stem"], 2),
        (["hw-check", OP, "--out", u], 2),
        (["prove", "--all", "--report", u], 2),
        (["errata", "--write", f["dir"]], 2),
        # --timeout inf / nan / negative / zero
        *[(["prove", OP, "--timeout", v], 2) for v in ("inf", "nan", "-1", "0", "-inf", "1e999")],
        *[(["transform", RECIPE, "--timeout", v], 2) for v in ("inf", "nan", "-1", "0")],
        *[(["vectors", OP, "--coverage", "specials", "--timeout", v], 2) for v in ("inf", "nan", "-1")],
        # 20-digit CuTe strides and formula constants; deep nesting
        (["layout", "audit", OP, "--operand", "b", "--cute", "((4,8),(2,2)):((16,1),(8,99999999999999999999))"], 2),
        (["layout", "audit", OP, "--operand", "b", "--cute", "(" * 3000 + "4" + ")" * 3000 + ":(1)"], 2),
        (["layout", "audit", OP, "--operand", "a", "--formula", "row=lane + 99999999999999999999", "col=lane"], 2),
        (["layout", "audit", OP, "--operand", "a", "--formula", "row=" + "(" * 3000 + "lane" + ")" * 3000,
          "col=lane"], 2),
        (["layout", "audit", OP, "--operand", "a", "--formula", "row=" + "-" * 3000 + "lane", "col=lane"], 2),
        (["layout", "audit", OP, "--operand", "a", "--formula", "row=lane" + " + 1" * 20000, "col=lane"], 2),
        (["layout", "audit", OP, "--operand", "a", "--formula", "row=lane << 99999", "col=lane"], 2),
        # % 0 and // 0 are rejected like /
        (["layout", "audit", OP, "--operand", "a", "--formula", "row=lane % 0", "col=lane"], 2),
        (["layout", "audit", OP, "--operand", "a", "--formula", "row=lane // 0", "col=lane"], 2),
        (["layout", "audit", OP, "--operand", "a", "--formula", "row=lane // (lane - lane)", "col=lane"], 2),
        (["layout", "audit", OP, "--operand", "a", "--formula", "row=lane / 2", "col=lane"], 2),
        # empty / truncated / wrong npz; a batch of 0 warps
        (["eval", OP, "-i", f["emptynpz"]], 2),
        (["eval", OP, "-i", f["truncnpz"]], 2),
        (["eval", OP, "-i", f["zip"]], 2),
        (["eval", OP, "-i", f["pickle_npz"]], 2),
        (["eval", OP, "-i", f["shape_npz"]], 2),
        (["eval", OP, "-i", f["zero_npz"]], 2),
        (["eval", OP, "-i", f["zero_npz"], "--show"], 2),
        (["eval", OP, "-i", f["good_npz"], "--show", "--warp", "5"], 2),
        (["eval", OP, "-i", f["missing"]], 2),
        (["eval", OP, "-i", f["dir"]], 2),
        # binary / latin-1 recipes and tables
        (["transform", f["binary"]], 2),
        (["transform", f["latin1"]], 2),
        (["transform", f["deepjson"]], 2),
        (["transform", f["listjson"]], 2),
        (["transform", f["dir"]], 2),
        (["layout", "audit", OP, "--operand", "a", "--table", f["binary"]], 2),
        (["layout", "audit", OP, "--operand", "a", "--table", f["latin1"]], 2),
        (["layout", "audit", OP, "--operand", "a", "--table", f["table_bad"]], 2),
        (["transform", "--check-triton", f["binary"], OP, "a"], 2),
        # malformed JSON
        (["ptxas-sweep", "--from-json", f["badjson"]], 2),
        (["ptxas-sweep", "--from-json", f["deepjson"]], 2),
        (["ptxas-sweep", "--from-json", f["listjson"]], 2),
        (["ptxas-sweep", "--from-json", f["objjson"]], 2),
        (["ptxas-sweep", "--from-json", f["binary"]], 2),
        (["wmma", "alignment", f["badjson"]], 2),
        (["wmma", "alignment", f["listjson"]], 2),
        (["wmma", "alignment", f["objjson"]], 2),
        (["wmma", "pipeline-check", f["badjson"]], 2),
        (["wmma", "pipeline-check", f["objjson"]], 2),
        (["wmma", "probe-decode", f["dir"]], 2),
        (["verify", OP, f["binary"], f["binary"]], 2),
        (["verify", OP, f["hex_garbage"], f["hex_garbage"]], 2),
        (["verify", OP, f["crlf_hex"], f["crlf_hex"]], 2),
        (["verify", OP, f["emptynpz"], f["emptynpz"]], 2),
        # an assertion deep in the witness search; huge selectors
        (["metadata", "witness", SP, "--kind", "selector", "--sel", "1099511627776"], 2),
        (["metadata", "witness", SP, "--kind", "selector", "--sel", "2147483648"], 2),
        (["metadata", "check", SP, "0x44444444", "--sel", "-1"], 2),
        (["metadata", "check", SP, "0x1_0000_0000"], 2),
        (["check", OP, "--sel", "99999999999999999999999"], 1),
        # the 100000x100000 recipe tile (numpy would allocate 74 GiB)
        (["transform", f["huge_tile"]], 2),
        # options that select nothing are errors, not silent passes
        (["prove", "--all", "--family", "layuot.injective"], 2),
        (["prove", OP, "--family", "nothing"], 2),
        (["prove", OP, "--check-report"], 2),
        (["prove", "--all", "--family", "layout.injective", "--check-report"], 2),
        (["wmma", "strides", WL, "--ptr-align", "32", "--enumerate", "0"], 2),
        (["wmma", "strides", WL, "--ptr-align", "32", "--enumerate", "-5"], 2),
        (["vectors", OP, "--coverage", ""], 2),
        (["vectors", OP, "--coverage", ",", " "], 2),
        (["vectors", OP, "--coverage", "nosuchmodel"], 2),
        (["vectors", OP, "--count", "-1"], 2),
        (["metadata"], 2),
        (["wmma"], 2),
        # user code run by --python is contained; sys.exit(0) is not a passed audit
        (["layout", "audit", OP, "--operand", "a", "--python", f["py_exit"] + ":f"], 2),
        (["layout", "audit", OP, "--operand", "a", "--python", f["py_exit_in_f"] + ":f"], 2),
        (["layout", "audit", OP, "--operand", "a", "--python", f["py_raise"] + ":f"], 2),
        (["layout", "audit", OP, "--operand", "a", "--python", f["py_huge"] + ":f"], 2),
        (["layout", "audit", OP, "--operand", "a", "--python", f["binary"] + ":f"], 2),
        # a 100 KB argument is not echoed back
        (["check", "mma." + "x" * 100_000], 2),
        (["list", "--family", "y" * 100_000], 2),
    ]


def test_reproducers(files):
    failures = []
    for argv, want in reproducers(files):
        rc, out, err = run_cli(argv)
        try:
            assert_contract(argv, rc, out, err, allow_reached=False)
            assert rc == want, f"argv={_show(argv)}: exit {rc}, want {want}; stderr: {err[-500:]}"
        except AssertionError as e:
            failures.append(str(e))
    assert not failures, f"{len(failures)} reproducers fail:\n\n" + "\n\n".join(failures)


def test_internal_error_is_one_line_and_debug_shows_traceback(monkeypatch, capsys):
    real = build_parser

    def boom(args):
        raise ZeroDivisionError("x" * 10_000)

    def patched():
        p = real()
        p._subparsers._group_actions[0].choices["check"].set_defaults(func=boom)
        return p

    monkeypatch.setattr("formal.cli.build_parser", patched)
    assert main(["check", OP]) == 4
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("ptx-formal: internal error, please report: ZeroDivisionError: ")
    assert len(err) < 600 and "Traceback" not in err
    assert main(["--debug", "check", OP]) == 4
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "ZeroDivisionError" in err
    assert err.strip().splitlines()[-1].startswith("ptx-formal: internal error, please report")


def test_help_and_version_exit_0(capsys):
    assert main(["--help"]) == 0
    assert "Exit codes" in capsys.readouterr().out
    assert main(["--version"]) == 0
    assert main([]) == 0
    assert main(["check", "--help"]) == 0


# ------------------------------------------------------------------------------ generated cases

# A cheap valid invocation of every subcommand (path of subparser names -> argv after them).
# A subcommand missing here (added later) is fuzzed from its parser alone (no baseline).
BASELINES: dict[tuple[str, ...], list[str]] = {
    ("check",): [OP],
    ("list",): ["--family", "mma.sp", "--count"],
    ("layout",): [OP, "--operand", "a", "--by", "lane", "--csv"],
    ("layout", "audit"): ["audit", OP, "--operand", "b", "--cute", CUTE_B],
    ("prove",): [OP, "-q"],
    ("metadata", "check"): [SP, "0x44444444"],
    ("metadata", "explain"): [SP],
    ("metadata", "prove"): [SP, "--sel", "0"],
    ("metadata", "witness"): [SP, "--kind", "not-sparse"],
    ("metadata", "scan"): [SP],
    ("eval",): [OP, "-i", "{good_npz}"],
    ("hw-check",): [OP],
    ("vectors",): [OP, "--coverage", "specials"],
    ("verify",): [OP, "{vectors}", "{vectors}"],
    ("transform",): [RECIPE],
    ("wmma", "check"): [WL, "--ptr", "0", "--stride", "16"],
    ("wmma", "strides"): [WL, "--ptr-align", "32", "--enumerate", "64"],
    ("wmma", "address"): [WL, "--row", "1", "--col", "2"],
    ("wmma", "describe"): [WL],
    ("wmma", "maps"): ["--arch", "sm_90"],
    ("wmma", "prove"): [],
    ("wmma", "errata"): [],
    ("wmma", "probe-decode"): ["{dir}"],
    ("wmma", "pipeline-check"): [SLICE],
    ("wmma", "alignment"): [],
    ("wmma", "sass-survey"): [],
    ("ptxas-check",): [OP],
    ("ptxas-sweep",): ["--from-json", str(ROOT / "proofs" / "ptxas-sweep.json")],
    ("errata",): ["--source", "silicon"],
    ("smem", "desc"): ["0x4000004000010040", "--type", "f16", "--n", "64"],
    ("smem", "encode"): ["--start", "1024", "--lbo", "16", "--sbo", "1024", "--swizzle", "128B"],
    ("smem", "where"): ["--desc", "0x4000004000010040", "--type", "f16", "--n", "8", "--mn", "1", "--k", "0"],
    ("smem", "audit"): ["--cute", "GMMA::Layout_K_SW128_Atom<half_t>", "--cute-tile", "64x64", "--operand", "a"],
    ("smem", "layouts"): ["--major", "K", "--type", "f16"],
}

NUM_BAD = ["", "x", "1.5", "nan", "inf", "-1", "-99999999999999999999", "99999999999999999999", "0x", "1e3",
           "0", "0b102", "1_000", "٣"]
FLOAT_BAD = ["", "x", "nan", "inf", "-inf", "-1", "0", "1e999", "1e-320", "99999999999999999999", "0x10"]
TEXT_BAD = ["", " ", "-", "x", "nan", "-1", "0", "99999999999999999999", "é", "\u202e", "a" * 5000, "(" * 3000,
            "((4,8):(1,", "mma", OP[:-1] + "3", OP + ".f32", "wmma.load.a.sync", "sm_9000", "sm_", "9.99", "1,2,3",
            "=", "row=", "lane % 0", "{", "[", ";", "\\", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 d, a;",
            SP + " {d0,d1}, {a0}, {b0}, {c0}, e, -1;", "%laneid", "sel=abc"]
IN_PATH_KEYS = ["missing", "dir", "empty", "binary", "latin1", "badjson", "deepjson", "listjson", "objjson",
                "emptynpz", "truncnpz", "zip", "under_file", "hex_garbage", "crlf_hex"]
OUT_PATH_KEYS = ["under_file", "missing_dir_out", "dir", "regfile"]
OUT_WORDS = ("out", "write", "svg", "smt2", "summary", "condense", "cuda", "report", "all_figures", "output")
IN_WORDS = ("inputs", "table", "python", "from_json", "recheck", "check_triton", "dir", "path", "run", "vectors",
            "results", "file")


def subcommands(parser: argparse.ArgumentParser, prefix=()):
    """(path, parser) for every leaf subcommand of the CLI, discovered from argparse."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield prefix, parser
        return
    if prefix:
        yield prefix, parser      # the group itself without a subcommand
    for name, sp in subs[0].choices.items():
        yield from subcommands(sp, prefix + (name,))


def _kind(a: argparse.Action) -> str:
    name = a.dest
    if a.choices:
        return "choice"
    tname = getattr(a.type, "__name__", "")
    if a.type is float:
        return "float"
    if a.type is int or tname in ("<lambda>", "_int", "_sel", "_lane"):
        return "num"
    if any(w in name for w in OUT_WORDS) or name in ("o",):
        return "out"
    if any(w == name or name.startswith(w) for w in IN_WORDS):
        return "in"
    return "text"


def _values(kind: str, f: dict, option: str = "") -> list[str]:
    if kind == "num":
        return NUM_BAD
    if kind == "float":
        return FLOAT_BAD
    if kind == "choice":
        return ["", "nope", "ALL", "-1"]
    if kind == "out":
        return [f[k] for k in OUT_PATH_KEYS]
    if kind == "in":
        return [f[k] for k in IN_PATH_KEYS] + ["", "x:y", f["py_exit"] + ":f", f["py_raise"] + ":f"]
    return TEXT_BAD


def _fill(tokens: list[str], f: dict) -> list[str]:
    return [t.format(**f) if t.startswith("{") and t.endswith("}") else t for t in tokens]


def generated_cases(f: dict) -> list[list[str]]:
    parser = build_parser()
    cases: list[list[str]] = []
    for path, sp in subcommands(parser):
        base = _fill(BASELINES.get(path, []), f)
        if path == ("layout",):
            audit = _fill(BASELINES[("layout", "audit")], f)
        acts = [a for a in sp._actions if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]
        head = [p for p in path if not (path[0] == "layout" and p == "audit")]
        # structural: bare, unknown option, extra positional, baseline with each token dropped
        cases += [head, head + ["--no-such-option"], head + base + ["extra", "positional"],
                  head + base + ["--"], head + ["-"] + base]
        cases += [head + base[:i] + base[i + 1:] for i in range(len(base))]
        positionals = [a for a in acts if not a.option_strings]
        options = [a for a in acts if a.option_strings]
        # every positional slot of the baseline replaced by malformed values of its kind
        pos_slots = [i for i, t in enumerate(base) if not t.startswith("-") and (i == 0 or not base[i - 1].startswith("-")
                     or base[i - 1] in ("-q",))]
        for i in pos_slots:
            kind = "in" if Path(base[i]).suffix in (".recipe", ".json", ".npz", ".hex") or base[i] == f["dir"] else "text"
            for v in _values(kind, f) + (TEXT_BAD[:12] if kind == "in" else []):
                cases.append(head + base[:i] + [v] + base[i + 1:])
        if not base and positionals:
            for a in positionals:
                for v in _values(_kind(a), f):
                    cases.append(head + [v])
        # every option with malformed values of its kind (replacing its baseline value if any)
        for a in options:
            opt = a.option_strings[-1] if a.option_strings[-1].startswith("--") else a.option_strings[0]
            b = list(audit) if path == ("layout",) and a.dest in ("cute", "cute_thr", "cute_product_stride", "table",
                                                                     "formula", "python", "no_bits") else list(base)
            for s in a.option_strings:             # drop the option's own baseline value
                if s in b:
                    k = b.index(s)
                    del b[k:k + (1 if a.nargs == 0 else 2)]
            if a.nargs == 0:
                cases.append(head + b + [opt])
                cases.append(head + b + [opt, opt])
                continue
            cases.append(head + b + [opt])        # missing value
            for v in _values(_kind(a), f, opt):
                cases.append(head + b + [opt, v])
    # layout audit: every formula / table / python shape
    for v in TEXT_BAD + ["row=lane", "col=lane", "row=lane col=lane", "row=lane%0", "product=1"]:
        cases.append(["layout", "audit", OP, "--operand", "a", "--formula", "row=lane >> 2", "col=" + v])
    return cases


def _sample(cases: list, n: int, seed: int = 11) -> list:
    if len(cases) <= n:
        return cases
    return random.Random(seed).sample(cases, n)


def _check_all(cases, f, budget_note=""):
    stats = {"ok": 0, "accepted": 0}
    failures = []
    for argv in cases:
        rc, out, err = run_cli(argv)
        try:
            stats[assert_contract(argv, rc, out, err)] += 1
        except AssertionError as e:
            failures.append(str(e))
    assert not failures, f"{len(failures)} of {len(cases)} generated cases break the contract:\n\n" + \
        "\n\n".join(failures[:30])
    return stats


@pytest.fixture(scope="module")
def all_cases(files, tmp_path_factory):
    d = tmp_path_factory.mktemp("vec")
    vec = d / "v.hex"
    rc, _, err = run_cli(["vectors", OP, "--coverage", "specials", "-o", str(vec)])
    assert rc == 0, err
    files = dict(files, vectors=str(vec))
    return files, generated_cases(files)


N_SHARDS = 4
CI_CASES = 1000


def test_generated_covers_every_subcommand(all_cases):
    f, cases = all_cases
    assert len(cases) >= CI_CASES, len(cases)
    paths = {p for p, _ in subcommands(build_parser())}
    heads = {tuple(c[:2]) for c in cases} | {tuple(c[:1]) for c in cases}
    missing = [p for p in paths if p not in heads]
    assert not missing, f"subcommands never fuzzed: {missing}"
    no_baseline = [p for p in paths if p not in BASELINES and len(p) > 0 and
                   not (p[0] in ("metadata", "wmma") and len(p) == 1)]
    # a subcommand added later is fuzzed from its parser; a baseline makes its options reachable
    if no_baseline:
        print(f"subcommands without a baseline (fuzzed from the parser only): {no_baseline}")


@pytest.mark.parametrize("shard", range(N_SHARDS))
def test_generated(all_cases, shard):
    f, cases = all_cases
    sample = _sample(cases, CI_CASES)
    _check_all(sample[shard::N_SHARDS], f)


@pytest.mark.slow
def test_generated_all(all_cases):
    f, cases = all_cases
    _check_all(cases, f)


# ------------------------------------------------------------------------------ Hypothesis: CLI

_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40)
_token = st.one_of(_text, st.sampled_from(TEXT_BAD + NUM_BAD + FLOAT_BAD),
                   st.integers(min_value=-(2 ** 70), max_value=2 ** 70).map(str),
                   st.floats(allow_nan=True, allow_infinity=True).map(repr))


@st.composite
def _argv(draw, f):
    path = draw(st.sampled_from(sorted(BASELINES)))
    base = _fill(BASELINES[path], f)
    head = [p for p in path if not (path[0] == "layout" and p == "audit")]
    argv = list(base)
    for _ in range(draw(st.integers(1, 3))):
        how = draw(st.sampled_from(["replace", "insert", "option"]))
        if how == "replace" and argv:
            argv[draw(st.integers(0, len(argv) - 1))] = draw(_token)
        elif how == "insert":
            argv.insert(draw(st.integers(0, len(argv))), draw(_token))
        else:
            sp = dict(subcommands(build_parser()))[path if path != ("layout", "audit") else ("layout",)]
            opts = [s for a in sp._actions for s in a.option_strings if s not in ("-h", "--help")]
            if opts:
                argv += [draw(st.sampled_from(opts)), draw(_token)]
    return head + argv


@pytest.fixture(scope="module")
def hyp_files(all_cases):
    return all_cases[0]


HYP_CLI_EXAMPLES = 150


def test_hypothesis_cli(hyp_files):
    f = hyp_files
    seen = []

    @settings(max_examples=HYP_CLI_EXAMPLES, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(_argv(f))
    def check(argv):
        seen.append(argv)
        rc, out, err = run_cli(argv)
        assert_contract(argv, rc, out, err)

    check()
    assert len(seen) >= HYP_CLI_EXAMPLES * 0.9


# ------------------------------------------------------------------------------ Hypothesis: Python API

def _api_calls():
    arr = st.one_of(
        st.just(None), st.integers(-(2 ** 70), 2 ** 70), st.text(max_size=8), st.floats(),
        st.lists(st.integers(-5, 300), max_size=5),
        st.tuples(st.integers(0, 7), st.integers(0, 40), st.integers(0, 5),
                  st.sampled_from(["u4", "u2", "i1", "i2", "f4", "f8", "u8", "i8", "b1", "U1", "O"])).map(_array),
    )
    text = st.one_of(_text, st.sampled_from(TEXT_BAD[:40] + [OP, SP, "a", "b", "c", "d", "e", "sm_90", "9.0"]))
    opcode = st.one_of(text, st.sampled_from([OP, SP, WL, "wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32"]))
    num = st.one_of(st.integers(-(2 ** 70), 2 ** 70), st.none(), st.floats(), text)
    return st.one_of(
        st.tuples(st.just("parse"), st.tuples(text)),
        st.tuples(st.just("parse_instruction"), st.tuples(text)),
        st.tuples(st.just("legality"), st.tuples(opcode, text, st.one_of(text, st.floats()), num)),
        st.tuples(st.just("forms"), st.tuples(st.one_of(text, st.none()), st.one_of(text, st.none(), st.floats()),
                                               st.one_of(text, st.none()))),
        st.tuples(st.just("fragment"), st.tuples(opcode, text)),
        st.tuples(st.just("pack"), st.tuples(opcode, text, arr)),
        st.tuples(st.just("unpack"), st.tuples(opcode, text, arr)),
        st.tuples(st.just("compress"), st.tuples(opcode, arr, num)),
        st.tuples(st.just("decompress"), st.tuples(opcode, arr, arr, num)),
    )


def _array(spec):
    nd, n, m, dt = spec
    shape = [(n, 32, m), (n, 16, 16), (n,), (n, m), (1, 16, 16), (1, 32, 4), (1, 16, 32), (1, 32)][nd]
    if dt == "O":
        return np.array([None] * int(np.prod(shape)), dtype=object).reshape(shape)
    if dt == "U1":
        return np.full(shape, "x")
    return (np.arange(int(np.prod(shape))) * 2654435761 % 1000).astype(dt).reshape(shape)


API_OK = (ValueError, TypeError)        # the project's errors subclass ValueError (MalformedOpcode, ...)
HYP_API_EXAMPLES = 300


def test_hypothesis_api():
    seen = []

    @settings(max_examples=HYP_API_EXAMPLES, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(_api_calls())
    def check(call):
        name, args = call
        seen.append(name)
        try:
            getattr(formal, name)(*args)
        except API_OK:
            pass
        except Exception as e:  # noqa: BLE001
            raise AssertionError(f"formal.{name}{_short(args)} raised {type(e).__name__}: {e}") from e

    check()
    assert len(seen) >= HYP_API_EXAMPLES * 0.9


def _short(args) -> str:
    return "(" + ", ".join(repr(a)[:60] if not isinstance(a, np.ndarray) else f"<{a.dtype} {a.shape}>"
                           for a in args) + ")"


def test_hypothesis_api_evaluate():
    dts = st.sampled_from(["u2", "i1", "i2", "u4", "i8", "f4"])

    @settings(max_examples=100, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.integers(1, 2), dts, dts, dts, st.integers(-(2 ** 40), 2 ** 40), st.booleans())
    def check(t, da, db, dc, fill, matrix):
        def arr(shape, dt):
            return np.full(shape, fill % 256 - 128 if dt.startswith("i") else abs(fill) % 65536).astype(dt)

        try:
            if matrix:
                formal.evaluate_matrices(OP, arr((t, 16, 16), da), arr((t, 16, 8), db), arr((t, 16, 8), dc))
            else:
                formal.evaluate(OP, arr((t, 32, 4), da), arr((t, 32, 2), db), arr((t, 32, 4), dc))
        except API_OK:
            pass
        except Exception as e:  # noqa: BLE001
            raise AssertionError(f"evaluate{'_matrices' if matrix else ''}({da}, {db}, {dc}) raised "
                                 f"{type(e).__name__}: {e}") from e

    check()


# ------------------------------------------------------------------------------ the real entry point

@pytest.mark.parametrize("argv,want", [
    (["check", "mma." + "x" * 100_000], 2),
    (["prove", OP, "--timeout", "nan"], 2),
    (["--debug", "check", OP], 0),
    (["wmma"], 2),
])
def test_console_entry_point(argv, want):
    """A few cases through a real process (sys.exit, the console stream encodings)."""
    r = subprocess.run([sys.executable, "-c", "from formal.cli import run; run()", *argv], capture_output=True,
                       text=True, timeout=120, cwd=ROOT)
    assert r.returncode == want, r.stderr
    assert "Traceback" not in r.stderr
    if want == 2:
        assert len(r.stderr.strip().splitlines()) == 1 and len(r.stderr) < 600


# ------------------------------------------------------------------------------ verify: the grammar its help describes

def test_verify_reads_the_result_grammar_of_its_help_and_crlf(tmp_path, capsys):
    vec = tmp_path / "v.hex"
    assert main(["vectors", OP, "--coverage", "specials", "-o", str(vec)]) == 0
    lines = vec.read_text().splitlines()
    cases = [x for x in lines if x and not x.startswith("#")]
    # "the same lines with at least d=": opcode left out, the '# id=N' note kept, in reverse order
    only_d = []
    for x in cases:
        body, _, note = x.partition("#")
        d = next(t for t in body.split() if t.startswith("d="))
        only_d.append(f"{d}  #{note.split('why=')[0]}")
    (tmp_path / "r.hex").write_text("\n".join(reversed(only_d)) + "\n")
    assert main(["verify", OP, str(vec), str(tmp_path / "r.hex")]) == 0
    # CRLF vector and result files
    (tmp_path / "v_crlf.hex").write_bytes(vec.read_bytes().replace(b"\n", b"\r\n"))
    (tmp_path / "r_crlf.hex").write_bytes((tmp_path / "r.hex").read_bytes().replace(b"\n", b"\r\n"))
    assert main(["verify", OP, str(tmp_path / "v_crlf.hex"), str(tmp_path / "r_crlf.hex")]) == 0
    # JSONL results {"id": N, "d": [[hex,...] x 32]} with CRLF
    import json as _json

    js = []
    for x in cases:
        body, _, note = x.partition("#")
        d = next(t for t in body.split() if t.startswith("d="))[2:]
        cid = int(note.split("id=")[1].split()[0])
        js.append(_json.dumps({"id": cid, "d": [lane.split(",") for lane in d.split("|")]}))
    (tmp_path / "r.jsonl").write_bytes(("\r\n".join(js) + "\r\n").encode())
    assert main(["verify", OP, str(vec), str(tmp_path / "r.jsonl")]) == 0
    # a wrong result is a mismatch (1), not an error
    flipped = only_d[0][:2] + ("1" if only_d[0][2] != "1" else "2") + only_d[0][3:]
    (tmp_path / "flip.hex").write_text("\n".join([flipped] + only_d[1:]) + "\n")
    assert main(["verify", OP, str(vec), str(tmp_path / "flip.hex")]) == 1
    capsys.readouterr()


def test_eval_reads_a_vectors_npz(tmp_path):
    v = ROOT / "tests" / "data" / "readme_specials.npz"
    out = tmp_path / "d.npz"
    assert main(["eval", OP, "--inputs", str(v), "--out", str(out)]) == 0
    assert main(["verify", OP, str(v), str(out)]) == 0
