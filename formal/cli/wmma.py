"""``ptx-formal wmma ...``: wmma memory semantics, observed fragment maps, theorems.

    ptx-formal wmma check OPCODE --ptr ADDR [--stride S]     legal (0) / undefined (1) / bad input (2)
    ptx-formal wmma strides OPCODE --ptr-align A | --ptr P   the legal strides as a set (Z3 + enumeration)
    ptx-formal wmma address OPCODE --row R --col C           byte/bit address of one element
    ptx-formal wmma describe OPCODE                          the memory view of a form, rules with sections
    ptx-formal wmma maps [--arch sm_70] [--properties]       observed fragment maps (with provenance)
    ptx-formal wmma prove [--per-form]                       the theorems; exit 0 as expected, 1 not, 3 unknown
    ptx-formal wmma errata                                   what the text leaves open
    ptx-formal wmma probe-decode DIR [--condense FILE]       decode a GPU probe run (formal.hw.wmma_probe)
    ptx-formal wmma pipeline-check DIR|FILE.json             silicon D vs evaluate_matrices, bit for bit
    ptx-formal wmma alignment [RUN ...] [--summary FILE]     alignment: SASS survey + checked-in silicon summary /
                                                             silicon runs vs the text (merged), errata verdicts
    ptx-formal wmma sass-survey [--out FILE]                 redo the SASS survey (needs ptxas + cuobjdump)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ..catalog import BadArgument


def _int(s: str, what: str = "") -> int:
    try:
        v = int(str(s).replace("_", ""), 0)
    except ValueError:
        raise BadArgument(f"{what + ': ' if what else ''}not an integer: {s!r} (decimal or 0x hex)") from None
    return v


def _mem():
    from ..wmma import memory
    return memory


def cmd_check(args) -> int:
    from ..wmma.alignment import check_access    # the text's verdict + the sm_90 SASS model's note

    r = check_access(args.opcode, _int(args.ptr, "--ptr"), None if args.stride is None else _int(args.stride, "--stride"),
                       reading=args.reading, fragment_bytes=None if args.fragment_bytes is None else _int(args.fragment_bytes, "--fragment-bytes"),
                       points_to=args.points_to)
    print(json.dumps(r.to_dict(), indent=2) if args.json else r.text())
    return 0 if r.legal else 1


def cmd_strides(args) -> int:
    m = _mem()
    if (args.ptr_align is None) == (args.ptr is None):
        raise BadArgument("give exactly one of --ptr-align A or --ptr P")
    if not 1 <= args.enumerate <= 1 << 20:
        raise BadArgument(f"--enumerate must be in 1..{1 << 20} (the strides [0, N) the enumeration covers), "
                          f"got {args.enumerate}")
    s = m.legal_strides(args.opcode, ptr_align=None if args.ptr_align is None else _int(args.ptr_align, "--ptr-align"),
                        ptr=None if args.ptr is None else _int(args.ptr, "--ptr"), reading=args.reading,
                        fragment_bytes=None if args.fragment_bytes is None else _int(args.fragment_bytes, "--fragment-bytes"),
                        enumerate_strides=args.enumerate)
    if args.json:
        print(json.dumps(s.to_dict(), indent=2))
    else:
        print(s.opcode)
        print(f"  base: {s.base}; fragment size {s.frag_bytes} bytes ({s.reading} reading); default stride {s.default_stride}")
        print(f"  legal strides: {s.text}" + ("" if s.empty else f"  (smallest {s.to_dict()['smallest_legal']}, largest 2^32-1)"))
        if s.witness:
            print(f"  witness: {s.witness}")
        for p in s.proofs:
            print(f"  {p.line()}")
        cc = s.cross_check or {}
        print(f"  enumeration over strides [0, {args.enumerate}) and pointers {cc.get('ptrs')}: "
              f"{'agrees' if cc.get('agrees') else 'DISAGREES'}")
    if any(not p.proved for p in s.proofs):
        return 3
    return 1 if s.empty else 0


def cmd_address(args) -> int:
    m = _mem()
    v = m.memory_view(args.opcode)
    r, c = _int(args.row, "--row"), _int(args.col, "--col")
    if not (0 <= r < v.rows and 0 <= c < v.cols):
        raise BadArgument(f"(row, col) = ({r}, {c}) is outside the {v.rows}x{v.cols} matrix of {v.opcode}")
    stride = v.default_stride if args.stride is None else _int(args.stride, "--stride")
    ptr = _int(args.ptr, "--ptr")
    if ptr < 0 or stride < 0:
        raise BadArgument("ptr and stride must be non-negative")
    a = v.address(r, c, ptr, stride)
    if args.json:
        print(json.dumps(dict(a, opcode=v.opcode, row=r, col=c, ptr=ptr, stride=stride), indent=2))
    else:
        bit = f" + bit {a['bit_in_byte']}" if v.elem_bits < 8 else ""
        print(f"{v.opcode}: element ({r}, {c}) = element {a['index']} from ptr ({m.spec().layouts[v.layout].index}), "
              f"byte {hex(a['byte'])}{bit}, {v.elem_bits} bits")
    return 0


def cmd_describe(args) -> int:
    m = _mem()
    v = m.memory_view(args.opcode)
    d = v.describe()
    d["rules"] = [{"id": r.id, "kind": r.kind, "holds": str(r.holds), "forall": r.forall, "section": r.section,
                   "text": r.text} for r in m.spec().rules]
    d["space"] = m.spec().spaces[v.space]
    if args.json:
        print(json.dumps(d, indent=2))
        return 0
    print(v.opcode)
    print(f"  matrix {v.matrix.upper()}: {v.rows} x {v.cols} .{v.etype} ({v.elem_bits} bits per element in memory), {v.layout}-major")
    print(f"  leading dimension: {v.ld_name} ({v.n_ld} instances of {v.ld_size} elements); default stride {v.default_stride}")
    print(f"  element (row, col) at index {d['index']} from ptr; bit = {m.spec().address['bit']}")
    print(f"  fragment: {v.regs} x {v.reg_bits}-bit registers; fragment size {d['fragment_bytes']['registers']} bytes "
          f"(registers reading), {d['fragment_bytes']['elements']} bytes (elements reading)")
    print(f"  state space: {d['space']['name']} (address may point to {', '.join(d['space']['points_to'])})")
    for r in d["rules"]:
        q = " for every instance ld < n_ld" if r["forall"] == "ld" else ""
        print(f"  rule {r['id']}: {r['holds']}{q}  [PTX ISA {r['section']}]")
    return 0


def cmd_maps(args) -> int:
    from ..wmma import maps as mp
    ms = mp.all_maps()
    if args.arch:
        ms = [m for m in ms if args.arch in m.archs]
        if not ms:
            raise BadArgument(f"no observed wmma maps for {args.arch}; known: "
                              f"{', '.join(sorted({a for m in mp.all_maps() for a in m.archs}))}")
    props = []
    if args.properties:
        # over every map, so that the selected ones are compared with the other sources too
        import re
        ids = {m.id for m in ms}
        props = [r for r in (mp.properties() if args.arch else mp.properties(ms))
                 if ids & set(re.split(r"[\[\], =]+", r.obligation))]
    if args.json:
        print(json.dumps({"maps": [m.summary() for m in ms], "properties": [p.to_dict() for p in props]}, indent=1))
    else:
        for m in ms:
            s = m.summary()
            print(f"{m.id:44s} {','.join(m.archs):12s} {m.evidence:22s} {m.rows}x{m.cols} {m.elements}/lane "
                  f"multiplicity {dict(s['multiplicity_histogram'])}")
        for p in props:
            print(p.line())
        if props:
            t = mp.tally(props)
            print(f"# {len(ms)} maps, {len(props)} properties: "
                  + "; ".join(f"{k} " + ", ".join(f"{n} {s}" for s, n in sorted(v.items())) for k, v in t.items())
                  + ("; enumeration agrees with Z3 on every one" if all(p.cross_check and p.cross_check.get("agrees")
                                                                         for p in props) else "; ENUMERATION DISAGREES"))
    if any(p.status == "unknown" for p in props):
        return 3
    return 1 if any(p.cross_check and not p.cross_check.get("agrees") for p in props) else 0


def cmd_prove(args) -> int:
    from ..wmma import theorems as th
    from . import check_writable

    if args.smt2:
        check_writable(args.smt2, "--smt2", directory=True)
    results = th.run_all(per_form=args.per_form, include_slow=args.per_form)
    bad = []
    for r in results:
        exp_ref = any(r.obligation == n or r.obligation.startswith(n + "[") for n in th.EXPECTED_REFUTED)
        if r.obligation.startswith("wmma.map."):
            continue                      # observations: proved and refuted are both facts
        if r.status == "unknown":
            continue
        if (r.status == "refuted") != exp_ref:
            bad.append(r)
    cc_bad = [r for r in results if r.cross_check is not None and not r.cross_check.get("agrees")]
    if args.smt2:
        d = Path(args.smt2)
        d.mkdir(parents=True, exist_ok=True)      # (checked writable before the proofs ran)
        for i, r in enumerate(results):
            if r.smt2:
                (d / f"{i:04d}_{r.obligation.replace('/', '_')[:120]}.smt2").write_text(r.smt2)
    if args.json:
        print(json.dumps({"results": [r.to_dict() for r in results],
                          "unexpected": [r.obligation for r in bad],
                          "cross_check_disagreements": [r.obligation for r in cc_bad]}, indent=1))
    else:
        for r in results:
            print(r.line())
        n = {s: sum(r.status == s for r in results) for s in ("proved", "refuted", "unknown")}
        print(f"# {len(results)} results: {n['proved']} proved, {n['refuted']} refuted, {n['unknown']} unknown; "
              f"{len(bad)} unexpected, {len(cc_bad)} enumeration disagreements")
    if any(r.status == "unknown" for r in results):
        return 3
    return 1 if (bad or cc_bad) else 0


def cmd_errata(args) -> int:
    m = _mem()
    errs = list(m.spec().errata)
    if args.json:
        print(json.dumps(errs, indent=1))
        return 0
    for e in errs:
        print(f"[{e['id']}] {e['question']}  [PTX ISA {e['section']}]")
        for r in e["readings"]:
            print(f"    - {r}")
        if e.get("affects"):
            print(f"    affects: {e['affects']}")
        print(f"    decision: {e['decision']}")
        if e.get("status"):
            print(f"    status: {e['status']}")
        if e.get("silicon"):
            print(f"    silicon: {e['silicon']}")
        if e.get("evidence"):
            print(f"    evidence: {e['evidence']}")
    return 0


def _provenance(items: list[str] | None) -> dict[str, str]:
    """--provenance KEY=VALUE ... -> dict."""
    prov = {}
    for kv in items or []:
        k, sep, v = kv.partition("=")
        if not sep or not k:
            raise BadArgument(f"--provenance takes KEY=VALUE, got {kv!r}")
        prov[k] = v
    return prov


def cmd_probe_decode(args) -> int:
    from ..hw import wmma_probe as wp
    d = Path(args.dir)
    if not (d / "wmma_probe_manifest.json").exists() or not (d / "wmma_probe_raw.npz").exists():
        raise BadArgument(f"{d} holds no wmma probe run (wmma_probe_manifest.json + wmma_probe_raw.npz)")
    prov = _provenance(args.provenance)
    if args.condense:
        from . import check_writable
        check_writable(args.condense, "--condense")
    out = wp.decode_dir(d)
    print(out)
    if args.condense:
        print(wp.condense(out, args.condense, provenance=prov or None))
    return 0


def cmd_pipeline_check(args) -> int:
    from ..wmma import pipeline as pl
    from ..specdata import data_file
    r = pl.check_pipeline_data(data_file(args.path), arch=args.arch)
    c = r.counts
    print(json.dumps(r.to_dict(), indent=1) if args.json else r.text())
    if c.get("mismatch") or c.get("evaluator_error"):
        return 1
    return 0 if c.get("match") else 3          # 3: nothing to compare (no silicon output)


def cmd_alignment(args) -> int:
    from ..wmma import alignment as al
    if not args.run and (args.summary or args.provenance):
        raise BadArgument("--summary and --provenance apply to silicon RUNs: name one or more")
    if args.run:
        from . import check_writable, read_json
        if args.summary:
            check_writable(args.summary, "--summary")
        docs = []
        for r in args.run:
            p = Path(r)
            f = p / "wmma_alignment.json" if p.is_dir() else p
            if not f.exists():
                raise BadArgument(f"{r}: no alignment run (wmma_alignment.json from python -m formal.hw.wmma_probe --alignment)")
            read_json(f, "alignment run")        # one-line error for a file that is not JSON
            try:
                docs.append(al.load_run(f))
            except (KeyError, TypeError, ValueError, AttributeError) as x:
                raise BadArgument(f"{f}: not an alignment run ({type(x).__name__}: {x})") from None
        try:
            doc = al.merge_runs(docs)
            a = al.analyse(doc)
        except ValueError as x:
            raise BadArgument(str(x)) from None
        except (KeyError, TypeError, AttributeError, IndexError) as x:     # JSON of the wrong shape
            raise BadArgument(f"{' '.join(args.run)}: not an alignment run ({type(x).__name__}: {x})") from None
        if args.summary:
            prov = _provenance(args.provenance)
            print(al.write_summary(doc, args.summary, prov or None), file=sys.stderr)
        print(json.dumps(a, indent=1) if args.json else al.report_text(a))
        return 1 if any(e["status"] == "refuted" for e in a["errata"]) else 0
    s = al.load_survey()
    if s is None:
        raise BadArgument("no SASS survey checked in (ptx-formal wmma sass-survey)")
    rows = {}
    for e in s["kernels"]:
        key = (e["space"] or "generic", e["window"], e["width"])
        rows.setdefault(key, set()).add(e["family"])
    summ = al.load_summary()
    sdoc = al.summary_doc(summ) if summ else None
    st = al.errata_status(sdoc, summ["wrong_data"] if summ else None)
    if args.json:
        print(json.dumps({"survey": s["meta"], "widths": [{"space": k[0], "window": k[1], "width": k[2], "families": len(v)}
                                                          for k, v in sorted(rows.items())],
                          "silicon": None if summ is None else {"meta": summ["meta"], "outcomes": al.outcome_table(sdoc)},
                          "errata": st}, indent=1, default=str))
        return 0
    m = s["meta"]
    print(f"SASS survey ({m['target']}, ptxas {m['ptxas']}, {m['created']}): the widest access of each kernel = the "
          f"alignment its base and pitch need (model)")
    for (space, window, w), fams in sorted(rows.items()):
        print(f"  {space:12s} pointer into {window:6s}: {w:2d} bytes  ({len(fams)} families)")
    if summ is not None:
        sm = summ["meta"]
        prov = sm.get("provenance") or {}
        print(f"silicon ({al.SUMMARY_FILE}: {prov.get('run', '?')}, {prov.get('device', sm.get('device'))}): "
              f"{sm['status_counts']}")
        print(al.outcome_text(al.outcome_table(sdoc)))
    print(al.errata_text(st))
    return 0


def cmd_sass_survey(args) -> int:
    from ..wmma import alignment as al
    if args.out:
        from . import check_writable
        check_writable(args.out, "--out")
    try:
        print(al.write_survey(args.out))
    except RuntimeError as e:            # no ptxas / cuobjdump: the survey could not run (3)
        print(f"ptx-formal: wmma sass-survey: {e}", file=sys.stderr)
        return 3
    return 0


def register(sub) -> None:
    p = sub.add_parser("wmma", help="wmma memory semantics (check, strides), observed fragment maps, theorems",
                       description="wmma.load / wmma.store memory semantics from specs/wmma_memory.toml, checked by Z3 "
                                   "and enumeration; observed fragment maps; theorems over every fragment map.")
    ws = p.add_subparsers(dest="wmma_command", metavar="SUBCOMMAND")

    def common(q, stride: bool = True):
        q.add_argument("opcode", help="a wmma.load / wmma.store opcode, e.g. wmma.load.a.sync.aligned.row.m16n16k16.f16")
        q.add_argument("--reading", choices=["registers", "elements"], default=None,
                       help="meaning of 'fragment size' (default registers: the ISA example's); see `wmma errata`")
        q.add_argument("--fragment-bytes", default=None, help="use this fragment size instead of a reading")
        q.add_argument("--json", action="store_true", help="machine-readable output")

    q = ws.add_parser("check", help="is [ptr], stride a defined access? (exit 0 legal, 1 undefined, 2 bad input)")
    common(q)
    q.add_argument("--ptr", required=True, help="base address p (decimal or 0x hex)")
    q.add_argument("--stride", default=None, help="stride operand in elements (omit: the default stride)")
    q.add_argument("--points-to", default=None, help="window a generic address falls in: global, shared, local, const, "
                                                     "param, shared::cluster")
    q.set_defaults(func=cmd_check)

    q = ws.add_parser("strides", help="the set of legal strides for a base alignment (exit 0, 1 if empty, 3 unknown)")
    common(q)
    q.add_argument("--ptr-align", default=None, help="the base pointer is known to be a multiple of this")
    q.add_argument("--ptr", default=None, help="or: this exact base pointer")
    q.add_argument("--enumerate", type=int, default=2048, help="cross-check by enumerating strides below this (default 2048)")
    q.set_defaults(func=cmd_strides)

    q = ws.add_parser("address", help="the address of element (row, col)")
    q.add_argument("opcode")
    q.add_argument("--row", required=True)
    q.add_argument("--col", required=True)
    q.add_argument("--ptr", default="0")
    q.add_argument("--stride", default=None)
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=cmd_address)

    q = ws.add_parser("describe", help="the memory view of a form and the rules that apply")
    q.add_argument("opcode")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=cmd_describe)

    q = ws.add_parser("maps", help="observed fragment maps with provenance (and their proved properties)")
    q.add_argument("--arch", default=None, help="only maps observed for this target, e.g. sm_70")
    q.add_argument("--properties", action="store_true", help="prove covers / duplication / row-vs-col / load-vs-store")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=cmd_maps)

    q = ws.add_parser("prove", help="the theorems over every fragment map (exit 0 as expected, 1 not, 3 unknown)")
    q.add_argument("--per-form", action="store_true", help="also the per-form memory obligations (minutes)")
    q.add_argument("--smt2", default=None, help="write each obligation's SMT-LIB certificate into this directory")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=cmd_prove)

    q = ws.add_parser("errata", help="what the text leaves open, with both readings")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=cmd_errata)

    q = ws.add_parser("probe-decode", help="decode a formal.hw.wmma_probe run directory into observed maps")
    q.add_argument("dir")
    q.add_argument("--condense", default=None, help="also write the one-map-per-form file to check in here")
    q.add_argument("--provenance", action="append", default=None, metavar="KEY=VALUE",
                   help="recorded in the condensed file's meta.provenance (repeatable)")
    q.set_defaults(func=cmd_probe_decode)

    q = ws.add_parser("pipeline-check", help="silicon pipeline D vs formal.evaluate_matrices, bit for bit "
                                             "(exit 0 all match, 1 mismatch, 3 no silicon output)")
    q.add_argument("path", help="a run directory (wmma_pipeline.json + .npz) or a slice's .json; "
                                "specs/observed/NAME.json names the shipped slice from any directory")
    q.add_argument("--arch", default=None, help="evaluator architecture (default: the run's target)")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=cmd_pipeline_check)

    q = ws.add_parser("alignment", help="alignment the hardware needs: the SASS survey, or a silicon run vs the text")
    q.add_argument("run", nargs="*", default=None, help="runs of python -m formal.hw.wmma_probe --alignment (dir or json); "
                                                         "several: merged, a later run's verdicts win (--resume runs)")
    q.add_argument("--summary", default=None, metavar="FILE", help="also write the condensed summary (the file checked in "
                                                                   "as specs/observed/wmma_alignment_sm90.json)")
    q.add_argument("--provenance", action="append", default=None, metavar="KEY=VALUE",
                   help="recorded in the summary's meta.provenance (repeatable)")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=cmd_alignment)

    q = ws.add_parser("sass-survey", help="redo specs/observed/wmma_sass_sm90.json (needs ptxas and cuobjdump)")
    q.add_argument("--out", default=None)
    q.set_defaults(func=cmd_sass_survey)

    def _help(args) -> int:
        raise BadArgument("ptx-formal wmma: name a SUBCOMMAND: " + ", ".join(ws.choices) + " (see --help)")
    p.set_defaults(func=_help)
