"""Type-qualifier and dead-value mutants of the whole kernel corpus, judged two independent ways.

    python3 tools/make_kernel_type_mutants.py [--only KERNEL ...] [--out proofs/evidence/kernel_mutants.json]

For every corpus kernel (tests/data/kernels, the spec's entry), one-line mutants of:

- ``type``: every type qualifier of the first ``mma`` / ``wmma.{load,store,mma}`` / ``cvt`` /
  ``ld`` of each distinct opcode in the entry, replaced by each type of the same group
  (f16/bf16, e4m3/e5m2, s8/u8, f32/tf32/s32/u32/b32, 16-bit integers, packed x2 types; every
  integer width for cvt), one token at a time and, for an mma, the A and B types together;
- ``dead-value``: the fill constant of a masked load (``mov 0`` before ``@%p ld``) made non-zero
  (1 in the fill's type): masked-off elements feed rows and columns nobody stores, and the
  padded k of stored ones times the other operand's zero padding;
- ``classic``: the hand-written mutants of tests/data/kernels/mutants (tools/make_kernel_mutants.py).

A mutant is kept only if ``ptxas -arch=<the module's .target>`` assembles it (CUDA 13.0's
ptxas).  Each kept mutant is then judged by ``kernel check`` (the proof) and, independently,
by ``kernel run`` on the same inputs against the unmutated kernel's ``kernel run`` (two input
sets: seeded normal values and uniform raw encodings, NaN/Inf included): every refuted mutant
must change an output or show undefined behaviour in the run, every proved one must change no
output.  The record (one entry per mutant: kernel, class, line, original and mutated text, the
mutant's sha256, verdict, witness kinds, outputs that differ) goes to
proofs/evidence/kernel_mutants.json; tests/test_kernel_mutants_types.py rebuilds a sample from
it (no ptxas needed) and checks the verdicts.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
CORPUS = ROOT / "tests" / "data" / "kernels"
OUT = ROOT / "proofs" / "evidence" / "kernel_mutants.json"

GROUPS = [("f16", "bf16"), ("e4m3", "e5m2"), ("s8", "u8", "b8"), ("f32", "tf32", "s32", "u32", "b32"),
          ("s16", "u16", "b16", "f16"), ("f16x2", "bf16x2"), ("e4m3x2", "e5m2x2"), ("s64", "u64", "b64", "f64")]
CVT_INT = ("s8", "u8", "s16", "u16", "s32", "u32", "s64", "u64")
_OP = re.compile(r"^(\s*(?:@!?%\w+\s+)?)((?:mma|wmma|cvt|ld)\.[\w.:]+)(\s.*)$")
_FILL = re.compile(r"^(\s*mov\.(?:u16|b16|u32|b32)\s+(%\w+),\s*)(0x0|0|0f00000000)(;.*)$")
# non-zero fills: 1 and the most negative value (s8 -128; f16 -0.0 and 1.0; f32 1.0 and -0.0)
_FILLS = {"u16": ("0x1", "0x80"), "b16": ("0x3C00", "0x8000"), "u32": ("0x1", "0x80"), "b32": ("0x3F800000", "0x80000000")}


def entry_span(lines, entry):
    start = next(i for i, l in enumerate(lines) if re.search(r"\.entry\s+" + re.escape(entry) + r"\s*\(", l))
    end = next((i for i in range(start + 1, len(lines)) if ".entry " in lines[i]), len(lines))
    return start, end


def _alternatives(tok, head):
    out = set()
    for g in GROUPS:
        if tok in g:
            out |= set(g)
    if head == "cvt" and tok in CVT_INT:
        out |= set(CVT_INT)
    out.discard(tok)
    if head != "ld":
        out -= {"b8", "b16", "b32", "b64"}
    return sorted(out)


def type_variants(opcode):
    """Opcode strings differing from ``opcode`` in its type qualifiers."""
    parts = opcode.split(".")
    head = parts[0]
    typed = [i for i, t in enumerate(parts) if i > 0 and any(t in g for g in GROUPS) or (head == "cvt" and t in CVT_INT)]
    if head == "ld":
        typed = typed[-1:]                          # the element type (not .v4 or the space)
    out = []
    for i in typed:
        for alt in _alternatives(parts[i], head):
            out.append(".".join(parts[:i] + [alt] + parts[i + 1:]))
    if head in ("mma", "wmma") and len(typed) >= 2:
        # A and B together (.f16.f16 -> .bf16.bf16), the other positions kept
        for a, b in zip(typed, typed[1:]):
            if parts[a] == parts[b]:
                for alt in _alternatives(parts[a], head):
                    q = list(parts)
                    q[a] = q[b] = alt
                    out.append(".".join(q))
    seen, uniq = {opcode}, []
    for o in out:
        if o not in seen:
            seen.add(o)
            uniq.append(o)
    return uniq


def candidates(lines, s, e, masked):
    """(class, line index, mutated line) for one kernel entry."""
    out, seen_ops = [], set()
    for i in range(s, e):
        m = _OP.match(lines[i])
        if m and ".param" not in m.group(2) and m.group(2) not in seen_ops:
            seen_ops.add(m.group(2))
            for v in type_variants(m.group(2)):
                out.append(("type", i, m.group(1) + v + m.group(3)))
        f = _FILL.match(lines[i])
        if masked and f and _fills_masked_load(lines, i, e, f.group(2)):
            ty = lines[i].split()[0].split(".")[1]
            for v in _FILLS[ty]:
                out.append(("dead-value", i, f.group(1) + v + f.group(4)))
    return out


def _fills_masked_load(lines, i, e, reg):
    """``mov reg, 0`` is the fill of a masked load: reg (or a copy of it) is the destination of
    a predicated ld a few instructions later, so masked-off lanes keep the constant."""
    code = [l for l in lines[i + 1:min(i + 60, e)] if l.strip() and not l.strip().startswith(("//", ".loc"))][:16]
    regs = {reg}
    for l in code:
        c = re.match(r"\s*mov\.\w+\s+(%\w+),\s*(%\w+);", l)
        if c and c.group(2) in regs:
            regs.add(c.group(1))
        d = re.match(r"\s*@!?%\w+\s+ld\.[\w.]+\s+\{\s*(%\w+)\s*\}", l)
        if d and d.group(1) in regs:
            return True
    return False


def ptxas_ok(text, target, tmp):
    p = Path(tmp) / "m.ptx"
    p.write_text(text)
    r = subprocess.run(["ptxas", f"-arch={target}", "-o", os.devnull, str(p)], capture_output=True, text=True)
    return r.returncode == 0


def judge(kernel, mod_text, base_text, spec, entry_inputs, base_out):
    """check verdict + run comparison of one mutant."""
    rec = {}
    t = time.perf_counter()
    try:
        res = kernel.check(kernel.parse_module(mod_text), spec, lanes=False)
        rec["verdict"] = res.verdict
        rec["witnesses"] = sorted({w.kind for w in res.witnesses})
        rec["witness_lines"] = sorted({w.line for w in res.witnesses})
    except kernel.Unsupported as ex:
        rec["verdict"] = "unsupported"
        rec["why"] = str(ex)[:200]
    except Exception as ex:  # noqa: BLE001 - recorded: an internal error is a finding
        rec["verdict"] = "error"
        rec["why"] = f"{type(ex).__name__}: {ex}"[:200]
    rec["check_s"] = round(time.perf_counter() - t, 3)
    outs = [c.out for c in spec.contracts]
    rec["outputs_differ"], rec["run_undefined"] = {}, []
    for tag, inp in entry_inputs.items():
        try:
            r = kernel.run(kernel.parse_module(mod_text), spec, inp)
        except kernel.Unsupported as ex:
            rec["run_error"] = str(ex)[:200]
            continue
        except Exception as ex:  # noqa: BLE001
            rec["run_error"] = f"{type(ex).__name__}: {ex}"[:200]
            continue
        rec["outputs_differ"][tag] = {o: int((np.asarray(r[o]) != np.asarray(base_out[tag][o])).sum()) for o in outs}
        if r.witnesses:
            rec["run_undefined"] += sorted({w.kind for w in r.witnesses})
    changed = any(v for d in rec["outputs_differ"].values() for v in d.values()) or bool(rec["run_undefined"])
    rec["run_changes"] = changed
    v = rec["verdict"]
    races = v == "refuted" and rec["witnesses"] and set(rec["witnesses"]) <= {"race", "async-pending"}
    rec["judgement"] = ("run-error" if "run_error" in rec else
                        "caught" if v == "refuted" and changed else
                        "caught-race" if races else
                        "false-alarm" if v == "refuted" else
                        "false-proof" if v == "proved" and changed else
                        "equivalent-proved" if v == "proved" else
                        "not-decided" if not changed else "missed (" + v + ")")
    return rec


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--no-classic", action="store_true")
    ap.add_argument("--merge", action="store_true",
                    help="with --only: replace those kernels' records in --out, keep the others")
    args = ap.parse_args(argv)
    from formal import kernel
    from formal.kernel.buffers import corpus_inputs
    from formal.kernel.spec import make_inputs

    man = json.loads((CORPUS / "manifest.json").read_text())
    records = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for name, meta in man.items():
            if meta.get("bench_only") or "wgmma" in name or (args.only and name not in args.only):
                continue
            spec = kernel.load_spec(CORPUS / meta["spec"])
            text = (CORPUS / meta["ptx"]).read_text()
            lines = text.split("\n")
            target = re.search(r"^\.target\s+(\S+)", text, re.M).group(1).rstrip(",")
            s, e = entry_span(lines, spec.entry)
            inputs = {"normal": corpus_inputs(spec, 0)}
            bits = make_inputs(spec, 1, regime="bits")
            inputs["bits"] = {**bits, **{k: v for k, v in inputs["normal"].items()
                                         if spec.buffer(k).extra.get("generate")}}
            base = kernel.parse_module(text)
            base_out = {k: kernel.run(base, spec, v) for k, v in inputs.items()}
            cands = candidates(lines, s, e, "masked" in name)
            if not args.no_classic:
                cm = json.loads((CORPUS / "mutants" / "manifest.json").read_text())["mutants"]
                for mn, m in cm.items():
                    if m["kernel"] == name:
                        mt = (CORPUS / "mutants" / m["ptx"]).read_text().split("\n")
                        cands.append(("classic", m["line"] - 1, mt[m["line"] - 1]))
            for cls, i, new in cands:
                mut = lines[:i] + [new] + lines[i + 1:]
                mtext = "\n".join(mut)
                rec = {"kernel": name, "class": cls, "line": i + 1, "original": lines[i].strip(),
                       "mutated": new.strip(), "sha256": hashlib.sha256(mtext.encode()).hexdigest()}
                rec["ptxas"] = ptxas_ok(mtext, target, tmp)
                if not rec["ptxas"] and cls != "classic":
                    continue
                rec.update(judge(kernel, mtext, text, spec, inputs, base_out))
                records.append(rec)
                print(f"{name:28s} {cls:10s} line {i + 1:4d} {rec['verdict']:9s} {rec['judgement']:18s} "
                      f"{new.strip()[:70]}", flush=True)
    if args.merge and Path(args.out).exists():
        old = json.loads(Path(args.out).read_text())["mutants"]
        redone = {r["kernel"] for r in records} | set(args.only or [])
        records = [r for r in old if r["kernel"] not in redone] + records
        records.sort(key=lambda r: (r["kernel"], r["line"], r["class"], r["mutated"]))
    summary = {}
    for r in records:
        c = summary.setdefault(r["class"], {"total": 0, "refuted": 0, "proved": 0, "other": 0, "caught": 0,
                                           "equivalent_proved": 0, "false_proofs": 0, "false_alarms": 0})
        c["total"] += 1
        c[r["verdict"] if r["verdict"] in ("refuted", "proved") else "other"] += 1
        c["caught"] += r["judgement"] in ("caught", "caught-race")
        c["equivalent_proved"] += r["judgement"] == "equivalent-proved"
        c["false_proofs"] += r["judgement"] == "false-proof"
        c["false_alarms"] += r["judgement"] == "false-alarm"
        c["not_decided"] = c.get("not_decided", 0) + (r["judgement"] in ("not-decided", "run-error")
                                                       or r["judgement"].startswith("missed"))
    doc = {"about": "tools/make_kernel_type_mutants.py: one-line mutants of the kernel corpus that ptxas 13.0 "
                    "assembles, judged by kernel check and independently by kernel run against the unmutated "
                    "kernel (inputs: corpus_inputs seed 0 and raw-encoding seed 1)",
           "ptxas": subprocess.run(["ptxas", "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1],
           "seconds": round(time.perf_counter() - t0, 1), "summary": summary,
           "totals": {k: sum(v[k] for v in summary.values()) for k in ("total", "caught", "equivalent_proved",
                                                                        "false_proofs", "false_alarms")},
           "mutants": records}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    for c, v in summary.items():
        print(c, v)
    return 0


if __name__ == "__main__":
    sys.exit(main())
