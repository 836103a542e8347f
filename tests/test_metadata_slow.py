"""Exhaustive: every one of the 2^32 words of a lane, one form per granularity (pytest -m slow).

The counts must equal the solver's count and the combinatorics: 6^8 for ::ordered_metadata
2:4, 12^8 for plain .sp (2:4 and 4:8), 2^8 for tf32 1:2.
"""

from __future__ import annotations

import pytest

from formal.metadata import meta, scan
from formal.metadata.proofs import count_words

CASES = [
    ("mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32", 0, "word", 6 ** 8),
    ("mma.sp.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32", 1, "chunk", 12 ** 8),
    ("mma.sp.sync.aligned.m16n8k16.row.col.f32.tf32.tf32.f32", 1, "word", 2 ** 8),
    ("mma.sp.sync.aligned.m16n8k64.row.col.s32.u4.u4.s32", 0, "word", 12 ** 8),
    ("mma.sp::ordered_metadata.sync.aligned.m16n8k128.row.col.s32.s4.s4.s32", 0, "chunk", 6 ** 8),
]


@pytest.mark.slow
@pytest.mark.parametrize("op,sel,kind,expected", CASES)
def test_full_scan(op, sel, kind, expected):
    fm = meta(op)
    r = scan(fm, sel, kind=kind)
    assert r.words == 2 ** 32
    assert r.count == expected
    assert count_words(fm, sel).witness["count"] == expected


@pytest.mark.slow
def test_full_scan_non_contributing_lane():
    op = "mma.sp.sync.aligned.m16n8k16.row.col.f32.tf32.tf32.f32"
    r = scan(meta(op), 1, lane=0, kind="chunk")          # lane 0 is not read under sel=1
    assert r.count == 2 ** 32
