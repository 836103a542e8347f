"""``ptx-formal kernel ...``: PTX modules as compilers emit them.

    ptx-formal kernel lint FILE.ptx [--json]                          matrix instructions legal on .target/.version
    ptx-formal kernel check FILE.ptx --spec SPEC.toml [--ctas ...]    data-path proof (proved 0 / refuted 1)
    ptx-formal kernel run FILE.ptx --spec SPEC.toml --inputs in.npz --out out.npz [--arch sm_90]

Exit codes: 0 legal / proved / ran; 1 illegal / refuted / undefined behaviour seen in the run
(witness printed); 2 bad input (one line); 3 unsupported construct or unknown verdict; 4
internal error (traceback with --debug).
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path


def _err(msg: str, code: int) -> int:
    print(f"ptx-formal kernel: {msg}", file=sys.stderr)
    return code


def _guard(f):
    def wrapped(args):
        from ..kernel import PTXSyntaxError, SpecError, Unsupported
        try:
            return f(args)
        except PTXSyntaxError as e:
            return _err(f"error: {e}", 2)
        except SpecError as e:
            return _err(f"error: {e}", 2)
        except Unsupported as e:
            return _err(f"unsupported: line {e.line}: {e.instruction}" + (f" ({e.why})" if e.why else ""), 3)
        except BrokenPipeError:
            return 0
        except (OSError, ValueError) as e:
            if getattr(args, "debug", False):
                traceback.print_exc()
            return _err(f"error: {e}", 2)
        except Exception as e:  # noqa: BLE001 - one line, exit 4 (traceback with --debug)
            if getattr(args, "debug", False):
                traceback.print_exc()
            return _err(f"internal error: {type(e).__name__}: {e}", 4)
    return wrapped


def _module(path: str):
    from ..kernel import parse_module
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not a text file") from None
    return parse_module(text, path=str(p))


def _ctas(s: str | None):
    if s is None:
        return None
    out = []
    for part in s.split(";") if ";" in s else s.split(" "):
        part = part.strip()
        if not part:
            continue
        nums = [int(x) for x in part.split(",") if x.strip() != ""]
        out.append(tuple(nums) if len(nums) > 1 else nums[0])
    if not out:
        raise ValueError(f"--ctas {s!r}: name CTAs as 'x,y,z;x,y,z' or linear indices '0 5 7'")
    return out


def cmd_lint(args) -> int:
    from ..kernel import lint
    mod = _module(args.file)
    fs = lint(mod)
    bad = [f for f in fs if not f.legal]
    if args.json:
        print(json.dumps({"file": args.file, "target": mod.target, "version": mod.version,
                          "legal": not bad, "findings": [f.to_json() for f in fs]}, indent=2))
    else:
        print(f"{args.file}: .target {mod.target}, .version {mod.version}: {len(fs)} matrix instructions, "
              f"{len(bad)} illegal")
        for f in fs:
            print(f"  line {f.line}: {'legal  ' if f.legal else 'ILLEGAL'} {f.instruction}")
            for r in f.reasons:
                print(f"      {r}")
            for w in f.warnings:
                print(f"      warning: {w}")
    return 1 if bad else 0


def cmd_check(args) -> int:
    from ..kernel import check, load_spec
    mod = _module(args.file)
    spec = load_spec(args.spec)
    res = check(mod, spec, ctas=_ctas(args.ctas), lanes=not args.no_lanes)
    if args.json:
        print(json.dumps(res.to_json(), indent=2))
    else:
        print(res.summary)
        for w in res.witnesses:
            print(w)
    return {"proved": 0, "refuted": 1}.get(res.verdict, 3)


def cmd_run(args) -> int:
    import numpy as np

    from ..kernel import load_spec, run
    mod = _module(args.file)
    spec = load_spec(args.spec)
    inputs = {}
    if args.inputs:
        with np.load(args.inputs) as z:
            inputs = {k: z[k] for k in z.files}
        unknown = sorted(set(inputs) - {b.name for b in spec.buffers})
        if unknown:
            raise ValueError(f"{args.inputs}: arrays {unknown} name no buffer of the spec")
    out = run(mod, spec, inputs, arch=args.arch)
    wit = out.witnesses
    if args.out:
        np.savez(args.out, **out.buffers)
    if args.json:
        print(json.dumps({"buffers": {k: list(v.shape) for k, v in out.items()}, "steps": out.steps,
                          "witnesses": [w.to_json() for w in wit]}, indent=2))
    else:
        print(f"ran {spec.grid} x {spec.block}: {out.steps} instruction steps"
              + (f"; wrote {args.out}" if args.out else ""))
        for w in wit:
            print(w)
    return 1 if wit else 0


def register(sub) -> None:
    p = sub.add_parser("kernel", help="PTX modules as compilers emit them: lint, data-path check, bit-exact run",
                       description="Read a whole PTX module (Triton, nvcc/CuTe, wmma) and lint its matrix "
                                   "instructions, prove its data path against a contract, or run it bit-exactly.")
    ks = p.add_subparsers(dest="kernel_command", metavar="SUBCOMMAND")

    def common(q):
        q.add_argument("file", help="a PTX module (.ptx)")
        q.add_argument("--json", action="store_true", help="machine-readable output")
        q.add_argument("--debug", action="store_true", help="tracebacks for internal errors")

    q = ks.add_parser("lint", help="matrix instructions legal on the module's .target at its .version (exit 1 if not)")
    common(q)
    q.set_defaults(func=_guard(cmd_lint))
    q = ks.add_parser("check", help="prove that every mma gets the right elements and every output its products")
    common(q)
    q.add_argument("--spec", required=True, help="kernel spec TOML (launch, buffers, contract)")
    q.add_argument("--ctas", default=None, help="check only these CTAs: 'x,y,z;x,y,z' or linear indices '0 3'")
    q.add_argument("--no-lanes", action="store_true", help="skip the Z3 proofs over a symbolic lane")
    q.set_defaults(func=_guard(cmd_check))
    q = ks.add_parser("run", help="run the launch bit-exactly; every buffer after the run to --out")
    common(q)
    q.add_argument("--spec", required=True, help="kernel spec TOML")
    q.add_argument("--inputs", default=None, help="npz: one array of raw encodings per buffer name")
    q.add_argument("--out", default=None, help="npz to write every buffer to")
    q.add_argument("--arch", default="sm_90", help="numerics of the mma (sm_70 ... sm_120, exact); default sm_90")
    q.set_defaults(func=_guard(cmd_run))
