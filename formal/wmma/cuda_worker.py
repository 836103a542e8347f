"""Child process of the fault-isolated executor (:func:`formal.hw.wmma_probe.run_isolated`).

A CUDA fault (misaligned or illegal address) is *sticky*: the context is dead, every later
call fails with the same error, and the error is often first reported at a later
synchronisation.  So every job (one kernel launch) runs in a worker process that owns one
CUDA context, and the worker

1. copies the job's inputs to the device and synchronises -- the context is healthy
   *before* the launch (if not: status ``context_error``, not attributed to this job);
2. launches the kernel and synchronises -- an error now is this kernel's (``fault``);
3. copies the outputs back, saves them, and only then starts the next job.

After a fault the context is never used again: the default device (:class:`DriverDevice`,
the CUDA driver API through ctypes) destroys it, creates a fresh one, checks it with a
canary kernel and goes on with the next job; if that fails -- or with the CuPy device,
which cannot drop its context -- the worker exits with :data:`FAULT_EXIT` and the parent
starts a fresh worker at the next job.  Attribution is therefore exact: no other work is
in flight between the previous job's successful synchronisation and this job's launch,
and every job after a fault runs in a new context (its record names the context).

Protocol: ``python PATH/cuda_worker.py SEGMENT.json RESULT_DIR [--device N] [--backend driver|cupy]
[--simulate | --simulate-recover]``.
SEGMENT.json is ``{"root": DIR, "jobs": [job, ...]}``; a job is::

    {"name": "wa00001", "ptx": "k/wk0001.ptx", "kernel": "wk0001", "grid": 1, "block": 32,
     "bufs": [{"name": "mem", "bytes": 2048, "init": ["in.bin", 40960, 2048], "align": 1024, "out": true}, ...],
     "args": [{"buf": "mem"}, {"u64": 8}, {"u32": 24}, ...]}

(paths relative to ``root``; ``init`` = [file, byte offset, bytes] of the initial contents in a
blob file, absent: zero-filled).  Stdout carries one JSON object
per line: ``{"event": "device", ...}``, then per job ``{"event": "start", "name": ...}`` and
``{"event": "done", "name": ..., "status": "ok" | "fault" | "load_error" | "context_error",
"error": ..., "seconds": ..., "context": k, "out": {buf: [file, offset, bytes]}}``
(``{"event": "context", "n": k}`` when the k-th context of the worker starts); the output
buffers are appended to one blob file per worker in RESULT_DIR (``out`` says where).

This file is standalone on purpose (json, numpy and CuPy only; run by path, not as part
of the package): a restart after a fault then costs one interpreter and one CUDA context,
not an import of the whole engine.  ``--simulate`` replaces the GPU by a stand-in that
reads each job's ``sim`` entry (``{"fault": bool, "out": {buf: file}}``) and stays dead after
a fault, like a real context (``--simulate-recover``: and can start a fresh one) -- the
tests exercise the protocol with it.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

FAULT_EXIT = 3          # the worker stopped at a fault (or a dead context)
INIT_EXIT = 4           # no device (CuPy missing, no GPU): nothing ran


CANARY_PTX = """.version 7.0
.target sm_50
.address_size 64
.visible .entry canary(.param .u64 p)
{
  .reg .b64 %a;
  .reg .b32 %v;
  ld.param.u64 %a, [p];
  cvta.to.global.u64 %a, %a;
  mov.u32 %v, 42;
  st.global.u32 [%a], %v;
  ret;
}
"""


class CudaError(RuntimeError):
    pass


class DriverDevice:
    """The CUDA driver API through ctypes (libcuda only).  One context at a time; after a
    fault :meth:`recover` destroys it and creates a fresh one, checked by a canary kernel."""

    can_recover = True

    def __init__(self, device: int = 0):
        import ctypes as C

        self.C = C
        lib = None
        for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
            try:
                lib = C.CDLL(name)
                break
            except OSError:
                continue
        if lib is None:
            raise CudaError("libcuda not found")
        self.lib = lib
        P, I, U, U64, SZ, VP = C.POINTER, C.c_int, C.c_uint, C.c_uint64, C.c_size_t, C.c_void_p
        sigs = {"cuInit": [U], "cuDeviceGet": [P(I), I], "cuDeviceGetName": [C.c_char_p, I, I],
                "cuDeviceGetAttribute": [P(I), I, I], "cuDriverGetVersion": [P(I)],
                "cuCtxSynchronize": [],
                "cuModuleLoadData": [P(VP), C.c_char_p], "cuModuleGetFunction": [P(VP), VP, C.c_char_p],
                "cuMemAlloc_v2": [P(U64), SZ], "cuMemFree_v2": [U64], "cuMemsetD8_v2": [U64, C.c_ubyte, SZ],
                "cuMemcpyHtoD_v2": [U64, VP, SZ], "cuMemcpyDtoH_v2": [VP, U64, SZ],
                "cuLaunchKernel": [VP, U, U, U, U, U, U, U, VP, P(VP), P(VP)],
                "cuGetErrorName": [I, P(C.c_char_p)]}
        # a context of our own (destroyed after a fault); where the driver lacks cuCtxCreate_v2,
        # the primary context (released -- which destroys it -- after a fault, then retained anew)
        self._primary = not hasattr(lib, "cuCtxCreate_v2")
        if self._primary:
            sigs.update({"cuDevicePrimaryCtxRetain": [P(VP), I], "cuDevicePrimaryCtxRelease_v2": [I],
                         "cuCtxSetCurrent": [VP]})
        else:
            sigs.update({"cuCtxCreate_v2": [P(VP), U, I], "cuCtxDestroy_v2": [VP]})
        for fn, args in sigs.items():
            f = getattr(lib, fn)
            f.argtypes = args
            f.restype = I
        self._ok(lib.cuInit(0), "cuInit")
        dev = I()
        self._ok(lib.cuDeviceGet(C.byref(dev), device), "cuDeviceGet")
        self.dev = dev.value
        name = C.create_string_buffer(256)
        self._ok(lib.cuDeviceGetName(name, 256, self.dev), "cuDeviceGetName")
        major, minor, ver = I(), I(), I()
        lib.cuDeviceGetAttribute(C.byref(major), 75, self.dev)     # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
        lib.cuDeviceGetAttribute(C.byref(minor), 76, self.dev)     # ..._MINOR
        lib.cuDriverGetVersion(C.byref(ver))
        self.info = {"name": name.value.decode(errors="replace"), "compute_capability": f"{major.value}.{minor.value}",
                     "driver": f"{ver.value // 1000}.{(ver.value % 1000) // 10}",
                     "backend": "driver API (ctypes), " + ("primary context" if self._primary else "own contexts")}
        self.ctx = None
        self.contexts = 0
        self._mods: dict[str, object] = {}
        self._new_context()

    # -- errors --------------------------------------------------------------------
    def _name(self, rc: int) -> str:
        s = self.C.c_char_p()
        if self.lib.cuGetErrorName(rc, self.C.byref(s)) == 0 and s.value:
            return s.value.decode()
        return f"CUDA error {rc}"

    def _ok(self, rc: int, what: str) -> None:
        if rc != 0:
            raise CudaError(f"{what}: {self._name(rc)} ({rc})")

    # -- contexts ------------------------------------------------------------------
    def _new_context(self) -> None:
        C = self.C
        ctx = C.c_void_p()
        if self._primary:
            self._ok(self.lib.cuDevicePrimaryCtxRetain(C.byref(ctx), self.dev), "cuDevicePrimaryCtxRetain")
            self._ok(self.lib.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
        else:
            self._ok(self.lib.cuCtxCreate_v2(C.byref(ctx), 0, self.dev), "cuCtxCreate")
        self.ctx = ctx
        self.contexts += 1
        self._mods = {}
        # canary: a fresh context must run a kernel and return its result before any job
        mod, fn = C.c_void_p(), C.c_void_p()
        self._ok(self.lib.cuModuleLoadData(C.byref(mod), CANARY_PTX.encode() + b"\0"), "canary load")
        self._ok(self.lib.cuModuleGetFunction(C.byref(fn), mod, b"canary"), "canary function")
        bufs, args = self._alloc_args([{"name": "p", "bytes": 4, "align": 256}], [{"buf": "p"}], None, {})
        try:
            self._launch(fn, 1, 1, args)
            out = self._get(bufs["p"])
        finally:
            self._free(bufs)
        if int(out.view(np.uint32)[0]) != 42:
            raise CudaError("canary kernel returned a wrong value")

    def recover(self) -> None:
        """Drop the (dead) context and start a checked fresh one."""
        if self.ctx is not None:
            # may itself report the sticky error; either way the context is gone
            if self._primary:
                self.lib.cuDevicePrimaryCtxRelease_v2(self.dev)
            else:
                self.lib.cuCtxDestroy_v2(self.ctx)
            self.ctx = None
        self._new_context()

    def healthy(self) -> bool:
        return self.lib.cuCtxSynchronize() == 0

    # -- memory and launches --------------------------------------------------------
    def _alloc_args(self, specs: list[dict], argspec: list[dict], job: dict | None, _unused: dict):
        C = self.C
        bufs = {}
        try:
            for b in specs:
                n, al = int(b["bytes"]), int(b.get("align", 256))
                base = C.c_uint64()
                self._ok(self.lib.cuMemAlloc_v2(C.byref(base), n + al), "cuMemAlloc")
                ptr = base.value + ((-base.value) % al)
                bufs[b["name"]] = (base.value, ptr, n)
                self._ok(self.lib.cuMemsetD8_v2(ptr, 0, n), "cuMemsetD8")
                if b.get("init") and job is not None:
                    host = np.ascontiguousarray(read_ref(Path(job["_root"]), b["init"]))
                    if host.size != n:
                        raise ValueError(f"{job['name']}: buffer {b['name']} has {host.size} bytes, expected {n}")
                    self._ok(self.lib.cuMemcpyHtoD_v2(ptr, host.ctypes.data, n), "cuMemcpyHtoD")
        except Exception:
            self._free(bufs)
            raise
        vals = []
        for a in argspec:
            if "buf" in a:
                vals.append(C.c_uint64(bufs[a["buf"]][1]))
            elif "u32" in a:
                vals.append(C.c_uint32(int(a["u32"])))
            else:
                vals.append(C.c_uint64(int(a["u64"])))
        ptrs = (C.c_void_p * len(vals))(*[C.cast(C.pointer(v), C.c_void_p) for v in vals])
        return bufs, (vals, ptrs)

    def _launch(self, fn, grid: int, block: int, args) -> None:
        vals, ptrs = args
        self._ok(self.lib.cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, None, ptrs, None), "cuLaunchKernel")
        self._ok(self.lib.cuCtxSynchronize(), "cuCtxSynchronize after the launch")

    def _get(self, buf) -> np.ndarray:
        _, ptr, n = buf
        host = np.empty(n, np.uint8)
        self._ok(self.lib.cuMemcpyDtoH_v2(host.ctypes.data, ptr, n), "cuMemcpyDtoH")
        return host

    def _free(self, bufs: dict) -> None:
        for base, _, _ in bufs.values():
            self.lib.cuMemFree_v2(base)

    # -- the worker interface ----------------------------------------------------------
    def function(self, ptx_path: Path, kernel: str):
        C = self.C
        key = str(ptx_path)
        if key not in self._mods:
            mod = C.c_void_p()
            self._ok(self.lib.cuModuleLoadData(C.byref(mod), Path(key).read_bytes() + b"\0"), f"cuModuleLoadData {key}")
            self._mods[key] = mod
        fn = C.c_void_p()
        self._ok(self.lib.cuModuleGetFunction(C.byref(fn), self._mods[key], kernel.encode()), f"cuModuleGetFunction {kernel}")
        return fn

    def stage(self, job: dict, root: Path):
        bufs, args = self._alloc_args(job["bufs"], job["args"], job, {})
        rc = self.lib.cuCtxSynchronize()
        if rc != 0:
            self._free(bufs)
            raise CudaError(f"cuCtxSynchronize before the launch: {self._name(rc)} ({rc})")
        return bufs, args

    def launch(self, fn, job: dict, args) -> None:
        self._launch(fn, int(job.get("grid", 1)), int(job.get("block", 32)), args)

    def fetch(self, job: dict, bufs: dict) -> dict:
        try:
            return {b["name"]: self._get(bufs[b["name"]]) for b in job["bufs"] if b.get("out")}
        finally:
            self._free(bufs)

    def release(self, bufs: dict) -> None:
        """Buffers of a job that faulted: their context is about to be destroyed anyway."""


class CudaDevice:
    """One CUDA context on GPU `device`, through CuPy; modules are JIT-loaded from PTX files.
    CuPy cannot drop its context: after a fault the worker exits and the parent starts another."""

    can_recover = False

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
                host = read_ref(root, b["init"])
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

    def release(self, bufs: dict) -> None:
        pass


class SimDevice:
    """Stand-in for tests: a job's ``sim`` entry says whether it faults and what it outputs."""

    info = {"name": "simulated"}

    def __init__(self, can_recover: bool = False):
        self.dead = False
        self.can_recover = can_recover
        self.contexts = 1

    def recover(self) -> None:
        self.dead = False
        self.contexts += 1

    def release(self, bufs: dict) -> None:
        pass

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
            bufs[b["name"]] = (read_ref(root, b["init"]) if b.get("init")
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
                out[b["name"]] = read_ref(root, f) if f else bufs[b["name"]]
        return out


def _emit(**kw) -> None:
    sys.stdout.write(json.dumps(kw) + "\n")
    sys.stdout.flush()


_MAPS: dict[str, np.ndarray] = {}


def read_ref(root: Path, ref) -> np.ndarray:
    """The bytes [offset, offset + n) of a blob file (memory-mapped once per file)."""
    f, off, n = ref
    key = str(Path(root) / f)
    if key not in _MAPS:
        _MAPS[key] = np.memmap(key, dtype=np.uint8, mode="r")
    return np.array(_MAPS[key][int(off):int(off) + int(n)])


class BlobWriter:
    """Appends byte arrays to one file; returns [name, offset, bytes] references."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.fh = open(self.path, "ab")

    def put(self, a: np.ndarray) -> list:
        b = np.ascontiguousarray(a).view(np.uint8).reshape(-1)
        off = self.fh.tell()
        self.fh.write(b.tobytes())
        return [self.path.name, off, int(b.size)]

    def flush(self) -> None:
        self.fh.flush()

    def close(self) -> None:
        self.fh.close()


def open_device(device: int = 0, backend: str = "driver", simulate: str | None = None):
    """The device of a worker: 'driver' (ctypes; falls back to CuPy if libcuda or its canary
    fails), 'cupy', or a simulated one ('plain' / 'recover')."""
    if simulate:
        return SimDevice(can_recover=simulate == "recover"), None
    if backend == "driver":
        try:
            return DriverDevice(device), None
        except Exception as e:  # noqa: BLE001 - fall back, and say why
            why = f"driver API unavailable ({type(e).__name__}: {str(e)[:200]}); using CuPy"
            try:
                return CudaDevice(device), why
            except Exception as e2:  # noqa: BLE001
                raise RuntimeError(f"{why}; CuPy unavailable too ({type(e2).__name__}: {str(e2)[:200]})") from None
    return CudaDevice(device), None


def run_segment(seg_path: str, res_dir: str, device: int = 0, simulate: str | None = None,
                backend: str = "driver") -> int:
    seg = json.loads(Path(seg_path).read_text())
    root = Path(seg["root"])
    res = Path(res_dir)
    res.mkdir(parents=True, exist_ok=True)
    try:
        dev, note = open_device(device, backend, simulate)
    except Exception as e:  # noqa: BLE001 - no CuPy / no GPU: say so once, run nothing
        _emit(event="init_error", error=f"{type(e).__name__}: {str(e)[:300]}")
        return INIT_EXIT
    import os
    writer = BlobWriter(res / f"out.{os.getpid()}.{Path(seg_path).stem}.bin")
    _emit(event="device", info=dev.info, note=note)
    _emit(event="context", n=getattr(dev, "contexts", 1))

    def after_fault() -> bool:
        """A fresh, checked context, or False (the worker must exit)."""
        if not dev.can_recover:
            return False
        try:
            dev.recover()
        except Exception as e:  # noqa: BLE001
            _emit(event="recover_failed", error=f"{type(e).__name__}: {str(e)[:300]}")
            return False
        _emit(event="context", n=dev.contexts)
        return True

    for job in seg["jobs"]:
        name = job["name"]
        job["_root"] = str(root)
        ctx = getattr(dev, "contexts", 1)
        _emit(event="start", name=name, context=ctx)
        t0 = time.perf_counter()

        def done(status: str, error: str | None = None, **kw) -> None:
            _emit(event="done", name=name, status=status, error=error, seconds=round(time.perf_counter() - t0, 4),
                  context=ctx, **kw)

        try:
            fn = dev.function(root / job["ptx"], job["kernel"])
        except Exception as e:  # noqa: BLE001 - a module that does not load; is the context still usable?
            ok = dev.healthy()
            done("load_error", f"{type(e).__name__}: {str(e)[:300]}", context_alive=ok)
            if not ok and not after_fault():
                return FAULT_EXIT
            continue
        try:
            bufs, args = dev.stage(job, root)
        except Exception as e:  # noqa: BLE001 - the context was unhealthy before the launch: not this job's fault
            done("context_error", f"{type(e).__name__}: {str(e)[:300]}")
            if not after_fault():
                return FAULT_EXIT
            continue
        try:
            dev.launch(fn, job, args)
        except Exception as e:  # noqa: BLE001 - the error of this launch: record it; never use this context again
            dev.release(bufs)
            done("fault", f"{type(e).__name__}: {str(e)[:300]}")
            if not after_fault():
                return FAULT_EXIT
            continue
        out = dev.fetch(job, bufs)
        refs = {k: writer.put(v) for k, v in out.items()}
        writer.flush()
        done("ok", out=refs)
    return 0


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: cuda_worker.py SEGMENT.json RESULT_DIR [--device N] [--backend driver|cupy] "
              "[--simulate | --simulate-recover]", file=sys.stderr)
        return 2
    dev = int(argv[argv.index("--device") + 1]) if "--device" in argv else 0
    backend = argv[argv.index("--backend") + 1] if "--backend" in argv else "driver"
    sim = "recover" if "--simulate-recover" in argv else ("plain" if "--simulate" in argv else None)
    return run_segment(argv[0], argv[1], dev, sim, backend)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
