"""``ptx-formal prove``: prove the spec's obligations (layouts, and those other modules register).

    ptx-formal prove --all [-j N] [--json] [--smt2 DIR] [--report FILE | --no-report] [--check-report]
    ptx-formal prove OPCODE [--json] [--smt2 DIR]
    ptx-formal prove --recheck DIR

Exit codes: 0 all proved, 1 any refuted, 3 any unknown (none refuted), 2 bad input.
``--all`` rewrites proofs/REPORT.md (no timings in it); ``--check-report`` instead
compares the regenerated report with the file and exits 1 if it is stale.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from .. import catalog as cat
from .. import prove as P
from ..specdata import proofs_dir
from . import InputError, timeout_seconds


def register(sub) -> None:
    p = sub.add_parser("prove", help="prove the layout obligations of one form or of the whole catalog",
                       description="Prove every obligation (bijective fragments, register counts, packing, C=D, "
                                   "'same as' statements, and the obligations other modules register) with Z3 and "
                                   "by exhaustive enumeration. Exit 0 all proved, 1 refuted, 3 unknown.")
    p.add_argument("opcode", nargs="?", help="one form (omit with --all)")
    p.add_argument("--all", action="store_true", help="the whole catalog; rewrites proofs/REPORT.md")
    p.add_argument("--json", action="store_true", help="JSON results (with timings) on stdout")
    p.add_argument("--smt2", metavar="DIR", help="write an SMT-LIB2 certificate per proof into DIR")
    p.add_argument("--report", metavar="FILE", help="where --all writes the report (default proofs/REPORT.md)")
    p.add_argument("--no-report", action="store_true", help="do not write the report")
    p.add_argument("--check-report", action="store_true", help="compare the regenerated report with the file; 1 if stale")
    p.add_argument("--timeout", type=float, default=20.0, metavar="S", help="per Z3 query (default 20 s)")
    p.add_argument("--engine", choices=["both", "z3", "enum"], default="both",
                   help="both (default: every verdict cross-checked), or one engine alone")
    p.add_argument("--family", metavar="PREFIX", help="only obligations whose family starts with PREFIX")
    p.add_argument("--recheck", metavar="DIR", help="re-check every *.smt2 certificate under DIR (all unsat -> 0)")
    p.add_argument("--jobs", "-j", type=int, default=None, metavar="N",
                   help="worker processes (default: every core this process may use); the report is the same for any N")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_prove)


def default_report_path() -> Path | None:
    d = proofs_dir()
    return d / "REPORT.md" if d is not None else None


def _report_target(args) -> Path | None:
    """Check the report options before the work starts: where --all writes (or reads) the report."""
    if (args.check_report or args.report or args.no_report) and not args.all:
        raise InputError("--check-report, --report and --no-report apply to --all only")
    if args.family and (args.check_report or args.report):
        raise InputError("--family proves a part of the catalog: the report (--report, --check-report) needs all of it")
    if not args.all or args.family or args.no_report:
        return None
    path = Path(args.report) if args.report else default_report_path()
    if args.check_report:
        if path is None or not path.is_file():
            raise InputError(f"--check-report: no report file {'to check (give --report FILE)' if path is None else str(path)}")
        return path
    if path is not None:
        from . import check_writable
        check_writable(path, "--report")
    return path


def _progress(quiet: bool):
    if quiet or not sys.stderr.isatty():
        return None
    t0 = time.perf_counter()

    def show(done: int, total: int, ob) -> None:
        if done % 25 and done != total:
            return
        w = 30
        k = int(w * done / max(total, 1))
        sys.stderr.write(f"\r[{'#' * k}{'.' * (w - k)}] {done}/{total} obligations  {time.perf_counter() - t0:5.1f}s ")
        if done == total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    return show


def cmd_prove(args) -> int:
    if args.recheck:
        return _recheck(args.recheck, args.timeout)
    if args.all == bool(args.opcode):
        raise InputError("ptx-formal prove: give an OPCODE or --all (not both)")
    timeout_seconds(args.timeout)
    if args.jobs is not None and args.jobs < 1:
        raise InputError("--jobs must be at least 1")
    jobs = args.jobs or P.default_jobs()
    report = _report_target(args)
    if args.smt2:
        from . import check_writable
        check_writable(args.smt2, "--smt2", directory=True)
    modules = P.load_optional_modules()
    forms = list(cat.documented_forms()) if args.all else [cat.parse(args.opcode)]
    obs = P.collect(forms, family=args.family)
    if not obs and args.family:
        raise InputError(f"--family {args.family!r} selects no obligations"
                         f"{'' if args.all else ' of ' + forms[0].opcode}; known families: "
                         + ", ".join(sorted({o.family for o in P.collect(forms)})))
    if not obs:
        print(f"no obligations for {args.opcode or 'the catalog'}"
              + (" (wmma fragments are unspecified by PTX; see formal.wmma)" if forms and forms[0].is_wmma else ""),
              file=sys.stderr)
        return 0
    opts = P.Options(timeout_ms=int(args.timeout * 1000), engine=args.engine)
    t0 = time.perf_counter()
    results = P.run(obs, opts, progress=_progress(args.quiet or args.json), jobs=jobs)
    wall = time.perf_counter() - t0
    code = P.exit_code(results)
    if args.smt2:
        n = P.write_certificates(results, args.smt2)
        print(f"wrote {n} SMT-LIB2 certificates to {args.smt2}", file=sys.stderr)
    if args.all and not args.family:
        text = P.report_markdown(results, forms, modules)
        path = report
        if args.check_report:
            if path is None or not path.exists():
                print("ptx-formal: no report file to check", file=sys.stderr)
                return 1
            if path.read_text() != text:
                print(f"{path} is stale: run `ptx-formal prove --all`", file=sys.stderr)
                return 1
            print(f"{path} is current", file=sys.stderr)
        elif not args.no_report and path is not None:
            path.write_text(text)
            print(f"wrote {path}", file=sys.stderr)
        elif not args.no_report:
            print("no report written (an installed copy has no proofs/ directory: give --report FILE)",
                  file=sys.stderr)
    if args.json:
        print(json.dumps({"summary": P.summarize(results), "seconds": round(wall, 3), "modules": modules,
                          "exit": code, "results": [r.to_dict() for r in results]}, indent=1))
        return code
    if not args.all:
        for r in results:
            mark = {"proved": "PROVED ", "refuted": "REFUTED", "unknown": "UNKNOWN"}[r.status]
            extra = (f"witness {json.dumps(r.witness)}" if r.status == "refuted"
                     else r.reason if r.status == "unknown" else r.solver)
            print(f"{mark} {r.obligation.family:18s} {r.obligation.subject}  [{extra}]")
        print()
    print(P.summary_table(results))
    if code:
        for r in results:
            if r.status != "proved":
                info = json.dumps(r.witness) if r.status == "refuted" else r.reason
                print(f"{r.status.upper()}: {r.obligation.family} {r.obligation.subject}: {info}", file=sys.stderr)
    print(f"{len(results)} obligations in {wall:.1f} s: "
          + {0: "all proved", 1: "REFUTED", 3: "some UNKNOWN"}[code], file=sys.stderr)
    return code


def _recheck(directory: str, timeout: float) -> int:
    timeout_seconds(timeout)
    if not Path(directory).is_dir():
        raise InputError(f"--recheck {directory}: not a directory")
    files = sorted(Path(directory).rglob("*.smt2"))
    if not files:
        raise InputError(f"no *.smt2 files under {directory}")
    bad = 0
    for f in files:
        v = P.recheck(f.read_text(), int(timeout * 1000))
        if v != "unsat":
            bad += 1
            print(f"{v.upper():8s} {f}", file=sys.stderr)
    print(f"{len(files) - bad}/{len(files)} certificates re-check as unsat")
    return 0 if bad == 0 else 1
