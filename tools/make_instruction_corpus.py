#!/usr/bin/env python3
"""Compile our own sources with real compilers and collect the warp-level matrix
instructions they emit: tests/data/compiler_instructions.tsv.

Sources (all written here, compiled without a GPU):

* ``wmma``   CUDA C++ using the wmma API (<mma.h>): every shape/type family (f16, bf16,
             tf32, f64, s8/u8, s4/u4, b1), row/col layouts, both accumulator types;
             ``nvcc -ptx`` for sm_80, sm_89, sm_90 and sm_120a.
* ``cute``   CUDA C++ calling the ``fma`` of every CuTe MMA atom of the nvidia-cutlass
             wheel's headers (cute/arch/mma_sm{75,80,89,90,120,120_sparse}.hpp) and every
             CUTLASS sparse ``SparseMma`` (cutlass/arch/mma_sparse_sm{80,89}.h), each
             header for the targets it is enabled on; CuTe copy atoms for ldmatrix/stmatrix.
* ``triton`` tools/corpus/triton_matmul.py compiled by Triton (PyPI) for sm_80/89/90 over
             f16, bf16, tf32, fp8 (e4m3, e5m2) and int8, two tile sizes.

Every mma / mma.sp / wmma.* / ldmatrix / stmatrix / movmatrix line is kept with its
module's ``.target`` and ``.version``; register numbers are normalised (``%r12`` ->
``%r``) so that equal instructions deduplicate.  wgmma lines (Triton on sm_90) are out
of scope: counted in the summary, not kept.

    python3 tools/make_instruction_corpus.py            # writes the TSV, prints a summary
    python3 tools/make_instruction_corpus.py --keep DIR # also keep the sources and PTX
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "tests" / "data" / "compiler_instructions.tsv"
WMMA_TARGETS = ("sm_80", "sm_89", "sm_90", "sm_120a")
KEEP_RE = re.compile(r"^(mma|wmma|ldmatrix|stmatrix|movmatrix)\b")

# ------------------------------------------------------------------------------------------
# PTX -> instruction lines


def extract(ptx: str) -> tuple[str, str, list[str], int]:
    """(.target, .version, instruction lines, wgmma count) of one PTX module."""
    version = re.search(r"^\s*\.version\s+(\S+)", ptx, re.M).group(1)
    target = re.search(r"^\s*\.target\s+([\w]+)", ptx, re.M).group(1)
    out, wgmma = [], 0
    # instructions end with ';' and may span lines (inline asm strings with \n)
    text = re.sub(r"//[^\n]*", "", ptx)
    text = re.sub(r"^\s*\.(loc|file)\b[^\n]*", "", text, flags=re.M)   # debug directives carry no ';'
    for stmt in text.split(";"):
        s = " ".join(stmt.split())
        while True:                                        # scope braces, labels, a predicate guard
            t = re.sub(r"^(?:[{}]\s*|\$?[\w$]+:\s*|@!?%\w+\s+)", "", s)
            if t == s:
                break
            s = t
        if s.startswith("wgmma"):
            wgmma += 1
        elif KEEP_RE.match(s):
            out.append(normalise(s) + ";")
    return target, version, out, wgmma


def normalise(line: str) -> str:
    op, sep, rest = re.match(r"([^\s{\[]+)(\s*)(.*)", line).groups()   # CuTe writes "...f32{%f1, ..."
    rest = re.sub(r"(%[a-zA-Z_]+)\d+", r"\1", rest)       # register numbers
    rest = re.sub(r"\s*,\s*", ", ", rest)
    rest = re.sub(r"\{\s*", "{", re.sub(r"\s*\}", "}", rest))
    rest = re.sub(r"\[\s*", "[", re.sub(r"\s*\]", "]", rest))
    return f"{op}{sep[:1]}{rest}".strip()


# ------------------------------------------------------------------------------------------
# wmma API


def wmma_source() -> str:
    L = ["#include <mma.h>", "#include <cuda_fp16.h>", "#include <cuda_bf16.h>", "using namespace nvcuda;",
         "namespace ex = nvcuda::wmma::experimental;", ""]
    lay = {"row": "wmma::row_major", "col": "wmma::col_major"}
    mem = {"row": "wmma::mem_row_major", "col": "wmma::mem_col_major"}
    n = 0

    def kernel(m, nn, k, ta, tb, pa, pb, tc, pc, td, pd, la, lb, lc, ld, mma="wmma::mma_sync(fd, fa, fb, fc);"):
        nonlocal n
        n += 1
        return f"""__global__ void k{n}(const {pa}* a, const {pb}* b, const {pc}* c, {pd}* d) {{
  wmma::fragment<wmma::matrix_a, {m}, {nn}, {k}, {ta}, {lay[la]}> fa;
  wmma::fragment<wmma::matrix_b, {m}, {nn}, {k}, {tb}, {lay[lb]}> fb;
  wmma::fragment<wmma::accumulator, {m}, {nn}, {k}, {tc}> fc;
  wmma::fragment<wmma::accumulator, {m}, {nn}, {k}, {td}> fd;
  wmma::load_matrix_sync(fa, a, 64);
  wmma::load_matrix_sync(fb, b, 64);
  wmma::load_matrix_sync(fc, c, 64, {mem[lc]});
  {mma}
  wmma::store_matrix_sync(d, fd, 64, {mem[ld]});
}}
"""

    LL = [(a, b) for a in ("row", "col") for b in ("row", "col")]
    for m, nn, k in ((16, 16, 16), (32, 8, 16), (8, 32, 16)):
        for la, lb in LL:
            for tc, td in (("float", "float"), ("half", "half"), ("half", "float"), ("float", "half")):
                L.append(kernel(m, nn, k, "half", "half", "half", "half", tc, tc, td, td, la, lb, la, lb))
            L.append(kernel(m, nn, k, "__nv_bfloat16", "__nv_bfloat16", "__nv_bfloat16", "__nv_bfloat16",
                            "float", "float", "float", "float", la, lb, lb, la))
            for t in ("signed char", "unsigned char"):
                L.append(kernel(m, nn, k, t, t, t, t, "int", "int", "int", "int", la, lb, la, lb))
    for la, lb in LL:
        L.append(kernel(16, 16, 8, "wmma::precision::tf32", "wmma::precision::tf32", "float", "float",
                        "float", "float", "float", "float", la, lb, la, lb))
        L.append(kernel(8, 8, 4, "double", "double", "double", "double", "double", "double", "double", "double",
                        la, lb, lb, la))
    for t in ("ex::precision::s4", "ex::precision::u4"):
        for lc in ("row", "col"):
            L.append(kernel(8, 8, 32, t, t, "void", "void", "int", "int", "int", "int", "row", "col", lc, lc))
    for op in ("ex::bmmaBitOpXOR", "ex::bmmaBitOpAND"):
        L.append(kernel(8, 8, 128, "ex::precision::b1", "ex::precision::b1", "void", "void", "int", "int", "int",
                        "int", "row", "col", "row", "col",
                        mma=f"wmma::bmma_sync(fd, fa, fb, fc, {op}, ex::bmmaAccumulateOpPOPC);"))
    return "\n".join(L)


# ------------------------------------------------------------------------------------------
# CuTe MMA atoms and CUTLASS sparse MMAs

CUTE_HEADERS = {           # header -> targets it is compiled for
    "cute/arch/mma_sm75.hpp": ("sm_80", "sm_89", "sm_90", "sm_120a"),
    "cute/arch/mma_sm80.hpp": ("sm_80", "sm_89", "sm_90", "sm_120a"),
    "cute/arch/mma_sm89.hpp": ("sm_89", "sm_90", "sm_120a"),
    "cute/arch/mma_sm90.hpp": ("sm_90",),
    "cute/arch/mma_sm120.hpp": ("sm_120a",),
    "cute/arch/mma_sm120_sparse.hpp": ("sm_120a",),
}
SPARSE_HEADERS = {
    "cutlass/arch/mma_sparse_sm80.h": ("sm_80", "sm_89", "sm_90", "sm_120a"),
    "cutlass/arch/mma_sparse_sm89.h": ("sm_89", "sm_90", "sm_120a"),
}


def cutlass_include() -> Path:
    import cutlass_library

    return Path(cutlass_library.__file__).parent / "source" / "include"


def cute_atoms(header: Path) -> list[str]:
    """Fully qualified names of the concrete MMA atoms a CuTe header defines."""
    lines = header.read_text().splitlines()
    ns: list[str] = []
    out: list[str] = []
    for i, ln in enumerate(lines):
        m = re.match(r"\s*namespace\s+([\w:]+)\s*\{", ln)
        if m:
            ns.append(m.group(1))
            continue
        if re.match(r"\s*\}\s*//\s*(end\s+)?namespace", ln) and ns:
            ns.pop()
            continue
        m = re.match(r"struct\s+(\w+)\s*(<(.*)>)?\s*$", ln)
        if not m:
            continue
        prev = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        name = "::".join(ns + [m.group(1)])
        if not m.group(2):
            if not prev.startswith("template"):
                out.append(name)
            continue
        args = m.group(3)
        if prev == "template <>":
            out.append(f"{name}<{args}>")
        elif prev == "template <int VS>":
            body = "\n".join(lines[i:i + 80]).split("\n};")[0]
            asserts = " ".join(x for x in body.splitlines() if "STATIC_ASSERT" in x.upper())
            for vs in sorted(set(re.findall(r"VS\s*==\s*(\d+)", asserts))):
                concrete = re.sub(r"\bVS\b", vs, args)
                out.append(f"{name}<{concrete}>")
    return out


def sparse_mmas(header: Path) -> list[str]:
    text = header.read_text()
    out = []
    for m in re.finditer(r"^template\s*<\s*>\s*\nstruct SparseMma\s*<(.*?)>\s*\{", text, re.M | re.S):
        out.append("cutlass::arch::SparseMma<" + " ".join(m.group(1).split()) + ">")
    return out


CUTE_PRELUDE = """#include <cute/tensor.hpp>
#include <cute/arch/copy_sm75.hpp>
#include <cute/arch/copy_sm90.hpp>
%s
#include <cuda/std/tuple>
using namespace cute;
using namespace cutlass;
using namespace cutlass::arch;

template <class... Args>
__device__ void invoke(void (*f)(Args...), const uint32_t* in, uint32_t* out) {
  cuda::std::tuple<cuda::std::remove_cv_t<cuda::std::remove_reference_t<Args>>...> t{};
  int i = 0;
  cuda::std::apply([&](auto&... x) { ((memcpy(&x, in + 2 * (i++), sizeof(x))), ...); }, t);
  cuda::std::apply(f, t);
  i = 0;
  cuda::std::apply([&](auto&... x) { ((memcpy(out + 2 * (i++), &x, sizeof(x))), ...); }, t);
}
template <class Op> __global__ void atom(const uint32_t* in, uint32_t* out) { invoke(&Op::fma, in, out); }
template <class Op> __global__ void copy_atom(const uint32_t* in, uint32_t* out) { invoke(&Op::copy, in, out); }
template <class Op> __global__ void sparse(const uint32_t* in, uint32_t* out, int id2) {
  typename Op::FragmentA a; typename Op::FragmentB b; typename Op::FragmentC c, d;
  memcpy(&a, in, sizeof a); memcpy(&b, in + 64, sizeof b); memcpy(&c, in + 128, sizeof c);
  uint32_t e = in[192];
  Op{}(d, a, b, c, e, id2);
  memcpy(out, &d, sizeof d);
}
"""
COPY_ATOMS = {"sm_80": ["SM75_U32x1_LDSM_N", "SM75_U32x2_LDSM_N", "SM75_U32x4_LDSM_N", "SM75_U16x2_LDSM_T",
                        "SM75_U16x4_LDSM_T", "SM75_U16x8_LDSM_T"],
              "sm_90": ["SM90_U32x1_STSM_N", "SM90_U32x2_STSM_N", "SM90_U32x4_STSM_N", "SM90_U16x2_STSM_T",
                        "SM90_U16x4_STSM_T", "SM90_U16x8_STSM_T"]}


def cute_source(target: str) -> str:
    inc = cutlass_include()
    heads = [h for h, ts in {**CUTE_HEADERS, **SPARSE_HEADERS}.items() if target in ts]
    body = [CUTE_PRELUDE % "\n".join(f"#include <{h}>" for h in heads)]
    for h in heads:
        if h in CUTE_HEADERS:
            for a in cute_atoms(inc / h):
                body.append(f"template __global__ void atom<{a}>(const uint32_t*, uint32_t*);")
        else:
            for a in sparse_mmas(inc / h):
                body.append(f"template __global__ void sparse<{a}>(const uint32_t*, uint32_t*, int);")
    copies = COPY_ATOMS["sm_80"] + (COPY_ATOMS["sm_90"] if target != "sm_80" and target != "sm_89" else [])
    for c in copies:
        body.append(f"template __global__ void copy_atom<{c}>(const uint32_t*, uint32_t*);")
    return "\n".join(body) + "\n"


# ------------------------------------------------------------------------------------------
# compiling


def nvcc(src: str, target: str, work: Path, name: str, extra: list[str] = ()) -> str:
    cu = work / f"{name}_{target}.cu"
    ptx = work / f"{name}_{target}.ptx"
    if cu.exists() and ptx.exists() and cu.read_text() == src:
        return ptx.read_text()            # --keep DIR: unchanged source, reuse its PTX
    cu.write_text(src)
    cmd = ["nvcc", "-ptx", f"-arch={target}", "-std=c++17", "--expt-relaxed-constexpr", "-w", *extra,
           str(cu), "-o", str(ptx)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"nvcc failed for {cu.name}:\n{r.stderr[-3000:]}")
    return ptx.read_text()


def triton_modules() -> list[tuple[str, str]]:
    """(label, PTX) of the Triton matmul for every target/type/tile."""
    sys.path.insert(0, str(REPO / "tools" / "corpus"))
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton_matmul import matmul

    out = []
    kinds = [("fp16", "fp32", "ieee"), ("bf16", "fp32", "ieee"), ("fp32", "fp32", "tf32"), ("fp8e4nv", "fp32", "ieee"),
             ("fp8e5", "fp32", "ieee"), ("i8", "i32", "ieee")]
    for cap in (80, 89, 90):
        for dt, acc, prec in kinds:
            if dt.startswith("fp8") and cap < 89:
                continue
            for bm, bn, bk, warps in ((64, 64, 32, 4), (16, 32, 32, 1)):
                sig = {"a_ptr": "*" + dt, "b_ptr": "*" + dt, "c_ptr": "*" + acc, "M": "i32", "N": "i32", "K": "i32",
                       "BLOCK_M": "constexpr", "BLOCK_N": "constexpr", "BLOCK_K": "constexpr",
                       "PRECISION": "constexpr", "ACC_INT": "constexpr"}
                consts = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "PRECISION": prec, "ACC_INT": acc == "i32"}
                k = triton.compile(ASTSource(matmul, signature=sig, constexprs=consts),
                                   target=GPUTarget("cuda", cap, 32), options={"num_warps": warps})
                out.append((f"triton sm_{cap} {dt} {bm}x{bn}x{bk}", k.asm["ptx"]))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--keep", default=None, metavar="DIR", help="keep the generated sources and PTX here")
    ap.add_argument("--sources", nargs="*", default=["wmma", "cute", "triton"])
    args = ap.parse_args(argv)
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="corpus-"))
    work.mkdir(parents=True, exist_ok=True)
    modules: list[tuple[str, str]] = []           # (source, ptx)
    if "wmma" in args.sources:
        src = wmma_source()
        for t in WMMA_TARGETS:
            modules.append(("wmma", nvcc(src, t, work, "wmma")))
    if "cute" in args.sources:
        for t in ("sm_80", "sm_89", "sm_90", "sm_120a"):
            modules.append(("cute", nvcc(cute_source(t), t, work, "cute", ["-I", str(cutlass_include())])))
    if "triton" in args.sources:
        for label, ptx in triton_modules():
            modules.append(("triton", ptx))
            if args.keep:
                (work / (label.replace(" ", "_") + ".ptx")).write_text(ptx)
    rows: set[tuple[str, str, str, str]] = set()
    raw = collections.Counter()
    wg = collections.Counter()
    for source, ptx in modules:
        target, version, lines, wgmma = extract(ptx)
        wg[(source, target)] += wgmma
        for ln in lines:
            raw[(source, target)] += 1
            rows.add((source, target, version, ln))
    rows_sorted = sorted(rows)
    with open(args.out, "w") as f:
        f.write("# Warp-level matrix instructions emitted by real compilers from our own sources;\n"
                "# generated by tools/make_instruction_corpus.py (do not edit).  Columns: source, .target,\n"
                "# .version, instruction (register numbers normalised).\n")
        for r in rows_sorted:
            f.write("\t".join(r) + "\n")
    per = collections.Counter((s, t) for s, t, _, _ in rows_sorted)
    print(f"{'source':8s} {'target':8s} {'lines':>6s} {'unique':>6s} {'wgmma (skipped)':>16s}")
    for key in sorted(set(raw) | set(wg)):
        print(f"{key[0]:8s} {key[1]:8s} {raw[key]:6d} {per[key]:6d} {wg[key]:16d}")
    print(f"total: {sum(raw.values())} instruction lines, {len(rows_sorted)} unique rows, "
          f"{sum(wg.values())} wgmma lines skipped -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
