"""MMA-Sim's wgmma departures settled on silicon: the reduced witnesses of docs/wgmma.md
(proofs/evidence/mmasim_wgmma_grading.json) ran on the H200 one CTA each
(proofs/evidence/mmasim_wgmma_witnesses_h200.json, tests/data/mmasim_wgmma_witnesses_h200.npz):
the silicon computes the spec's value in every one, never MMA-Sim's, and the evaluator reproduces
every register of every probe from the rebuilt inputs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from formal.evaluate import evaluate_wgmma
from formal.hw import wgmma_probe as wp

ROOT = Path(__file__).resolve().parent.parent
EV = json.loads((ROOT / "proofs" / "evidence" / "mmasim_wgmma_witnesses_h200.json").read_text())
Z = np.load(ROOT / "tests" / "data" / "mmasim_wgmma_witnesses_h200.npz")
PROBES = {p.key: p for p in wp.witness_probes(str(ROOT / "proofs" / "evidence" / "mmasim_wgmma_grading.json"))}


def test_every_departure_was_run_and_the_silicon_is_the_spec():
    assert set(PROBES) == set(EV["probes"]) == set(Z.files) and len(PROBES) == 8
    assert EV["silicon_is_spec"] == 8 and EV["silicon_is_mmasim"] == 0
    causes = {x["cause"] for x in EV["probes"].values()}
    assert causes == {"mech:zero_align", "mech:acc_floor"}, causes


@pytest.mark.parametrize("key", sorted(PROBES))
def test_evaluator_equals_the_recorded_registers(key):
    p = PROBES[key]
    k, i = p.kernel, p.inputs
    op = f"wgmma.mma_async.sync.aligned.{k.shape}.{k.dtype}.{k.atype}.{k.btype}"
    d = evaluate_wgmma(op, i["c"], i["a"], i["desc"][:, 1], smem=i["img"]).astype(np.uint32)
    assert np.array_equal(d, Z[key])
    r, c = p.info["row"], p.info["col"]
    v = int(wp.unpack_d(k.dtype, k.n, Z[key])[0, r, c])
    assert v == int(p.info["spec"], 16) != int(p.info["mmasim"], 16)
