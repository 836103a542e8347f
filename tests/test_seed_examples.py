"""The PTX text's own examples as a checked artefact (proofs/seed-examples.json,
formal/catalog/examples.py): every mma / mma.sp / wmma example of the seeds assembled as
written with the declarations it writes, its verdict recorded, every failure named by an erratum.

Cross-checks: the project's own diagnosis (the text's fragment rules, no ptxas) and ptxas's
verdicts agree both ways; the recorded modules are rebuilt from the recorded declarations; with
the seeds present, a fresh extraction equals the record; with ptxas, every recorded verdict is
reproduced by the same release.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest

from formal.catalog import examples as X
from formal.catalog import ptxas as P
from formal.specdata import load_spec

ROOT = Path(__file__).resolve().parent.parent
RECORD = json.loads((ROOT / "proofs" / "seed-examples.json").read_text())
EXAMPLES = RECORD["examples"]
SEEDS = os.environ.get("PTX_FORMAL_SEEDS", str(ROOT.parent / "shared" / "seeds"))
SEED_FILES = X.seed_files(SEEDS)


def _example(rec: dict) -> X.Example:
    return X.Example(rec["id"], rec["seed"], rec["line"], rec["section"], rec["instruction"], rec["declarations"])


def test_counts():
    # 78 examples: 8 fail for substance, 13 for punctuation only, 2 elide operands
    c = Counter(e["category"] for e in EXAMPLES)
    assert len(EXAMPLES) == 78
    assert c == {"ok": 55, "substantive": 8, "punctuation": 13, "elided": 2}, c
    assert {e["id"] for e in EXAMPLES if e["category"] == "substantive"} == \
        {"X05", "X07", "X08", "X09", "X57", "X63", "X65", "X78"}


def test_same_instructions_as_the_checked_in_extraction():
    with open(ROOT / "tests" / "data" / "seed_examples.txt", encoding="utf-8") as f:
        listed = [ln.rstrip("\n") for ln in f if ln.strip() and not ln.startswith("#")]
    assert [_example(e).key for e in EXAMPLES] == listed


@pytest.mark.skipif(not SEED_FILES, reason=f"seed texts not found under {SEEDS} (set PTX_FORMAL_SEEDS)")
def test_record_is_a_fresh_extraction_of_the_seeds():
    fresh = X.all_examples(SEED_FILES)
    assert [(e.id, e.seed, e.line, e.section, e.instruction, e.declarations) for e in fresh] == \
        [(e["id"], e["seed"], e["line"], e["section"], e["instruction"], e["declarations"]) for e in EXAMPLES]


def test_modules_are_the_examples_as_written():
    for e in EXAMPLES:
        ex = _example(e)
        assert e["module"] == X.module(ex, e["target"], e["ptx"])
        for d in e["declarations"]:
            assert d in e["module"]                                 # literally, punctuation included
        assert ex.instruction in e["module"].replace("\n  ", "\n")


def test_diagnosis_is_recomputed_and_agrees_with_ptxas_both_ways():
    for e in EXAMPLES:
        d = X.diagnose(_example(e))
        assert d == e["diagnosis"], e["id"]
        if e["category"] == "substantive":
            assert d, (e["id"], "ptxas rejects it and the text's rules find nothing")
        if not d:
            assert e["category"] in ("ok", "punctuation"), (e["id"], "no fault found, yet ptxas rejects it")
        if e["category"] == "ok":
            assert not d, (e["id"], "ptxas accepts what the text's rules call wrong")


def test_both_ptxas_releases_agree():
    # ptxas 13.0 knows PTX ISA <= 9.0: the examples documented from 9.1 have 13.5's verdict only
    assert sum(len(e["verdicts"]) == 2 for e in EXAMPLES) >= 70
    for e in EXAMPLES:
        assert e["verdicts"] and (len(e["verdicts"]) == 2 or P._pv(e["ptx"]) > (9, 0)), e["id"]
        assert len({v["accepted"] for v in e["verdicts"]}) == 1, e["id"]
        assert len({tuple(v["messages"]) for v in e["verdicts"]}) == 1, e["id"]


def test_every_failure_is_an_erratum():
    named = {}
    for name in ("errata", "errata_examples"):
        for en in load_spec(name)["erratum"]:
            for x in en.get("examples", []):
                named[x] = en["id"]
    for e in EXAMPLES:
        if e["category"] in ("substantive", "punctuation"):
            assert e["erratum"] and named.get(e["id"]) == e["erratum"], e["id"]
        if e["category"] == "ok":
            assert e["id"] not in named, e["id"]


def test_repair_fixes_punctuation_only():
    assert X.repair(".reg .f16x2 %Ra<2> %Rb<2> %Rc<4> %Rd<4>") == ".reg .f16x2 %Ra<2>, %Rb<2>, %Rc<4>, %Rd<4>;"
    assert X.repair(".reg .b32 a, b, c<2> d<2>") == ".reg .b32 a, b, c<2>, d<2>;"
    assert X.repair(".global .align 32 .f16 A[256], B[256];") == ".global .align 32 .f16 A[256], B[256];"
    assert X.parse_decl(".reg .b32 x<4>")[2] == ["x0", "x1", "x2", "x3"]


def test_markdown_is_the_rendering_of_the_record():
    assert (ROOT / "proofs" / "seed-examples.md").read_text() == X.markdown(RECORD)


FOUND = {p.version: p for p in P.installations()}


def _reproduce(every_release: bool) -> int:
    checked = 0
    newest = max(FOUND, key=lambda v: tuple(int(x) for x in v.split(".")))
    for e in EXAMPLES:
        for v in e["verdicts"]:
            px = FOUND.get(v["ptxas"])
            # fast: every example with the newest release, the failing ones with every release
            if px is None or not (every_release or v["ptxas"] == newest or e["category"] != "ok"):
                continue
            ok, msgs = X.assemble_module(e["module"], v["target"], px)
            assert (ok, msgs) == (v["accepted"], v["messages"]), e["id"]
            checked += 1
        for v in e["repaired"]:
            px = FOUND.get(v["ptxas"])
            if px is None:
                continue
            ok, _ = X.assemble_module(X.module(_example(e), v["target"], v["ptx"], repaired=True), v["target"], px)
            assert ok == v["accepted"], e["id"]
    return checked


@pytest.mark.ptxas
@pytest.mark.skipif(not FOUND, reason="no ptxas found")
def test_verdicts_are_reproduced():
    assert _reproduce(every_release=False) >= 78


@pytest.mark.ptxas
@pytest.mark.slow
@pytest.mark.skipif(not FOUND, reason="no ptxas found")
def test_verdicts_are_reproduced_by_every_release():
    assert _reproduce(every_release=True) >= 78 + 70 * (len(FOUND) > 1)
