"""Run register-level kernels on a CUDA GPU through CuPy.

``GPU`` wraps device discovery, module loading and launches.  PTX is assembled with
ptxas when one is found (a cubin for exactly this GPU) and otherwise handed to the
driver's JIT.  Nothing here imports CuPy at module import time, so the package works
without a GPU; ``GPU()`` raises :class:`NoGPU` with a one-line reason instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass

import numpy as np

from .kernels import Case, module_source, operand_layout, words_per_warp


class NoGPU(RuntimeError):
    """No usable CUDA GPU (or CuPy missing)."""


def _ptxas() -> str | None:
    for p in (os.environ.get("PTXAS"), shutil.which("ptxas"), "/usr/local/cuda/bin/ptxas"):
        if p and os.path.exists(p):
            return p
    return None


@dataclass
class DeviceInfo:
    name: str
    cc: tuple[int, int]
    driver: str
    runtime: str
    cupy: str

    @property
    def target(self) -> str:
        major, minor = self.cc
        return f"sm_{major}{minor}"

    def to_dict(self) -> dict:
        return {"name": self.name, "compute_capability": f"{self.cc[0]}.{self.cc[1]}", "target": self.target,
                "driver": self.driver, "cuda_runtime": self.runtime, "cupy": self.cupy}


def _fmt_cuda_version(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


class GPU:
    def __init__(self, device: int = 0):
        try:
            import cupy as cp  # noqa: F401
        except Exception as e:  # ImportError, or a broken CUDA install
            raise NoGPU(f"CuPy is not available ({type(e).__name__}: {e}); install ptx-formal[gpu] on a machine with a CUDA GPU") from None
        import cupy as cp

        try:
            n = cp.cuda.runtime.getDeviceCount()
        except Exception as e:
            raise NoGPU(f"no CUDA device ({e})") from None
        if n == 0:
            raise NoGPU("no CUDA device found")
        self.cp = cp
        cp.cuda.Device(device).use()
        props = cp.cuda.runtime.getDeviceProperties(device)
        name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        self.info = DeviceInfo(name, (int(props["major"]), int(props["minor"])),
                               _fmt_cuda_version(cp.cuda.runtime.driverGetVersion()),
                               _fmt_cuda_version(cp.cuda.runtime.runtimeGetVersion()), cp.__version__)
        self._ptxas = _ptxas()

    # -- modules -------------------------------------------------------------------
    def target_for(self, needs_arch_specific: bool = False) -> str:
        t = self.info.target
        return t + ("a" if needs_arch_specific or self.info.cc[0] >= 9 else "")

    def load(self, ptx_src: str, target: str):
        """Assemble (ptxas, if present) and load a module; returns a cupy RawModule."""
        cp = self.cp
        tmp = tempfile.mkdtemp(prefix="ptxformal_")
        ptx_path = os.path.join(tmp, "m.ptx")
        with open(ptx_path, "w") as f:
            f.write(ptx_src)
        if self._ptxas:
            cubin = os.path.join(tmp, "m.cubin")
            r = subprocess.run([self._ptxas, f"-arch={target}", ptx_path, "-o", cubin], capture_output=True, text=True)
            if r.returncode != 0:
                raise RuntimeError(f"ptxas failed for {target}: {r.stderr.strip().splitlines()[:5]}")
            return cp.RawModule(path=cubin)
        return cp.RawModule(path=ptx_path)

    # -- runs ------------------------------------------------------------------------
    def run_cases(self, cases: list[Case], inputs: list[dict[str, np.ndarray]], ptx: str = "8.7",
                  target: str | None = None) -> list[np.ndarray]:
        """Run each case on its inputs ({'a','b','c'[, 'e']} -> [W,32,n]); returns d [W,32,nd] per case."""
        cp = self.cp
        target = target or self.target_for()
        src, names = module_source(cases, target, ptx)
        mod = self.load(src, target)
        outs = []
        for case, name, inp in zip(cases, names, inputs):
            form = case.form
            W = next(iter(inp.values())).shape[0]
            lay = operand_layout(form)
            i32, i64, o32, o64 = words_per_warp(form)
            b32 = np.zeros(max(1, i32 * W), np.uint32)
            b64 = np.zeros(max(1, i64 * W), np.uint64)
            for name_, (buf, base, n) in lay.items():
                if name_ == "d":
                    continue
                arr = inp[name_].reshape(W, 32, n) if name_ != "e" else inp[name_].reshape(W, 32, 1)
                tgt = b32 if buf == "32" else b64
                tgt[base * W: base * W + W * 32 * n] = arr.reshape(-1)
            d_in32, d_in64 = cp.asarray(b32), cp.asarray(b64)
            d_o32 = cp.zeros(max(1, o32 * W), cp.uint32)
            d_o64 = cp.zeros(max(1, o64 * W), cp.uint64)
            k = mod.get_function(name)
            threads = 128
            blocks = (W * 32 + threads - 1) // threads
            k((blocks,), (threads,), (d_in32, d_in64, d_o32, d_o64, np.uint32(W)))
            cp.cuda.runtime.deviceSynchronize()
            buf, _, n = lay["d"]
            res = cp.asnumpy(d_o32 if buf == "32" else d_o64)[: W * 32 * n].reshape(W, 32, n)
            outs.append(res)
        return outs
