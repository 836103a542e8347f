"""Child process of the fault-isolated executor (:func:`formal.hw.wmma_probe.run_isolated`).

A CUDA fault (misaligned or illegal address) is *sticky*: the context is dead, every later
call fails with the same error, and the error is often first reported at a later
synchronisation.  So every job (one kernel launch) runs in a worker process that owns one
CUDA context, and the worker

1. copies the job's inputs to the device and synchronises -- the context is healthy
   *before* the launch (if not: status ``context_error``, not attributed to this job);
2. launches the kernel and synchronises -- an error now is this kernel's (``fault``);
3. copies the outputs back, saves them, and only then starts the next job.

At the first fault it reports and exits with :data:`FAULT_EXIT`; the parent starts a fresh
worker at the next job.  Attribution is therefore exact: no other work is in flight
between the previous job's successful synchronisation and this job's launch.

Protocol: ``python PATH/cuda_worker.py SEGMENT.json RESULT_DIR [--device N] [--simulate]``.
SEGMENT.json is ``{"root": DIR, "jobs": [job, ...]}``; a job is::

    {"name": "wa00001", "ptx": "k/wk0001.ptx", "kernel": "wk0001", "grid": 1, "block": 32,
     "bufs": [{"name": "mem", "bytes": 2048, "init": "in/wa00001.mem.npy", "align": 1024, "out": true}, ...],
     "args": [{"buf": "mem"}, {"u64": 8}, {"u32": 24}, ...]}

(paths relative to ``root``; ``init`` absent: zero-filled).  Stdout carries one JSON object
per line: ``{"event": "device", ...}``, then per job ``{"event": "start", "name": ...}`` and
``{"event": "done", "name": ..., "status": "ok" | "fault" | "load_error" | "context_error",
"error": ..., "seconds": ...}``; outputs go to ``RESULT_DIR/<name>.npz``.

This file is standalone on purpose (json, numpy and CuPy only; run by path, not as part
of the package): a restart after a fault then costs one interpreter and one CUDA context,
not an import of the whole engine.  ``--simulate`` replaces CuPy by a stand-in that reads
each job's ``sim`` entry (``{"fault": bool, "out": {buf: file}}``) and stays dead after a
fault, like a real context -- the tests exercise the protocol with it.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

FAULT_EXIT = 3          # the worker stopped at a fault (or a dead context)
INIT_EXIT = 4           # no device (CuPy missing, no GPU): nothing ran


class CudaDevice:
    """One CUDA context on GPU `device`, through CuPy; modules are JIT-loaded from PTX files."""

    def __init__(self, device: int = 0):
        import cupy as cp

        self.cp = cp
        cp.cuda.Device(device).use()
        props = cp.cuda.runtime.getDeviceProperties(device)
        name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        v = cp.cuda.runtime.driverGetVersion()
        rt = cp.cuda.runtime.runtimeGetVersion()
        self.info = {"name": name, "compute_capability": f"{props['major']}.{props['minor']}",
                     "driver": f"{v // 1000}.{(v % 1000) // 10}", "cuda_runtime": f"{rt // 1000}.{(rt % 1000) // 10}",
                     "cupy": cp.__version__}
        self._mods: dict[str, object] = {}

    def function(self, ptx_path: Path, kernel: str):
        key = str(ptx_path)
        if key not in self._mods:
            self._mods[key] = self.cp.RawModule(path=key)
        return self._mods[key].get_function(kernel)

    def healthy(self) -> bool:
        try:
            self.cp.cuda.runtime.deviceSynchronize()
            return True
        except Exception:  # noqa: BLE001 - any error here means the context is gone
            return False

    def stage(self, job: dict, root: Path) -> tuple[dict, tuple]:
        """Allocate and fill the job's buffers; synchronise (raises if the context is unhealthy)."""
        cp = self.cp
        bufs = {}
        for b in job["bufs"]:
            n, al = int(b["bytes"]), int(b.get("align", 256))
            raw = cp.zeros(n + al, dtype=cp.uint8)
            off = (-raw.data.ptr) % al
            arr = raw[off:off + n]
            if b.get("init"):
                host = np.load(root / b["init"]).view(np.uint8).reshape(-1)
                if host.size != n:
                    raise ValueError(f"{job['name']}: buffer {b['name']} has {host.size} bytes, expected {n}")
                arr.set(host)
            bufs[b["name"]] = arr
        args = []
        for a in job["args"]:
            if "buf" in a:
                args.append(bufs[a["buf"]])
            elif "u32" in a:
                args.append(np.uint32(a["u32"]))
            else:
                args.append(np.uint64(a["u64"]))
        cp.cuda.runtime.deviceSynchronize()
        return bufs, tuple(args)

    def launch(self, fn, job: dict, args: tuple) -> None:
        fn((int(job.get("grid", 1)),), (int(job.get("block", 32)),), args)
        self.cp.cuda.runtime.deviceSynchronize()

    def fetch(self, job: dict, bufs: dict) -> dict:
        return {b["name"]: self.cp.asnumpy(bufs[b["name"]]) for b in job["bufs"] if b.get("out")}


class SimDevice:
    """Stand-in for tests: a job's ``sim`` entry says whether it faults and what it outputs."""

    info = {"name": "simulated"}

    def __init__(self):
        self.dead = False

    def function(self, ptx_path: Path, kernel: str):
        if not Path(ptx_path).exists():
            raise FileNotFoundError(f"no PTX file {ptx_path}")
        return kernel

    def healthy(self) -> bool:
        return not self.dead

    def stage(self, job: dict, root: Path) -> tuple[dict, tuple]:
        if self.dead:
            raise RuntimeError("CUDA_ERROR_MISALIGNED_ADDRESS: misaligned address (simulated sticky error)")
        bufs = {}
        for b in job["bufs"]:
            bufs[b["name"]] = (np.load(root / b["init"]).view(np.uint8).reshape(-1).copy() if b.get("init")
                               else np.zeros(int(b["bytes"]), np.uint8))
        return bufs, ()

    def launch(self, fn, job: dict, args: tuple) -> None:
        sim = job.get("sim") or {}
        if sim.get("fault"):
            self.dead = True
            raise RuntimeError("cudaErrorMisalignedAddress: misaligned address (simulated)")
        if sim.get("crash"):
            sys.stdout.flush()
            import os
            os._exit(139)                     # a worker that dies without reporting
        if sim.get("hang"):
            time.sleep(3600)

    def fetch(self, job: dict, bufs: dict) -> dict:
        sim = job.get("sim") or {}
        root = Path(job["_root"])
        out = {}
        for b in job["bufs"]:
            if b.get("out"):
                f = (sim.get("out") or {}).get(b["name"])
                out[b["name"]] = np.load(root / f).view(np.uint8).reshape(-1) if f else bufs[b["name"]]
        return out


def _emit(**kw) -> None:
    sys.stdout.write(json.dumps(kw) + "\n")
    sys.stdout.flush()


def run_segment(seg_path: str, res_dir: str, device: int = 0, simulate: bool = False) -> int:
    seg = json.loads(Path(seg_path).read_text())
    root = Path(seg["root"])
    res = Path(res_dir)
    res.mkdir(parents=True, exist_ok=True)
    try:
        dev = SimDevice() if simulate else CudaDevice(device)
    except Exception as e:  # noqa: BLE001 - no CuPy / no GPU: say so once, run nothing
        _emit(event="init_error", error=f"{type(e).__name__}: {str(e)[:300]}")
        return INIT_EXIT
    _emit(event="device", info=dev.info)
    for job in seg["jobs"]:
        name = job["name"]
        job["_root"] = str(root)
        _emit(event="start", name=name)
        t0 = time.perf_counter()
        try:
            fn = dev.function(root / job["ptx"], job["kernel"])
        except Exception as e:  # noqa: BLE001 - a module that does not load; is the context still usable?
            ok = dev.healthy()
            _emit(event="done", name=name, status="load_error", error=f"{type(e).__name__}: {str(e)[:300]}",
                  seconds=round(time.perf_counter() - t0, 4), context_alive=ok)
            if not ok:
                return FAULT_EXIT
            continue
        try:
            bufs, args = dev.stage(job, root)
        except Exception as e:  # noqa: BLE001 - the context was unhealthy before the launch: not this job's fault
            _emit(event="done", name=name, status="context_error", error=f"{type(e).__name__}: {str(e)[:300]}",
                  seconds=round(time.perf_counter() - t0, 4))
            return FAULT_EXIT
        try:
            dev.launch(fn, job, args)
        except Exception as e:  # noqa: BLE001 - the error of this launch: record and end this context
            _emit(event="done", name=name, status="fault", error=f"{type(e).__name__}: {str(e)[:300]}",
                  seconds=round(time.perf_counter() - t0, 4))
            return FAULT_EXIT
        out = dev.fetch(job, bufs)
        np.savez(res / f"{name}.npz", **out)
        _emit(event="done", name=name, status="ok", seconds=round(time.perf_counter() - t0, 4))
    return 0


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: cuda_worker.py SEGMENT.json RESULT_DIR [--device N] [--simulate]", file=sys.stderr)
        return 2
    dev = int(argv[argv.index("--device") + 1]) if "--device" in argv else 0
    return run_segment(argv[0], argv[1], dev, "--simulate" in argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
