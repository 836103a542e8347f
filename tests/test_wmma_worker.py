"""The fault-isolated executor (formal.hw.wmma_probe.run_isolated, formal/wmma/cuda_worker.py) without a GPU.

Two stand-ins: the worker's simulated device (a job's ``sim`` entry says whether it faults; a
faulted context stays dead, as CUDA's do), run through real worker processes; and a fake
``libcuda`` (Python functions behind ctypes' calling convention) that exercises the driver-API
device's argument packing, memory copies, fault detection and fresh-context recovery.
"""

from __future__ import annotations

import ctypes
import io
import json
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pytest

from formal.hw import wmma_probe as W
from formal.wmma import cuda_worker as CW


def _jobs(root: Path, n: int, faults: set[int], crash: set[int] = frozenset()) -> list[dict]:
    (root / "k").mkdir(parents=True, exist_ok=True)
    (root / "k" / "x.ptx").write_text("// stand-in")
    jobs = []
    for i in range(n):
        data = np.full(16, i, np.uint8)
        refs = W._write_job_inputs(root, f"j{i}", {"mem": data, "sim": data + 100})
        jobs.append({"name": f"j{i:03d}", "ptx": "k/x.ptx", "kernel": "x", "grid": 1, "block": 32,
                     "bufs": [{"name": "mem", "bytes": 16, "init": refs["mem"], "out": True}],
                     "args": [{"buf": "mem"}],
                     "sim": {"fault": i in faults, "crash": i in crash, "out": {"mem": refs["sim"]}}})
    return jobs


@pytest.mark.parametrize("mode", ["plain", "recover"])
def test_every_fault_is_attributed_to_its_own_job(tmp_path, mode):
    faults = {3, 4, 11, 19}
    jobs = _jobs(tmp_path, 24, faults)
    recs, info = W.run_isolated(jobs, tmp_path, workers=3, simulate=mode, log=lambda s: None)
    assert info["name"] == "simulated"
    for i, j in enumerate(jobs):
        r = recs[j["name"]]
        assert r.status == ("fault" if i in faults else "ok"), (j["name"], r)
        if i in faults:
            assert r.error_class == "misaligned"
        else:
            out = W._read_outputs(tmp_path, r)
            assert out["mem"].tolist() == [100 + i] * 16           # this job's own output, nothing stale
    # after a fault the next job of the same worker runs in a fresh context (recover) or process (plain)
    for i in sorted(faults):
        a, b = recs[jobs[i]["name"]], recs[jobs[i + 1]["name"]] if i + 1 < len(jobs) else None
        if b is not None and i + 1 not in faults and a.attempt == b.attempt:
            assert b.context > a.context
    procs = {r.attempt for r in recs.values()}
    if mode == "plain":
        assert len(procs) >= 3 + len(faults) - 1                  # a fresh worker after (almost) every fault
    else:
        assert len(procs) == 3                                    # one process per segment; contexts renewed in it


def test_isolated_jobs_and_crashes(tmp_path):
    jobs = _jobs(tmp_path, 8, faults={2}, crash={5})
    recs, _ = W.run_isolated(jobs, tmp_path, workers=2, isolate={"j002", "j006"}, simulate="plain", log=lambda s: None)
    assert recs["j002"].status == "fault" and recs["j002"].isolated
    assert recs["j006"].status == "ok" and recs["j006"].isolated
    assert recs["j005"].status == "crash" and "139" in recs["j005"].error
    assert all(recs[f"j{i:03d}"].status == "ok" for i in (0, 1, 3, 4, 7))


def test_deadline_leaves_jobs_not_run(tmp_path):
    jobs = _jobs(tmp_path, 6, faults=set())
    recs, _ = W.run_isolated(jobs, tmp_path, workers=2, deadline_s=0.0, simulate="plain", log=lambda s: None)
    assert {r.status for r in recs.values()} == {"not_run"}


def test_segments_keep_tier_order():
    jobs = [{"name": f"a{i}", "tier": 2 if i < 3 else 1} for i in range(6)] + [{"name": "r", "tier": 0}]
    segs = W._segments(jobs, {"r", "a4"}, 2)
    order = [j["name"] for s in segs for j in s]
    assert order[0] == "r" and order[1] == "a4"
    assert order.index("a3") < order.index("a0")                  # tier 1 before tier 2
    assert all(len(s) == 1 for s in segs[:2])


def test_no_device_is_reported_once(tmp_path, monkeypatch):
    jobs = _jobs(tmp_path, 3, faults=set())
    monkeypatch.setattr(W, "WORKER", Path(CW.__file__))
    recs, _ = W.run_isolated(jobs, tmp_path, workers=1, backend="cupy", log=lambda s: None)
    # no CuPy / no GPU here: every job says why, none is counted as a verdict
    assert {r.status for r in recs.values()} <= {"init_error", "crash"}


# -- the driver-API device against a fake libcuda ---------------------------------------------

class _FakeCuda:
    """Just enough of libcuda: contexts, modules, memory, launches of three 'kernels'
    (canary: *p = 42; copy: dst[i] = src[i] + add; fault: a misaligned address, sticky)."""

    MISALIGNED = 716

    def __init__(self, primary: bool = False):
        self.mem: dict[int, bytearray] = {}
        self.next = 0x7F0000000000
        self.sticky = 0
        self.ctx = 0
        self.contexts = 0
        self.kernels: dict[int, str] = {}
        self.launches: list[tuple] = []
        names = {"cuInit": lambda flags: 0, "cuDeviceGet": self.dev_get, "cuDeviceGetName": self.dev_name,
                 "cuDeviceGetAttribute": self.attr, "cuDriverGetVersion": self.ver, "cuCtxCreate_v2": self.ctx_create,
                 "cuCtxDestroy_v2": self.ctx_destroy, "cuCtxSynchronize": lambda: self.sticky,
                 "cuModuleLoadData": self.mod_load, "cuModuleGetFunction": self.get_fn, "cuMemAlloc_v2": self.alloc,
                 "cuMemFree_v2": self.free, "cuMemsetD8_v2": self.memset, "cuMemcpyHtoD_v2": self.htod,
                 "cuMemcpyDtoH_v2": self.dtoh, "cuLaunchKernel": self.launch, "cuGetErrorName": self.err_name}
        if primary:          # a driver without cuCtxCreate_v2: the primary-context path
            del names["cuCtxCreate_v2"], names["cuCtxDestroy_v2"]
            names.update({"cuDevicePrimaryCtxRetain": lambda out, dev: self.ctx_create(out, 0, dev),
                          "cuDevicePrimaryCtxRelease_v2": lambda dev: self.ctx_destroy(self.ctx),
                          "cuCtxSetCurrent": lambda ctx: 0})
        for k, f in names.items():
            setattr(self, k, (lambda *a, f=f: f(*a)))      # plain functions: ctypes sets argtypes on them

    def dev_get(self, out, ordinal):
        out._obj.value = ordinal
        return 0

    def dev_name(self, buf, n, dev):
        buf.value = b"Fake GPU"
        return 0

    def attr(self, out, which, dev):
        out._obj.value = {75: 9, 76: 0}[which]
        return 0

    def ver(self, out):
        out._obj.value = 13000
        return 0

    def ctx_create(self, out, flags, dev):
        self.contexts += 1
        self.ctx = 1000 + self.contexts
        self.sticky = 0
        self.mem = {}
        out._obj.value = self.ctx
        return 0

    def ctx_destroy(self, ctx):
        rc = self.sticky
        self.ctx, self.mem = 0, {}
        return rc

    def mod_load(self, out, image):
        if self.sticky:
            return self.sticky
        out._obj.value = 5000 + len(self.kernels) * 10
        return 0

    def get_fn(self, out, mod, name):
        h = mod.value + 1 + len(self.kernels)
        self.kernels[h] = name.decode()
        out._obj.value = h
        return 0

    def _find(self, ptr):
        for base, buf in self.mem.items():
            if base <= ptr < base + len(buf):
                return buf, ptr - base
        raise AssertionError(f"wild pointer {ptr:#x}")

    def alloc(self, out, n):
        if self.sticky:
            return self.sticky
        base = self.next
        self.next += (n + 4095) // 4096 * 4096 + 512          # bases only 512-aligned: the worker must align
        self.mem[base] = bytearray(n)
        out._obj.value = base
        return 0

    def free(self, ptr):
        self.mem.pop(ptr, None)
        return 0

    def memset(self, ptr, v, n):
        buf, off = self._find(ptr)
        buf[off:off + n] = bytes([v]) * n
        return self.sticky

    def htod(self, ptr, host, n):
        if self.sticky:
            return self.sticky
        buf, off = self._find(ptr)
        buf[off:off + n] = ctypes.string_at(host, n)
        return 0

    def dtoh(self, host, ptr, n):
        if self.sticky:
            return self.sticky
        buf, off = self._find(ptr)
        ctypes.memmove(host, bytes(buf[off:off + n]), n)
        return 0

    def launch(self, fn, gx, gy, gz, bx, by, bz, shmem, stream, params, extra):
        if self.sticky:
            return self.sticky
        name = self.kernels[fn.value if hasattr(fn, "value") else fn]
        u64 = lambda i: ctypes.cast(params[i], ctypes.POINTER(ctypes.c_uint64)).contents.value  # noqa: E731
        u32 = lambda i: ctypes.cast(params[i], ctypes.POINTER(ctypes.c_uint32)).contents.value  # noqa: E731
        self.launches.append((name, gx, bx))
        if name == "canary":
            buf, off = self._find(u64(0))
            buf[off:off + 4] = (42).to_bytes(4, "little")
        elif name == "copy":
            src, dst, add = u64(0), u64(1), u32(2)
            assert src % 1024 == 0 and dst % 256 == 0, "buffers must be aligned as the job asks"
            s, so = self._find(src)
            d, do = self._find(dst)
            d[do:do + 16] = bytes((x + add) & 0xFF for x in s[so:so + 16])
        elif name == "fault":
            self.sticky = self.MISALIGNED                  # reported at the next synchronisation, as CUDA does
        return 0

    def err_name(self, rc, out):
        out._obj.value = {716: b"CUDA_ERROR_MISALIGNED_ADDRESS"}.get(rc, b"CUDA_ERROR_UNKNOWN")
        return 0


@pytest.mark.parametrize("primary", [False, True])
def test_driver_device_packs_launches_detects_faults_and_recovers(tmp_path, monkeypatch, primary):
    fake = _FakeCuda(primary)
    monkeypatch.setattr(ctypes, "CDLL", lambda name: fake)
    (tmp_path / "k").mkdir()
    (tmp_path / "k" / "m.ptx").write_text("// the fake does not read PTX")
    jobs = []
    for i, kern in enumerate(["copy", "copy", "fault", "copy"]):
        refs = W._write_job_inputs(tmp_path, f"d{i}", {"src": np.arange(16, dtype=np.uint8) * (i + 1)})
        jobs.append({"name": f"d{i}", "ptx": "k/m.ptx", "kernel": kern, "grid": 1, "block": 32,
                     "bufs": [{"name": "src", "bytes": 16, "init": refs["src"], "align": 1024},
                              {"name": "dst", "bytes": 16, "align": 256, "out": True}],
                     "args": [{"buf": "src"}, {"buf": "dst"}, {"u32": 7 + i}]})
    W._close_inputs(tmp_path)
    seg = tmp_path / "seg.json"
    seg.write_text(json.dumps({"root": str(tmp_path), "jobs": jobs}))
    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = CW.run_segment(str(seg), str(tmp_path / "res"), backend="driver")
    events = [json.loads(x) for x in buf.getvalue().splitlines()]
    assert rc == 0
    dev = next(e for e in events if e["event"] == "device")
    assert dev["info"]["name"] == "Fake GPU" and dev["info"]["compute_capability"] == "9.0" and dev["note"] is None
    assert dev["info"]["backend"].endswith("primary context" if primary else "own contexts")
    done = {e["name"]: e for e in events if e["event"] == "done"}
    assert [done[f"d{i}"]["status"] for i in range(4)] == ["ok", "ok", "fault", "ok"]
    assert "CUDA_ERROR_MISALIGNED_ADDRESS" in done["d2"]["error"]
    assert done["d3"]["context"] == done["d2"]["context"] + 1          # the job after the fault: a fresh context
    assert fake.contexts == 2 and [n for n, _, _ in fake.launches].count("canary") == 2
    for i in (0, 1, 3):
        out = CW.read_ref(tmp_path / "res", done[f"d{i}"]["out"]["dst"])
        assert out.tolist() == [((x * (i + 1)) + 7 + i) & 0xFF for x in range(16)]


def test_driver_device_falls_back_to_cupy_when_libcuda_is_missing(monkeypatch):
    def no_lib(name):
        raise OSError("not here")
    monkeypatch.setattr(ctypes, "CDLL", no_lib)
    try:
        dev, note = CW.open_device(0, "driver")
    except Exception as e:  # noqa: BLE001 - no CuPy either (CI): the fallback was still attempted
        assert "cupy" in f"{type(e).__name__} {e}".lower() or isinstance(e, (ImportError, RuntimeError))
        return
    assert isinstance(dev, CW.CudaDevice) and "driver API unavailable" in note


def test_a_device_that_faults_on_everything_is_given_up(tmp_path):
    """One worker, every job faults, no fresh contexts: after 3 * workers + 3 barren worker
    processes in a row the executor stops instead of starting one process per remaining job."""
    jobs = _jobs(tmp_path, 20, faults=set(range(20)))
    recs, _ = W.run_isolated(jobs, tmp_path, workers=1, simulate="plain", log=lambda s: None)
    st = [recs[j["name"]].status for j in jobs]
    assert st[:7] == ["fault"] * 7 and set(st[7:]) == {"not_run"}
    assert "device unusable" in recs[jobs[-1]["name"]].error
