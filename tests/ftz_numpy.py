"""numpy with CUDA's ``-ftz=true`` float32 semantics, as an array module for ``formal.numerics.xp``.

CuPy compiles its kernels with ``-ftz=true``: every float32 instruction (arithmetic,
conversions to and from float32, comparisons) reads a subnormal float32 input as a zero of
its sign and writes a subnormal float32 result as one.  This module emulates that on the
CPU, so CI can check that the evaluator's GPU path (the same code on another array
module) does not depend on float32 subnormals: an :class:`FTZArray` flushes float32
subnormals on every ufunc input and output and on every ``astype`` from or to float32
(``view`` reinterprets bits and flushes nothing, as on the GPU).
"""
from __future__ import annotations

import types

import numpy

_TINY = numpy.float32(2.0 ** -126)


def _flush(x):
    if isinstance(x, numpy.ndarray) and x.dtype == numpy.float32:
        base = x.view(numpy.ndarray)
        sub = (base != 0) & (numpy.abs(base) < _TINY)
        if sub.any():
            base = numpy.where(sub, numpy.copysign(numpy.float32(0), base), base).astype(numpy.float32)
        return base
    if isinstance(x, numpy.float32) and x != 0 and abs(x) < _TINY:
        return numpy.copysign(numpy.float32(0), x)
    return x.view(numpy.ndarray) if isinstance(x, numpy.ndarray) else x


def _wrap(x):
    if isinstance(x, numpy.ndarray) and not isinstance(x, FTZArray):
        return x.view(FTZArray)
    if isinstance(x, tuple):
        return tuple(_wrap(y) for y in x)
    return x


class FTZArray(numpy.ndarray):
    def __array_ufunc__(self, ufunc, method, *inputs, **kw):
        ins = [_flush(x) for x in inputs]
        outs = kw.pop("out", None)
        if outs is not None:
            kw["out"] = tuple(o.view(numpy.ndarray) if isinstance(o, numpy.ndarray) else o for o in outs)
        res = getattr(ufunc, method)(*ins, **kw)
        if outs is not None:
            for o in outs:
                if isinstance(o, numpy.ndarray) and o.dtype == numpy.float32:
                    o.view(numpy.ndarray)[...] = _flush(o.view(numpy.ndarray))
            return outs[0] if len(outs) == 1 else outs
        if isinstance(res, tuple):
            return tuple(_wrap(_flush(r)) for r in res)
        return _wrap(_flush(res))

    def astype(self, dtype, *args, **kw):
        return _wrap(_flush(_flush(self).astype(dtype, *args, **kw)))


def _wrapped(fn):
    def call(*args, **kw):
        return _wrap(fn(*args, **kw))
    return call


def module() -> types.ModuleType:
    """An array module: numpy's names, arrays made FTZArray, ``fuse`` a no-op."""
    ns = types.ModuleType("ftz_numpy_module")
    for name in dir(numpy):
        if name.startswith("__"):
            continue
        v = getattr(numpy, name)
        if callable(v) and not isinstance(v, (type, numpy.ufunc)) and not name[0].isupper():
            v = _wrapped(v)
        setattr(ns, name, v)
    ns.fuse = lambda kernel_name=None: (lambda fn: fn)
    return ns
