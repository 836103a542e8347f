"""Clusters and device-built tensor maps in `kernel run` (issue 21): the five corpus kernels that
were declined (2-CTA clusters with TMA multicast and remote mbarrier arrives; Triton's
``tl.make_tensor_descriptor``, built with ``tensormap.replace`` in global scratch) equal the H100's
outputs bit for bit, and their mutants give witnesses instead of a silent result.

The mutants edit the PTX as a compiler bug would (a wrong ``ctaMask``, a dropped
``barrier.cluster`` pair, a dropped tensormap acquire fence, a field never replaced); most run on
one cluster (a 2x1x1 grid) to stay fast: the witness is the same in every cluster.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from formal import kernel
from formal.kernel.machine import Machine
from hopper_corpus import CORPUS, compare, inputs, module, spec

CLUSTER = ["cute_tma_mcast_f16", "cute_tma_pipe_f16", "tri_tma_cta2_f16_w8"]
DEVICE_MAPS = ["tri_devtma_bf16_w8", "tri_devtma_f16_w4"]
QUICK = {("tri_devtma_f16_w4", 0)}      # under 1 s; the rest (1-4 s each) in the slow suite


def _cases():
    for n in CLUSTER + DEVICE_MAPS:
        for seed in (0, 1):
            yield (n, seed) if (n, seed) in QUICK else pytest.param(n, seed, marks=pytest.mark.slow)


@pytest.mark.parametrize("name,seed", list(_cases()))
def test_run_equals_h100(name, seed):
    out = kernel.run(module(name), spec(name), inputs(name, seed))
    assert not compare(name, seed, out), compare(name, seed, out)
    assert not out.witnesses, [str(w) for w in out.witnesses]


def _mutant(name: str, edits) -> kernel.Module:
    txt = (CORPUS / f"{name}.ptx").read_text()
    for old, new in edits:
        assert txt.count(old) == 1, old
        txt = txt.replace(old, new)
    return kernel.parse_module(txt, path=f"{name}.ptx")


def _one_cluster(name: str, k: int | None = None):
    """The launch cut to its first cluster (inputs as the H100 run had them), K cut to ``k``."""
    sp = spec(name)
    params = dict(sp.params)
    if k is not None:
        params[f"{name}_param_5"] = k
    return dataclasses.replace(sp, grid=(2, 1, 1), params=params)


_INIT_SYNC = ("\tbarrier.cluster.arrive.aligned;\n\n\t// end inline asm\n\t// begin inline asm\n"
              "\tbarrier.cluster.wait.aligned;\n\n\t// end inline asm\n\tsetp")
_EXIT_SYNC = ("\tbarrier.cluster.arrive.aligned;\n\n\t// end inline asm\n\t// begin inline asm\n"
              "\tbarrier.cluster.wait.aligned;\n\n\t// end inline asm\n\tret;")


def _kinds(out):
    return [(w.kind, w.line) for w in out.witnesses]


def test_multicast_to_one_cta_deadlocks_the_other():
    """ctaMask 0b01 instead of 0b11 for the first stage: CTA rank 1 never receives either half of B,
    its full barrier waits for 16384 transaction bytes forever."""
    n = "cute_tma_mcast_f16"
    out = kernel.run(_mutant(n, [("mov.u16 \t%rs1, 3;", "mov.u16 \t%rs1, 1;")]), _one_cluster(n), inputs(n, 0))
    dl = [w for w in out.witnesses if w.kind == "deadlock"]
    assert dl and dl[0].cta == (1, 0, 0) and dl[0].line == 350, _kinds(out)
    assert "16384 transaction bytes still pending" in dl[0].arrived
    assert any(line == 171 for line, _ in dl[0].path)          # the copies that did land on that barrier


@pytest.mark.slow
def test_multicast_to_a_rank_outside_the_cluster_is_out_of_bounds():
    n = "cute_tma_mcast_f16"
    out = kernel.run(_mutant(n, [("mov.u16 \t%rs2, 3;", "mov.u16 \t%rs2, 7;")]), _one_cluster(n), inputs(n, 0))
    oob = [w for w in out.witnesses if w.kind == "out-of-bounds"]
    assert oob and oob[0].line == 743 and "names CTA rank 2" in oob[0].arrived, _kinds(out)


def test_remote_operations_before_the_cluster_sync_race_with_the_init():
    """Without the barrier.cluster pair after mbarrier.init, each CTA's multicast completes bytes on
    the other's mbarrier with nothing ordering the other's init before it."""
    n = "cute_tma_mcast_f16"
    out = kernel.run(_mutant(n, [(_INIT_SYNC, "\tsetp")]), _one_cluster(n, k=64), inputs(n, 0))
    races = [w for w in out.witnesses if w.kind == "race"]
    assert races and {(w.line, w.cta) for w in races[:2]} == {(168, (0, 0, 0)), (168, (1, 0, 0))}, _kinds(out)
    assert "initialised at line 95" in races[0].arrived and races[0].path[0][0] == 95


def test_exit_without_the_cluster_sync_races_with_remote_arrives():
    """Without the final barrier.cluster pair a CTA may exit (its shared memory released) while the
    other still arrives on its empty barriers / multicasts into it."""
    n = "cute_tma_mcast_f16"
    out = kernel.run(_mutant(n, [(_EXIT_SYNC, "\tret;")]), _one_cluster(n, k=128), inputs(n, 0))
    races = [w for w in out.witnesses if w.kind == "race"]
    assert {w.cta for w in races} == {(0, 0, 0), (1, 0, 0)}, _kinds(out)
    assert all("may exit first" in w.arrived for w in races)
    # the unmutated kernel on the same cut launch: no witness (the check is not the cut's artefact)
    assert not kernel.run(module(n), _one_cluster(n, k=128), inputs(n, 0)).witnesses


def test_device_map_used_without_the_acquire_fence():
    n = "tri_devtma_f16_w4"
    m = _mutant(n, [("\t@%p2 fence.proxy.tensormap::generic.acquire.gpu [ %rd10 + 0 ], 0x80;\n", "")])
    out = kernel.run(m, spec(n), inputs(n, 0))
    pf = [w for w in out.witnesses if w.kind == "proxy-fence"]
    assert pf and pf[0].line == 359 and "not acquired" in pf[0].arrived, _kinds(out)
    assert pf[0].path[0][0] == 130                  # the cp_fenceproxy that wrote (and released) the map
    assert not compare(n, 0, out)                   # the values are the H100's: the hazard is the witness


def test_device_map_with_a_field_never_set_is_declined_naming_it():
    n = "tri_devtma_f16_w4"
    m = _mutant(n, [("\ttensormap.replace.tile.box_dim.shared::cta.b1024.b32 [ %rd7 + 0 ], 0x1, %r13;\n", "")])
    with pytest.raises(kernel.Unsupported) as e:
        kernel.run(m, spec(n), inputs(n, 0))
    assert e.value.line == 359 and "box_dim[1] was never set" in str(e.value)


def test_cluster_registers_and_mapa():
    """%cluster_ctarank / %clusterid / %cluster_ctaid over a 4x2 grid of 2x1 clusters, and mapa's
    address reaching the other CTA's mbarrier (computed independently of formal.kernel.cluster)."""
    n = "cute_tma_mcast_f16"
    m = Machine(module(n), spec(n), inputs(n, 0), ctas=[(3, 1, 0)])
    assert m.ctas == [(2, 1, 0), (3, 1, 0)]                  # a CTA runs with its whole cluster
    ins = m.instrs[0]
    ctx = np.array([c[0] for c in m.ctas])[m.slot]
    assert (m.special("%cluster_ctarank", ins) == ctx % 2).all()
    assert (m.special("%clusterid.x", ins) == ctx // 2).all()
    assert (m.special("%clusterid.y", ins) == 1).all() and (m.special("%nclusterid.x", ins) == 2).all()
    assert (m.special("%cluster_nctarank", ins) == 2).all()
    t = np.array([0, m.bsp])                                  # thread 0 of each CTA
    enc = m.cluster.encode(ins, np.array([0x18000, 0x18000]), np.array([1, 0]), t)
    slot, off, ok = m.cluster.target(ins, enc, t)
    assert ok.all() and list(slot) == [1, 0] and list(off) == [0x18000, 0x18000]
    own, off2, _ = m.cluster.target(ins, np.array([0x40, 0x40]), t)
    assert list(own) == [0, 1] and list(off2) == [0x40, 0x40]


def test_a_launch_that_is_not_whole_clusters_is_bad_input():
    n = "cute_tma_mcast_f16"
    with pytest.raises(kernel.SpecError, match="whole number of clusters"):
        kernel.run(module(n), dataclasses.replace(spec(n), grid=(3, 2, 1)))
    with pytest.raises(kernel.SpecError, match="reqnctapercluster"):
        kernel.run(module(n), dataclasses.replace(spec(n), cluster=(1, 1, 1)))


# ------------------------------------------------------------------ kernel check (the run's machine)

@pytest.mark.parametrize("name", [n if n == "tri_devtma_f16_w4" else pytest.param(n, marks=pytest.mark.slow)
                                  for n in CLUSTER + DEVICE_MAPS])
def test_check_proves(name):
    r = kernel.check(module(name), spec(name))
    assert r.verdict == "proved", (r.summary, [str(w) for w in r.witnesses[:2]])
    assert r.stats["outputs_complete"] == r.stats["outputs_checked"] > 0


@pytest.mark.slow
def test_check_refutes_both_ctas_of_a_cluster_taking_one_half():
    """Triton's num_ctas=2 kernel picks its half of N from %cluster_ctarank: with the rank masked out
    both CTAs load and store the same half, and the other half of C is never stored."""
    n = "tri_tma_cta2_f16_w8"
    r = kernel.check(_mutant(n, [("and.b32 \t%r33, %r32, 64;", "and.b32 \t%r33, %r32, 0;")]), spec(n))
    assert r.verdict == "refuted" and r.witnesses[0].kind == "missing-product"
    assert "C[0, 64] never stored" in r.witnesses[0].arrived
