"""``ptx-formal metadata``: sparse metadata words -- check, explain, prove, counterexamples, scan.

    ptx-formal metadata check OPCODE --sel S WORD [--lane L] [--json]
    ptx-formal metadata explain OPCODE --sel S [--json] [--svg FILE]
    ptx-formal metadata prove [OPCODE | --all] [--sel S] [--json]
    ptx-formal metadata witness OPCODE [--sel S] [--kind K] [--json]
    ptx-formal metadata scan OPCODE [--sel S] [--lane L] [--predicate chunk|word]

Exit codes: check 0 valid / 1 invalid; prove 0 proved / 1 refuted / 3 unknown;
2 bad input (one line on stderr).
"""

from __future__ import annotations

import json

from .. import catalog as cat
from . import InputError


def _word(s: str) -> int:
    try:
        v = int(s.replace("_", ""), 0)
    except ValueError:
        raise InputError(f"WORD must be an integer (0x..., 0b..., or decimal), got {s!r}") from None
    if not 0 <= v < 1 << 32:
        raise InputError(f"WORD must fit in 32 bits, got {s}")
    return v


def _int(s: str) -> int:
    try:
        return int(s, 0)
    except ValueError:
        raise InputError(f"expected an integer, got {s!r}") from None


def _sel(s: str) -> int:
    v = _int(s)
    if not 0 <= v < 1 << 32:
        raise InputError(f"--sel must be a 32-bit immediate (0..2^32-1), got {s[:40]}")
    return v


def _lane(s: str) -> int:
    v = _int(s)
    if not 0 <= v < 32:
        raise InputError(f"--lane must be in 0..31, got {s[:40]}")
    return v


def _fm(opcode: str):
    from ..metadata import meta

    return meta(cat.parse(opcode))


# ----------------------------------------------------------------------------------

def cmd_check(args) -> int:
    from ..metadata import check_word

    fm = _fm(args.opcode)
    sel = args.sel if args.sel is not None else fm.selectors[0]
    res = check_word(fm, sel, _word(args.word), args.lane)
    print(json.dumps(res.to_dict(), indent=2) if args.json else res.text())
    return 0 if res.valid else 1


def explain_rows(fm, sel: int) -> list[dict]:
    w = fm.gran.width
    rows = []
    for lane, n, r, c, lo in fm.e_table(sel):
        rows.append({"lane": int(lane), "nibble": int(n), "bits": [int(lo) + 3, int(lo)], "row": int(r),
                     "chunk": int(c), "cols": [int(c) * w, int(c) * w + w - 1],
                     "figure": f"T{int(lane)}: [{int(lo) + 3}..{int(lo)}] in cell [{int(r)}][{int(c) * w}..{int(c) * w + w - 1}]"})
    return rows


def cmd_explain(args) -> int:
    fm = _fm(args.opcode)
    sel = args.sel if args.sel is not None else fm.selectors[0]
    if sel not in fm.selectors:
        raise cat.BadArgument(f"selector {sel} is not legal for {fm.form.opcode} (legal: {list(fm.selectors)})")
    rows = explain_rows(fm, sel)
    lay, g = fm.layout, fm.gran
    lanes = sorted({r["lane"] for r in rows})
    info = {
        "opcode": fm.form.opcode, "sel": sel, "legal_selectors": list(fm.selectors),
        "granularity": {"id": g.id, "chunk_width": g.width, "stored_per_chunk": g.stored, "section": g.section,
                        "figures": g.figures, "reading": g.reading},
        "legal_nibbles": [f"0b{v:04b}" for v in fm.legal_nibbles],
        "nibble_decode": [{"nibble": f"0b{v:04b}", "stored_columns": list(fm.offsets(v))} for v in fm.legal_nibbles],
        "rules": [{"id": r.id, "require": r.require.src, "section": r.section, "text": r.text} for r in fm.rules],
        "layout": {"id": lay.id, "selectors": lay.selectors, "active": lay.active.src, "row": lay.row.src,
                   "chunk": lay.chunk.src, "nibble_lo_bit": lay.lo.src, "figure": lay.figure,
                   "section": lay.section, "evidence": lay.evidence,
                   "alternative": ({"row": lay.alternative.row.src, "chunk": lay.alternative.chunk.src,
                                    "why": lay.alternative.why} if lay.alternative else None)},
        "contributing_lanes": lanes, "cells": rows,
    }
    if args.svg:
        from . import check_writable

        check_writable(args.svg, "--svg")
        _svg(fm, sel, rows, args.svg)
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print(f"{fm.form.opcode}  sel={sel}  (legal: {list(fm.selectors)})")
    print(f"  granularity {g.id}: chunks of {g.width} columns, {g.stored} stored  [PTX ISA {g.section}; {g.figures}]")
    print(f"  legal nibbles ({fm.variant}): " + ", ".join(
        f"0b{v:04b}->{list(fm.offsets(v))}" for v in fm.legal_nibbles) + "   (nibble -> columns of stored elements 0, 1, ..)")
    for r in fm.rules:
        print(f"  rule {r.id}: {r.require.src}  [PTX ISA {r.section}]")
    print(f"  layout {lay.id} ({lay.figure}, PTX ISA {lay.section}): lanes read: {lay.active.src}; "
          f"nibble n -> row {lay.row.src}, chunk {lay.chunk.src}")
    print(f"  evidence: {lay.evidence}")
    if lay.alternative:
        print(f"  competing hypothesis: row {lay.alternative.row.src}, chunk {lay.alternative.chunk.src} "
              f"({lay.alternative.why})")
    print(f"  lanes whose e is read: {lanes}")
    print(f"  {'lane':>4} {'nib':>3} {'bits':>7}  {'row':>3} {'columns':>9}   ISA figure notation")
    for r in rows:
        print(f"  {r['lane']:>4} {r['nibble']:>3} {'[' + str(r['bits'][0]) + ':' + str(r['bits'][1]) + ']':>7}  "
              f"{r['row']:>3} {str(r['cols'][0]) + '..' + str(r['cols'][1]):>9}   {r['figure']}")
    return 0


def _svg(fm, sel: int, rows: list[dict], path: str) -> None:
    try:
        from .draw import Cell, Panel, lane_color, svg
    except ImportError:
        raise InputError("--svg needs formal/cli/draw.py, which is not available") from None
    cells = {(r["row"], r["chunk"]): Cell([f"T{r['lane']}", f"[{r['bits'][0]}..{r['bits'][1]}]"], lane_color(r["lane"]),
                                          r["figure"]) for r in rows}
    w = fm.gran.width
    p = Panel(f"metadata e, sel={sel}: cell [row][chunk] -> Tk: [bits]", fm.rows, fm.chunks_per_row, cells,
              col_labels=[f"{c * w}..{c * w + w - 1}" for c in range(fm.chunks_per_row)], col_axis="columns")
    text = svg([p], title=fm.form.opcode, caption=f"{fm.layout.figure}, PTX ISA {fm.layout.section}; {fm.layout.evidence}")
    with open(path, "w") as fh:
        fh.write(text)


def cmd_prove(args) -> int:
    from ..metadata import proofs

    if args.all:
        if args.opcode:
            raise InputError("--all takes no opcode")
        results = proofs.all_obligations()
    else:
        if not args.opcode:
            raise InputError("give an opcode or --all")
        fm = _fm(args.opcode)
        if args.sel is not None and args.sel not in fm.selectors:
            raise cat.BadArgument(f"selector {args.sel} is not legal for {fm.form.opcode} (legal: {list(fm.selectors)})")
        results = proofs.obligations(fm, args.sel)
    if args.json:
        print(json.dumps([r.to_dict() for r in results], indent=1))
    else:
        for r in results:
            print(r)
    st = {r.status for r in results}
    return 1 if "refuted" in st else 3 if "unknown" in st else 0


WITNESS_KINDS = ("not-sparse", "repeated-index", "unsorted", "tf32-value", "selector", "wrong-bits", "alternative", "all")


def cmd_witness(args) -> int:
    from ..metadata import witness as W

    fm = _fm(args.opcode)
    sel = args.sel
    if sel is not None and args.kind != "selector" and sel not in fm.selectors:
        raise cat.BadArgument(f"selector {sel} is not legal for {fm.form.opcode} (legal: {list(fm.selectors)}); "
                              f"use --kind selector for out-of-range selectors")
    k = args.kind
    rule_ids = {r.id for r in fm.rules}
    need = {"repeated-index": "distinct", "unsorted": "increasing", "tf32-value": "tf32-pair"}
    if k in need and need[k] not in rule_ids:
        raise cat.BadArgument(f"--kind {k} does not apply to {fm.form.opcode} (its rules: {', '.join(sorted(rule_ids))})")
    if k == "all":
        ws = W.all_witnesses(fm.form, sel)
    elif k == "not-sparse":
        ws = [W.not_sparse(fm.form)]
    elif k in need:
        ws = [W.bad_nibble(fm.form, sel, need[k])]
    elif k == "selector":
        ws = [W.selector_out_of_range(fm.form, sel)]
    elif k == "wrong-bits":
        ws = [W.wrong_bits(fm.form, sel, "swap-rows")]
    else:
        ws = [W.wrong_bits(fm.form, sel, "alternative")]
    if args.json:
        print(json.dumps([w.to_dict() for w in ws], indent=1, default=str))
    else:
        print("\n\n".join(w.text() for w in ws))
    return 0


def cmd_scan(args) -> int:
    from ..metadata import scan

    fm = _fm(args.opcode)
    sel = args.sel if args.sel is not None else fm.selectors[0]
    if sel not in fm.selectors:
        raise cat.BadArgument(f"selector {sel} is not legal for {fm.form.opcode} (legal: {list(fm.selectors)})")
    if args.lane is not None and not 0 <= args.lane < 32:
        raise InputError(f"--lane must be in 0..31, got {args.lane}")
    r = scan(fm, sel, args.lane, args.predicate)
    print(json.dumps(r.to_dict(), indent=2) if args.json else
          f"{r.opcode} sel={r.sel} lane {r.lane}: {r.count} of {r.words} words legal "
          f"({r.predicate} predicate, {r.seconds:.1f} s, {r.rate / 1e6:.1f} M words/s)")
    return 0


def register(sub) -> None:
    p = sub.add_parser("metadata", help="sparse metadata (mma.sp): check a word, explain the layout, proofs, witnesses",
                       description="The metadata operand e of mma.sp / mma.sp::ordered_metadata (PTX ISA 9.7.14.6).")
    msub = p.add_subparsers(dest="metadata_command", metavar="SUBCOMMAND", parser_class=type(p))

    c = msub.add_parser("check", help="is a 32-bit metadata word legal? (exit 0 valid, 1 invalid)")
    c.add_argument("opcode")
    c.add_argument("word", help="the lane's e register: 0x..., 0b... or decimal")
    c.add_argument("--sel", type=_sel, default=None, help="sparsity selector (default: the smallest legal)")
    c.add_argument("--lane", type=_lane, default=None, help="whose e this is (default: the first lane read)")
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=cmd_check)

    e = msub.add_parser("explain", help="the metadata layout table (ISA figure notation Tk: [m..n] in cell [x][y..z])")
    e.add_argument("opcode")
    e.add_argument("--sel", type=_sel, default=None)
    e.add_argument("--json", action="store_true")
    e.add_argument("--svg", metavar="FILE", help="draw the table like the ISA figures")
    e.set_defaults(func=cmd_explain)

    pr = msub.add_parser("prove", help="Z3 obligations of one form (or --all): exit 0 proved, 1 refuted, 3 unknown")
    pr.add_argument("opcode", nargs="?")
    pr.add_argument("--sel", type=_sel, default=None)
    pr.add_argument("--all", action="store_true", help="every sparse metadata class of the catalog")
    pr.add_argument("--json", action="store_true")
    pr.set_defaults(func=cmd_prove)

    w = msub.add_parser("witness", help="solver-derived minimal counterexamples (undefined behaviour: two readings, two D)")
    w.add_argument("opcode")
    w.add_argument("--sel", type=_sel, default=None)
    w.add_argument("--kind", choices=WITNESS_KINDS, default="all")
    w.add_argument("--json", action="store_true")
    w.set_defaults(func=cmd_witness)

    s = msub.add_parser("scan", help="count the legal words of a lane by evaluating all 2^32 (about a minute)")
    s.add_argument("opcode")
    s.add_argument("--sel", type=_sel, default=None)
    s.add_argument("--lane", type=_lane, default=None)
    s.add_argument("--predicate", choices=["chunk", "word"], default="word")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_scan)

    def no_sub(args) -> int:
        raise InputError("ptx-formal metadata: name a SUBCOMMAND: check, explain, prove, witness, scan (see --help)")

    p.set_defaults(func=no_sub)
