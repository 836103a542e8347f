"""wgmma on silicon (an H200, 2026-11-28; proofs/evidence/wgmma_silicon.json): the checked-in
slice of the run against the spec's models.

The probes (formal/hw/wgmma_probe.py) are rebuilt here, deterministically, and their outputs
read back without a layout model: the D and A fragments every register slot held, the shared-
memory byte every descriptor read, and the numerics of every dense type combination.  The
same checks decided the whole run (tools/wgmma_record.py); here they run on the slice, and the
alternatives the run refuted must still be refuted by it.
"""
from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

import wgmma_silicon_checks as chk
from formal.hw import wgmma_probe as wp

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def run():
    return wp.all_probes(list(wp.GROUPS)), dict(np.load(ROOT / "tests" / "data" / "wgmma_silicon_slice.npz"))


def test_the_slice_agrees_with_the_spec(run):
    probes, outs = run
    v = chk.check_all(probes, outs, numerics_ctas=4)
    assert v["disagreeing"] == []
    assert v["d_fragments"] == [82, 82]            # every N of .f32, .f16 and .s32 accumulators
    assert v["a_fragments"] == [8, 8]              # A from registers: tf32, f16, bf16, e4m3, e5m2, s8, u8, b1
    assert v["descriptor_readouts"] == [500, 500]
    assert set(v["numerics_outputs"]) == {"f16.f32", "f16.f16", "bf16.f32", "tf32.f32", "f8.f32", "f8.f16",
                                          "s8.s32", "u8.s32", "b1.s32"}
    assert all(a == b > 0 for a, b in v["numerics_outputs"].values())
    # sparse: each warp reads its 16 rows as the mma.sp form of the same types (layout and numerics)
    assert set(v["sparse_outputs"]) == {"sparse_layout", "sparse_random"}
    assert all(a == b > 0 for a, b in v["sparse_outputs"].values())


def test_the_record_is_the_whole_run():
    runs = json.loads((ROOT / "proofs" / "evidence" / "wgmma_silicon.json").read_text())["runs"]
    first, second = runs["layout,readout,numerics,numx"]["verdicts"], runs["sparse,validate"]["verdicts"]
    for r in runs.values():
        assert r["inputs"]["rebuilt_and_equal"] and r["verdicts"]["disagreeing"] == []
    assert first["d_fragments"] == [82, 82] and first["a_fragments"] == [8, 8]
    assert first["descriptor_readouts"] == [500, 500]
    assert sum(b for _, b in first["numerics_outputs"].values()) == 3_326_464
    assert sum(b for _, b in second["numerics_outputs"].values()) == 1_646_592      # fresh seed, same kernels
    assert sum(b for _, b in second["sparse_outputs"].values()) == 690_176
    for v in (first, second):
        assert all(a == b for a, b in list(v["numerics_outputs"].values()) + list(v.get("sparse_outputs", {}).values()))


def _readouts(probes):
    return [p for p in probes if p.info["kind"] == "readout"]


def _agree(p, outs, info):
    got, want = wp.observed_readout(p, outs[p.key]), chk.smem_address(info)
    inside = want + max(1, info["bits"] // 8) <= 16384
    return np.array_equal(got[inside], want[inside])


def test_the_readouts_refute_the_alternatives(run):
    """Swizzling relative to the descriptor's start address, a base offset that is added (not
    subtracted), or a K-major swizzled LBO that is used: each disagrees with the silicon."""
    probes, outs = run
    relative = added = lbo_ignored = 0
    for p in _readouts(probes):
        c = p.info["cfg"]
        if c["sw"] and c["start"] % (8 * c["sw"]) and c["base"] == 0:
            moved = copy.deepcopy(p.info)
            moved["cfg"]["start"] = 0                            # the pattern restarted at the start address
            got = wp.observed_readout(p, outs[p.key])
            want = chk.smem_address(moved) + c["start"]
            relative += not np.array_equal(got[want < 16384], want[want < 16384])
        if c["sw"] and c["base"] % 2:
            alt = copy.deepcopy(p.info)
            alt["cfg"]["base"] = -c["base"]
            added += not _agree(p, outs, alt)
        if c["sw"] and p.info["major"] == "K" and c["lbo"] in (0, 4096):
            lbo_ignored += _agree(p, outs, p.info)               # the same bytes whatever LBO says
    assert relative >= 20 and added >= 20 and lbo_ignored == 6 * 3 * 2     # 6 K-major probes x 3 swizzles x LBO 0, 4096


def test_fp8_is_not_the_mma_sync_emulation(run):
    """The wgmma fp8 outputs refute mma.sync's fp8 path (f16 HMMAs, c added last)."""
    from formal.numerics import mma_matrices

    probes, outs = run
    p = next(q for q in probes if q.key == "nu.f32.e4m3.e4m3.0.normal")
    A, B, C = chk.operand_matrices(p)
    A, B, C = A[:4].astype(np.uint8), B[:4].astype(np.uint8), C[:4].astype(np.uint32)
    emulated = mma_matrices(A, B, C, atype="e4m3", btype="e4m3", ctype="f32", dtype="f32", arch="sm_90", shape=(16, 8, 32))
    native = mma_matrices(A, B, C, atype="e4m3", btype="e4m3", ctype="f32", dtype="f32", arch="sm_90", shape=(64, 8, 32))
    got = chk.observed_d(p, outs[p.key][:4])
    assert np.array_equal(got, native) and (got != emulated).mean() > 0.5
