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
    arr = _batched(name, x, (32, op.count), f"{op.count} registers per lane of {form.opcode}")
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


def _no_scales(form: Form, scale_a: Any, scale_b: Any) -> None:
    if not form.block_scale and (scale_a is not None or scale_b is not None):
        raise EvalError(f"{form.opcode} is not block-scaled: it takes no scale_a / scale_b")


def evaluate(opcode: str | Form, a, b, c, e=None, sel: int | None = None, arch: str = "sm_90",
             scale_a=None, scale_b=None, scale_sel_a: tuple[int, int] = (0, 0),
             scale_sel_b: tuple[int, int] = (0, 0), device: str | None = None) -> np.ndarray:
    """Register-level evaluation: returns d as ``[T, 32, nregs]`` (see module docstring).

    ``device="cuda"``: the arithmetic runs on CuPy (same code, bit-identical); registers are
    (un)packed on the host.  Without CuPy/GPU: ``formal.numerics.DeviceUnavailable``."""
    from . import layout, numerics

    form = _form(opcode)
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
        M, N, _ = form.mnk
        bt = B[np.arange(B.shape[0])[:, None, None], kidx.astype(np.int64)]     # [T, M, K/2, N]: rows of B
        at = np.broadcast_to(vals[..., None], bt.shape)
        D = numerics.dot_terms(np.moveaxis(at, 3, 2), np.moveaxis(bt, 3, 2), C, **kw)       # [T, M, N]
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
        bt = B[np.arange(B.shape[0])[:, None, None], kidx.astype(np.int64)]
        at = np.broadcast_to(vals[..., None], bt.shape)
        return numerics.dot_terms(np.moveaxis(at, 3, 2), np.moveaxis(bt, 3, 2), C, **kw)
    return numerics.mma_matrices(A, B, C, **kw)


def evaluate_gemm(A, B, C, opcode: str | Form, arch: str = "sm_90", device: str | None = None) -> np.ndarray:
    """A whole GEMM on raw encodings, A [Mg, Kg], B [Kg, Ng], C [Mg, Ng] -> D [Mg, Ng]: tiled
    into ``opcode``'s tiles, each output tile the ascending-k chain of instructions an mma
    loop runs (each D the next C).  ``device="cuda"`` computes on CuPy, bit-identically."""
    from .numerics.gemm import gemm

    form = _form(opcode)
    if form.family != "mma" or form.is_sparse or form.block_scale or form.mnk == (8, 8, 4):
        raise EvalError(f"evaluate_gemm takes a dense mma form (not {form.opcode})")
    check_available(form, arch)
    if form.ctype != form.dtype:
        raise EvalError(f"{form.opcode}: a GEMM chains D into C, so the C and D types must agree")
    try:
        return gemm(A, B, C, **_numerics_kw(form, arch), device=device)
    except ValueError as e:
        raise EvalError(str(e)) from None


# ``formal.evaluate`` is both this module and the function users call
# (``formal.evaluate(opcode, a, b, c)``): once the module is imported, Python binds the
# module object to the package attribute, so the module itself forwards calls.
import sys as _sys  # noqa: E402
import types as _types  # noqa: E402


class _CallableModule(_types.ModuleType):
    def __call__(self, *args, **kwargs):
        return evaluate(*args, **kwargs)


_sys.modules[__name__].__class__ = _CallableModule
