"""`kernel check` of the Hopper corpus (issue 21): every module is proved, refuted with the
witness the PTX deserves, or has no contract to check (exit 2).

The two refutations are real findings, cross-checked with `kernel run` (independent code: the
bit-exact interpreter with its own asynchrony and setmaxnreg bookkeeping): Triton's
f16-accumulator kernel reads a wgmma accumulator in flight, Gluon's warp-specialised kernel runs
two setmaxnreg instructions in one warpgroup.

Conversions written as bit tricks (formal/kernel/exact.py) are decided over every element value;
the Triton upcast kernels of tests/data/kernels_upcast (tools/make_upcast_kernels.py: other
types and tiles than the corpus's) check that on code the proof was not written against, and
`kernel run` of each with every element code against an identity B shows the same values.
"""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import numpy as np
import pytest

from formal import kernel
from formal.kernel import manifest
from formal.kernel.spec import SpecError
from hopper_corpus import CORPUS, MANIFEST, module, spec

UPCAST = Path(__file__).parent / "data" / "kernels_upcast"
UP_MANIFEST = json.loads((UPCAST / "manifest.json").read_text())

# (witness kind, line) of the first witness; `kernel run` sees the same
REFUTED = {"tri_ptr_f16_f16acc_w4": ("in-flight", 267), "gl_ws_f16_w4": ("undefined", 478)}
NO_CONTRACT = ["tri_attn_softmax_w4", "tri_attn_softmax_w8"]          # online softmax: no product contract
PROVED = sorted(set(MANIFEST) - set(REFUTED) - set(NO_CONTRACT))
# about a second or less on one core: the CI set; the rest (up to ~35 s each) in the slow suite, with
# the 2-CTA cluster and device-built tensor map kernels, which tests/test_kernel_hopper_cluster.py checks
QUICK = {"cute_gmma_rs_f16", "cute_gmma_ss_f16", "cute_gmma_ss_f16_mn", "gl_pipe_f16_w4", "gl_regA_f16_w4",
         "tri_attn_chain_w4", "tri_ptr_bf16_w4", "tri_ptr_e4m3_bn_w4", "tri_ptr_e4m3_w4_k1024", "tri_ptr_f16_at_w4",
         "tri_ptr_f16_w4", "tri_ptr_s8_w4", "tri_ptr_f16_f16acc_w4", "tri_tma_f16_w4", "tri_tma_s8_w4"}


def _p(names):
    return [n if n in QUICK else pytest.param(n, marks=pytest.mark.slow) for n in names]


def test_every_corpus_kernel_has_an_expectation():
    assert set(PROVED) | set(REFUTED) | set(NO_CONTRACT) == set(MANIFEST)
    assert len(PROVED) == 47 and "tri_up_s8_bf16_w8" in PROVED


@pytest.mark.parametrize("name", _p(PROVED))
def test_proved(name):
    r = kernel.check(module(name), spec(name))
    assert r.verdict == "proved", (name, r.summary, [str(w) for w in r.witnesses[:1]])
    assert not r.witnesses and r.stats["mma"] > 0
    assert r.stats["outputs_complete"] == r.stats["outputs_checked"] > 0


@pytest.mark.parametrize("name", _p(sorted(REFUTED)))
def test_refuted_as_run_sees_it(name):
    kind, line = REFUTED[name]
    r = kernel.check(module(name), spec(name))
    assert r.verdict == "refuted"
    assert (r.witnesses[0].kind, r.witnesses[0].line) == (kind, line), str(r.witnesses[0])
    # the independent interpreter, on the H100's inputs
    from hopper_corpus import inputs
    out = kernel.run(module(name), spec(name), inputs(name, 0))
    assert (kind, line) in {(w.kind, w.line) for w in out.witnesses}


@pytest.mark.parametrize("name", NO_CONTRACT)
def test_no_contract_is_bad_input(name):
    with pytest.raises(SpecError, match="contract"):
        kernel.check(module(name), spec(name))


# ----------------------------------------------------------------------------- the CLI

def cli(*argv):
    from formal.cli import main
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def _files(name):
    return str(CORPUS / f"{name}.ptx"), str(CORPUS / "specs" / f"{name}.toml")


def test_cli_proved_and_json():
    ptx, toml = _files("tri_ptr_f16_w4")
    rc, out, _ = cli("kernel", "check", ptx, "--spec", toml)
    assert rc == 0 and out.startswith("proved")
    rc, out, _ = cli("kernel", "check", ptx, "--spec", toml, "--json")
    d = json.loads(out)
    assert rc == 0 and d["verdict"] == "proved" and not d["witnesses"]


def test_cli_refuted_and_json():
    ptx, toml = _files("tri_ptr_f16_f16acc_w4")
    rc, out, _ = cli("kernel", "check", ptx, "--spec", toml)
    assert rc == 1 and out.startswith("refuted") and "in-flight: line 267" in out
    rc, out, _ = cli("kernel", "check", ptx, "--spec", toml, "--json")
    d = json.loads(out)
    assert rc == 1 and d["verdict"] == "refuted"
    w = d["witnesses"][0]
    assert (w["kind"], w["line"], w["register"], w["warpgroup"]) == ("in-flight", 267, "%r44", 0)


def test_cli_step_bound_exit_3():
    ptx, toml = _files("tri_tma_f16_w4")
    rc, out, err = cli("kernel", "check", ptx, "--spec", toml, "--max-steps", "40")
    assert rc == 3 and not out and err.startswith("ptx-formal kernel: stopped: line ")
    assert "stopped after 40 instruction steps" in err and len(err.strip().splitlines()) == 1


def test_cli_no_contract_exit_2():
    ptx, toml = _files("tri_attn_softmax_w4")
    rc, out, err = cli("kernel", "check", ptx, "--spec", toml)
    assert rc == 2 and not out and "contract" in err and len(err.strip().splitlines()) == 1


# ----------------------------------------------------------------------------- bit-trick conversions

def _up(name):
    rec = UP_MANIFEST[name]
    return kernel.parse_module((UPCAST / rec["ptx"]).read_text(), path=rec["ptx"]), manifest.load(rec)


def _text(name):
    return (UPCAST / UP_MANIFEST[name]["ptx"]).read_text()


@pytest.mark.parametrize("name", ["up_s8_bf16_w4", "up_s8_f16_w4", "up_u8_bf16_w4", "up_u8_f16_w8"])
def test_upcast_kernels_proved(name):
    mod, sp = _up(name)
    r = kernel.check(mod, sp)
    assert r.verdict == "proved", [str(w) for w in r.witnesses[:1]]
    assert r.stats["operand_derivations"]["A"] == {"converted": r.stats["products"]}


def _codes_run(name):
    """`kernel run` with A's rows holding every element code and B the identity: C = A.to(up)."""
    mod, sp = _up(name)
    A, B = sp.buffer("A"), sp.buffer("B")
    M, K = A.shape
    a = (np.arange(M * K) % 256).astype(np.uint8).reshape(M, K)
    one = {"bf16": 0x3F80, "f16": 0x3C00}[B.type]
    b = np.zeros(B.shape, np.uint16)
    b[np.arange(min(B.shape)), np.arange(min(B.shape))] = one
    out = kernel.run(mod, sp, {"A": a, "B": b})
    return a, np.asarray(out["C"]).view(np.float32), B.type, sp.buffer("A").type, out


def _exact(a, src, up):
    from formal.kernel import values as V
    bits = V.cvt(up, src, "rn", a.astype(np.uint64))
    return V.to_float(V.cvt("f32", up, "rn", bits), "f32")


def test_s8_bf16_bit_trick_is_the_conversion_run_computes():
    a, c, up, src, out = _codes_run("up_s8_bf16_w4")
    K = a.shape[1]
    want = _exact(a[:, :c.shape[1]], src, up)
    assert np.array_equal(c[:, :K], want[:, :K]) and not out.witnesses


@pytest.mark.parametrize("mutant,value", [
    # the sign mask 0x43804380 -> 0x43004300: x & 0x7f, wrong for negative x from -128 on
    (("and.b32 \t%r{}, %r{}, 1132479360;", "1124090624"), "-128"),
    # the magic exponent 128.0 -> 64.0 under the byte: wrong from 1 on
    (("prmt.b32 \t%r{}, %r{}, 67, 0x3340U;", "66"), "1"),
])
def test_s8_bf16_broken_trick_refuted_with_the_value(mutant, value):
    import re
    text = _text("up_s8_bf16_w4")
    pat, new = mutant
    rx = re.escape(pat).replace(r"\{\}", r"\d+")
    m = re.search(rx, text)
    assert m is not None
    old = m.group(0)
    repl = old.replace("1132479360", new) if "1132479360" in old else old.replace(" 67,", f" {new},")
    mod = kernel.parse_module(text.replace(old, repl))
    r = kernel.check(mod, _up("up_s8_bf16_w4")[1])
    assert r.verdict == "refuted"
    w = next(w for w in r.witnesses if w.kind == "wrong-type")
    assert w.instruction.startswith("sub.rn.bf16x2")
    assert f"for the element value {value} it is" in w.arrived and "decided over every value" in w.arrived


def test_e5m2_bf16_inf_and_nan_are_not_converted():
    """Triton's e5m2 -> bf16 upcast (lop3 masks, shift, a multiply by 2^112) maps +-inf and NaN to
    finite values: check refutes it with the code 0x7c (inf); `kernel run` of every code shows
    exactly the inf / NaN codes differ from the conversion, the finite ones equal it."""
    mod, sp = _up("up_e5m2_bf16_w4")
    r = kernel.check(mod, sp)
    assert r.verdict == "refuted"
    w = next(w for w in r.witnesses if w.kind == "wrong-type")
    assert "for the element value inf it is 0x4780 (65536.0)" in w.arrived, w.arrived
    a, c, up, src, _ = _codes_run("up_e5m2_bf16_w4")
    K = a.shape[1]
    want = _exact(a, src, up)[:, :K]
    got = c[:, :K]
    nonfinite = (a[:, :K] & 0x7F) >= 0x7C
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    assert same[~nonfinite].all() and not same[nonfinite].any()
    assert got[a[:, :K] == 0x7C][0] == 65536.0
