"""Capture raw GPU outputs for offline model work.

``capture(cases, warps, regimes, seed, out_dir)`` runs each case on the GPU with inputs
from ``formal.vectors.regimes`` and saves only the outputs (inputs are a deterministic
function of the recorded seed; a SHA-256 of each input batch is stored so a later
regeneration can be verified bit for bit).  Also saves the SASS opcodes of each kernel
(which tensor-core path ptxas chose), when cuobjdump is available.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from typing import Iterable

import numpy as np

from .check import _seed
from ..vectors.regimes import random_inputs
from .kernels import Case, module_source
from ..catalog.sass import parse_sass


def input_digest(inp: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for k in sorted(inp):
        h.update(k.encode())
        h.update(np.ascontiguousarray(inp[k]).tobytes())
    return h.hexdigest()


def sass_summary(gpu, cases: list[Case], ptx: str = "8.7") -> dict[str, list[str]]:
    """Kernel -> the arithmetic SASS opcodes ptxas emitted (HMMA, IMMA, DMMA, F2F...)."""
    cuobjdump = shutil.which("cuobjdump")
    if not cuobjdump or not gpu._ptxas:
        return {}
    target = gpu.target_for()
    src, names = module_source(cases, target, ptx)
    tmp = tempfile.mkdtemp(prefix="ptxformal_sass_")
    p = os.path.join(tmp, "m.ptx")
    open(p, "w").write(src)
    cub = os.path.join(tmp, "m.cubin")
    subprocess.run([gpu._ptxas, f"-arch={target}", p, "-o", cub], check=True, capture_output=True)
    out = subprocess.run([cuobjdump, "-sass", cub], capture_output=True, text=True).stdout
    keep = re.compile(r"(HMMA|IMMA|DMMA|BMMA|QMMA|HGMMA|F2F|F2FP|HADD2|HFMA2|FADD|FFMA|FMUL|I2F|F2I|PRMT|LOP3|SHF|IADD3|IMAD|POPC)")
    res = {f: [op for op, _ in ins if keep.match(op)] for f, ins in parse_sass(out).items()}
    return {n: res.get(n, []) for n in names}


def capture(cases: list[Case], warps: int, regimes: Iterable[str], seed: int, out_dir: str,
            gpu=None, warps_for=None) -> dict:
    """Run and save outputs; returns the manifest (also written to out_dir/manifest.json)."""
    from .runner import GPU

    gpu = gpu or GPU()
    os.makedirs(out_dir, exist_ok=True)
    manifest = {"gpu": gpu.info.to_dict(), "seed": seed, "numpy": np.__version__, "cases": []}
    arrays: dict[str, np.ndarray] = {}
    for regime in regimes:
        ns = [warps_for(c, regime) if warps_for else warps for c in cases]
        seeds = [_seed(seed, c.key, regime, 0) for c in cases]
        inputs = [random_inputs(c.form, n, regime, s) for c, n, s in zip(cases, ns, seeds)]
        outs = gpu.run_cases(cases, inputs)
        for i, (c, n, s, inp, out) in enumerate(zip(cases, ns, seeds, inputs, outs)):
            key = f"c{cases.index(c)}_{regime}"
            arrays[key] = out
            manifest["cases"].append({"key": key, "opcode": c.form.opcode, "sel": c.imm.sel if c.form.is_sparse else None,
                                      "regime": regime, "seed": s, "warps": n, "digest": input_digest(inp)})
    try:
        manifest["sass"] = {c.key: ops for c, ops in zip(cases, sass_summary(gpu, cases).values())}
    except Exception as e:  # SASS is a bonus; never fail the capture for it
        manifest["sass_error"] = f"{type(e).__name__}: {e}"
    np.savez_compressed(os.path.join(out_dir, "outputs.npz"), **arrays)
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    return manifest
