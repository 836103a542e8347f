"""Issue 19, internal errors: CUTLASS example 19 (exit 4, KeyError in provenance._describe) and
wmma .f64 kernels (exit 2, a numpy broadcast message) are read and decided."""

from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import numpy as np

from formal import kernel
from formal.cli import main
from formal.kernel.buffers import contract_reference, corpus_inputs

DATA = Path(__file__).resolve().parent / "data" / "kernels_sem"


def cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def test_cutlass_19_is_decided_without_internal_error():
    """D = alpha * A @ B^T + beta * C: the epilogue mixes the accumulator with C, which the
    contract D = A @ B.T does not say: a witness naming the mix, exit 1 (was exit 4)."""
    rc, out, err = cli("kernel", "check", str(DATA / "cutlass_19_tensorop_canonical_sm80.ptx"), "--spec",
                       str(DATA / "cutlass_19_tensorop_canonical_sm80.toml"), "--no-lanes")
    assert rc == 1 and not err, err
    assert "a value mixing several elements, first the accumulator of (0, 0)" in out
    # its epilogue reads a fragment entry it never loaded (line 871) and never stores the
    # result: no undefined witness
    assert "undefined" not in out


def test_cutlass_19_run():
    spec = kernel.load_spec(DATA / "cutlass_19_tensorop_canonical_sm80.toml")   # alpha = 1, beta = 0
    inp = corpus_inputs(spec, 0)
    out = kernel.run(kernel.parse_module((DATA / "cutlass_19_tensorop_canonical_sm80.ptx").read_text()), spec, inp)
    assert not out.witnesses
    assert contract_reference(spec, inp, out)["D"] < 1e-12          # f64 products of one warp


def test_wmma_f64_check_and_run():
    spec = kernel.load_spec(DATA / "wmma_f64_sm80.toml")
    mod = kernel.parse_module((DATA / "wmma_f64_sm80.ptx").read_text())
    res = kernel.check(mod, spec, lanes=False)
    assert res.verdict == "proved" and res.stats["products"] == 16 * 32 * 16
    assert any("m8n8k4.a.f64" in x for x in res.stats["wmma_maps"])
    inp = corpus_inputs(spec, 0)
    out = kernel.run(mod, spec, inp)
    a = inp["A"].view(np.float64)
    b = inp["B"].view(np.float64)
    got = np.asarray(out["C"]).view(np.float64)
    assert np.allclose(got, a @ b, rtol=1e-13, atol=0) and contract_reference(spec, inp, out)["C"] < 1e-13


def test_wmma_f64_cli_exit_0():
    rc, out, err = cli("kernel", "check", str(DATA / "wmma_f64_sm80.ptx"), "--spec", str(DATA / "wmma_f64_sm80.toml"),
                       "--no-lanes")
    assert rc == 0 and out.startswith("proved") and not err
