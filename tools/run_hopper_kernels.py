"""Run the Hopper (sm_90a) corpus on an H100 and record its outputs bit for bit (issue 21).

On the device:  PYTHONUNBUFFERED=1 python3 tools/run_hopper_kernels.py --out $OUT/hopper   # all, seeds 0 and 1
Here (no GPU):  python3 tools/run_hopper_kernels.py --dry-run [--only NAME...] [--out DIR]
Import:         python3 tools/run_hopper_kernels.py --import DIR    # DIR: the device's --out folder, brought back
                -> proofs/evidence/kernels_hopper_h100.json and tests/data/kernels_hopper_outputs/<module>.npz

--out gets few flat files (the device machine hands back at most 8, 16 MiB each):
kernels_hopper_h100.json (device, per module x seed status and sha256) and
kernels_hopper_h100_outputs_<i>.npz (keys ``<module>/<seed>_<buffer>``, <= 12 MiB raw each).
Exit status: 0 when every module ran and passed its contract check, 1 otherwise (records written).

A launch is what tests/data/kernels_hopper/manifest.json says, nothing else:

- buffers: every buffer a pointer or tensor-map parameter names, in the order its first parameter
  appears; ``hopper_inputs(meta, seed)`` fills the inputs with the project's spec generator
  (``formal.kernel.spec.make_inputs(spec, seed, names=inputs)``, regime "normal": buffer i of
  that order draws from ``np.random.default_rng([seed, i])``) and zeroes the outputs (the
  buffers the contract assigns).  Raw encodings (unsigned ints of the element width); their
  sha256 is recorded so the interpreter's inputs can be proved the same.
- the PTX is loaded unchanged with ``cupy.RawModule(path=...)`` (the driver JIT);
- parameters in .entry order: a pointer (the buffer's device address), a scalar (its PTX type,
  little-endian), a CUtensorMap by value (``cuTensorMapEncodeTiled`` with the manifest's
  ``encode`` arguments and the buffer's address, placed at ``tensormap_offset`` of the
  parameter's bytes; the rest of CuTe's 256-byte atom is zero), a Triton scratch pointer
  (null, or ``bytes_per_program`` x CTAs zeroed bytes);
- ``cuLaunchKernelEx`` with grid, block, dynamic shared bytes (after
  ``CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES``), a cluster-dimension attribute when the
  manifest's cluster is not 1x1x1 (retried without it only if the launch refuses it and the PTX
  fixes the cluster with ``.reqnctapercluster``), and programmatic stream serialization when
  ``launch_pdl``.

Per kernel and seed the record holds: status (ok / error with the CUDA error name / timeout),
sha256 of every buffer before and of every output after, whether the inputs and a 256-byte guard
after every buffer are unchanged, and the contract's float64 relative error (a sanity check of
the launch, not the bit-exact comparison).  Each module runs in a worker process; a hang is
killed after --gpu-timeout seconds and the other modules still run (a fresh worker).

--dry-run needs no GPU: it builds inputs, parameters and the ctypes launch and tensor-map
structures, checks them against the PTX's .param declarations and cuda.h's rules for
cuTensorMapEncodeTiled, and "runs" each kernel by writing the contract's float64 reference
(encoded to the output type) so the record / npz / import path is exercised too.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import hashlib
import io
import json
import os
import queue
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "data" / "kernels_hopper"
EVIDENCE_JSON = ROOT / "proofs" / "evidence" / "kernels_hopper_h100.json"
OUTPUTS_DIR = ROOT / "tests" / "data" / "kernels_hopper_outputs"
RECORD = "kernels_hopper_h100.json"
PART_PREFIX = "kernels_hopper_h100_outputs_"   # npz parts beside the record
PART_BYTES = 12 << 20            # raw bytes per part (the device hands back files of <= 16 MiB)
GUARD = 256                       # bytes after every buffer that a correct launch never writes
GUARD_BYTE = 0xA5
MAX_DYNAMIC_SHARED = 232448       # H100: 227 KiB opt-in per block
MAX_ARRAY_BYTES = 4 << 20         # --import checks in output arrays up to this much (compressed)

# ----------------------------------------------------------------- cuda.h (CUDA 13.0) ---------
# Values read from /usr/local/cuda/include/cuda.h; tests/test_run_hopper_kernels.py compiles a
# C program against that header and checks every one of them, and the struct layouts below.
TENSOR_MAP_DATA_TYPE = {
    "CU_TENSOR_MAP_DATA_TYPE_UINT8": 0, "CU_TENSOR_MAP_DATA_TYPE_UINT16": 1,
    "CU_TENSOR_MAP_DATA_TYPE_UINT32": 2, "CU_TENSOR_MAP_DATA_TYPE_INT32": 3,
    "CU_TENSOR_MAP_DATA_TYPE_UINT64": 4, "CU_TENSOR_MAP_DATA_TYPE_INT64": 5,
    "CU_TENSOR_MAP_DATA_TYPE_FLOAT16": 6, "CU_TENSOR_MAP_DATA_TYPE_FLOAT32": 7,
    "CU_TENSOR_MAP_DATA_TYPE_FLOAT64": 8, "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16": 9,
    "CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ": 10, "CU_TENSOR_MAP_DATA_TYPE_TFLOAT32": 11,
    "CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ": 12}
TENSOR_MAP_ELEMENT_BYTES = {0: 1, 1: 2, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 2, 10: 4, 11: 4, 12: 4}
TENSOR_MAP_INTERLEAVE = {"CU_TENSOR_MAP_INTERLEAVE_NONE": 0, "CU_TENSOR_MAP_INTERLEAVE_16B": 1,
                         "CU_TENSOR_MAP_INTERLEAVE_32B": 2}
TENSOR_MAP_SWIZZLE = {"CU_TENSOR_MAP_SWIZZLE_NONE": 0, "CU_TENSOR_MAP_SWIZZLE_32B": 1,
                      "CU_TENSOR_MAP_SWIZZLE_64B": 2, "CU_TENSOR_MAP_SWIZZLE_128B": 3}
SWIZZLE_BYTES = {0: 0, 1: 32, 2: 64, 3: 128}
TENSOR_MAP_L2_PROMOTION = {"CU_TENSOR_MAP_L2_PROMOTION_NONE": 0, "CU_TENSOR_MAP_L2_PROMOTION_L2_64B": 1,
                           "CU_TENSOR_MAP_L2_PROMOTION_L2_128B": 2, "CU_TENSOR_MAP_L2_PROMOTION_L2_256B": 3}
TENSOR_MAP_FLOAT_OOB_FILL = {"CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE": 0,
                             "CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA": 1}
CU_TENSOR_MAP_NUM_QWORDS = 16
CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4
CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6
CU_FUNC_ATTRIBUTE = {"CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK": 0, "CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES": 1,
                     "CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES": 3, "CU_FUNC_ATTRIBUTE_NUM_REGS": 4,
                     "CU_FUNC_ATTRIBUTE_PTX_VERSION": 5, "CU_FUNC_ATTRIBUTE_BINARY_VERSION": 6,
                     "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES": 8,
                     "CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH": 11}
CU_JIT_INFO_LOG_BUFFER = 3
CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4
CU_JIT_ERROR_LOG_BUFFER = 5
CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6
CU_JIT_LOG_VERBOSE = 12
CUDA_SUCCESS = 0
CUDA_ERROR_NOT_READY = 600


class Dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


class CUlaunchAttributeValue(ctypes.Union):
    # the C union is 64 bytes ("char pad[64]") and 8-aligned (it holds pointers: CUevent, ...)
    _fields_ = [("pad", ctypes.c_char * 64), ("clusterDim", Dim3),
                ("programmaticStreamSerializationAllowed", ctypes.c_int), ("_align", ctypes.c_uint64)]


class CUlaunchAttribute(ctypes.Structure):
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", CUlaunchAttributeValue)]


class CUlaunchConfig(ctypes.Structure):
    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p),
                ("attrs", ctypes.POINTER(CUlaunchAttribute)), ("numAttrs", ctypes.c_uint)]


class ManifestError(ValueError):
    """The manifest and the PTX disagree, or a value breaks a CUDA rule (the message says which)."""


class CudaError(RuntimeError):
    def __init__(self, name: str, where: str, sticky: bool = False):
        super().__init__(f"{name} at {where}")
        self.name, self.where, self.sticky = name, where, sticky


# ----------------------------------------------------------------- PTX .entry declarations ----

@dataclass(frozen=True)
class ParamDecl:
    name: str
    type: str          # u32, u64, b8, ...
    count: int         # array length (1 for a scalar)
    align: int         # alignment of the parameter itself
    ptr: bool          # .ptr (a pointer whose pointee alignment PTX states)
    text: str

    @property
    def size(self) -> int:
        return int(self.type[1:]) // 8 * self.count


@dataclass(frozen=True)
class EntryInfo:
    name: str
    params: tuple[ParamDecl, ...]
    reqntid: tuple[int, ...] | None
    maxntid: tuple[int, ...] | None
    reqnctapercluster: tuple[int, ...] | None


def _ints(s: str) -> tuple[int, ...]:
    return tuple(int(x) for x in s.replace(",", " ").split())


def parse_entry(ptx: str, entry: str) -> EntryInfo:
    m = re.search(rf"\.entry\s+{re.escape(entry)}\s*\(", ptx)
    if not m:
        raise ManifestError(f"no .entry {entry} in the PTX")
    close = ptx.index(")", m.end())
    decls = []
    for raw in ptx[m.end():close].split(","):
        text = " ".join(raw.split())
        if not text:
            continue
        toks = text.split()
        if toks[0] != ".param":
            raise ManifestError(f"unexpected parameter declaration {text!r}")
        am = re.fullmatch(r"([\w$]+)(?:\[(\d+)\])?", toks[-1])
        if not am:
            raise ManifestError(f"unexpected parameter name in {text!r}")
        types = [t[1:] for t in toks[1:-1] if re.fullmatch(r"\.[usbf]\d+", t)]
        if len(types) != 1:
            raise ManifestError(f"no single type in {text!r}")
        ptr = ".ptr" in toks
        # the parameter's own .align precedes .ptr; after .ptr it is the pointee's
        own = toks[:toks.index(".ptr")] if ptr else toks
        align = next((int(own[i + 1]) for i in range(len(own) - 1) if own[i] == ".align"), None)
        width = int(types[0][1:]) // 8
        decls.append(ParamDecl(am.group(1), types[0], int(am.group(2) or 1), align or width, ptr, text))
    head = ptx[close:close + 400].split("{", 1)[0]

    def directive(d):
        dm = re.search(rf"\.{d}\s+([\d,\s]+)", head)
        return _ints(dm.group(1)) if dm else None
    return EntryInfo(entry, tuple(decls), directive("reqntid"), directive("maxntid"),
                     directive("reqnctapercluster"))


# ----------------------------------------------------------------- buffers and inputs ---------

@dataclass(frozen=True)
class BufferInfo:
    name: str
    dtype: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    output: bool

    @property
    def elements(self) -> int:
        return int(np.prod(self.shape))


def _buffer_fields(p: dict) -> dict | None:
    if p["role"] == "pointer":
        return p
    if p["role"] == "tensormap":
        return p["tensormap"]
    return None


def contract_outputs(meta: dict) -> list[str]:
    """Buffers the contract assigns (an assigned name that is no buffer is an intermediate)."""
    names = {(_buffer_fields(p) or {}).get("buffer") for p in meta["launch"]["params"]}
    return [k for k in meta["launch"]["contract"] if k in names]


def buffers_of(meta: dict) -> dict[str, BufferInfo]:
    outs = set(contract_outputs(meta))
    bufs: dict[str, BufferInfo] = {}
    for p in meta["launch"]["params"]:
        f = _buffer_fields(p)
        if f is None:
            continue
        b = BufferInfo(f["buffer"], f["dtype"], tuple(f["shape"]), tuple(f["strides"]), f["buffer"] in outs)
        if b.name in bufs and bufs[b.name] != b:
            raise ManifestError(f"buffer {b.name} is described two ways: {bufs[b.name]} and {b}")
        bufs.setdefault(b.name, b)
    return bufs


def input_spec(meta: dict):
    """A KernelSpec holding the manifest's buffers (all of them, in order), for make_inputs."""
    from formal.kernel.spec import Buffer, KernelSpec
    L = meta["launch"]
    bufs = tuple(Buffer(b.name, b.name, b.dtype, b.shape, b.strides) for b in buffers_of(meta).values())
    return KernelSpec(entry=L["entry"], grid=tuple(L["grid"]), block=tuple(L["block"]),
                      shared_bytes=L["shared_bytes"], params={}, buffers=bufs, contracts=())


def hopper_inputs(meta: dict, seed: int) -> dict[str, np.ndarray]:
    """Every buffer's raw encodings before the launch: generated inputs, zero outputs."""
    from formal.kernel.spec import make_inputs, raw_dtype
    bufs = buffers_of(meta)
    ins = [n for n, b in bufs.items() if not b.output]
    gen = make_inputs(input_spec(meta), seed, names=ins, regime="normal")
    return {n: gen[n] if n in gen else np.zeros(b.shape, raw_dtype(b.dtype)) for n, b in bufs.items()}


def sha(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def memory_image(b: BufferInfo, arr: np.ndarray) -> np.ndarray:
    """The buffer's bytes in memory order (row-major: checked by validate) and the guard."""
    body = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
    return np.concatenate([body, np.full(GUARD, GUARD_BYTE, np.uint8)])


def from_image(b: BufferInfo, img: np.ndarray) -> tuple[np.ndarray, bool]:
    from formal.kernel.spec import raw_dtype
    n = img.size - GUARD
    arr = img[:n].copy().view(raw_dtype(b.dtype)).reshape(b.shape)
    return arr, bool(np.all(img[n:] == GUARD_BYTE))


# ----------------------------------------------------------------- contracts (float64) --------

def _decode(raw: np.ndarray, dtype: str) -> np.ndarray:
    from formal.kernel.buffers import decode
    return decode(np.asarray(raw), dtype)


def _round_to(v: np.ndarray, dtype: str) -> np.ndarray:
    from formal.numerics.formats import from_float64, get_format
    fmt = get_format(dtype)
    if not fmt.is_float:
        return np.rint(v)
    return _decode(np.asarray(from_float64(v, fmt)).reshape(v.shape), dtype)


_SOFTMAX = re.compile(r"\s*softmax\(\s*([0-9.eE+-]+)\s*\*\s*\(\s*(\w+)(\.T)?\s*@\s*(\w+)(\.T)?\s*\)\s*\)"
                      r"\s*@\s*(\w+)(\.T)?\s*$")
_CHAINED = re.compile(r"(\w+) is (\w+)\(")


def contract_reference(meta: dict, inputs: dict) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{output buffer: (float64 reference, magnitude sum |a*b|)} for the manifest's contract."""
    from formal.kernel.spec import parse_contract
    bufs = buffers_of(meta)
    contract = dict(meta["launch"]["contract"])
    rounding = {}
    if "chained" in contract:        # e.g. "S is f16(Q @ K.T) in registers, never stored"
        cm = _CHAINED.match(contract.pop("chained"))
        if not cm:
            raise ManifestError(f"cannot read the chained contract {meta['launch']['contract']['chained']!r}")
        rounding[cm.group(1)] = cm.group(2)
    vals: dict[str, np.ndarray] = {}
    mags: dict[str, np.ndarray] = {}

    def operand(name, t):
        if name in vals:
            v, g = vals[name], mags[name]
        elif name in bufs and not bufs[name].output:
            v = _decode(inputs[name], bufs[name].dtype)
            g = np.abs(v)
        else:
            raise ManifestError(f"contract operand {name!r} is neither an input buffer nor computed before")
        return (v.T, g.T) if t else (v, g)

    out = {}
    for name, text in contract.items():
        sm = _SOFTMAX.match(text)
        if sm:
            scale = float(sm.group(1))
            (q, _), (k, _) = operand(sm.group(2), bool(sm.group(3))), operand(sm.group(4), bool(sm.group(5)))
            v, vg = operand(sm.group(6), bool(sm.group(7)))
            s = scale * (q @ k)
            p = np.exp(s - s.max(axis=-1, keepdims=True))
            p /= p.sum(axis=-1, keepdims=True)
            ref, mag = p @ v, p @ vg
        else:
            c = parse_contract(name, text, "manifest")
            a, ag = operand(c.lhs, c.lhs_t)
            b, bg = operand(c.rhs, c.rhs_t)
            ref, mag = a @ b, ag @ bg
            if c.addend:
                z, zg = operand(c.addend, False)
                ref, mag = ref + z, mag + zg
        if name in rounding:          # an intermediate the kernel keeps rounded in registers
            ref = _round_to(ref, rounding[name])
            mag = np.abs(ref)
        vals[name], mags[name] = ref, mag
        if name in bufs:
            if ref.shape != bufs[name].shape:
                raise ManifestError(f"contract {name} = {text}: shape {ref.shape}, buffer {bufs[name].shape}")
            out[name] = (ref, mag)
    return out


def contract_errors(meta: dict, inputs: dict, outputs: dict, ref=None) -> dict[str, float]:
    """Largest |got - ref| / sum|a*b| per output (inf where the output is not finite)."""
    ref = contract_reference(meta, inputs) if ref is None else ref
    bufs = buffers_of(meta)
    errs = {}
    for name, (r, mag) in ref.items():
        got = _decode(outputs[name], bufs[name].dtype)
        with np.errstate(invalid="ignore", divide="ignore"):
            rel = np.abs(got - r) / np.maximum(mag, 1e-30)
        errs[name] = float(np.max(np.where(np.isfinite(got), rel, np.inf)))
    return errs


def contract_tolerance(meta: dict, name: str) -> float:
    """A wrong launch gives O(1); rounding of f16/bf16/tf32/fp8 paths stays far under 1e-2."""
    from formal.numerics.formats import get_format
    dtypes = {b.dtype for b in buffers_of(meta).values()}
    if not get_format(buffers_of(meta)[name].dtype).is_float and dtypes <= {"s8", "u8", "s32"}:
        return 0.0
    return 1e-2


def simulated_outputs(meta: dict, inputs: dict) -> dict[str, np.ndarray]:
    """--dry-run's stand-in for the GPU: the float64 reference encoded in each output's type."""
    from formal.kernel.spec import raw_dtype
    from formal.numerics.formats import from_float64, get_format
    out = {}
    for name, (r, _) in contract_reference(meta, inputs).items():
        b = buffers_of(meta)[name]
        fmt = get_format(b.dtype)
        if fmt.is_float:
            codes = np.asarray(from_float64(r, fmt)).reshape(r.shape)
        else:
            codes = np.rint(r).astype(np.int64) & ((1 << fmt.bits) - 1)
        out[name] = codes.astype(raw_dtype(b.dtype))
    return out


# ----------------------------------------------------------------- tensor maps ----------------

@dataclass
class EncodeArgs:
    """cuTensorMapEncodeTiled's arguments after the output pointer, as ctypes values."""
    dtype: int
    rank: int
    address: int
    global_dim: ctypes.Array
    global_strides: ctypes.Array
    box_dim: ctypes.Array
    element_strides: ctypes.Array
    interleave: int
    swizzle: int
    l2: int
    oob: int
    source: dict = field(default_factory=dict)    # the manifest's encode record

    def call_args(self) -> tuple:
        return (ctypes.c_int(self.dtype), ctypes.c_uint32(self.rank), ctypes.c_void_p(self.address),
                self.global_dim, self.global_strides, self.box_dim, self.element_strides,
                ctypes.c_int(self.interleave), ctypes.c_int(self.swizzle), ctypes.c_int(self.l2),
                ctypes.c_int(self.oob))


def _enum(table: dict, name: str, what: str) -> int:
    if name not in table:
        raise ManifestError(f"{what} {name!r} is not a cuda.h value this tool knows ({sorted(table)})")
    return table[name]


_TMA_TYPES_FOR = {"f16": {6}, "bf16": {9}, "f32": {7, 10, 11, 12}, "s32": {3, 2}, "u32": {2},
                  "e4m3": {0}, "e5m2": {0}, "s8": {0}, "u8": {0}, "f64": {8}}


def tensormap_args(tm: dict, address: int) -> EncodeArgs:
    """The encode arguments, checked against the buffer they map and against cuda.h's rules."""
    from formal.numerics.formats import get_format
    e = tm["encode"]
    if e.get("function") != "cuTensorMapEncodeTiled":
        raise ManifestError(f"tensor map of {tm['buffer']}: function {e.get('function')!r}")
    dt = _enum(TENSOR_MAP_DATA_TYPE, e["tensorDataType"], "tensorDataType")
    inter = _enum(TENSOR_MAP_INTERLEAVE, e["interleave"], "interleave")
    swz = _enum(TENSOR_MAP_SWIZZLE, e["swizzle"], "swizzle")
    l2 = _enum(TENSOR_MAP_L2_PROMOTION, e["l2Promotion"], "l2Promotion")
    oob = _enum(TENSOR_MAP_FLOAT_OOB_FILL, e["oobFill"], "oobFill")
    rank, gd, gs, box, es = e["tensorRank"], e["globalDim"], e["globalStrides_bytes"], e["boxDim"], e["elementStrides"]
    esize = TENSOR_MAP_ELEMENT_BYTES[dt]
    who = f"tensor map of {tm['buffer']}"
    bad = []
    if not 1 <= rank <= 5 or (inter != 0 and rank < 3):
        bad.append(f"tensorRank {rank}")
    if not (len(gd) == len(box) == len(es) == rank and len(gs) == rank - 1):
        bad.append(f"lengths globalDim {len(gd)}, globalStrides {len(gs)}, boxDim {len(box)}, "
                   f"elementStrides {len(es)} for rank {rank}")
    if dt not in _TMA_TYPES_FOR.get(tm["dtype"], set()):
        bad.append(f"{e['tensorDataType']} for {tm['dtype']} elements")
    if esize * 8 != get_format(tm["dtype"]).bits:
        bad.append(f"{esize}-byte {e['tensorDataType']} for {tm['dtype']}")
    shape, strides = list(tm["shape"]), list(tm["strides"])
    if list(gd) != shape[::-1]:
        bad.append(f"globalDim {gd} is not the shape {shape} innermost first")
    if strides[-1] != 1 or list(gs) != [s * esize for s in strides[:-1][::-1]]:
        bad.append(f"globalStrides_bytes {gs} are not the strides {strides} (elements) innermost first")
    align = 32 if inter == 2 else 16
    if address % align:
        bad.append(f"globalAddress {address:#x} not {align}-byte aligned")
    if any(not 0 < d <= 1 << 32 for d in gd):
        bad.append(f"globalDim {gd} outside 1..2^32")
    if any(s % (32 if inter == 2 else 16) or s >= 1 << 40 for s in gs):
        bad.append(f"globalStrides_bytes {gs} not multiples of 16 below 2^40")
    ext = gd[0] * esize
    for i, s in enumerate(gs):
        if s < ext:
            bad.append(f"globalStrides_bytes[{i}] = {s} < extent {ext} of the dimensions inside it")
        ext = s * gd[i + 1]
    if any(not 0 < b <= 256 for b in box):
        bad.append(f"boxDim {box} outside 1..256")
    if inter == 0 and (box[0] * esize) % 16:
        bad.append(f"boxDim[0] * {esize} bytes = {box[0] * esize} not a multiple of 16")
    if inter == 0 and swz and box[0] * esize > SWIZZLE_BYTES[swz]:
        bad.append(f"boxDim[0] * {esize} bytes = {box[0] * esize} exceeds the {SWIZZLE_BYTES[swz]}-byte swizzle span")
    if any(not 1 <= s <= 8 for s in es):
        bad.append(f"elementStrides {es} outside 1..8")
    if "swizzle_bytes" in e and e["swizzle_bytes"] != SWIZZLE_BYTES[swz]:
        bad.append(f"swizzle_bytes {e['swizzle_bytes']} but {e['swizzle']}")
    bs = tm.get("block_shape")            # Triton's block: the box may split its inner dimension
    if bs is not None and (len(bs) != rank or bs[-1] % box[0] or list(box[1:]) != bs[::-1][1:]):
        bad.append(f"boxDim {box} does not tile the block {bs}")
    if bad:
        raise ManifestError(f"{who}: " + "; ".join(bad))
    U64, U32 = ctypes.c_uint64, ctypes.c_uint32
    return EncodeArgs(dt, rank, address, (U64 * rank)(*gd), (U64 * max(rank - 1, 1))(*(gs or [0])),
                      (U32 * rank)(*box), (U32 * rank)(*es), inter, swz, l2, oob, e)


def aligned_tensormap() -> tuple[ctypes.Array, int]:
    """Storage for one CUtensorMap (128 bytes) at a 128-byte aligned address (cuda.h: alignas(128))."""
    raw = ctypes.create_string_buffer(256)
    addr = (ctypes.addressof(raw) + 127) & ~127
    return raw, addr


# ----------------------------------------------------------------- validation -----------------

_INT_RANGE = {"u8": (0, 255), "u16": (0, 65535), "u32": (0, 2**32 - 1), "u64": (0, 2**64 - 1),
              "s8": (-128, 127), "s16": (-2**15, 2**15 - 1), "s32": (-2**31, 2**31 - 1), "s64": (-2**63, 2**63 - 1),
              "b8": (0, 255), "b16": (0, 65535), "b32": (0, 2**32 - 1), "b64": (0, 2**64 - 1)}


def validate(name: str, meta: dict, ptx: str) -> EntryInfo:
    """Every check that needs no GPU; raises ManifestError listing what is wrong."""
    from formal.numerics.formats import get_format
    L = meta["launch"]
    bad = []
    if hashlib.sha256(ptx.encode()).hexdigest() != meta["sha256"]:
        bad.append("the PTX's sha256 is not the manifest's (module changed since the manifest)")
    if not re.search(r"^\.target\s+sm_90a\b", ptx, re.M):
        bad.append("not .target sm_90a")
    info = parse_entry(ptx, L["entry"])
    if len(info.params) != len(L["params"]):
        raise ManifestError(f"{name}: the PTX entry has {len(info.params)} parameters, the manifest {len(L['params'])}")
    bufs = buffers_of(meta)
    for d, p in zip(info.params, L["params"]):
        where = f"parameter {d.name}"
        if p["name"] != d.name or " ".join(p["ptx"].split()) != d.text:
            bad.append(f"{where}: manifest says {p['name']} {p['ptx']!r}, the PTX {d.text!r}")
        if p["bytes"] != d.size or p["type"] != d.type:
            bad.append(f"{where}: manifest {p['bytes']} bytes .{p['type']}, PTX {d.size} bytes .{d.type}")
        role = p["role"]
        if role in ("pointer", "scratch"):
            if d.count != 1 or d.size != 8:
                bad.append(f"{where}: a {role} in a {d.size}-byte parameter")
        elif role == "scalar":
            lo, hi = _INT_RANGE.get(d.type, (None, None))
            if d.count != 1 or lo is None or not isinstance(p["value"], int) or not lo <= p["value"] <= hi:
                bad.append(f"{where}: scalar {p['value']!r} does not fit .{d.type}")
        elif role == "tensormap":
            tm = p["tensormap"]
            off = tm.get("tensormap_offset", 0)
            if d.type != "b8" or d.align < 64 or off % 64 or off + 128 > d.size:
                bad.append(f"{where}: a 128-byte CUtensorMap at offset {off} of .align {d.align} .b8[{d.count}]")
            if tm.get("param_bytes", d.size) != d.size or tm.get("param_align", d.align) != d.align:
                bad.append(f"{where}: param_bytes/param_align {tm.get('param_bytes')}/{tm.get('param_align')} "
                           f"but the PTX says {d.size}/{d.align}")
            try:
                tensormap_args(tm, 1 << 20)
            except ManifestError as e:
                bad.append(f"{where}: {e}")
        else:
            bad.append(f"{where}: unknown role {role!r}")
        if role == "scratch" and (p["bytes_per_program"] < 0 or p.get("align", 1) & (p.get("align", 1) - 1)):
            bad.append(f"{where}: scratch {p['bytes_per_program']} bytes aligned {p.get('align')}")
    for b in bufs.values():
        try:
            bits = get_format(b.dtype).bits
        except KeyError:
            bad.append(f"buffer {b.name}: unknown element type {b.dtype}")
            continue
        rm = [int(np.prod(b.shape[i + 1:])) for i in range(len(b.shape))]
        if list(b.strides) != rm or bits % 8:
            bad.append(f"buffer {b.name}: strides {b.strides} for shape {b.shape} are not row-major bytes")
    if not contract_outputs(meta):
        bad.append(f"the contract {L['contract']} assigns no buffer")
    # Triton's descriptor scalars and M/N/K against the buffers they describe
    desc = {p.get("triton_arg"): p["tensormap"] for p in L["params"] if p["role"] == "tensormap"}
    for p in L["params"]:
        if p["role"] != "scalar":
            continue
        sm = re.fullmatch(r"(\w+)\.(shape|strides)\[(\d+)\].*", p["meaning"])
        if sm and sm.group(1) in desc:
            want = desc[sm.group(1)][sm.group(2)][int(sm.group(3))]
            if p["value"] != want:
                bad.append(f"parameter {p['name']}: {p['meaning']} = {p['value']}, the tensor map says {want}")
    dims = _contract_dims(meta, bufs)
    for p in L["params"]:
        if p["role"] == "scalar" and p["meaning"] in dims and p["value"] != dims[p["meaning"]]:
            bad.append(f"parameter {p['name']}: {p['meaning']} = {p['value']}, the buffers say {dims[p['meaning']]}")
    grid, block, cluster = L["grid"], L["block"], L.get("cluster", [1, 1, 1])
    threads = int(np.prod(block))
    if info.reqntid and threads != int(np.prod(info.reqntid)):
        bad.append(f"block {block} but .reqntid {info.reqntid}")
    if info.maxntid and any(b > m for b, m in zip(block, info.maxntid)):
        bad.append(f"block {block} exceeds .maxntid {info.maxntid}")
    if threads > 1024 or threads % 32:
        bad.append(f"block {block}")
    if info.reqnctapercluster and tuple(cluster[:len(info.reqnctapercluster)]) != info.reqnctapercluster:
        bad.append(f"cluster {cluster} but .reqnctapercluster {info.reqnctapercluster}")
    if any(g % c for g, c in zip(grid, cluster)) or int(np.prod(cluster)) > 8:
        bad.append(f"grid {grid} is not whole clusters of {cluster} (portable: <= 8 CTAs)")
    if not 0 <= L["shared_bytes"] <= MAX_DYNAMIC_SHARED:
        bad.append(f"shared_bytes {L['shared_bytes']} above the H100's {MAX_DYNAMIC_SHARED}")
    if L.get("launch_pdl") and "griddepcontrol" not in ptx:
        bad.append("launch_pdl but no griddepcontrol in the PTX")
    if bad:
        raise ManifestError(f"{name}: " + "; ".join(bad))
    return info


def _contract_dims(meta: dict, bufs: dict) -> dict[str, int]:
    """M, N, K (or L) as the contract's buffers imply them."""
    from formal.kernel.spec import parse_contract
    c = meta["launch"]["contract"]
    if len(c) == 1:
        out, text = next(iter(c.items()))
        if "softmax" in text:
            q = _SOFTMAX.match(text)
            return {"L (sequence length)": bufs[q.group(2)].shape[0]} if q and q.group(2) in bufs else {}
        k = parse_contract(out, text, "manifest")
        if k.lhs in bufs and out in bufs:
            a = bufs[k.lhs].shape
            return {"M": bufs[out].shape[0], "N": bufs[out].shape[1], "K": a[0] if k.lhs_t else a[1]}
    if "chained" in c:
        names = re.findall(r"\b([A-Z])\b", c.get(next(iter(c)), ""))
        if names and names[0] in bufs:
            return {"L (sequence length)": bufs[names[0]].shape[0]}
    return {}


# ----------------------------------------------------------------- parameters and launch ------

@dataclass
class Prepared:
    params: list[bytes]                 # each parameter's bytes, .entry order
    tensormaps: list[dict]              # what was encoded (for the record)
    keep: list = field(default_factory=list)   # ctypes objects that must outlive the launch


def pack_params(meta: dict, info: EntryInfo, ptrs: dict[str, int], scratch: dict[str, int],
                encode) -> Prepared:
    """Parameter bytes: pointers, scalars by PTX type, CUtensorMaps placed in their by-value bytes."""
    prep = Prepared([], [])
    for d, p in zip(info.params, meta["launch"]["params"]):
        role = p["role"]
        if role == "pointer":
            b = struct.pack("<Q", ptrs[p["buffer"]])
        elif role == "scratch":
            b = struct.pack("<Q", scratch.get(p["name"], 0))
        elif role == "scalar":
            fmt = {"u8": "<B", "s8": "<b", "b8": "<B", "u16": "<H", "s16": "<h", "b16": "<H", "u32": "<I",
                   "s32": "<i", "b32": "<I", "u64": "<Q", "s64": "<q", "b64": "<Q", "f32": "<f", "f64": "<d"}[d.type]
            b = struct.pack(fmt, p["value"])
        else:
            tm = p["tensormap"]
            args = tensormap_args(tm, ptrs[tm["buffer"]])
            mapped = encode(args)
            if len(mapped) != 128:
                raise ManifestError(f"{d.name}: the encoded CUtensorMap has {len(mapped)} bytes")
            off = tm.get("tensormap_offset", 0)
            raw = bytearray(d.size)
            raw[off:off + 128] = mapped
            b = bytes(raw)
            prep.keep.append(args)
            prep.tensormaps.append({"param": d.name, "buffer": tm["buffer"], "offset": off, "bytes": d.size})
        if len(b) != d.size:
            raise ManifestError(f"{d.name}: {len(b)} bytes for a {d.size}-byte parameter")
        prep.params.append(b)
    return prep


def launch_config(meta: dict, stream: int, cluster_attr: bool) -> tuple[CUlaunchConfig, ctypes.Array, list[str]]:
    L = meta["launch"]
    attrs, names = [], []
    cluster = L.get("cluster", [1, 1, 1])
    if cluster_attr and list(cluster) != [1, 1, 1]:
        a = CUlaunchAttribute()
        a.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        a.value.clusterDim.x, a.value.clusterDim.y, a.value.clusterDim.z = cluster
        attrs.append(a)
        names.append("CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION")
    if L.get("launch_pdl"):
        a = CUlaunchAttribute()
        a.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
        a.value.programmaticStreamSerializationAllowed = 1
        attrs.append(a)
        names.append("CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION")
    arr = (CUlaunchAttribute * max(len(attrs), 1))(*attrs)
    cfg = CUlaunchConfig()
    cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = L["grid"]
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = L["block"]
    cfg.sharedMemBytes = L["shared_bytes"]
    cfg.hStream = stream or None
    cfg.attrs = ctypes.cast(arr, ctypes.POINTER(CUlaunchAttribute)) if attrs else None
    cfg.numAttrs = len(attrs)
    return cfg, arr, names


def kernel_params(params: list[bytes]) -> tuple[ctypes.Array, list]:
    """void** kernelParams: one pointer to each parameter's bytes."""
    bufs = [ctypes.create_string_buffer(b, len(b)) for b in params]
    arr = (ctypes.c_void_p * max(len(bufs), 1))(*[ctypes.addressof(b) for b in bufs])
    return arr, bufs


# ----------------------------------------------------------------- backends -------------------

class DryBackend:
    """No GPU: fake 512-byte aligned device addresses (CuPy's pool granularity), host memory,
    a checked encode stand-in, and a launch that re-reads what the driver would read."""
    dry = True

    def __init__(self):
        self.next = 0x7F3A_0000_0000
        self.mem: dict[int, np.ndarray] = {}
        self.launches = 0

    def device_info(self) -> dict:
        return {"gpu": "dry run (no GPU)", "dry_run": True}

    def load(self, path: Path, entry: str):
        return (path, entry)

    def func_attrs(self, fn) -> dict:
        return {}

    def jit_info(self, path: Path) -> str:
        return ""

    def set_max_dynamic_shared(self, fn, nbytes: int) -> None:
        if not 0 <= nbytes <= MAX_DYNAMIC_SHARED:
            raise CudaError("CUDA_ERROR_INVALID_VALUE", "cuFuncSetAttribute")

    def upload(self, img: np.ndarray) -> int:
        ptr = self.next
        self.next += (img.nbytes + 511) // 512 * 512 + 512
        self.mem[ptr] = img.copy()
        return ptr

    def zeros(self, nbytes: int) -> int:
        return self.upload(np.zeros(nbytes, np.uint8))

    def download(self, ptr: int) -> np.ndarray:
        return self.mem[ptr].copy()

    def release(self) -> None:
        self.mem.clear()

    def encode(self, a: EncodeArgs) -> bytes:
        # read the arguments back through the ctypes pointers, as the driver would
        e = a.source
        call = a.call_args()
        rank = call[1].value
        got = {"tensorDataType": call[0].value, "tensorRank": rank, "globalAddress": call[2].value,
               "globalDim": [call[3][i] for i in range(rank)],
               "globalStrides_bytes": [call[4][i] for i in range(rank - 1)],
               "boxDim": [call[5][i] for i in range(rank)], "elementStrides": [call[6][i] for i in range(rank)],
               "interleave": call[7].value, "swizzle": call[8].value, "l2Promotion": call[9].value,
               "oobFill": call[10].value}
        want = {"tensorDataType": TENSOR_MAP_DATA_TYPE[e["tensorDataType"]], "tensorRank": e["tensorRank"],
                "globalAddress": a.address, "globalDim": e["globalDim"],
                "globalStrides_bytes": e["globalStrides_bytes"],
                "boxDim": e["boxDim"], "elementStrides": e["elementStrides"],
                "interleave": TENSOR_MAP_INTERLEAVE[e["interleave"]], "swizzle": TENSOR_MAP_SWIZZLE[e["swizzle"]],
                "l2Promotion": TENSOR_MAP_L2_PROMOTION[e["l2Promotion"]],
                "oobFill": TENSOR_MAP_FLOAT_OOB_FILL[e["oobFill"]]}
        if got != want:
            raise ManifestError(f"cuTensorMapEncodeTiled would read {got}, the manifest says {want}")
        _, addr = aligned_tensormap()
        if addr % 128:
            raise ManifestError("CUtensorMap storage not 128-byte aligned")
        return bytes([0xEE]) * 128       # a recognisable stand-in for the opaque map

    def launch(self, fn, cfg: CUlaunchConfig, params: ctypes.Array, expect: list[bytes], meta: dict) -> None:
        L = meta["launch"]
        if [cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ] != list(L["grid"]) or \
                [cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ] != list(L["block"]) or \
                cfg.sharedMemBytes != L["shared_bytes"]:
            raise ManifestError("CUlaunchConfig does not hold the manifest's grid/block/shared bytes")
        for i in range(cfg.numAttrs):
            at = cfg.attrs[i]
            if at.id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
                got = [at.value.clusterDim.x, at.value.clusterDim.y, at.value.clusterDim.z]
                if got != list(L["cluster"]):
                    raise ManifestError(f"cluster attribute {got} != {L['cluster']}")
            elif at.id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
                if at.value.programmaticStreamSerializationAllowed != 1 or not L.get("launch_pdl"):
                    raise ManifestError("PDL attribute")
            else:
                raise ManifestError(f"unexpected launch attribute {at.id}")
        for i, want in enumerate(expect):         # read each parameter back through void**
            got = ctypes.string_at(params[i], len(want))
            if got != want:
                raise ManifestError(f"kernelParams[{i}] does not point at the parameter's bytes")
        self.launches += 1

    def wait(self, timeout: float) -> None:
        return None


class CudaBackend:
    """CuPy for memory and module loading, ctypes on libcuda.so.1 for everything CuPy lacks."""
    dry = False

    def __init__(self):
        import cupy as cp
        self.cp = cp
        cp.cuda.Device(0).use()
        cp.zeros(1, cp.uint8)                     # the primary context, current on this thread
        self.cu = ctypes.CDLL("libcuda.so.1")
        c = self.cu
        P, I, U = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint
        sig = {"cuGetErrorName": (I, [I, ctypes.POINTER(ctypes.c_char_p)]),
               "cuDriverGetVersion": (I, [ctypes.POINTER(I)]),
               "cuCtxGetCurrent": (I, [ctypes.POINTER(P)]),
               "cuFuncSetAttribute": (I, [P, I, I]),
               "cuFuncGetAttribute": (I, [ctypes.POINTER(I), I, P]),
               "cuLaunchKernelEx": (I, [ctypes.POINTER(CUlaunchConfig), P, ctypes.POINTER(P), ctypes.POINTER(P)]),
               "cuTensorMapEncodeTiled": (I, [P, I, ctypes.c_uint32, P, ctypes.POINTER(ctypes.c_uint64),
                                              ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint32),
                                              ctypes.POINTER(ctypes.c_uint32), I, I, I, I]),
               "cuStreamQuery": (I, [P]),
               "cuStreamSynchronize": (I, [P]),
               "cuModuleLoadDataEx": (I, [ctypes.POINTER(P), ctypes.c_char_p, U, ctypes.POINTER(I), ctypes.POINTER(P)]),
               "cuModuleUnload": (I, [P])}
        for name, (res, args) in sig.items():
            f = getattr(c, name)
            f.restype, f.argtypes = res, args
        ctx = P()
        self.check(c.cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
        if not ctx.value:
            raise CudaError("no current context", "cuCtxGetCurrent")
        self.stream = cp.cuda.Stream(non_blocking=True)
        self.modules: list = []                   # loaded modules stay alive with their functions
        self.arrays: dict = {}                    # device address -> CuPy array, until release()

    def err_name(self, res: int) -> str:
        s = ctypes.c_char_p()
        if self.cu.cuGetErrorName(res, ctypes.byref(s)) == 0 and s.value:
            return s.value.decode()
        return f"CUresult {res}"

    def check(self, res: int, where: str, sticky: bool = False) -> None:
        if res != CUDA_SUCCESS:
            raise CudaError(self.err_name(res), where, sticky)

    def device_info(self) -> dict:
        cp = self.cp
        props = cp.cuda.runtime.getDeviceProperties(0)
        name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        v = ctypes.c_int()
        self.cu.cuDriverGetVersion(ctypes.byref(v))
        info = {"gpu": name, "compute_capability": f"{props['major']}.{props['minor']}",
                "sms": int(props["multiProcessorCount"]),
                "driver_cuda": f"{v.value // 1000}.{(v.value % 1000) // 10}", "cupy": cp.__version__,
                "numpy": np.__version__, "python": sys.version.split()[0],
                "loaded_by": "cupy.RawModule(path=<module>.ptx): the driver JIT-compiles the checked-in PTX",
                "launched_by": "cuLaunchKernelEx through ctypes (libcuda.so.1)"}
        try:
            smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm",
                                  "--format=csv,noheader"], capture_output=True, text=True, timeout=15)
            info["nvidia_smi"] = smi.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
        return info

    def load(self, path: Path, entry: str):
        try:
            mod = self.cp.RawModule(path=str(path))
            fn = mod.get_function(entry)
        except Exception as e:                       # CuPy's CUDADriverError names the CUresult
            m = re.search(r"CUDA_ERROR_\w+", str(e))
            err = CudaError(m.group(0) if m else f"{type(e).__name__}: {e}", "cupy.RawModule (driver JIT)")
            err.log = self.jit_log(path.read_bytes())[1]
            raise err
        self.modules.append((mod, fn))
        # CuPy 14: RawKernel.kernel is the cupy.cuda.function.Function holding the CUfunction
        for f in (fn, getattr(fn, "kernel", None), getattr(fn, "_kernel", None)):
            if f is not None and hasattr(f, "ptr"):
                return f.ptr
        raise CudaError(f"no CUfunction handle on {type(fn).__name__}", "cupy.RawModule")

    def jit_log(self, ptx: bytes) -> tuple[str, str]:
        """(info, error) logs of the driver JIT (verbose: registers, spills, ptxas notes such as an
        injected warpgroup.wait), from a second load through cuModuleLoadDataEx."""
        n = 16384
        info, error = ctypes.create_string_buffer(n), ctypes.create_string_buffer(n)
        opts = (ctypes.c_int * 5)(CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                                  CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_LOG_VERBOSE)
        vals = (ctypes.c_void_p * 5)(ctypes.addressof(info), n, ctypes.addressof(error), n, 1)
        mod = ctypes.c_void_p()
        res = self.cu.cuModuleLoadDataEx(ctypes.byref(mod), ptx + b"\0", 5, opts, vals)
        if res == 0:
            self.cu.cuModuleUnload(mod)
        return info.value.decode(errors="replace")[-3000:], error.value.decode(errors="replace")[-4000:]

    def jit_info(self, path: Path) -> str:
        try:
            return self.jit_log(path.read_bytes())[0]
        except Exception as e:                       # a record without the log, not a failed module
            return f"(no JIT log: {type(e).__name__}: {e})"

    def func_attrs(self, fn) -> dict:
        out = {}
        for name, a in CU_FUNC_ATTRIBUTE.items():
            v = ctypes.c_int()
            if self.cu.cuFuncGetAttribute(ctypes.byref(v), a, fn) == 0:
                out[name.replace("CU_FUNC_ATTRIBUTE_", "").lower()] = v.value
        return out

    def set_max_dynamic_shared(self, fn, nbytes: int) -> None:
        self.check(self.cu.cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE["CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES"],
                                              nbytes), "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)")

    def upload(self, img: np.ndarray) -> int:
        d = self.cp.asarray(img)
        self.arrays[d.data.ptr] = d
        return d.data.ptr

    def zeros(self, nbytes: int) -> int:
        d = self.cp.zeros(nbytes, self.cp.uint8)
        self.arrays[d.data.ptr] = d
        return d.data.ptr

    def download(self, ptr: int) -> np.ndarray:
        return self.cp.asnumpy(self.arrays[ptr])

    def release(self) -> None:
        self.arrays = {}

    def encode(self, a: EncodeArgs) -> bytes:
        raw, addr = aligned_tensormap()
        self.check(self.cu.cuTensorMapEncodeTiled(ctypes.c_void_p(addr), *a.call_args()), "cuTensorMapEncodeTiled")
        return ctypes.string_at(addr, 128)

    def launch(self, fn, cfg: CUlaunchConfig, params: ctypes.Array, expect: list[bytes], meta: dict) -> None:
        self.cp.cuda.Device().synchronize()           # the uploads (default stream) are done
        self.check(self.cu.cuLaunchKernelEx(ctypes.byref(cfg), fn, params, None), "cuLaunchKernelEx")

    def wait(self, timeout: float) -> None:
        end = time.monotonic() + timeout
        while True:
            res = self.cu.cuStreamQuery(self.stream.ptr)
            if res != CUDA_ERROR_NOT_READY:
                self.check(res, "cuStreamQuery (after the launch)", sticky=True)
                return
            if time.monotonic() > end:
                raise CudaError("timeout", f"cuStreamQuery: no completion within {timeout:g} s", sticky=True)
            time.sleep(0.0005)


# ----------------------------------------------------------------- one module -----------------

def run_module(name: str, meta: dict, corpus: Path, seeds: list[int], be, gpu_timeout: float,
               emit=lambda *a: None) -> tuple[dict, dict]:
    """(record, {"<seed>_<buffer>": raw output array}).  After a sticky CUDA error (one the
    context does not survive: a fault, a timeout) the record has ``sticky_error`` and the other
    seeds are skipped; the caller must not launch again in this process."""
    L = meta["launch"]
    path = corpus / meta["ptx"]
    rec = {"ptx": meta["ptx"], "ptx_sha256": meta["sha256"], "entry": L["entry"], "grid": L["grid"],
           "block": L["block"], "shared_bytes": L["shared_bytes"], "cluster": L.get("cluster", [1, 1, 1]),
           "launch_pdl": bool(L.get("launch_pdl")), "launches": []}
    arrays: dict[str, np.ndarray] = {}
    try:
        info = validate(name, meta, path.read_text())
    except ManifestError as e:
        rec.update(status="error", error=f"manifest: {e}")
        return rec, arrays
    bufs = buffers_of(meta)
    outs = contract_outputs(meta)
    t = time.perf_counter()
    try:
        fn = be.load(path, L["entry"])
    except CudaError as e:
        rec.update(status="error", error=str(e), jit_log=getattr(e, "log", ""))
        return rec, arrays
    rec["load_seconds"] = round(time.perf_counter() - t, 3)
    rec["function"] = be.func_attrs(fn)
    rec["jit_info_log"] = be.jit_info(path)
    try:
        if L["shared_bytes"]:
            be.set_max_dynamic_shared(fn, L["shared_bytes"])
    except CudaError as e:
        rec.update(status="error", error=str(e))
        return rec, arrays
    cluster_attr = list(rec["cluster"]) != [1, 1, 1]
    rec["cluster_attribute"] = cluster_attr
    sticky = None
    for seed in seeds:
        lrec = {"seed": seed}
        rec["launches"].append(lrec)
        try:
            host = hopper_inputs(meta, seed)
            lrec["inputs_sha256"] = {k: sha(v) for k, v in host.items()}
            ptrs = {k: be.upload(memory_image(bufs[k], v)) for k, v in host.items()}
            scratch = {}
            for p in L["params"]:
                if p["role"] == "scratch" and p["bytes_per_program"]:
                    n = p["bytes_per_program"] * int(np.prod(L["grid"]))
                    scratch[p["name"]] = be.zeros(n)
                    if scratch[p["name"]] % max(p.get("align", 1), 16):
                        raise ManifestError(f"scratch {p['name']} at {scratch[p['name']]:#x} "
                                            f"not {p.get('align')}-aligned")
            for k, ptr in ptrs.items():
                if ptr % 16:
                    raise ManifestError(f"buffer {k} at {ptr:#x} is not 16-byte aligned")
            prep = pack_params(meta, info, ptrs, scratch, be.encode)
            lrec["tensormaps"] = len(prep.tensormaps)
            kp, keep = kernel_params(prep.params)    # keep: the bytes kp points at, alive until the launch
            stream = getattr(getattr(be, "stream", None), "ptr", 0)
            cfg, attrs, names = launch_config(meta, stream, cluster_attr)
            lrec["launch_attributes"] = names
            emit("GPU", name, seed)                  # the orchestrator's watchdog runs until GPUDONE
            t = time.perf_counter()
            try:
                try:
                    be.launch(fn, cfg, kp, prep.params, meta)
                except CudaError as e:
                    # a cluster fixed at compile time may refuse a launch-time attribute: launch without
                    if not (cluster_attr and info.reqnctapercluster) or e.sticky:
                        raise
                    cfg, attrs, names = launch_config(meta, stream, False)
                    lrec["launch_attributes"] = names
                    lrec["cluster_attribute_refused"] = e.name
                    cluster_attr = False               # the next seeds launch without it at once
                    be.launch(fn, cfg, kp, prep.params, meta)
                be.wait(gpu_timeout)
            finally:
                emit("GPUDONE", name, seed)
            lrec["seconds"] = round(time.perf_counter() - t, 4)
            got, guards = {}, {}
            for k in host:
                got[k], guards[k] = from_image(bufs[k], be.download(ptrs[k]))
            be.release()
            if be.dry:                                # no GPU: the float64 reference stands in
                got.update(simulated_outputs(meta, host))
            lrec["outputs_sha256"] = {k: sha(got[k]) for k in outs}
            lrec["inputs_unchanged"] = all(np.array_equal(host[k], got[k]) for k in host if k not in outs)
            lrec["guards_intact"] = all(guards.values())
            errs = contract_errors(meta, host, got)
            lrec["contract_rel_error"] = errs
            lrec["contract_ok"] = all(e <= contract_tolerance(meta, k) for k, e in errs.items())
            lrec["status"] = "ok" if lrec["inputs_unchanged"] and lrec["guards_intact"] else "error"
            if lrec["status"] != "ok":
                lrec["error"] = "wrote outside its outputs (an input or a guard changed)"
            for k in outs:
                arrays[f"{seed}_{k}"] = got[k]
        except CudaError as e:
            lrec.update(status="timeout" if e.name == "timeout" else "error", error=str(e))
            be.release()
            if e.sticky:
                sticky = e
                break
        except ManifestError as e:
            lrec.update(status="error", error=f"manifest: {e}")
            be.release()
    st = [x["status"] for x in rec["launches"]]
    rec["status"] = "ok" if st and all(s == "ok" for s in st) and len(st) == len(seeds) else \
        ("timeout" if "timeout" in st else "error")
    rec["contract_ok"] = all(x.get("contract_ok", False) for x in rec["launches"]) and len(st) == len(seeds)
    if rec["status"] != "ok":
        rec["error"] = next((f"seed {x['seed']}: {x['error']}" for x in rec["launches"] if x.get("error")),
                            "not every seed ran")
    if sticky is not None:
        rec["sticky_error"] = str(sticky)
    return rec, arrays


# ----------------------------------------------------------------- worker / orchestrator ------

def _emit(*words) -> None:
    print("@@" + " ".join(str(w) for w in words), flush=True)


def _write_kernel(work: Path, name: str, rec: dict, arrays: dict) -> None:
    d = work / "kernels"
    d.mkdir(parents=True, exist_ok=True)
    if arrays:
        np.savez(d / f"{name}.npz", **arrays)
    (d / f"{name}.json").write_text(json.dumps(rec, indent=1) + "\n")


def _stub(meta: dict, status: str, error: str) -> dict:
    return {"ptx": meta["ptx"], "ptx_sha256": meta["sha256"], "launches": [], "status": status, "error": error}


def _load_manifest(corpus: Path, only) -> dict:
    manifest = json.loads((corpus / "manifest.json").read_text())
    if only:
        missing = [n for n in only if n not in manifest]
        if missing:
            raise SystemExit(f"run_hopper_kernels: error: no module {missing[0]!r} in {corpus}/manifest.json")
        manifest = {n: manifest[n] for n in manifest if n in only}
    return manifest


def worker(args) -> int:
    """Run the named modules in this process, one record per module; exit at a sticky error."""
    work = Path(args.work)
    corpus = Path(args.corpus)
    manifest = _load_manifest(corpus, args.only)
    be = CudaBackend()
    info_path = work / "device.json"
    if not info_path.exists():
        work.mkdir(parents=True, exist_ok=True)
        info_path.write_text(json.dumps(be.device_info(), indent=1) + "\n")
    _emit("READY")
    for name, meta in manifest.items():
        _emit("START", name)
        try:
            rec, arrays = run_module(name, meta, corpus, args.seeds, be, args.gpu_timeout, _emit)
        except Exception as e:                       # recorded; the other modules still run
            rec, arrays = {**_stub(meta, "error", f"{type(e).__name__}: {e}"),
                           "traceback": traceback.format_exc()[-3000:]}, {}
        _write_kernel(work, name, rec, arrays)
        errs = [x.get("contract_rel_error") for x in rec["launches"]]
        print(f"{name}: {rec['status']} {rec.get('error', '')} {errs}", file=sys.stderr, flush=True)
        _emit("DONE", name, rec["status"])
        if rec.get("sticky_error"):
            _emit("EXIT", "sticky")
            sys.stdout.flush()
            os._exit(3)                               # the context is unusable: a fresh worker goes on
    _emit("EXIT", "done")
    return 0


def _work_dir(args) -> tuple[Path, bool]:
    if args.work:
        return Path(args.work), False
    return Path(tempfile.mkdtemp(prefix="hopper_run_")), True


def orchestrate(args) -> int:
    """Workers in subprocesses; a module that hangs or crashes its worker is recorded and skipped."""
    corpus = Path(args.corpus)
    manifest = _load_manifest(corpus, args.only)
    work, temporary = _work_dir(args)
    remaining = list(manifest)
    t0 = time.monotonic()
    budget_end = t0 + args.budget
    workers = 0
    while remaining:
        if time.monotonic() > budget_end:
            for n in remaining:
                _write_kernel(work, n, _stub(manifest[n], "not_run",
                                             f"not run: the {args.budget:g} s budget was spent"), {})
            break
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--work", str(work),
               "--corpus", str(corpus), "--gpu-timeout", str(args.gpu_timeout),
               "--seeds", *map(str, args.seeds), "--only", *remaining]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, start_new_session=True)
        workers += 1
        lines: queue.Queue = queue.Queue()

        def pump(stream=proc.stdout, q=lines):
            for line in stream:
                q.put(line.rstrip("\n"))
            q.put(None)
        threading.Thread(target=pump, daemon=True).start()
        current, phase = None, "startup"
        deadline = time.monotonic() + args.startup_timeout
        killed = None
        done_here = 0
        while True:
            left = min(deadline, budget_end + args.gpu_timeout) - time.monotonic()
            try:
                line = lines.get(timeout=max(left, 0.01))
            except queue.Empty:
                killed = f"no answer within the {phase} limit (killed)"
                os.killpg(proc.pid, signal.SIGKILL)
                break
            if line is None:
                break
            if not line.startswith("@@"):
                continue
            w = line[2:].split()
            if w[0] == "START":
                current, phase = w[1], "JIT/host"
                deadline = time.monotonic() + args.host_timeout
            elif w[0] == "GPU":
                phase = f"GPU ({args.gpu_timeout:g} s)"
                # the worker gives up itself after gpu_timeout; this catches a call that never returns
                deadline = time.monotonic() + args.gpu_timeout + min(5.0, max(1.0, args.gpu_timeout / 4))
            elif w[0] == "GPUDONE":
                phase = "JIT/host"
                deadline = time.monotonic() + args.host_timeout
            elif w[0] == "DONE":
                remaining.remove(w[1])
                done_here += 1
                current, phase = None, "JIT/host"
                deadline = time.monotonic() + args.host_timeout
            elif w[0] == "EXIT":
                phase = "exit"
                deadline = time.monotonic() + 15
        try:
            rc = proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            rc = proc.wait()
        if current is not None and current in remaining:
            why = killed or f"the worker died (exit {rc}) while running it"
            _write_kernel(work, current, _stub(manifest[current], "timeout" if killed else "error",
                                               f"{why}; phase {phase}"), {})
            print(f"{current}: {why}", file=sys.stderr, flush=True)
            remaining.remove(current)
        elif current is None and not done_here and remaining:   # no worker starts: give up on the device
            why = killed or f"exited ({rc}) before running a module"
            for n in remaining:
                _write_kernel(work, n, _stub(manifest[n], "error", f"worker {why}"), {})
            break
    rc = assemble(work, Path(args.out), manifest, args, time.monotonic() - t0, workers)
    if temporary:
        shutil.rmtree(work, ignore_errors=True)
    return rc


def assemble(work: Path, out: Path, manifest: dict, args, wall: float, workers: int) -> int:
    """One JSON record and the outputs in npz parts of at most --part-bytes (the device machine
    hands back a few files of bounded size: 8 files, 16 MiB each)."""
    device = json.loads((work / "device.json").read_text()) if (work / "device.json").exists() else {}
    record = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "tool": "tools/run_hopper_kernels.py", "corpus": "tests/data/kernels_hopper",
              "seeds": args.seeds, "inputs": "hopper_inputs(meta, seed): make_inputs(regime='normal') over the "
              "manifest's buffers in order of first parameter; outputs zero", **device, "kernels": {}}
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob(f"{PART_PREFIX}*.npz"):
        old.unlink()
    part, part_arrays, part_bytes = 0, {}, 0

    def flush():
        nonlocal part, part_arrays, part_bytes
        if part_arrays:
            np.savez_compressed(out / f"{PART_PREFIX}{part}.npz", **part_arrays)
            part, part_arrays, part_bytes = part + 1, {}, 0
    for name in manifest:
        f = work / "kernels" / f"{name}.json"
        k = record["kernels"][name] = json.loads(f.read_text()) if f.exists() else \
            {"launches": [], "status": "error", "error": "no record"}
        npz = work / "kernels" / f"{name}.npz"
        if npz.exists():
            arrs = dict(np.load(npz))
            size = sum(a.nbytes for a in arrs.values())      # raw; compressed is smaller
            if part_arrays and part_bytes + size > args.part_bytes:
                flush()
            part_arrays.update({f"{name}/{key}": a for key, a in arrs.items()})
            part_bytes += size
            k["npz"] = f"{PART_PREFIX}{part}.npz"
    flush()
    ks = record["kernels"].values()
    record["summary"] = {"kernels": len(ks), "ok": sum(k["status"] == "ok" for k in ks),
                         "errors": sum(k["status"] == "error" for k in ks),
                         "timeouts": sum(k["status"] == "timeout" for k in ks),
                         "not_run": sum(k["status"] == "not_run" for k in ks),
                         "contract_ok": sum(bool(k.get("contract_ok")) for k in ks),
                         "launches": sum(len(k["launches"]) for k in ks),
                         "wall_seconds": round(wall, 1), "workers": workers, "npz_parts": part}
    (out / RECORD).write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record["summary"]), flush=True)
    for name, k in record["kernels"].items():
        if k["status"] != "ok" or not k.get("contract_ok"):
            print(f"  {name}: {k['status']} {k.get('error', '')} "
                  f"{[x.get('contract_rel_error') for x in k['launches']]}", flush=True)
    s = record["summary"]
    return 0 if s["ok"] == s["contract_ok"] == s["kernels"] else 1


# ----------------------------------------------------------------- import ---------------------

def _npz_bytes(arrays: dict) -> bytes:
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


def import_records(src: Path, corpus: Path, evidence: Path, outputs_dir: Path, max_bytes: int,
                   allow_dry_run: bool = False) -> int:
    record = json.loads((src / RECORD).read_text())
    if record.get("dry_run") and not allow_dry_run:
        print(f"run_hopper_kernels: error: {src / RECORD} is a dry run, not the GPU's outputs", file=sys.stderr)
        return 2
    manifest = json.loads((corpus / "manifest.json").read_text())
    problems = []
    blobs = {}
    parts: dict[str, np.lib.npyio.NpzFile] = {}
    for name, k in record["kernels"].items():
        k.pop("traceback", None)
        meta = manifest.get(name)
        k["ptx_matches_corpus"] = bool(meta) and meta["sha256"] == k.get("ptx_sha256")
        if not k["ptx_matches_corpus"]:
            problems.append(f"{name}: the PTX it ran is not the corpus's now")
        arrs = {}
        if k.get("npz"):
            if k["npz"] not in parts:
                parts[k["npz"]] = np.load(src / k["npz"])
            arrs = {key.split("/", 1)[1]: parts[k["npz"]][key] for key in parts[k["npz"]].files
                    if key.split("/", 1)[0] == name}
        regen = None                           # None: no launch recorded its inputs
        for launch in k["launches"]:
            if meta is not None and "inputs_sha256" in launch:
                here = {b: sha(v) for b, v in hopper_inputs(meta, launch["seed"]).items()}
                regen = (regen is not False) and here == launch["inputs_sha256"]
            for out, h in launch.get("outputs_sha256", {}).items():
                key = f"{launch['seed']}_{out}"
                if key not in arrs or sha(arrs[key]) != h:
                    problems.append(f"{name}: seed {launch['seed']} {out}: the npz is not the recorded output")
        k["inputs_regenerate_here"] = regen
        if regen is False:
            problems.append(f"{name}: the inputs regenerated here differ from the GPU's (numpy generator?)")
        k.pop("npz", None)
        if arrs:
            blobs[name] = _npz_bytes(arrs)
    # the output arrays that fit max_bytes (smallest first); the rest by sha256 only
    outputs_dir.mkdir(parents=True, exist_ok=True)
    for old in outputs_dir.glob("*.npz"):
        old.unlink()
    total, kept = 0, []
    for name in sorted(blobs, key=lambda n: (len(blobs[n]), n)):
        k = record["kernels"][name]
        if total + len(blobs[name]) > max_bytes:
            k["arrays"] = None
            k["arrays_omitted"] = f"{len(blobs[name])} bytes compressed: sha256 only"
            continue
        (outputs_dir / f"{name}.npz").write_bytes(blobs[name])
        total += len(blobs[name])
        kept.append(name)
        shown = outputs_dir.relative_to(ROOT) if outputs_dir.is_relative_to(ROOT) else outputs_dir
        k["arrays"] = f"{shown}/{name}.npz"
    (outputs_dir / "README.md").write_text(
        "# H100 outputs of the Hopper corpus\n\n"
        "Written by `python3 tools/run_hopper_kernels.py --import DIR` from a device run.  One npz per "
        "module of tests/data/kernels_hopper, keys `<seed>_<buffer>`: the output buffer's raw encodings "
        "(unsigned ints of the element width) in the buffer's shape.  Inputs: `hopper_inputs(meta, seed)` "
        "in tools/run_hopper_kernels.py (outputs start at zero).  Arrays are kept smallest module first "
        f"up to {max_bytes} bytes in all; the rest are recorded by sha256 only (see "
        "proofs/evidence/kernels_hopper_h100.json, `arrays_omitted`).\n\n"
        f"Arrays here: {len(kept)} modules, {total} bytes; by sha256 only: "
        f"{', '.join(sorted(n for n in blobs if n not in kept)) or 'none'}.\n")
    record["import"] = {"arrays_bytes": total, "arrays_modules": len(kept), "problems": problems}
    if evidence.exists():
        prev = json.loads(evidence.read_text())
        if prev.get("date") != record["date"]:
            shas = lambda r: {n: [x.get("outputs_sha256") for x in k["launches"]] for n, k in r["kernels"].items()}
            a, b = shas(prev), shas(record)
            common = sorted(set(a) & set(b))
            record["repeat_of"] = {"date": prev.get("date"), "modules_compared": len(common),
                                   "identical_outputs": sorted(n for n in common if a[n] == b[n]),
                                   "different_outputs": sorted(n for n in common if a[n] != b[n])}
    evidence.parent.mkdir(parents=True, exist_ok=True)
    evidence.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps({**record["summary"], "arrays_modules": len(kept), "arrays_bytes": total,
                      "problems": len(problems)}))
    for p in problems:
        print(f"  {p}")
    return 1 if problems else 0


# ----------------------------------------------------------------- dry run in-process ---------

def dry_run(args) -> int:
    """Everything but CUDA, in this process (fast): the same run_module on DryBackend."""
    corpus = Path(args.corpus)
    manifest = _load_manifest(corpus, args.only)
    be = DryBackend()
    work, temporary = _work_dir(args) if args.out else (None, False)
    if work:
        work.mkdir(parents=True, exist_ok=True)
        (work / "device.json").write_text(json.dumps(be.device_info(), indent=1) + "\n")
    t0 = time.monotonic()
    recs = {}
    for name, meta in manifest.items():
        try:
            rec, arrays = run_module(name, meta, corpus, args.seeds, be, args.gpu_timeout)
        except Exception as e:
            rec, arrays = {**_stub(meta, "error", f"{type(e).__name__}: {e}"),
                           "traceback": traceback.format_exc()[-3000:]}, {}
        errs = [x.get("contract_rel_error") for x in rec["launches"]]
        print(f"{name}: {rec['status']} {rec.get('error', '')} {errs}", flush=True)
        recs[name] = rec
        if work:
            _write_kernel(work, name, rec, arrays)
    if work:
        rc = assemble(work, Path(args.out), manifest, args, time.monotonic() - t0, 0)
        if temporary:
            shutil.rmtree(work, ignore_errors=True)
        return rc
    bad = [n for n, r in recs.items() if r["status"] != "ok" or not r.get("contract_ok")]
    print(json.dumps({"kernels": len(recs), "ok": len(recs) - len(bad), "dry_run": True}))
    return 1 if bad else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="folder for kernels_hopper_h100.json and kernels_hopper_h100_outputs_<i>.npz")
    ap.add_argument("--work", help="folder for the per-module files (default: a temporary one, removed)")
    ap.add_argument("--part-bytes", type=int, default=PART_BYTES, help=argparse.SUPPRESS)
    ap.add_argument("--only", nargs="+", metavar="NAME")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--corpus", default=str(CORPUS))
    ap.add_argument("--dry-run", action="store_true", help="no GPU: everything but the CUDA calls")
    ap.add_argument("--import", dest="imp", metavar="DIR", help="a device run's --out folder -> evidence")
    ap.add_argument("--evidence", default=str(EVIDENCE_JSON))
    ap.add_argument("--outputs-dir", default=str(OUTPUTS_DIR))
    ap.add_argument("--max-array-bytes", type=int, default=MAX_ARRAY_BYTES)
    ap.add_argument("--allow-dry-run", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--gpu-timeout", type=float, default=20.0, help="seconds a launch may take (a hang)")
    ap.add_argument("--host-timeout", type=float, default=120.0, help="seconds of JIT/host work per module")
    ap.add_argument("--startup-timeout", type=float, default=120.0)
    ap.add_argument("--budget", type=float, default=225.0, help="seconds for the whole run")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    if args.imp:
        return import_records(Path(args.imp), Path(args.corpus), Path(args.evidence), Path(args.outputs_dir),
                              args.max_array_bytes, args.allow_dry_run)
    if args.worker:
        return worker(args)
    if args.dry_run:
        return dry_run(args)
    if not args.out:
        ap.error("--out DIR is required (the device run writes its records there)")
    return orchestrate(args)


if __name__ == "__main__":
    sys.exit(main())
