"""``ptx-formal ptxas-check`` and ``ptx-formal ptxas-sweep``: the catalog vs NVIDIA's assembler.

Exit codes: 0 agreement (or disagreement explained by an erratum), 1 an unexplained
disagreement, 2 bad input, 3 no ptxas found (the check could not run).
"""

from __future__ import annotations

import json
import sys

from .. import catalog as cat
from ..catalog.sweep import SWEEP_TARGETS


def _ptxases(which: list[str] | None):
    from ..catalog import ptxas

    if not which:
        found = ptxas.installations()
        if not found:
            return None
        return found
    out = []
    for w in which:
        try:
            p = ptxas.find(w)
        except (FileNotFoundError, RuntimeError) as e:
            raise cat.BadArgument(str(e)) from None
        if p is None:
            raise cat.BadArgument(f"no ptxas matches {w!r} (known: "
                                  + ", ".join(f"{q.release} ({q.origin})" for q in ptxas.installations()) + ")")
        out.append(p)
    return out


def _no_ptxas() -> int:
    print("ptx-formal: no ptxas found (set $PTXAS, `pip install nvidia-cuda-nvcc`, or put ptxas on PATH)",
          file=sys.stderr)
    return 3


def cmd_check(args) -> int:
    from ..catalog import ptxas
    from ..catalog.sweep import Case, catalog_ptx, catalog_verdict, explain

    t = cat.parse_target(args.target).name
    probe = ptxas.as_probe(args.opcode)
    if args.sel is not None:
        from dataclasses import replace
        probe = replace(probe, sel=args.sel)
    pxs = _ptxases(args.ptxas)
    if not pxs:
        return _no_ptxas()
    rc = 0
    out = []
    for px in pxs:
        p = cat.check_ptx(args.ptx) if args.ptx else catalog_ptx(px)
        if cat._pv(p) > cat._pv(px.max_ptx):
            print(f"ptx-formal: skipping ptxas {px.version}: it accepts PTX ISA <= {px.max_ptx}", file=sys.stderr)
            continue
        v = ptxas.assemble([probe], t, p, px)[0]
        case = Case("check", probe, t, p)
        ok, reasons = catalog_verdict(case)
        eid = None if ok == v.accepted else explain(case, ok, v.accepted)
        if ok != v.accepted and eid is None:
            rc = 1
        out.append({"ptxas": px.version, "target": t, "ptx": p, "instruction": v.instruction,
                    "ptxas_accepts": v.accepted, "ptxas_messages": v.messages,
                    "catalog_legal": ok, "catalog_reasons": list(reasons),
                    "agree": ok == v.accepted, "erratum": eid})
    if not out:
        print(f"ptx-formal: no ptxas found accepts PTX ISA {args.ptx}", file=sys.stderr)
        return 3
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for o in out:
            verdict = "agree" if o["agree"] else (f"DISAGREE (erratum {o['erratum']})" if o["erratum"]
                                                  else "DISAGREE (no erratum)")
            print(f"ptxas {o['ptxas']} {o['target']} PTX {o['ptx']}: {verdict}")
            print(f"  {o['instruction']}")
            print(f"  ptxas:   {'accepts' if o['ptxas_accepts'] else 'rejects'}"
                  + "".join(f"\n           {m}" for m in o["ptxas_messages"]))
            print(f"  catalog: {'legal' if o['catalog_legal'] else 'illegal'}"
                  + "".join(f"\n           {m}" for m in o["catalog_reasons"]))
    return rc


def cmd_sweep(args) -> int:
    import os

    from ..catalog.sweep import CATEGORIES, SWEEP_TARGETS, SweepResult, reexplain, report_markdown, sweep, write_report
    from . import check_writable, read_json

    if args.write:
        check_writable(os.path.dirname(args.write) or ".", "--write", directory=True)   # created if missing
        for ext in (".md", ".json"):
            if os.path.isdir(args.write + ext):
                raise cat.BadArgument(f"--write {args.write}: {args.write + ext} is a directory")
    if args.from_json:
        # re-attribute a recorded sweep with the current errata (no ptxas needed)
        unused = [o for o, v in (("--targets", args.targets), ("--ptx", args.ptx), ("--ptxas", args.ptxas),
                                 ("--categories", args.categories), ("--family", args.family)) if v is not None]
        if unused:
            raise cat.BadArgument(f"{', '.join(unused)}: not applicable with --from-json (it re-reads a recorded sweep)")
        doc = read_json(args.from_json, "--from-json")
        try:
            res = reexplain(SweepResult.from_dict(doc))
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
            raise cat.BadArgument(f"--from-json {args.from_json}: not a ptxas-sweep record "
                                  f"({type(e).__name__}: {e})") from None
        if args.write:
            md, js = write_report(res, args.write)
            print(f"wrote {md} and {js}", file=sys.stderr)
        print(report_markdown(res) if not (args.json or args.write) else "", end="")
        if args.json:
            print(json.dumps(res.to_dict(), indent=1))
        return 1 if res.unexplained else 0

    targets = args.targets or list(SWEEP_TARGETS)
    for t in targets:
        cat.parse_target(t)
    cats = args.categories or list(CATEGORIES)
    bad = [c for c in cats if c not in CATEGORIES]
    if bad:
        raise cat.BadArgument(f"unknown category {bad[0]!r}; known: {', '.join(CATEGORIES)}")
    if args.ptx:
        cat.check_ptx(args.ptx)
    pxs = _ptxases(args.ptxas)
    if not pxs:
        return _no_ptxas()
    progress = (lambda s: print(s, file=sys.stderr)) if args.verbose else None
    res = sweep(pxs, targets, args.ptx, cats, progress=progress, family=args.family)
    if args.write:
        md, js = write_report(res, args.write)
        print(f"wrote {md} and {js}", file=sys.stderr)
    if args.json:
        print(json.dumps(res.to_dict(), indent=1))
    elif not args.write:
        print(report_markdown(res))
    else:
        tot = sum(c["cases"] for c in res.to_dict()["counts"])
        dis = sum(1 for r in res.rows if not r.agree)
        print(f"{tot} cases, {dis} disagreements, {len(res.unexplained)} unexplained")
    return 1 if res.unexplained else 0


def register(sub) -> None:
    p = sub.add_parser("ptxas-check", help="assemble one instruction with ptxas and compare with the catalog",
                       description="Assemble OPCODE (or a whole instruction) with every ptxas found (or --ptxas) "
                                   "and compare ptxas's verdict with the catalog's (errata from specs/errata.toml).")
    p.add_argument("opcode")
    p.add_argument("--target", "-t", default="sm_90")
    p.add_argument("--ptx", default=None, help="PTX ISA version (default: the highest each ptxas accepts)")
    p.add_argument("--sel", type=lambda s: int(s, 0), default=None, help="sparsity selector (mma.sp)")
    p.add_argument("--ptxas", nargs="*", default=None,
                   help="which ptxas: a release (13.0), an origin (wheel, PATH, env) or a path (default: all found)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("ptxas-sweep", help="sweep the whole instruction space through ptxas (documented forms, "
                                           "PTX boundaries, near-misses, selectors, wmma spellings)",
                       description="Compare the catalog with ptxas over the whole space; exit 1 if a disagreement "
                                   "is not listed in specs/errata.toml.")
    p.add_argument("--targets", nargs="*", default=None, help="default: " + " ".join(SWEEP_TARGETS)
                   + " (every family-specific target ptxas knows)")
    p.add_argument("--ptx", default=None, help="PTX ISA version (default: the highest each ptxas accepts)")
    p.add_argument("--ptxas", nargs="*", default=None, help="which ptxas (default: every installation found)")
    p.add_argument("--categories", nargs="*", default=None,
                   help="documented boundary near-miss selector spelling immediate (default: all)")
    p.add_argument("--write", metavar="STEM", default=None, help="write STEM.md and STEM.json (e.g. proofs/ptxas-sweep)")
    p.add_argument("--family", choices=["wgmma", "warp"], default=None,
                   help="only the wgmma instructions (proofs/ptxas-sweep-wgmma) or only mma/mma.sp/wmma "
                        "(proofs/ptxas-sweep); default both")
    p.add_argument("--json", action="store_true")
    p.add_argument("--from-json", metavar="JSON", default=None,
                   help="do not run ptxas: re-attribute a recorded sweep (e.g. proofs/ptxas-sweep.json) with the "
                        "current specs/errata.toml and print/write its report")
    p.add_argument("--verbose", "-v", action="store_true", help="progress on stderr")
    p.set_defaults(func=cmd_sweep)
