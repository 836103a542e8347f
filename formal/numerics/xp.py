"""The array module the numerics run on: numpy, or CuPy for ``device="cuda"``.

``formats``, ``block`` and ``engine`` are written once against the numpy API and import
``np`` from here: a proxy that forwards every attribute to the module of the current
context (numpy unless :func:`backend` selected CuPy).  The GPU path is therefore the CPU
code itself, run by another array module: bit-identical by construction wherever both
modules implement an operation exactly (integer and IEEE float64/float32/float16
element-wise arithmetic, gathers, exact integer sums); ``tests/test_numerics_gpu.py``
and ``benchmarks/bench_gpu.py`` check it on every family.

CuPy is optional: :func:`cupy_module` raises :class:`DeviceUnavailable` (CLI exit 3)
without it or without a GPU.
"""
from __future__ import annotations

import contextlib
import contextvars
import functools

import numpy

_CURRENT: contextvars.ContextVar = contextvars.ContextVar("formal_numerics_xp", default=numpy)
# host-side helpers (shapes, FP-error state, dtype info): always numpy's
_HOST = frozenset({"errstate", "broadcast_shapes", "iinfo", "finfo", "dtype", "get_all_start_methods"})


class DeviceUnavailable(RuntimeError):
    """``device="cuda"`` without CuPy or without a usable GPU (CLI exit 3)."""


class _Proxy:
    def __getattr__(self, name):
        mod = _CURRENT.get()
        if mod is numpy or name in _HOST:
            return getattr(numpy, name)
        return getattr(mod, name)


np = _Proxy()


def current():
    """The array module of this context (numpy or cupy)."""
    return _CURRENT.get()


def on_host() -> bool:
    return _CURRENT.get() is numpy


@contextlib.contextmanager
def backend(mod):
    token = _CURRENT.set(mod)
    try:
        yield mod
    finally:
        _CURRENT.reset(token)


def cupy_module():
    try:
        import cupy
    except ImportError as e:  # pragma: no cover - depends on the installation
        raise DeviceUnavailable("device='cuda' needs CuPy (pip install cupy-cuda12x): " + str(e)) from None
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            raise DeviceUnavailable("device='cuda': no CUDA device")
    except DeviceUnavailable:
        raise
    except Exception as e:  # noqa: BLE001 - driver missing, no device, ...
        raise DeviceUnavailable(f"device='cuda': no usable CUDA device ({type(e).__name__}: {e})") from None
    return cupy


def module_for(device: str | None):
    """numpy for device None/'cpu', cupy for 'cuda' (DeviceUnavailable if it cannot run)."""
    if device in (None, "cpu"):
        return numpy
    if device in ("cuda", "gpu") or str(device).startswith("cuda:"):
        return cupy_module()
    raise ValueError(f"unknown device {device!r}; known: cpu, cuda")


_DEV_CACHE: dict = {}


def like(table, x):
    """A host constant (a decode / conversion table) on the device ``x`` lives on."""
    if isinstance(x, numpy.ndarray) or isinstance(x, numpy.generic) or not hasattr(x, "__cuda_array_interface__"):
        return table
    key = id(table)
    hit = _DEV_CACHE.get(key)
    if hit is None or hit[0] is not table:
        import cupy

        hit = (table, cupy.asarray(table))
        _DEV_CACHE[key] = hit
    return hit[1]


def fused(fn):
    """``fn`` (element-wise operations ending in at most one reduction along an axis, written with ``np``)
    called as written on numpy, and compiled by ``cupy.fuse`` into one kernel when the
    current module is CuPy: the same Python function, so the same semantics, without the
    full-size temporaries between its steps on the device."""
    kernels: dict = {}

    @functools.wraps(fn)
    def run(*args):
        mod = _CURRENT.get()
        if mod is numpy:
            return fn(*args)
        k = kernels.get(mod)
        if k is None:
            k = mod.fuse(kernel_name=fn.__name__)(fn)
            try:
                out = k(*args)
            except Exception:  # noqa: BLE001 - a CuPy that cannot fuse it runs it op by op
                k, out = fn, fn(*args)
            kernels[mod] = k
            return out
        return k(*args)

    run.kernels = kernels     # per module: the fused kernel, or fn where fusing failed
    return run


def to_host(x):
    """numpy array of ``x`` (a cupy array is copied back)."""
    return x.get() if hasattr(x, "get") and not isinstance(x, numpy.ndarray) else numpy.asarray(x)
