"""The hardware-status table of the recipe library (formal/transform/hw_status.py): the
README block is exactly what the script makes of the checked-in H100 summary, the copy is
the run's file verbatim, and the table tells confirmed from failing probes."""

import json
from pathlib import Path

import pytest

from formal.transform import hw_status as hs
from formal.transform import library

ROOT = Path(__file__).resolve().parent.parent
RUN2 = ROOT / "recipes" / "hw" / "transform_probes_h100_run2.json"
RUN3 = ROOT / "recipes" / "hw" / "transform_probes_h100_run3.json"
README = ROOT / "recipes" / "README.md"


def test_readme_table_is_generated_from_the_checked_in_summary():
    assert hs.readme_block(README.read_text()) == hs.hw_status(RUN3), \
        "regenerate: python -m formal.transform.hw_status recipes/hw/transform_probes_h100_run3.json " \
        "--readme recipes/README.md"


@pytest.mark.parametrize("run", [RUN2, RUN3], ids=["run2", "run3"])
def test_checked_in_summary_is_the_run_verbatim(run):
    meta = json.loads(run.with_name(run.stem + ".meta.json").read_text())
    assert hs.sha256(run) == meta["sha256"]
    s = json.loads(run.read_text())
    assert s["device"]["name"].startswith("NVIDIA H100") and s["device"]["target"] == "sm_90"
    assert s["n_probes"] == len(s["probes"]) == 90


def test_run3_every_probe_confirmed():
    t = hs.hw_status(RUN3)
    assert "**90 of 90 probes confirmed**" in t
    assert "| `cvt.bf16x2` | — | confirmed (1 probe) |" in t


def test_run2_table_content():
    t = hs.hw_status(RUN2)
    assert "**89 of 90 probes confirmed**" in t and "(`cvt.bf16x2`)" in t
    assert "2026-11-22" in t and "driver 13.0" in t and "4 trials" in t
    assert "| `accumulator_to_a_bf16` | result layout + 1 chained mma | confirmed |" in t
    assert "| `ldmatrix_x4_trans_b_two_ntiles` | result layout + 2 chained mma | confirmed |" in t
    assert "| `cvt.bf16x2` | — | **not confirmed**: 252 mismatching elements" in t
    assert "| `cvt.f16x2` | — | confirmed (1 probe) |" in t
    assert "| `prmt` |" in t and "confirmed (37 probes)" in t
    assert "| `broken_pack_swapped_halves` | — | not run (expect refuted" in t
    assert "| `wmma_load_submatrix_stride` | — | not run (`hardware no`) |" in t
    # every library recipe has a row
    for r in library():
        assert f"| `{r.name}` |" in t


def _summary(tmp_path, probes, **extra):
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"device": {"name": "GPU X", "target": "sm_90", "driver": "1", "cuda_runtime": "2",
                                        "cupy": "3"}, "probes": probes, **extra}))
    return f


def _p(name, kind="semantics", **kw):
    return {"name": name, "kind": kind, "trials": 2, "mismatches": 0, "first_mismatch": None, "mma_chained": 0,
            "mma_mismatches": 0, "first_mma_mismatch": None, **kw}


def test_table_flags_mismatches_errors_and_mma_failures(tmp_path):
    f = _summary(tmp_path, [
        _p("prmt.f4e.0"), _p("prmt.f4e.1", mismatches=3, first_mismatch={"trial": 1, "lane": 4, "register": "d",
                                                                         "element": 2, "got_bits": "0x12"}),
        _p("shfl.up.b1"), _p("shfl.up.b2", error="CUDADriverError: boom"),
        _p("r1", "recipe", mma_chained=1, mma_mismatches=5)], date="2030-01-02T03:04:05+00:00")
    t = hs.hw_status(f, meta={}, recipes=[])
    assert "**2 of 5 probes confirmed**" in t and "3 not confirmed" in t and "1 errors" in t
    assert "2030-01-02" in t and "2 trials per probe" in t
    assert "| `prmt` | f4e.{0,1} | 1 of 2 confirmed; `prmt.f4e.1` **not confirmed**: 3 mismatching elements " \
           "(first: trial 1, lane 4, register d, element 2; bits 0x12) |" in t
    assert "`shfl.up.b2` **error**: CUDADriverError: boom" in t
    assert "| `r1` (no longer in the library) | result layout + 1 chained mma | **not confirmed**: " \
           "5 mismatching elements of the chained mma D |" in t


def test_all_clean_run_says_confirmed(tmp_path):
    t = hs.hw_status(_summary(tmp_path, [_p("movmatrix"), _p("r1", "recipe")]), meta={}, recipes=[])
    assert "**2 of 2 probes confirmed**" in t and "0 not confirmed; 0 errors" in t
    assert "not confirmed**:" not in t


def test_replace_block_and_cli(tmp_path, capsys):
    md = tmp_path / "R.md"
    md.write_text(f"intro\n{hs.BEGIN}\nold\n{hs.END}\ntail\n")
    f = _summary(tmp_path, [_p("movmatrix")])
    assert hs.main([str(f), "--readme", str(md)]) == 0
    text = md.read_text()
    assert text.startswith("intro\n") and text.endswith("tail\n") and "old" not in text
    assert hs.readme_block(text) == hs.hw_status(f)
    assert hs.main([str(f)]) == 0 and "movmatrix" in capsys.readouterr().out
    # bad input: one line, exit 2
    assert hs.main([str(tmp_path / "missing.json")]) == 2
    no_markers = tmp_path / "N.md"
    no_markers.write_text("nothing\n")
    assert hs.main([str(f), "--readme", str(no_markers)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 2 and "hw-status markers" in err
