"""wgmma.mma_async.sp inside kernels: `kernel run` executes the sparse probe kernels of
formal/hw/wgmma_probe.py (A from registers, and A from shared memory through a descriptor:
operands a.sp / b.sp) and gives the registers the H200 gave (tests/data/wgmma_silicon_slice.npz,
tests/data/wgmma_sparse_desc_h200.npz; proofs/evidence/wgmma_silicon.json,
wgmma_sparse_desc_h200.json).  `kernel check` declines the sparse data path by line (exit 3)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from formal import kernel
from formal.hw import wgmma_probe as wp

ROOT = Path(__file__).resolve().parent.parent
SLICE = np.load(ROOT / "tests" / "data" / "wgmma_silicon_slice.npz")
DESC = np.load(ROOT / "tests" / "data" / "wgmma_sparse_desc_h200.npz")
REG_PROBES = {p.key: p for p in wp.sparse_probes()}
DESC_PROBES = {p.key: p for p in wp.sparse_desc_probes()}
NAMES = ("img", "desc", "a", "c", "e", "flags", "d")


def launch(p, T):
    """The probe kernel as a module and a spec; every buffer as bytes."""
    k, i = p.kernel, p.inputs
    mod = kernel.parse_module(wp.module_ptx([k]), path=k.name + ".ptx")
    arrs = {n: i[n][:T] for n in NAMES[:-1]}
    arrs["d"] = np.zeros((T, 128, k.nd), np.uint32)
    bufs = {n: np.ascontiguousarray(v).reshape(-1).view(np.uint8) for n, v in arrs.items()}
    spec = {"entry": k.name, "grid": [T, 1, 1], "block": [128, 1, 1],
            "buffer": [{"name": n, "param": "p_" + n, "type": "u8", "shape": [int(v.size)], "strides": [1]}
                       for n, v in bufs.items()]}
    return mod, spec, bufs


def run_probe(p, want):
    T = want.shape[0]
    mod, spec, bufs = launch(p, T)
    r = kernel.run(mod, spec, bufs)
    assert not r.witnesses, [str(w) for w in r.witnesses[:2]]
    got = np.ascontiguousarray(np.asarray(r["d"], np.uint8)).view(np.uint32).reshape(T, 128, p.kernel.nd)
    bad = np.argwhere(got != want)
    assert not len(bad), f"{p.key}: cta/thread/reg {bad[0].tolist()}: H200 {int(want[tuple(bad[0])]):#x}, run {int(got[tuple(bad[0])]):#x}"


def _cases(probes, every):
    keys = sorted(probes)
    return [pytest.param(k, marks=() if j % every == 0 else pytest.mark.slow) for j, k in enumerate(keys)]


@pytest.mark.parametrize("key", _cases(REG_PROBES, 8))
def test_register_a_equals_the_h200(key):
    run_probe(REG_PROBES[key], SLICE[key])


@pytest.mark.parametrize("key", _cases(DESC_PROBES, 4))
def test_shared_memory_a_equals_the_h200(key):
    run_probe(DESC_PROBES[key], DESC[key])


def test_the_records_cover_every_sparse_combination_and_selector():
    assert len(DESC_PROBES) == 40 and set(DESC.files) == set(DESC_PROBES)
    assert {(p.kernel.dtype, p.kernel.atype, p.kernel.btype) for p in DESC_PROBES.values()} == set(wp.SPARSE_COMBOS)
    assert all(k in SLICE.files for k in REG_PROBES)


def test_check_declines_the_sparse_data_path_by_line():
    p = DESC_PROBES[sorted(DESC_PROBES)[0]]
    mod, spec, _ = launch(p, 1)
    line = next(i + 1 for i, t in enumerate(wp.module_ptx([p.kernel]).splitlines()) if "wgmma.mma_async.sp" in t)
    shapes = {"img": [64, 64], "c": [64, 32], "d": [64, 32]}      # byte buffers viewed so a contract type-checks
    for b in spec["buffer"]:
        if b["name"] in shapes:
            b["shape"], b["strides"] = shapes[b["name"]], [shapes[b["name"]][1], 1]
    spec["contract"] = {"d": "img @ c"}
    with pytest.raises(kernel.Unsupported) as e:
        kernel.check(mod, spec)
    assert e.value.line == line and "wgmma.mma_async.sp" in str(e.value)


def test_illegal_metadata_is_undefined_behaviour_with_a_witness():
    """Metadata 0b0000 (both indices of a chunk 0) is undefined behaviour (9.7.15.6.1): `run` says
    so with a witness on the wgmma and the metadata register's path, as for mma.sp."""
    p = DESC_PROBES[sorted(DESC_PROBES)[0]]
    mod, spec, bufs = launch(p, 1)
    bufs["e"] = np.zeros_like(bufs["e"])
    r = kernel.run(mod, spec, bufs)
    (w,) = [w for w in r.witnesses if w.kind == "undefined"]
    assert "wgmma.mma_async.sp" in w.instruction and w.register == "%e0" and "repeated index 0" in w.arrived
