"""`kernel run` of the Hopper corpus equals the H100's output buffers bit for bit (issue 21).

Inputs are exactly what the GPU run used (tools/run_hopper_kernels.py's ``hopper_inputs``, their
sha256 checked against the record); outputs are compared with the recorded sha256 and, where the
arrays are checked in, element by element.  Seed 0 of the quick kernels runs in CI, the second
seed and the long ones in the slow suite.

Asynchrony is state: a wgmma's accumulator read before the wait_group covering it is an
``in-flight`` witness (Triton's f16-accumulator kernel does exactly that at line 267; ptxas
injects a wait there, which is why the H100 still computes the contract).
"""

from __future__ import annotations

import pytest

from formal import kernel
from hopper_corpus import CORPUS, MANIFEST, compare, inputs, module, spec
from test_kernel_hopper_cluster import CLUSTER, DEVICE_MAPS

# pointer loads (cp.async), register-A wgmma, CuTe SS/RS atoms, the attention chain: no TMA
NO_TMA = ["cute_gmma_rs_f16", "cute_gmma_ss_f16", "cute_gmma_ss_f16_mn", "tri_attn_chain_w4", "tri_ptr_bf16_w4",
          "tri_ptr_bf16_w8", "tri_ptr_e4m3_bn_w4", "tri_ptr_e4m3_w4_k1024", "tri_ptr_e4m3_w8_k4096", "tri_ptr_e5m2_w4",
          "tri_ptr_f16_at_w4", "tri_ptr_f16_bt_w8", "tri_ptr_f16_f16acc_w4", "tri_ptr_f16_masked_w4", "tri_ptr_f16_w4",
          "tri_ptr_f16_w8", "tri_ptr_s8_w4", "tri_ptr_s8_w8", "tri_ptr_tf32_w4", "tri_ptr_tf32_w8",
          "tri_up_e4m3_f16_w4", "tri_up_s8_bf16_w8"]
# TMA + mbarriers (formal/kernel/tma.py, barriers.py): pipelined, warp-specialised (producer /
# consumer warps, named barriers, setmaxnreg) and persistent kernels, Triton, Gluon and CuTe
TMA = ["cute_tma_fp8", "cute_tma_ws_bf16", "gl_pipe_bf16_w4", "gl_pipe_e4m3_kmaj_w4", "gl_pipe_f16_kmaj_w8",
       "gl_pipe_f16_w4", "gl_regA_f16_w4", "gl_ws_f16_w4", "tri_persist_e4m3_w8", "tri_persist_f16_w4",
       "tri_persist_f16_w8", "tri_persist_ws_f16_w4", "tri_tma_bf16_w4", "tri_tma_e4m3_128x256_k4096_w8",
       "tri_tma_e4m3_w4_k1024", "tri_tma_f16_kmaj_w8", "tri_tma_f16_w4", "tri_tma_pdl_f16_w4", "tri_tma_s8_w4",
       "tri_tma_tf32_w4", "tri_ws_bf16_w8", "tri_ws_f16_w4"]
# 2-CTA clusters (multicast TMA, remote mbarrier arrives) and tensor maps built on the device
# (tensormap.replace): run, with their mutants, in test_kernel_hopper_cluster.py
ELSEWHERE = CLUSTER + DEVICE_MAPS
# seconds on one core (seed 0); over ~0.6 s: the slow suite
LONG = {"tri_ptr_e4m3_w8_k4096", "cute_tma_fp8", "cute_tma_ws_bf16", "gl_pipe_e4m3_kmaj_w4", "gl_pipe_f16_kmaj_w8",
        "gl_ws_f16_w4", "tri_persist_e4m3_w8", "tri_persist_f16_w4", "tri_persist_f16_w8", "tri_persist_ws_f16_w4",
        "tri_tma_e4m3_128x256_k4096_w8", "tri_ws_bf16_w8", "tri_ws_f16_w4", "tri_up_e4m3_f16_w4",
        "tri_up_s8_bf16_w8", "tri_ptr_e5m2_w4"}
APPROX = ["tri_attn_softmax_w4", "tri_attn_softmax_w8"]   # ex2.approx: not specified bit for bit
# register reads of an in-flight wgmma in the PTX as Triton wrote it: (line, register)
IN_FLIGHT = {"tri_ptr_f16_f16acc_w4": (267, "%r44")}
# Gluon's warp-specialise dispatcher: warps 4-5 and 6-7 of one warpgroup run different setmaxnreg
# instructions (lines 449 and 478), which 9.7.19.5 forbids ("the same setmaxnreg instruction must
# be executed by all warps in a warpgroup"); the values are unaffected
SETMAXNREG = {"gl_ws_f16_w4": 478}


def _cases():
    for n in NO_TMA + TMA:
        for seed in (0, 1):
            yield pytest.param(n, seed, marks=pytest.mark.slow) if (seed or n in LONG) else (n, seed)


def test_the_list_is_every_kernel_without_tma():
    no_tma = {n for n in MANIFEST if "cp.async.bulk" not in (CORPUS / f"{n}.ptx").read_text()
              and not any(p["role"] == "tensormap" for p in MANIFEST[n]["launch"]["params"])}
    assert no_tma == set(NO_TMA) | set(APPROX)


@pytest.mark.parametrize("name,seed", list(_cases()))
def test_run_equals_h100(name, seed):
    out = kernel.run(module(name), spec(name), inputs(name, seed))
    assert not compare(name, seed, out), compare(name, seed, out)
    kinds = [(w.kind, w.line, w.register) for w in out.witnesses]
    if name in IN_FLIGHT:
        line, reg = IN_FLIGHT[name]
        assert kinds and kinds[0] == ("in-flight", line, reg), kinds
        assert {k for k, _, _ in kinds} == {"in-flight"}
    elif name in SETMAXNREG:
        assert kinds and {(k, ln) for k, ln, _ in kinds} == {("undefined", SETMAXNREG[name])}, kinds
        assert "the same setmaxnreg instruction" in out.witnesses[0].wanted
    else:
        assert not kinds, kinds


@pytest.mark.parametrize("name", APPROX)
def test_approximate_math_is_declined_by_line(name):
    with pytest.raises(kernel.Unsupported) as e:
        kernel.run(module(name), spec(name), inputs(name, 0))
    assert e.value.instruction.startswith("ex2.approx") and e.value.line > 0


def test_every_corpus_kernel_is_run_or_declined():
    """Only the approximate-math kernels are declined; the lists do not overlap."""
    lists = [NO_TMA, TMA, APPROX, ELSEWHERE]
    assert sum(len(x) for x in lists) == len(set().union(*lists)) == len(MANIFEST)
    assert set().union(*lists) == set(MANIFEST)
    assert {n for n in MANIFEST if MANIFEST[n]["launch"].get("cluster", [1, 1, 1]) != [1, 1, 1]} == set(CLUSTER)


def test_checked_in_specs_are_the_manifest():
    """tests/data/kernels_hopper/specs/*.toml (tools/make_hopper_specs.py) say what the manifest says."""
    import sys
    from formal.kernel import load_spec
    sys.path.insert(0, str(CORPUS.parent.parent.parent / "tools"))
    import make_hopper_specs
    assert make_hopper_specs.main(["--check"]) == 0
    for name in ("tri_tma_f16_w4", "cute_tma_fp8", "tri_ptr_f16_w4"):
        a, b = load_spec(CORPUS / "specs" / f"{name}.toml"), spec(name)
        assert (a.buffers, a.tensormaps, a.params, a.grid, a.block, a.shared_bytes) == \
            (b.buffers, b.tensormaps, b.params, b.grid, b.block, b.shared_bytes)
    t = load_spec(CORPUS / "specs" / "cute_tma_fp8.toml").tensormaps[0]
    assert (t.type, t.dims, t.box, t.swizzle, t.param) == ("u8", (1024, 128), (128, 64), "128B", "cute_tma_fp8_param_0")
