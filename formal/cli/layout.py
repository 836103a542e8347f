"""``ptx-formal layout``: fragment tables both ways, figures, and audits.

    ptx-formal layout OPCODE [--operand a] [--csv | --md | --json] [--by lane|element|both] [--svg FILE]
    ptx-formal layout --all-figures DIR
    ptx-formal layout audit OPCODE --operand a (--cute TV | --table FILE | --formula row=.. col=.. | --python FILE:FUNC)
    ptx-formal layout audit [OPCODE] [--operand X] --triton TEXT|FILE     (a whole Triton layout, every tile)
    ptx-formal layout audit OPCODE --operand X --cute TV --cute-tile RxC  (a CuTe TiledMMA, every tile)
    ptx-formal layout audit OPCODE --operand scale_a|scale_b|e --cute TV   (SFALayout / SFBLayout / ELayout)
    ptx-formal layout audit-atom OPCODE --a KIND:LAYOUT --b KIND:LAYOUT --c KIND:LAYOUT

Exit codes: 0 shown / audit proved, 1 audit refuted, 2 bad input, 3 audit unknown.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .. import catalog as cat
from .. import layout as L
from . import InputError, read_text


def register(sub) -> None:
    p = sub.add_parser("layout", help="fragment layout tables (element <-> lane/register/bits), figures, audits",
                       description="Show the layout of one operand of a form as tables both ways (element -> "
                                   "lane/register/bits and lane/register -> element), draw it, or audit someone "
                                   "else's layout against the spec ('layout audit OPCODE ...').")
    p.add_argument("words", nargs="*", metavar="OPCODE", help="an opcode, or 'audit OPCODE'")
    p.add_argument("--operand", "-o", help="a, b, c, d, scale_a, scale_b; wgmma: a (in registers), d, e (sparse "
                                           "metadata, with --selector) (default: every operand)")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--csv", action="store_true", help="CSV (one row per lane/register/element)")
    fmt.add_argument("--md", action="store_true", help="Markdown tables")
    fmt.add_argument("--json", action="store_true", help="JSON")
    p.add_argument("--by", choices=["lane", "element", "both"], default="both",
                   help="which table: lane/register -> element, element -> lane/register/bits, or both")
    p.add_argument("--svg", metavar="FILE", help="draw the layout like the ISA figures")
    p.add_argument("--all-figures", metavar="DIR", help="write the figure of every spec entry into DIR")
    p.add_argument("--byte-id", type=int, help="block-scale byte-id selector (scale_a/scale_b)")
    p.add_argument("--thread-id", type=int, help="block-scale thread-id selector (scale_a/scale_b)")
    a = p.add_argument_group("audit (ptx-formal layout audit OPCODE --operand X ...)")
    a.add_argument("--cute", metavar="TV",
                   help="a CuTe TV layout '(T,V):(Ts,Vs)' in CuTe's (M,K)/(N,K)/(M,N) convention; sparse A as CuTe "
                        "writes it (logical M x K, converted to the compressed M x K/2), SFALayout/SFBLayout with "
                        "--operand scale_a/scale_b (every selector unless --byte-id/--thread-id), ELayout with "
                        "--operand e")
    a.add_argument("--cute-tile", metavar="RxC",
                   help="--cute is a TiledMMA's TV layout over an R x C operand tile (A: M x K, B: N x K, C: M x N): "
                        "every instruction tile (warp, value group) is audited")
    a.add_argument("--selector", type=int, default=None, metavar="F",
                   help="sparsity selector for --operand e (default 0)")
    a.add_argument("--cute-thr", metavar="LAYOUT", help="CuTe ThrID: thread -> lane layout, e.g. '(4,2):(1,16)'")
    a.add_argument("--cute-product-stride", type=int, metavar="N",
                   help="m8n8k4 .f16: lanes between the products' threads (4 for the sm_70 quad pairs)")
    a.add_argument("--table", metavar="FILE", help="a CSV/JSON table: lane,reg,elem,row,col[,product] (or lane,i,row,col)")
    a.add_argument("--formula", nargs="+", metavar="NAME=EXPR",
                   help="row=EXPR col=EXPR [product=EXPR] [NAME=EXPR lets] over lane, i, reg, elem")
    a.add_argument("--python", metavar="FILE:FUNC", help="a Python function f(lane, reg, elem) -> (row, col[, product])")
    a.add_argument("--triton", metavar="TEXT|FILE", action="append",
                   help="a whole Triton layout as Triton prints it: #ttg.linear<{register = .., lane = .., warp = .., "
                        "block = ..}>, or #ttg.nvidia_mma / #ttg.dot_op (with its '#mma = ...' line, and the "
                        "tensor<RxCxT, ...> type or --triton-shape); every instruction tile is audited. Give it twice "
                        "(A's dot operand, then B's) to audit a tt.dot's operands together: tiles that permute K "
                        "(large kWidth) are proved when A and B permute it the same way")
    a.add_argument("--triton-shape", metavar="RxC", help="tensor shape for an encoding pasted without tensor<...>")
    a.add_argument("--triton-dtype", metavar="T", help="element type (f16, bf16, f32, i8, f8E4M3FN, f8E5M2) for an "
                                                      "encoding pasted without tensor<...>")
    a.add_argument("--no-bits", action="store_true", help="compare cells only, not bit positions")
    a.add_argument("--desc", dest="smem_desc", metavar="VALUE",
                   help="wgmma shared-memory audits (--triton '#ttg.nvmma_shared<..>', --cute GMMA atom): the "
                        "descriptor of the first operand tile (default: derived as CuTe / Triton build it)")
    q = p.add_argument_group("audit-atom (ptx-formal layout audit-atom OPCODE --a KIND:LAYOUT --b ... --c ...)")
    for o in ("a", "b", "c"):
        q.add_argument(f"--{o}", dest=f"atom_{o}", metavar="KIND:LAYOUT",
                       help=f"operand {o}{'/d' if o == 'c' else ''} as cute:TV, table:FILE, formula:'row=..;col=..', "
                            "python:FILE:FUNC, triton:TEXT|FILE (its first instruction tile) or spec (default)")
    p.set_defaults(func=cmd_layout)


def _smem_spelling(args) -> bool:
    """A wgmma shared-memory layout (#ttg.nvmma_shared, a CuTe GMMA smem atom): formal.smem audits it."""
    import os
    import re
    texts = list(args.triton or [])
    texts = [read_text(t) if len(t) < 4096 and "<" not in t and os.path.isfile(t) else t for t in texts]
    if any("nvmma_shared" in t for t in texts):
        return True
    return bool(args.cute and re.match(r"\s*(?:cute::)?(?:Sw\s*<|Swizzle\s*<|smem_ptr|(?:SM90::)?(?:GMMA::)?Layout_(?:MN|K)_)",
                                       args.cute))


def _smem_audit(args, words: list[str]) -> int:
    """layout audit [WGMMA-OPCODE] --operand a|b (--triton '#ttg.nvmma_shared<..>' | --cute ATOM) [--desc V]."""
    import re
    from .smem import run_audit
    if len(words) > 1 or (args.triton and len(args.triton) > 1):
        raise InputError("usage: ptx-formal layout audit [WGMMA-OPCODE] --operand a|b (--triton '#ttg.nvmma_shared<..>' "
                         "| --cute ATOM) [--desc VALUE]")
    n, sparse = None, False
    if words:
        m = re.search(r"\.m64n(\d+)k\d+\b", words[0])
        if not words[0].startswith("wgmma") or not m:
            raise InputError(f"{words[0][:80]}: a shared-memory layout is audited against a wgmma form "
                             f"(wgmma.mma_async...m64nNkK...), not this opcode")
        n, sparse = int(m.group(1)), ".sp." in words[0]
    op = (args.operand or "b").lower()
    if op not in ("a", "b"):
        raise InputError(f"--operand {op}: a shared-memory wgmma operand is a or b")
    shape = None
    if args.triton_shape:
        from .smem import _shape
        shape = _shape(args.triton_shape, "--triton-shape")
    return run_audit(args, op + (".sp" if sparse else ""), args.triton[0] if args.triton else None,
                     None if args.triton else args.cute, n, args.smem_desc, shape, args.triton_dtype)


def _params(args) -> dict[str, int]:
    out = {}
    if getattr(args, "selector", None) is not None and getattr(args, "operand", None) \
            and L.normalize_operand(args.operand) == "e":
        out["sel"] = args.selector
    if args.byte_id is not None:
        out["byte_id"] = args.byte_id
    if args.thread_id is not None:
        out["thread_id"] = args.thread_id
    return out


def cmd_layout(args) -> int:
    words = list(args.words)
    if args.all_figures:
        if words:
            raise InputError("--all-figures takes no opcode")
        from . import check_writable
        check_writable(args.all_figures, "--all-figures", directory=True)
        return all_figures(args.all_figures)
    if not words:
        raise InputError("ptx-formal layout: give an opcode (or --all-figures DIR, or 'audit OPCODE ...')")
    if words[0] == "audit-atom":
        if len(words) != 2:
            raise InputError("usage: ptx-formal layout audit-atom OPCODE --a KIND:LAYOUT --b KIND:LAYOUT --c KIND:LAYOUT")
        return cmd_audit_atom(args, words[1])
    if words[0] == "audit" and _smem_spelling(args):
        return _smem_audit(args, words[1:])
    if words[0] == "audit":
        if len(words) == 1 and args.triton:
            return cmd_audit_triton(args, None)
        if len(words) != 2:
            raise InputError("usage: ptx-formal layout audit OPCODE --operand X (--cute TV | --table FILE | "
                             "--formula row=... col=... | --python FILE:FUNC)")
        return cmd_audit(args, words[1])
    if len(words) != 1:
        raise InputError(f"ptx-formal layout takes one opcode, got {len(words)} words (quote the opcode?)")
    form = cat.parse(words[0])
    ops = [L.normalize_operand(args.operand)] if args.operand else L.layout_operands(form)
    if not ops:
        L._check_operand(form, "a")     # raises the wmma / no-layout message
    params = _params(args)
    lays = []
    for op in ops:
        prm = params if (op.startswith("scale") or op == "e") else {}
        if params and not (op.startswith("scale") or op == "e") and args.operand:
            raise InputError("--byte-id/--thread-id apply to the scale_a/scale_b operands only")
        lays.append((op, L.fragment(form, op, **prm)))
    if args.svg:
        if len(lays) != 1:
            raise InputError("--svg draws one operand: add --operand")
        from . import check_writable
        check_writable(args.svg, "--svg")
        op, lay = lays[0]
        Path(args.svg).write_text(_figure(form, op, lay))
        print(f"wrote {args.svg}", file=sys.stderr)
        return 0
    if args.json:
        out = []
        for op, lay in lays:
            d = L.layout_json(lay, form)
            if args.by in ("lane", "both"):
                d["by_lane"] = L.by_lane(lay)
            if args.by in ("element", "both"):
                d["by_element"] = L.by_element(lay)
            out.append(d)
        print(json.dumps(out[0] if len(out) == 1 else out, indent=1))
        return 0
    if args.csv:
        for n, (op, lay) in enumerate(lays):
            recs = L.by_element(lay) if args.by == "element" else L.by_lane(lay)
            if len(lays) > 1:
                recs = [dict(operand=op, **r) for r in recs]
            text = L.records_csv(recs)
            sys.stdout.write(text if n == 0 else text.split("\n", 1)[1])
        return 0
    for op, lay in lays:
        print(_header(form, op, lay, md=args.md))
        if args.md:
            if args.by in ("element", "both"):
                print("\n#### element -> lane / register / bits\n")
                print(L.records_md(L.by_element(lay)))
            if args.by in ("lane", "both"):
                print("\n#### lane / register -> element\n")
                print(L.records_md(L.by_lane(lay)))
            print()
        else:
            if args.by in ("element", "both"):
                print("element -> lane : element  (cell = T<lane>:<op><i>; register = i // epr, bits below)")
                print(L.text_grid(lay, op))
            if args.by in ("lane", "both"):
                print("lane / register -> element  (<op><i>[bits]=(row,col))")
                print(L.text_lanes(lay, op))
            print()
    return 0


def _header(form: cat.Form, op: str, lay: L.Layout, md: bool = False) -> str:
    e = lay.entry
    per = f"per thread ({lay.warps} warps x {lay.warp_lanes} lanes)" if lay.warps > 1 else "per lane"
    lines = [f"{form.opcode}  operand {op}: {lay.rows} x {lay.cols}"
             + (f" x {lay.products} products" if lay.products > 1 else "")
             + f", {lay.nregs} x .b{lay.reg_bits} {per}, {lay.epr} element(s) per register, "
               f"{lay.value_bits}-bit values in {lay.elem_bits}-bit containers at bit {lay.shift}"]
    if lay.params:
        lines.append("selectors: " + ", ".join(f"{k}={v}" for k, v in lay.params.items()))
    if e is not None:
        lines.append(f"spec entry {e.id} ({e.file}.toml), PTX ISA {e.section}" + (f", {e.figure}" if e.figure else "")
                     + f"; evidence: {e.evidence}")
        if e.note:
            lines.append(f"note: {e.note}")
    lines += lay.describe().splitlines()
    if md:
        return f"### `{form.opcode}` operand `{op}`\n\n" + "\n".join(f"    {x}" for x in lines[1:]) + "\n"
    return "\n".join(lines)


def _figure(form: cat.Form, op: str, lay: L.Layout) -> str:
    e = lay.entry
    sel = "" if not lay.params else " (" + ", ".join(f"{k}={v}" for k, v in lay.params.items()) + ")"
    title = f"{form.opcode}: operand {op}{sel}"
    cap = ""
    if e is not None:
        cap = f"spec entry {e.id}; PTX ISA {e.section}" + (f" ({e.figure})" if e.figure else "") + \
              f"; {lay.nregs} x .b{lay.reg_bits} per lane, {lay.epr} element(s) per register"
    from .draw import layout_svg

    return layout_svg(lay, op, title=title, caption=cap)


def all_figures(directory: str) -> int:
    """One SVG per spec entry (scale entries: per thread-id and per byte-id), plus index.md."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    forms = [f for f in cat.documented_forms() if f.family in L.LAYOUT_FAMILIES]
    index = ["# Fragment layout figures", "",
             "Regenerated from `specs/fragments_mma*.toml` and `specs/fragments_wgmma.toml` by "
             "`ptx-formal layout --all-figures DIR`.", "",
             "| figure | entry | PTX ISA | ISA figure | example form |", "|---|---|---|---|---|"]
    n = 0
    for ent in L.spec().entries:
        op = ent.operands[0]
        form = next((f for f in forms if op in L.layout_operands(f) and [x.id for x in L.resolve(f, op)] == [ent.id]),
                    None)
        if form is None:
            continue
        space = L.param_space(form, op)
        if space == [{}]:
            variants = [{}]
        else:
            first = space[0]
            variants = [p for p in space if all(p[k] == first[k] for k in p if k != "thread_id")]
            variants += [p for p in space if all(p[k] == first[k] for k in p if k != "byte_id") and p not in variants]
        for prm in variants:
            lay = L.fragment(form, op, **prm)
            suffix = "".join(f".{k.split('_')[0]}{v}" for k, v in sorted(prm.items()))
            name = f"{ent.id}{suffix}.svg"
            (d / name).write_text(_figure(form, op, lay))
            index.append(f"| [{name}]({name}) | `{ent.id}` | {ent.section} | {ent.figure} | `{form.opcode}` |")
            n += 1
    (d / "index.md").write_text("\n".join(index) + "\n")
    print(f"wrote {n} figures and index.md to {d}", file=sys.stderr)
    return 0


def _load_python(spec: str):
    from . import load_user_function
    return load_user_function(spec)


def cmd_audit(args, opcode: str) -> int:
    from ..transform import cute

    if args.triton:
        return cmd_audit_triton(args, opcode)
    if args.cute_tile:
        return cmd_audit_cute_tiled(args, opcode)
    if not args.operand:
        raise InputError("layout audit needs --operand")
    form = cat.parse(opcode)
    op = L.normalize_operand(args.operand)
    params = _params(args)
    if op == "e" and form.family != "wgmma":
        return cmd_audit_metadata(args, form)
    if op.startswith("scale") and args.cute and not params:
        return cmd_audit_scale_all(args, form, op)
    ref = L.fragment(form, op, **params)
    given = [x for x in (args.cute, args.table, args.formula, args.python) if x]
    if len(given) != 1:
        raise InputError("layout audit takes exactly one of --cute, --table, --formula, --python, --triton")
    if args.cute:
        cand = cute.from_cute(args.cute, form, op, thr_to_lane=args.cute_thr,
                              product_lane_stride=args.cute_product_stride, name="cute", **params)
    elif args.table:
        from . import read_text
        read_text(args.table, "--table")        # a missing or binary file: one line naming it
        cand = L.load_table(args.table, like=ref)
    elif args.formula:
        kv = {}
        for item in args.formula:
            if "=" not in item:
                raise InputError(f"--formula: expected NAME=EXPR, got {item!r}")
            k, v = item.split("=", 1)
            kv[k.strip()] = v.strip()
        if "row" not in kv or "col" not in kv:
            raise InputError("--formula needs row=EXPR and col=EXPR")
        row, col, prod = kv.pop("row"), kv.pop("col"), kv.pop("product", None)
        let = dict(L.spec().let)
        let.update(kv)
        if ref.products > 1 and prod is None:
            raise InputError(f"{ref.name} runs {ref.products} products per warp: give product=EXPR too")
        cand = L.Layout.from_formulas(row, col, product=prod, let=let, like=ref, name="formula")
    else:
        fn = _load_python(args.python)
        try:
            cand = L.Layout.from_function(fn, like=ref, name=args.python)
        except (Exception, SystemExit) as e:      # user code: contained, one line
            raise InputError(f"--python: the function failed: {type(e).__name__}: {e}") from None
    from ..prove import audit_layout

    rep = audit_layout(cand, form, op, compare_bits=not args.no_bits, **params)
    relab = None
    if rep.status == "refuted" and not params:
        from ..transform.atom import relabelling

        ar = relabelling(form, op, cand)
        if ar is not None:
            relab = {ax: pi for ax, pi in ar.permutations.items() if pi != list(range(len(pi)))}
    hint = _relabel_hint(form.opcode, op, sorted(relab), "cute" if args.cute else "table/formula/python") if relab else ""
    if args.json:
        d = rep.to_dict()
        if relab:
            d.update(status="relabelled", relabelled=relab, hint=hint)
        print(json.dumps(d, indent=1))
    else:
        print(f"audit {form.opcode} operand {op} against spec entry {ref.name} (PTX ISA {ref.source})")
        for r in rep.results:
            what = r.obligation.family
            if r.status == "proved":
                print(f"  PROVED   {what:16s} ({r.solver})")
            elif r.status == "refuted":       # relabelled: the layout differs from the spec's, no refutation
                print(f"  {'DIFFERS ' if relab else 'REFUTED '} {what:16s} witness: {json.dumps(r.witness)}")
            else:
                print(f"  UNKNOWN  {what:16s} {r.reason}")
        if relab:
            for ax, pi in relab.items():
                print(f"  RELABELLED {ax}: spec -> yours " + " ".join(f"{i}->{v}" for i, v in enumerate(pi)))
            print(f"verdict: RELABELLED: {hint}")
        else:
            print("verdict: " + {"proved": "equal to the spec and bijective",
                                 "refuted": "REFUTED", "unknown": "UNKNOWN"}[rep.status])
    if relab:
        return 3
    return {"proved": 0, "refuted": 1, "unknown": 3}[rep.status]


def _relabel_hint(opcode: str, op: str, axes: list, kind: str) -> str:
    """What a layout equal to the spec up to relabelled axes means, and how to decide it."""
    ax = " and ".join(axes)
    partners = sorted({o for o, (x, y) in (("a", ("M", "K")), ("b", ("K", "N")), ("c", ("M", "N")))
                       if o != ("c" if op == "d" else op) and (x in axes or y in axes)})
    both = (" (A's dot operand, then B's: `ptx-formal layout audit --triton A --triton B`)" if kind == "triton" else "")
    return (f"not the spec's layout, but equal to it up to a relabelling of {ax}, which the product does not see "
            f"if {' and '.join(partners)} relabel{'s' if len(partners) == 1 else ''} {ax} the same way: undecided "
            f"from one operand (exit 3). Decide it with the partners{both}: `ptx-formal layout audit-atom {opcode} "
            + " ".join(f"--{o} KIND:LAYOUT" for o in sorted({'c' if op == 'd' else op, *partners})) + "`")


def _text_or_file(value: str, flag: str) -> str:
    p = Path(value)
    if "\n" not in value and len(value) < 4096 and not value.lstrip().startswith(("#", "{", "tensor")) and p.is_file():
        return p.read_text()
    if "\n" not in value and not value.lstrip().startswith(("#", "{", "tensor")):
        raise InputError(f"{flag}: {value!r} is neither Triton layout text nor a file")
    return value


def cmd_audit_triton(args, opcode: str | None) -> int:
    """Audit every instruction tile of a whole Triton layout."""
    from ..transform import triton

    extra = [x for x in (args.cute, args.table, args.formula, args.python) if x]
    if extra:
        raise InputError("layout audit takes exactly one of --cute, --table, --formula, --python, --triton")
    shape = None
    if args.triton_shape:
        try:
            shape = tuple(int(x) for x in args.triton_shape.lower().split("x"))
        except ValueError:
            raise InputError(f"--triton-shape: expected RxC, got {args.triton_shape!r}") from None
        if len(shape) != 2 or min(shape) <= 0:
            raise InputError(f"--triton-shape: expected RxC with positive sizes, got {args.triton_shape!r}")
    texts = list(args.triton)
    if len(texts) > 2:
        raise InputError(f"--triton: give one layout, or two (A's and B's dot operands), not {len(texts)}")
    wls = [triton.parse_whole(_text_or_file(t, "--triton"), shape=shape, dtype=args.triton_dtype) for t in texts]
    if len(wls) == 2:
        return _audit_triton_pair(args, opcode, wls)
    rep = triton.audit_whole(wls[0], opcode, args.operand, compare_bits=not args.no_bits, **_params(args))
    hint = _relabel_hint(rep.form, rep.operand, rep.relabelled_axes, "triton") if rep.status == "relabelled" else ""
    return _print_whole(rep, args, "Triton layout", hint=hint)


def _audit_triton_pair(args, opcode, wls) -> int:
    from ..transform import triton

    if args.operand:
        raise InputError("--triton given twice is A's and B's dot operands: drop --operand")
    wa, wb = wls
    if wa.kind == "dot" and wb.kind == "dot" and (wa.op_idx, wb.op_idx) == (1, 0):
        wa, wb = wb, wa
    for w, op, i in ((wa, "a", 0), (wb, "b", 1)):
        if w.kind == "mma":
            raise InputError("--triton twice: give the two dot operands (#ttg.dot_op opIdx = 0 and 1, or their "
                             "#ttg.linear layouts, A first), not the accumulator")
        if w.kind == "dot" and w.op_idx != i:
            raise InputError(f"--triton twice: both layouts are dot operands opIdx = {w.op_idx}; give opIdx = 0 and 1")
    rep = triton.audit_pair(wa, wb, opcode, compare_bits=not args.no_bits)
    if args.json:
        print(json.dumps(rep.to_dict(), indent=1))
        return {"proved": 0, "refuted": 1, "unknown": 3}[rep.status]
    for sub, what in ((rep.a, "A"), (rep.b, "B")):
        _print_whole(sub, args, f"Triton layout of {what}")
    print(f"A and B together: every A tile with the B tiles over the same k ({len(rep.pairs)} distinct pairs, "
          f"layout audit-atom)")
    for p in rep.pairs:
        k = p["K"]
        perm = ("" if k is None else "K identity" if k == sorted(k) and k == list(range(k[0], k[0] + len(k)))
                else "K: spec -> yours " + " ".join(f"{i}->{v}" for i, v in enumerate(k)))
        line = f"  A tile {p['a_tile']} x B tile {p['b_tile']}: {p['status'].upper()}"
        print(line + (f" ({perm})" if p["status"] == "proved" and perm else
                      f" {p['detail']} witness: {json.dumps(p['witness'])}" if p["status"] != "proved" else ""))
    for u in rep.unpaired:
        print(f"  {u['operand'].upper()} tile {u['tile']}: REFUTED no tile of the other operand holds the same k "
              f"{u['k']}: the instruction would multiply mismatched k")
    if rep.status == "proved":
        ax = sorted(set(rep.a.relabelled_axes) | set(rep.b.relabelled_axes))
        print("verdict: PROVED" + (f": equal to the spec up to a relabelling of {' and '.join(ax)} shared by A and B "
                                   f"(proved by audit-atom)" if ax else ": both operands are the spec's"))
    else:
        print(f"verdict: {rep.status.upper()}")
    return {"proved": 0, "refuted": 1, "unknown": 3}[rep.status]


def _print_whole(rep, args, what: str, hint: str = "") -> int:
    if args.json:
        d = rep.to_dict()
        if hint:
            d["hint"] = hint
        print(json.dumps(d, indent=1))
    else:
        print(f"audit {rep.form} operand {rep.operand} against spec entry {rep.spec_entry}: "
              f"{what} of a {rep.shape[0]}x{rep.shape[1]} tensor, {len(rep.tiles)} instruction tiles")
        print(f"  tile = {rep.how}")
        for t in rep.tiles:
            sel = " ".join(f"{k}={v:#x}" for k, v in t.select.items() if v) or "first"
            head = f"  tile {t.index:>3} at ({t.origin[0]},{t.origin[1]}) [{sel}]"
            if t.status == "proved":
                print(f"{head}: PROVED" + (f" (same layout as tile {t.same_as})" if t.same_as is not None else ""))
            elif t.status == "refuted":
                print(f"{head}: REFUTED {t.detail} witness: {json.dumps(t.witness)}")
            elif t.status == "relabelled":
                perm = "; ".join(f"{ax}: spec -> yours " + " ".join(f"{i}->{v}" for i, v in enumerate(pi))
                                 for ax, pi in t.witness["relabelled"].items())
                print(f"{head}: RELABELLED {t.detail}" + (f" (same layout as tile {t.same_as})" if t.same_as is not None
                                                           else f"; {perm}"))
            else:
                print(f"{head}: UNKNOWN {t.detail}")
        c = rep.coverage
        if c["complete"]:
            print(f"coverage: every cell of the tensor is held ({'/'.join(map(str, c['copies']))} cop"
                  f"{'y' if c['copies'] == [1] else 'ies'} each)")
        else:
            print(f"coverage: INCOMPLETE, {c['held']} of {c['cells']} cells held; first missing {c['first_missing']}, "
                  f"first outside {c['first_outside']}")
        n = sum(t.status == "proved" for t in rep.tiles)
        nr = sum(t.status == "relabelled" for t in rep.tiles)
        print(f"verdict: {n} of {len(rep.tiles)} tiles PROVED" + (f", {nr} RELABELLED" if nr else "")
              + ("" if rep.status == "proved" else f"; {rep.status.upper()}"))
        if hint:
            print(f"note: {hint}")
    return {"proved": 0, "refuted": 1, "unknown": 3, "relabelled": 3}[rep.status]


ATOM_KINDS = ("cute", "table", "formula", "python", "triton", "spec")


def operand_layout(form, op: str, text: str, args=None):
    """A layout of (form, op) from ``KIND:LAYOUT`` (the audit-atom spelling), or None for 'spec'."""
    from ..transform import cute, triton

    kind, _, body = text.partition(":")
    kind = kind.strip().lower()
    if kind not in ATOM_KINDS:
        raise InputError(f"--{op}: expected KIND:LAYOUT with KIND one of {', '.join(ATOM_KINDS)}, got {text[:40]!r}")
    if kind == "spec":
        return None
    if not body.strip():
        raise InputError(f"--{op}: {kind}: needs a layout after the colon")
    ref = L.fragment(form, op)
    if kind == "cute":
        return cute.from_cute(body, form, op, name=f"cute {op}")
    if kind == "table":
        return L.load_table(body, like=ref)
    if kind == "python":
        fn = _load_python(body)
        try:
            return L.Layout.from_function(fn, like=ref, name=body)
        except (Exception, SystemExit) as e:      # user code: contained, one line (exit 2)
            raise InputError(f"--{op}: the function failed: {type(e).__name__}: {e}") from None
    if kind == "formula":
        kv = {}
        for item in body.replace(";", " ").split():
            k, eq, v = item.partition("=")
            if not eq:
                raise InputError(f"--{op}: formula: expected NAME=EXPR, got {item!r}")
            kv[k.strip()] = v.strip()
        if "row" not in kv or "col" not in kv:
            raise InputError(f"--{op}: formula needs row=EXPR and col=EXPR")
        row, col = kv.pop("row"), kv.pop("col")
        let = dict(L.spec().let)
        let.update(kv)
        return L.Layout.from_formulas(row, col, let=let, like=ref, name=f"formula {op}")
    wl = triton.parse_whole(_text_or_file(body, f"--{op} triton"))
    found, _, _, _ = triton.tiles(wl, form, op)
    return found[0][2]


def cmd_audit_atom(args, opcode: str) -> int:
    from ..transform import atom

    form = cat.parse(opcode)
    given, lays = {}, {}
    for op in ("a", "b", "c"):
        text = getattr(args, f"atom_{op}", None) or "spec"
        src = "d" if op == "c" and "c" not in form.operands else op
        given[op] = text if len(text) < 200 else text[:197] + "..."
        lays[op] = operand_layout(form, src, text, args)
    if all(v is None for v in lays.values()):
        raise InputError("layout audit-atom: give at least one of --a, --b, --c")
    rep = atom.audit_atom(form, lays, given=given)
    if args.json:
        print(json.dumps(rep.to_dict(), indent=1))
    else:
        print(f"audit-atom {form.opcode}: do A, B and C/D together compute D = A B + C?")
        for op in ("a", "b", "c"):
            print(f"  {op}: {given[op]}")
        for r in rep.results:
            what = f"{r.obligation.family:15s} {r.obligation.subject.split(' ', 1)[-1]}"
            if r.status == "proved":
                print(f"  PROVED   {what} ({r.solver})")
            elif r.status == "refuted":
                w = r.witness
                print(f"  REFUTED  {what}: {w.get('why', json.dumps(w))}")
            else:
                print(f"  UNKNOWN  {what}: {r.reason}")
        if rep.status == "proved":
            for ax, pi in rep.permutations.items():
                ident = pi == list(range(len(pi)))
                print(f"  {ax}: " + ("identity" if ident else "spec -> yours " + " ".join(f"{i}->{v}" for i, v in enumerate(pi))))
            print("verdict: equivalent: the layouts compute the instruction's product"
                  + ("" if all(pi == list(range(len(pi))) for pi in rep.permutations.values())
                     else " (up to the shared relabellings above)"))
        else:
            print(f"verdict: {rep.status.upper()}")
    return {"proved": 0, "refuted": 1, "unknown": 3}[rep.status]


def cmd_audit_metadata(args, form) -> int:
    """CuTe's ELayout against the spec's sparse metadata layout."""
    from ..transform import cute

    if not args.cute:
        raise InputError("--operand e (sparse metadata) is audited from a CuTe ELayout: give --cute")
    sel = 0 if args.selector is None else args.selector
    rep = cute.audit_metadata(args.cute, form, sel)
    if args.json:
        print(json.dumps(rep, indent=1))
    else:
        print(f"audit {form.opcode} metadata e (selector {sel}) against the spec's metadata layout: "
              f"{rep['cells']} (row, chunk) cells")
        if rep["status"] == "proved":
            print(f"  PROVED   every (row, chunk) is supplied by the spec's lane and nibble ({rep['solver']})")
        elif rep["status"] == "refuted":
            print(f"  REFUTED  witness: {json.dumps(rep['witness'])}")
        else:
            print(f"  UNKNOWN  {rep['detail']}")
        print(f"verdict: {rep['status'].upper()}")
    return {"proved": 0, "refuted": 1, "unknown": 3}[rep["status"]]


def cmd_audit_scale_all(args, form, op: str) -> int:
    """A CuTe scale-factor layout holds for every legal (byte-id, thread-id): audit each."""
    from ..transform import cute
    from ..prove import audit_layout

    out, worst = [], "proved"
    for prm in L.param_space(form, op):
        cand = cute.from_cute(args.cute, form, op, name="cute", **prm)
        rep = audit_layout(cand, form, op, compare_bits=not args.no_bits, **prm)
        out.append((prm, rep))
        if rep.status == "refuted" or (rep.status == "unknown" and worst == "proved"):
            worst = rep.status
    if args.json:
        print(json.dumps({"form": form.opcode, "operand": op, "status": worst,
                          "selectors": [dict(rep.to_dict(), params=prm) for prm, rep in out]}, indent=1))
    else:
        print(f"audit {form.opcode} operand {op} against spec entry {out[0][1].spec_layout.name}, "
              f"every legal selector ({len(out)})")
        for prm, rep in out:
            sel = ", ".join(f"{k}={v}" for k, v in prm.items())
            bad = next((r for r in rep.results if r.status != "proved"), None)
            print(f"  {sel}: " + ("PROVED" if bad is None else f"{bad.status.upper()} {bad.obligation.family} "
                                  f"{json.dumps(getattr(bad, 'witness', None) or getattr(bad, 'reason', ''))}"))
        print(f"verdict: {worst.upper()}" if worst != "proved" else f"verdict: PROVED for all {len(out)} selectors")
    return {"proved": 0, "refuted": 1, "unknown": 3}[worst]


def cmd_audit_cute_tiled(args, opcode: str) -> int:
    from ..transform import cute

    if not (args.cute and args.operand):
        raise InputError("--cute-tile needs --cute TV and --operand")
    try:
        tile = tuple(int(x) for x in args.cute_tile.lower().split("x"))
    except ValueError:
        raise InputError(f"--cute-tile: expected RxC, got {args.cute_tile!r}") from None
    if len(tile) != 2:
        raise InputError(f"--cute-tile: expected RxC, got {args.cute_tile!r}")
    rep = cute.audit_tiled(args.cute, cat.parse(opcode), args.operand, tile, compare_bits=not args.no_bits,
                           **_params(args))
    hint = _relabel_hint(rep.form, rep.operand, rep.relabelled_axes, "cute") if rep.status == "relabelled" else ""
    return _print_whole(rep, args, "CuTe TiledMMA layout", hint=hint)
