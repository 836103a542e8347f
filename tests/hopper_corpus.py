"""Shared by the Hopper kernel tests: the corpus (tests/data/kernels_hopper), its specs from the
manifest (formal.kernel.manifest), the inputs the H100 run used (tools/run_hopper_kernels.py's
``hopper_inputs``, exactly) and the recorded outputs (proofs/evidence/kernels_hopper_h100.json,
tests/data/kernels_hopper_outputs/)."""

from __future__ import annotations

import hashlib
import json
import sys
from functools import lru_cache
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "data" / "kernels_hopper"
OUTPUTS = ROOT / "tests" / "data" / "kernels_hopper_outputs"
MANIFEST = json.loads((CORPUS / "manifest.json").read_text())
RECORDS = json.loads((ROOT / "proofs" / "evidence" / "kernels_hopper_h100.json").read_text())["kernels"]

sys.path.insert(0, str(ROOT / "tools"))
import run_hopper_kernels as _R  # noqa: E402


def sha(a) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


@lru_cache(maxsize=None)
def module(name: str):
    from formal import kernel
    return kernel.parse_module((CORPUS / f"{name}.ptx").read_text(), path=f"{name}.ptx")


def spec(name: str):
    from formal.kernel import manifest
    return manifest.load(MANIFEST[name])


def inputs(name: str, seed: int) -> dict:
    """The launch's buffers as the H100 run had them (checked against the recorded sha256)."""
    inp = _R.hopper_inputs(MANIFEST[name], seed)
    rec = record(name, seed)
    assert {k: sha(v) for k, v in inp.items()} == rec["inputs_sha256"], name
    return inp


def record(name: str, seed: int) -> dict:
    return next(launch for launch in RECORDS[name]["launches"] if launch["seed"] == seed)


def compare(name: str, seed: int, out) -> list[str]:
    """Mismatches of a run's outputs against the H100's (sha256; the first differing element
    when the arrays are checked in)."""
    rec = record(name, seed)
    npz = OUTPUTS / f"{name}.npz"
    arrs = np.load(npz) if npz.exists() else None
    bad = []
    for k, h in rec["outputs_sha256"].items():
        got = np.asarray(out[k])
        if sha(got) == h:
            continue
        msg = f"{k}: sha256 differs"
        key = f"{seed}_{k}"
        if arrs is not None and key in arrs.files:
            d = np.argwhere(got != arrs[key])
            msg += f"; {len(d)} elements differ, first at {tuple(int(x) for x in d[0])}" if len(d) else ""
        bad.append(msg)
    return bad
