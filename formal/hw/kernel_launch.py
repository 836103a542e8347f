"""Launch a PTX kernel module on a CUDA GPU from a kernel spec (CuPy; a leaf of the package).

    outs = launch(ptx_text, spec, inputs)    # {buffer name: raw encodings}, every buffer

The PTX is handed to the driver's JIT unchanged (``cupy.RawModule(path=...)``), so what runs
is the module a compiler emitted.  Buffers are laid out from the spec (shape, strides, element
type), filled from the raw-encoded ``inputs`` (missing ones are zero), and read back after the
launch in the same form.  Parameters are passed in .entry order: a buffer's device pointer,
a ``[params]`` scalar with its PTX type, or 0 (a null pointer for an unnamed pointer).
"""

from __future__ import annotations

import os
import re
import tempfile

import numpy as np

from ..kernel.spec import KernelSpec, SpecError, raw_dtype

_NP = {"u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64, "s8": np.int8, "s16": np.int16,
       "s32": np.int32, "s64": np.int64, "b8": np.uint8, "b16": np.uint16, "b32": np.uint32, "b64": np.uint64,
       "f32": np.float32, "f64": np.float64}


class LaunchError(RuntimeError):
    """A spec/module pair that cannot be launched (the message says why)."""


def entry_params(ptx: str, entry: str | None) -> tuple[str, list[tuple[str, str]]]:
    """(entry name, [(param name, PTX type)]) of the named .entry (or the only one)."""
    heads = list(re.finditer(r"\.entry\s+([\w$]+)\s*\(", ptx))
    if not heads:
        raise LaunchError("the module has no .entry")
    if entry is None:
        if len(heads) > 1:
            raise LaunchError(f"the module has {len(heads)} entries; the spec must name one")
        m = heads[0]
    else:
        m = next((h for h in heads if h.group(1) == entry), None)
        if m is None:
            raise LaunchError(f"no .entry {entry} in the module")
    close = ptx.index(")", m.end())
    params = []
    for decl in ptx[m.end():close].split(","):
        decl = decl.strip()
        if not decl:
            continue
        toks = decl.split()
        types = [t[1:] for t in toks if re.fullmatch(r"\.[usbf]\d+", t)]
        if toks[0] != ".param" or len(types) != 1 or "[" in decl:
            raise LaunchError(f"unsupported parameter declaration {decl!r}")
        params.append((toks[-1], types[0]))
    return m.group(1), params


def _memory_image(buf, arr: np.ndarray | None) -> np.ndarray:
    """The buffer's bytes in memory order: element (i, j, ..) at sum(index * stride)."""
    dt = raw_dtype(buf.type)
    if buf.bits not in (8, 16, 32, 64):
        raise LaunchError(f"buffer {buf.name!r}: {buf.type} elements are not byte-addressable here")
    mem = np.zeros(buf.span, dtype=dt)
    if arr is not None:
        arr = np.asarray(arr)
        if arr.shape != tuple(buf.shape):
            raise SpecError(f"input {buf.name!r} has shape {arr.shape}, the spec says {tuple(buf.shape)}")
        mem[_offsets(buf)] = arr.astype(dt)
    return mem


def _offsets(buf) -> np.ndarray:
    idx = np.indices(buf.shape).reshape(len(buf.shape), -1)
    return np.tensordot(np.asarray(buf.strides, dtype=np.int64), idx, axes=1).reshape(buf.shape)


def launch(ptx: str, spec: KernelSpec, inputs: dict[str, np.ndarray], *, device: int = 0) -> dict[str, np.ndarray]:
    import cupy as cp

    cp.cuda.Device(device).use()
    entry, params = entry_params(ptx, spec.entry)
    names = [n for n, _ in params]

    def index(key: str) -> int:
        if key.startswith("#"):
            i = int(key[1:])
            if i >= len(params):
                raise SpecError(f"{spec.source}: parameter {key} but {entry} has {len(params)} parameters")
            return i
        if key not in names:
            raise SpecError(f"{spec.source}: {entry} has no parameter {key!r}")
        return names.index(key)

    by_param = {index(b.param): b for b in spec.buffers}
    scalars = {index(k): v for k, v in spec.params.items()}
    dev = {}
    args = []
    for i, (name, ptype) in enumerate(params):
        if i in by_param:
            b = by_param[i]
            if ptype not in ("u64", "b64", "s64"):
                raise SpecError(f"{spec.source}: buffer {b.name!r} names {name}, a .{ptype} parameter, not a pointer")
            img = _memory_image(b, inputs.get(b.name))
            d = cp.asarray(img) if img.size else cp.zeros(1, img.dtype)
            dev[b.name] = d
            args.append(d)
        else:
            v = scalars.get(i, 0)
            args.append(_NP[ptype](v))
    with tempfile.TemporaryDirectory(prefix="ptxformal_kernel_") as tmp:
        path = os.path.join(tmp, "module.ptx")
        with open(path, "w") as f:
            f.write(ptx)
        mod = cp.RawModule(path=path)          # the driver JIT-compiles the PTX as it is
        fn = mod.get_function(entry)
        if spec.shared_bytes > 48 * 1024:
            fn.max_dynamic_shared_size_bytes = spec.shared_bytes
        fn(tuple(spec.grid), tuple(spec.block), tuple(args), shared_mem=spec.shared_bytes)
        cp.cuda.runtime.deviceSynchronize()
    out = {}
    for b in spec.buffers:
        mem = cp.asnumpy(dev[b.name])
        out[b.name] = mem[_offsets(b)] if b.span else np.zeros(b.shape, raw_dtype(b.type))
    return out
