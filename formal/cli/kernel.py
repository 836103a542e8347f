"""``ptx-formal kernel ...``: PTX modules as compilers emit them.

    ptx-formal kernel lint FILE.ptx [--json]                          matrix instructions legal on .target/.version
    ptx-formal kernel check FILE.ptx --spec SPEC.toml [--ctas ...]    data-path proof (proved 0 / refuted 1)
    ptx-formal kernel run FILE.ptx --spec SPEC.toml --inputs in.npz --out out.npz [--arch sm_90]
    ptx-formal kernel check|run --triton FILE.py:KERNEL --target sm_80 --tensor A=f16[64,32] ...
        --call "KERNEL[(2, 2)](A, B, C, 64, ..., BLOCK_M=32)" [--contract "C = A @ B"]
                                                                      a Triton kernel, no spec to write

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
        from ..kernel import PTXSyntaxError, SpecError, StepLimit, Unsupported
        from . import InputError, _classify, one_line
        try:
            return f(args)
        except StepLimit as e:
            return _err(f"stopped: line {e.line}: {e.instruction} ({e.why})", 3)
        except _Unavailable as e:
            return _err(f"unsupported: {one_line(e)}", 3)
        except (PTXSyntaxError, SpecError, InputError) as e:
            return _err(f"error: {one_line(e)}", 2)
        except Unsupported as e:
            return _err(one_line(f"unsupported: line {e.line}: {e.instruction}" + (f" ({e.why})" if e.why else "")), 3)
        except BrokenPipeError:
            return 0
        except ValueError as e:
            if getattr(args, "debug", False):
                traceback.print_exc()
            return _err(f"error: {one_line(e)}", 2)
        except Exception as e:  # noqa: BLE001 - one line: bad input (2) or internal error (4, traceback with --debug)
            code, msg = _classify(e)
            if getattr(args, "debug", False):
                traceback.print_exc()
            if code == 4:
                return _err(f"internal error: {type(e).__name__}: {one_line(msg)}", 4)
            return _err(f"error: {one_line(msg)}", code)
    return wrapped


def _positive(s: str) -> int:
    import argparse
    try:
        v = int(s)
    except ValueError:
        v = 0
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {s!r}")
    return v


def _module(path: str):
    from ..kernel import parse_module
    from ..kernel.parse import MAX_MODULE_CHARS
    p = Path(path)
    try:
        size = p.stat().st_size
        if p.is_dir():
            raise ValueError(f"{path}: is a directory, not a PTX module")
        if size > MAX_MODULE_CHARS:
            raise ValueError(f"{path}: {size:,} bytes, more than the {MAX_MODULE_CHARS:,} a module may have")
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not a text file (PTX is text)") from None
    except OSError as e:
        raise ValueError(f"cannot read {path}: {e.strerror or e}") from None
    return parse_module(text, path=str(p))


def _inputs(path: str) -> dict:
    """An npz of named arrays; an empty, truncated or non-npz file is bad input naming the file."""
    import zipfile

    import numpy as np
    try:
        z = np.load(path, allow_pickle=False)
    except (zipfile.BadZipFile, EOFError) as e:
        raise ValueError(f"--inputs {path}: empty or truncated ({e or 'no data'})") from None
    except OSError as e:
        raise ValueError(f"--inputs {path}: {e.strerror or e}") from None
    except ValueError as e:
        raise ValueError(f"--inputs {path}: not an npz of arrays ({e})") from None
    if not isinstance(z, np.lib.npyio.NpzFile):
        raise ValueError(f"--inputs {path}: a single array (.npy); give an .npz with one array per buffer name "
                         "(numpy.savez(path, A=..., B=...))")
    try:
        with z:
            return {k: z[k] for k in z.files}
    except (zipfile.BadZipFile, EOFError, OSError) as e:
        raise ValueError(f"--inputs {path}: damaged archive ({e})") from None
    except ValueError as e:
        raise ValueError(f"--inputs {path}: {e}") from None


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


def _launch(args):
    """(module, spec, Triton launch or None): a PTX file with --spec, or a Triton kernel (--triton)."""
    from ..kernel import load_spec
    if args.triton is None:
        if args.file is None or args.spec is None:
            raise ValueError("give a PTX module and --spec SPEC.toml, or --triton FILE.py:KERNEL with --call")
        for opt in ("call", "tensor", "contract", "target", "num_warps", "num_stages", "ptx_version", "emit"):
            if getattr(args, opt) not in (None, []):
                raise ValueError(f"--{opt.replace('_', '-')} is for --triton kernels")
        return _module(args.file), load_spec(args.spec), None
    if args.file is not None or args.spec is not None:
        raise ValueError("--triton compiles the kernel and derives its spec: give no PTX file and no --spec")
    if args.call is None or args.target is None:
        raise ValueError("--triton needs --call \"KERNEL[grid](args...)\" and --target (sm_80, sm_89, sm_90)")
    from ..kernel.triton_front import TritonUnavailable, launch_from_text
    from . import check_writable
    if args.emit:
        for ext in (".ptx", ".toml"):
            check_writable(args.emit + ext, "--emit")
    try:
        la = launch_from_text(args.triton, args.call, args.tensor or [], target=args.target,
                              contracts=args.contract or [], ptx_version=args.ptx_version,
                              options={"num_warps": args.num_warps, "num_stages": args.num_stages})
    except TritonUnavailable as e:
        raise _Unavailable(str(e)) from None
    if args.emit:
        from ..kernel.spec import spec_toml
        for ext, text in ((".ptx", la.ptx), (".toml", spec_toml(la.spec_data))):
            try:
                Path(args.emit + ext).write_text(text)
            except OSError as e:
                raise ValueError(f"--emit {args.emit}{ext}: cannot write: {e.strerror or e}") from None
    return la.module, la.spec, la


class _Unavailable(Exception):
    """Triton missing, or a launch the Triton front end does not model: exit 3."""


def cmd_check(args) -> int:
    from ..kernel import check
    if args.triton is not None and not args.contract:
        raise ValueError("kernel check --triton needs what the kernel computes: --contract \"C = A @ B\"")
    mod, spec, la = _launch(args)
    res = check(mod, spec, ctas=_ctas(args.ctas), lanes=not args.no_lanes, max_steps=args.max_steps)
    if args.json:
        d = res.to_json()
        if la:
            d["triton"] = la.info
            for w, j in zip(res.witnesses, d["witnesses"]):
                j["triton_source"] = la.explain(w)
        print(json.dumps(d, indent=2))
    else:
        if la:
            print(la.describe())
        print(res.summary)
        for w in res.witnesses:
            print(w)
            for line in (la.explain(w) if la else []):
                print(line)
    return {"proved": 0, "refuted": 1}.get(res.verdict, 3)


def cmd_run(args) -> int:
    import io

    import numpy as np

    from ..kernel import check_inputs, run
    from . import check_writable
    if args.out:
        check_writable(args.out, "--out")          # before the run, not after it
    mod, spec, la = _launch(args)
    inputs = check_inputs(spec, _inputs(args.inputs)) if args.inputs else {}
    out = run(mod, spec, inputs, arch=args.arch, max_steps=args.max_steps)
    wit = out.witnesses
    if args.out:
        buf = io.BytesIO()
        np.savez(buf, **out.buffers)
        try:
            with open(args.out, "wb") as f:         # exactly the path given (np.savez would add .npz)
                f.write(buf.getvalue())
        except OSError as e:
            raise ValueError(f"--out {args.out}: cannot write: {e.strerror or e}") from None
    if args.json:
        print(json.dumps({"buffers": {k: list(v.shape) for k, v in out.items()}, "steps": out.steps,
                          "witnesses": [w.to_json() for w in wit]} | ({"triton": la.info} if la else {}), indent=2))
    else:
        if la:
            print(la.describe())
        print(f"ran {spec.grid} x {spec.block}: {out.steps} instruction steps"
              + (f"; wrote {args.out}" if args.out else ""))
        for w in wit:
            print(w)
            for line in (la.explain(w) if la else []):
                print(line)
    return 1 if wit else 0


def register(sub) -> None:
    p = sub.add_parser("kernel", help="PTX modules as compilers emit them: lint, data-path check, bit-exact run",
                       description="Read a whole PTX module (Triton, nvcc/CuTe, wmma) and lint its matrix "
                                   "instructions, prove its data path against a contract, or run it bit-exactly.")
    ks = p.add_subparsers(dest="kernel_command", metavar="SUBCOMMAND")

    def common(q, optional=False):
        q.add_argument("file", nargs="?" if optional else None,
                       help="a PTX module (.ptx)" + (" (or --triton instead)" if optional else ""))
        q.add_argument("--json", action="store_true", help="machine-readable output")
        q.add_argument("--debug", action="store_true", help="tracebacks for internal errors")

    def steps(q):
        from ..kernel import DEFAULT_MAX_STEPS
        q.add_argument("--max-steps", type=_positive, default=DEFAULT_MAX_STEPS, metavar="N",
                       help=f"stop (exit 3, naming the line) after N instruction steps, each one instruction issued to "
                            f"the threads at it; default {DEFAULT_MAX_STEPS:,}: a loop that does not end stops there")

    q = ks.add_parser("lint", help="matrix instructions legal on the module's .target at its .version (exit 1 if not)")
    common(q)
    q.set_defaults(func=_guard(cmd_lint))
    def triton(q):
        g = q.add_argument_group("a Triton kernel instead of PTX and a spec (compiled with the installed Triton, "
                                 "no GPU needed)")
        g.add_argument("--triton", metavar="FILE.py:KERNEL", help="the @triton.jit function to compile")
        g.add_argument("--call", metavar="LAUNCH", help="the launch as Triton writes it: "
                       "\"KERNEL[(gx, gy)](A, B, C, 64, A.stride(0), ..., BLOCK_M=32, num_warps=4)\"; "
                       "tensors by name, X.stride(i), X.shape[i], integer arithmetic, tl.float32")
        g.add_argument("--tensor", action="append", metavar="NAME=TYPE[SHAPE]",
                       help="a tensor argument: A=f16[64,32] (row-major), B=f16[64,32].T (its transpose), "
                            "X=f32[2,64,64].mT, C=f32[64,64] strides=(1,64); repeat per tensor")
        g.add_argument("--contract", action="append", metavar="\"OUT = X @ Y\"",
                       help="what the kernel computes, as in a spec's [contract]: \"C = A @ B\", \"C = A @ B.T\", "
                            "\"D = A @ B + C\"; repeat for chained contracts")
        g.add_argument("--target", metavar="SM", help="compile for sm_80, sm_86, sm_89 or sm_90 (sm_90a)")
        g.add_argument("--num-warps", type=_positive, default=None, metavar="N", help="as num_warps= in the launch")
        g.add_argument("--num-stages", type=_positive, default=None, metavar="N", help="as num_stages= in the launch")
        g.add_argument("--ptx-version", default=None, metavar="X.Y",
                       help="PTX ISA to emit (default: Triton's, from its ptxas; 9.0 is the newest the CUDA 13.0 "
                            "driver JITs); a newer one than Triton's ptxas reads is assembled by the ptxas on PATH")
        g.add_argument("--emit", default=None, metavar="PREFIX",
                       help="also write the PTX and the derived spec to PREFIX.ptx and PREFIX.toml")

    q = ks.add_parser("check", help="prove that every mma gets the right elements and every output its products")
    common(q, optional=True)
    q.add_argument("--spec", help="kernel spec TOML (launch, buffers, contract)")
    q.add_argument("--ctas", default=None, help="check only these CTAs: 'x,y,z;x,y,z' or linear indices '0 3'")
    q.add_argument("--no-lanes", action="store_true", help="skip the Z3 proofs over a symbolic lane")
    steps(q)
    triton(q)
    q.set_defaults(func=_guard(cmd_check))
    q = ks.add_parser("run", help="run the launch bit-exactly; every buffer after the run to --out")
    common(q, optional=True)
    q.add_argument("--spec", help="kernel spec TOML")
    q.add_argument("--inputs", default=None, help="npz: one array of raw encodings per buffer name")
    q.add_argument("--out", default=None, help="npz to write every buffer to (exactly this path; checked before the run)")
    q.add_argument("--arch", default="sm_90", help="numerics of the mma (sm_70 ... sm_120, exact); default sm_90")
    steps(q)
    triton(q)
    q.set_defaults(func=_guard(cmd_run))
