"""ptx-formal audit (--python FILE:FUNC, regs/matrix level, --identify), the matrix-level file
route vectors -> simulator -> verify, and --identify on the evaluator's own models."""

import json
import textwrap

import numpy as np
import pytest

from formal import evaluate
from formal.vectors.audit import distinguishing_vectors, identify
from formal.cli import main
from formal.vectors import distinguish as X

BF16 = "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"

SIM = textwrap.dedent('''
    import numpy as np
    from formal.numerics import mma_matrices
    from formal.numerics.archs import SM90
    FLOOR = SM90.replace_path("bf16.f32", minexp=-126)
    KW = dict(atype="bf16", btype="bf16", ctype="f32", dtype="f32", shape=(16, 8, 16))

    def good(opcode, A, B, C):
        return mma_matrices(A, B, C, **KW)

    def mmasim(opcode, A, B, C):          # a zero c at exponent -126: a coarser floor
        return mma_matrices(A, B, C, arch=FLOOR, **KW)

    def regs(opcode, a, b, c, e=None, sel=None):
        from formal import evaluate
        return evaluate(opcode, a, b, c)

    def exits(opcode, A, B, C):
        raise SystemExit(3)

    def raises(opcode, A, B, C):
        raise ValueError("simulator bug")

    def nan(opcode, A, B, C):                     # floats, not encodings
        return np.full(np.asarray(good(opcode, A, B, C)).shape, np.nan)

    def big(opcode, a, b, c, e=None, sel=None):   # d + 2**32: outside a 32-bit register
        from formal import evaluate
        return np.asarray(evaluate(opcode, a, b, c)).astype(np.int64) + 2**32

    def negative(opcode, A, B, C):
        return np.asarray(good(opcode, A, B, C)).astype(np.int64) - 1

    def short(opcode, A, B, C):
        return np.asarray(good(opcode, A, B, C))[:, :3]

    def exit0(opcode, A, B, C):
        import os
        os._exit(0)

    def killed(opcode, A, B, C):
        import os, signal
        os.kill(os.getpid(), signal.SIGKILL)

    def sleeps(opcode, A, B, C):
        import time
        time.sleep(600)

    def chatty(opcode, A, B, C):
        print("debug output of the simulator")
        return good(opcode, A, B, C)

    def flips(opcode, A, B, C):                   # every output wrong
        return np.asarray(good(opcode, A, B, C)) ^ np.uint32(1)
''')


@pytest.fixture
def sim(tmp_path):
    p = tmp_path / "sim.py"
    p.write_text(SIM)
    return str(p)


def _audit(sim, func, *extra, coverage=("mechanisms", "probes")):
    return main(["audit", BF16, "--python", f"{sim}:{func}", "--count", "0", "--coverage", *coverage, *extra])


def test_cli_audit_pass_fail_and_reports(sim, tmp_path, capsys):
    assert _audit(sim, "good", "--level", "matrix") == 0
    assert "PASS" in capsys.readouterr().out
    assert _audit(sim, "regs") == 0
    capsys.readouterr()
    md = tmp_path / "r.md"
    assert _audit(sim, "mmasim", "--level", "matrix", "--markdown", str(md)) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "mech:acc_floor" in out and "reduced to" in out
    text = md.read_text()
    assert text.startswith("# Audit of `mmasim`: FAIL") and "## Root causes" in text and "`mech:acc_floor`" in text
    assert _audit(sim, "mmasim", "--level", "matrix", "--json") == 1
    d = json.loads(capsys.readouterr().out)
    assert d["ok"] is False and "mech:acc_floor" in d["caught_by"] and d["vectors_digest"].startswith("sha256:")
    assert d["causes"][0]["cause"] == "mech:acc_floor"
    assert any(w["reduced"] and w["reduced"]["terms"] <= 3 for w in d["witnesses"])


@pytest.mark.parametrize("func,msg", [("exits", "SystemExit"), ("raises", "simulator bug"),
                                      ("nothere", "has no function")])
def test_cli_audit_contains_user_code(sim, capsys, func, msg):
    assert _audit(sim, func, "--level", "matrix", coverage=("probes",)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and msg in err and "Traceback" not in err


def test_cli_audit_bad_file(tmp_path, capsys):
    p = tmp_path / "broken.py"
    p.write_text("import sys\nsys.exit(5)\n")
    assert main(["audit", BF16, "--python", f"{p}:f"]) == 2
    assert "failed to import" in capsys.readouterr().err


def test_cli_identify(sim, capsys):
    assert main(["audit", BF16, "--python", f"{sim}:good", "--level", "matrix", "--identify"]) == 0
    out = capsys.readouterr().out
    assert "behaves like sm_90" in out and "exact" in out


def test_matrix_level_file_route(sim, tmp_path, capsys):
    """vectors --level matrix -> a simulator that knows no fragment layouts -> verify."""
    from formal.vectors import read, write_results
    from formal.vectors.fileio import read_results  # noqa: F401  (the route's reader)
    import importlib.util

    v = str(tmp_path / "v.hex")
    assert main(["vectors", BF16, "--level", "matrix", "--count", "6", "-o", v]) == 0
    assert "digest sha256:" in capsys.readouterr().err
    vs = read(v)
    assert vs.level == "matrix" and vs.cases[0].inputs["A"].shape == (16, 16)
    spec = importlib.util.spec_from_file_location("simmod", sim)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    A = np.stack([c.inputs["A"] for c in vs.cases])
    B = np.stack([c.inputs["B"] for c in vs.cases])
    C = np.stack([c.inputs["C"] for c in vs.cases])
    good, bad = str(tmp_path / "good.hex"), str(tmp_path / "bad.hex")
    write_results(good, vs, list(mod.good(BF16, A, B, C)))
    write_results(bad, vs, list(mod.mmasim(BF16, A, B, C)))
    assert main(["verify", BF16, v, good]) == 0
    capsys.readouterr()
    assert main(["verify", BF16, v, bad]) == 1
    out = capsys.readouterr().out
    assert "explained by:" in out and "mech:acc_floor:" in out and "element witnesses:" in out


def test_matrix_level_vectors_agree_with_the_register_level_ones():
    from formal import layout
    from formal.vectors import generate

    for op in (BF16, "mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32"):
        r = generate(op, count=6, coverage=["specials", "layout", "random"])
        m = generate(op, count=6, coverage=["specials", "layout", "random"], level="matrix")
        D = np.concatenate([np.asarray(layout.unpack(r.form, "d", c.expected[None])).reshape(-1, *m.cases[0].expected.shape)
                            for c in r.cases])
        assert len(m.cases) == len(D)
        assert all(np.array_equal(c.expected, d) for c, d in zip(m.cases, D))


FORMS = [BF16, "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16", "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32",
         "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32", "mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64"]


@pytest.mark.parametrize("op", FORMS)
def test_identify_each_evaluator_model_as_itself(op):
    prep = distinguishing_vectors(op)
    vs, pairs, names = prep
    assert len(names) >= 4
    # every pair of models with different records is told apart by at least one vector
    for key, p in pairs.items():
        assert p["identical"] or p["witnesses"] >= 1, key
    for arch in names:
        def model(opcode, a, b, c, e=None, sel=None, _arch=arch):
            return evaluate(opcode, a, b, c, e=e, sel=sel, arch=_arch)
        rep = identify(op, model, prepared=prep)
        same = {b for b in names if b == arch or X.same_record(vs.form, arch, b)}
        assert set(rep.identified) == same, (arch, rep.mismatches)
        for b in names:
            if b not in same:
                assert rep.mismatches[b] > 0 and rep.deviations[b], (arch, b)


@pytest.mark.parametrize("op", ["mma.sp.sync.aligned.m16n8k32.row.col.f32.bf16.bf16.f32",
                                "mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32"])
def test_another_architecture_is_named_as_the_root_cause(op):
    """A device that behaves like sm_80 (sparse form; m8n8k4 with 4 products per warp): every
    failing element is explained by 'arch:sm_80', and the witnesses are reduced."""
    import formal

    def like_sm80(opcode, a, b, c, e=None, sel=None):
        return evaluate(opcode, a, b, c, e=e, sel=sel, arch="sm_80")

    rep = formal.vectors.audit(op, like_sm80, count=0, coverage=["mechanisms"])
    assert not rep.ok and rep.failed_elements > 0
    assert [g["cause"] for g in rep.causes] == ["arch:sm_80"]
    assert rep.witnesses and all(w.reduced and 1 <= w.reduced["terms"] <= w.terms for w in rep.witnesses)


# ------------------------------------------------------------------------------------------
# issue 19: a model's output is validated, its code runs in a child process under a time limit


_INVALID = [
    ("nan", ("--level", "matrix"), "returned an array of float64"),
    ("big", (), "outside the 32-bit range of a D register"),
    ("negative", ("--level", "matrix"), "outside the 32-bit range of a D element (.f32)"),
    ("short", ("--level", "matrix"), "returned shape"),
    ("exit0", ("--level", "matrix"), "ended its process (exit code 0) without returning a result"),
    ("killed", ("--level", "matrix"), "was killed by signal 9"),
]


# --identify runs the same check (the audit's run_model): three kinds suffice there
@pytest.mark.parametrize("func,extra,msg,identify", [x + (False,) for x in _INVALID] +
                         [x + (True,) for x in _INVALID if x[0] in ("nan", "big", "exit0")])
def test_cli_audit_invalid_model_output_is_the_models_failure(sim, capsys, func, extra, msg, identify):
    more = ("--identify",) if identify else ()
    assert _audit(sim, func, *extra, *more, coverage=("probes",)) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and msg in err and "Traceback" not in err, err
    assert "behaves like" not in out and "PASS" not in out


def test_cli_audit_model_timeout(sim, capsys):
    import time

    t0 = time.monotonic()
    assert _audit(sim, "sleeps", "--level", "matrix", "--model-timeout", "1.5", coverage=("probes",)) == 3
    err = capsys.readouterr().err
    assert "--model-timeout 1.5 s" in err and err.count("\n") == 1
    assert time.monotonic() - t0 < 30


@pytest.mark.parametrize("args,msg", [(("--count", "100000000"), "--count must be in 0..100000"),
                                      (("--model-timeout", "0"), "--model-timeout must be"),
                                      (("--model-timeout", "nan"), "--model-timeout must be"),
                                      (("--coverage", ","), "names no coverage model")])
def test_cli_audit_bounds(sim, capsys, args, msg):
    assert main(["audit", BF16, "--python", f"{sim}:good", *args]) == 2
    assert msg in capsys.readouterr().err


def test_cli_audit_prints_of_the_model_do_not_reach_stdout(sim, capsys):
    assert _audit(sim, "chatty", "--level", "matrix", "--json", coverage=("probes",)) == 0
    out = capsys.readouterr().out
    assert json.loads(out)["ok"] is True        # stdout is the report alone


def test_cli_audit_save_vectors(sim, tmp_path, capsys):
    from formal.vectors import read

    v = tmp_path / "used.hex"
    assert _audit(sim, "good", "--level", "matrix", "--save-vectors", str(v), coverage=("probes",)) == 0
    out, err = capsys.readouterr()
    vs = read(str(v))
    assert vs.level == "matrix" and vs.cases and f"wrote {len(vs.cases)} vectors" in err
    assert vs.digest in out                      # the report names the vectors it ran
    j = tmp_path / "identify.jsonl"
    assert _audit(sim, "good", "--level", "matrix", "--identify", "--save-vectors", str(j)) == 0
    assert read(str(j)).cases
    assert _audit(sim, "good", "--save-vectors", str(tmp_path / "no" / "dir.hex")) == 2   # checked first


def test_cli_audit_says_when_causes_cover_only_the_first_elements(sim, capsys):
    """Over 4,000 failing elements: every one is counted, and the report says the causes were
    grouped over the first 4,000 (failed_elements_truncated)."""
    assert main(["audit", BF16, "--python", f"{sim}:flips", "--level", "matrix", "--count", "40",
                 "--coverage", "random", "--no-reduce", "--json"]) == 1
    d = json.loads(capsys.readouterr().out)
    assert d["failed_elements"] == 40 * 16 * 8 and d["failed_elements_truncated"] is True
    assert d["failed_elements_examined"] == 4000 == sum(g["elements"] for g in d["causes"])
    assert main(["audit", BF16, "--python", f"{sim}:flips", "--level", "matrix", "--count", "40",
                 "--coverage", "random", "--no-reduce"]) == 1
    assert "causes grouped over the first 4000" in capsys.readouterr().out


@pytest.mark.parametrize("op", ["mma.sync.aligned.m8n8k4.row.col.f16.f16.f16.f16",
                                "mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32"])
def test_matrix_level_m8n8k4_witnesses_are_reduced(tmp_path, capsys, op):
    """m8n8k4 .f16 runs 4 products a warp: at matrix level each is a case of its own, and the
    reduction must not pack them into registers (was: LayoutError, then exit 4 KeyError 'terms')."""
    p = tmp_path / "m8.py"
    p.write_text(textwrap.dedent('''
        import numpy as np
        from formal.evaluate import evaluate_matrices
        def wrong(opcode, A, B, C):
            D = np.array(evaluate_matrices(opcode, A, B, C))
            D[..., 0, 0] ^= 1
            return D
    '''))
    cov = ["--coverage", "specials", "random", "--count", "2"]
    assert main(["audit", op, "--python", f"{p}:wrong", "--level", "matrix", *cov]) == 1
    out = capsys.readouterr().out
    assert "reduced to 0 term(s)" in out and "not reduced" not in out
    assert main(["audit", op, "--python", f"{p}:wrong", "--level", "matrix", *cov, "--json"]) == 1
    d = json.loads(capsys.readouterr().out)
    assert all(w["reduced"] and "terms" in w["reduced"] for w in d["witnesses"])


def test_help_lists_only_options_that_exist(capsys):
    assert main(["audit", "--help"]) == 0
    text = capsys.readouterr().out
    import re

    from formal.cli.audit import __doc__ as doc
    for opt in set(re.findall(r"--[a-z][a-z-]+", doc + text)):
        assert opt in text, opt


def test_api_rejects_invalid_output():
    import formal.vectors.audit as A

    def floats(opcode, A_, B, C):
        return np.zeros((len(A_), 16, 8), np.float32)

    rep = A.audit(BF16, floats, level="matrix", coverage=["probes"])
    assert not rep.ok and rep.errors and "float32" in rep.errors[0]
