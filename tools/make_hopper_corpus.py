"""Build the Hopper (sm_90a) kernel corpus: PTX that Triton, Gluon and nvcc/CuTe emit from this
project's own sources, with the launch facts a spec needs.

    python3 tools/make_hopper_corpus.py [--only NAME ...] [--out tests/data/kernels_hopper]
    python3 tools/make_hopper_corpus.py --inventory FILE.md     # sm_90a construct counts per module

Writes ``<name>.ptx`` (the compiler's output, unchanged) per module and ``manifest.json``: per
module its source, kernel, constexprs, compiler and version, target, options, sha256, the
instructions it uses, and ``launch``: grid, block, dynamic shared bytes, cluster, and every
``.param`` of the entry in order with its role -- a pointer to a buffer (dtype, shape, strides in
elements), a scalar (type, value, meaning), a CUtensorMap passed by value (the arguments the host
gives ``cuTensorMapEncodeTiled``: data type, rank, dims and byte strides innermost first, box,
element strides, interleave, swizzle, L2 promotion, OOB fill, and the buffer it maps), or a
scratch pointer (Triton's global / profile scratch), plus the contract the kernel computes.

Sources (tools/kernel_sources/): ``triton_hopper.py`` (@triton.jit), ``gluon_hopper.py``
(@gluon.jit), compiled with ``triton.compile`` for ``GPUTarget("cuda", 90, 32)`` (sm_90a, no GPU
needed); ``cute_sm90.cu`` compiled with ``nvcc -ptx -arch=sm_90a``.  Every module is PTX ISA 9.0,
the newest the H100's driver (CUDA 13.0) JIT-compiles (Triton through ``ptx_version``, with CUDA
13.0's ptxas in place of Triton's bundled one).
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "tools" / "kernel_sources"
OUT = ROOT / "tests" / "data" / "kernels_hopper"
PTX_VERSION = 90
NUM_SMS = 132          # H100 SXM

_TT = {"f16": "fp16", "bf16": "bf16", "f32": "fp32", "e4m3": "fp8e4nv", "e5m2": "fp8e5", "s8": "i8",
       "u8": "u8", "s32": "i32"}
_SIZE = {"f16": 2, "bf16": 2, "f32": 4, "e4m3": 1, "e5m2": 1, "s8": 1, "u8": 1, "s32": 4, "f64": 8}
# CUtensorMapDataType (cuda.h)
_TMA_DTYPE = {0: "CU_TENSOR_MAP_DATA_TYPE_UINT8", 1: "CU_TENSOR_MAP_DATA_TYPE_UINT16",
              2: "CU_TENSOR_MAP_DATA_TYPE_UINT32", 3: "CU_TENSOR_MAP_DATA_TYPE_INT32",
              4: "CU_TENSOR_MAP_DATA_TYPE_UINT64", 5: "CU_TENSOR_MAP_DATA_TYPE_INT64",
              6: "CU_TENSOR_MAP_DATA_TYPE_FLOAT16", 7: "CU_TENSOR_MAP_DATA_TYPE_FLOAT32",
              8: "CU_TENSOR_MAP_DATA_TYPE_FLOAT64", 9: "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16",
              10: "CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ", 11: "CU_TENSOR_MAP_DATA_TYPE_TFLOAT32",
              12: "CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ"}
_SWIZZLE = {0: "CU_TENSOR_MAP_SWIZZLE_NONE", 1: "CU_TENSOR_MAP_SWIZZLE_32B", 2: "CU_TENSOR_MAP_SWIZZLE_64B",
            3: "CU_TENSOR_MAP_SWIZZLE_128B"}
_SWIZZLE_BYTES = {0: 0, 1: 32, 2: 64, 3: 128}


def _triton_env() -> None:
    ptxas = shutil.which("ptxas")
    if ptxas:
        os.environ.setdefault("TRITON_PTXAS_PATH", ptxas)
        os.environ.setdefault("TRITON_PTXAS_BLACKWELL_PATH", ptxas)
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "0")


def _tool_version(tool: str) -> str:
    try:
        out = subprocess.run([tool, "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    m = re.search(r"release (\S+), V(\S+)", out)
    return f"{Path(tool).name} {m.group(2)}" if m else out.strip().splitlines()[-1]


# ------------------------------------------------------------------ PTX entry parameters --------

_PARAM = re.compile(r"\.param\s+(?:\.(?P<type>[us]\d+|b\d+|f\d+)\s+)?(?:\.ptr\s+(?:\.(?P<space>\w+)\s+)?)?"
                    r"(?:\.align\s+(?P<align>\d+)\s+)?(?:\.(?P<type2>[usbf]\d+)\s+)?(?P<name>\w+)(?:\[(?P<n>\d+)\])?")


def entry_params(ptx: str, entry: str) -> list[dict]:
    """The .param list of one .entry, in order: name, PTX type, alignment, array length, bytes."""
    m = re.search(r"\.entry\s+" + re.escape(entry) + r"\s*\((.*?)\)", ptx, re.S)
    if not m:
        raise RuntimeError(f"no .entry {entry}")
    out = []
    for part in m.group(1).split(","):
        part = part.strip()
        if not part:
            continue
        p = _PARAM.search(part)
        if not p:
            raise RuntimeError(f"cannot parse param {part!r}")
        ty = p.group("type") or p.group("type2")
        n = int(p.group("n")) if p.group("n") else None
        width = int(ty[1:]) // 8
        out.append({"name": p.group("name"), "ptx": part, "type": ty, "align": int(p.group("align") or width),
                    "bytes": width * (n or 1)})
    return out


def entries(ptx: str) -> list[str]:
    return re.findall(r"\.entry\s+(\w+)\s*\(", ptx)


# ------------------------------------------------------------------ Triton ----------------------

class TArg:
    """One Triton argument of a kernel: pointer / scalar / tensor descriptor (host) / constexpr."""

    def __init__(self, name, kind, **kw):
        self.name, self.kind, self.kw = name, kind, kw


def P(name, buf, dtype, shape, strides=None):
    return TArg(name, "ptr", buf=buf, dtype=dtype, shape=list(shape), strides=list(strides or _rowmajor(shape)))


def S(name, value, meaning, ty="i32"):
    return TArg(name, "scalar", value=value, meaning=meaning, ty=ty)


def D(name, buf, dtype, shape, block, strides=None):
    return TArg(name, "desc", buf=buf, dtype=dtype, shape=list(shape), block=list(block),
                strides=list(strides or _rowmajor(shape)))


def _rowmajor(shape):
    st, acc = [], 1
    for d in reversed(shape):
        st.insert(0, acc)
        acc *= d
    return st


def _gluon_layout(dtype, block, kmajor_t=False):
    from triton.experimental.gluon import language as gl
    return gl.NVMMASharedLayout.get_default_for(block, getattr(gl, {"f16": "float16", "bf16": "bfloat16",
                                                "f32": "float32", "e4m3": "float8e4nv", "e5m2": "float8e5",
                                                "s8": "int8"}[dtype]))


def _sig_type(a: TArg, gluon: bool) -> str:
    if a.kind == "ptr":
        return "*" + _TT[a.kw["dtype"]]
    if a.kind == "scalar":
        return a.kw["ty"]
    if a.kind == "desc":
        blk = ",".join(map(str, a.kw["block"]))
        if gluon:
            return f"tensordesc<{_TT[a.kw['dtype']]}[{blk}],{repr(_gluon_layout(a.kw['dtype'], a.kw['block']))}>"
        return f"tensordesc<{_TT[a.kw['dtype']]}[{blk}]>"
    raise ValueError(a.kind)


def tensormap_record(a: TArg, meta: dict) -> dict:
    """What the host passes to cuTensorMapEncodeTiled for this descriptor (as Triton's driver does)."""
    import triton.backends.nvidia.driver as drv
    shape, strides, esize = a.kw["shape"], a.kw["strides"], _SIZE[a.kw["dtype"]]
    rank = len(shape)
    elem_type = drv.TMA_DTYPE_DEVICE_TO_HOST[meta["elem_type"]]
    box = list(meta["block_size"])
    return {
        "buffer": a.kw["buf"], "dtype": a.kw["dtype"], "shape": shape, "strides": strides,
        "block_shape": a.kw["block"],
        "encode": {   # cuTensorMapEncodeTiled arguments, dimension 0 innermost
            "function": "cuTensorMapEncodeTiled",
            "tensorDataType": _TMA_DTYPE.get(elem_type, elem_type),
            "tensorRank": rank,
            "globalAddress": f"base of {a.kw['buf']}",
            "globalDim": list(reversed(shape)),
            "globalStrides_bytes": [s * esize for s in reversed(strides[:-1])],
            "boxDim": list(reversed(box)),
            "elementStrides": [1] * rank,
            "interleave": "CU_TENSOR_MAP_INTERLEAVE_NONE",
            "swizzle": _SWIZZLE.get(meta["swizzle"], meta["swizzle"]),
            "swizzle_bytes": _SWIZZLE_BYTES.get(meta["swizzle"]),
            "l2Promotion": "CU_TENSOR_MAP_L2_PROMOTION_L2_128B",
            "oobFill": "CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE",
        },
        "triton_meta": meta,
    }


def build_triton(name: str, job: dict) -> tuple[str, dict]:
    _triton_env()
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    sys.path.insert(0, str(SRC))
    gluon = job.get("gluon", False)
    if gluon:
        import gluon_hopper as mod
        from triton.experimental.gluon._runtime import GluonASTSource as Source
    else:
        import triton_hopper as mod
        Source = ASTSource
    fn = getattr(mod, job["kernel"])
    args: list[TArg] = job["args"]
    cx = job.get("constexprs", {})
    sig = {a.name: _sig_type(a, gluon) for a in args}
    for c in cx:
        sig[c] = "constexpr"
    # order the signature as the function declares it
    order = list(fn.arg_names)
    sig = {k: sig[k] for k in order}
    attrs = {(order.index(a.name),): [["tt.divisibility", 16]] for a in args
             if a.kind == "ptr" or (a.kind == "scalar" and a.kw.get("div16"))}
    opts = {"num_warps": job["warps"], "num_stages": job.get("stages", 3), "ptx_version": PTX_VERSION}
    opts.update(job.get("options", {}))
    comp = triton.compile(Source(fn=fn, signature=sig, constexprs=cx, attrs=attrs),
                          target=GPUTarget("cuda", 90, 32), options=opts)
    ptx = comp.asm["ptx"]
    md = comp.metadata
    entry = md.name
    params = entry_params(ptx, entry)
    tmeta = list(getattr(md, "tensordesc_meta", None) or [])

    # expand the Triton arguments into the PTX parameters they become
    roles = []
    di = 0
    for a in args:
        if a.kind == "ptr":
            roles.append({"role": "pointer", "buffer": a.kw["buf"], "dtype": a.kw["dtype"], "shape": a.kw["shape"],
                          "strides": a.kw["strides"], "triton_arg": a.name})
        elif a.kind == "scalar":
            roles.append({"role": "scalar", "value": a.kw["value"], "meaning": a.kw["meaning"], "triton_arg": a.name})
        elif a.kind == "desc":
            meta = tmeta[di] if di < len(tmeta) else None
            di += 1
            if meta is None:
                raise RuntimeError(f"{name}: no tensordesc_meta for {a.name}")
            roles.append({"role": "tensormap", "triton_arg": a.name, "tensormap": tensormap_record(a, meta)})
            for i, d in enumerate(a.kw["shape"]):
                roles.append({"role": "scalar", "value": d, "meaning": f"{a.name}.shape[{i}]", "triton_arg": a.name})
            for i, s in enumerate(a.kw["strides"]):
                roles.append({"role": "scalar", "value": s, "meaning": f"{a.name}.strides[{i}] (elements)",
                              "triton_arg": a.name})
    scratch = [("global_scratch", int(getattr(md, "global_scratch_size", 0) or 0),
                int(getattr(md, "global_scratch_align", 1) or 1)),
               ("profile_scratch", int(getattr(md, "profile_scratch_size", 0) or 0),
                int(getattr(md, "profile_scratch_align", 1) or 1))]
    if len(params) < len(roles):
        raise RuntimeError(f"{name}: {len(params)} PTX params for {len(roles)} arguments")
    for i in range(len(params) - len(roles)):
        nm, size, align = scratch[i] if i < len(scratch) else (f"extra_{i}", 0, 1)
        roles.append({"role": "scratch", "what": nm, "bytes_per_program": size, "align": align,
                      "note": "null when bytes_per_program is 0; else the launcher allocates "
                              "bytes_per_program * number of programs"})
    plist = [dict(p, **r) for p, r in zip(params, roles)]
    req = re.search(r"\.reqntid\s+(\d+)", ptx)
    threads = int(req.group(1)) if req else 32 * job["warps"]   # warp-specialised kernels add worker warps
    ncta = int(md.num_ctas)
    grid = list(job["grid"])
    if ncta > 1:   # Triton launches gridX * num_ctas CTAs in clusters of (num_ctas, 1, 1)
        grid[0] *= ncta
    launch = {"entry": entry, "grid": grid, "program_grid": job["grid"], "block": [threads, 1, 1],
              "shared_bytes": int(md.shared), "cluster": [ncta, 1, 1], "num_ctas": ncta,
              "params": plist, "contract": job["contract"]}
    if getattr(md, "launch_pdl", False):
        launch["launch_pdl"] = True
    rec = {"source": f"tools/kernel_sources/{'gluon_hopper' if gluon else 'triton_hopper'}.py::{job['kernel']}",
           "kernel": job["kernel"], "compiler": f"triton {triton.__version__}{' (gluon)' if gluon else ''}",
           "ptxas": _tool_version(os.environ.get("TRITON_PTXAS_PATH", "ptxas")),
           "target": "sm_90a", "gpu_target": "GPUTarget('cuda', 90, 32)",
           "options": opts, "constexprs": {k: str(v) for k, v in cx.items()},
           "computes": job["what"], "launch": launch}
    return ptx, rec


# ------------------------------------------------------------------ job table -------------------

def _mm_args(ta, tc, m, n, k, bt=False, at=False, c_name="C"):
    a = P("a_ptr", "A", ta, [k, m] if at else [m, k])
    b = P("b_ptr", "B", ta, [n, k] if bt else [k, n])
    c = P("c_ptr", c_name, tc, [m, n])
    return [a, b, c, S("M", m, "M"), S("N", n, "N"), S("K", k, "K")]


def tri_ptr(ta, tc, acc, prec, bm, bn, bk, warps, stages, m, n, k, at=False, bt=False, masked=False, tb=None):
    import triton.language as tl
    tb = tb or ta
    sam, sak = (1, m) if at else (k, 1)
    sbk, sbn = (1, k) if bt else (n, 1)
    args = [P("a_ptr", "A", ta, [k, m] if at else [m, k]), P("b_ptr", "B", tb, [n, k] if bt else [k, n]),
            P("c_ptr", "C", tc, [m, n]), S("M", m, "M"), S("N", n, "N"), S("K", k, "K")]
    cx = dict(SAM=sam, SAK=sak, SBK=sbk, SBN=sbn, SCM=n, SCN=1, BM=bm, BN=bn, BK=bk,
              ACC={"f32": tl.float32, "f16": tl.float16, "s32": tl.int32}[acc], PREC=prec, MASKED=masked)
    return {"kernel": "mm_ptr", "args": args, "constexprs": cx, "warps": warps, "stages": stages,
            "grid": [-(-m // bm), -(-n // bn), 1], "contract": {"C": f"A{'.T' if at else ''} @ B{'.T' if bt else ''}"},
            "what": f"C[{m}x{n}] {tc} = A{'^T' if at else ''} @ B{'^T' if bt else ''}, {ta}/{tb}, K={k}, acc {acc}"
                    f"{', ' + prec if prec != 'ieee' else ''}; pointer loads; tile {bm}x{bn}x{bk}, {warps} warps, "
                    f"{stages} stages{', masked' if masked else ''}"}


def tri_upcast(ta, up, bm, bn, bk, warps, m, n, k):
    import triton.language as tl
    args = [P("a_ptr", "A", ta, [m, k]), P("b_ptr", "B", up, [k, n]), P("c_ptr", "C", "f32", [m, n]),
            S("M", m, "M"), S("N", n, "N"), S("K", k, "K")]
    cx = dict(BM=bm, BN=bn, BK=bk, UP={"f16": tl.float16, "bf16": tl.bfloat16}[up])
    return {"kernel": "mm_upcast", "args": args, "constexprs": cx, "warps": warps, "stages": 3,
            "grid": [m // bm, n // bn, 1], "contract": {"C": "A @ B"},
            "what": f"C[{m}x{n}] f32 = A.to({up}) @ B, A {ta} upcast in registers (register-A wgmma), K={k}; "
                    f"tile {bm}x{bn}x{bk}, {warps} warps"}


def tri_tma(ta, tc, acc, bm, bn, bk, warps, stages, m, n, k, bkmajor=False):
    import triton.language as tl
    args = [D("a_desc", "A", ta, [m, k], [bm, bk]),
            D("b_desc", "B", ta, [n, k] if bkmajor else [k, n], [bn, bk] if bkmajor else [bk, bn]),
            D("c_desc", "C", tc, [m, n], [bm, bn]), S("M", m, "M"), S("N", n, "N"), S("K", k, "K")]
    cx = dict(BM=bm, BN=bn, BK=bk, ACC={"f32": tl.float32, "s32": tl.int32, "f16": tl.float16}[acc],
              B_KMAJOR=bkmajor)
    return {"kernel": "mm_tma", "args": args, "constexprs": cx, "warps": warps, "stages": stages,
            "grid": [m // bm, n // bn, 1], "contract": {"C": "A @ B.T" if bkmajor else "A @ B"},
            "what": f"C[{m}x{n}] {tc} = A @ B{'^T (B stored [N, K])' if bkmajor else ''}, {ta}, K={k}, acc {acc}; "
                    f"host TMA descriptors for A, B, C; tile {bm}x{bn}x{bk}, {warps} warps, {stages} stages"}


def tri_devtma(ta, tc, bm, bn, bk, warps, stages, m, n, k):
    args = [P("a_ptr", "A", ta, [m, k]), P("b_ptr", "B", ta, [k, n]), P("c_ptr", "C", tc, [m, n]),
            S("M", m, "M"), S("N", n, "N"), S("K", k, "K")]
    return {"kernel": "mm_tma_device", "args": args, "constexprs": dict(BM=bm, BN=bn, BK=bk), "warps": warps,
            "stages": stages, "grid": [m // bm, n // bn, 1], "contract": {"C": "A @ B"},
            "what": f"C[{m}x{n}] {tc} = A @ B, {ta}, K={k}; device-built TMA descriptors "
                    f"(tl.make_tensor_descriptor, tensormap.replace into global scratch); tile {bm}x{bn}x{bk}, {warps} warps"}


def tri_persistent(ta, tc, bm, bn, bk, warps, stages, m, n, k, ws=False, flatten=True):
    args = [D("a_desc", "A", ta, [m, k], [bm, bk]), D("b_desc", "B", ta, [n, k], [bn, bk]),
            D("c_desc", "C", tc, [m, n], [bm, bn]), S("M", m, "M"), S("N", n, "N"), S("K", k, "K")]
    tiles = (m // bm) * (n // bn)
    return {"kernel": "mm_persistent", "args": args,
            "constexprs": dict(BM=bm, BN=bn, BK=bk, GROUP_M=8, NUM_SMS=NUM_SMS, WS=ws, FLATTEN=flatten),
            "warps": warps, "stages": stages, "grid": [min(NUM_SMS, tiles), 1, 1], "contract": {"C": "A @ B.T"},
            "what": f"persistent C[{m}x{n}] {tc} = A @ B^T (B stored [N, K]), {ta}, K={k}; grid = min(132 SMs, "
                    f"{tiles} tiles), grouped tile order (GROUP_M=8); host TMA descriptors; tile {bm}x{bn}x{bk}, "
                    f"{warps} warps, {stages} stages{', warp_specialize=True' if ws else ''}"}


def tri_ws(ta, tc, bm, bn, bk, warps, stages, m, n, k):
    args = [D("a_desc", "A", ta, [m, k], [bm, bk]), D("b_desc", "B", ta, [n, k], [bn, bk]),
            D("c_desc", "C", tc, [m, n], [bm, bn]), S("M", m, "M"), S("N", n, "N"), S("K", k, "K")]
    return {"kernel": "mm_ws", "args": args, "constexprs": dict(BM=bm, BN=bn, BK=bk, STAGES=stages),
            "warps": warps, "stages": stages, "grid": [m // bm, n // bn, 1], "contract": {"C": "A @ B.T"},
            "what": f"C[{m}x{n}] {tc} = A @ B^T, {ta}, K={k}; tl.range(..., warp_specialize=True) K loop, host TMA "
                    f"descriptors; tile {bm}x{bn}x{bk}, {warps} warps, {stages} stages"}


def tri_attn(l, d, bm, bn, warps, softmax):
    args = [P("q_ptr", "Q", "f16", [l, d]), P("k_ptr", "K", "f16", [l, d]), P("v_ptr", "V", "f16", [l, d]),
            P("o_ptr", "O", "f32", [l, d]), S("L", l, "L (sequence length)")]
    contract = ({"O": "softmax(0.125 * (Q @ K.T)) @ V"} if softmax else
                {"S": "Q @ K.T", "O": "S @ V", "chained": "S is f16(Q @ K.T) in registers, never stored"})
    return {"kernel": "attn_fwd", "args": args, "constexprs": dict(D=d, BM=bm, BN=bn, SOFTMAX=softmax),
            "warps": warps, "stages": 2, "grid": [l // bm, 1, 1], "contract": contract,
            "what": f"attention-like, L={l}, D={d}: S = Q @ K^T (wgmma, smem operands), P = "
                    f"{'online softmax(S/8)' if softmax else 'S'} rounded to f16 in registers, O = P @ V "
                    f"(register-A wgmma); BM={bm}, BN={bn}, {warps} warps"}


def gl_job(kernel, ta, tc, bm, bn, bk, warps, m, n, k, stages=3, bkmajor=False):
    args = [D("a_desc", "A", ta, [m, k], [bm, bk]),
            D("b_desc", "B", ta, [n, k] if bkmajor else [k, n], [bn, bk] if bkmajor else [bk, bn]),
            D("c_desc", "C", tc, [m, n], [bm, bn]), S("K", k, "K")]
    cx = {}
    if kernel == "gl_mm_pipelined":
        cx = dict(STAGES=stages, B_KMAJOR=bkmajor)
    elif kernel == "gl_mm_ws":
        cx = dict(STAGES=stages)
    return {"gluon": True, "kernel": kernel, "args": args, "constexprs": cx, "warps": warps, "stages": stages,
            "grid": [m // bm, n // bn, 1], "contract": {"C": "A @ B.T" if bkmajor else "A @ B"},
            "what": f"Gluon {kernel}: C[{m}x{n}] {tc} = A @ B{'^T (B stored [N, K])' if bkmajor else ''}, {ta}, K={k}; "
                    f"tile {bm}x{bn}x{bk}, {warps} warps, {stages} stages"}


def triton_jobs() -> dict:
    J = {}
    # pointer-load matmuls
    J["tri_ptr_f16_w4"] = tri_ptr("f16", "f32", "f32", "ieee", 64, 64, 32, 4, 3, 128, 128, 128)
    J["tri_ptr_f16_w8"] = tri_ptr("f16", "f32", "f32", "ieee", 128, 128, 64, 8, 3, 256, 256, 256)
    J["tri_ptr_f16_f16acc_w4"] = tri_ptr("f16", "f16", "f16", "ieee", 64, 64, 32, 4, 2, 128, 64, 128)
    J["tri_ptr_f16_at_w4"] = tri_ptr("f16", "f32", "f32", "ieee", 64, 64, 32, 4, 3, 128, 128, 128, at=True)
    J["tri_ptr_f16_bt_w8"] = tri_ptr("f16", "f16", "f32", "ieee", 128, 64, 64, 8, 3, 256, 128, 256, bt=True)
    J["tri_ptr_f16_masked_w4"] = tri_ptr("f16", "f32", "f32", "ieee", 64, 64, 32, 4, 3, 100, 90, 72, masked=True)
    J["tri_ptr_bf16_w4"] = tri_ptr("bf16", "bf16", "f32", "ieee", 64, 128, 64, 4, 3, 128, 256, 256)
    J["tri_ptr_bf16_w8"] = tri_ptr("bf16", "f32", "f32", "ieee", 128, 256, 64, 8, 3, 256, 256, 128)
    J["tri_ptr_e4m3_w4_k1024"] = tri_ptr("e4m3", "f32", "f32", "ieee", 64, 64, 128, 4, 3, 128, 128, 1024, bt=True)
    J["tri_ptr_e4m3_w8_k4096"] = tri_ptr("e4m3", "f16", "f32", "ieee", 128, 128, 128, 8, 4, 256, 256, 4096, bt=True)
    J["tri_ptr_e4m3_bn_w4"] = tri_ptr("e4m3", "f32", "f32", "ieee", 64, 64, 64, 4, 3, 128, 128, 512)
    J["tri_ptr_e5m2_w4"] = tri_ptr("e5m2", "f32", "f32", "ieee", 64, 128, 128, 4, 3, 128, 256, 1024, bt=True)
    J["tri_ptr_tf32_w4"] = tri_ptr("f32", "f32", "f32", "tf32", 64, 64, 32, 4, 3, 128, 128, 128)
    J["tri_ptr_tf32_w8"] = tri_ptr("f32", "f32", "f32", "tf32", 128, 128, 32, 8, 3, 256, 256, 128, bt=True)
    J["tri_ptr_s8_w4"] = tri_ptr("s8", "s32", "s32", "ieee", 64, 64, 64, 4, 3, 128, 128, 256, bt=True)
    J["tri_ptr_s8_w8"] = tri_ptr("s8", "s32", "s32", "ieee", 128, 128, 128, 8, 3, 256, 256, 512, bt=True)
    # register-A wgmma through an in-register upcast
    J["tri_up_e4m3_f16_w4"] = tri_upcast("e4m3", "f16", 64, 64, 64, 4, 128, 128, 256)
    J["tri_up_s8_bf16_w8"] = tri_upcast("s8", "bf16", 128, 128, 64, 8, 256, 256, 256)
    # host TMA descriptors
    J["tri_tma_f16_w4"] = tri_tma("f16", "f16", "f32", 64, 64, 64, 4, 3, 128, 128, 256)
    J["tri_tma_f16_kmaj_w8"] = tri_tma("f16", "f32", "f32", 128, 128, 64, 8, 3, 256, 256, 256, bkmajor=True)
    J["tri_tma_bf16_w4"] = tri_tma("bf16", "bf16", "f32", 64, 128, 64, 4, 4, 128, 256, 512)
    J["tri_tma_e4m3_w4_k1024"] = tri_tma("e4m3", "f16", "f32", 64, 64, 128, 4, 3, 128, 128, 1024, bkmajor=True)
    J["tri_tma_e4m3_128x256_k4096_w8"] = tri_tma("e4m3", "f16", "f32", 128, 256, 128, 8, 3, 256, 512, 4096,
                                                 bkmajor=True)
    J["tri_tma_tf32_w4"] = tri_tma("f32", "f32", "f32", 64, 64, 32, 4, 3, 128, 128, 128)
    J["tri_tma_pdl_f16_w4"] = dict(tri_tma("f16", "f16", "f32", 64, 128, 64, 4, 3, 256, 256, 256, bkmajor=True),
                                   kernel="mm_tma_pdl", options={"launch_pdl": True},
                                   constexprs=dict(BM=64, BN=128, BK=64))
    J["tri_tma_pdl_f16_w4"]["what"] += "; programmatic dependent launch (gdc_wait / gdc_launch_dependents)"
    J["tri_tma_cta2_f16_w8"] = dict(tri_tma("f16", "f16", "f32", 128, 128, 64, 8, 3, 256, 256, 256),
                                    options={"num_ctas": 2})
    J["tri_tma_cta2_f16_w8"]["what"] += "; num_ctas=2 (a cluster of 2 CTAs per program)"
    J["tri_tma_s8_w4"] = tri_tma("s8", "s32", "s32", 64, 64, 128, 4, 3, 128, 128, 512, bkmajor=True)
    # device TMA descriptors
    J["tri_devtma_f16_w4"] = tri_devtma("f16", "f16", 64, 64, 64, 4, 3, 128, 128, 256)
    J["tri_devtma_bf16_w8"] = tri_devtma("bf16", "f32", 128, 128, 64, 8, 3, 256, 256, 256)
    # persistent, warp-specialised
    J["tri_persist_f16_w4"] = tri_persistent("f16", "f16", 64, 128, 64, 4, 3, 512, 512, 256)
    J["tri_persist_f16_w8"] = tri_persistent("f16", "f16", 128, 128, 64, 8, 3, 1024, 1024, 512)
    J["tri_persist_e4m3_w8"] = tri_persistent("e4m3", "f16", 128, 128, 128, 8, 3, 1024, 1024, 1024)
    J["tri_persist_ws_f16_w4"] = tri_persistent("f16", "f16", 64, 128, 64, 4, 3, 512, 512, 256, ws=True,
                                                flatten=False)
    J["tri_ws_f16_w4"] = tri_ws("f16", "f16", 64, 128, 64, 4, 3, 256, 256, 512)
    J["tri_ws_bf16_w8"] = tri_ws("bf16", "f32", 128, 128, 64, 8, 3, 256, 256, 512)
    # two chained products
    J["tri_attn_chain_w4"] = tri_attn(128, 64, 64, 64, 4, False)
    J["tri_attn_softmax_w4"] = tri_attn(256, 64, 64, 64, 4, True)
    J["tri_attn_softmax_w8"] = tri_attn(256, 128, 128, 64, 8, True)
    # Gluon
    J["gl_pipe_f16_w4"] = gl_job("gl_mm_pipelined", "f16", "f16", 64, 64, 64, 4, 128, 128, 256, stages=3)
    J["gl_pipe_f16_kmaj_w8"] = gl_job("gl_mm_pipelined", "f16", "f32", 128, 128, 64, 8, 256, 256, 512, stages=4,
                                      bkmajor=True)
    J["gl_pipe_bf16_w4"] = gl_job("gl_mm_pipelined", "bf16", "bf16", 64, 128, 64, 4, 128, 256, 256, stages=3)
    J["gl_pipe_e4m3_kmaj_w4"] = gl_job("gl_mm_pipelined", "e4m3", "f16", 64, 128, 128, 4, 128, 256, 1024,
                                       stages=3, bkmajor=True)
    J["gl_regA_f16_w4"] = gl_job("gl_mm_regA", "f16", "f32", 64, 64, 64, 4, 128, 128, 256, stages=1)
    J["gl_ws_f16_w4"] = gl_job("gl_mm_ws", "f16", "f16", 64, 128, 64, 4, 256, 256, 512, stages=3, bkmajor=True)
    return J


# ------------------------------------------------------------------ CuTe (nvcc) -----------------

def cutlass_include() -> str:
    try:
        import cutlass_library
        return os.path.join(os.path.dirname(cutlass_library.__file__), "source", "include")
    except ImportError:
        return os.environ.get("CUTLASS_INCLUDE", "/work/scratch/corpus/cutlass/cutlass_library/source/include")


CUTE_FLAGS = ["-ptx", "-arch=sm_90a", "-std=c++17", "--expt-relaxed-constexpr", "-O3"]
_probe_cache: dict = {}


def cute_probe() -> dict:
    """Compile and run cute_sm90_probe.cu (host only, no GPU): the tensor maps CuTe's host code builds."""
    if not _probe_cache:
        import tempfile
        with tempfile.TemporaryDirectory() as td:
            exe = Path(td) / "probe"
            subprocess.run(["nvcc", "-std=c++17", "--expt-relaxed-constexpr", "-arch=sm_90a", "-O1",
                            "-DCUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL=1", "-I", cutlass_include(), "-o", str(exe),
                            str(SRC / "cute_sm90_probe.cu")], check=True, capture_output=True, text=True)
            _probe_cache.update(json.loads(subprocess.run([str(exe)], check=True, capture_output=True,
                                                          text=True).stdout))
    return _probe_cache


def _cute_tensormap(enc: dict, buf: str, dtype: str, shape: list, info: dict) -> dict:
    return {"buffer": buf, "dtype": dtype, "shape": shape, "strides": _rowmajor(shape),
            "param_bytes": info["sizeof"], "param_align": info["alignof"], "tensormap_offset": info["tensormap_offset"],
            "note": "CuTe TMA copy atom by value (__grid_constant__): bytes tensormap_offset..+127 are the "
                    "CUtensorMap; the rest is CuTe's AuxTmaParams (static here) and padding",
            "encode": {"function": "cuTensorMapEncodeTiled",
                       "tensorDataType": _TMA_DTYPE.get(enc["tensorDataType"], enc["tensorDataType"]),
                       "tensorRank": enc["tensorRank"], "globalAddress": f"base of {buf}",
                       "globalDim": enc["globalDim"], "globalStrides_bytes": enc["globalStrides_bytes"],
                       "boxDim": enc["boxDim"], "elementStrides": enc["elementStrides"],
                       "interleave": ["CU_TENSOR_MAP_INTERLEAVE_NONE", "CU_TENSOR_MAP_INTERLEAVE_16B",
                                      "CU_TENSOR_MAP_INTERLEAVE_32B"][enc["interleave"]],
                       "swizzle": _SWIZZLE.get(enc["swizzle"], enc["swizzle"]),
                       "swizzle_bytes": _SWIZZLE_BYTES.get(enc["swizzle"]),
                       "l2Promotion": ["CU_TENSOR_MAP_L2_PROMOTION_NONE", "CU_TENSOR_MAP_L2_PROMOTION_L2_64B",
                                       "CU_TENSOR_MAP_L2_PROMOTION_L2_128B", "CU_TENSOR_MAP_L2_PROMOTION_L2_256B"][
                                           enc["l2Promotion"]],
                       "oobFill": ["CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE",
                                   "CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA"][enc["oobFill"]]}}


# name: (CUTE_SM90_ONLY, entry, dtype, M, N, K, BM, BN, threads, cluster, A stored MN-major, what)
CUTE = {
    "cute_gmma_ss_f16": (1, "cute_gmma_ss_f16", "f16", 128, 128, 256, 64, 64, 128, [1, 1, 1], False,
                         "CuTe SM90_64x64x16_F32F16F16_SS<K,K>: A (M,K), B (N,K) K-major staged by threads into "
                         "GMMA K_SW128 shared tiles (static smem, 1024-aligned), fence.proxy.async, wgmma with smem "
                         "descriptors; CTA tile 64x64x64, one warpgroup"),
    "cute_gmma_rs_f16": (2, "cute_gmma_rs_f16", "f16", 128, 128, 256, 64, 64, 128, [1, 1, 1], False,
                         "CuTe SM90_64x64x16_F32F16F16_RS<K,K>: as cute_gmma_ss_f16 but A read shared -> registers "
                         "(register-A wgmma)"),
    "cute_tma_pipe_f16": (3, "cute_tma_pipe_f16", "f16", 256, 256, 512, 128, 128, 256, [2, 1, 1], False,
                          "CuTe TMA (SM90_TMA_LOAD, SW128 box 64x128) + full/empty mbarrier ring of 3 stages, two "
                          "consumer warpgroups (2x1 SM90_64x128x16_F32F16F16_SS), CTA tile 128x128x64, clusters of "
                          "2x1x1 (cluster_sync, no multicast)"),
    "cute_tma_ws_bf16": (4, "cute_tma_ws_bf16", "bf16", 256, 256, 512, 128, 128, 384, [1, 1, 1], False,
                         "CuTe warp-specialised bf16: warpgroup 0 producer (setmaxnreg.dec 40, elected thread issues "
                         "TMA), warpgroups 1-2 consumers (setmaxnreg.inc 232), 4-stage ring, wgmma wait<1> then "
                         "release of the previous stage; CTA tile 128x128x64"),
    "cute_tma_fp8": (5, "cute_tma_fp8", "e4m3", 128, 256, 1024, 64, 128, 128, [1, 1, 1], False,
                     "CuTe fp8: SM90_64x128x32_F32E4M3E4M3_SS_TN, TMA (SW128 box 128x64 / 128x128 bytes), 3-stage "
                     "mbarrier pipeline, one warpgroup, CTA tile 64x128x128, K=1024, f32 accumulate"),
    "cute_gmma_ss_f16_mn": (6, "cute_gmma_ss_f16_mn", "f16", 128, 128, 128, 64, 64, 128, [1, 1, 1], True,
                            "CuTe SM90_64x64x16_F32F16F16_SS<MN,MN>: A stored (K, M) and B stored (K, N) (M/N "
                            "contiguous), MN_SW64 shared atoms, CTA tile 64x64x32"),
    "cute_tma_mcast_f16": (7, "cute_tma_mcast_f16", "f16", 512, 256, 512, 128, 128, 256, [2, 1, 1], False,
                           "CuTe TMA multicast: clusters of 2x1x1 (__cluster_dims__) share the B tile, each CTA "
                           "loads half of it with SM90_TMA_LOAD_MULTICAST (mask 0b11) into both CTAs; consumers "
                           "release a stage on both CTAs' empty barriers (mapa + mbarrier.arrive.shared::cluster); "
                           "3 stages, two consumer warpgroups, CTA tile 128x128x64, cluster_sync before exit"),
}


def build_cute(name: str, cfg: tuple) -> tuple[str, dict]:
    only, entry, dt, m, n, k, bm, bn, threads, cluster, mn, what = cfg
    flags = CUTE_FLAGS + [f"-DCUTE_SM90_ONLY={only}"]
    cmd = ["nvcc", *flags, "-I", cutlass_include(), "-o", "-", str(SRC / "cute_sm90.cu")]
    ptx = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    if entries(ptx) != [entry]:
        raise RuntimeError(f"{name}: entries {entries(ptx)}")
    params = entry_params(ptx, entry)
    probe = cute_probe()
    c = {"role": "pointer", "buffer": "C", "dtype": "f32", "shape": [m, n], "strides": [n, 1]}
    scal = [{"role": "scalar", "value": v, "meaning": w} for v, w in ((m, "M"), (n, "N"), (k, "K"))]
    if entry in probe:
        pr = probe[entry]
        assert (pr["M"], pr["N"], pr["K"]) == (m, n, k)
        roles = [{"role": "tensormap", "tensormap": _cute_tensormap(pr["tensormaps"][0], "A", dt, [m, k], pr["param_0"])},
                 {"role": "tensormap", "tensormap": _cute_tensormap(pr["tensormaps"][1], "B", dt, [n, k], pr["param_1"])},
                 c, *scal]
        dyn = pr["dynamic_smem_bytes"]
    else:
        a = {"role": "pointer", "buffer": "A", "dtype": dt, "shape": [k, m] if mn else [m, k]}
        b = {"role": "pointer", "buffer": "B", "dtype": dt, "shape": [k, n] if mn else [n, k]}
        a["strides"], b["strides"] = _rowmajor(a["shape"]), _rowmajor(b["shape"])
        roles = [a, b, c, *scal]
        dyn = 0
    if len(roles) != len(params):
        raise RuntimeError(f"{name}: {len(params)} params, {len(roles)} roles")
    launch = {"entry": entry, "grid": [m // bm, n // bn, 1], "block": [threads, 1, 1], "shared_bytes": dyn,
              "cluster": cluster, "params": [dict(p, **r) for p, r in zip(params, roles)],
              "contract": {"C": "A.T @ B" if mn else "A @ B.T"}}
    if dyn > 48 * 1024:
        launch["note"] = "dynamic shared memory above 48 KiB: cudaFuncSetAttribute(MaxDynamicSharedMemorySize)"
    if cluster != [1, 1, 1]:
        launch["note_cluster"] = "launch with cudaLaunchKernelEx and a cluster dimension attribute"
    rec = {"source": f"tools/kernel_sources/cute_sm90.cu::{entry}", "kernel": entry, "compiler": _tool_version("nvcc"),
           "target": "sm_90a", "options": {"flags": " ".join(flags) + " -I <nvidia-cutlass 4.2.0>/include"},
           "constexprs": {}, "computes": f"C[{m}x{n}] f32 = {'A^T-stored' if mn else 'A'} @ B^T-stored, {dt}, K={k}: "
           + what, "launch": launch,
           "host_probe": "tools/kernel_sources/cute_sm90_probe.cu (tensor maps as CuTe's make_tma_atom builds them)"
           if entry in probe else None}
    return ptx, rec


def cute_jobs() -> dict:
    return CUTE


# ------------------------------------------------------------------ construct inventory ---------

CONSTRUCTS = [
    ("wgmma.fence", r"\bwgmma\.fence"),
    ("wgmma.mma_async", r"\bwgmma\.mma_async"),
    ("wgmma.mma_async.sp", r"\bwgmma\.mma_async\.sp"),
    ("wgmma.mma_async, register A", r"\bwgmma\.mma_async[^{]*\{[^}]*\},\s*\{"),
    ("wgmma.commit_group", r"\bwgmma\.commit_group"),
    ("wgmma.wait_group", r"\bwgmma\.wait_group"),
    ("cp.async.bulk.tensor (load)", r"\bcp\.async\.bulk\.tensor\.\w+\.shared::(cluster|cta)\.global"),
    ("cp.async.bulk.tensor (store)", r"\bcp\.async\.bulk\.tensor\.\w+\.global\.shared::cta"),
    ("cp.async.bulk (non-tensor)", r"\bcp\.async\.bulk\.(?!tensor|commit|wait|prefetch)"),
    ("cp.async.bulk.commit_group", r"\bcp\.async\.bulk\.commit_group"),
    ("cp.async.bulk.wait_group", r"\bcp\.async\.bulk\.wait_group"),
    ("cp.reduce.async.bulk", r"\bcp\.reduce\.async\.bulk"),
    ("cp.async.bulk.prefetch", r"\bcp\.async\.bulk\.prefetch"),
    ("cp.async (ampere)", r"\bcp\.async\.c[ag]\b"),
    ("cp.async.commit/wait_group", r"\bcp\.async\.(commit_group|wait_group|wait_all)"),
    ("cp.async.mbarrier.arrive", r"\bcp\.async\.mbarrier\.arrive"),
    ("mbarrier.init", r"\bmbarrier\.init"),
    ("mbarrier.inval", r"\bmbarrier\.inval"),
    ("mbarrier.arrive.expect_tx", r"\bmbarrier\.arrive\.expect_tx"),
    ("mbarrier.expect_tx", r"\bmbarrier\.expect_tx"),
    ("mbarrier.arrive (other)", r"\bmbarrier\.arrive(?!\.expect_tx)"),
    ("mbarrier.try_wait", r"\bmbarrier\.try_wait"),
    ("mbarrier.test_wait", r"\bmbarrier\.test_wait"),
    ("mbarrier.wait (other)", r"\bmbarrier\.(?!try_wait|test_wait|init|inval|arrive|expect)\w+"),
    ("fence.proxy.async", r"\bfence\.proxy\.async"),
    ("fence.proxy.tensormap", r"\bfence\.proxy\.tensormap"),
    ("fence.mbarrier_init", r"\bfence\.mbarrier_init"),
    ("fence (other)", r"(?<![\w.])fence\.(?!proxy|mbarrier_init)\w+"),
    ("membar", r"\bmembar\."),
    ("tensormap.replace", r"\btensormap\.replace"),
    ("tensormap.cp_fenceproxy", r"\btensormap\.cp_fenceproxy"),
    ("prefetch.tensormap", r"\bprefetch\.\S*tensormap"),
    ("elect.sync", r"\belect\.sync"),
    ("setmaxnreg", r"\bsetmaxnreg"),
    ("stmatrix", r"\bstmatrix"),
    ("ldmatrix", r"\bldmatrix"),
    ("mma.sync (non-wgmma)", r"(?<![\w.])mma\.sync"),
    ("griddepcontrol", r"\bgriddepcontrol"),
    ("barrier.cluster", r"\bbarrier\.cluster"),
    ("bar.sync / barrier.sync", r"\b(bar\.sync|barrier\.sync|bar\.arrive|barrier\.arrive|bar\.red|barrier\.red)"),
    ("named barrier (bar.sync id, n)", r"\bbar(rier)?\.(sync|arrive)(\.aligned)?\s+[^;]*,"),
    ("cluster special registers", r"%(cluster_\w+|clusterid\.\w|nclusterid\.\w|is_explicit_cluster|cluster_ctarank|cluster_nctarank)"),
    ("mapa", r"\bmapa\b"),
    (".shared::cluster", r"\.shared::cluster"),
    ("st.async / red.async", r"\b(st|red)\.async"),
    ("multimem", r"\bmultimem\."),
    ("shfl.sync", r"\bshfl\.sync"),
    ("vote / match / redux", r"\b(vote|match|redux)\.sync"),
    ("atom", r"\batom\."),
    ("red (non-async)", r"(?<![\w.])red\.(?!async)"),
    ("prmt", r"\bprmt\."),
    ("cvt (packed f16x2/bf16x2/e4m3x2/e5m2x2)", r"\bcvt\.[\w.]*(x2|x4)\b"),
    ("cvt.rna.tf32", r"\bcvt\.rna\.tf32"),
    ("ld.global.nc/ld.volatile/ld.acquire", r"\bld\.(global\.nc|volatile|acquire|relaxed)"),
    (".approx math", r"\.approx\b"),
    ("ex2", r"\bex2\."),
    ("call", r"(?<![\w.])call(\.uni)?\b"),
    ("getctarank / %dynamic_smem_size", r"(getctarank|%dynamic_smem_size|%total_smem_size)"),
    ("%globaltimer / clock", r"%(globaltimer|clock)"),
    ("trap / brkpt", r"\b(trap|brkpt)\b"),
    ("nanosleep", r"\bnanosleep"),
    ("inline asm {} blocks", r"^\s*\{\s*$"),
]


def _strip_comments(line: str) -> str:
    return line.split("//", 1)[0]


def inventory(ptx: str) -> dict:
    lines = ptx.splitlines()
    out = {}
    for label, pat in CONSTRUCTS:
        rx = re.compile(pat)
        hits = [(i + 1, l.strip()) for i, l in enumerate(lines) if rx.search(_strip_comments(l))]
        if hits:
            out[label] = {"count": len(hits), "example": f"line {hits[0][0]}: {hits[0][1][:200]}"}
    # distinct wgmma / cvt / prmt forms
    forms = collections.Counter()
    for l in lines:
        s = _strip_comments(l).strip()
        m = re.match(r"(?:@!?%\w+\s+)?((?:wgmma|cvt\.\w+\.(?:f16x2|bf16x2|e4m3x2|e5m2x2|tf32|f16|bf16|e4m3|e5m2)|prmt|mbarrier|cp\.async|fence|tensormap|setmaxnreg|elect|stmatrix"
                     r"|griddepcontrol|barrier|bar|ldmatrix|mma)[\w.:]*)", s)
        if m:
            forms[m.group(1)] += 1
    return {"constructs": out, "forms": dict(sorted(forms.items()))}


def write_inventory(out_dir: Path, md_path: Path) -> None:
    man = json.loads((out_dir / "manifest.json").read_text())
    rows = []
    total = collections.Counter()
    per_mod = {}
    lint = {}
    for name, rec in sorted(man.items()):
        ptx = (out_dir / rec["ptx"]).read_text()
        inv = inventory(ptx)
        per_mod[name] = inv
        try:
            r = subprocess.run(["ptx-formal", "kernel", "lint", str(out_dir / rec["ptx"])], capture_output=True,
                               text=True, timeout=300)
            first = (r.stderr.strip() or r.stdout.strip()).splitlines()
            lint[name] = (r.returncode, first[0].replace(str(out_dir) + "/", "") if first else "")
        except (OSError, subprocess.TimeoutExpired) as e:
            lint[name] = (None, f"lint not run: {type(e).__name__}")
        for k, v in inv["constructs"].items():
            total[k] += 1
    lines = ["# sm_90a constructs in the Hopper corpus", "",
             f"{len(man)} modules in `tests/data/kernels_hopper/` (built by `tools/make_hopper_corpus.py`). "
             "Counts are PTX lines matching each construct (comments stripped); the example is the first such line.", "",
             "## Modules using each construct", "", "| construct | modules |", "|---|---|"]
    for label, _ in CONSTRUCTS:
        if total[label]:
            lines.append(f"| {label} | {total[label]} |")
    causes = collections.Counter()
    for name, (rc, msg) in lint.items():
        key = re.sub(r"line \d+", "line N", re.sub(r"\S+\.ptx:\d+:", "FILE:N:", msg))
        key = re.sub(r"'\[.*", "'[...]'", key)
        causes[(rc, key)] += 1
    wg = collections.Counter()
    wg_mods = collections.defaultdict(set)
    for name, inv in per_mod.items():
        for k, v in inv["forms"].items():
            if k.startswith("wgmma.mma_async"):
                wg[k] += v
                wg_mods[k].add(name)
    lines += ["", "## wgmma forms", "", "| form | PTX lines | modules |", "|---|---|---|"]
    for k, v in sorted(wg.items()):
        lines.append(f"| `{k}` | {v} | {len(wg_mods[k])} |")
    lines += ["", "## `ptx-formal kernel lint` on these modules (the tool as of this commit)", "",
              "| exit | first line (line numbers and operands elided) | modules |", "|---|---|---|"]
    for (rc, key), n in causes.most_common():
        lines.append(f"| {rc} | {key.replace('|', chr(92) + '|')} | {n} |")
    lines += ["", "## Per module", ""]
    for name, inv in per_mod.items():
        rec = man[name]
        L = rec["launch"] if isinstance(rec["launch"], dict) else rec["launch"][0]
        rc, msg = lint[name]
        lines += [f"### {name}", "", f"{rec['compiler']}, {rec['source']}: {rec['computes']}", "",
                  f"launch: grid {L['grid']}, block {L['block']}, cluster {L.get('cluster', [1, 1, 1])}, dynamic shared "
                  f"{L['shared_bytes']} B; {rec['bytes']} bytes of PTX", "",
                  f"`kernel lint`: exit {rc}: `{msg[:300]}`", "",
                  "| construct | count | example |", "|---|---|---|"]
        for k, v in inv["constructs"].items():
            ex = v["example"].replace("|", "\\|")
            lines.append(f"| {k} | {v['count']} | `{ex}` |")
        lines += ["", "distinct opcodes of interest: " + ", ".join(f"`{k}` x{v}" for k, v in inv["forms"].items()), ""]
    md_path.write_text("\n".join(lines) + "\n")


# ------------------------------------------------------------------ main ------------------------

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--inventory", help="write the construct inventory (markdown) and exit")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.inventory:
        write_inventory(out, Path(args.inventory))
        return 0
    man_path = out / "manifest.json"
    manifest = json.loads(man_path.read_text()) if man_path.exists() else {}
    jobs = [(n, build_triton, j) for n, j in triton_jobs().items()] + [(n, build_cute, j) for n, j in cute_jobs().items()]
    failed = []
    for name, build, job in jobs:
        if args.only and name not in args.only:
            continue
        try:
            ptx, rec = build(name, job)
        except Exception as e:  # one failing kernel must not lose the others
            failed.append(name)
            msg = str(e).strip().splitlines()
            print(f"FAILED {name}: {type(e).__name__}: {msg[-1] if msg else ''}"[:400], file=sys.stderr)
            continue
        (out / f"{name}.ptx").write_text(ptx)
        rec.update(ptx=f"{name}.ptx", bytes=len(ptx.encode()), sha256=hashlib.sha256(ptx.encode()).hexdigest(),
                   instructions=sorted(set(re.findall(
                       r"^\s*(?:@!?%p\d+\s+)?((?:mma|wgmma|wmma|ldmatrix|stmatrix|movmatrix)[\w.:]*)", ptx, re.M))))
        manifest[name] = rec
        print(f"{name}: {rec['bytes']} bytes, {', '.join(rec['instructions'][:4])}", flush=True)
        man_path.write_text(json.dumps(dict(sorted(manifest.items())), indent=1) + "\n")
    if failed:
        print(f"{len(failed)} failed: {' '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
