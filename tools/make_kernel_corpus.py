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


# name: (source file, arch, entry, spec without the entry, computes)
CUDA: dict[str, tuple[str, str, str, dict, str]] = {}


def build_cuda(name: str, cfg: tuple) -> tuple[str, dict, dict]:
    src, arch, entry, spec, what = cfg
    ptx = nvcc_ptx(SRC / src, arch)
    m = re.search(r"\.entry\s+(" + re.escape(entry) + r"\S*)\(", ptx)
    if not m:
        raise RuntimeError(f"{name}: no .entry for {entry} in the PTX")
    spec = dict(spec, entry=m.group(1))
    spec = _name_params(spec, m.group(1))
    meta = {"source": f"tools/kernel_sources/{src}::{entry}", "compiler": _tool_version("nvcc"),
            "target": arch, "options": {"flags": "-ptx -std=c++17 --expt-relaxed-constexpr -O3 -I <cutlass>/include"},
            "computes": what}
    return ptx, spec, meta


def _name_params(spec: dict, entry: str) -> dict:
    """'#3' -> '<mangled entry>_param_3' so the spec reads like the PTX."""
    fix = lambda p: f"{entry}_param_{p[1:]}" if isinstance(p, str) and p.startswith("#") else p
    spec = dict(spec)
    spec["params"] = {fix(k): v for k, v in spec.get("params", {}).items()}
    spec["buffer"] = [dict(b, param=fix(b["param"])) for b in spec["buffer"]]
    return spec


# ---------------------------------------------------------------- output -------------------

def to_toml(spec: dict) -> str:
    def val(v):
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, list):
            return "[" + ", ".join(val(x) for x in v) + "]"
        return str(v)

    lines = []
    for k in ("entry", "grid", "block", "shared_bytes"):
        lines.append(f"{k} = {val(spec[k])}")
    for k, v in spec.items():
        if k not in ("entry", "grid", "block", "shared_bytes", "params", "buffer", "contract") and not isinstance(v, dict):
            lines.append(f"{k} = {val(v)}")
    lines.append("")
    lines.append("[params]")
    lines += [f"{k} = {val(v)}" for k, v in spec.get("params", {}).items()]
    for b in spec["buffer"]:
        lines.append("")
        lines.append("[[buffer]]")
        lines += [f"{k} = {val(v)}" for k, v in b.items()]
    lines.append("")
    lines.append("[contract]")
    lines += [f"{k} = {val(v)}" for k, v in spec["contract"].items()]
    for k, v in spec.items():
        if isinstance(v, dict) and k not in ("params", "contract"):
            lines.append("")
            lines.append(f"[{k}]")
            lines += [f"{k2} = {val(v2)}" for k2, v2 in v.items()]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="kernel names to (re)build")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    man_path = out / "manifest.json"
    manifest = json.loads(man_path.read_text()) if man_path.exists() else {}
    jobs = [(n, build_triton, c) for n, c in TRITON.items()] + [(n, build_cuda, c) for n, c in CUDA.items()]
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
        from formal.kernel.spec import load_spec
        toml = to_toml(spec)
        load_spec(toml)                              # every spec written must load
        (out / f"{name}.ptx").write_text(ptx)
        (out / f"{name}.toml").write_text(toml)
        meta.update(ptx=f"{name}.ptx", spec=f"{name}.toml", bench_only=name in BENCH_ONLY,
                    sha256=hashlib.sha256(ptx.encode()).hexdigest(),
                    instructions=sorted(set(re.findall(r"^\s*(?:@!?%p\d+\s+)?((?:mma|wgmma|wmma|ldmatrix|stmatrix|movmatrix)[\w.:]*)",
                                                       ptx, re.M))))
        manifest[name] = meta
        print(f"{name}: {len(ptx.splitlines())} lines, {', '.join(meta['instructions'])}")
    man_path.write_text(json.dumps(dict(sorted(manifest.items())), indent=1) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
