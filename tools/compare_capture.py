"""Compare a silicon capture (``formal.hw.capture`` output) with the evaluator, bit for bit.

    python tools/compare_capture.py RUN_DIR [--filter S] [--arch sm_90] [--json] [--examples N]
    python tools/compare_capture.py RUN_DIR --hypotheses [--filter S] [--json]
    python tools/compare_capture.py --hw-check HW_CHECK.json [--filter S] [--json]

RUN_DIR holds ``manifest.json`` (per batch: opcode, sel, regime, seed, warps, input
digest) and ``outputs*.npz`` (the GPU's D registers per batch key).  Every batch's
inputs are regenerated with ``formal.vectors.regimes.random_inputs`` and checked against the
recorded SHA-256 digest, then evaluated with ``formal.evaluate.evaluate`` (register
level) and compared with the captured registers.

Prints one line per form (``OK`` / ``BAD`` / ``ERR``), the mismatching regimes with a
first example, and a summary; ``--json`` prints a machine-readable report instead.

``--hypotheses`` also evaluates every alternative of ``formal.numerics.fit.sm90_alternatives``
on the batches of its path and counts the captured registers each gets wrong: a count
of 0 means this capture cannot tell that alternative from the model (a probe must).

``--hw-check`` replays a ``ptx-formal hw-check`` evidence file (which stores counts, not
registers): every batch's inputs are regenerated from the file's seed and evaluated with
the current sm_90 model and with the model that run graded against (default
``formal.numerics.fit.run1_fit()``, the fit silicon matched on all of run2's hw-check
warps); a warp where the two differ is a warp where the current model contradicts
silicon.  Only floating-point forms are replayed (the integer and b1 paths have no
parameter that run2 changed) and only batches that ran without error.

Exit status: 0 all batches match, 1 some batch mismatches or fails, 2 bad input.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import time
from collections import OrderedDict

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def load_run(run_dir: str):
    """(manifest dict, {batch key: D registers}) of a capture directory."""
    mpath = os.path.join(run_dir, "manifest.json")
    if not os.path.isfile(mpath):
        raise FileNotFoundError(f"{run_dir}: no manifest.json")
    with open(mpath) as f:
        man = json.load(f)
    outs: dict[str, np.ndarray] = {}
    files = sorted(glob.glob(os.path.join(run_dir, "outputs*.npz")))
    if not files:
        raise FileNotFoundError(f"{run_dir}: no outputs*.npz")
    for fn in files:
        with np.load(fn) as z:
            outs.update({k: z[k] for k in z.files})
    return man, outs


def compare_batch(case: dict, got: np.ndarray, arch: str = "sm_90", examples: int = 1) -> dict:
    """Evaluate one manifest batch and compare; returns a result record."""
    from formal.catalog import parse
    from formal.evaluate import evaluate
    from formal.hw.capture import input_digest
    from formal.vectors.regimes import random_inputs

    form = parse(case["opcode"])
    inp = random_inputs(form, case["warps"], case["regime"], case["seed"])
    rec = {"key": case["key"], "opcode": case["opcode"], "sel": case.get("sel"), "regime": case["regime"],
           "warps": int(case["warps"])}
    if case.get("digest") and input_digest(inp) != case["digest"]:
        rec.update(status="error", error="regenerated inputs do not match the recorded digest")
        return rec
    try:
        d = evaluate(form, inp["a"], inp["b"], inp["c"], e=inp.get("e"), sel=case.get("sel"), arch=arch)
    except Exception as ex:  # report, never abort the whole comparison
        rec.update(status="error", error=f"{type(ex).__name__}: {str(ex)[:200]}")
        return rec
    if d.shape != got.shape:
        rec.update(status="error", error=f"shape {list(d.shape)} != captured {list(got.shape)}")
        return rec
    bad = d != got
    nbad_warps = int(bad.any(axis=(1, 2)).sum())
    rec.update(status="ok" if nbad_warps == 0 else "mismatch", bad_warps=nbad_warps,
               bad_registers=int(bad.sum()))
    if nbad_warps:
        width = 16 if got.dtype == np.uint64 else 8
        rec["examples"] = [{"warp": int(w), "lane": int(ln), "reg": int(r),
                            "got": f"{int(got[w, ln, r]):0{width}x}", "expected": f"{int(d[w, ln, r]):0{width}x}"}
                           for w, ln, r in np.argwhere(bad)[:examples]]
    return rec


def compare_run(run_dir: str, filt: str = "", arch: str = "sm_90", examples: int = 1) -> dict:
    man, outs = load_run(run_dir)
    results = []
    for case in man["cases"]:
        if filt and filt not in case["opcode"]:
            continue
        if case["key"] not in outs:
            results.append({"key": case["key"], "opcode": case["opcode"], "sel": case.get("sel"),
                            "regime": case["regime"], "status": "error", "error": "no captured output"})
            continue
        results.append(compare_batch(case, outs[case["key"]], arch, examples))
    n_bad = sum(r["status"] != "ok" for r in results)
    return {"run": os.path.abspath(run_dir), "gpu": man.get("gpu"), "arch": arch, "filter": filt,
            "batches": len(results), "mismatching_batches": n_bad,
            "warps": sum(r.get("warps", 0) for r in results), "results": results}


def hypotheses_run(run_dir: str, filt: str = "") -> dict:
    """{path: {alternative: {"registers": n wrong, "batches": n, "of": total registers}}}."""
    import formal.evaluate as ev
    from formal.catalog import parse
    from formal.vectors.regimes import random_inputs
    from formal.numerics import MODELS
    from formal.numerics.fit import sm90_alternatives

    alts = sm90_alternatives()
    # evaluate() takes arch *names*: register the alternatives for this process only
    for key, vs in alts.items():
        for name, model in vs.items():
            MODELS[f"hyp:{key}:{name}"] = model
            ev.ARCH_TARGETS[f"hyp:{key}:{name}"] = ev.ARCH_TARGETS["sm_90"]
    man, outs = load_run(run_dir)
    sm90 = MODELS["sm_90"]
    res: dict = {k: {n: {"registers": 0, "batches": 0, "of": 0} for n in vs} for k, vs in alts.items()}
    for case in man["cases"]:
        if (filt and filt not in case["opcode"]) or case["key"] not in outs:
            continue
        form = parse(case["opcode"])
        try:
            key, _ = sm90.path(form.atype, form.btype, form.ctype, form.dtype, form.kind, shape=form.mnk)
        except Exception:
            continue
        if key not in alts:
            continue
        inp = random_inputs(form, case["warps"], case["regime"], case["seed"])
        got = outs[case["key"]]
        for name in alts[key]:
            d = ev.evaluate(form, inp["a"], inp["b"], inp["c"], e=inp.get("e"), sel=case.get("sel"),
                            arch=f"hyp:{key}:{name}")
            r = res[key][name]
            nbad = int((d != got).sum())
            r["registers"] += nbad
            r["batches"] += int(nbad > 0)
            r["of"] += int(got.size)
    return res


def hw_check_replay(path: str, filt: str = "", baseline=None) -> dict:
    """Replay a hw-check evidence file: {"warps", "cases", "differing": {case key: {regime: warps}}}."""
    import formal.evaluate as ev
    from formal.catalog import parse
    from formal.hw.check import _seed
    from formal.vectors.regimes import random_inputs
    from formal.numerics import MODELS
    from formal.numerics.fit import run1_fit

    with open(path) as f:
        doc = json.load(f)
    base = baseline or run1_fit()
    MODELS[base.name] = base
    ev.ARCH_TARGETS[base.name] = ev.ARCH_TARGETS["sm_90"]
    out = {"file": os.path.abspath(path), "seed": doc["seed"], "baseline": base.name, "warps": 0, "cases": 0,
           "differing": {}}
    for r in doc["results"]:
        form = parse(r["opcode"])
        if r.get("error") or (filt and filt not in r["opcode"]) or form.atype not in (
                "f16", "bf16", "tf32", "e4m3", "e5m2"):
            continue
        key = form.opcode + (f" sel={r['sel']}" if r.get("sel") is not None else "")
        out["cases"] += 1
        for regime, (n, _bad) in r["per_regime"].items():
            chunk, done = 0, 0
            while done < n:   # formal.hw.check.run: batches of at most 2048 warps, seeds per chunk
                m = min(2048, n - done)
                inp = random_inputs(form, m, regime, _seed(doc["seed"], key, regime, chunk))
                d = [ev.evaluate(form, inp["a"], inp["b"], inp["c"], e=inp.get("e"), sel=r.get("sel"), arch=a)
                     for a in ("sm_90", base.name)]
                diff = int((d[0] != d[1]).any(axis=(1, 2)).sum())
                if diff:
                    out["differing"].setdefault(key, {})[regime] = out["differing"].get(key, {}).get(regime, 0) + diff
                out["warps"] += m
                done += m
                chunk += 1
    return out


def _text_hyp(res: dict) -> str:
    lines = ["| path | alternative | captured registers it gets wrong | batches | of registers |",
             "|---|---|---|---|---|"]
    for key, vs in res.items():
        for name, r in vs.items():
            if r["of"]:
                lines.append(f"| {key} | {name} | {r['registers']:,} | {r['batches']} | {r['of']:,} |")
    return "\n".join(lines)


def _text(rep: dict) -> str:
    forms: "OrderedDict[tuple, list]" = OrderedDict()
    for r in rep["results"]:
        forms.setdefault((r["opcode"], r["sel"]), []).append(r)
    lines = []
    for (op, sel), rs in forms.items():
        tag = "OK " if all(r["status"] == "ok" for r in rs) else (
            "ERR" if any(r["status"] == "error" for r in rs) else "BAD")
        lines.append(f"{tag} {op}" + (f" sel={sel}" if sel is not None else ""))
        for r in rs:
            if r["status"] == "mismatch":
                e = r["examples"][0]
                lines.append(f"      {r['regime']}: {r['bad_warps']}/{r['warps']} warps, e.g. warp {e['warp']} "
                             f"lane {e['lane']} r{e['reg']} got {e['got']} expected {e['expected']}")
            elif r["status"] == "error":
                lines.append(f"      {r['regime']}: ERROR {r['error']}")
    g = rep.get("gpu") or {}
    lines.append(f"{rep['batches']} batches, {rep['warps']} warps, {rep['mismatching_batches']} mismatching "
                 f"(arch model {rep['arch']}; silicon: {g.get('name', '?')}, driver {g.get('driver', '?')})")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", nargs="?", help="capture directory (manifest.json, outputs*.npz)")
    ap.add_argument("--hw-check", metavar="FILE",
                    help="replay a hw-check evidence file against the fit it was graded with")
    ap.add_argument("--filter", default="", help="only opcodes containing this substring")
    ap.add_argument("--arch", default="sm_90", help="arch model to compare with (default sm_90)")
    ap.add_argument("--json", action="store_true", help="print a JSON report")
    ap.add_argument("--examples", type=int, default=1, help="mismatch examples per batch (JSON)")
    ap.add_argument("--hypotheses", action="store_true",
                    help="count the captured registers each sm_90 alternative gets wrong")
    args = ap.parse_args(argv)
    t0 = time.time()
    if not args.run_dir and not args.hw_check:
        print("compare_capture: give RUN_DIR or --hw-check FILE", file=sys.stderr)
        return 2
    try:
        if args.hw_check:
            res = hw_check_replay(args.hw_check, args.filter)
            res["seconds"] = round(time.time() - t0, 1)
            if args.json:
                print(json.dumps(res, indent=1))
            else:
                for k, v in res["differing"].items():
                    print(f"DIFF {k}: " + ", ".join(f"{rg} {n} warps" for rg, n in v.items()))
                print(f"{res['cases']} cases, {res['warps']:,} warps replayed; {len(res['differing'])} cases where "
                      f"sm_90 differs from {res['baseline']} (the model silicon matched)")
            return 0 if not res["differing"] else 1
        if args.hypotheses:
            res = hypotheses_run(args.run_dir, args.filter)
            print(json.dumps(res, indent=1) if args.json else _text_hyp(res))
            return 0
        rep = compare_run(args.run_dir, args.filter, args.arch, args.examples)
    except (FileNotFoundError, json.JSONDecodeError, KeyError, OSError, ValueError) as e:
        print(f"compare_capture: {e}", file=sys.stderr)
        return 2
    rep["seconds"] = round(time.time() - t0, 1)
    print(json.dumps(rep, indent=1) if args.json else _text(rep))
    return 0 if rep["mismatching_batches"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
