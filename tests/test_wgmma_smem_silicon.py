"""The descriptor questions the first wgmma run left open, on silicon (an H200, 2026-11-28;
proofs/evidence/wgmma_smem_probes_h200.json): undescribed descriptor bits, a base offset without
a swizzle, LBO / SBO = 0.  The recorded outputs are read back and compared with formal.smem."""
from __future__ import annotations

import collections
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import wgmma_smem_probe as sp  # noqa: E402


def test_every_probe_reads_what_formal_smem_predicts(tmp_path, capsys):
    shutil.copy(ROOT / "tests" / "data" / "wgmma_smem_probes_h200.npz", tmp_path / "out_smemx.npz")
    assert sp.decide(str(tmp_path)) == 0
    lines = capsys.readouterr().out.splitlines()
    kinds = collections.Counter(json.loads(l.split()[1]) for l in lines if "as predicted" in l)
    rec = json.loads((ROOT / "proofs" / "evidence" / "wgmma_smem_probes_h200.json").read_text())
    assert dict(kinds) == rec["kinds"] and sum(kinds.values()) == rec["probes"] == 158
