"""In-place and layout-changing contracts (issue 19): wmma API kernels of this project
(tools/kernel_sources/wmma_inplace.cu, nvcc -ptx for sm_80 and sm_90) read C row-major and write D
column-major through the same pointer, alone or at the end of a chain of two or three products
through it.  Each is proved by `kernel check` with [[view]]s and chained contracts, and `kernel run`
equals an independent reference (formal.evaluate_matrices applied step by step to the inputs);
one-line mutants of the kernels and of the specs are refuted, and `run` confirms they change D."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from formal import kernel
from formal.evaluate import evaluate_matrices

DATA = Path(__file__).parent / "data" / "kernels_inplace"
ENTRIES = sorted(p.stem for p in DATA.glob("*.toml"))
ARCHS = ("sm80", "sm90")


def _module(arch: str):
    return kernel.parse_module((DATA / f"wmma_inplace_{arch}.ptx").read_text())


_MODS = {a: _module(a) for a in ARCHS}


def _inputs(spec, seed=3):
    inp = kernel.make_inputs(spec, seed=seed)
    if spec.buffers[0].type == "f32":                                        # tf32: exact in tf32, so
        for k in inp:                                                         # the kernel's cvt.rna is the identity
            if k != "C":
                inp[k] = inp[k] & np.uint32(0xFFFFE000)
    return inp


def _form(mod, entry):
    return next(i.form for i in mod.entry(entry).instrs if i.opcode.startswith("wmma.mma"))


def _reference(mod, entry, spec, inp):
    """The contracts in order, each step from the inputs (views cut from their buffers) and the
    earlier steps' results, by formal.evaluate_matrices."""
    form, vals = _form(mod, entry), {}

    def get(n):
        if n in vals:
            return vals[n]
        b = spec.buffer(n)
        if b.view_of is None:
            return inp[n]
        idx = b.elem_offset + sum(np.indices(b.shape)[d] * st for d, st in enumerate(b.strides))
        return inp[b.view_of].ravel()[idx]
    for c in spec.contracts:
        acc = get(c.addend) if c.addend else np.zeros((16, 16), kernel.raw_dtype(spec.buffer(c.out).type))
        vals[c.out] = evaluate_matrices(form, get(c.lhs)[None], get(c.rhs)[None], acc[None])[0]
    return vals[spec.contracts[-1].out]


def test_the_data_is_the_generator_output():
    assert len(ENTRIES) == 10 and {"inplace_f16", "inplace_bf16", "inplace_tf32", "inplace_s8", "chain2_f16",
                                   "chain3_f16", "stacked_f16", "operand_chain_f16"} <= set(ENTRIES)
    import importlib.util
    tool = Path(__file__).resolve().parent.parent / "tools" / "make_wmma_inplace.py"
    sp = importlib.util.spec_from_file_location("make_wmma_inplace", tool)
    mk = importlib.util.module_from_spec(sp)
    sp.loader.exec_module(mk)
    spec_text = mk.spec_text
    for e in ENTRIES:
        assert (DATA / f"{e}.toml").read_text() == spec_text(e)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("entry", ENTRIES)
def test_proved_and_run_equals_reference(entry, arch):
    mod, spec = _MODS[arch], kernel.load_spec(DATA / f"{entry}.toml")
    res = kernel.check(mod, spec, lanes=False)
    assert res.verdict == "proved", res.summary
    assert res.stats["outputs_complete"] == 256
    steps = len(spec.contracts)
    assert res.stats["mma"] == steps and res.stats["products"] == steps * 256 * _form(mod, entry).mnk[2]
    if steps > 1:
        assert "chain steps" in res.summary
    inp = _inputs(spec)
    out = kernel.run(mod, spec, inp)
    assert not out.witnesses
    ref = _reference(mod, entry, spec, inp)
    base = spec.base("D").name
    assert np.array_equal(out["D"], ref)                  # the column-major view holds D
    assert np.array_equal(out[base], ref.T)               # the same memory read row-major: D transposed
    assert not np.array_equal(ref, inp.get(base, 0 * ref))


def _mutate(entry: str, edit) -> str:
    src = (DATA / "wmma_inplace_sm80.ptx").read_text()
    i = src.index(f".entry {entry}(")
    j = src.index("\n}", i)
    new = edit(src[i:j])
    assert new != src[i:j]
    return src[:i] + new + src[j:]


def _drop_nth(pattern: str, n: int):
    def edit(body):
        lines = body.split("\n")
        hits = [k for k, l in enumerate(lines) if re.search(pattern, l)]
        del lines[hits[n]]
        return "\n".join(lines)
    return edit


def _move_before(pattern: str, anchor: str):
    """Move the first line matching ``pattern`` to just before the first line matching ``anchor``."""
    def edit(body):
        lines = body.split("\n")
        i = next(k for k, l in enumerate(lines) if re.search(pattern, l))
        line = lines.pop(i)
        j = next(k for k, l in enumerate(lines) if re.search(anchor, l))
        lines.insert(j, line)
        return "\n".join(lines)
    return edit


MUTANTS = {
    # the result stored row-major: D[m][n] lands at D[n][m]
    "store_row": ("inplace_f16", lambda b: b.replace("wmma.store.d.sync.aligned.col", "wmma.store.d.sync.aligned.row"),
                  "wrong-address"),
    # the first step's store dropped: the second step adds the stale input C, not C1
    "chain2_no_store": ("chain2_f16", _drop_nth(r"wmma\.store\.d\.sync\.aligned\.row", 0), "wrong-element"),
    # one of the register-chained products dropped
    "chain3_drop_mma": ("chain3_f16", _drop_nth(r"wmma\.mma", 1), "missing-product"),
    # the second step loads A0 again instead of A1
    "chain2_wrong_a": ("chain2_f16", lambda b: re.sub(r"(\{%r18,[^}]*\}, )\[%rd7\]", r"\1[%rd10]", b), "wrong-element"),
    # the second step reads the first step's slice of A again (the view that selects A1 notices)
    "stacked_same_slice": ("stacked_f16", lambda b: b.replace("add.s64 \t%rd7, %rd6, 512;", "mov.u64 \t%rd7, %rd6;"),
                           "wrong-element"),
    # the result read back as A before it is stored: the fragment holds the stale T
    "operand_before_store": ("operand_chain_f16", _move_before(r"wmma\.load\.a[^\n]*\[%rd7\]", r"wmma\.store\.d"),
                             "wrong-element"),
}


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_mutants_refuted_and_change_the_output(name, tmp_path):
    entry, edit, kind = MUTANTS[name]
    text = _mutate(entry, edit)
    if shutil.which("ptxas"):
        p = tmp_path / "m.ptx"
        p.write_text(text)
        subprocess.run(["ptxas", "-arch=sm_80", str(p), "-o", str(tmp_path / "m.cubin")], check=True)
    mod, spec = kernel.parse_module(text), kernel.load_spec(DATA / f"{entry}.toml")
    res = kernel.check(mod, spec, lanes=False)
    assert res.verdict == "refuted" and any(w.kind == kind for w in res.witnesses), res.summary
    inp = _inputs(spec)
    assert not np.array_equal(kernel.run(mod, spec, inp)["D"], _reference(_MODS["sm80"], entry, spec, inp))


@pytest.mark.parametrize("entry,edit,kind", [
    ("inplace_f16", lambda t: t.replace('layout = "col"', 'layout = "row"'), "wrong-address"),
    # D said to start from the input C although the kernel adds C1: the products of both steps meet
    ("chain2_f16", lambda t: t.replace('D = "A1 @ B1 + C1"', 'D = "A1 @ B1 + C"'), "duplicate-product"),
    # a chain the kernel does not compute (C2 skipped)
    ("chain3_f16", lambda t: t.replace('D = "A @ B + C2"', 'D = "A @ B + C1"'), None),
])
def test_wrong_specs_refuted(entry, edit, kind):
    spec = kernel.load_spec(edit((DATA / f"{entry}.toml").read_text()))
    res = kernel.check(_MODS["sm90"], spec, lanes=False)
    assert res.verdict == "refuted", res.summary
    if kind:
        assert any(w.kind == kind for w in res.witnesses), res.summary


def test_cli_check_and_run(tmp_path):
    import io
    from contextlib import redirect_stderr, redirect_stdout

    from formal.cli import main
    spec = kernel.load_spec(DATA / "chain2_s8.toml")
    inp = _inputs(spec)
    np.savez(tmp_path / "in.npz", **inp)
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = main(["kernel", "run", str(DATA / "wmma_inplace_sm90.ptx"), "--spec", str(DATA / "chain2_s8.toml"),
                   "--inputs", str(tmp_path / "in.npz"), "--out", str(tmp_path / "out")])
    assert rc == 0, err.getvalue()
    assert (tmp_path / "out").exists() and not (tmp_path / "out.npz").exists()     # exactly the path given
    with np.load(tmp_path / "out", allow_pickle=False) as z:
        assert np.array_equal(z["D"], _reference(_MODS["sm90"], "chain2_s8", spec, inp))
        assert set(z.files) == {"A0", "B0", "A1", "B1", "C", "C1", "D"}
