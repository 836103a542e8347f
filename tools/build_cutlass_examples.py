"""Reconnaissance: compile CUTLASS 4.x examples (from the ``nvidia-cutlass`` wheel) to PTX and lint them.

    pip download nvidia-cutlass --no-deps -d /tmp/cutl
    pip download nvidia-curand==10.4.0.35 --no-deps -d /tmp/curand   # curand_kernel.h (CUDA 13.0)
    unzip -q /tmp/cutl/nvidia_cutlass-*.whl 'cutlass_library/source/*' -d SCRATCH
    python3 tools/build_cutlass_examples.py build --src SCRATCH/cutlass_library/source --out SCRATCH/ptx [-j 2] \
        --include CURAND/nvidia/cu13/include
    python3 tools/build_cutlass_examples.py lint  --out SCRATCH/ptx          # writes SCRATCH/ptx/lint.json

The PTX is built from NVIDIA's sources and stays out of the repository (scratch only); this
script records how it was built so the recon can be repeated.  Every module is compiled with
``nvcc -ptx`` for the architecture its example targets (sm_80 for the CUTLASS 2.x examples and the
CuTe tutorials, sm_89 for the Ada fp8 ones, sm_90a for Hopper, sm_120a for GeForce Blackwell),
one nvcc per module, at most ``-j`` at a time, each capped at ``--timeout`` seconds.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures as cf
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

# (module name, example source relative to examples/, arch).  Order = build priority.
PRIORITY = [
    ("79a_nvfp4_bf16_gemm", "79_blackwell_geforce_gemm/79a_blackwell_geforce_nvfp4_bf16_gemm.cu", "sm_120a"),
    ("79c_mxfp8_mxfp6_bf16_gemm", "79_blackwell_geforce_gemm/79c_blackwell_geforce_mixed_mxfp8_mxfp6_bf16_gemm.cu", "sm_120a"),
    ("80a_mxfp8_bf16_sparse_gemm", "80_blackwell_geforce_sparse_gemm/80a_blackwell_geforce_mxfp8_bf16_sparse_gemm.cu", "sm_120a"),
    ("80b_nvfp4_nvfp4_sparse_gemm", "80_blackwell_geforce_sparse_gemm/80b_blackwell_geforce_nvfp4_nvfp4_sparse_gemm.cu", "sm_120a"),
    ("19_tensorop_canonical", "19_tensorop_canonical/tensorop_canonical.cu", "sm_80"),
    ("cute_sgemm_1", "cute/tutorial/sgemm_1.cu", "sm_80"),
    ("cute_sgemm_2", "cute/tutorial/sgemm_2.cu", "sm_80"),
    ("cute_sgemm_sm80", "cute/tutorial/sgemm_sm80.cu", "sm_80"),
    ("cute_wgmma_sm90", "cute/tutorial/hopper/wgmma_sm90.cu", "sm_90a"),
    ("cute_wgmma_tma_sm90", "cute/tutorial/hopper/wgmma_tma_sm90.cu", "sm_90a"),
    ("00_basic_gemm", "00_basic_gemm/basic_gemm.cu", "sm_80"),
    ("48_hopper_ws_gemm", "48_hopper_warp_specialized_gemm/48_hopper_warp_specialized_gemm.cu", "sm_90a"),
    ("14_ampere_tf32_gemm", "14_ampere_tf32_tensorop_gemm/ampere_tf32_tensorop_gemm.cu", "sm_80"),
    ("49_collective_builder", "49_hopper_gemm_with_collective_builder/49_collective_builder.cu", "sm_90a"),
    ("08_turing_tensorop_gemm", "08_turing_tensorop_gemm/turing_tensorop_gemm.cu", "sm_80"),
    ("54_hopper_fp8_ws_gemm", "54_hopper_fp8_warp_specialized_gemm/54_hopper_fp8_warp_specialized_gemm.cu", "sm_90a"),
    ("15_ampere_sparse_gemm", "15_ampere_sparse_tensorop_gemm/ampere_sparse_tensorop_gemm.cu", "sm_80"),
    ("55_hopper_mixed_dtype_gemm", "55_hopper_mixed_dtype_gemm/55_hopper_mixed_dtype_gemm.cu", "sm_90a"),
    ("18_ampere_fp64_affine2", "18_ampere_fp64_tensorop_affine2_gemm/ampere_fp64_tensorop_affine2_gemm.cu", "sm_80"),
    ("50_hopper_epilogue_swizzle", "50_hopper_gemm_with_epilogue_swizzle/50_hopper_gemm_with_epilogue_swizzle.cu", "sm_90a"),
    ("05_batched_gemm", "05_batched_gemm/batched_gemm.cu", "sm_80"),
    ("79b_nvfp4_nvfp4_gemm", "79_blackwell_geforce_gemm/79b_blackwell_geforce_nvfp4_nvfp4_gemm.cu", "sm_120a"),
    ("06_splitK_gemm", "06_splitK_gemm/splitk_gemm.cu", "sm_80"),
    ("51_hopper_gett", "51_hopper_gett/51_hopper_gett.cu", "sm_90a"),
    ("12_gemm_bias_relu", "12_gemm_bias_relu/gemm_bias_relu.cu", "sm_80"),
    ("62_hopper_sparse_gemm", "62_hopper_sparse_gemm/62_hopper_sparse_gemm.cu", "sm_90a"),
    ("20_simt_canonical", "20_simt_canonical/simt_canonical.cu", "sm_80"),
    ("58_ada_fp8_gemm", "58_ada_fp8_gemm/ada_fp8_gemm.cu", "sm_89"),
    ("07_volta_tensorop_gemm", "07_volta_tensorop_gemm/volta_tensorop_gemm.cu", "sm_80"),
    ("52_hopper_gather_scatter", "52_hopper_gather_scatter_fusion/52_hopper_gather_scatter_fusion.cu", "sm_90a"),
    ("27_ampere_3xtf32_gemm", "27_ampere_3xtf32_fast_accurate_tensorop_gemm/27_ampere_3xtf32_fast_accurate_tensorop_gemm.cu", "sm_80"),
    ("56_hopper_ptr_array_batched", "56_hopper_ptr_array_batched_gemm/56_hopper_ptr_array_batched_gemm.cu", "sm_90a"),
    ("cute_sgemm_sm70", "cute/tutorial/sgemm_sm70.cu", "sm_80"),
    ("cute_tiled_copy", "cute/tutorial/tiled_copy.cu", "sm_80"),
    ("47_ampere_streamk", "47_ampere_gemm_universal_streamk/ampere_gemm_universal_streamk.cu", "sm_80"),
    ("57_hopper_grouped_gemm", "57_hopper_grouped_gemm/57_hopper_grouped_gemm.cu", "sm_90a"),
    ("10_planar_complex", "10_planar_complex/planar_complex.cu", "sm_80"),
    ("87a_fp8_bf16_blockwise", "87_blackwell_geforce_gemm_blockwise/87a_blackwell_geforce_fp8_bf16_gemm_blockwise.cu", "sm_120a"),
    ("21_quaternion_gemm", "21_quaternion_gemm/quaternion_gemm.cu", "sm_80"),
    ("53_hopper_gemm_permute", "53_hopper_gemm_permute/53_hopper_gemm_permute.cu", "sm_90a"),
    ("16_ampere_conv2dfprop", "16_ampere_tensorop_conv2dfprop/ampere_tensorop_conv2dfprop.cu", "sm_80"),
    ("67_hopper_fp8_blockwise", "67_hopper_fp8_warp_specialized_gemm_with_blockwise_scaling/67_hopper_fp8_warp_specialized_gemm_with_blockwise_scaling.cu", "sm_90a"),
    ("23_operand_reduction", "23_ampere_gemm_operand_reduction_fusion/ampere_gemm_operand_reduction_fusion.cu", "sm_80"),
    ("24_gemm_grouped", "24_gemm_grouped/gemm_grouped.cu", "sm_80"),
    ("61_hopper_topk_softmax", "61_hopper_gemm_with_topk_and_softmax/61_hopper_gemm_with_topk_and_softmax.cu", "sm_90a"),
    ("29_3xtf32_complex", "29_ampere_3xtf32_fast_accurate_tensorop_complex_gemm/29_3xtf32_complex_gemm.cu", "sm_80"),
    ("31_basic_syrk", "31_basic_syrk/basic_syrk.cu", "sm_80"),
    ("55_hopper_int4_bf16", "55_hopper_mixed_dtype_gemm/55_hopper_int4_bf16_gemm.cu", "sm_90a"),
    ("32_basic_trmm", "32_basic_trmm/basic_trmm.cu", "sm_80"),
    ("35_gemm_softmax", "35_gemm_softmax/gemm_softmax.cu", "sm_80"),
    ("cute_tiled_copy_if", "cute/tutorial/tiled_copy_if.cu", "sm_80"),
    ("63_hopper_weight_prefetch", "63_hopper_gemm_with_weight_prefetch/63_hopper_gemm_with_weight_prefetch.cu", "sm_90a"),
    ("36_gather_scatter", "36_gather_scatter_fusion/gather_scatter_fusion.cu", "sm_80"),
    ("39_gemm_permute", "39_gemm_permute/gemm_permute.cu", "sm_80"),
    ("43_ell_block_sparse", "43_ell_block_sparse_gemm/ell_block_sparse_gemm.cu", "sm_80"),
    ("45_dual_gemm", "45_dual_gemm/dual_gemm.cu", "sm_80"),
    ("64_ada_fp8_grouped", "64_ada_fp8_gemm_grouped/ada_fp8_gemm_grouped.cu", "sm_89"),
    ("88_hopper_fmha", "88_hopper_fmha/88_hopper_fmha.cu", "sm_90a"),
    ("13_b2b_gemm_sm80_rf", "13_two_tensor_op_fusion/fused_two_gemms_f16_sm80_rf.cu", "sm_80"),
    ("41_fmha_fixed_seqlen", "41_fused_multi_head_attention/fused_multihead_attention_fixed_seqlen.cu", "sm_80"),
    ("69_hopper_mixed_grouped", "69_hopper_mixed_dtype_grouped_gemm/69_hopper_mixed_dtype_grouped_gemm.cu", "sm_90a"),
    ("33_3xtf32_symm", "33_ampere_3xtf32_tensorop_symm/ampere_3xtf32_tensorop_symm.cu", "sm_80"),
    ("38_syr2k_grouped", "38_syr2k_grouped/syr2k_grouped.cu", "sm_80"),
    ("68_hopper_fp8_grouped_blockwise", "68_hopper_fp8_warp_specialized_grouped_gemm_with_blockwise_scaling/68_hopper_fp8_warp_specialized_grouped_gemm_with_blockwise_scaling.cu", "sm_90a"),
    ("09_turing_conv2dfprop", "09_turing_tensorop_conv2dfprop/turing_tensorop_conv2dfprop.cu", "sm_80"),
    ("79d_nvfp4_grouped", "79_blackwell_geforce_gemm/79d_blackwell_geforce_nvfp4_grouped_gemm.cu", "sm_120a"),
]


EXTRA_INCLUDES: list[str] = []   # e.g. curand headers (nvidia-curand wheel: nvidia/cu13/include)


def flags(src_root: Path, example: Path, arch: str) -> list[str]:
    inc = [*map(Path, EXTRA_INCLUDES), src_root / "include", src_root / "tools" / "util" / "include", src_root / "examples" / "common",
           example.parent, src_root / "examples"]
    out = ["-ptx", f"-arch={arch}", "-std=c++17", "--expt-relaxed-constexpr", "-O3", "-DNDEBUG",
           "-DCUTLASS_ENABLE_TENSOR_CORE_MMA=1", "-DCUTLASS_DEBUG_TRACE_LEVEL=0", "-w"]
    for d in inc:
        out += ["-I", str(d)]
    return out


def build_one(src_root: Path, out: Path, name: str, rel: str, arch: str, timeout: int) -> dict:
    ex = src_root / "examples" / rel
    ptx = out / f"{name}.{arch}.ptx"
    cmd = ["nvcc", *flags(src_root, ex, arch), "-o", str(ptx), str(ex)]
    t0 = time.time()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        rc, err = r.returncode, (r.stderr or r.stdout)
    except subprocess.TimeoutExpired:
        rc, err = -1, f"timeout after {timeout} s"
    rec = {"name": name, "source": rel, "arch": arch, "rc": rc, "seconds": round(time.time() - t0, 1),
           "ptx": ptx.name if rc == 0 else None, "cmd": " ".join(cmd)}
    if rc != 0:
        rec["error"] = "\n".join([l for l in err.splitlines() if "error" in l][:5] or err.splitlines()[-5:])
        ptx.unlink(missing_ok=True)
    else:
        rec["bytes"] = ptx.stat().st_size
    return rec


def cmd_build(args) -> int:
    src_root, out = Path(args.src), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log = out / "build.jsonl"
    EXTRA_INCLUDES.extend(args.include or [])
    done = set()
    if log.exists():
        recs = [json.loads(l) for l in log.read_text().splitlines() if l.strip()]
        if args.retry_failed:
            recs = [r for r in recs if r["rc"] == 0]
            log.write_text("".join(json.dumps(r) + "\n" for r in recs))
        done = {r["name"] for r in recs}
    todo = [j for j in PRIORITY if j[0] not in done and (not args.only or j[0] in args.only)]
    with cf.ThreadPoolExecutor(args.j) as pool, log.open("a") as fh:
        futs = {pool.submit(build_one, src_root, out, n, r, a, args.timeout): n for n, r, a in todo}
        for f in cf.as_completed(futs):
            rec = f.result()
            fh.write(json.dumps(rec) + "\n")
            fh.flush()
            print(f"{rec['name']:40s} {rec['arch']:8s} rc={rec['rc']} {rec['seconds']}s", flush=True)
    return 0


def cmd_lint(args) -> int:
    out = Path(args.out)
    res = []
    for p in sorted(out.glob("*.ptx")):
        t0 = time.time()
        try:
            r = subprocess.run(["ptx-formal", "kernel", "lint", str(p)], capture_output=True, text=True,
                               timeout=args.timeout)
            rc, so, se = r.returncode, r.stdout, r.stderr
        except subprocess.TimeoutExpired:
            rc, so, se = -1, "", f"timeout after {args.timeout} s"
        res.append({"ptx": p.name, "rc": rc, "stdout": so[:20000], "stderr": se[:20000],
                    "seconds": round(time.time() - t0, 1)})
        first = (se.strip() or so.strip()).splitlines()[:1]
        print(f"{p.name:50s} rc={rc} {first[0][:150] if first else ''}", flush=True)
    (out / "lint.json").write_text(json.dumps(res, indent=1))
    return 0


# ---------------------------------------------------------------------------------- report

CAUSES = [  # (key, regex on the first message line, title)
    ("label_twice", r"label (\S+) defined twice",
     "label defined twice: the same label in separate `{ }` blocks (inline asm), where PTX scopes it"),
    ("tma_coords", r"cannot read address operand '\[%\w+, \{",
     "TMA tensor address operand `[tensormap, {c0, c1, ...}]` (cp.async.bulk.tensor / prefetch.tensor) not parsed"),
    ("reg_nospace", r"unknown directive \.reg\.",
     "`.reg.b16` / `.reg.b32` written without a space (valid PTX; ptxas accepts it) inside a `{ }` block"),
    ("unsupported", r"unsupported: ", "unsupported construct (exit 3)"),
    ("internal", r"Traceback|internal error|Error:", "internal error (exit 4)"),
]

# constructs that would be met after the first failure (a lint stops at its first error)
BLOCKERS = [
    ("LAB_WAIT-style label reuse", r"^\s*(\w+):\s*$"),
    ("TMA coords", r"\[%\w+, \{"),
    (".reg.bNN no space", r"\.reg\.[bsuf]\d+"),
    ("wgmma", r"\bwgmma\."),
    ("mma block_scale / kind::", r"\bmma\.sync[\w.:]*(block_scale|kind::)"),
    ("mma.sp", r"\bmma\.sp"),
    ("mbarrier", r"\bmbarrier\."),
    ("setmaxnreg", r"\bsetmaxnreg"),
    ("call", r"(?<![\w.])call(\.uni)?\s"),
    ("stmatrix", r"\bstmatrix"),
]


def _line(ptx: Path, n: int) -> str:
    with ptx.open() as fh:
        for i, l in enumerate(fh, 1):
            if i == n:
                return l.strip()
    return ""


def _first_label_def(ptx: Path, label: str, before: int) -> int | None:
    rx = re.compile(r"^\s*" + re.escape(label) + r":")
    with ptx.open() as fh:
        for i, l in enumerate(fh, 1):
            if i >= before:
                return None
            if rx.match(l):
                return i
    return None


def _depth(ptx: Path, n: int) -> int:
    """{ } nesting depth at line n, not counting the function body's own braces (depth 1)."""
    d = 0
    with ptx.open() as fh:
        for i, l in enumerate(fh, 1):
            if i == n:
                return d - 1
            code = l.split("//", 1)[0]
            d += code.count("{") - code.count("}")
    return -1


def _params(ptx: Path) -> str:
    """Entries and their by-value aggregate parameters (.b8 arrays): Params structs, tensor maps."""
    text = ptx.read_text()
    heads = re.findall(r"\.entry\s+\w+\s*\((.*?)\)", text, re.S)
    aggs = collections.Counter()
    for h in heads:
        for m in re.finditer(r"\.param\s+\.align\s+(\d+)\s+\.b8\s+\w+\[(\d+)\]", h):
            aggs[f"{m.group(2)} B (align {m.group(1)})"] += 1
    agg = "; ".join(f"{k} x{v}" if v > 1 else k for k, v in sorted(aggs.items())) or "none"
    return f"{len(heads)} entries; by-value .b8 params: {agg}"


def _blockers(ptx: Path) -> list[str]:
    text = ptx.read_text()
    out = []
    for name, pat in BLOCKERS:
        if name.startswith("LAB_WAIT"):
            labels = re.findall(r"^\s*([A-Za-z_]\w*):\s*$", text, re.M)
            dup = {l for l in labels if labels.count(l) > 1}
            if dup:
                out.append(f"{len(dup)} reused labels ({', '.join(sorted(dup)[:3])})")
            continue
        n = len(re.findall(pat, text, re.M))
        if n:
            out.append(f"{name} x{n}")
    return out


def cmd_report(args) -> int:
    out = Path(args.out)
    builds = [json.loads(l) for l in (out / "build.jsonl").read_text().splitlines() if l.strip()]
    lint = {r["ptx"]: r for r in json.loads((out / "lint.json").read_text())}
    groups: dict[str, list] = {}
    for b in sorted(builds, key=lambda r: r["name"]):
        if b["rc"] != 0:
            groups.setdefault("build", []).append((b, None, "", ""))
            continue
        r = lint.get(b["ptx"])
        if r is None:
            groups.setdefault("notlinted", []).append((b, None, "", ""))
            continue
        msg = (r["stderr"].strip() or r["stdout"].strip()).splitlines()
        first = msg[0] if msg else ""
        key = None
        for k, rx, _ in CAUSES:
            if re.search(rx, r["stderr"]):
                key = k
                break
        if key is None:
            key = "ok" if r["rc"] == 0 else f"other_rc{r['rc']}"
            if key == "ok" and re.search(r": 0 matrix instructions", first):
                key = "ok_nomma"
        ptx = out / b["ptx"]
        m = re.search(r"\.ptx:(\d+):", first) or re.search(r"line (\d+):", first)
        line = ""
        if m and key not in ("ok", "ok_nomma"):
            n = int(m.group(1))
            line = f"line {n}: `{_line(ptx, n)[:160]}`"
            lm = re.search(r"label (\S+) defined twice", first)
            if lm:
                f0 = _first_label_def(ptx, lm.group(1), n)
                if f0:
                    d0, d1 = _depth(ptx, f0), _depth(ptx, n)
                    where = ("both inside `{ }` blocks" if d0 > 0 and d1 > 0 else f"brace depth {d0} and {d1}")
                    line = f"line {f0}: `{_line(ptx, f0)}` ... line {n}: `{_line(ptx, n)}` ({where})"
        groups.setdefault(key, []).append((b, r, first, line))

    titles = dict((k, t) for k, _, t in CAUSES)
    titles.update(ok="read, every matrix instruction legal (exit 0)",
                  ok_nomma="read, no matrix instructions (SIMT kernels; exit 0)",
                  build="not built (nvcc failed)", notlinted="built, not linted")
    order = ["label_twice", "tma_coords", "reg_nospace", "unsupported", "internal"] + \
            sorted(k for k in groups if k.startswith("other")) + ["ok", "ok_nomma", "build", "notlinted"]
    n_built = sum(1 for b in builds if b["rc"] == 0)
    lines = ["# CUTLASS 4.2 examples: `ptx-formal kernel lint` reconnaissance", "",
             f"Sources: `nvidia-cutlass` 4.2.0.0 wheel (`cutlass_library/source/examples`, `include`, "
             f"`tools/util/include`), compiled with nvcc 13.0 (`nvcc -ptx -std=c++17 --expt-relaxed-constexpr -O3 "
             f"-DNDEBUG -DCUTLASS_ENABLE_TENSOR_CORE_MMA=1`, plus curand headers from the `nvidia-curand` 10.4.0.35 "
             f"wheel) by `tools/build_cutlass_examples.py`; PTX in `/work/scratch/corpus/cutlass_ptx/` (not committed). "
             f"{len(builds)} example sources tried, {n_built} modules built, {len(lint)} linted.", "",
             "Exit codes: 0 read and legal, 2 malformed (a PTX syntax error with its line), 3 unsupported, 4 internal.",
             "A lint stops at its first error; the last column lists the constructs each module contains that the",
             "tool would meet next (reused labels, TMA coordinate operands, `.reg.bNN`, wgmma, block-scaled mma, ...)",
             "and the entries' by-value aggregate parameters (CUTLASS 2.x `Params` structs, CuTe/CUTLASS 3.x kernel params with tensor maps).", "",
             "## Summary", "", "| cause | modules |", "|---|---|"]
    for k in order:
        if k in groups:
            lines.append(f"| {titles.get(k, k)} | {len(groups[k])} |")
    for k in order:
        if k not in groups:
            continue
        lines += ["", f"## {titles.get(k, k)} ({len(groups[k])})", ""]
        if k == "build":
            lines += ["| module | target | nvcc error |", "|---|---|---|"]
            for b, _, _, _ in groups[k]:
                lines.append(f"| {b['name']} | {b['arch']} | `{(b.get('error') or '').splitlines()[0][-160:]}` |")
            continue
        lines += ["| module | target | lint exit | message | triggering PTX line | also contains |", "|---|---|---|---|---|---|"]
        for b, r, first, line in groups[k]:
            msg = first.replace(str(out) + "/", "").replace("|", "\\|")
            blk = ", ".join(_blockers(out / b["ptx"]) + [_params(out / b["ptx"])])
            lines.append(f"| {b['name']} ({b['source'].split('/')[0]}) | {b['arch']} | {r['rc'] if r else ''} | "
                         f"{msg[:220]} | {line.replace('|', chr(92) + '|')} | {blk} |")
    for fname, title in (("peel.json", "After scoping labels per `{ }` block and writing `.reg .b16`: the next stop"),
                         ("peel2.json", "... and with every TMA tensor instruction commented out: the next stop")):
        pj = out / fname
        if not pj.exists():
            continue
        rows = json.loads(pj.read_text())
        cnt = collections.Counter()
        for r in rows:
            key = re.sub(r"\S+\.ptx:\d+:", "FILE:N:", r["first"])
            key = re.sub(r"'\[.*", "'[...]'", re.sub(r"line \d+", "line N", key))
            key = re.sub(r"\S+\.ptx: \.target (\S+), \.version 9\.0: \d+ matrix instructions, 0 illegal",
                         r"read: every matrix instruction legal (.target \1)", key)
            cnt[(r["rc"], key)] += 1
        lines += ["", f"## {title} ({len(rows)} modules that exited 2)", "",
                  "Recon only (`build_cutlass_examples.py peel [--drop-tma]`): scratch copies rewritten, lint again.", "",
                  "| exit | first line (numbers elided) | modules |", "|---|---|---|"]
        for (rc, key), n in cnt.most_common():
            lines.append(f"| {rc} | {key.replace('|', chr(92) + '|')} | {n} |")
        lines += ["", "| module | exit | first line | PTX line |", "|---|---|---|---|"]
        for r in rows:
            lines.append(f"| {r['ptx']} | {r['rc']} | {r['first'][:200].replace('|', chr(92) + '|')} | "
                         f"`{r['line'].replace('|', chr(92) + '|')}` |")
    Path(args.report).write_text("\n".join(lines) + "\n")
    print(f"wrote {args.report}")
    return 0


# ---------------------------------------------------------------------------------- peel
# What would the lint meet next?  Rewrite the two syntax blockers found so far in a scratch copy
# (PTX-preserving: labels local to a { } block renamed per block; `.reg.b16` -> `.reg .b16`) and lint
# again.  Recon only: the rewritten modules are not valid evidence of anything but the next error.

def _scope_labels(text: str) -> str:
    lines = text.split("\n")
    out = list(lines)
    depth, stack, nblk = 0, [], 0
    for i, l in enumerate(lines):
        code = l.split("//", 1)[0]
        opens, closes = code.count("{"), code.count("}")
        if opens > closes and depth >= 1:          # a block inside a function body
            stack.append(i)
        depth += opens - closes
        if closes > opens and stack and depth >= 1:
            j = stack.pop()
            blk = lines[j:i + 1]
            labels = set(re.findall(r"^\s*([A-Za-z_$][\w$]*):", "\n".join(blk), re.M))
            if labels:
                nblk += 1
                for k in range(j, i + 1):
                    for lab in labels:
                        out[k] = re.sub(r"(?<![\w$%])" + re.escape(lab) + r"(?![\w$])", f"{lab}_blk{nblk}", out[k])
    return "\n".join(out)


def cmd_peel(args) -> int:
    out = Path(args.out)
    peel_dir = out / ("peel2" if args.drop_tma else "peel")
    peel_dir.mkdir(exist_ok=True)
    lint = json.loads((out / "lint.json").read_text())
    rows = []
    for r in lint:
        if r["rc"] != 2:
            continue
        text = (out / r["ptx"]).read_text()
        fixed = _scope_labels(text)
        fixed = re.sub(r"\.reg\.([bsuf]\d+|pred)\b", r".reg .\1", fixed)
        if args.drop_tma:   # level 2: comment out every TMA tensor instruction (line numbers kept)
            fixed = re.sub(r"^([^\n/]*\[%\w+, \{[^\n]*)$", r"// peel: \1", fixed, flags=re.M)
        dst = peel_dir / r["ptx"]
        dst.write_text(fixed)
        try:
            q = subprocess.run(["ptx-formal", "kernel", "lint", str(dst)], capture_output=True, text=True,
                               timeout=args.timeout)
            rc, first = q.returncode, (q.stderr.strip() or q.stdout.strip()).splitlines()[:1]
        except subprocess.TimeoutExpired:
            rc, first = -1, [f"timeout after {args.timeout} s"]
        first = first[0].replace(str(peel_dir) + "/", "") if first else ""
        m = re.search(r"\.ptx:(\d+):", first) or re.search(r"line (\d+):", first)
        line = _line(dst, int(m.group(1)))[:160] if m else ""
        rows.append({"ptx": r["ptx"], "rc": rc, "first": first, "line": line})
        print(f"{r['ptx']:45s} rc={rc} {first[:150]}", flush=True)
    (out / ("peel2.json" if args.drop_tma else "peel.json")).write_text(json.dumps(rows, indent=1))
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--src", required=True)
    b.add_argument("--out", required=True)
    b.add_argument("-j", type=int, default=2)
    b.add_argument("--timeout", type=int, default=600)
    b.add_argument("--only", nargs="*")
    b.add_argument("--include", nargs="*", help="extra -I directories (curand_kernel.h for tools/util)")
    b.add_argument("--retry-failed", action="store_true")
    l = sub.add_parser("lint")
    l.add_argument("--out", required=True)
    l.add_argument("--timeout", type=int, default=300)
    r = sub.add_parser("report")
    r.add_argument("--out", required=True)
    r.add_argument("--report", required=True)
    pl = sub.add_parser("peel", help="rewrite label scoping and .reg.bNN in scratch copies, lint again")
    pl.add_argument("--out", required=True)
    pl.add_argument("--timeout", type=int, default=300)
    pl.add_argument("--drop-tma", action="store_true", help="also comment out TMA tensor instructions")
    args = ap.parse_args(argv)
    return {"build": cmd_build, "lint": cmd_lint, "report": cmd_report, "peel": cmd_peel}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
