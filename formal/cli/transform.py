"""``ptx-formal transform``: prove a recipe of data movements, run the recipe library,
move layouts in and out of Triton / CuTe.

    ptx-formal transform FILE [--json] [--timeout S] [--smt2 OUT]
    ptx-formal transform --library [--json]
    ptx-formal transform --export {triton,cute,cute-nk} OPCODE OPERAND
    ptx-formal transform --check-triton LAYOUT OPCODE OPERAND

Exit codes: 0 proved, 1 refuted, 2 bad input, 3 unknown (solver timeout; never reported
as proved).  A recipe with an ``expect`` line (and ``--library``): 0 when every expectation
is met, 1 when one is not.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from . import InputError


def register(sub) -> None:
    p = sub.add_parser("transform", help="prove that data movements deliver a layout (recipes, Triton/CuTe export)",
                       description="Prove a recipe (source layout, movement steps, target layout): Proved, or Refuted "
                                   "with the first (lane, register, element) that ends in the wrong place and the path "
                                   "it took, or Unknown.  Recipe format: recipes/README.md.")
    p.add_argument("file", nargs="?", help="recipe file (.recipe text or .json); recipes/NAME.recipe names a "
                                           "library recipe from any directory")
    p.add_argument("--json", action="store_true", help="JSON output")
    p.add_argument("--timeout", type=float, default=60.0, help="solver timeout per query, seconds (default 60)")
    p.add_argument("--smt2", metavar="OUT", help="write the negated obligation (SMT-LIB 2) of a proved recipe to OUT")
    p.add_argument("--library", action="store_true", help="prove every recipe in recipes/ and compare with its `expect`")
    p.add_argument("--export", choices=["triton", "cute", "cute-nk"],
                   help="print the spec layout of OPCODE OPERAND as a Triton #ttg.linear attribute or a CuTe TV "
                        "layout (cute-nk: CuTe's N x K orientation for B)")
    p.add_argument("--check-triton", metavar="LAYOUT",
                   help="prove a Triton layout (file or #ttg.linear<...> text) equal to the spec layout of OPCODE OPERAND")
    p.add_argument("args", nargs="*", help="OPCODE OPERAND (with --export / --check-triton)")
    p.set_defaults(func=cmd_transform)


def _fail(msg: str) -> int:
    from . import one_line
    print(f"ptx-formal: error: {one_line(msg)}", file=sys.stderr)
    return 2


def cmd_transform(args) -> int:
    from ..algebra import AlgebraError
    from ..expr import FormulaError
    from ..transform import TransformError

    try:
        return _run(args)
    except (TransformError, AlgebraError, FormulaError) as e:
        return _fail(str(e).splitlines()[0])


def _exit(status: str) -> int:
    return {"proved": 0, "refuted": 1}.get(status, 3)


def _run(args) -> int:
    from .. import transform as T

    from . import check_writable, timeout_seconds

    timeout_ms = timeout_seconds(args.timeout)
    if args.smt2:
        check_writable(args.smt2, "--smt2")
    if args.export or args.check_triton:
        return _layout_io(args)
    if args.library:
        if args.file:
            raise InputError("give either FILE or --library")
        return _library(args, timeout_ms)
    if not args.file:
        raise InputError("give a recipe FILE, --library, --export or --check-triton (see --help)")
    if args.args:
        raise InputError(f"unexpected arguments: {' '.join(args.args)}")
    from ..specdata import data_file

    recipe = T.load(data_file(args.file))
    res = recipe.prove(timeout_ms)
    ok, why = recipe.expectation_met(res)
    if args.smt2 and res.smt2:
        Path(args.smt2).write_text(res.smt2)
    if args.json:
        d = {"recipe": recipe.name, "file": args.file, **res.to_dict()}
        if recipe.expect:
            d["expectation"] = {"expected": recipe.expect, "met": ok, "detail": why}
        print(json.dumps(d, indent=2))
    else:
        print(f"recipe {recipe.name} ({args.file})")
        print(res.text())
        if recipe.expect:
            print(f"  expectation ({' '.join(f'{k}={v}' if k != 'status' else v for k, v in recipe.expect.items())}): "
                  f"{'met' if ok else 'NOT met: ' + why}")
    if recipe.expect and res.status != "unknown":   # as --library: 0 when `expect` is met, 1 when not
        return 0 if ok else 1
    return _exit(res.status)


def _library(args, timeout_ms: int) -> int:
    from .. import transform as T

    rows = []
    all_ok = True
    recipes = T.library()
    if not recipes:       # an installed copy without its data must not look like a passed library
        raise InputError(f"no recipes found in {T.library_dir()}")
    for r in recipes:
        res = r.prove(timeout_ms)
        ok, why = r.expectation_met(res)
        all_ok &= ok
        rows.append((r, res, ok, why))
    if args.json:
        print(json.dumps([{"recipe": r.name, "about": r.about, "status": res.status, "expected": r.expect,
                           "met": ok, "witness": res.witness, "seconds": round(res.seconds, 3)}
                          for r, res, ok, why in rows], indent=1))
    else:
        for r, res, ok, why in rows:
            w = ""
            if res.witness and res.status == "refuted":
                w = "  witness " + ", ".join(f"{k}={v}" for k, v in res.witness.items())
            print(f"{'ok ' if ok else 'BAD'} {res.status:8s} {r.name:44s} {res.seconds:6.2f}s{w}")
        n_ok = sum(1 for *_, ok, _ in rows if ok)
        print(f"# {n_ok}/{len(rows)} recipes as expected", file=sys.stderr)
    return 0 if all_ok else 1


def _layout_io(args) -> int:
    from ..transform import triton
    from ..layout import LayoutError, fragment
    from ..transform import cute as cute_tv

    pos = ([args.file] if args.file else []) + list(args.args)
    if len(pos) != 2:
        raise InputError("--export / --check-triton need OPCODE OPERAND")
    opcode, operand = pos
    try:
        lay = fragment(opcode, operand)
    except LayoutError as e:
        raise InputError(str(e)) from None
    if args.export == "triton":
        out = triton.export(lay)
        print(json.dumps(out) if args.json else triton.format_attribute(out))
        return 0
    if args.export in ("cute", "cute-nk"):
        s = cute_tv.export(lay)         # CuTe's orientation (B: N x K), which `layout audit --cute` imports
        print(json.dumps({"layout": s, "orientation": "N x K" if lay.operand == "b" else "PTX (rows x cols)"})
              if args.json else s)
        return 0
    from . import read_text

    src = args.check_triton
    is_file = len(src) < 4096 and "<" not in src and Path(src).is_file()     # else the attribute text itself
    text = read_text(src, "--check-triton") if is_file else src
    p = triton.check(text, lay)
    print(json.dumps(p.to_dict(), indent=2) if args.json else str(p))
    return _exit(p.status)
