"""The in-place and chained wmma kernels (tests/data/kernels_inplace) on silicon: `kernel run`
gives every buffer the GPU wrote, bit for bit (an H200, 2026-11-28; the record holds the sha256 of
every output buffer of both seeds, proofs/evidence/kernels_inplace_h200.json)."""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np

from formal import kernel
from formal.kernel.buffers import corpus_inputs
from formal.kernel.spec import load_spec

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import run_kernels_h100 as rk  # noqa: E402


def test_kernel_run_equals_the_gpu():
    rec = json.loads((ROOT / "proofs" / "evidence" / "kernels_inplace_h200.json").read_text())
    corpus = ROOT / rec["corpus"]
    man = rk._manifest(corpus)
    assert set(man) == set(rec["kernels"]) and len(man) == 20
    n = 0
    for name, meta in man.items():
        spec = load_spec(corpus / meta["spec"])
        mod = kernel.parse_module((corpus / meta["ptx"]).read_text())
        for launch in rec["kernels"][name]["launches"]:
            inputs = corpus_inputs(spec, launch["seed"])
            assert {k: hashlib.sha256(np.ascontiguousarray(v).tobytes()).hexdigest()
                    for k, v in inputs.items()} == launch["inputs_sha256"]
            out = kernel.run(mod, spec, inputs)
            for buf, h in launch["outputs_sha256"].items():
                assert hashlib.sha256(np.ascontiguousarray(out[buf]).tobytes()).hexdigest() == h, (name, buf)
                n += 1
    assert n == rec["kernel_run_equal"]["buffers"]
