"""Build the kernel corpus: PTX that real compilers emit from this project's own sources.

    python3 tools/make_kernel_corpus.py [--only NAME ...] [--out tests/data/kernels]

Writes, per kernel, ``<name>.ptx`` (the compiler's output, unchanged) and ``<name>.toml``
(the kernel spec: launch, buffers, contract), plus ``manifest.json`` (source, compiler and
version, target, options, what the kernel computes, sha256 of the PTX).

Sources live in tools/kernel_sources/: Triton kernels (triton_mm.py) compiled with
``triton.compile`` for an explicit GPUTarget (no GPU needed), and CUDA C++ kernels (CuTe
atoms, the wmma API, inline mma.sp) compiled with ``nvcc -ptx``.

The H100's driver (CUDA 13.0) JIT-compiles PTX up to ISA 9.0, so every module is emitted
at ``.version 9.0``: Triton through its ``ptx_version`` option (and CUDA 13.0's ptxas, which
accepts 9.0, in place of the ptxas bundled with Triton), nvcc 13.0 natively.
"""

from __future__ import annotations

import argparse
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
OUT = ROOT / "tests" / "data" / "kernels"
PTX_VERSION = 90            # highest PTX ISA the H100 driver (CUDA 13.0) JIT-compiles


# ---------------------------------------------------------------- Triton -------------------

# name: (cc, a type, b type, c type, acc, precision, BM, BN, BK, warps, stages, M, N, K, a^T, b^T, masked)
TRITON = {
    "tri_f16_f32acc_sm80_w4":   (80, "f16", "f16", "f32", "f32", "ieee", 64, 64, 32, 4, 2, 128, 128, 64, 0, 0, 0),
    "tri_f16_f16acc_sm80_w2":   (80, "f16", "f16", "f16", "f16", "ieee", 32, 32, 32, 2, 2, 64, 64, 64, 0, 0, 0),
    "tri_f16_f32acc_sm80_w1":   (80, "f16", "f16", "f32", "f32", "ieee", 16, 32, 16, 1, 1, 32, 64, 48, 0, 0, 0),
    "tri_f16_at_sm80_w4":       (80, "f16", "f16", "f32", "f32", "ieee", 32, 64, 32, 4, 2, 64, 64, 64, 1, 0, 0),
    "tri_f16_bt_sm90_w2":       (90, "f16", "f16", "f32", "f32", "ieee", 32, 32, 32, 2, 2, 64, 64, 64, 0, 1, 0),
    "tri_f16_masked_sm80_w4":   (80, "f16", "f16", "f32", "f32", "ieee", 32, 32, 32, 4, 2, 50, 40, 72, 0, 0, 1),
    "tri_f16_f32acc_sm90_w4":   (90, "f16", "f16", "f32", "f32", "ieee", 32, 64, 32, 4, 3, 64, 64, 128, 0, 0, 0),
    "tri_bf16_f32acc_sm80_w8":  (80, "bf16", "bf16", "f32", "f32", "ieee", 64, 128, 32, 8, 2, 64, 128, 64, 0, 0, 0),
    "tri_bf16_f32acc_sm90_w1":  (90, "bf16", "bf16", "bf16", "f32", "ieee", 16, 32, 32, 1, 2, 32, 64, 64, 0, 0, 0),
    "tri_tf32_sm80_w4":         (80, "f32", "f32", "f32", "f32", "tf32", 32, 32, 16, 4, 2, 64, 64, 64, 0, 0, 0),
    "tri_tf32x3_sm80_w4":       (80, "f32", "f32", "f32", "f32", "tf32x3", 32, 32, 16, 4, 2, 64, 32, 32, 0, 0, 0),
    "tri_tf32_masked_sm90_w2":  (90, "f32", "f32", "f32", "f32", "tf32", 32, 32, 16, 2, 2, 40, 48, 40, 0, 0, 1),
    "tri_e4m3_sm89_w4":         (89, "e4m3", "e4m3", "f32", "f32", "ieee", 32, 32, 64, 4, 2, 64, 64, 128, 0, 0, 0),
    "tri_e5m2_sm89_w2":         (89, "e5m2", "e5m2", "f32", "f32", "ieee", 32, 32, 32, 2, 2, 64, 32, 64, 0, 0, 0),
    "tri_e4m3_sm90_w2":         (90, "e4m3", "e4m3", "f16", "f32", "ieee", 32, 32, 32, 2, 2, 32, 64, 64, 0, 0, 0),
    "tri_s8_sm80_w4":           (80, "s8", "s8", "s32", "s32", "ieee", 32, 64, 32, 4, 2, 64, 64, 64, 0, 0, 0),
    "tri_s8_bt_sm90_w2":        (90, "s8", "s8", "s32", "s32", "ieee", 32, 32, 64, 2, 2, 64, 64, 128, 0, 1, 0),
    # masked int8: masked-off A/B elements are filled with a constant (mov.u16 0x0) that feeds rows
    # and columns never stored, and the padded k of stored ones (times B's zero padding)
    "tri_s8_masked_sm80_w4":    (80, "s8", "s8", "s32", "s32", "ieee", 32, 32, 32, 4, 2, 50, 40, 72, 0, 0, 1),
    # wgmma on sm_90a (BM=64, 4 warps): out of scope, the expected "unsupported" case
    "tri_f16_wgmma_sm90_w4":    (90, "f16", "f16", "f32", "f32", "ieee", 64, 64, 32, 4, 2, 64, 64, 64, 0, 0, 0),
    # benchmark kernels: one 128x128 CTA tile with K = 1024; a whole 512^3 GEMM
    "bench_f16_tile128_k1024":  (80, "f16", "f16", "f32", "f32", "ieee", 128, 128, 32, 8, 2, 128, 128, 1024, 0, 0, 0),
    "bench_f16_gemm512":        (80, "f16", "f16", "f32", "f32", "ieee", 128, 128, 32, 8, 2, 512, 512, 512, 0, 0, 0),
}
BENCH_ONLY = {"bench_f16_tile128_k1024", "bench_f16_gemm512"}

_TT = {"f16": "fp16", "bf16": "bf16", "f32": "fp32", "e4m3": "fp8e4nv", "e5m2": "fp8e5", "s8": "i8", "s32": "i32"}


def _triton_env() -> None:
    """Triton's bundled ptxas (CUDA 12.8) rejects .version 9.0; CUDA 13.0's accepts it."""
    ptxas = shutil.which("ptxas")
    if ptxas:
        os.environ.setdefault("TRITON_PTXAS_PATH", ptxas)
        os.environ.setdefault("TRITON_PTXAS_BLACKWELL_PATH", ptxas)
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "0")


def build_triton(name: str, cfg: tuple) -> tuple[str, dict, dict]:
    _triton_env()
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    sys.path.insert(0, str(SRC))
    import triton_mm

    cc, ta, tb, tc, acc, prec, bm, bn, bk, nw, ns, m, n, k, at, bt, masked = cfg
    sig = {"a_ptr": "*" + _TT[ta], "b_ptr": "*" + _TT[tb], "c_ptr": "*" + _TT[tc], "M": "i32", "N": "i32", "K": "i32"}
    # element strides: A is [M, K] (or stored [K, M]), B is [K, N] (or stored [N, K]); C is [M, N]
    sam, sak = (1, m) if at else (k, 1)
    sbk, sbn = (1, k) if bt else (n, 1)
    cx = dict(SAM=sam, SAK=sak, SBK=sbk, SBN=sbn, SCM=n, SCN=1, BM=bm, BN=bn, BK=bk,
              ACC={"f32": tl.float32, "f16": tl.float16, "s32": tl.int32}[acc], PREC=prec, MASKED=bool(masked))
    for c in cx:
        sig[c] = "constexpr"
    attrs = {(i,): [["tt.divisibility", 16]] for i in range(3)}
    comp = triton.compile(ASTSource(fn=triton_mm.mm, signature=sig, constexprs=cx, attrs=attrs),
                          target=GPUTarget("cuda", cc, 32),
                          options={"num_warps": nw, "num_stages": ns, "ptx_version": PTX_VERSION})
    ptx = comp.asm["ptx"]
    entry = comp.metadata.name
    spec = {
        "entry": entry,
        "grid": [-(-m // bm), -(-n // bn), 1],
        "block": [32 * nw, 1, 1],
        "shared_bytes": int(comp.metadata.shared),
        "params": {f"{entry}_param_3": m, f"{entry}_param_4": n, f"{entry}_param_5": k},
        "buffer": [
            {"name": "A", "param": f"{entry}_param_0", "type": ta, "shape": [k, m] if at else [m, k]},
            {"name": "B", "param": f"{entry}_param_1", "type": tb, "shape": [n, k] if bt else [k, n]},
            {"name": "C", "param": f"{entry}_param_2", "type": tc, "shape": [m, n]},
        ],
        "contract": {"C": f"A{'.T' if at else ''} @ B{'.T' if bt else ''}"},
    }
    if prec != "ieee":
        spec["buffer"][0]["note"] = spec["buffer"][1]["note"] = f"f32 elements rounded by the kernel ({prec})"
    what = (f"C[{m}x{n}] {tc} = A{'^T' if at else ''} @ B{'^T' if bt else ''}, A/B {ta}, K={k}, "
            f"accumulator {acc}{', dot precision ' + prec if prec != 'ieee' else ''}; "
            f"tile {bm}x{bn}x{bk}, {nw} warps, {ns} stages{', masked (sizes not multiples of the tile)' if masked else ''}")
    meta = {"source": "tools/kernel_sources/triton_mm.py::mm", "compiler": f"triton {triton.__version__}",
            "ptxas": _tool_version(os.environ.get("TRITON_PTXAS_PATH", "ptxas")),
            "target": f"sm_{cc}{'a' if cc >= 90 else ''}", "options": {"num_warps": nw, "num_stages": ns,
            "ptx_version": PTX_VERSION, "constexprs": {k2: str(v) for k2, v in cx.items()}},
            "computes": what}
    return ptx, spec, meta


# name: (cc, in type, out type, batch, M, N, K, BM, BN, BK, warps, add C)  -- triton_bmm.py
TRITON_BMM = {
    "tri_bmm_f16_sm80_w4": (80, "f16", "f32", 3, 64, 64, 64, 32, 64, 32, 4, 0),
    "tri_addmm_bf16_sm90_w2": (90, "bf16", "f32", 1, 64, 64, 64, 32, 32, 32, 2, 1),
}


def build_triton_bmm(name: str, cfg: tuple) -> tuple[str, dict, dict]:
    _triton_env()
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    sys.path.insert(0, str(SRC))
    import triton_bmm

    cc, ti, to, nb, m, n, k, bm, bn, bk, nw, add = cfg
    sig = {"a_ptr": "*" + _TT[ti], "b_ptr": "*" + _TT[ti], "c_ptr": "*fp32", "d_ptr": "*" + _TT[to],
           "M": "i32", "N": "i32", "K": "i32"}
    cx = dict(SAB=m * k, SAM=k, SAK=1, SBB=k * n, SBK=n, SBN=1, SCB=m * n, SCM=n, SCN=1, BM=bm, BN=bn, BK=bk,
              ADD=bool(add))
    for c in cx:
        sig[c] = "constexpr"
    attrs = {(i,): [["tt.divisibility", 16]] for i in range(4)}
    comp = triton.compile(ASTSource(fn=triton_bmm.bmm, signature=sig, constexprs=cx, attrs=attrs),
                          target=GPUTarget("cuda", cc, 32),
                          options={"num_warps": nw, "num_stages": 2, "ptx_version": PTX_VERSION})
    e = comp.metadata.name
    batched = nb > 1
    shp = (lambda r, c: [nb, r, c]) if batched else (lambda r, c: [r, c])
    bufs = [{"name": "A", "param": f"{e}_param_0", "type": ti, "shape": shp(m, k)},
            {"name": "B", "param": f"{e}_param_1", "type": ti, "shape": shp(k, n)}]
    if add:
        bufs.append({"name": "C", "param": f"{e}_param_2", "type": "f32", "shape": shp(m, n)})
    bufs.append({"name": "D", "param": f"{e}_param_3", "type": to, "shape": shp(m, n)})
    spec = {"entry": e, "grid": [m // bm, n // bn, nb], "block": [32 * nw, 1, 1],
            "shared_bytes": int(comp.metadata.shared),
            "params": {f"{e}_param_4": m, f"{e}_param_5": n, f"{e}_param_6": k},
            "buffer": bufs, "contract": {"D": "A @ B + C" if add else "A @ B"}}
    what = (f"{'batched (' + str(nb) + ') ' if batched else ''}D = A @ B{' + C' if add else ''}, {ti} -> {to}, "
            f"M=N={m}, K={k}; tile {bm}x{bn}x{bk}, {nw} warps; batch = program_id(2)")
    meta = {"source": "tools/kernel_sources/triton_bmm.py::bmm", "compiler": f"triton {triton.__version__}",
            "ptxas": _tool_version(os.environ.get("TRITON_PTXAS_PATH", "ptxas")),
            "target": f"sm_{cc}{'a' if cc >= 90 else ''}", "options": {"num_warps": nw, "num_stages": 2,
            "ptx_version": PTX_VERSION, "constexprs": {k2: str(v) for k2, v in cx.items()}},
            "computes": what}
    return comp.asm["ptx"], spec, meta


def _tool_version(tool: str) -> str:
    try:
        out = subprocess.run([tool, "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    m = re.search(r"release (\S+), V(\S+)", out)
    return f"{Path(tool).name} {m.group(2)}" if m else out.strip().splitlines()[-1]


# ---------------------------------------------------------------- CUDA C++ -----------------

def cutlass_include() -> str:
    import cutlass_library
    return os.path.join(os.path.dirname(cutlass_library.__file__), "source", "include")


def nvcc_ptx(src: Path, arch: str) -> str:
    cmd = ["nvcc", "-ptx", f"-arch={arch}", "-std=c++17", "--expt-relaxed-constexpr", "-O3",
           "-I", cutlass_include(), "-o", "-", str(src)]
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout


# CUDA modules: module name -> (source file, arch).  One module may hold several entries.
CUDA_MODULES = {
    "cute_gemm_sm80": ("cute_gemm.cu", "sm_80"),
    "cute_gemm_sm90a": ("cute_gemm.cu", "sm_90a"),
    "wmma_sm80": ("wmma_kernels.cu", "sm_80"),
    "wmma_sm90a": ("wmma_kernels.cu", "sm_90a"),
    "sparse_attn_sm80": ("sparse_attn.cu", "sm_80"),
    "sparse_attn_sm90a": ("sparse_attn.cu", "sm_90a"),
}


def _mm_buffers(ta, tb, tc, m, n, k, a_strides=None, b_strides=None, c_strides=None, b_shape=None):
    bufs = [{"name": "A", "param": "#0", "type": ta, "shape": [m, k]},
            {"name": "B", "param": "#1", "type": tb, "shape": b_shape or [k, n]},
            {"name": "C", "param": "#2", "type": tc, "shape": [m, n]}]
    for b, st in zip(bufs, (a_strides, b_strides, c_strides)):
        if st:
            b["strides"] = st
    return bufs


def _mm_spec(grid, block, m, n, k, bufs, contract="A @ B"):
    return {"grid": list(grid), "block": [block, 1, 1], "shared_bytes": 0,
            "params": {"#3": m, "#4": n, "#5": k}, "buffer": bufs, "contract": {"C": contract}}


# kernel name -> (module, entry, spec without the entry, what it computes)
CUDA = {
    "cute_gemm_f16_tn_sm80": ("cute_gemm_sm80", "cute_gemm_f16_tn",
        _mm_spec((2, 2, 1), 128, 128, 128, 64, _mm_buffers("f16", "f16", "f32", 128, 128, 64, b_shape=[128, 64]),
                 "A @ B.T"),
        "CuTe: C[128x128] f32 = A @ B^T, A (M,K) and B (N,K) K-major f16; 64x64x32 CTA tiles, SM80_16x8x16 atom "
        "on 2x2 warps, cp.async into Swizzle<2,3,3> shared tiles, SM75_U32x4_LDSM_N for A and B"),
    "cute_gemm_f16_nn_sm80": ("cute_gemm_sm80", "cute_gemm_f16_nn",
        _mm_spec((1, 2, 1), 128, 64, 128, 96, _mm_buffers("f16", "f16", "f32", 64, 128, 96)),
        "CuTe: C[64x128] f32 = A @ B, B (K,N) N-major staged in Swizzle<3,3,3> shared tiles and read with "
        "SM75_U16x8_LDSM_T (ldmatrix .trans)"),
    "cute_gemm_bf16_tn_sm80": ("cute_gemm_sm80", "cute_gemm_bf16_tn",
        _mm_spec((2, 1, 1), 128, 128, 64, 64, _mm_buffers("bf16", "bf16", "f32", 128, 64, 64, b_shape=[64, 64]),
                 "A @ B.T"),
        "CuTe: C[128x64] f32 = A @ B^T in bf16, SM80_16x8x16_F32BF16BF16F32_TN, LDSM_N"),
    "cute_gemm_f16_nn_sm90a": ("cute_gemm_sm90a", "cute_gemm_f16_nn",
        _mm_spec((2, 1, 1), 128, 128, 64, 64, _mm_buffers("f16", "f16", "f32", 128, 64, 64)),
        "CuTe on sm_90a (mma.sync, not wgmma): C[128x64] f32 = A @ B, ldmatrix .trans for B"),
    "wmma_f16_smem_sm80": ("wmma_sm80", "wmma_f16_smem",
        _mm_spec((2, 2, 1), 128, 64, 64, 64, _mm_buffers("f16", "f16", "f32", 64, 64, 64, b_strides=[1, 64])),
        "wmma m16n16k16 f16 -> f32: A row-major, B column-major (strides [1, K]); tiles staged in shared memory "
        "by two warps each, bar.sync, wmma.load from .shared"),
    "wmma_f16acc_m32n8k16_sm80": ("wmma_sm80", "wmma_f16acc_m32n8k16",
        _mm_spec((1, 4, 1), 128, 64, 64, 64, _mm_buffers("f16", "f16", "f16", 64, 64, 64, c_strides=[1, 64])),
        "wmma m32n8k16 with an f16 accumulator, fragments from global; C stored column-major (strides [1, M])"),
    "wmma_bf16_m8n32k16_sm80": ("wmma_sm80", "wmma_bf16_m8n32k16",
        _mm_spec((4, 1, 1), 128, 64, 64, 64, _mm_buffers("bf16", "bf16", "f32", 64, 64, 64, a_strides=[1, 64])),
        "wmma m8n32k16 bf16 -> f32, A column-major (strides [1, M])"),
    "wmma_tf32_m16n16k8_sm80": ("wmma_sm80", "wmma_tf32_m16n16k8",
        _mm_spec((2, 2, 1), 128, 64, 64, 32, _mm_buffers("f32", "f32", "f32", 64, 64, 32)),
        "wmma m16n16k8 .tf32: f32 inputs rounded in the fragments by __float_to_tf32 (cvt.rna.tf32.f32)"),
    "wmma_s8_acc_sm80": ("wmma_sm80", "wmma_s8_acc",
        _mm_spec((2, 2, 1), 128, 64, 64, 64, _mm_buffers("s8", "s8", "s32", 64, 64, 64, b_strides=[1, 64]),
                 "A @ B + C"),
        "wmma m16n16k16 s8 -> s32, C = A @ B + C (accumulator loaded from C with wmma.load.c)"),
    "wmma_s8_acc_sm90a": ("wmma_sm90a", "wmma_s8_acc",
        _mm_spec((2, 2, 1), 128, 64, 64, 64, _mm_buffers("s8", "s8", "s32", 64, 64, 64, b_strides=[1, 64]),
                 "A @ B + C"),
        "as wmma_s8_acc_sm80, compiled for sm_90a"),
    "wmma_f16_smem_sm90a": ("wmma_sm90a", "wmma_f16_smem",
        _mm_spec((2, 2, 1), 128, 64, 64, 64, _mm_buffers("f16", "f16", "f32", 64, 64, 64, b_strides=[1, 64])),
        "as wmma_f16_smem_sm80, compiled for sm_90a"),
}

_SPARSE_BUFFERS = [
    {"name": "A", "param": "#0", "type": "f16", "shape": [32, 32], "sparse": "2:4", "metadata": "E",
     "logical_shape": [32, 64]},
    {"name": "E", "param": "#1", "type": "u8", "shape": [32, 16], "generate": "sparse_meta_2of4",
     "meaning": "E[m][c]: nibble of chunk c (columns 4c..4c+3) of logical row m; idx0 = bits 1:0, idx1 = bits 3:2"},
    {"name": "B", "param": "#2", "type": "f16", "shape": [64, 32]},
    {"name": "C", "param": "#3", "type": "f32", "shape": [32, 32]},
]
_ATTN_BUFFERS = [
    {"name": "Q", "param": "#0", "type": "f16", "shape": [64, 32]},
    {"name": "K", "param": "#1", "type": "f16", "shape": [64, 32]},
    {"name": "V", "param": "#2", "type": "f16", "shape": [64, 32]},
    {"name": "S", "param": "#3", "type": "f16", "shape": [64, 64]},
    {"name": "O", "param": "#4", "type": "f32", "shape": [64, 32]},
]
for _arch in ("sm80", "sm90a"):
    CUDA[f"mma_sp_f16_{_arch}"] = (f"sparse_attn_{_arch}", "mma_sp_f16", {
        "grid": [1, 1, 1], "block": [256, 1, 1], "shared_bytes": 0,
        "params": {"#4": 32, "#5": 32, "#6": 64}, "buffer": _SPARSE_BUFFERS, "contract": {"C": "A @ B"}},
        "2:4 sparse GEMM with inline mma.sp m16n8k32 f16 -> f32 (selector 0): A compressed (M, K/2), metadata "
        "nibbles from the buffer E packed into the lanes' 32-bit e; C[32x32] = decompress(A, E) @ B")
    CUDA[f"attn_chain_{_arch}"] = (f"sparse_attn_{_arch}", "attn_chain", {
        "grid": [1, 1, 1], "block": [128, 1, 1], "shared_bytes": 0, "params": {},
        "buffer": _ATTN_BUFFERS, "contract": {"S": "Q @ K.T", "O": "S @ V"}, "chained": ["S"]},
        "attention-like chain without softmax: S = Q K^T (mma m16n8k16, f32), S rounded to f16 and packed "
        "(cvt.rn.f16x2.f32) into the A operand of O = S V (ldmatrix .x2.trans for V); S is also stored. "
        "'chained': the S that feeds O is the kernel's f16 S, passed in registers")

_module_cache: dict[str, str] = {}


def _name_params(spec: dict, entry: str) -> dict:
    """'#3' -> '<entry>_param_3' so the spec reads like the PTX."""
    fix = lambda p: f"{entry}_param_{p[1:]}" if isinstance(p, str) and p.startswith("#") else p
    spec = dict(spec)
    spec["params"] = {fix(k): v for k, v in spec.get("params", {}).items()}
    spec["buffer"] = [dict(b, param=fix(b["param"])) for b in spec["buffer"]]
    return spec


def build_cuda(name: str, cfg: tuple) -> tuple[str, dict, dict]:
    module, entry, spec, what = cfg
    src, arch = CUDA_MODULES[module]
    if module not in _module_cache:
        _module_cache[module] = nvcc_ptx(SRC / src, arch)
    ptx = _module_cache[module]
    if not re.search(r"\.entry\s+" + re.escape(entry) + r"\(", ptx):
        raise RuntimeError(f"{name}: no .entry {entry} in module {module}")
    spec = _name_params(dict(spec, entry=entry), entry)
    meta = {"source": f"tools/kernel_sources/{src}::{entry}", "compiler": _tool_version("nvcc"),
            "target": arch, "module": module,
            "options": {"flags": f"-ptx -arch={arch} -std=c++17 --expt-relaxed-constexpr -O3 -I <nvidia-cutlass>/include"},
            "computes": what}
    return ptx, spec, meta


# ---------------------------------------------------------------- output -------------------

def _entry_body(ptx: str, entry: str) -> str:
    """The text of one .entry (from its header to the next .entry)."""
    i = ptx.find(f".entry {entry}(")
    j = ptx.find(".entry ", i + 1)
    return ptx[i: j if j > 0 else len(ptx)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="kernel names to (re)build")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    man_path = out / "manifest.json"
    manifest = json.loads(man_path.read_text()) if man_path.exists() else {}
    jobs = ([(n, build_triton, c) for n, c in TRITON.items()] + [(n, build_triton_bmm, c) for n, c in TRITON_BMM.items()]
            + [(n, build_cuda, c) for n, c in CUDA.items()])
    failed = []
    for name, build, cfg in jobs:
        if args.only and name not in args.only:
            continue
        try:
            ptx, spec, meta = build(name, cfg)
        except Exception as e:  # one failing kernel must not lose the others
            failed.append(name)
            print(f"FAILED {name}: {str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__}",
                  file=sys.stderr)
            continue
        from formal.kernel.spec import load_spec, spec_toml
        toml = spec_toml(spec)
        load_spec(toml)                              # every spec written must load
        module = meta.get("module", name)
        (out / f"{module}.ptx").write_text(ptx)
        (out / f"{name}.toml").write_text(toml)
        meta.update(ptx=f"{module}.ptx", spec=f"{name}.toml", bench_only=name in BENCH_ONLY,
                    sha256=hashlib.sha256(ptx.encode()).hexdigest(),
                    instructions=sorted(set(re.findall(
                        r"^\s*(?:@!?%p\d+\s+)?((?:mma|wgmma|wmma|ldmatrix|stmatrix|movmatrix)[\w.:]*)",
                        _entry_body(ptx, spec["entry"]), re.M))))
        manifest[name] = meta
        print(f"{name}: {len(ptx.splitlines())} lines, {', '.join(meta['instructions'])}")
    man_path.write_text(json.dumps(dict(sorted(manifest.items())), indent=1) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
