"""A stand-in for CuPy (tests only) so tools/run_hopper_kernels.py's GPU path runs without a GPU.

Device arrays are host numpy arrays (their address is the "device pointer"); RawModule parses the
PTX entry's parameter sizes and registers them with the fake libcuda.so.1 (tests/fake_cuda/
libcuda_fake.c), which logs what each launch receives."""

import ctypes
import re
import types

import numpy as np

__version__ = "0-fake"
uint8 = np.uint8
_lib = ctypes.CDLL("libcuda.so.1")
_funcs = []


class _Mem:
    def __init__(self, ptr):
        self.ptr = ptr


class ndarray:
    def __init__(self, host):
        self._host = host
        self.data = _Mem(host.ctypes.data)


def _aligned(n, dtype):
    # CuPy's memory pool hands out 512-byte aligned blocks
    raw = np.zeros(n * np.dtype(dtype).itemsize + 512, np.uint8)
    off = (-raw.ctypes.data) % 512
    return raw[off:off + n * np.dtype(dtype).itemsize].view(dtype)


def asarray(a):
    a = np.asarray(a)
    h = _aligned(a.size, a.dtype).reshape(a.shape)
    h[...] = a
    return ndarray(h)


def zeros(n, dtype):
    return ndarray(_aligned(n, dtype))


def asnumpy(d):
    return d._host.copy()


class _Function:
    def __init__(self, ptr):
        self.ptr = ptr


class RawModule:
    def __init__(self, path):
        self.path = path
        self.ptx = open(path).read()

    def get_function(self, entry):
        m = re.search(rf"\.entry\s+{entry}\s*\((.*?)\)", self.ptx, re.S)
        sizes = []
        for decl in m.group(1).split(","):
            if not decl.strip():
                continue
            t = re.search(r"\.[usbf](\d+)", decl)
            n = re.search(r"\[(\d+)\]", decl)
            sizes.append(int(t.group(1)) // 8 * (int(n.group(1)) if n else 1))
        reqc = bool(re.search(r"\.reqnctapercluster", self.ptx[m.end():m.end() + 300]))
        fid = len(_funcs)
        _funcs.append(self)
        arr = (ctypes.c_int * len(sizes))(*sizes)
        module = re.sub(r"\.ptx$", "", self.path.rsplit("/", 1)[-1])
        _lib.fake_register(fid, len(sizes), arr, int(reqc), module.encode())
        return _Function(fid + 1)


class _Device:
    def __init__(self, i=0):
        pass

    def use(self):
        return self

    def synchronize(self):
        pass


class _Stream:
    def __init__(self, non_blocking=False):
        self._keep = ctypes.c_int(0)
        self.ptr = ctypes.addressof(self._keep)


def _props(i):
    return {"name": b"Fake H100", "major": 9, "minor": 0, "multiProcessorCount": 132}


cuda = types.SimpleNamespace(Device=_Device, Stream=_Stream,
                             runtime=types.SimpleNamespace(getDeviceProperties=_props))
