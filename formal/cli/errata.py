"""``ptx-formal errata``: the project's errata list (silicon / ptxas / text)."""

from __future__ import annotations

import json
from pathlib import Path

from ..catalog import BadArgument


def cmd_errata(args) -> int:
    from ..errata import READING, SEVERITIES, SOURCES, all_errata, markdown

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
        print(f"# {len(es)} errata")
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
    p.set_defaults(func=cmd_errata)
