"""``ptx-formal errata``: the project's errata list (silicon / ptxas / text)."""

from __future__ import annotations

import json
from pathlib import Path

from ..catalog import BadArgument


def cmd_errata(args) -> int:
    from ..errata import READING, SEVERITIES, SOURCES, all_errata, headline, markdown

    es = all_errata()
    if args.severity:
        known = list(SEVERITIES) + [READING]
        if args.severity not in known:
            raise BadArgument(f"unknown severity {args.severity!r}; known: {', '.join(known)}")
        es = [e for e in es if e.severity == args.severity]
    if args.source:
        labels = [l for l, _ in SOURCES]
        if args.source not in labels:
            raise BadArgument(f"unknown source {args.source!r}; known: {', '.join(labels)}")
        es = [e for e in es if e.source == args.source]
    if args.id:
        es = [e for e in es if e.id == args.id]
        if not es:
            raise BadArgument(f"no erratum with id {args.id!r}")
    if args.report:
        return _report(args, es)
    if args.out:
        raise BadArgument("--out goes with --report all (the directory the reports are written to)")
    if args.write:
        from . import check_writable

        path = check_writable(args.write, "--write")
        path.write_text(markdown(all_errata()))
        print(f"wrote {path}")
        return 0
    if args.json:
        print(json.dumps([e.to_dict() for e in es], indent=1))
    elif args.id:
        print(markdown(es))
    else:
        for e in es:
            print(f"{e.id:34s} {e.source:12s} {e.severity:19s} {e.summary[:100]}")
        filtered = args.severity or args.source
        print(f"# {len(es)} entries" + ("" if filtered else f" -- {headline()}"))
    return 0


def _report(args, es) -> int:
    from ..errata_report import is_strong, report, strong_errata, write_all

    if args.report == "all":
        if not args.out:
            raise BadArgument("--report all needs --out DIR (one file per erratum)")
        out = Path(args.out)
        if out.exists() and not out.is_dir():
            raise BadArgument(f"--out {args.out}: exists and is not a directory")
        if not out.parent.is_dir():
            raise BadArgument(f"--out {args.out}: the directory {out.parent} does not exist")
        paths = write_all(str(out))
        print(f"wrote {len(paths)} reports to {out}")
        return 0
    if args.out:
        raise BadArgument("--out goes with --report all; --report ID prints to stdout")
    hit = [e for e in es if e.id == args.report]
    if not hit:
        raise BadArgument(f"no erratum with id {args.report!r}")
    if not is_strong(hit[0]):
        strong = ", ".join(e.id for e in strong_errata()[:3])
        raise BadArgument(f"{args.report} has no reproducer NVIDIA's tools run (a reading, a peer's erratum or a "
                          f"documentation note); reports exist for the strong errata, e.g. {strong}")
    print(report(hit[0]), end="")
    return 0


def register(sub) -> None:
    p = sub.add_parser("errata", help="the errata list: where silicon, ptxas and the PTX text disagree",
                       description="Every erratum of the project (specs/errata*.toml, wmma memory readings, "
                                   "silicon findings) with the evidence; --write FILE regenerates proofs/ERRATA.md.")
    p.add_argument("--source", default=None, help="ptxas/text, layout text, wmma memory or silicon")
    p.add_argument("--severity", default=None,
                   help="silent-wrong-result, trap, rejected-valid-code, documentation, or reading (the readings list)")
    p.add_argument("--id", default=None, help="show one erratum in full")
    p.add_argument("--json", action="store_true")
    p.add_argument("--write", default=None, metavar="FILE", help="write the markdown list (proofs/ERRATA.md)")
    p.add_argument("--report", default=None, metavar="ID|all",
                   help="an upstream-ready report of a strong erratum (the text quoted and versioned, what ptxas / the "
                        "silicon does, a complete .ptx reproducer with the ptxas verdict, inputs and observed outputs, "
                        "severity, who is affected); 'all' with --out DIR writes one file per strong erratum")
    p.add_argument("--out", default=None, metavar="DIR", help="with --report all: the directory for the reports")
    p.set_defaults(func=cmd_errata)
