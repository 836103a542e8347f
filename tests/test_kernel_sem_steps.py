"""Issue 19, hangs and silent acceptances: a kernel that loops forever stops at the step bound
(exit 3 naming the bound and the line); a register read before any write is an undefined
witness when what it computes is stored (or decides an address or a branch), never a proof."""

from __future__ import annotations

import io
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from formal import kernel
from formal.cli import main

SMALL = Path(__file__).resolve().parent / "data" / "kernels_small"
TINY = (SMALL / "tiny_mma.ptx").read_text()
TINY_SPEC = kernel.load_spec(SMALL / "tiny_mma.toml")

HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry loop(.param .u64 p0)\n{\n\t.reg .b32 %r<8>;\n\t.reg .pred %p<4>;\n"
LOOPS = {
    "plain": "\tmov.u32 %r1, 0;\n$L1:\n\tadd.s32 %r1, %r1, 1;\n\tbra $L1;\n}\n",
    "barrier": "\tmov.u32 %r1, 0;\n$L1:\n\tadd.s32 %r1, %r1, 1;\n\tbar.sync 0;\n\tbra $L1;\n}\n",
    # lanes 0-15 loop, the others leave: divergent
    "divergent": "\tmov.u32 %r2, %tid.x;\n\tsetp.lt.u32 %p1, %r2, 16;\n\t@!%p1 bra $DONE;\n$L1:\n\tadd.s32 %r2, %r2, 1;\n"
                 "\tbra $L1;\n$DONE:\n\tret;\n}\n",
}
SPEC = {"entry": "loop", "grid": [2], "block": [64],
        "buffer": [{"name": "C", "param": "p0", "type": "f32", "shape": [4, 4]}], "contract": {"C": "C @ C"}}


@pytest.mark.parametrize("kind", list(LOOPS))
@pytest.mark.parametrize("what", ["check", "run"])
def test_endless_loop_stops_at_the_bound(kind, what):
    mod = kernel.parse_module(HEAD + LOOPS[kind])
    t = time.perf_counter()
    with pytest.raises(kernel.StepLimit) as e:
        getattr(kernel, what)(mod, SPEC, max_steps=2000)
    assert time.perf_counter() - t < 10
    assert e.value.max_steps == 2000 and e.value.line > 0 and "--max-steps 2000" in e.value.why
    assert isinstance(e.value, kernel.Unsupported)              # exit 3 in the CLI


def test_loop_before_the_mma_stops():
    """tiny_mma with a self-loop in front of its mma."""
    text = TINY.replace("\tmma.sync.aligned", "$SPIN:\n\tbra.uni $SPIN;\n\tmma.sync.aligned", 1)
    with pytest.raises(kernel.StepLimit):
        kernel.check(kernel.parse_module(text), TINY_SPEC, max_steps=500)


def test_cli_names_bound_and_line(tmp_path):
    (tmp_path / "l.ptx").write_text(HEAD + LOOPS["barrier"])
    (tmp_path / "l.toml").write_text('entry = "loop"\ngrid = [1]\nblock = [32]\n[[buffer]]\nname = "C"\nparam = "p0"\n'
                                     'type = "f32"\nshape = [4, 4]\n[contract]\nC = "C @ C"\n')
    for cmd in ("check", "run"):
        err = io.StringIO()
        with redirect_stdout(io.StringIO()), redirect_stderr(err):
            rc = main(["kernel", cmd, str(tmp_path / "l.ptx"), "--spec", str(tmp_path / "l.toml"), "--max-steps", "300"])
        assert rc == 3
        assert err.getvalue().startswith("ptx-formal kernel: stopped: line ") and "--max-steps 300" in err.getvalue()


def test_default_bound_covers_the_corpus():
    assert kernel.DEFAULT_MAX_STEPS >= 25 * 3990      # the K = 1024 benchmark tile takes 3,990 steps


def test_uninitialised_accumulator_is_undefined_in_check_and_run():
    text = TINY.replace("\tmov.f32 \t%f2, 0f00000000;\n", "")
    mod = kernel.parse_module(text)
    res = kernel.check(mod, TINY_SPEC, lanes=False)
    assert res.verdict == "refuted"
    w = next(w for w in res.witnesses if w.kind == "undefined")
    assert "%f2" in w.arrived and "C[0][1]" in w.arrived and "st.global" in w.instruction
    out = kernel.run(mod, TINY_SPEC, kernel.make_inputs(TINY_SPEC, 1))
    assert any(w.kind == "undefined" and "%f2" in w.arrived for w in out.witnesses)


def test_undefined_address_is_a_witness():
    text = TINY.replace("\tmov.u32 \t%r1, %tid.x;\n", "", 1)       # %r1 feeds every address
    assert text != TINY
    res = kernel.check(kernel.parse_module(text), TINY_SPEC, lanes=False)
    assert res.verdict == "refuted"
    assert any(w.kind == "undefined" and "address register" in w.arrived for w in res.witnesses)


def test_dead_undefined_value_is_no_witness():
    """An undefined register whose result nobody stores (CUTLASS example 19's epilogue does this)."""
    text = TINY.replace("\tmma.sync.aligned", "\tadd.f32 \t%f9, %f8, %f8;\n\tmma.sync.aligned", 1)
    text = text.replace(".reg .f32 \t%f<8>;", ".reg .f32 \t%f<10>;")
    assert "%f<10>" in text
    assert kernel.check(kernel.parse_module(text), TINY_SPEC, lanes=False).verdict == "proved"
