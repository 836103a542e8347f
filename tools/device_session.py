"""One hardware session on a CUDA GPU: every check the project runs on silicon.

Usage (repo root, CuPy installed):  PYTHONPATH=. python3 tools/device_session.py OUT_DIR [STEP ...]

Steps (default: all, in this order; each is isolated, a failing step is recorded and the
session goes on):
  hw        ptx-formal hw-check --all (every sm_90 register-level mma/mma.sp form and
            selector, 12,000 warps each over six input regimes) -> hw_check.json
  wmma      wmma fragment observations + load->mma->store pipelines -> wmma.json
  metadata  sparse metadata probes -> metadata.json
  transform layout-transformation recipes and movement probes -> transform.json
  numerics  numerics probes (hypothesis decisions) -> numerics.json
  vectors   edge-case vectors of every sm_90 form -> vectors.json
  cuda_template  the standalone CUDA harness (formal/hw/template/vectors_harness.cu, filled in
            by `ptx-formal vectors OPCODE --cuda F`) built with nvcc and run on hex vectors of
            CUDA_TEMPLATE_FORMS, its results checked by `ptx-formal verify` -> cuda_template.json
Writes session.json with timings and errors.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def step_hw(out, gpu):
    from formal.hw import check as hwc

    cases = hwc.all_cases("sm_90", "9.0")
    trials = int(os.environ.get("HW_TRIALS", "12000"))
    res = hwc.run(cases, trials, seed=20261122, gpu=gpu, progress=lambda m: print(m, flush=True))
    rec = hwc.evidence_record(res, gpu.info.to_dict(), 20261122, hwc.DEFAULT_REGIMES, "sm_90")
    json.dump(rec, open(os.path.join(out, "hw_check.json"), "w"), indent=1)
    # mismatching warps with their inputs, for offline work
    json.dump([{"opcode": r.opcode, "sel": r.sel, "first": [m.__dict__ for m in r.first]} for r in res if r.first],
              open(os.path.join(out, "hw_mismatches.json"), "w"))
    return {"cases": rec["cases"], "trials": rec["trials"], "mismatched_warps": rec["mismatched_warps"],
            "errors": rec["errors"]}


def step_wmma(out, gpu):
    from formal.hw import wmma_probe

    paths = wmma_probe.run_wmma_probes(os.path.join(out, "wmma"), log=lambda m: print(m, flush=True))
    return [str(p) for p in paths]


def step_metadata(out, gpu):
    from formal.hw import metadata_probe as mp

    cases = mp.sm90_cases("sm_90", "8.7")
    reports = []
    for i in range(0, len(cases), 16):   # bounded memory: inputs are ~1.5 MB per case
        reports += mp.run(gpu, cases[i:i + 16], ptx="8.7")
    json.dump([r.to_dict() for r in reports], open(os.path.join(out, "metadata_reports.json"), "w"), indent=1)
    bad = [r.to_dict() for r in reports if not r.ok]
    return {"cases": len(reports), "match": len(reports) - len(bad), "first_bad": bad[:2]}


def step_transform(out, gpu):
    from formal.hw.transform_probe import run_transform_probes

    return run_transform_probes(os.path.join(out, "transform"), trials=4)


def step_numerics(out, gpu):
    from formal.hw.numerics_probe import run_numerics_probes

    rep = run_numerics_probes(os.path.join(out, "numerics"), gpu=gpu)
    return {k: v for k, v in rep.items() if not isinstance(v, (list, dict))} if isinstance(rep, dict) else rep


def step_vectors(out, gpu):
    from formal.hw.vectors import run_vectors_on_gpu

    vdir = ".devdata/vectors" if os.path.isdir(".devdata/vectors") else None   # prepared on a CPU (Z3)
    res = run_vectors_on_gpu(None, os.path.join(out, "vectors"), vectors_dir=vdir, gpu=gpu, save_results=True)
    return {k: v for k, v in res.items() if k != "forms"}


def step_selector(out, gpu):
    """Out-of-range sparsity selectors that ptxas accepts (erratum E-SP-SEL-K32-F16F32): which
    legal selector does silicon behave like?  Undefined behaviour: recorded, never modelled."""
    from formal.catalog import parse
    from formal.evaluate import evaluate
    from formal.vectors.regimes import random_inputs
    from formal.hw.kernels import Case
    from formal.catalog.text import Immediates

    res = []
    for op in ("mma.sp.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32",
               "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32"):
        f = parse(op)
        for sel in (2, 3):
            inp = random_inputs(f, 256, "normal", 1000 + sel)
            got = gpu.run_cases([Case(f, Immediates(sel=sel))], [inp])[0]
            row = {"opcode": op, "sel": sel, "warps": 256}
            for legal in (0, 1):
                exp = evaluate(f, inp["a"], inp["b"], inp["c"], e=inp["e"], sel=legal)
                row[f"matches_sel_{legal}"] = int((exp == got).all(axis=(1, 2)).sum())
            res.append(row)
    json.dump(res, open(os.path.join(out, "selector_oob.json"), "w"), indent=1)
    return res


def step_wmma_align(out, gpu):
    """wmma alignment sweep (each probe in an isolated CUDA context; faults are the data)."""
    import subprocess

    d = os.path.join(out, "wmma_align")
    r = subprocess.run([sys.executable, "-m", "formal.hw.wmma_probe", "--alignment", d], capture_output=True,
                       text=True, timeout=240)
    print(r.stdout[-3000:], r.stderr[-2000:], flush=True)
    return {"rc": r.returncode, "tail": r.stdout[-1500:]}


#: forms of the standalone-harness check: every register type and packing the template handles
#: (16/32/64-bit registers, sub-byte, b1, fp8, both sparse variants, m8n8k4)
CUDA_TEMPLATE_FORMS = (
    "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
    "mma.sync.aligned.m16n8k8.row.col.f16.f16.f16.f16",
    "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
    "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32",
    "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.u8.s32",
    "mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32",
    "mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.xor.popc",
    "mma.sync.aligned.m8n8k4.row.col.rz.f64.f64.f64.f64",
    "mma.sync.aligned.m16n8k16.row.col.rn.f64.f64.f64.f64",
    "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32",
    "mma.sync.aligned.m8n8k4.row.row.f16.f16.f16.f16",
    "mma.sp.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32",
    "mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.satfinite.s32.s8.s8.s32",
    "mma.sp.sync.aligned.m16n8k16.row.col.f32.tf32.tf32.f32",
    "mma.sp::ordered_metadata.sync.aligned.m16n8k128.row.col.s32.u4.u4.s32",
)


def step_cuda_template(out, gpu):
    """Build the standalone harness per form with nvcc, run it on the form's hex vectors, and
    check its result file with formal.vectors.verify (independently of the harness's own exit)."""
    import shutil
    import subprocess

    from formal import vectors as V
    from formal.catalog import parse

    nvcc = os.environ.get("NVCC") or shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    d = os.path.join(out, "cuda_template")
    os.makedirs(d, exist_ok=True)
    rows = []
    for i, op in enumerate(CUDA_TEMPLATE_FORMS):
        form = parse(op)
        n = f"f{i:02d}"
        cu, hexf, exe, res = (os.path.join(d, n + x) for x in (".cu", ".hex", "", ".results.hex"))
        V.cuda_harness(form, cu)
        V.write(V.generate(form, arch="sm_90", count=48, seed=i), hexf, "hex")
        t0 = time.time()
        c = subprocess.run([nvcc, "-arch=sm_90", "-o", exe, cu], capture_output=True, text=True)
        row = {"opcode": form.opcode, "nvcc_rc": c.returncode, "nvcc_s": round(time.time() - t0, 1)}
        if c.returncode == 0:
            r = subprocess.run([exe, hexf, res], capture_output=True, text=True)
            row.update(harness_rc=r.returncode, harness_out=(r.stdout + r.stderr)[-400:])
            rep = V.verify(V.read(hexf), res) if os.path.exists(res) else None
            if rep is not None:
                row.update(cases=rep.cases, failed=rep.failed, ok=rep.ok, errors=rep.errors,
                           coverage_points=len(rep.points), mismatches=rep.to_dict(3)["mismatches"])
        else:
            row["nvcc_err"] = c.stderr[-800:]
        rows.append(row)
        print(json.dumps({k: row.get(k) for k in ("opcode", "nvcc_rc", "harness_rc", "cases", "ok")}), flush=True)
    ver = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1:]
    json.dump({"nvcc": ver, "gpu": gpu.info.to_dict(), "forms": rows},
              open(os.path.join(out, "cuda_template.json"), "w"), indent=1, default=str)
    shutil.rmtree(d)
    return {"forms": len(rows), "ok": sum(1 for r in rows if r.get("ok")),
            "harness_rc0": sum(1 for r in rows if r.get("harness_rc") == 0)}


def step_wgmma(out, gpu):
    """wgmma probes (formal/hw/wgmma_probe.py): layouts, descriptor readouts, numerics; the
    inputs are built here (deterministic) and their sha256 recorded, so the analysis can
    rebuild them on any machine and check they are the same."""
    from formal.hw import wgmma_probe as wp

    d = os.path.join(out, "wgmma")
    groups = os.environ.get("WG_GROUPS", "layout,readout,numerics,numx").split(",")
    meta = wp.build(d, wp.all_probes(groups))
    dig = {}
    for g in meta["groups"]:
        z = np.load(os.path.join(d, f"in_{g}.npz"))
        dig[g] = {k: wp.input_digest(z[k]) for k in z.files}
    json.dump(dig, open(os.path.join(d, "input_digests.json"), "w"))
    wp.run_dir(d, log=lambda m: print(m, flush=True))
    for f in os.listdir(d):
        if f.startswith("in_") or f.endswith(".ptx"):
            os.remove(os.path.join(d, f))
    return {"kernels": len(meta["kernels"]), "groups": meta["groups"]}


def step_gec(out, gpu):
    """The evaluator's GPU path == its CPU path on every form (tools/gpu_equals_cpu.py)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import gpu_equals_cpu as g

    g.run(os.path.join(ROOT, ".devdata", "gec"), os.path.join(out, "gec.json"), int(os.environ.get("GEC_WARPS", "512")))
    return json.load(open(os.path.join(out, "gec.json")))["summary"]


def step_hw_tiny(out, gpu):
    """hw-check in the 'tiny' regime (lowest binades: subnormal results) on every sm_90 form."""
    from formal.hw import check as hwc

    cases = hwc.all_cases("sm_90", "9.0")
    trials = int(os.environ.get("HW_TRIALS", "2000"))
    res = hwc.run(cases, trials, seed=20261128, regimes=("tiny",), gpu=gpu, progress=lambda m: print(m, flush=True))
    rec = hwc.evidence_record(res, gpu.info.to_dict(), 20261128, ("tiny",), "sm_90")
    json.dump(rec, open(os.path.join(out, "hw_tiny.json"), "w"), indent=1)
    json.dump([{"opcode": r.opcode, "sel": r.sel, "first": [m.__dict__ for m in r.first]} for r in res if r.first],
              open(os.path.join(out, "hw_tiny_mismatches.json"), "w"))
    return {"cases": rec["cases"], "trials": rec["trials"], "mismatched_warps": rec["mismatched_warps"],
            "errors": rec["errors"]}


def step_inplace(out, gpu):
    """The in-place / chained wmma kernels (tests/data/kernels_inplace) on the GPU (tools/run_kernels_h100.py)."""
    import subprocess

    d = os.path.join(out, "inplace")
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "run_kernels_h100.py"), "--corpus",
                        os.path.join(ROOT, "tests", "data", "kernels_inplace"), "--out", d],
                       capture_output=True, text=True, timeout=300)
    return {"rc": r.returncode, "tail": r.stdout[-600:] + r.stderr[-600:]}


def step_selector_oob(out, gpu):
    """Every out-of-range sparsity selector ptxas accepts, one process per case (tools/selector_oob_probe.py)."""
    import subprocess

    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "selector_oob_probe.py"),
                        os.path.join(out, "selector_oob.json")], capture_output=True, text=True, timeout=300)
    return {"rc": r.returncode, "tail": r.stdout[-800:] + r.stderr[-800:]}


# wmma last: one of its probes may fault on purpose (a stride legal under one reading only)
STEPS = {"inplace": step_inplace, "selector_oob": step_selector_oob, "wgmma": step_wgmma, "gec": step_gec, "hw_tiny": step_hw_tiny, "hw": step_hw, "selector": step_selector, "metadata": step_metadata, "transform": step_transform, "numerics": step_numerics,
         "vectors": step_vectors, "wmma": step_wmma, "wmma_align": step_wmma_align,
         "cuda_template": step_cuda_template}


def run_one(out: str, name: str) -> int:
    """Child process: one step, its own CUDA context (a fault cannot take the others down)."""
    from formal.hw.runner import GPU

    t0 = time.time()
    res = {"step": name}
    try:
        gpu = GPU()
        res["gpu"] = gpu.info.to_dict()
        res["summary"] = STEPS[name](out, gpu)
        res["ok"] = True
    except Exception as e:  # record and go on
        res.update(ok=False, error=f"{type(e).__name__}: {e}", trace=traceback.format_exc()[-4000:])
    res["seconds"] = round(time.time() - t0, 1)
    json.dump(res, open(os.path.join(out, f"{name}.summary.json"), "w"), indent=1, default=str)
    print(json.dumps(res, default=str)[:4000], flush=True)
    return 0 if res["ok"] else 1


def main(out: str, steps: list[str]) -> int:
    """Parent: run each step in a child, then pack each step's files into one archive
    (the device tool returns at most 8 files)."""
    import subprocess
    import tarfile

    os.makedirs(out, exist_ok=True)
    session = {"steps": {}}
    for name in steps:
        print(f"== {name}", flush=True)
        t0 = time.time()
        r = subprocess.run([sys.executable, os.path.abspath(__file__), out, "--one", name])
        session["steps"][name] = {"rc": r.returncode, "seconds": round(time.time() - t0, 1)}
        json.dump(session, open(os.path.join(out, "session.json"), "w"), indent=1)
    for name in steps:
        members = [f for f in os.listdir(out) if f.startswith(name) and not f.endswith(".tar.gz")]
        if not members:
            continue
        with tarfile.open(os.path.join(out, f"{name}.tar.gz"), "w:gz") as tar:
            for m in members:
                tar.add(os.path.join(out, m), arcname=m)
        for m in members:
            p = os.path.join(out, m)
            if os.path.isdir(p):
                import shutil
                shutil.rmtree(p)
            else:
                os.remove(p)
    return 0


if __name__ == "__main__":
    out = sys.argv[1]
    if len(sys.argv) > 3 and sys.argv[2] == "--one":
        sys.exit(run_one(out, sys.argv[3]))
    sys.exit(main(out, sys.argv[2:] or list(STEPS)))
