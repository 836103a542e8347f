"""Concrete evaluation of mma / mma.sp / wmma.mma, register level and matrix level.

``evaluate(opcode, a, b, c, e=None, sel=None, arch="sm_90")`` takes each lane's fragment
registers (``[T, 32, nregs]`` uint32, uint64 for f64 operands; ``e`` is ``[T, 32]``) and
returns ``d`` in the same convention.  ``arch`` is a model name or an
:class:`formal.numerics.params.ArchModel` (a named one, or a variant made with
``replace_path`` / ``with_path``, checked against the target its base model stands for).
It is three steps, each owned by one module:

1. ``formal.layout.unpack``     registers -> element encodings of A, B, C (the spec's fragments)
2. ``formal.numerics``          D = A*B + C per architecture model, bit exact
3. ``formal.layout.pack``       D -> registers

Sparse forms take their A terms from ``formal.metadata.gather_terms`` (metadata decode,
with undefined behaviour raised as :class:`formal.metadata.UndefinedBehavior`).
``evaluate_matrices`` skips steps 1 and 3 (for ``wmma.mma`` this is the only level, since
PTX leaves wmma fragments unspecified).

Inputs are strict (:class:`EvalError`, a ValueError, one line naming the argument):
encodings and register bits must fit their width (``formal.numerics.codes``: an f16 of 0x13C00 or
an s8 of 300 is an error, never truncated); signed integer arrays are read as bit
patterns (an ``int16`` -1 is the f16 0xFFFF); a 2-D argument is one instance and every
batch size must match (nothing is broadcast); ``e``/``sel`` belong to ``mma.sp`` only,
``scale_a``/``scale_b`` to block-scaled forms.  An illegal selector raises
:class:`formal.metadata.UndefinedSelector` with a ``.witness``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .catalog import Form, legality, parse
from .numerics.codes import as_codes, as_int
from .specdata import load_spec


class EvalError(ValueError):
    """Input the evaluator cannot take (shape, dtype, form not available on arch)."""


# The target whose legality an arch model stands for (the model is "what this GPU does").
ARCH_TARGETS = {"sm_70": ("sm_70", "7.0"), "sm_75": ("sm_75", "7.0"), "sm_80": ("sm_80", "7.8"),
                "sm_89": ("sm_89", "8.7"), "sm_90": ("sm_90a", "9.0"), "sm_100": ("sm_100a", "9.0"),
                "sm_120": ("sm_120a", "9.1")}


def _form(opcode: str | Form) -> Form:
    return opcode if isinstance(opcode, Form) else parse(opcode)


def _target(arch: Any) -> str:
    """The architecture name an ``arch=`` argument stands for: a name, or an
    :class:`~formal.numerics.params.ArchModel` (named or a variant of one) by its ``target``."""
    from .numerics.params import ArchModel

    if isinstance(arch, ArchModel):
        if arch.target != "exact" and arch.target not in ARCH_TARGETS:
            raise EvalError(f"arch model {arch.name!r} names no known target ({arch.target!r}); make it from a "
                            f"named model (ArchModel.replace_path / with_path) or set base= to one of: exact, "
                            f"{', '.join(ARCH_TARGETS)}")
        return arch.target
    if not isinstance(arch, str):
        raise EvalError(f"arch must be an architecture name or an ArchModel, got {type(arch).__name__}")
    return arch


def check_available(form: Form, arch: Any) -> None:
    """Refuse forms the architecture cannot execute (``exact`` takes any documented form).
    ``arch``: a name or an ArchModel (checked against the target it stands for)."""
    arch = _target(arch)
    if arch == "exact":
        res = legality(form, "sm_121a", "9.5")
        # the exact model needs only a documented form; targets do not matter
        if any(r.kind in ("syntax", "constraint") for r in res.reasons):
            raise EvalError(f"{form.opcode} is not a documented form: {res.reasons[0].message}")
        return
    if arch not in ARCH_TARGETS:
        raise EvalError(f"unknown arch {arch!r}; known: exact, {', '.join(ARCH_TARGETS)}")
    t, p = ARCH_TARGETS[arch]
    res = legality(form, t, p)
    if not res.ok:
        raise EvalError(f"{form.opcode} is not available on {arch} ({res.reasons[0].message})")


def _numerics_kw(form: Form, arch: str) -> dict[str, Any]:
    return dict(atype=form.atype, btype=form.btype, ctype=form.ctype, dtype=form.dtype, arch=arch,
                satfinite=form.satfinite, bitop=form.bitop, rounding=form.rounding, kind=form.kind,
                stype=form.stype, shape=form.mnk, sparse=form.is_sparse)


# ----------------------------------------------------------------------------------
# input validation: the one place user arrays enter the evaluator.  Encodings follow
# formal.numerics.codes (an out-of-width value is an error, signed arrays are bit patterns);
# every batch axis must agree; e/sel belong to mma.sp only; scales to block-scaled forms.

def _batched(name: str, x: Any, shape: tuple[int, ...], what: str) -> np.ndarray:
    """[*shape] (one instance) or [T, *shape] -> [T, *shape]."""
    arr = np.asarray(x)
    if arr.ndim == len(shape) and arr.shape == shape:
        return arr[None]
    if arr.ndim != len(shape) + 1 or arr.shape[1:] != shape:
        dims = ", ".join(map(str, shape))
        raise EvalError(f"{name} must have shape [T, {dims}] ({what}), got {list(arr.shape)}")
    return arr


def _same_batch(form: Form, arrays: dict[str, np.ndarray]) -> int:
    sizes = {k: v.shape[0] for k, v in arrays.items()}
    first = next(iter(sizes))
    for k, t in sizes.items():
        if t != sizes[first]:
            raise EvalError(f"operand {k} of {form.opcode} has {t} instances, {first} has {sizes[first]} "
                            f"(batch sizes must match; nothing is broadcast)")
    return sizes[first]


def _regs(form: Form, name: str, x: Any) -> np.ndarray:
    op = form.operands[name]
    threads = 128 if form.family == "wgmma" else 32           # a warpgroup: thread = 32 * warp + lane
    arr = _batched(name, x, (threads, op.count), f"{op.count} registers per thread of {form.opcode}")
    want = np.uint64 if op.reg_bits == 64 else np.uint32
    return as_codes(arr, op.reg_bits, f"operand {name} ({op.reg_bits}-bit registers)", EvalError).astype(want, copy=False)


def _elements(form: Form, name: str, x: Any, shape: tuple[int, int], etype: str) -> np.ndarray:
    arr = _batched(name, x, shape, f"{'x'.join(map(str, shape))} .{etype} encodings of {form.opcode}")
    return as_codes(arr, int(load_spec("formats")[etype]["bits"]), f"{name} (.{etype} encodings)", EvalError)


def _sparse_args(form: Form, e: Any, sel: Any, T: int) -> tuple[np.ndarray | None, int | None]:
    if not form.is_sparse:
        if e is not None or sel is not None:
            raise EvalError(f"{form.opcode} is dense: it takes no metadata e or selector sel")
        return None, None
    if e is None or sel is None:
        raise EvalError(f"{form.opcode} needs the metadata registers e [T, 32] and the selector sel")
    e = as_codes(_batched("e", e, (32,), "one 32-bit metadata register per lane"), 32, "e (32-bit registers)",
                 EvalError).astype(np.uint32, copy=False)
    if e.shape[0] != T:
        raise EvalError(f"e has {e.shape[0]} instances, operand a has {T} (batch sizes must match)")
    return e, as_int(sel, "sel", EvalError)


def _sparse_dot(vals, kidx, B, C, kw):
    """D of a sparse form: stored element c of row m times row kidx[m, c] of B, summed in the
    stored (hardware) order.  vals, kidx [T, M, K/2]; B [T, K, N]; C [T, M, N]."""
    from . import numerics

    return numerics.engine.sparse_dot(vals, kidx, B, C, **kw)


def _no_scales(form: Form, scale_a: Any, scale_b: Any) -> None:
    if not form.block_scale and (scale_a is not None or scale_b is not None):
        raise EvalError(f"{form.opcode} is not block-scaled: it takes no scale_a / scale_b")


def evaluate(opcode: str | Form, a, b, c, e=None, sel: int | None = None, arch: str = "sm_90",
             scale_a=None, scale_b=None, scale_sel_a: tuple[int, int] = (0, 0),
             scale_sel_b: tuple[int, int] = (0, 0), device: str | None = None, **wgmma) -> np.ndarray:
    """Register-level evaluation: returns d as ``[T, 32, nregs]`` (see module docstring).

    wgmma forms: see :func:`evaluate_wgmma` (``c`` is the accumulator, ``a`` A's registers or
    descriptor, ``b`` B's descriptor; ``smem=``, ``scale_d=``, ``imm_scale_a=`` ... as keywords).

    ``device="cuda"``: the arithmetic runs on CuPy (same code, bit-identical); registers are
    (un)packed on the host.  Without CuPy/GPU: ``formal.numerics.DeviceUnavailable``."""
    from . import layout, numerics

    form = _form(opcode)
    if form.family == "wgmma":
        return evaluate_wgmma(form, c, a, b, e=e, sel=sel, arch=arch, device=device, **(wgmma or {}))
    if wgmma:
        raise EvalError(f"{', '.join(wgmma)} belong to wgmma forms, not {form.opcode}")
    if form.family not in ("mma", "mma.sp"):
        raise EvalError(f"{form.family} fragments are unspecified by PTX; use evaluate_matrices for wmma.mma")
    check_available(form, arch)
    _no_scales(form, scale_a, scale_b)
    a, b, c = (_regs(form, k, x) for k, x in (("a", a), ("b", b), ("c", c)))
    T = _same_batch(form, {"a": a, "b": b, "c": c})
    e, sel = _sparse_args(form, e, sel, T)
    B = layout.unpack(form, "b", b)
    C = layout.unpack(form, "c", c)
    kw = dict(_numerics_kw(form, arch), device=device)
    if form.block_scale:
        raise EvalError("register-level block-scaled evaluation needs scale registers; not supported yet for "
                        f"{form.opcode}")
    if form.is_sparse:
        from . import metadata

        vals, kidx = metadata.gather_terms(form, a, e, sel)        # [T, M, K/2] each, hardware order
        D = _sparse_dot(vals, kidx, B, C, kw)                        # [T, M, N]
    else:
        A = layout.unpack(form, "a", a)
        if A.ndim == 4:  # m8n8k4 .f16: four independent products
            P = A.shape[1]
            D = numerics.mma_matrices(A.reshape(T * P, *A.shape[2:]), B.reshape(T * P, *B.shape[2:]),
                                      C.reshape(T * P, *C.shape[2:]), **kw).reshape(T, P, *C.shape[2:])
        else:
            D = numerics.mma_matrices(A, B, C, **kw)
    return layout.pack(form, "d", D)


def evaluate_matrices(opcode: str | Form, A, B, C, arch: str = "sm_90", scale_a=None, scale_b=None,
                      device: str | None = None) -> np.ndarray:
    """Matrix-level evaluation on raw element encodings: A [T,M,K], B [T,K,N], C [T,M,N] -> D [T,M,N].

    For ``mma.sp`` A is the dense structured-sparse matrix (its non-zeros define the
    metadata); for ``m8n8k4`` .f16 each of T matrices is one 8x8x4 product; for
    ``wmma.mma`` the matrices are the ones in memory.
    """
    from . import numerics

    form = _form(opcode)
    if form.family == "wgmma":
        return wgmma_matrices(form, A, B, C, arch=arch, device=device)
    if form.family not in ("mma", "mma.sp", "wmma.mma"):
        raise EvalError(f"{form.opcode} is not an mma instruction")
    check_available(form, arch)
    M, N, K = form.mnk
    A = _elements(form, "A", A, (M, K), form.atype)
    B = _elements(form, "B", B, (K, N), form.btype)
    C = _elements(form, "C", C, (M, N), form.ctype)
    T = _same_batch(form, {"A": A, "B": B, "C": C})
    _no_scales(form, scale_a, scale_b)
    kw = dict(_numerics_kw(form, arch), device=device)
    if form.block_scale:
        if scale_a is None or scale_b is None:
            raise EvalError(f"{form.opcode} needs scale_a [T, M, SFA_N] and scale_b [T, SFB_M, N]")
        nsf = {"1X": 1, "2X": 2, "4X": 4}[form.scale_vec_effective]
        sa = _elements(form, "scale_a", scale_a, (M, nsf), form.stype)
        sb = _elements(form, "scale_b", scale_b, (nsf, N), form.stype)
        _same_batch(form, {"A": A, "scale_a": sa, "scale_b": sb})
        sa = np.repeat(sa.astype(np.uint8), K // nsf, axis=2)      # [T, M, K]
        sb = np.repeat(sb.astype(np.uint8), K // nsf, axis=1)      # [T, K, N]
        a_t = np.broadcast_to(A[:, :, None, :], (T, M, N, K))
        b_t = np.broadcast_to(np.swapaxes(B, 1, 2)[:, None, :, :], (T, M, N, K))
        sa_t = np.broadcast_to(sa[:, :, None, :], a_t.shape)
        sb_t = np.broadcast_to(np.swapaxes(sb, 1, 2)[:, None, :, :], a_t.shape)
        return numerics.dot_terms(a_t, b_t, C, scale_a=sa_t, scale_b=sb_t, **{k: v for k, v in kw.items()})
    if form.is_sparse:
        from . import metadata

        vals, kidx = metadata.sparse_terms(form, A)                 # [T, M, K/2] hardware order
        return _sparse_dot(vals, kidx, B, C, kw)
    return numerics.mma_matrices(A, B, C, **kw)


def evaluate_gemm(A, B, C, opcode: str | Form, arch: str = "sm_90", device: str | None = None) -> np.ndarray:
    """A whole GEMM on raw encodings, A [Mg, Kg], B [Kg, Ng], C [Mg, Ng] -> D [Mg, Ng]: tiled
    into ``opcode``'s tiles (an mma or a dense wgmma form), each output tile the ascending-k
    chain of instructions an mma loop runs (each D the next C).  ``device="cuda"`` computes on CuPy, bit-identically."""
    from .numerics.gemm import gemm

    form = _form(opcode)
    if form.family == "wgmma" and not form.is_sparse:
        check_available(form, arch)
        kw = _wgmma_kw(form, arch)
        kw.pop("sparse")
    else:
        if form.family != "mma" or form.is_sparse or form.block_scale or form.mnk == (8, 8, 4):
            raise EvalError(f"evaluate_gemm takes a dense mma or wgmma form (not {form.opcode})")
        check_available(form, arch)
        if form.ctype != form.dtype:
            raise EvalError(f"{form.opcode}: a GEMM chains D into C, so the C and D types must agree")
        kw = _numerics_kw(form, arch)
    try:
        return gemm(A, B, C, **kw, device=device)
    except ValueError as e:
        raise EvalError(str(e)) from None


# ----------------------------------------------------------------------------------
# wgmma.mma_async (PTX ISA 9.1 §9.7.15): a warpgroup of 128 threads, the accumulator in
# registers, B (and A, unless it comes from registers) read from shared memory through a
# matrix descriptor (formal.smem).  The numerics are the sm_90 model at M = 64 (silicon:
# docs/wgmma.md); imm-scale -1 flips the sign bit of every A (B) element, scale-d = 0 reads
# the accumulator as +0.  A sparse form's warp w reads rows 16w..16w+15 as the mma.sp form of
# the same types reads its 16 rows (silicon, 690,176 outputs; tests/test_wgmma_eval.py checks
# the spec's wgmma fragments against those of that form).

_SIGN = {"f16": 0x8000, "bf16": 0x8000, "tf32": 0x80000000, "e4m3": 0x80, "e5m2": 0x80}


def _wgmma_kw(form: Form, arch) -> dict[str, Any]:
    return dict(atype=form.atype, btype=form.btype, ctype=form.dtype, dtype=form.dtype, arch=arch,
                satfinite=form.satfinite, bitop=form.bitop, shape=form.mnk, sparse=form.is_sparse)


def _sp_twin(form: Form) -> Form:
    """The mma.sp form whose 16 rows one warp of a sparse wgmma reads like."""
    M, N, K = form.mnk
    return parse(f"mma.sp.sync.aligned.m16n8k{K}.row.col.{form.dtype}.{form.atype}.{form.btype}.{form.dtype}")


def _negate(codes: np.ndarray, t: str, scale: int, what: str) -> np.ndarray:
    if scale not in (1, -1):
        raise EvalError(f"imm-scale-{what} must be 1 or -1, got {scale}")
    if scale == 1:
        return codes
    if t not in _SIGN:
        raise EvalError(f"imm-scale-{what} = -1 needs a floating-point .{what}type, not .{t}")
    return codes ^ codes.dtype.type(_SIGN[t])


def _wgmma_immediates(form: Form, A, B, C, scale_d, imm_scale_a: int, imm_scale_b: int):
    """imm-scale-a/b = -1 flip the sign bit of every A (B) element; scale-d = False reads C as +0."""
    A = _negate(A, form.atype, imm_scale_a, "a")
    B = _negate(B, form.btype, imm_scale_b, "b")
    sd = np.broadcast_to(np.asarray(scale_d, dtype=bool), (C.shape[0],))
    return A, B, np.where(sd[:, None, None], C, np.zeros((), C.dtype))


def _smem_operand(form: Form, which: str, desc, smem, trans: int) -> np.ndarray:
    """A [T, 64, K] (K/2 stored columns for a sparse A) or B [T, K, N] through the descriptor."""
    from . import smem as S

    if smem is None:
        raise EvalError(f"operand {which} comes from shared memory: give smem= (the image, [T, bytes] uint8)")
    img = np.asarray(smem)
    if img.dtype != np.uint8:
        raise EvalError(f"smem must be a uint8 byte image, not {img.dtype}")
    d = np.asarray(desc, dtype=np.uint64).reshape(-1)
    if d.shape[0] == 1 and img.ndim == 2:       # one descriptor for every image
        d = np.repeat(d, img.shape[0])
    T = d.shape[0]
    img = np.broadcast_to(img, (T, img.shape[-1])) if img.ndim == 1 else img
    if img.shape[0] != T:
        raise EvalError(f"smem has {img.shape[0]} images for {T} descriptors of operand {which}")
    name = which + (".sp" if form.is_sparse else "")
    t = form.atype if which == "a" else form.btype
    major = "MN" if trans else "K"
    out = None
    try:
        for v in np.unique(d):
            sel = d == v
            got = S.read_operand(img[sel], int(v), name, t, n=form.mnk[1], major=major)
            if out is None:
                out = np.zeros((T,) + got.shape[1:], got.dtype)
            out[sel] = got
    except (S.SmemError, S.DescriptorError) as e:
        raise EvalError(f"operand {which}: {e}") from None
    return out


def evaluate_wgmma(opcode: str | Form, d, a, b, *, smem=None, e=None, sel: int | None = None,
                   scale_d: Any = True, imm_scale_a: int = 1, imm_scale_b: int = 1, imm_trans_a: int = 0,
                   imm_trans_b: int = 0, arch: str = "sm_90", device: str | None = None) -> np.ndarray:
    """One ``wgmma.mma_async`` at register level: returns the accumulator registers [T, 128, nregs].

    d     the accumulator registers before the instruction, [T, 128, nregs] (thread = 32*warp + lane)
    a     A's registers [T, 128, 4] (A from registers), or A's matrix descriptor ([T] / scalar uint64)
    b     B's matrix descriptor ([T] / scalar uint64)
    smem  the shared-memory image the descriptors address from byte 0 ([T, bytes] or [bytes] uint8)
    e, sel  sparse forms: the metadata registers [T, 128] and the sparsity selector
    scale_d  the scale-d predicate (bool, or [T] bools): False reads the accumulator as +0
    imm_scale_a/b, imm_trans_a/b: the immediates (imm-trans: the operand is MN-major in shared memory)
    """
    import dataclasses

    from . import layout, numerics

    form = _form(opcode)
    if form.family != "wgmma" or form.mnk[0] != 64:
        raise EvalError(f"{form.opcode} is not a wgmma.mma_async form")
    check_available(form, arch)
    M, N, K = form.mnk
    areg = np.asarray(a)
    a_from_regs = areg.ndim >= 2
    src = form.asource or ("reg" if a_from_regs else "desc")
    if (src == "reg") != a_from_regs:
        raise EvalError(f"{form.opcode} takes A from {'registers [T, 128, 4]' if src == 'reg' else 'a descriptor'}")
    form = dataclasses.replace(form, asource=src)
    dd = _regs(form, "d", d)
    T = dd.shape[0]
    C = layout.unpack(form, "d", dd)
    if imm_trans_a and src == "reg":
        raise EvalError("imm-trans-a applies to A from a descriptor only")
    kc = K // 2 if form.is_sparse else K
    if src == "reg":
        A = layout.unpack(form, "a", _regs(form, "a", areg))
    else:
        A = _smem_operand(form, "a", areg, smem, imm_trans_a)
    B = _smem_operand(form, "b", b, smem, imm_trans_b)
    if A.shape[0] != T or B.shape[0] != T:
        raise EvalError(f"batch sizes differ: d {T}, A {A.shape[0]}, B {B.shape[0]}")
    A, B, C = _wgmma_immediates(form, A, B, C, scale_d, imm_scale_a, imm_scale_b)
    kw = dict(_wgmma_kw(form, arch), device=device)
    if form.is_sparse:
        if e is None or sel is None:
            raise EvalError(f"{form.opcode} needs e= (metadata registers [T, 128]) and sel=")
        D = _wgmma_sparse(form, A.reshape(T, M, kc), np.asarray(e), sel, B, C, kw)
    else:
        if e is not None or sel is not None:
            raise EvalError(f"e / sel belong to sparse forms, not {form.opcode}")
        D = numerics.mma_matrices(A, B, C, **kw)
    return layout.pack(form, "d", D)


def _wgmma_sparse(form, S, e, sel, B, C, kw):
    """Sparse terms warp by warp through the mma.sp form of the same types (its A fragment and
    metadata), then the dot products over the stored k order."""
    from . import layout, metadata

    twin = _sp_twin(form)
    T = S.shape[0]
    e = e.reshape(T, 128).astype(np.uint32)
    vals, kidx = [], []
    for w in range(4):
        regs = layout.pack(twin, "a", S[:, 16 * w:16 * w + 16])
        v, k = metadata.gather_terms(twin, regs, e[:, 32 * w:32 * w + 32], sel)
        vals.append(v)
        kidx.append(k)
    return _sparse_dot(np.concatenate(vals, axis=1), np.concatenate(kidx, axis=1), B, C, kw)


def wgmma_matrices(opcode: str | Form, A, B, C, arch: str = "sm_90", scale_d: Any = True, imm_scale_a: int = 1,
                   imm_scale_b: int = 1, device: str | None = None) -> np.ndarray:
    """Matrix level: A [T, 64, K] (a sparse form: the dense structured-sparse A), B [T, K, N],
    C [T, 64, N] raw encodings -> D [T, 64, N]."""
    from . import metadata, numerics

    form = _form(opcode)
    if form.family != "wgmma":
        raise EvalError(f"{form.opcode} is not a wgmma form")
    check_available(form, arch)
    M, N, K = form.mnk
    A = _elements(form, "A", A, (M, K), form.atype)
    B = _elements(form, "B", B, (K, N), form.btype)
    C = _elements(form, "C", C, (M, N), form.dtype)
    _same_batch(form, {"A": A, "B": B, "C": C})
    A, B, C = _wgmma_immediates(form, A, B, C, scale_d, imm_scale_a, imm_scale_b)
    kw = dict(_wgmma_kw(form, arch), device=device)
    if not form.is_sparse:
        return numerics.mma_matrices(A, B, C, **kw)
    twin = _sp_twin(form)
    parts = [metadata.sparse_terms(twin, A[:, 16 * w:16 * w + 16]) for w in range(4)]
    return _sparse_dot(np.concatenate([p[0] for p in parts], axis=1), np.concatenate([p[1] for p in parts], axis=1),
                       B, C, kw)


def wgmma_compressed(opcode: str | Form, S, e, sel: int, B, C, arch: str = "sm_90", scale_d: Any = True,
                     imm_scale_a: int = 1, imm_scale_b: int = 1, device: str | None = None) -> np.ndarray:
    """A sparse wgmma as a kernel holds it: compressed A [T, 64, K/2] (the stored elements),
    metadata registers e [T, 128], selector ``sel``, B [T, K, N], C [T, 64, N] -> D [T, 64, N]."""
    form = _form(opcode)
    if form.family != "wgmma" or not form.is_sparse:
        raise EvalError(f"{form.opcode} is not a sparse wgmma form")
    check_available(form, arch)
    M, N, K = form.mnk
    S = _elements(form, "A", S, (M, K // 2), form.atype)
    B = _elements(form, "B", B, (K, N), form.btype)
    C = _elements(form, "C", C, (M, N), form.dtype)
    _same_batch(form, {"A": S, "B": B, "C": C})
    S, B, C = _wgmma_immediates(form, S, B, C, scale_d, imm_scale_a, imm_scale_b)
    return _wgmma_sparse(form, S, np.asarray(e), sel, B, C, dict(_wgmma_kw(form, arch), device=device))


# ``formal.evaluate`` is both this module and the function users call
# (``formal.evaluate(opcode, a, b, c)``): once the module is imported, Python binds the
# module object to the package attribute, so the module itself forwards calls.
import sys as _sys  # noqa: E402
import types as _types  # noqa: E402


class _CallableModule(_types.ModuleType):
    def __call__(self, *args, **kwargs):
        return evaluate(*args, **kwargs)


_sys.modules[__name__].__class__ = _CallableModule
