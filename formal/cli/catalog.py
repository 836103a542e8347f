"""``ptx-formal check`` and ``ptx-formal list``: the instruction catalog."""

from __future__ import annotations

import csv
import io
import json
import sys
from collections import Counter

from .. import catalog as cat


def _legality_text(res: cat.Legality) -> str:
    f = res.form
    lines = [res.opcode]
    if f and f.opcode != res.opcode:
        lines.append(f"  canonical: {f.opcode}")
    verdict = "LEGAL" if res.ok else "ILLEGAL"
    lines.append(f"  {verdict} on {res.target} with PTX ISA {res.ptx}" + (f" (sel={res.sel})" if res.sel is not None else ""))
    for r in res.reasons:
        lines.append(f"  - {r.message}  [PTX ISA {r.section}]")
    for n in res.notes:
        lines.append(f"  note: {n}")
    if res.ok and f is not None:
        lines.append("  registers: " + ", ".join(f"{k}: {o.count} x .{o.ptx_type}" for k, o in f.operands.items()))
        if f.family == "wgmma":
            for src in f.asources:
                g = f.with_asource(src)
                lines.append(f"  operands (A {'in registers' if src == 'reg' else 'from a descriptor'}): "
                             + ", ".join(cat.wgmma_operand_names(g)))
        if f.is_sparse:
            lines.append(f"  sparsity selectors: {', '.join(map(str, f.selectors or ()))}")
    return "\n".join(lines)


def _asource_label(f: cat.Form) -> str:
    return {"reg": "  [A in registers]", "desc": "  [A from a descriptor]"}.get(f.asource or "", "")


def _pair(s: str | None, what: str) -> tuple[int, int] | None:
    if s is None:
        return None
    try:
        a, b = (int(x, 0) for x in s.split(","))
        return a, b
    except ValueError:
        raise cat.BadArgument(f"{what} must be 'BYTE_ID,THREAD_ID' (e.g. 0,1), got {s!r}") from None


def cmd_check(args) -> int:
    form, imms = cat.parse_instruction(args.opcode)
    sel = args.sel if args.sel is not None else imms.get("sel")
    res = cat.legality(form, args.target, args.ptx, sel=sel,
                       scale_a=_pair(args.scale_a, "--scale-a") or imms.get("scale_a"),
                       scale_b=_pair(args.scale_b, "--scale-b") or imms.get("scale_b"),
                       imm={k: v for k, v in imms.items() if k not in ("sel", "scale_a", "scale_b")} or None)
    res.opcode = cat.split_instruction(args.opcode)[0]
    res.notes += cat.order_notes(res.opcode, form)
    print(json.dumps(res.to_dict(), indent=2) if args.json else _legality_text(res))
    return 0 if res.ok else 1


def cmd_list(args) -> int:
    if args.json and args.csv:
        raise cat.BadArgument("--json and --csv are exclusive")
    fs = cat.forms(args.target, args.ptx, args.family)
    if args.count:
        c = Counter(f.listing for f in fs)
        names = [x for k in cat.FAMILIES for x in ((k,) if k != "wgmma" else ("wgmma.mma_async", "wgmma.mma_async.sp"))]
        if args.json or args.csv:
            counts = {k: c[k] for k in names if c.get(k)}
            if args.json:
                print(json.dumps({**counts, "total": len(fs)}, indent=1))
            else:
                sys.stdout.write("family,forms\n" + "".join(f"{k},{n}\n" for k, n in counts.items())
                                 + f"total,{len(fs)}\n")
            return 0
        w = max(12, max((len(k) for k in names if c.get(k)), default=0))
        for k in names:
            if c.get(k):
                print(f"{k:{w}s} {c[k]}")
        print(f"{'total':{w}s} {len(fs)}")
        return 0
    if args.json:
        print(json.dumps([cat.describe(f) for f in fs], indent=1))
        return 0
    if args.csv:
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(["opcode", "family", "shape", "dtype", "atype", "btype", "ctype", "registers", "selectors", "asource"])
        for f in fs:
            regs = " ".join(f"{k}:{o.count}x{o.ptx_type}" for k, o in f.operands.items())
            sels = " ".join(map(str, f.selectors)) if f.is_sparse else ""
            w.writerow([f.opcode, f.family, f.shape or "", f.dtype or "", f.atype or "", f.btype or "", f.ctype or "",
                        regs, sels, f.asource or ""])
        sys.stdout.write(buf.getvalue())
        return 0
    for f in fs:
        regs = " ".join(f"{k}:{o.count}" for k, o in f.operands.items())
        extra = f"  sel={','.join(map(str, f.selectors))}" if f.is_sparse else ""
        print(f"{f.opcode:96s} {regs}{extra}{_asource_label(f)}")
    print(f"# {len(fs)} forms", file=sys.stderr)
    return 0


def register(sub) -> None:
    p = sub.add_parser("check", help="is an instruction legal on a target? (exit 0 legal, 1 illegal, 2 malformed)",
                       description="Decide whether OPCODE is legal on --target with PTX ISA --ptx, with every reason.")
    p.add_argument("opcode", help="full opcode, e.g. mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                                  "(a whole instruction with operands is checked as ptxas checks it: operand "
                                  "count, register-vector sizes, immediates as constant expressions)")
    p.add_argument("--target", "-t", default="sm_90", help="target, e.g. sm_80, sm_90a, sm_120a, sm_120f (default sm_90)")
    p.add_argument("--ptx", default="9.0", help="PTX ISA version (default 9.0)")
    p.add_argument("--sel", type=lambda s: int(s, 0), default=None,
                   help="sparsity selector immediate (mma.sp f, wgmma.mma_async.sp sp-sel)")
    p.add_argument("--scale-a", default=None, help="block-scale selector byte-id-a,thread-id-a (e.g. 0,1)")
    p.add_argument("--scale-b", default=None, help="block-scale selector byte-id-b,thread-id-b")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("list", help="list documented forms (legal on --target/--ptx when given)")
    p.add_argument("--target", "-t", default=None)
    p.add_argument("--ptx", default=None)
    p.add_argument("--family", "-f", default=None,
                   help="mma, mma.sp, mma.sp::ordered_metadata, wmma, wmma.load, wmma.store, wmma.mma, wgmma "
                        "(wgmma.mma_async, wgmma.mma_async.sp, wgmma.fence, wgmma.commit_group, wgmma.wait_group)")
    p.add_argument("--json", action="store_true", help="JSON array with axes, operands and selectors")
    p.add_argument("--csv", action="store_true", help="CSV table")
    p.add_argument("--count", action="store_true", help="only the number of forms per family")
    p.set_defaults(func=cmd_list)
