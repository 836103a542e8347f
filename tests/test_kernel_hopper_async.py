"""Asynchrony as state (formal/kernel/asynchrony.py): one-line mutants of corpus kernels break the
wgmma discipline, and `kernel run` names the hazard on the mutated line or on the path it gives,
while the outputs stay those of the unmutated kernel (the interpreter executes a wgmma when it is
issued; a hazard is judged by the state, not by a lucky schedule)."""

from __future__ import annotations

import pytest

from formal import kernel
from hopper_corpus import CORPUS, compare, inputs, spec


def _mutant(name: str, old: str, new: str) -> tuple[str, int]:
    text = (CORPUS / f"{name}.ptx").read_text()
    lines = text.splitlines()
    hit = [i for i, ln in enumerate(lines) if ln.strip() == old]
    assert hit, old
    lines[hit[0]] = "\t" + new
    return "\n".join(lines) + "\n", hit[0] + 1


def _line_of(name: str, needle: str, after: int = 0) -> int:
    lines = (CORPUS / f"{name}.ptx").read_text().splitlines()
    return next(i + 1 for i, ln in enumerate(lines) if i + 1 > after and needle in ln)


# (kernel, original line, replacement, witness kind, where: "mutated" (the witness's line or
# path holds the mutated line) or a needle of the line the witness is at)
CASES = {
    "no_wgmma_fence": ("tri_ptr_f16_w4", "wgmma.fence.sync.aligned;", "// wgmma.fence dropped", "wgmma-fence",
                       "wgmma.mma_async"),
    "no_final_wait": ("tri_ptr_f16_w4", "wgmma.wait_group.sync.aligned 0;", "// wait_group 0 dropped", "in-flight",
                      "st.shared.v4.b32"),
    "no_commit": ("tri_ptr_f16_w4", "wgmma.commit_group.sync.aligned;", "// commit dropped", "in-flight",
                  "cp.async.cg.shared.global"),        # no group: the wait covers nothing, the next stage overwrites
    "wait_too_shallow": ("tri_ptr_f16_w4", "wgmma.wait_group.sync.aligned 1;", "wgmma.wait_group.sync.aligned 2;",
                         "in-flight", "cp.async.cg.shared.global"),
    "no_proxy_fence": ("tri_ptr_f16_w4", "fence.proxy.async.shared::cta;", "// proxy fence dropped", "proxy-fence",
                       "wgmma.mma_async"),
    "cute_no_proxy_fence": ("cute_gmma_ss_f16", "fence.proxy.async.shared::cta;", "// dropped", "proxy-fence",
                            "wgmma.mma_async"),
    "cute_rs_no_wgmma_fence": ("cute_gmma_rs_f16", "wgmma.fence.sync.aligned;", "// dropped", "wgmma-fence",
                               "wgmma.mma_async"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_hazard_is_named(case):
    name, old, new, kind, where = CASES[case]
    text, line = _mutant(name, old, new)
    out = kernel.run(kernel.parse_module(text), spec(name), inputs(name, 0))
    assert not compare(name, 0, out)                         # the same values: the state judges
    ws = [w for w in out.witnesses if w.kind == kind]
    assert ws and {w.kind for w in out.witnesses} == {kind}, [(w.kind, w.line) for w in out.witnesses]
    w = ws[0]
    at = _line_of(name, where, 0)
    assert where in w.instruction, (w.line, w.instruction)
    assert w.line >= at
    if kind == "in-flight" and w.register:
        assert w.path[0][1].startswith("wgmma.mma_async")     # the wgmma whose register it is


def test_wait_too_shallow_names_the_wgmma_and_the_overwrite():
    text, line = _mutant(*CASES["wait_too_shallow"][:3])
    out = kernel.run(kernel.parse_module(text), spec("tri_ptr_f16_w4"), inputs("tri_ptr_f16_w4", 0))
    w = out.witnesses[0]
    assert "still in flight" in w.arrived and w.path[0][1].startswith("wgmma.mma_async")
    assert w.path[-1][0] == w.line


def test_the_unmutated_kernels_have_no_hazard():
    for name in ("tri_ptr_f16_w4", "cute_gmma_ss_f16", "cute_gmma_rs_f16"):
        out = kernel.run(kernel.parse_module((CORPUS / f"{name}.ptx").read_text()), spec(name), inputs(name, 0))
        assert not out.witnesses and not compare(name, 0, out)


# ---- TMA and mbarriers: (kernel, line, replacement, witness kind, a line the witness names)
TMA_CASES = {
    # the producer's arrive.expect_tx of stage 0 dropped: the phase never completes
    "dropped_arrive": ("tri_tma_f16_w4", 100, "// arrive.expect_tx dropped", "deadlock", 111),
    # expect_tx half the bytes: the phase completes with the first copy, the second copy's bytes
    # belong to the next phase: the consumer reads them before waiting for it
    "expect_tx_too_small": ("tri_tma_f16_w4", 100, "@%p4 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r5], 8192;",
                            "async-pending", 121),
    # the consumer does not wait: it reads the TMA destination before the copy's phase completes
    "no_wait": ("tri_tma_f16_w4", 248, "mov.pred complete, -1;", "async-pending", 121),
    # no proxy fence between the epilogue's st.shared and the TMA store that reads it
    "no_proxy_fence_before_tma_store": ("tri_tma_f16_w4", 426, "// fence.proxy.async dropped", "proxy-fence", 416),
    # warp-specialised: a consumer's release of a stage dropped: the producer waits forever
    "ws_dropped_release": ("tri_ws_f16_w4", 663, "// consumer arrive dropped", "deadlock", 227),
    # warp-specialised: expect_tx of 16 KiB for 24 KiB of copies: the full barrier never completes
    "ws_expect_tx_wrong": ("tri_ws_f16_w4", 251, "@%p50 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r149], 16384;",
                           "deadlock", 251),
}


def _line_mutant(name, line, new):
    lines = (CORPUS / f"{name}.ptx").read_text().splitlines()
    lines[line - 1] = "\t" + new
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("case", sorted(TMA_CASES))
def test_tma_hazard_is_named(case):
    name, line, new, kind, named = TMA_CASES[case]
    out = kernel.run(kernel.parse_module(_line_mutant(name, line, new)), spec(name), inputs(name, 0),
                     max_steps=20000)
    ws = [w for w in out.witnesses if w.kind == kind]
    assert ws, [(w.kind, w.line) for w in out.witnesses]
    w = ws[0]
    assert w.line == named or named in [p[0] for p in w.path], (w.line, w.path)
    if kind == "deadlock":
        assert "no thread can run" in w.arrived and compare(name, 0, out)      # the outputs are never written
