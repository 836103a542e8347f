"""``ptx-formal eval``: evaluate a form on register- or matrix-level inputs."""

from __future__ import annotations

import json
import sys

import numpy as np

from ..catalog import parse
from . import InputError


def to_values(bits: np.ndarray, t: str) -> np.ndarray:
    """Display helper: element encodings -> float64/int64 values (for --show only)."""
    import ml_dtypes

    views = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "e4m3": ml_dtypes.float8_e4m3fn,
             "e5m2": ml_dtypes.float8_e5m2}
    b = np.asarray(bits)
    if t in views:
        w = np.dtype(views[t]).itemsize
        return b.astype({1: np.uint8, 2: np.uint16}[w]).view(views[t]).astype(np.float64)
    if t in ("f32", "tf32"):
        return b.astype(np.uint32).view(np.float32).astype(np.float64)
    if t == "f64":
        return b.astype(np.uint64).view(np.float64)
    six = {"e3m2": ml_dtypes.float6_e3m2fn, "e2m3": ml_dtypes.float6_e2m3fn, "e2m1": ml_dtypes.float4_e2m1fn}
    if t in six:
        return b.astype(np.uint8).view(six[t]).astype(np.float64)
    width = {"s8": 8, "s4": 4, "s32": 32}.get(t)
    if width:
        v = b.astype(np.int64)
        return np.where(v >= (1 << (width - 1)), v - (1 << width), v)
    return b.astype(np.int64)


def _load_npz(path: str) -> dict[str, np.ndarray]:
    import zipfile

    try:
        with np.load(path) as z:
            if not hasattr(z, "files"):
                raise InputError(f"--inputs {path}: not an .npz archive (a single array)")
            return {k: z[k] for k in z.files}
    except OSError as e:
        raise InputError(f"--inputs {path}: cannot read: {e.strerror or e}") from None
    except (ValueError, EOFError, zipfile.BadZipFile, KeyError) as e:
        raise InputError(f"--inputs {path}: not a readable .npz archive (empty or truncated?): {e}") from None


def _show(form, ins: dict, d: np.ndarray, warp: int, matrix_level: bool) -> str:
    from .. import layout

    out = [f"{form.opcode}  (warp {warp})"]
    np.set_printoptions(linewidth=200, precision=6, suppress=False)
    for name, t in (("a", form.atype), ("b", form.btype), ("c", form.ctype), ("d", form.dtype)):
        if matrix_level:
            key = name.upper()
            mat = (d if name == "d" else ins[key])[warp]
        else:
            regs = d if name == "d" else ins[name]
            if form.is_sparse and name == "a":
                mat = layout.unpack(form, "a", regs[warp:warp + 1])[0]
                out.append(f"{name.upper()} (compressed, .{t}):\n{to_values(mat, t)}")
                continue
            mat = layout.unpack(form, name, regs[warp:warp + 1])[0]
        out.append(f"{name.upper()} (.{t}):\n{to_values(mat, t)}")
    return "\n".join(out)


def cmd_eval(args) -> int:
    from ..evaluate import EvalError, evaluate, evaluate_matrices
    from ..numerics.xp import DeviceUnavailable

    from . import check_writable

    form = parse(args.opcode)
    if args.warp and not args.show:
        raise InputError("--warp picks the warp --show prints: add --show")
    if args.out:
        check_writable(args.out, "--out")
    ins = _load_npz(args.inputs)
    for k, v in ins.items():
        if k in ("a", "b", "c", "A", "B", "C") and v.ndim >= 1 and v.shape[0] == 0:
            raise InputError(f"--inputs {args.inputs}: array {k!r} holds a batch of 0 warps")
    sel = args.sel
    if sel is None and "sel" in ins:      # one integer, or per case as `vectors --format npz` writes (-1: none)
        v = ins["sel"]
        vals = set(v.reshape(-1).tolist()) if v.dtype.kind in "iu" else None
        if not vals or len(vals) != 1:
            raise InputError(f"--inputs {args.inputs}: 'sel' must be one integer (or the same for every warp), "
                             f"got a {v.dtype} array of shape {v.shape}")
        sel = vals.pop()
        sel = None if sel == -1 else int(sel)
    matrix_level = "A" in ins or form.family == "wmma.mma"
    if form.family == "wgmma" and args.show:
        raise InputError("--show prints mma / mma.sp warps; for wgmma read the --out arrays")
    imm = {k: (bool(ins[k].reshape(-1)[0]) if k == "scale_d" and ins[k].size == 1 else
               ins[k] if k == "scale_d" else int(ins[k].reshape(-1)[0]))
           for k in ("scale_d", "imm_scale_a", "imm_scale_b", "imm_trans_a", "imm_trans_b") if k in ins}
    if imm and form.family != "wgmma":
        raise InputError(f"--inputs {args.inputs}: {', '.join(imm)} belong to wgmma forms")
    try:
        if form.family == "wgmma":
            from ..evaluate import wgmma_matrices

            if matrix_level:
                for k in ("A", "B", "C"):
                    if k not in ins:
                        raise InputError(f"{args.inputs} has no array {k!r} (matrix level needs A, B, C)")
                imm.pop("imm_trans_a", None), imm.pop("imm_trans_b", None)
                res = {"D": wgmma_matrices(form, ins["A"], ins["B"], ins["C"], arch=args.arch, device=args.device,
                                           **imm)}
            else:
                for k in ("d", "a", "b", "smem"):
                    if k not in ins:
                        raise InputError(f"{args.inputs} has no array {k!r} (wgmma at register level needs d "
                                         f"(the accumulator), a (registers or descriptor), b (descriptor), smem)")
                res = {"d": evaluate(form, ins["a"], ins["b"], ins["d"], e=ins.get("e"), sel=sel, arch=args.arch,
                                     device=args.device, smem=ins["smem"], **imm)}
        elif matrix_level:
            for k in ("A", "B", "C"):
                if k not in ins:
                    raise InputError(f"{args.inputs} has no array {k!r} (matrix level needs A, B, C)")
            res = {"D": evaluate_matrices(form, ins["A"], ins["B"], ins["C"], arch=args.arch,
                                          scale_a=ins.get("scale_a"), scale_b=ins.get("scale_b"), device=args.device)}
        else:
            for k in ("a", "b", "c"):
                if k not in ins:
                    raise InputError(f"{args.inputs} has no array {k!r} (register level needs a, b, c[, e])")
            res = {"d": evaluate(form, ins["a"], ins["b"], ins["c"], e=ins.get("e"), sel=sel, arch=args.arch,
                                 device=args.device)}
    except EvalError as e:
        raise InputError(str(e)) from None
    except DeviceUnavailable as e:
        print(f"ptx-formal: {e}", file=sys.stderr)
        return 3
    except Exception as e:
        from .. import metadata as md
        if isinstance(e, getattr(md, "UndefinedBehavior", ())):
            print(f"ptx-formal: undefined behaviour: {e}", file=sys.stderr)
            return 1
        raise
    if args.out:
        np.savez(args.out, **res)
    if args.show:
        w = args.warp
        n = (res.get("D") if matrix_level else res["d"]).shape[0]
        if not 0 <= w < n:
            raise InputError(f"--warp {w} out of range (0..{n - 1})")
        print(_show(form, ins, res.get("D") if matrix_level else res["d"], w, matrix_level))
    elif not args.out:
        arr = res.get("D") if matrix_level else res["d"]
        print(json.dumps({"opcode": form.opcode, "arch": args.arch, "shape": list(arr.shape),
                          "warp0": [[f"{int(x):x}" for x in row] for row in arr[0].reshape(arr.shape[1], -1)]}))
    return 0


def register(sub) -> None:
    p = sub.add_parser("eval", help="evaluate a form bit-exactly (register or matrix level)",
                       description="Inputs: an .npz with a, b, c [T,32,nregs] (+ e [T,32] and sel for mma.sp) at "
                                   "register level, or A [T,M,K], B [T,K,N], C [T,M,N] element encodings at matrix "
                                   "level (always for wmma.mma).  wgmma at register level: d [T,128,nregs] (the "
                                   "accumulator before the instruction), a [T,128,4] registers or a [T] descriptor, "
                                   "b [T] descriptor, smem [T,bytes] uint8 (the shared memory the descriptors address "
                                   "from byte 0), e [T,128] and sel for .sp, optional scale_d, imm_scale_a/b, "
                                   "imm_trans_a/b; at matrix level A [T,64,K], B [T,K,N], C [T,64,N].")
    p.add_argument("opcode")
    p.add_argument("--inputs", "-i", required=True, help="input .npz")
    p.add_argument("--out", "-o", default=None, help="output .npz (d, or D at matrix level)")
    p.add_argument("--sel", type=int, default=None, help="sparsity selector (mma.sp)")
    p.add_argument("--arch", default="sm_90", help="arithmetic model: sm_90 (H100, default), exact, sm_80, ...")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                   help="where the arithmetic runs: cpu (numpy) or cuda (CuPy, bit-identical; exit 3 without it)")
    p.add_argument("--show", action="store_true", help="print one warp's matrices as values")
    p.add_argument("--warp", type=int, default=0, help="which warp --show prints")
    p.set_defaults(func=cmd_eval)
