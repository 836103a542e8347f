"""Property tests (hypothesis) for sparse metadata: round trips, rejection with a reason."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from formal.metadata import InvalidMetadata, NotSparse, check_word, compress, decompress, gather_terms, meta
from formal.metadata.proofs import metadata_classes
from formal.specdata import load_spec

REPS = [m[0] for m in metadata_classes().values()]
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _bits(fm) -> int:
    return int(load_spec("formats")[fm.form.atype]["bits"])


@st.composite
def sparse_case(draw):
    """(form, selector, A): a random A that fits the granularity, with some chunks under-filled."""
    f = draw(st.sampled_from(REPS))
    fm = meta(f)
    sel = draw(st.sampled_from(fm.selectors))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    w, bits = fm.gran.width, _bits(fm)
    A = np.zeros((fm.rows, fm.k), dtype=np.uint64)
    legal = fm.legal_nibbles
    density = draw(st.sampled_from([0.0, 0.3, 0.7, 1.0]))
    for r in range(fm.rows):
        for c in range(fm.chunks_per_row):
            nib = legal[rng.integers(len(legal))]
            for o in fm.offsets(nib):
                if rng.random() < density:
                    A[r, c * w + o] = rng.integers(0, 1 << bits)     # 0 allowed: stored zeros
    return f, sel, A


@SETTINGS
@given(sparse_case())
def test_compress_decompress_round_trip(case):
    f, sel, A = case
    a, e = compress(f, A, sel=sel)
    assert np.array_equal(decompress(f, a, e, sel=sel)[0], A)
    fm = meta(f)
    if f.sparsity == "sp" and fm.gran.stored > 1:
        a2, e2 = compress(f, A, sel=sel, order="descending")
        assert np.array_equal(decompress(f, a2, e2, sel=sel)[0], A)


@SETTINGS
@given(sparse_case(), st.integers(0, 2**31))
def test_gather_terms_place_every_value_at_its_column(case, seed):
    f, sel, A = case
    fm = meta(f)
    a, e = compress(f, A, sel=sel)
    vals, kidx = gather_terms(f, a, e, sel=sel)
    dense = np.zeros_like(A)
    rows = np.arange(fm.rows)[:, None]
    dense[rows, kidx[0]] = vals[0]
    assert np.array_equal(dense, A)
    # each row's K/2 terms hit K/2 distinct columns, chunk by chunk in hardware order
    assert all(len(set(kidx[0, r])) == fm.k // 2 for r in range(fm.rows))
    assert (np.diff(kidx[0] // fm.gran.width, axis=1) >= 0).all()


@SETTINGS
@given(sparse_case(), st.data())
def test_overfull_chunk_is_refused_with_its_location(case, data):
    f, sel, A = case
    fm = meta(f)
    w = fm.gran.width
    r = data.draw(st.integers(0, fm.rows - 1))
    c = data.draw(st.integers(0, fm.chunks_per_row - 1))
    A = A.copy()
    A[r, c * w:(c + 1) * w] = 1          # every column non-zero: never fits
    with pytest.raises(NotSparse) as ei:
        compress(f, A, sel=sel)
    wit = ei.value.witness
    # the first offending chunk in (row, chunk) order is this one: all others fit
    assert (wit.row, wit.chunk) == (r, c)
    assert wit.columns == list(range(c * w, (c + 1) * w))


@st.composite
def illegal_word(draw):
    f = draw(st.sampled_from(REPS))
    fm = meta(f)
    sel = draw(st.sampled_from(fm.selectors))
    legal = fm.legal_nibbles
    illegal = [v for v in range(16) if v not in legal]
    nibs = [draw(st.sampled_from(legal)) for _ in range(8)]
    bad_n = draw(st.lists(st.integers(0, 7), min_size=1, max_size=8, unique=True))
    for n in bad_n:
        nibs[n] = draw(st.sampled_from(illegal))
    word = sum(v << (4 * n) for n, v in enumerate(nibs))
    return f, sel, word, sorted(bad_n)


@SETTINGS
@given(illegal_word())
def test_illegal_words_rejected_with_a_reason(case):
    f, sel, word, bad_n = case
    fm = meta(f)
    lanes = sorted({int(x) for x in fm.e_table(sel)[:, 0]})
    res = check_word(fm, sel, word, lanes[-1])
    assert not res.valid
    assert [e["nibble"] for e in res.errors] == bad_n
    for err in res.errors:
        assert err["rules"] and all(r["id"] and r["section"] and r["message"] for r in err["rules"])
        assert err["bits"] == [4 * err["nibble"] + 3, 4 * err["nibble"]]
    # decompress refuses the same word with the same lane and bits
    a, e = compress(f, np.zeros((fm.rows, fm.k), dtype=np.uint64), sel=sel)
    e = e.copy()
    e[0, lanes[-1]] = word
    with pytest.raises(InvalidMetadata) as ei:
        decompress(f, a, e, sel=sel)
    w = ei.value.witness
    assert w.lane == lanes[-1] and w.nibble in bad_n and w.rules


# ----------------------------------------------------------------------------------
# compress -> register-level evaluation == dense evaluation (exact small integers)

def _sm90_reps():
    from formal.catalog import forms

    seen, out = set(), []
    for f in forms("sm_90", "8.7", "mma.sp"):
        k = meta(f).key
        if k not in seen:
            seen.add(k)
            out.append(f)
    return out


SM90 = _sm90_reps()


def _codes(t: str, v: np.ndarray) -> np.ndarray:
    from formal.metadata.witness import small_int_codes

    return small_int_codes(t, v.reshape(-1)).reshape(v.shape)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(SM90), st.integers(0, 2**32 - 1), st.data())
def test_compress_then_evaluate_equals_dense(f, seed, data):
    from formal import layout
    from formal.evaluate import evaluate
    from formal.numerics.formats import to_float64

    fm = meta(f)
    sel = data.draw(st.sampled_from(fm.selectors))
    rng = np.random.default_rng(seed)
    lo = -3 if f.atype in ("s8", "s4", "f16", "bf16", "tf32", "e4m3", "e5m2") else 0
    w = fm.gran.width
    Av = np.zeros((fm.rows, fm.k), dtype=np.int64)
    for r in range(fm.rows):
        for c in range(fm.chunks_per_row):
            nib = fm.legal_nibbles[rng.integers(len(fm.legal_nibbles))]
            for o in fm.offsets(nib):
                Av[r, c * w + o] = rng.integers(lo, 4)
    lob = -3 if f.btype in ("s8", "s4", "f16", "bf16", "tf32", "e4m3", "e5m2") else 0
    Bv = rng.integers(lob, 4, (fm.k, 8))
    a, e = compress(f, _codes(f.atype, Av), sel=sel)
    b = layout.pack(f, "b", _codes(f.btype, Bv)[None])
    c = np.zeros((1, 32, f.operands["c"].count), dtype=np.uint32)
    d = evaluate(f, a, b, c, e=e, sel=sel)
    D = layout.unpack(f, "d", d)[0]
    got = D.astype(np.uint32).view(np.int32) if f.dtype == "s32" else to_float64(D, f.dtype)
    assert np.array_equal(np.asarray(got, dtype=np.float64), (Av @ Bv).astype(np.float64))
