"""The errata list: ids unique, every citation resolves, every entry has evidence,
and proofs/ERRATA.md is what `ptx-formal errata --write` produces."""

from __future__ import annotations

import re
from pathlib import Path

from formal.cli import main
from formal.errata import all_errata, markdown
from formal.specdata import spec_dir

ROOT = Path(__file__).resolve().parent.parent


def test_ids_unique_and_nonempty():
    es = all_errata()
    ids = [e.id for e in es]
    assert len(es) >= 40
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)
    for e in es:
        assert e.summary and e.section, e.id


def test_every_silicon_and_ptxas_erratum_has_evidence():
    for e in all_errata():
        if e.source in ("silicon", "ptxas/text") and e.kind not in ("text",):
            assert e.evidence, f"{e.id} has no evidence"


def test_citations_in_specs_resolve():
    ids = {e.id for e in all_errata()}
    cited = set()
    for p in spec_dir().glob("*.toml"):
        cited |= set(re.findall(r"\b([ES]-[A-Z0-9][A-Z0-9-]+[A-Z0-9])\b", p.read_text()))
    missing = sorted(c for c in cited if c not in ids)
    assert not missing, missing


def test_report_is_current():
    assert (ROOT / "proofs" / "ERRATA.md").read_text() == markdown(), \
        "proofs/ERRATA.md is stale: run `ptx-formal errata --write proofs/ERRATA.md`"


def test_cli(capsys):
    assert main(["errata", "--source", "silicon"]) == 0
    out = capsys.readouterr().out
    assert "S-F64-NAN-PROPAGATION" in out
    assert main(["errata", "--id", "S-ZERO-SIGN"]) == 0
    assert "S2f64" in capsys.readouterr().out
    assert main(["errata", "--id", "NOPE"]) == 2
    assert main(["errata", "--source", "bogus"]) == 2
