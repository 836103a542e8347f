"""Scalar semantics of the non-matrix instructions: ``specs/ptx_ops.toml`` + one evaluator per class.

Values are raw register bits (``np.uint64`` arrays, one entry per thread).  Every function
here is pure: bits in, bits out.  Floating point is bit-exact IEEE-754 (numpy float32 /
float64 arithmetic is correctly rounded to nearest; other modes and narrower formats go
through :mod:`formal.numerics.formats`).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..expr import Formula
from ..numerics.formats import convert, from_float64
from ..specdata import load_spec

U64 = np.uint64
FLOAT_TYPES = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64, "tf32": 32, "e4m3": 8, "e5m2": 8}
INT_TYPES = {f"{p}{w}": w for p in "bus" for w in (8, 16, 32, 64)}
CANON_NAN = {16: 0x7FFF, 32: 0x7FFFFFFF, 64: 0x7FFFFFFFFFFFFFFF}


def type_bits(t: str) -> int:
    if t in INT_TYPES:
        return INT_TYPES[t]
    if t in FLOAT_TYPES:
        return FLOAT_TYPES[t]
    if t in ("f16x2", "bf16x2"):
        return 32
    if t in ("e4m3x2", "e5m2x2"):
        return 16
    if t == "pred":
        return 1
    raise KeyError(t)


def mask(w: int) -> np.uint64:
    return U64((1 << w) - 1) if w < 64 else U64(0xFFFFFFFFFFFFFFFF)


@lru_cache(maxsize=None)
def ops_table() -> dict:
    return load_spec("ptx_ops")


@lru_cache(maxsize=None)
def _formula(src: str) -> Formula:
    return Formula(src)


def as_int(bits: np.ndarray, t: str) -> np.ndarray:
    """Bits of type t -> int64 (signed types) or uint64 (unsigned / bit types)."""
    w = type_bits(t)
    b = np.asarray(bits, dtype=U64) & mask(w)
    if t.startswith("s"):
        if w == 64:
            return b.view(np.int64)
        s = b.astype(np.int64)
        return np.where(s >= (1 << (w - 1)), s - (1 << w), s)
    return b


def from_int(v: np.ndarray, w: int) -> np.ndarray:
    v = np.asarray(v)
    if v.dtype == np.int64:
        v = v.view(U64)
    return v.astype(U64) & mask(w)


# ---------------------------------------------------------------------------------------
# class int

def int_op(name: str, quals: list[str], t: str, a, b=None, c=None) -> np.ndarray:
    """add/sub/mul/mad/min/max/neg/abs/and/or/xor/not/shl/shr/div/rem on type t."""
    entry = ops_table()["int"][name]
    w = type_bits(t)
    signed = t.startswith("s")
    with np.errstate(all="ignore"):
        if name in ("mul", "mad") and ("hi" in quals or "wide" in quals):
            if w > 32:
                if "hi" in quals and not signed:        # 64-bit high half, unsigned: exact via Python ints
                    aa, bb = as_int(a, t), as_int(b, t)
                    return np.array([(int(x) * int(y)) >> 64 for x, y in zip(aa, bb)], dtype=U64) + \
                        (as_int(c, t) if name == "mad" else U64(0))
                raise NotImplementedError(f"{name}.{'hi' if 'hi' in quals else 'wide'} on 64-bit operands")
            aa, bb = as_int(a, t).astype(np.int64), as_int(b, t).astype(np.int64)
            p = aa * bb                                    # exact: |p| < 2^63 for w <= 32
            if "wide" in quals:
                r = p + (as_int(c, ("s" if signed else "u") + str(2 * w)).astype(np.int64) if name == "mad" else 0)
                return from_int(r, 2 * w)
            hi = p >> w
            r = hi + (as_int(c, t).astype(np.int64) if name == "mad" else 0)
            return from_int(r, w)
        if name in ("div", "rem"):
            aa, bb = as_int(a, t), as_int(b, t)
            zero = bb == 0
            bb1 = np.where(zero, 1, bb).astype(aa.dtype)
            if signed:
                q = np.abs(aa) // np.abs(bb1) * np.where((aa < 0) != (bb1 < 0), -1, 1)
                r = q if name == "div" else aa - q * bb1
            else:
                r = aa // bb1 if name == "div" else aa % bb1
            r = np.where(zero, -1 if signed else mask(w), r) if name == "div" else np.where(zero, aa, r)
            return from_int(np.asarray(r).astype(np.int64 if signed else U64), w)
        env = {"a": as_int(a, t), "w": w, "signed": signed}
        if b is not None:
            env["b"] = as_int(b, t) if name not in ("shl", "shr") else as_int(b, "u32")
        if c is not None:
            env["c"] = as_int(c, t)
        if name in ("shl", "shr"):
            env["b"] = np.minimum(env["b"].astype(U64), U64(w)).astype(np.int64)
            env["a"] = env["a"].astype(np.int64) if signed else env["a"]
            if not signed:
                env["b"] = env["b"].astype(U64)
                env["w"] = U64(w)
        r = _formula(entry["formula"]).eval(env)
        return from_int(np.asarray(r), w)


# ---------------------------------------------------------------------------------------
# class bits

def popc(a, w):
    a = np.asarray(a, dtype=U64) & mask(w)
    return np.bitwise_count(a).astype(U64) if hasattr(np, "bitwise_count") else \
        np.array([bin(int(x)).count("1") for x in a.ravel()], dtype=U64).reshape(a.shape)


def clz(a, w):
    a = np.asarray(a, dtype=U64) & mask(w)
    out = np.full(a.shape, w, dtype=U64)
    for k in range(w):
        hit = ((a >> U64(k)) & U64(1)) == 1
        out = np.where(hit, U64(w - 1 - k), out)
    return out


def brev(a, w):
    a = np.asarray(a, dtype=U64)
    out = np.zeros(a.shape, dtype=U64)
    for k in range(w):
        out |= ((a >> U64(k)) & U64(1)) << U64(w - 1 - k)
    return out


def bfe(a, pos, ln, t):
    w = type_bits(t)
    a = np.asarray(a, dtype=U64) & mask(w)
    pos = np.asarray(pos, dtype=U64) & U64(0xFF)
    ln = np.asarray(ln, dtype=U64) & U64(0xFF)
    out = np.zeros(a.shape, dtype=U64)
    for i in range(w):
        src = pos + U64(i)
        take = (U64(i) < ln) & (src < U64(w))
        bit = (a >> np.minimum(src, U64(w - 1))) & U64(1)
        out |= np.where(take, bit << U64(i), U64(0))
    if t.startswith("s"):
        last = np.where(ln == 0, U64(0), np.where(pos + ln - U64(1) >= U64(w), (a >> U64(w - 1)) & U64(1),
                                                 (out >> np.minimum(ln - U64(1), U64(w - 1))) & U64(1)))
        fill = np.zeros(a.shape, dtype=U64)
        for i in range(w):
            fill |= np.where(U64(i) >= ln, U64(1) << U64(i), U64(0))
        out = np.where(last == 1, out | fill, out)
        out = np.where(ln == 0, U64(0), out)
    return out & mask(w)


def bfi(a, b, pos, ln, w):
    a = np.asarray(a, dtype=U64)
    out = np.asarray(b, dtype=U64) & mask(w)
    pos = np.asarray(pos, dtype=U64) & U64(0xFF)
    ln = np.asarray(ln, dtype=U64) & U64(0xFF)
    for i in range(w):
        dst = pos + U64(i)
        put = (U64(i) < ln) & (dst < U64(w))
        d = np.minimum(dst, U64(w - 1))
        bit = (a >> U64(i)) & U64(1)
        out = np.where(put, (out & ~(U64(1) << d)) | (bit << d), out)
    return out


def lop3(a, b, c, lut, w):
    a, b, c = (np.asarray(x, dtype=U64) & mask(w) for x in (a, b, c))
    out = np.zeros(a.shape, dtype=U64)
    lut = np.asarray(lut, dtype=U64)
    for i in range(8):
        sel = ((lut >> U64(i)) & U64(1)) == 1
        ta = a if i & 4 else ~a
        tb = b if i & 2 else ~b
        tc = c if i & 1 else ~c
        out |= np.where(sel, ta & tb & tc, U64(0))
    return out & mask(w)


# ---------------------------------------------------------------------------------------
# class compare

def compare(cmp: str, t: str, a, b) -> np.ndarray:
    tab = ops_table()["compare"]["op"]
    if t in ("f32", "f64", "f16", "bf16"):
        x, y = to_float(a, t), to_float(b, t)
        nan = np.isnan(x) | np.isnan(y)
        if cmp == "num":
            return ~nan
        if cmp == "nan":
            return nan
        unordered = cmp.endswith("u") and cmp not in ("lu",)
        base = cmp[:-1] if unordered and cmp[:-1] in tab else cmp
        with np.errstate(all="ignore"):
            r = np.asarray(_formula(tab[base]).eval({"a": x, "b": y}), dtype=bool)
        return (r & ~nan) | (nan if unordered else False)
    if cmp not in tab:
        raise NotImplementedError(f"setp.{cmp}.{t}")
    return np.asarray(_formula(tab[cmp]).eval({"a": as_int(a, t), "b": as_int(b, t)}), dtype=bool)


# ---------------------------------------------------------------------------------------
# floats

def to_float(bits, t: str) -> np.ndarray:
    b = np.asarray(bits, dtype=U64)
    if t == "f32":
        return (b & U64(0xFFFFFFFF)).astype(np.uint32).view(np.float32)
    if t == "f64":
        return b.view(np.float64)
    if t == "f16":
        return (b & U64(0xFFFF)).astype(np.uint16).view(np.float16)
    if t == "bf16":
        return ((b & U64(0xFFFF)) << U64(16)).astype(np.uint32).view(np.float32)
    raise NotImplementedError(t)


def from_f32(x) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    r = x.view(np.uint32).astype(U64)
    return np.where(np.isnan(x), U64(CANON_NAN[32]), r)


def _round_odd_f64(s, err):
    """s + err (exact, |err| tiny) rounded to odd in binary64: correct for a later rounding to
    24 or fewer significand bits."""
    bits = s.view(np.uint64)
    fix = (err != 0) & ((bits & U64(1)) == 0) & np.isfinite(s)
    toward = np.where(err > 0, np.inf, -np.inf)
    return np.where(fix, np.nextafter(s, toward), s)


def _two_sum(a, b):
    s = a + b
    bb = s - a
    err = (a - (s - bb)) + (b - bb)
    return s, err


def float_op(fn: str, t: str, rnd: str, args, ftz=False, sat=False) -> np.ndarray:
    """IEEE arithmetic on bits of type t (f32, f64, f16, bf16); rnd in rn/rz/rm/rp."""
    w = type_bits(t)
    with np.errstate(all="ignore"):
        if ftz and t == "f32":
            args = [_ftz32(a) for a in args]
        if t == "f64":
            xs = [to_float(a, "f64") for a in args]
            if rnd != "rn" and fn in ("add", "sub", "mul", "fma", "div", "sqrt"):
                raise NotImplementedError(f"{fn}.{rnd}.f64")
            r = _float_eval(fn, xs, np.float64)
            out = r.view(U64)
            return np.where(np.isnan(r), U64(CANON_NAN[64]), out)
        xs = [to_float(a, t).astype(np.float64) for a in args]
        if fn in ("neg", "abs"):
            b = np.asarray(args[0], dtype=U64) & mask(w)
            sign = U64(1 << (w - 1))
            return (b ^ sign) if fn == "neg" else (b & ~sign & mask(w))
        if fn in ("min", "max"):
            x, y = xs
            xn, yn = np.isnan(x), np.isnan(y)
            f = np.minimum if fn == "min" else np.maximum
            # -0 < +0 (PTX: "min(+0.0, -0.0) = -0.0")
            tie = (x == y) & (x == 0)
            sx = np.signbit(x)
            pick_x = np.where(tie, sx if fn == "min" else ~sx, f(x, y) == x)
            r_bits = np.where(pick_x, np.asarray(args[0], dtype=U64), np.asarray(args[1], dtype=U64)) & mask(w)
            r_bits = np.where(xn & ~yn, np.asarray(args[1], dtype=U64) & mask(w), r_bits)
            r_bits = np.where(yn & ~xn, np.asarray(args[0], dtype=U64) & mask(w), r_bits)
            return np.where(xn & yn, U64(CANON_NAN[w] if w in CANON_NAN else 0x7FFF), r_bits)
        # exact in float64, then one rounding (round-to-odd keeps it single for fma)
        if fn == "add":
            s, err = _two_sum(xs[0], xs[1])
        elif fn == "sub":
            s, err = _two_sum(xs[0], -xs[1])
        elif fn == "mul":
            s, err = xs[0] * xs[1], np.zeros_like(xs[0])     # <= 48 significand bits: exact
        elif fn == "fma":
            p = xs[0] * xs[1]                                 # exact
            s, err = _two_sum(p, xs[2])
        elif fn in ("div", "sqrt"):
            if t != "f32":
                raise NotImplementedError(f"{fn}.{t}")
            r = _float_eval(fn, [x.astype(np.float32) for x in xs], np.float32) if rnd == "rn" else None
            if r is None:
                raise NotImplementedError(f"{fn}.{rnd}.f32")
            return from_f32(r)
        else:
            raise NotImplementedError(f"{fn}.{t}")
        s = _round_odd_f64(s, err)
        fmt = {"f32": "f32", "f16": "f16", "bf16": "bf16"}[t]
        out = from_float64(s, fmt, rnd).astype(U64)
        nan = np.isnan(s)
        out = np.where(nan, U64(CANON_NAN[32] if w == 32 else 0x7FFF), out)
        if sat:
            v = to_float(out, t).astype(np.float64)
            one = from_float64(np.array([1.0]), fmt).astype(U64)[0]
            out = np.where(nan | (v <= 0), U64(0), np.where(v >= 1.0, one, out))
        if ftz and t == "f32":
            out = _ftz32(out)
        return out


def _float_eval(fn, xs, dt):
    if fn == "add":
        return (xs[0] + xs[1]).astype(dt)
    if fn == "sub":
        return (xs[0] - xs[1]).astype(dt)
    if fn == "mul":
        return (xs[0] * xs[1]).astype(dt)
    if fn == "div":
        return (xs[0] / xs[1]).astype(dt)
    if fn == "sqrt":
        return np.sqrt(xs[0]).astype(dt)
    if fn == "fma":
        if dt == np.float64:
            from ..numerics.engine import fma_f64_codes
            return fma_f64_codes(*(x.view(U64) for x in xs)).view(np.float64)
    raise NotImplementedError(fn)


def _ftz32(b):
    b = np.asarray(b, dtype=U64)
    sub = ((b >> U64(23)) & U64(0xFF)) == 0
    return np.where(sub, b & U64(0x80000000), b)


# ---------------------------------------------------------------------------------------
# conversions

_NUM_FMT = {"f16": "f16", "bf16": "bf16", "f32": "f32", "f64": "f64", "tf32": "tf32", "e4m3": "e4m3", "e5m2": "e5m2"}


def cvt(dt: str, st: str, rnd: str | None, bits, sat=False, relu=False, ftz=False, satfinite=False) -> np.ndarray:
    """cvt.rnd.dt.st on raw bits (scalar forms)."""
    b = np.asarray(bits, dtype=U64)
    if st in _NUM_FMT and dt in _NUM_FMT:
        if st == "f32" and ftz:
            b = _ftz32(b)
        mode = rnd or "rn"
        if mode in ("rni", "rzi", "rmi", "rpi"):          # round to integral value, same type
            if dt != st:
                raise NotImplementedError(f"cvt.{mode}.{dt}.{st}")
            x = to_float(b, st).astype(np.float64)
            f = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}[mode]
            return from_float64(f(x), dt).astype(U64)
        kw = {}
        if satfinite:
            kw["overflow"] = "satfinite"
        out = convert(b & mask(type_bits(st)), _NUM_FMT[st], _NUM_FMT[dt], mode, **kw).astype(U64)
        if relu:
            v = to_float(out, dt) if dt in ("f16", "bf16", "f32") else None
            if v is not None:
                out = np.where(np.isnan(v), out, np.where(v < 0, U64(0), out))
        if dt == "f32" and ftz:
            out = _ftz32(out)
        return out
    if st in INT_TYPES and dt in INT_TYPES:
        v = as_int(b, st)
        dw = type_bits(dt)
        if sat:
            lo, hi = ((-(1 << (dw - 1)), (1 << (dw - 1)) - 1) if dt.startswith("s") else (0, (1 << dw) - 1))
            v = np.clip(v.astype(np.float64) if v.dtype == U64 else v, lo, hi).astype(np.int64)
        return from_int(np.asarray(v), dw)
    if st in INT_TYPES and dt in _NUM_FMT:
        v = as_int(b, st).astype(np.float64)               # exact for |v| < 2^53
        return from_float64(v, _NUM_FMT[dt], rnd or "rn").astype(U64)
    if st in _NUM_FMT and dt in INT_TYPES:
        x = to_float(b, st).astype(np.float64)
        mode = rnd or "rzi"
        f = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}[mode]
        dw = type_bits(dt)
        lo, hi = ((-(1 << (dw - 1)), (1 << (dw - 1)) - 1) if dt.startswith("s") else (0, (1 << dw) - 1))
        with np.errstate(all="ignore"):
            r = np.clip(np.nan_to_num(f(x), nan=0.0), lo, hi)        # float -> int saturates; NaN -> 0
        return from_int(r.astype(np.int64) if dt.startswith("s") or dw < 64 else r.astype(U64), dw)
    raise NotImplementedError(f"cvt.{dt}.{st}")


# address windows of the interpreter's flat memory, and the value type of an opcode
U64 = np.uint64
GLOBAL_BASE = 1 << 40           # global buffers live here (generic = global addresses)
SHARED_WINDOW = 1 << 46         # generic address of shared offset 0
LOCAL_WINDOW = 3 << 45          # generic address of local offset 0
PARAM_BASE = 1 << 44            # addresses of kernel parameters (mov %rd, param)
GAP = 4096                      # unmapped bytes between buffers

_TYPES = set(INT_TYPES) | set(FLOAT_TYPES) | {"f16x2", "bf16x2", "pred", "e4m3x2", "e5m2x2"}


def _type_of(parts: list[str]) -> str | None:
    ts = [p for p in parts[1:] if p in _TYPES]
    return ts[-1] if ts else None
