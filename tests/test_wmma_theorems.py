"""Theorems over every fragment map the rules allow (formal.wmma.theorems).

Every refutation's witness is re-checked here by recomputing the fragment semantics in
plain Python from the witness maps -- the solver's word is not taken for it.
"""

from __future__ import annotations

import numpy as np
import pytest

from formal.wmma import theorems as T

# the run_all fixture below holds maps.properties(): one xdist worker with test_wmma_maps computes it once
pytestmark = pytest.mark.xdist_group("wmma_map_properties")


def test_general_pipeline_is_proved(quick):
    (r,) = [r for r in quick if r.obligation == "wmma.theorem.pipeline[general]"]      # T.pipeline_general()
    assert r.proved, r.note
    assert r.smt2 and r.smt2.count("(check-sat)") == 4          # three lemmas and the composition


def test_den_load_identity_lemma():
    assert T.den_load_identity("X").proved


@pytest.fixture(scope="module")
def quick():
    """T.run_all(): every quick obligation, decided once for the tests of this module (it holds
    maps.properties(), hence the xdist group shared with test_wmma_maps)."""
    return T.run_all()


def test_small_pipeline_with_symbolic_maps_is_proved(quick):
    """T.pipeline_small() with its defaults (the obligation run_all decides)."""
    (r,) = [r for r in quick if r.obligation == "wmma.theorem.pipeline[m2n2k2]"]
    assert r.proved and "every fragment map symbolic" in r.statement, r.line()


def test_pipeline_needs_coverage():
    r = T.pipeline_small(covers=False, width=4)
    assert r.status == "refuted"
    w = r.witness
    assert w["A_cells_uncovered"], w                           # the map misses a cell of A ...
    A, B, C = (np.array(w[k]).reshape(2, 2) for k in ("A", "B", "C"))
    assert w["expected_D"] == ((A @ B + C) % 16).reshape(-1).tolist()
    assert w["stored_D"] != w["expected_D"]                    # ... and D comes out wrong


def test_elementwise_general_is_proved():
    assert T.elementwise_general().proved
    assert T.store_load_roundtrip_general().proved


def _den(mapping, frag, cells):
    """Matrix a fragment denotes under a bijective map (slot s holds cell mapping[s])."""
    out = [None] * cells
    for s, c in enumerate(mapping):
        out[c] = frag[s]
    return out


def test_elementwise_counterexamples_are_real():
    rs = {r.obligation: r for r in T.elementwise_counterexamples()}
    r = rs["wmma.theorem.elementwise_needs_non_uniform"]
    assert r.status == "refuted"
    w = r.witness
    X = w["X"]
    for key, mp in (("result_with_map1", w["map1"]), ("result_with_map2", w["map2"])):
        frag = [(X[c] + (1 if s // 2 == 0 else 0)) % 256 for s, c in enumerate(mp)]      # x + 1 in lane 0
        assert _den(mp, frag, 4) == w[key]
    assert w["result_with_map1"] != w["result_with_map2"]
    r = rs["wmma.theorem.elementwise_needs_reordered"]
    assert r.status == "refuted"
    w = r.witness
    X = w["X"]
    for key, mp in (("result_with_map1", w["map1"]), ("result_with_map2", w["map2"])):
        loaded = [X[c] for c in mp]
        frag = [loaded[(s // 2) * 2 + (1 - s % 2)] for s in range(4)]                     # swap within a lane
        assert _den(mp, frag, 4) == w[key]
    assert w["result_with_map1"] != w["result_with_map2"]
    r = rs["wmma.theorem.elementwise_needs_uniform[duplicated]"]
    assert r.status == "refuted"
    w = r.witness
    frag = [(w["X"][c] + (1 if s // 4 == 0 else 0)) % 256 for s, c in enumerate(w["map"])]
    for holders, key in ((w["holder_read_1"], "result_1"), (w["holder_read_2"], "result_2")):
        assert all(w["map"][h] == c for c, h in enumerate(holders))                       # holders hold their cell
        assert [frag[h] for h in holders] == w[key]
    assert w["result_1"] != w["result_2"]


def test_accumulator_reinterpretation_counterexample_is_real():
    rs = {r.obligation: r for r in T.accumulator_reinterpretation()}
    for src, dst in (("f16", "f32"), ("f32", "f16")):
        r = rs[f"wmma.theorem.accumulator_reinterpretation[{src}->{dst}]"]
        assert r.status == "refuted"
        w = r.witness
        ms, md = w[f"{src}_map"], w[f"{dst}_map"]
        assert sorted(ms) == sorted(md) == [0, 1, 2, 3]                     # both rule-consistent bijections
        frag = [w["X"][c] for c in ms]                                      # load .src, convert in place
        assert _den(md, frag, 4) == w["converted_matrix"] != w["X"]
    assert rs["wmma.theorem.accumulator_reinterpretation[equal maps]"].proved


def test_accumulator_reinterpretation_on_published_sm70_maps():
    r = T.accumulator_reinterpretation_observed()
    assert r.status == "refuted" and r.cross_check["agrees"]
    assert r.witness["f16_cell"] == [0, 2] and r.witness["f32_cell"] == [2, 0] and r.witness["moved_elements"] == 128


def test_subbyte_order_is_unobservable():
    rs = T.subbyte_order_invariance()
    assert {r.obligation.split("[")[1].rstrip("]") for r in rs} == {"s4", "u4", "b1.xor", "b1.and"}
    for r in rs:
        assert r.proved and r.cross_check["agrees"], r.line()


def test_subbyte_permutation_from_the_spec():
    # nibble j under the MSB-first reading is LE nibble j ^ 1; bit j is LE bit (j & ~7) + 7 - (j & 7)
    assert T._subbyte_perm(8, 4) == [1, 0, 3, 2, 5, 4, 7, 6]
    assert T._subbyte_perm(16, 1) == [7, 6, 5, 4, 3, 2, 1, 0, 15, 14, 13, 12, 11, 10, 9, 8]


def test_obligations_are_named_uniquely_and_expected_refutations_exist(quick):
    obs = T.obligations(per_form=True)
    names = [o.name for o in obs]
    assert len(names) == len(set(names))
    assert sum(o.slow for o in obs) == 114
    got = {r.obligation for r in quick}
    for n in T.EXPECTED_REFUTED:
        assert n in got, n
        assert all(r.status == "refuted" for r in quick if r.obligation == n)
    theorem_results = [r for r in quick if r.obligation.startswith("wmma.theorem") and r.obligation not in T.EXPECTED_REFUTED]
    assert theorem_results and all(r.proved for r in theorem_results)


@pytest.mark.slow
def test_larger_small_pipeline():
    assert T.pipeline_small(m=2, n=2, k=4, width=2).proved
