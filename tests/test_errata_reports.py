"""Upstream-ready reports (formal/errata_report.py, ``ptx-formal errata --report``): one for each
strong erratum, self-contained, and its reproducer assembles as written with the verdict the
report states (ptxas tests run the same release the report names)."""

from __future__ import annotations

import io
import re
from contextlib import redirect_stderr, redirect_stdout

import pytest

from formal import errata_report as R
from formal.catalog import ptxas as P
from formal.catalog.examples import assemble_module
from formal.cli import main
from formal.errata import all_errata

STRONG = R.strong_errata()
FOUND = {p.version: p for p in P.installations()}


def test_every_trap_and_silent_wrong_result_of_the_project_has_a_report():
    ids = {e.id for e in STRONG}
    assert len(STRONG) >= 40
    for e in all_errata():
        if not e.is_peer and e.severity in ("trap", "silent-wrong-result"):
            assert e.id in ids, e.id
    assert not any(e.is_reading or e.is_peer for e in STRONG)


@pytest.mark.parametrize("e", STRONG, ids=[e.id for e in STRONG])
def test_report_is_self_contained(e):
    text = R.report(e)
    for head in ("## What the PTX ISA text says", "## What happens", "## Reproducer", "## Expected",
                 "## Severity and who is affected", "## Environment"):
        assert head in text, (e.id, head)
    assert "PTX ISA 9.1" in text and "Affects: " in text
    if e.text:
        assert " ".join(e.text.split()) in text                       # the text quoted
    # the module in the report is the reproducer, complete (header + a kernel)
    mods = re.findall(r"~~~ptx\n(.*?)~~~", text, re.S)
    r = R.reproducer(e)
    assert mods and mods[0].strip() == r.module.strip()
    assert mods[0].startswith(".version ") and ".target " in mods[0] and ".entry " in mods[0]
    assert f"with ptxas {r.ptxas}: " + ("accepted" if r.accepted else "rejected") in text
    if e.witness:
        assert e.witness["observed"] in text and e.witness["inputs"] in text


@pytest.mark.ptxas
@pytest.mark.skipif(len(FOUND) < 2, reason="needs ptxas 13.0 and 13.5")
def test_every_reproducer_assembles_as_the_report_says():
    for e in STRONG:
        r = R.reproducer(e)
        ok, msgs = assemble_module(r.module, r.target, FOUND[r.ptxas])
        assert ok == r.accepted, (e.id, msgs)
        for m in r.messages:                                          # ptxas's recorded message, as it says it
            assert any(m.split(": ", 1)[-1] in x for x in msgs), (e.id, m, msgs)
        for xid, fx in R.fixes(e):                                    # the corrected examples assemble
            ok, msgs = assemble_module(fx.module, fx.target, FOUND[fx.ptxas])
            assert ok, (e.id, xid, msgs)


def test_cli_report_one_and_all(tmp_path):
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["errata", "--report", "S-SP-SELECTOR-OOB-TRAP"]) == 0
    assert "mma.sp.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32" in out.getvalue()
    with redirect_stdout(io.StringIO()):
        assert main(["errata", "--report", "all", "--out", str(tmp_path / "r")]) == 0
    files = sorted(p.name for p in (tmp_path / "r").iterdir())
    assert files == sorted(f"{e.id}.md" for e in STRONG)


def test_cli_report_bad_input():
    err = io.StringIO()
    with redirect_stderr(err), redirect_stdout(io.StringIO()):
        assert main(["errata", "--report", "NOPE"]) == 2
        assert main(["errata", "--report", "E-LAYOUT-COSMETIC"]) == 2          # no reproducer: a documentation note
        assert main(["errata", "--report", "all"]) == 2                         # needs --out
        assert main(["errata", "--report", "S-ZERO-SIGN", "--out", "x"]) == 2   # --out only with all
        assert main(["errata", "--out", "x"]) == 2
    lines = err.getvalue().splitlines()
    assert len(lines) == 5 and all(x.startswith("ptx-formal: error:") for x in lines)
