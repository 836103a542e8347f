"""The mutant evidence of issue 19 (proofs/evidence/kernel_mutants.json, written by
tools/make_kernel_type_mutants.py): every type-qualifier variant of the corpus kernels that
ptxas 13.0 assembles, fill-constant changes of the masked kernels and the classic mutants,
each judged by `kernel check` and independently by `kernel run` against the unmutated kernel.

The record must show 0 false proofs and 0 false alarms; a sample of mutants is rebuilt from
the record (sha256 of the text) and re-checked here, the full set in the slow suite.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pytest

from formal import kernel
from formal.kernel.buffers import corpus_inputs

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "data" / "kernels"
EVIDENCE = ROOT / "proofs" / "evidence" / "kernel_mutants.json"
DOC = json.loads(EVIDENCE.read_text())
MUTANTS = DOC["mutants"]
MANIFEST = json.loads((CORPUS / "manifest.json").read_text())


def rebuild(rec) -> str:
    lines = (CORPUS / MANIFEST[rec["kernel"]]["ptx"]).read_text().split("\n")
    i = rec["line"] - 1
    assert lines[i].strip() == rec["original"]
    lines[i] = lines[i].replace(lines[i].strip(), rec["mutated"])          # the line's own whitespace
    text = "\n".join(lines)
    if rec["class"] == "classic" and hashlib.sha256(text.encode()).hexdigest() != rec["sha256"]:
        m = json.loads((CORPUS / "mutants" / "manifest.json").read_text())["mutants"]
        name = next(n for n, x in m.items() if x["kernel"] == rec["kernel"] and x["line"] == rec["line"])
        text = (CORPUS / "mutants" / m[name]["ptx"]).read_text()
    assert hashlib.sha256(text.encode()).hexdigest() == rec["sha256"], rec
    return text


def test_record_no_false_proof_no_false_alarm():
    t = DOC["totals"]
    assert t["false_proofs"] == 0 and t["false_alarms"] == 0
    assert t["total"] >= 500 and t["caught"] >= 100 and t["equivalent_proved"] >= 100
    assert {"type", "dead-value", "classic"} <= set(DOC["summary"])
    for r in MUTANTS:
        assert r["judgement"] not in ("false-proof", "false-alarm"), r
        if r["class"] != "classic":
            assert r["ptxas"], r                          # only what ptxas assembles is kept
        if r["verdict"] == "refuted":
            assert r["run_changes"] or set(r["witnesses"]) <= {"race", "async-pending"}, r
        if r["verdict"] == "proved":
            assert not r["run_changes"], r


def test_record_covers_the_issue():
    muts = {(r["kernel"], r["mutated"].split()[0]) for r in MUTANTS if r["verdict"] == "refuted"}
    for kern, op in [("tri_f16_f32acc_sm80_w4", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"),
                     ("tri_bf16_f32acc_sm80_w8", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"),
                     ("tri_e4m3_sm89_w4", "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32"),
                     ("tri_e4m3_sm89_w4", "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32"),
                     ("tri_s8_sm80_w4", "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.u8.u8.s32"),
                     ("tri_s8_sm80_w4", "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.u8.s32"),
                     ("tri_e4m3_sm90_w2", "cvt.rn.f16x2.e5m2x2")]:
        assert (kern, op) in muts, (kern, op)
    dead = [r for r in MUTANTS if r["class"] == "dead-value" and r["kernel"] == "tri_s8_masked_sm80_w4"]
    assert len(dead) >= 16 and all(r["verdict"] == "proved" and not r["run_changes"] for r in dead)


def _sample():
    """A few of each (class, verdict), spread over kernels and opcodes."""
    seen, out = set(), []
    for r in MUTANTS:
        key = (r["class"], r["verdict"], r["mutated"].split()[0].split(".")[0])
        if key in seen or r["verdict"] not in ("proved", "refuted"):
            continue
        seen.add(key)
        out.append(r)
    return out


SAMPLE = _sample()


@pytest.mark.parametrize("i", range(len(SAMPLE)), ids=[f"{r['kernel']}:{r['line']}:{r['mutated'][:40]}" for r in SAMPLE])
def test_sample_verdicts_reproduce(i):
    rec = SAMPLE[i]
    spec = kernel.load_spec(CORPUS / MANIFEST[rec["kernel"]]["spec"])
    text = rebuild(rec)
    res = kernel.check(kernel.parse_module(text), spec, lanes=False)
    assert res.verdict == rec["verdict"]
    assert sorted({w.kind for w in res.witnesses}) == rec["witnesses"]
    if rec["verdict"] == "proved" and rec["class"] == "dead-value":
        base = kernel.parse_module((CORPUS / MANIFEST[rec["kernel"]]["ptx"]).read_text())
        inp = corpus_inputs(spec, 0)
        a, b = kernel.run(base, spec, inp), kernel.run(kernel.parse_module(text), spec, inp)
        for c in spec.contracts:
            assert np.array_equal(np.asarray(a[c.out]), np.asarray(b[c.out]))


@pytest.mark.slow
@pytest.mark.parametrize("i", range(len(MUTANTS)))
def test_every_verdict_reproduces(i):
    rec = MUTANTS[i]
    spec = kernel.load_spec(CORPUS / MANIFEST[rec["kernel"]]["spec"])
    try:
        res = kernel.check(kernel.parse_module(rebuild(rec)), spec, lanes=False)
        verdict = res.verdict
    except kernel.Unsupported:
        verdict = "unsupported"
    assert verdict == rec["verdict"]
