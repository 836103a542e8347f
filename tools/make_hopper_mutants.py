"""Mutants of the Hopper corpus (tests/data/kernels_hopper): each bug class of issue 21, on several
kernels, plus equivalence-preserving rewrites.

    python3 tools/make_hopper_mutants.py              # -> tests/data/kernels_hopper/mutants/*.ptx + manifest.json
    python3 tools/make_hopper_mutants.py --evaluate   # + proofs/evidence/kernel_mutants_hopper.json
    python3 tools/make_hopper_mutants.py --evaluate --only NAME...   # print, write nothing

A mutant is its corpus module with one line changed (two for a swap of adjacent lines; a removed
instruction becomes a comment, an added one replaces a comment line), so the line count is kept and
a witness can be matched to the mutated line.  ``manifest.json`` is in the corpus manifest's format
(so ``tools/run_hopper_kernels.py --corpus tests/data/kernels_hopper/mutants`` runs the mutants on
an H100; see tools/run_hopper_mutants.py) with a ``mutant`` record per entry: source kernel, class,
lines, original and mutated text, expected verdict, the real bug it stands for, and why.

--evaluate judges every mutant two ways: ``kernel check`` (refuted, with the mutated line as the
witness's line or on its path; proved for a rewrite) and ``kernel run`` on the H100 run's inputs
(seed 0) against the H100's recorded outputs of the unmutated kernel (outputs differ, or the run
names undefined behaviour / a deadlock; a rewrite: the same outputs and no witness).  And
``ptxas -arch=sm_90a`` must assemble each mutant.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "data" / "kernels_hopper"
OUT = CORPUS / "mutants"
EVIDENCE = ROOT / "proofs" / "evidence" / "kernel_mutants_hopper.json"

DROP = None        # an edit's ``new``: the line becomes a comment


@dataclass
class Edit:
    old: str                  # a substring of the line (the first line holding it, after ``after``)
    new: str | None           # replaces ``old`` in that line; DROP: the line becomes a comment;
    after: str = ""           # "" or a substring of a line before it (the first such line)
    whole: bool = False       # ``new`` replaces the whole line (its indentation kept)


@dataclass
class Mutant:
    kernel: str
    cls: str
    edits: list
    cite: str
    why: str
    expect: str = "refuted"                  # "proved" for an equivalence-preserving rewrite
    swap: bool = False                       # the two edited lines are exchanged (edits: 2 anchors, new unused)
    witness: tuple = field(default=())       # the witness kinds a refutation may give
    known: str = ""                          # a known miss: what is not reached (evidence and an xfail test)


# Bug classes (issue 21) and the real bugs they stand for.
CITE = {
    "inflight-register": "Triton #11781: ptxas reused the A registers of a register-A wgmma before the asynchronous "
                         "wgmma had read them ('expected 64, got 61'); 9.7.15.6: accessing the accumulator or A "
                         "registers of an in-flight wgmma is undefined",
    "missing-wgmma-fence": "9.7.15.5.4: wgmma.fence before the first wgmma.mma_async and between a register access and "
                           "the wgmma that reads it",
    "missing-commit": "NVIDIA/Fuser #3561: a missing wgmma.commit_group / wait_group before a write-after-read, not "
                      "flagged by compute-sanitizer",
    "wait-too-shallow": "NVIDIA/Fuser #3561: wgmma.wait_group N too shallow for the write-after-read that follows",
    "missing-proxy-fence": "9.7.13.4.1 / CUTLASS fence_view_async_shared: generic-proxy shared writes read by the async "
                           "proxy (wgmma operands, TMA store) need fence.proxy.async",
    "dropped-arrive": "TileLang #2603: a dropped mbarrier arrive hangs a warp-specialised kernel",
    "wrong-expect-tx": "mbarrier.expect_tx byte count not the bytes the TMA copies deliver (9.7.13.15.4): the phase "
                       "completes early (a read of bytes still in flight) or never (a hang)",
    "swizzle-mismatch": "Triton #6220, #8378: the wgmma descriptor's swizzle mode does not match the swizzle the "
                        "tile was written with (TMA tensor map or cp.async addressing)",
    "missing-subtile-offset": "Triton #6220 / #8378: the descriptor advance for the next k sub-tile omitted",
    "sbo-stride": "TileLang #2593: the stride between N column atoms (SBO) does not match the shared layout: "
                  "silently wrong output tile",
    "sbo-bytes": "LBO/SBO are encoded in 16-byte units (9.7.15.5.1.1); a stride written in bytes",
    "warpgroup-rows": "TileLang #2522: the second warpgroup's output rows (64-row sub-blocks across warpgroups)",
    "imm-trans": "LLVM #79271: the wgmma transpose immediates (imm-trans-a/b) emitted flipped",
    "equivalent": "an equivalence-preserving rewrite: must stay proved",
}

_K = {"inflight": ("in-flight",), "fence": ("wgmma-fence",), "proxy": ("proxy-fence",),
      "mbar": ("deadlock", "async-pending", "race"), "data": ("wrong-element", "wrong-address", "descriptor", "out-of-bounds", "async-pending",
                                                              "duplicate-product", "missing-product", "wrong-output",
                                                              "uninitialised", "race")}

# descriptor constants of the corpus (start address 0 ORed in):
#   4611686293305294848  = 0x4000004000000000: 128B swizzle, LBO 0, SBO 64 (1024 B)
#   -9223371899415822336 = 0x8000002000000000: 64B swizzle, LBO 0, SBO 32 (512 B)
#   4611686293305360384  = 0x4000004000010000: 128B swizzle, LBO 1, SBO 64 (CuTe)
SW128 = "4611686293305294848"
SW128_AS64 = str(0x8000004000000000 - (1 << 64))      # the same, 64B swizzle
SW128_SBO32 = str(0x4000002000000000)                # SBO 32 (512 B)
SW128_SBO_BYTES = str(0x4000040000000000)            # SBO 1024: bytes where 16-byte units are meant
SW128_LBO1 = str(0x4000004000010000)                 # LBO 1 (unused for swizzled K-major: errata)
CUTE = "4611686293305360384"
CUTE_AS64 = str(0x8000004000010000 - (1 << 64))
CUTE_SBO32 = str(0x4000002000010000)
CUTE_SBO_BYTES = str(0x4000040000010000)


def M(kernel, cls, edits, why, expect="refuted", swap=False, kinds="data"):
    return Mutant(kernel, cls, edits if isinstance(edits, list) else [edits], CITE[cls], why, expect, swap,
                  _K[kinds] if expect == "refuted" else ())


E = Edit
MUTANTS: dict[str, Mutant] = {
    # ---------------------------------------------------------------- register reuse while in flight
    "inflight_acc_tri_ptr": M("tri_ptr_f16_w4", "inflight-register", E("mov.b32 \t%r47, %r51;", "mov.b32 \t%r141, %r51;"),
        "an accumulator register of the in-flight wgmmas (%r141) is written after commit_group, before the wait_group "
        "that covers them (a register reused for the next stage's operand)", kinds="inflight"),
    "inflight_acc_tri_tma": M("tri_tma_f16_w4", "inflight-register", E("mov.b32 \t%r31, %r34;", "mov.b32 \t%r102, %r34;"),
        "accumulator %r102 of the four in-flight wgmmas zeroed after commit_group, before wait_group 1", kinds="inflight"),
    "inflight_a_gluon_regA": M("gl_regA_f16_w4", "inflight-register", E("mov.b32 \t%r72, %r74;", "mov.b32 \t%r40, %r74;"),
        "A register %r40 of the first register-A wgmma is overwritten after commit_group, before wait_group 0: the "
        "Triton #11781 pattern (ptxas reusing an in-flight A register)", kinds="inflight"),
    "inflight_a_cute_rs": M("cute_gmma_rs_f16", "inflight-register",
        E("// end inline asm", "ld.u32 \t%r80, [%rd9];", after="wgmma.mma_async", whole=True),
        "the A register %r80 of the first register-A wgmma is reloaded (with another fragment word) right after the "
        "wgmma is issued, before any wait_group: the Triton #11781 pattern", kinds="inflight"),
    # ---------------------------------------------------------------- missing wgmma.fence
    "nofence_tri_ptr": M("tri_ptr_f16_w4", "missing-wgmma-fence", E("wgmma.fence.sync.aligned;", DROP),
        "no wgmma.fence before the first wgmma (its accumulators were written by mov)", kinds="fence"),
    "nofence_tri_tma": M("tri_tma_f16_w4", "missing-wgmma-fence", E("wgmma.fence.sync.aligned;", DROP),
        "no wgmma.fence before the first wgmma", kinds="fence"),
    "nofence_cute_ws": M("cute_tma_ws_bf16", "missing-wgmma-fence", E("wgmma.fence.sync.aligned;", DROP),
        "the consumer warpgroup's first wgmma.fence dropped (warp-specialised CuTe kernel)", kinds="fence"),
    "fence_before_a_write_gluon": M("gl_regA_f16_w4", "missing-wgmma-fence",
        [E("mov.b32 %r70, %r71;", None), E("wgmma.fence.sync.aligned;", None)],
        "the wgmma.fence moved above the last A register write (mov %r70): the register-A wgmma reads %r70 written "
        "after the warp's last fence", swap=True, kinds="fence"),
    # ---------------------------------------------------------------- missing commit_group
    "nocommit_tri_ptr": M("tri_ptr_f16_w4", "missing-commit", E("wgmma.commit_group.sync.aligned;", DROP),
        "the pipelined loop's commit_group dropped: wait_group 1 covers no group, the next stage's cp.async "
        "overwrites shared tiles the wgmmas still read", kinds="inflight"),
    "nocommit_cute_ss": M("cute_gmma_ss_f16", "missing-commit", E("wgmma.commit_group.sync.aligned;", DROP),
        "commit_group dropped: wait_group 0 covers nothing, the epilogue reads accumulators still in flight",
        kinds="inflight"),
    "nocommit_gluon": M("gl_pipe_f16_w4", "missing-commit", E("wgmma.commit_group.sync.aligned;", DROP),
        "commit_group dropped in the Gluon pipeline: the wait covers no group", kinds="inflight"),
    # ---------------------------------------------------------------- wait_group too shallow
    "shallow_tri_ptr": M("tri_ptr_f16_w4", "wait-too-shallow",
        E("wgmma.wait_group.sync.aligned 1;", "wgmma.wait_group.sync.aligned 2;"),
        "wait_group 2 where 1 is needed: the cp.async of the stage two iterations ahead overwrites a tile an "
        "in-flight wgmma reads", kinds="inflight"),
    "shallow_final_cute_ss": M("cute_gmma_ss_f16", "wait-too-shallow",
        E("wgmma.wait_group.sync.aligned 0;", "wgmma.wait_group.sync.aligned 1;"),
        "the last wait_group 0 made 1: the epilogue reads the accumulators of the last group in flight",
        kinds="inflight"),
    "shallow_final_tri_tma": M("tri_tma_f16_w4", "wait-too-shallow",
        E("wgmma.wait_group.sync.aligned 0;", "wgmma.wait_group.sync.aligned 1;"),
        "the drain after the loop waits for all but one group: the epilogue reads in-flight accumulators",
        kinds="inflight"),
    # ---------------------------------------------------------------- missing fence.proxy.async
    "noproxy_tri_ptr": M("tri_ptr_f16_w4", "missing-proxy-fence", E("fence.proxy.async.shared::cta;", DROP),
        "cp.async (generic proxy) fills the tiles the wgmma reads through the async proxy: no proxy fence between",
        kinds="proxy"),
    "noproxy_cute_ss": M("cute_gmma_ss_f16", "missing-proxy-fence", E("fence.proxy.async.shared::cta;", DROP),
        "CuTe's fence_view_async_shared dropped: the tiles written by st.shared are read by the wgmma", kinds="proxy"),
    "noproxy_store_tri_tma": M("tri_tma_f16_w4", "missing-proxy-fence",
        E("fence.proxy.async.shared::cta;", DROP, after="stmatrix"),
        "the epilogue's stmatrix writes the C tile, the TMA store reads it through the async proxy: no fence",
        kinds="proxy"),
    "noproxy_store_gluon": M("gl_regA_f16_w4", "missing-proxy-fence",
        E("fence.proxy.async.shared::cta;", DROP, after="wgmma.wait_group"),
        "the Gluon epilogue's shared stores are read by the TMA store with no proxy fence", kinds="proxy"),
    # ---------------------------------------------------------------- dropped mbarrier arrive
    "noarrive_tri_tma": M("tri_tma_f16_w4", "dropped-arrive",
        E("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r5], 16384;", DROP),
        "the producer's arrive.expect_tx of stage 0 dropped: the barrier's phase never completes, the consumers wait "
        "forever", kinds="mbar"),
    "noarrive_tri_ws": M("tri_ws_f16_w4", "dropped-arrive", E("mbarrier.arrive", DROP, after="wgmma.wait_group"),
        "a consumer's release arrive of a stage dropped: the producer waits on the empty barrier forever "
        "(TileLang #2603's hang)", kinds="mbar"),
    "noarrive_gluon": M("gl_regA_f16_w4", "dropped-arrive",
        E("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r38], 16384;", DROP),
        "the arrive.expect_tx before the TMA loads dropped: the wait never completes", kinds="mbar"),
    "noarrive_cute_ws": M("cute_tma_ws_bf16", "dropped-arrive", E("mbarrier.arrive", DROP, after="wgmma.wait_group"),
        "the consumer's release of a pipeline stage dropped in the warp-specialised CuTe kernel", kinds="mbar"),
    # ---------------------------------------------------------------- wrong expect_tx bytes
    "expect_small_tri_tma": M("tri_tma_f16_w4", "wrong-expect-tx", E("[%r5], 16384;", "[%r5], 8192;"),
        "expect_tx 8 KiB for 16 KiB of copies: the phase completes with the first copy; the wgmma reads the second "
        "tile's bytes still in flight", kinds="mbar"),
    "expect_big_tri_tma": M("tri_tma_f16_w4", "wrong-expect-tx", E("[%r5], 16384;", "[%r5], 24576;"),
        "expect_tx 24 KiB for 16 KiB of copies: the phase never completes", kinds="mbar"),
    "expect_small_gluon": M("gl_regA_f16_w4", "wrong-expect-tx", E("[%r38], 16384;", "[%r38], 8192;"),
        "expect_tx half the bytes the two TMA loads deliver", kinds="mbar"),
    "expect_wrong_tri_ws": M("tri_ws_f16_w4", "wrong-expect-tx", E("[%r149], 24576;", "[%r149], 16384;"),
        "the producer expects 16 KiB for 24 KiB of copies (warp-specialised Triton)", kinds="mbar"),
    # ---------------------------------------------------------------- descriptor swizzle vs the writer's swizzle
    "swizzle_tri_ptr": M("tri_ptr_f16_w4", "swizzle-mismatch",
        E("-9223371899415822336;", SW128 + ";"),
        "A was written by cp.async with the 64B swizzle; its descriptor says 128B"),
    "swizzle_tri_tma": M("tri_tma_f16_w4", "swizzle-mismatch", E(SW128 + ";", SW128_AS64 + ";"),
        "the TMA tensor map swizzles 128B; the first wgmma's A descriptor says 64B"),
    "swizzle_cute_ss": M("cute_gmma_ss_f16", "swizzle-mismatch", E(CUTE + ";", CUTE_AS64 + ";"),
        "CuTe's Swizzle<3,4,3> (128B) tile described to the wgmma as 64B"),
    "swizzle_gluon": M("gl_pipe_f16_w4", "swizzle-mismatch", E(SW128 + ";", SW128_AS64 + ";"),
        "Gluon's NVMMA 128B-swizzled tile (TMA) described as 64B"),
    # ---------------------------------------------------------------- missing k sub-tile offset
    "subtile_tri_ptr": M("tri_ptr_f16_w4", "missing-subtile-offset", E("add.s32 \t%r63, %r61, 2;", "add.s32 \t%r63, %r61, 0;"),
        "the second wgmma's A descriptor is not advanced by the 32-byte k sub-tile: A's k 0..15 multiply B's k 16..31"),
    "subtile_tri_tma": M("tri_tma_f16_w4", "missing-subtile-offset", E("add.s32 \t%r48, %r46, 128;", "add.s32 \t%r48, %r46, 0;"),
        "the second wgmma's B descriptor misses its k sub-tile offset (128 x 16 bytes: 16 k rows of MN-major B)"),
    "subtile_cute_rs": M("cute_gmma_rs_f16", "missing-subtile-offset", E("add.s32 \t%r128, %r126, 2;", "add.s32 \t%r128, %r126, 0;"),
        "the register-A kernel's second B descriptor is not advanced to k 16..31"),
    "subtile_gluon": M("gl_pipe_f16_w4", "missing-subtile-offset", E(", 2;", ", 0;", after="wgmma.mma_async"),
        "Gluon's descriptor advance for the second k sub-tile dropped"),
    # ---------------------------------------------------------------- SBO not the layout's stride
    "sbo_tri_ws": M("tri_ws_f16_w4", "sbo-stride", E("%rd33, %rd40, " + SW128 + ";", "%rd33, %rd40, " + SW128_SBO32 + ";"),
        "B (K-major, N = 128) of the consumer loop's last wgmma read with SBO 512 B where its 8-row groups "
        "along N are 1024 B apart"),
    "sbo_last_tri_tma_kmaj": M("tri_tma_f16_kmaj_w8", "sbo-stride", E("%rd11, %rd19, " + SW128 + ";", "%rd11, %rd19, " + SW128_SBO32 + ";"),
        "B (K-major, N = 128) of the last wgmma of the k step read with SBO 512 B for its 1024 B 8-row groups"),
    "sbo_tri_tma_kmaj": M("tri_tma_f16_kmaj_w8", "sbo-stride", E("%rd5, %rd17, " + SW128 + ";", "%rd5, %rd17, " + SW128_SBO32 + ";"),
        "B (K-major, N = 128) of the first wgmma of the k step read with SBO 512 B for its 1024 B 8-row groups"),
    "sbo_cute_tma_fp8": M("cute_tma_fp8", "sbo-stride", E(CUTE + ";", CUTE_SBO32 + ";"),
        "the fp8 CuTe kernel's descriptor with SBO 512 B for a 1024 B 8-row group stride"),
    # ---------------------------------------------------------------- LBO/SBO in bytes
    "sbo_bytes_tri_ptr": M("tri_ptr_f16_w4", "sbo-bytes", E("-9223371899415822336;", str(0x8000020000000000 - (1 << 64)) + ";"),
        "A's SBO written as 512 (bytes) instead of 32 (16-byte units)"),
    "sbo_bytes_tri_tma": M("tri_tma_f16_w4", "sbo-bytes", E(SW128 + ";", SW128_SBO_BYTES + ";"),
        "SBO 1024 (bytes) where the field holds 64 (16-byte units)"),
    "sbo_bytes_cute_rs": M("cute_gmma_rs_f16", "sbo-bytes", E(CUTE + ";", CUTE_SBO_BYTES + ";"),
        "the B descriptor's SBO in bytes"),
    # ---------------------------------------------------------------- warpgroup row blocks swapped
    "wg_rows_tri_ptr_w8": M("tri_ptr_f16_w8", "warpgroup-rows",
        E("shl.b32 \t%r83, %r82, 7;", "mad.lo.s32 \t%r83, %r82, 128, 512;"),
        "the A descriptor's warpgroup offset ((warp << 7) & 512: rows 64..127 for warpgroup 1) computed from warp + 4: "
        "warpgroup 0 multiplies rows 64..127 and warpgroup 1 rows 0..63, each storing them as its own rows"),
    "wg_rows_tri_tma_kmaj_w8": M("tri_tma_f16_kmaj_w8", "warpgroup-rows",
        E("shl.b32 \t%r49, %r48, 7;", "mad.lo.s32 \t%r49, %r48, 128, 512;"),
        "the TMA kernel's warpgroup offset of A computed from warp + 4: the two warpgroups' 64-row blocks swapped"),
    "wg_rows_gluon_w8": M("gl_pipe_f16_kmaj_w8", "warpgroup-rows",
        E("shl.b32 \t%r53, %r52, 7;", "mad.lo.s32 \t%r53, %r52, 128, 512;"),
        "Gluon's warpgroup offset of A computed from warp + 4: the two warpgroups' 64-row blocks swapped"),
    # ---------------------------------------------------------------- imm-trans flipped
    "trans_b_tri_ptr": M("tri_ptr_f16_w4", "imm-trans", E("%rd21, %rd22, %p4, 1, 1, 0, 1;", "%rd21, %rd22, %p4, 1, 1, 0, 0;"),
        "B is MN-major in shared memory (imm-trans-b 1); the first wgmma reads it as K-major"),
    "trans_a_tri_at": M("tri_ptr_f16_at_w4", "imm-trans", E("%rd16, %rd17, %p4, 1, 1, 1, 1;", "%rd16, %rd17, %p4, 1, 1, 0, 1;"),
        "A^T is stored M-major (imm-trans-a 1); the first wgmma reads it as K-major"),
    "trans_b_tri_tma": M("tri_tma_f16_w4", "imm-trans", E("%rd4, %rd5, %p27, 1, 1, 0, 1;", "%rd4, %rd5, %p27, 1, 1, 0, 0;"),
        "the TMA-loaded B tile is N-major; imm-trans-b flipped on the first wgmma"),
    "trans_b_cute_mn": M("cute_gmma_ss_f16_mn", "imm-trans", E("1, 1, 1, 1;", "1, 1, 1, 0;", after="wgmma.mma_async"),
        "CuTe's MN-major B read K-major (imm-trans-b flipped)"),
    # ================================================================ equivalence-preserving rewrites
    "eq_extra_fence_tri_ptr": M("tri_ptr_f16_w4", "equivalent",
        E("// begin inline asm", "wgmma.fence.sync.aligned;", after="wgmma.fence.sync.aligned", whole=True),
        "a second wgmma.fence right before the first wgmma (in place of a comment line)", expect="proved"),
    "eq_wait0_tri_ptr": M("tri_ptr_f16_w4", "equivalent",
        E("wgmma.wait_group.sync.aligned 1;", "wgmma.wait_group.sync.aligned 0;"),
        "wait_group 0 where 1 suffices: waits for more, never less", expect="proved"),
    "eq_wait0_tri_tma": M("tri_tma_f16_w4", "equivalent",
        E("wgmma.wait_group.sync.aligned 1;", "wgmma.wait_group.sync.aligned 0;"),
        "wait_group 0 where 1 suffices", expect="proved"),
    "eq_add_for_or_tri_ptr": M("tri_ptr_f16_w4", "equivalent",
        E("or.b64 \t%rd21, %rd29, -9223371899415822336;", "add.s64 \t%rd21, %rd29, -9223371899415822336;"),
        "the descriptor's constant fields added instead of ORed: the start address (< 2^14) and the constant's bits "
        "do not overlap, so the sum is the OR", expect="proved"),
    "eq_add_for_or_cute_rs": M("cute_gmma_rs_f16", "equivalent",
        E("or.b64  \t%rd91, %rd160, " + CUTE + ";", "add.s64 \t%rd91, %rd160, " + CUTE + ";"),
        "add instead of or for the descriptor's constant fields (disjoint bits)", expect="proved"),
    "eq_swap_cvt_tri_ptr": M("tri_ptr_f16_w4", "equivalent",
        [E("cvt.u64.u32 \t%rd29, %r61;", None), E("cvt.u64.u32 \t%rd30, %r62;", None)],
        "two independent conversions of the descriptor addresses exchanged", expect="proved", swap=True),
    "eq_swap_fences_tri_tma": M("tri_tma_f16_w4", "equivalent",
        [E("bar.sync \t0;", None, after="add.s32 \t%r44, %r43, 24576;"), E("bfe.u32 \t%r45, %r43, 4, 15;", None)],
        "the barrier and an independent address computation exchanged", expect="proved", swap=True),
    "eq_extra_commit_tri_tma": M("tri_tma_f16_w4", "equivalent",
        E("// end inline asm", "wgmma.commit_group.sync.aligned;", after="wgmma.commit_group.sync.aligned", whole=True),
        "an extra (empty) commit_group right after the real one: wait_group 1 then waits for the real group too",
        expect="proved"),
    "eq_extra_proxy_fence_cute_ss": M("cute_gmma_ss_f16", "equivalent",
        E("// end inline asm", "fence.proxy.async.shared::cta;", after="fence.proxy.async.shared::cta", whole=True),
        "a second proxy fence", expect="proved"),
    "eq_lbo_swizzled_kmajor_tri_tma_kmaj": M("tri_tma_f16_kmaj_w8", "equivalent",
        E(SW128 + ";", SW128_LBO1 + ";"),
        "LBO 1 in a 128B-swizzled K-major descriptor: LBO is unused there (errata, settled on the H100)",
        expect="proved"),
}


# Renames: registers permuted throughout the kernel (an edit of many lines: kept apart).
RENAMES = {
    "eq_rename_tri_ptr": ("tri_ptr_f16_w4", {"%rd21": "%rd22", "%rd22": "%rd21", "%r141": "%r172", "%r172": "%r141"},
                          "the first wgmma's A and B descriptor registers exchanged (%rd21 <-> %rd22) and two "
                          "accumulator registers exchanged (%r141 <-> %r172) throughout the kernel"),
    "eq_rename_cute_rs": ("cute_gmma_rs_f16", {"%r80": "%r81", "%r81": "%r80"},
                          "a register-A operand register renamed (%r80 <-> %r81) throughout the kernel"),
}


def entry_span(lines: list[str]) -> tuple[int, int]:
    start = next(i for i, l in enumerate(lines) if re.search(r"\.entry\s+\w+", l))
    return start, len(lines)


def _find(lines, s, e, ed: Edit) -> int:
    if ed.after:
        s = next(i for i in range(s, e) if ed.after in lines[i]) + 1
    hit = next((i for i in range(s, e) if ed.old in lines[i]), None)
    if hit is None:
        raise SystemExit(f"make_hopper_mutants: {ed.old!r} not found (after {ed.after!r})")
    return hit


def mutate(name: str, mu: Mutant) -> tuple[str, list[int], list[str], list[str]]:
    text = (CORPUS / f"{mu.kernel}.ptx").read_text()
    lines = text.split("\n")
    s, e = entry_span(lines)
    at = [_find(lines, s, e, ed) for ed in mu.edits]
    orig = [lines[i] for i in at]
    if mu.swap:
        i, j = at
        lines[i], lines[j] = lines[j], lines[i]
    else:
        for i, ed in zip(at, mu.edits):
            ind = re.match(r"\s*", lines[i]).group(0)
            if ed.new is DROP:
                lines[i] = f"{ind}// {lines[i].strip()}  (dropped by the mutant)"
            elif ed.whole:
                lines[i] = ind + ed.new
            else:
                lines[i] = lines[i].replace(ed.old, ed.new, 1)
    return "\n".join(lines), [i + 1 for i in at], [x.strip() for x in orig], [lines[i].strip() for i in at]


def rename(kernel: str, perm: dict) -> tuple[str, list[int], list[str], list[str]]:
    text = (CORPUS / f"{kernel}.ptx").read_text()
    lines = text.split("\n")
    pat = re.compile("(" + "|".join(re.escape(k) for k in perm) + r")\b")
    at = [i for i, l in enumerate(lines) if pat.search(l)]
    orig = [lines[i].strip() for i in at]
    for i in at:
        lines[i] = pat.sub(lambda m: perm[m.group(1)], lines[i])
    return "\n".join(lines), [i + 1 for i in at], orig, [lines[i].strip() for i in at]


def build() -> dict:
    corpus = json.loads((CORPUS / "manifest.json").read_text())
    OUT.mkdir(parents=True, exist_ok=True)
    man = {}
    items = [(n, mu.kernel, mu.cls, mu.cite, mu.why, mu.expect, list(mu.witness), mutate(n, mu)) for n, mu in MUTANTS.items()]
    items += [(n, k, "equivalent", CITE["equivalent"], why, "proved", [], rename(k, perm))
              for n, (k, perm, why) in RENAMES.items()]
    for name, kernel, cls, cite, why, expect, kinds, (text, at, orig, new) in items:
        (OUT / f"{name}.ptx").write_text(text)
        meta = dict(corpus[kernel])
        meta.update(ptx=f"{name}.ptx", bytes=len(text.encode()), sha256=hashlib.sha256(text.encode()).hexdigest())
        meta["mutant"] = {"kernel": kernel, "class": cls, "expect": expect, "lines": at, "original": orig,
                          "mutated": new, "witness_kinds": kinds, "cite": cite, "why": why}
        if name in MUTANTS and MUTANTS[name].known:
            meta["mutant"]["known_miss"] = MUTANTS[name].known
        man[name] = meta
    (OUT / "manifest.json").write_text(json.dumps(man, indent=1) + "\n")
    return man


# ---------------------------------------------------------------------------- evaluation
def evaluate(man: dict, only=None) -> dict:
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "tests"))
    import hopper_corpus as H
    from formal import kernel
    from formal.catalog import ptxas as P
    px = P.find("13.0") or P.find()          # the project's ptxas: CUDA 13.0
    recs = []
    for name, meta in man.items():
        if only and name not in only:
            continue
        mu = meta["mutant"]
        text = (OUT / meta["ptx"]).read_text()
        rec = {"name": name, "kernel": mu["kernel"], "class": mu["class"], "expect": mu["expect"],
               "lines": mu["lines"], "original": mu["original"], "mutated": mu["mutated"], "sha256": meta["sha256"]}
        if px is not None:
            rc, out = P._run_module(px.path, text, "sm_90a")
            rec["ptxas"] = rc == 0
            if rc:
                rec["ptxas_error"] = out.strip()[-300:]
        t = time.time()
        mod = kernel.parse_module(text, path=meta["ptx"])
        sp = H.spec(mu["kernel"])
        try:
            r = kernel.check(mod, sp)
            rec["verdict"] = r.verdict
            ws = r.witnesses
        except kernel.Unsupported as e:
            rec["verdict"], ws = "unsupported", []
            rec["error"] = str(e)[:300]
        rec["check_s"] = round(time.time() - t, 2)
        rec["witnesses"] = [{"kind": w.kind, "line": w.line, "path_lines": [p[0] for p in w.path],
                             "instruction": w.instruction[:120], "arrived": w.arrived[:300]} for w in ws[:3]]
        rec["witness_count"] = len(ws)
        rel, hit = relation(mu, ws)
        rec["relation"] = rel
        rec["mutated_line_on_witness"] = bool(hit)
        rec["witness_kind"] = (hit or ws or [None])[0].kind if ws else None
        t = time.time()
        try:
            out = kernel.run(mod, sp, H.inputs(mu["kernel"], 0), max_steps=200000)
            diff = H.compare(mu["kernel"], 0, out)
            rec["run"] = {"outputs_differ": diff, "witness_kinds": sorted({w.kind for w in out.witnesses}),
                          "witness_lines": sorted({w.line for w in out.witnesses})[:8]}
        except kernel.Unsupported as e:
            rec["run"] = {"error": str(e)[:300]}
        rec["run_s"] = round(time.time() - t, 2)
        run = rec["run"]
        changes = bool(run.get("outputs_differ") or run.get("witness_kinds"))
        rec["run_changes"] = changes
        if mu["expect"] == "refuted":
            ok = rec["verdict"] == "refuted" and rec["mutated_line_on_witness"] and changes
            rec["judgement"] = "caught" if ok else ("missed" if rec["verdict"] == "proved" else "not-confirmed")
        else:
            ok = rec["verdict"] == "proved" and not changes
            rec["judgement"] = "equivalent-proved" if ok else "false-alarm"
        rec["ok"] = ok and rec.get("ptxas", True)
        if mu.get("known_miss"):
            rec["known_miss"] = mu["known_miss"]
        recs.append(rec)
        print(f"{name:40s} {rec['verdict']:9s} {str(rec['witness_kind']):16s} {rec['relation']:18s} "
              f"run={'changes' if changes else 'same'} {run.get('witness_kinds', run.get('error', ''))} "
              f"ptxas={rec.get('ptxas')} {rec['judgement']} ({rec['check_s']}+{rec['run_s']} s)", flush=True)
    return {"recs": recs, "ptxas": None if px is None else f"{px.version} ({px.origin}: {px.path})"}


def relation(mu: dict, ws: list) -> tuple[str, list]:
    """How the witnesses point at the mutation.  "on-path": a mutated line is a witness's line or on its
    path.  A removed instruction is on no path; then "spans-removed-line": a witness of the class's kind
    has two consecutive path steps on either side of the removed line (the place the fence / commit /
    arrive belongs), or "names-barrier": a deadlock witness naming the mbarrier whose arrivals are still
    pending (the one the dropped arrive was for)."""
    lines = set(mu["lines"])
    hit = [w for w in ws if lines & ({w.line} | {p[0] for p in w.path})]
    if hit:
        return "on-path", hit
    removed = [ln for ln, t in zip(mu["lines"], mu["mutated"]) if t.startswith("//")]
    kinds = set(mu["witness_kinds"])
    for L in removed:
        span = [w for w in ws if w.kind in kinds
                and any(min(a, b) < L < max(a, b) for a, b in zip([p[0] for p in w.path], [p[0] for p in w.path][1:]))]
        if span:
            return "spans-removed-line", span
        if "mbarrier.arrive" in mu["original"][0]:
            bar = [w for w in ws if w.kind == "deadlock" and re.search(r"[1-9]\d* of \d+ arrivals", w.arrived)]
            if bar:
                return "names-barrier", bar
    return "none", []


def summary(recs: list) -> dict:
    out = {}
    for r in recs:
        c = out.setdefault(r["class"], {"total": 0, "kernels": set(), "caught": 0, "equivalent_proved": 0,
                                        "missed": 0, "not_confirmed": 0, "false_alarms": 0, "ptxas_ok": 0})
        c["total"] += 1
        c["kernels"].add(r["kernel"])
        c["ptxas_ok"] += bool(r.get("ptxas"))
        j = r["judgement"].replace("-", "_")
        c[{"caught": "caught", "equivalent_proved": "equivalent_proved", "missed": "missed",
           "not_confirmed": "not_confirmed", "false_alarm": "false_alarms"}[j]] += 1
    for c in out.values():
        c["kernels"] = sorted(c["kernels"])
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--evaluate", action="store_true")
    ap.add_argument("--only", nargs="+")
    args = ap.parse_args(argv)
    man = build()
    print(f"{len(man)} mutants -> {OUT.relative_to(ROOT)}")
    if not args.evaluate:
        return 0
    t = time.time()
    ev = evaluate(man, args.only)
    if args.only:
        return 0
    recs = ev["recs"]
    doc = {"about": "tools/make_hopper_mutants.py --evaluate: mutants of the Hopper corpus per bug class of issue 21, "
                    "judged by kernel check (refuted with the mutated line as the witness's line or on its path; "
                    "rewrites proved) and independently by kernel run on the H100 run's inputs (seed 0) against the "
                    "H100's recorded outputs of the unmutated kernel (outputs differ, or the run names undefined "
                    "behaviour / a deadlock); each assembled by ptxas -arch=sm_90a",
           "ptxas": ev["ptxas"], "seconds": round(time.time() - t, 1), "summary": summary(recs),
           "totals": {"total": len(recs), "ok": sum(r["ok"] for r in recs),
                      "caught": sum(r["judgement"] == "caught" for r in recs),
                      "equivalent_proved": sum(r["judgement"] == "equivalent-proved" for r in recs),
                      "missed": sum(r["judgement"] == "missed" for r in recs),
                      "not_confirmed": sum(r["judgement"] == "not-confirmed" for r in recs),
                      "false_alarms": sum(r["judgement"] == "false-alarm" for r in recs),
                      "ptxas_assembled": sum(bool(r.get("ptxas")) for r in recs),
                      "known_misses": [r["name"] for r in recs if r.get("known_miss")]},
           "mutants": recs}
    EVIDENCE.write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps(doc["totals"]))
    return 0 if all(r["ok"] or r.get("known_miss") for r in recs) else 1


if __name__ == "__main__":
    sys.exit(main())
