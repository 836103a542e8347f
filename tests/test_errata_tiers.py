"""Every erratum exact in tier, witness, quote and citation, each claim recomputed from the
recorded data it rests on (not copied from the entry):

* tiers: silent wrong result / trap only where the failure happens on what the text allows (or on
  code ptxas accepts without a diagnostic); the wmma pitch entries recomputed from the 7,118
  alignment probes with the text's own rule (formal.wmma.memory.check_access);
* witnesses decide: a numerics probe cited as the witness refutes an alternative; the selector
  trap claims only the cases its evidence file holds; the sparse-metadata statements match
  metadata_probes_h100.json case by case;
* quotes: every `text` not marked otherwise is verbatim in the seeds; every table or figure
  number carries its PTX ISA version.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from formal.errata import all_errata, unquoted
from formal.specdata import load_spec
from formal.wmma import alignment as A
from formal.wmma import memory as M

ROOT = Path(__file__).resolve().parent.parent
ES = {e.id: e for e in all_errata()}
SEEDS = Path(os.environ.get("PTX_FORMAL_SEEDS", str(ROOT.parent / "shared" / "seeds")))
SEED_TEXT = "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in sorted(SEEDS.glob("*.txt")))


def test_every_strong_tier_says_why():
    for e in ES.values():
        if e.severity in ("silent-wrong-result", "trap") and not e.is_peer:
            assert e.tier and e.tier.split(":")[0].replace(" ", "-") == e.severity, e.id


# ---- the wmma pitch entries, from the recorded probes and the text's rule ------------------------

DOC = A.summary_doc()
PROBES = DOC["probes"]


def _text_legal(p: dict) -> tuple[bool, bool]:
    ptr = 4096 + p["offset"]                       # a 256-byte aligned base + the probe's offset
    st = None if p["mode"] == "omitted" else p["stride"]
    return tuple(M.check_access(p["opcode"], ptr, st, reading=rd).legal for rd in ("registers", "elements"))


def test_wrong_data_only_on_pitches_the_text_calls_undefined():
    # stride-low-bits-dropped is documentation, not a silent wrong result: no wrong-data probe is text-legal
    wrong = [p for p in PROBES if p["data"] == "differs"]
    assert len(wrong) == 282
    for rd in ("registers", "elements"):
        assert DOC["meta"]["text"][rd]["text_allows_wrong_data"] == 0
    for p in wrong[::7]:                            # recomputed for a sample here, for all in the slow test
        assert _text_legal(p) == (False, False), p["name"]
    assert ES["stride-low-bits-dropped"].severity == "documentation"


@pytest.mark.slow
def test_wrong_data_only_on_pitches_the_text_calls_undefined_all():
    for p in PROBES:
        if p["data"] == "differs":
            assert _text_legal(p) == (False, False), p["name"]


def test_ldsm_subbyte_faults_on_what_the_text_allows():
    # shared-ldsm-subbyte-pitch-rounded is a trap: its 60 faults are text-legal, its 24 wrong rows are not
    ops = ("wmma.load.a.sync.aligned.row.m8n8k32", "wmma.load.b.sync.aligned.col.m8n8k32",
           "wmma.load.a.sync.aligned.row.m8n8k128", "wmma.load.b.sync.aligned.col.m8n8k128")
    sel = [p for p in PROBES if p["space"] in ("shared", "shared::cta") and p["opcode"].startswith(ops)]
    assert len(sel) == 168
    faults = [p for p in sel if p["status"] == "fault"]
    wrong = [p for p in sel if p["data"] == "differs"]
    assert (len(faults), len(wrong)) == (60, 24)
    assert all(_text_legal(p) == (True, True) for p in faults)
    assert all(_text_legal(p) == (False, False) for p in wrong)
    e = ES["shared-ldsm-subbyte-pitch-rounded"]
    assert e.severity == "trap" and "wa04946" in e.witness["inputs"] and "MISALIGNED" in e.witness["observed"]
    w = next(p for p in sel if p["name"] == "wa04946")
    assert w["status"] == "fault" and w["stride"] == 40 and _text_legal(w) == (True, True)


def test_ldsm_row_alignment_faults_include_text_legal_accesses():
    sass = {k["kernel"]: k["sass"] for k in DOC["kernels"]}
    sel = [p for p in PROBES if p["space"] in ("shared", "shared::cta")
           and any(o.startswith("LDSM") for o in sass[p["kernel"]]) and p["family"].split(".")[-1] in ("f16", "bf16", "s8", "u8")]
    faults = [p for p in sel if p["status"] == "fault"]
    assert (len(sel), len(faults)) == (968, 456)
    legal = [_text_legal(p) for p in faults[::12]]                # a sample here; every one in the slow test below
    assert any(r for r, _ in legal) and any(e for _, e in legal)
    assert "80 (registers reading) / 100 (elements reading) of the 456" in ES["shared-ldsm-row-alignment"].tier


@pytest.mark.slow
def test_ldsm_row_alignment_text_legal_fault_counts():
    sass = {k["kernel"]: k["sass"] for k in DOC["kernels"]}
    faults = [p for p in PROBES if p["space"] in ("shared", "shared::cta") and p["status"] == "fault"
              and any(o.startswith("LDSM") for o in sass[p["kernel"]]) and p["family"].split(".")[-1] in ("f16", "bf16", "s8", "u8")]
    legal = [_text_legal(p) for p in faults]
    assert (sum(r for r, _ in legal), sum(e for _, e in legal)) == (80, 100)


# ---- witnesses that decide ------------------------------------------------------------------------

PROBE_EV = {r["id"]: r for r in json.loads((ROOT / "proofs/evidence/numerics_probes_h100.json").read_text())["results"]}


def test_witness_probes_refute_an_alternative():
    for e in load_spec("errata_silicon")["erratum"]:
        pid = e.get("witness_probe")
        if not pid:
            continue
        r = PROBE_EV[pid]
        alternatives = [k for k in r["predictions"] if k != "sm_90"]
        if alternatives:
            assert set(alternatives) - set(r["matching"]), (e["id"], pid, "matches every alternative: decides nothing")
        # the probes the entry names decide together: every alternative any of them predicts is refuted
        # by one of them, or the entry says where else it is decided
        named = [pid] + [x for x in re.findall(r"\b([A-Z][A-Za-z0-9_]*)\b", e.get("witness", "")) if x in PROBE_EV]
        alts = {k for x in named for k in PROBE_EV[x]["predictions"] if k != "sm_90"}
        refuted = {k for x in named for k in PROBE_EV[x]["predictions"] if k != "sm_90" and k not in PROBE_EV[x]["matching"]}
        assert alts - refuted <= set(e.get("decided_elsewhere", {})), (e["id"], alts - refuted)
        if not alts:
            assert e.get("alternative_refuted"), (e["id"], "no alternative predicted: say what the observation rules out")
    z = next(e for e in load_spec("errata_silicon")["erratum"] if e["id"] == "S-ZERO-SIGN")
    r = PROBE_EV[z["witness_probe"]]
    assert "IEEE zero signs" in r["predictions"] and "IEEE zero signs" not in r["matching"]
    assert PROBE_EV["S2i"]["matching"] == ["sm_90", "IEEE zero signs"]     # why S2i was not the witness


def test_selector_trap_claims_only_what_its_evidence_holds():
    ev = json.loads((ROOT / "proofs/evidence/selector_oob_h100.json").read_text())
    assert ev["forms"] == ["mma.sp.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32 (sel 2)"]
    four = json.loads((ROOT / "proofs/evidence/selector_oob_h200.json").read_text())
    assert len(four["forms"]) == 4 and four["observation"].count("trap: CUDARuntimeError: cudaErrorIllegalInstruction") == 4
    s = ES["S-SP-SELECTOR-OOB-TRAP"].summary
    assert "every one of the four traps" in s and "selectors 2 and 3" in s
    assert (ROOT / "tools" / "selector_oob_probe.py").exists()


META = json.loads((ROOT / "proofs/evidence/metadata_probes_h100.json").read_text())["results"]
UNSORTED = ("0b0001", "0b0010", "0b0011", "0b0110", "0b0111", "0b1011")
REPEATED = ("0b0000", "0b0101", "0b1010", "0b1111")


def test_repeated_index_statement_matches_the_data():
    plain = [r for r in META if "ordered" not in r["opcode"] and "tf32" not in r["opcode"]]
    ordered = [r for r in META if "ordered" in r["opcode"] and "tf32" not in r["opcode"]]
    tf32 = [r for r in META if "tf32" in r["opcode"]]
    assert (len(plain), len(ordered), len(tf32)) == (70, 70, 12)
    assert all(r["ub_readings"][v] == ["repeated-sum"] for r in plain for v in REPEATED)
    assert all(r["ub_readings"][v] == ["repeated-sum", "unsorted-literal", "unsorted-sorted"] for r in ordered for v in REPEATED)
    assert all(any("inputs were not read as expected" in a for a in r["anomalies"]) for r in tf32)
    s = ES["S-SP-REPEATED-INDEX"].summary
    assert "70 plain mma.sp cases" in s and "70 mma.sp::ordered_metadata cases" in s
    assert "12 .tf32 cases" in s and "inputs were not read as expected" in s


def test_unsorted_ordered_metadata_is_read_literally():
    ordered = [r for r in META if "ordered" in r["opcode"] and "tf32" not in r["opcode"]]
    seen = sum(r["ub_readings"][v] == ["unsorted-literal"] for r in ordered for v in UNSORTED)
    assert seen == 420 == 70 * len(UNSORTED)
    s = ES["S-SP-ORDERED-UNSORTED-LITERAL"].summary
    assert "all 70" in s and "420 of 420" in s


# ---- quotes and numbers ---------------------------------------------------------------------------

@pytest.mark.skipif(not SEED_TEXT, reason=f"seed texts not found under {SEEDS} (set PTX_FORMAL_SEEDS)")
def test_quotes_are_verbatim_or_marked():
    bad = {e.id: unquoted(e.text, SEED_TEXT) for e in ES.values() if e.text and not e.text_is}
    assert not {k: v for k, v in bad.items() if v}
    assert unquoted("the accumulation is performed with at most half precision", SEED_TEXT)   # the check can fail


def test_tables_and_figures_carry_their_version():
    for name in ("errata", "errata_layout", "errata_silicon", "errata_examples", "errata_peers", "wmma_memory"):
        for e in load_spec(name).get("erratum", []):
            for k, v in e.items():
                for m in re.finditer(r"\b(Tables?|Figures?) \d+", str(v)):
                    assert "PTX ISA 9.1" in str(v)[m.start():m.start() + 60], (e["id"], k, str(v)[m.start():][:60])


def test_family_targets_are_swept():
    from formal.catalog import sweep as S

    for t in ("sm_100f", "sm_103f", "sm_107f", "sm_110f", "sm_120f", "sm_121f"):
        assert t in S.SWEEP_TARGETS and t in S.FAMILY_TARGETS
    rec = json.loads((ROOT / "proofs/ptxas-sweep.json").read_text())
    for t in S.FAMILY_TARGETS:
        assert t in rec["targets"]
