"""The errata are actionable: every entry has a severity (or is a reading, the project's own
modelling choice, listed apart), every citation names the PTX ISA version its section number
refers to, and every silicon finding carries a minimal self-contained witness (PTX line,
inputs, observed output)."""

from __future__ import annotations

import io
import json
import re
from contextlib import redirect_stdout

import pytest

from formal import catalog as cat
from formal.cli import main
from formal.errata import READING, SEVERITIES, all_errata, errata_only, markdown, readings

ES = all_errata()


def test_every_entry_has_a_severity_or_is_a_reading():
    for e in ES:
        assert e.severity in SEVERITIES + (READING,), (e.id, e.severity)
    assert len(errata_only()) + len(readings()) == len(ES)
    assert {e.severity for e in errata_only()} == set(SEVERITIES)      # each class is used
    assert len(readings()) >= 5


@pytest.mark.parametrize("e", ES, ids=[e.id for e in ES])
def test_citations_are_versioned(e):
    assert any(c["ptx_isa"] for c in e.citations), e.id
    for c in e.citations:
        m = re.match(r"(\d+(?:\.\d+)+)", c["section"])
        if not m:                        # another document (CUDA C++ guide): no PTX ISA version
            assert c["ptx_isa"] is None and not re.match(r"\d", c["section"]), (e.id, c)
            continue
        assert c["ptx_isa"] == "9.1", (e.id, c)
        if m.group(1).startswith("9.7.14"):
            assert c["section_from_9_4"] == "9.7.16" + m.group(1)[6:]
        else:
            assert c["section_from_9_4"] is None


SILICON_LIKE = [e for e in ES if not e.is_reading and (e.source == "silicon" or (
    e.source == "wmma memory" and e.severity in ("trap", "silent-wrong-result")))]


@pytest.mark.parametrize("e", SILICON_LIKE, ids=[e.id for e in SILICON_LIKE])
def test_silicon_entries_have_a_minimal_witness(e):
    w = e.witness
    assert w and all(w.get(k) for k in ("ptx", "inputs", "observed", "source")), e.id
    # the witness's instruction is a real spelling the catalog reads
    form = cat.parse(w["ptx"].split()[0])
    assert form.family in cat.FAMILIES
    assert "0x" in w["observed"] or "CUDA" in w["observed"] or "reading" in w["observed"] or "rows" in w["observed"] \
        or "cuda" in w["observed"].lower() or "layout" in w["observed"]


def test_probe_witnesses_are_the_recorded_observations():
    ev = {r["id"]: r for r in json.load(open("proofs/evidence/numerics_probes_h100.json"))["results"]}
    from formal.specdata import load_spec
    n = 0
    for e in load_spec("errata_silicon")["erratum"]:
        if "witness_probe" in e:
            w = next(x for x in ES if x.id == e["id"]).witness
            r = ev[e["witness_probe"]]
            assert w["observed"] == f"D[0][0] = {r['observed']}" and w["ptx"].startswith(r["opcode"] + " ")
            n += 1
    assert n >= 10


def test_scopes_fixed():
    byid = {e.id: e for e in ES}
    assert "tf32" in byid["S-SP-REPEATED-INDEX"].summary
    assert "m8n32k16" in byid["S-WMMA-LOWERING"].witness["ptx"]
    assert "xor.popc" in byid["E-MMA-INT4-BITOP"].summary and "SASS" in byid["E-MMA-INT4-BITOP"].summary
    assert "6 of the 8" in byid["E-WMMA-SUBBYTE-SHAPES"].summary
    assert byid["E-SP-SEL-K32-F16F32"].severity == byid["S-SP-SELECTOR-OOB-TRAP"].severity == "trap"


def test_markdown_lists_readings_apart_and_counts_severities():
    md = markdown()
    assert "## Readings" in md and "## silent wrong result" in md and "## trap" in md
    head = md[:md.index("## ")]
    assert re.search(r"\d+ errata \(\d+ silent wrong result, \d+ trap, \d+ rejected valid code, \d+ documentation\)", head)
    assert "(= 9.7.16." in md


def test_cli_severity_filter():
    out = io.StringIO()
    with redirect_stdout(out):
        rc = main(["errata", "--severity", "trap"])
    assert rc == 0 and "S-SP-SELECTOR-OOB-TRAP" in out.getvalue() and "S-NAN-CANONICAL" not in out.getvalue()
    assert main(["errata", "--severity", "bogus"]) == 2


def test_sweep_report_names_no_machine_path():
    with open("proofs/ptxas-sweep.md") as f:
        md = f.read()
    assert not re.search(r"(/work/|/usr/|/root/|/home/|site-packages)", md)
