"""Silicon checks of the movement semantics and of the recipe library.

For every recipe sm_90 executes (ldmatrix .x1/.x2/.x4 +.trans, stmatrix, movmatrix,
shfl.sync, prmt, cvt packing, mov, st.shared) and for a set of *semantic probes* (every
prmt mode and selector including sign replication, shfl modes with odd b / c operands,
every ldmatrix / stmatrix .num x .trans), one PTX kernel:

1. copies a coded shared-memory image from global memory (each logical element has a
   distinct code), loads coded source registers, or -- for accumulator sources -- computes
   them with a real ``mma`` (A = codes, B = a 0/1 selection matrix, so D = the codes);
2. computes the recipe's per-lane values (``value p = ...`` compiled to PTX integer code);
3. runs the recipe's steps verbatim;
4. dumps the target registers (or the shared tile), and, when the target is an mma
   operand fragment, runs that ``mma`` with random small integers in the other operand and
   dumps D.

The decoder compares the dump with the *proved* target layout (for recipes) or with the
engine's predicted final state (semantic probes: the same semantics Z3 reasons about), and
D with the host matrix product of the decoded tile.

Entry point for the lead (one batch on the H100, CuPy)::

    from formal.hw.transform_probe import run_transform_probes
    summary = run_transform_probes("out/transform", trials=4)

It returns (and writes to ``out_dir/transform_probes.json``) ``{"device", "date", "trials",
"probes": [{"name", "kind", "format", "trials", "mismatches", "first_mismatch", "mma_mismatches"}],
"total_mismatches"}``; a mismatching trial also leaves its raw buffers in
``out_dir/dumps/<probe>.t<trial>.npz`` (``inp``, ``out``, ``codes``).  A mismatch names the
expected (row, col) and bits, and what the element holds instead (:func:`describe`: the code,
or the raw value, the nearest code, and any other format in which the bits are exactly a
code).  :func:`kernels` gives every kernel's PTX (the ptxas test assembles them for sm_90).

Numeric probes encode code ``k`` as the number ``k`` in the element's format: f32, or for
16-bit elements f16 / bf16 as the probe's mma operand types and ``cvt`` destination types say
(:func:`formats16`).  Codes must be exactly representable (:func:`encode` refuses otherwise:
integers up to 2048 in f16, 256 in bf16), so a conversion on the GPU never rounds them.
"""

from __future__ import annotations

import ast
import json
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

from .. import catalog as cat
from ..expr import Formula
from ..catalog.text import header, instruction
from ..transform.engine import NPRun, Program
from ..transform.recipe import Recipe, library, parse_text
from ..transform.spaces import DATA, NP, SIGN, UNDEF, MemLayout, RegLayout
from ..transform.steps import Addr, CvtPack

TARGET, PTX = "sm_90", "8.0"


# ---------------------------------------------------------------------------------------
# Formula -> PTX integer code (unsigned 32-bit, like Formula.z3)

class _Compiler:
    def __init__(self, prefix: str):
        self.lines: list[str] = []
        self.n = 0
        self.prefix = prefix
        self.preds = 0

    def tmp(self) -> str:
        self.n += 1
        return f"%{self.prefix}{self.n}"

    def pred(self) -> str:
        self.preds += 1
        return f"%{self.prefix}p{self.preds}"

    def compile(self, f: Formula, env: dict[str, str]) -> str:
        scope = dict(env)
        for k, v in dict(f.let).items():
            scope[k] = self._e(ast.parse(v, mode="eval").body, scope)
        return self._e(ast.parse(f.src, mode="eval").body, scope)

    def _imm(self, v: int) -> str:
        t = self.tmp()
        self.lines.append(f"mov.u32 {t}, {int(v) & 0xFFFFFFFF};")
        return t

    def _e(self, node, scope) -> str:
        if isinstance(node, ast.Constant):
            return self._imm(int(node.value))
        if isinstance(node, ast.Name):
            return scope[node.id]
        if isinstance(node, ast.BinOp):
            a, b = self._e(node.left, scope), self._e(node.right, scope)
            op = {ast.Add: "add.u32", ast.Sub: "sub.u32", ast.Mult: "mul.lo.u32", ast.FloorDiv: "div.u32",
                  ast.Mod: "rem.u32", ast.LShift: "shl.b32", ast.RShift: "shr.u32", ast.BitAnd: "and.b32",
                  ast.BitOr: "or.b32", ast.BitXor: "xor.b32"}[type(node.op)]
            t = self.tmp()
            self.lines.append(f"{op} {t}, {a}, {b};")
            return t
        if isinstance(node, ast.UnaryOp):
            a = self._e(node.operand, scope)
            t = self.tmp()
            if isinstance(node.op, ast.USub):
                self.lines.append(f"neg.s32 {t}, {a};")
            elif isinstance(node.op, ast.Invert):
                self.lines.append(f"not.b32 {t}, {a};")
            elif isinstance(node.op, ast.Not):
                p = self.pred()
                self.lines += [f"setp.eq.u32 {p}, {a}, 0;", f"selp.u32 {t}, 1, 0, {p};"]
            else:
                return a
            return t
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            a = self._e(node.left, scope)
            op = type(node.ops[0])
            if op in (ast.In, ast.NotIn):
                acc = self._imm(0)
                for elt in node.comparators[0].elts:
                    b = self._e(elt, scope)
                    p, t, u = self.pred(), self.tmp(), self.tmp()
                    self.lines += [f"setp.eq.u32 {p}, {a}, {b};", f"selp.u32 {t}, 1, 0, {p};", f"or.b32 {u}, {acc}, {t};"]
                    acc = u
                if op is ast.NotIn:
                    t = self.tmp()
                    self.lines.append(f"xor.b32 {t}, {acc}, 1;")
                    acc = t
                return acc
            b = self._e(node.comparators[0], scope)
            cmp = {ast.Eq: "eq", ast.NotEq: "ne", ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge"}[op]
            p, t = self.pred(), self.tmp()
            self.lines += [f"setp.{cmp}.u32 {p}, {a}, {b};", f"selp.u32 {t}, 1, 0, {p};"]
            return t
        if isinstance(node, ast.BoolOp):
            vals = [self._e(v, scope) for v in node.values]
            acc = vals[0]
            for v in vals[1:]:
                p1, p2, t = self.pred(), self.pred(), self.tmp()
                comb = "and" if isinstance(node.op, ast.And) else "or"
                self.lines += [f"setp.ne.u32 {p1}, {acc}, 0;", f"setp.ne.{comb}.u32 {p2}, {v}, 0, {p1};",
                               f"selp.u32 {t}, 1, 0, {p2};"]
                acc = t
            return acc
        if isinstance(node, ast.IfExp):
            c, a, b = self._e(node.test, scope), self._e(node.body, scope), self._e(node.orelse, scope)
            p, t = self.pred(), self.tmp()
            self.lines += [f"setp.ne.u32 {p}, {c}, 0;", f"selp.b32 {t}, {a}, {b}, {p};"]
            return t
        if isinstance(node, ast.Call) and node.func.id in ("min", "max"):
            args = [self._e(a, scope) for a in node.args]
            acc = args[0]
            for a in args[1:]:
                t = self.tmp()
                self.lines.append(f"{node.func.id}.u32 {t}, {acc}, {a};")
                acc = t
            return acc
        raise ValueError(f"cannot compile {ast.dump(node)} to PTX")


# ---------------------------------------------------------------------------------------
# Element encodings

def _fmt_of(bits: int, kind: str) -> str:
    if bits == 16:
        return "bf16" if kind == "bf16" else "f16"
    if bits == 32:
        return "f32"
    return "raw"


_WIDTH = {"f16": 16, "bf16": 16, "f32": 32}


def _values(bits: np.ndarray, fmt: str) -> np.ndarray:
    """The numbers (float64) that bit patterns encode in a format."""
    b = np.asarray(bits, dtype=np.int64)
    if fmt == "f16":
        return b.astype(np.uint16).view(np.float16).astype(np.float64)
    if fmt == "bf16":
        return b.astype(np.uint16).view(ml_dtypes.bfloat16).astype(np.float64)
    if fmt == "f32":
        return b.astype(np.uint32).view(np.float32).astype(np.float64)
    raise ValueError(fmt)


def encode(codes: np.ndarray, fmt: str) -> np.ndarray:
    """Bit patterns of integer codes in a format (numeric: the number == the code, exactly;
    a code the format cannot hold is an error, never a silently rounded pattern)."""
    c = np.asarray(codes, dtype=np.int64)
    if fmt == "raw":
        return c.copy()
    if fmt == "f16":
        out = c.astype(np.float16).view(np.uint16).astype(np.int64)
    elif fmt == "bf16":
        out = c.astype(np.float32).astype(ml_dtypes.bfloat16).view(np.uint16).astype(np.int64)   # RNE
    elif fmt == "f32":
        out = c.astype(np.float32).view(np.uint32).astype(np.int64)
    else:
        raise ValueError(f"unknown element format {fmt!r}")
    inexact = _values(out, fmt) != c
    if inexact.any():
        bad = c[inexact]
        raise ValueError(f"codes are not exactly representable in {fmt} (e.g. {int(bad.flat[0])}; "
                         f"{int(inexact.sum())} of {c.size})")
    return out


def decode(bits: np.ndarray, fmt: str) -> np.ndarray:
    """Integer codes of bit patterns; -1 where the number is not an integer (or not finite)."""
    if fmt == "raw":
        return np.asarray(bits, dtype=np.int64)
    v = _values(bits, fmt)
    out = np.where(np.isfinite(v) & (v == np.round(v)), v, -1)
    return out.astype(np.int64)


def _num(v: float):
    """A JSON-safe number (non-finite values as text)."""
    v = float(v)
    if not np.isfinite(v):
        return repr(v)
    return int(v) if v == int(v) else v


def describe(bits: int, fmt: str, codes: np.ndarray, width: int | None = None) -> dict:
    """What a dumped element holds, for a mismatch report.

    ``{"format", "bits", "value", "code", "row", "col"}`` where the bits encode a code of
    the tile exactly; otherwise ``code``/``row``/``col`` are None and ``nearest`` names the
    closest code (by value; by Hamming distance for raw codes), and ``same_bits_as`` lists
    the other formats of that width in which the very same bits are exactly a code (so bf16
    bits decoded as f16 say so)."""
    bits = int(bits)
    w = width or _WIDTH.get(fmt, 32)
    flat = np.asarray(codes, dtype=np.int64).ravel()

    def where(code):
        hit = np.argwhere(codes == code)
        return (int(hit[0][0]), int(hit[0][1])) if len(hit) else None

    def read(f):
        if f == "raw":
            return bits, bits
        v = float(_values(np.array([bits]), f)[0])
        return v, (int(v) if np.isfinite(v) and v == round(v) else None)

    value, code = read(fmt)
    pos = where(code) if code is not None else None
    out = {"format": fmt, "bits": hex(bits), "value": _num(value) if fmt != "raw" else value,
           "code": code if pos else None, "row": pos[0] if pos else None, "col": pos[1] if pos else None}
    if pos:
        return out
    if fmt == "raw":
        dist = np.array([bin(int(x) ^ bits).count("1") for x in flat])
    elif np.isfinite(value):
        dist = np.abs(flat.astype(np.float64) - value)
    else:
        dist = None
    if dist is not None and flat.size:
        k = int(flat[int(np.argmin(dist))])
        r, c = where(k)
        out["nearest"] = {"code": k, "row": r, "col": c, "distance": _num(dist.min())}
    alts = []
    for f in (f for f, fw in _WIDTH.items() if fw == w and f != fmt and fmt != "raw"):
        v, k = read(f)
        p = where(k) if k is not None else None
        if p:
            alts.append({"format": f, "value": _num(v), "code": k, "row": p[0], "col": p[1]})
    out["same_bits_as"] = alts
    return out


def _bits(c, enc: np.ndarray) -> np.ndarray:
    """0/1 per location from contents and per-element encodings enc[row, col]."""
    kind, row, col, bit = (np.asarray(x) for x in c.fields())
    R, C = enc.shape
    ok = (kind == DATA) | (kind == SIGN)
    r, cc = np.where(ok, np.clip(row, 0, R - 1), 0), np.where(ok, np.clip(col, 0, C - 1), 0)
    v = (enc[r, cc] >> np.clip(bit, 0, 62)) & 1
    return np.where(ok, v, 0).astype(np.int64)


def _words(bits: np.ndarray) -> np.ndarray:
    """[..., 32 bits] -> uint32 words."""
    w = np.zeros(bits.shape[:-1], dtype=np.uint64)
    for b in range(bits.shape[-1]):
        w |= (bits[..., b].astype(np.uint64) << np.uint64(b))
    return w.astype(np.uint32)


_CVT_FORMAT = {"f16x2": "f16", "bf16x2": "bf16"}     # cvt destination type -> element format


def formats16(prog: Program) -> set[str]:
    """The number formats of a program's 16-bit elements, from what the instructions say:
    the operand types of mma fragment endpoints and the destination types of cvt packs
    (not from endpoint names: run2 decoded the cvt.bf16x2 probe's bf16 results as f16)."""
    out = set()
    for e in list(prog.sources) + list(prog.targets):
        if isinstance(e, RegLayout) and e.opcode and e.elem_bits == 16:
            et = cat.parse(e.opcode).operands[e.operand].etype
            if et in ("f16", "bf16"):
                out.add(et)
    for st in prog.steps:
        if isinstance(st, CvtPack):
            out.add(_CVT_FORMAT[st.dtype])
    return out


# ---------------------------------------------------------------------------------------
# Probe = one kernel

@dataclass
class Probe:
    name: str
    kind: str                     # "recipe" | "semantics"
    recipe: Recipe
    prog: Program = None
    numeric: bool = False
    fmt16: str = "f16"
    mma_sources: list = field(default_factory=list)   # (src endpoint, form)
    mma_chain: list = field(default_factory=list)     # (target endpoint, form, operand)
    compare_state: bool = False   # semantic probe: compare every written location with the engine
    skip: str = ""

    def __post_init__(self):
        if self.prog is None:
            self.prog = self.recipe.program()
        prog = self.prog
        if any(not st.sm90 for st in prog.steps):
            self.skip = "not executable on sm_90"
            return
        if any(w not in (32,) for n, w in prog.regs.items()
               if any(n in getattr(e, "names", []) for e in list(prog.sources) + list(prog.targets))):
            self.skip = "source/target registers must be 32-bit"
            return
        kinds = formats16(prog)
        if len(kinds) > 1:
            self.skip = f"16-bit elements in several formats ({', '.join(sorted(kinds))})"
            return
        self.fmt16 = kinds.pop() if kinds else "f16"
        for s in prog.sources:
            if isinstance(s, RegLayout) and s.opcode and s.operand in ("c", "d"):
                self.mma_sources.append(s)
        for t in prog.targets:
            if isinstance(t, RegLayout) and t.opcode and t.operand in ("a", "b") and not self.compare_state:
                self.mma_chain.append((t, cat.parse(t.opcode), t.operand))
        has_cvt = any(isinstance(st, CvtPack) for st in prog.steps)
        self.numeric = bool(has_cvt or self.mma_sources or self.mma_chain)
        if self.numeric:
            for e in list(prog.sources) + list(prog.targets):
                if e.elem_bits not in (16, 32):
                    self.skip = "numeric encoding needs 16/32-bit elements"

    @property
    def format(self) -> str:
        """The element encoding the probe uses ("raw" codes, or the 16-bit number format)."""
        return self.fmt16 if self.numeric else "raw"

    # -- geometry ------------------------------------------------------------------------
    @property
    def tile(self) -> tuple[int, int]:
        R = C = 1
        for e in list(self.prog.sources) + list(self.prog.targets):
            if isinstance(e, RegLayout):
                outs = {d.name: d.size for d in e.map.outs}
                R, C = max(R, outs["row"] + e.row_offset), max(C, outs["col"] + e.col_offset)
            else:
                R, C = max(R, e.rows), max(C, e.cols)
        return R, C

    def elem_fmt(self, bits: int) -> str:
        return _fmt_of(bits, self.fmt16) if self.numeric else "raw"

    def codes(self, seed: int) -> np.ndarray:
        """Distinct codes per logical element: 1..n (numeric) or a permutation (raw)."""
        R, C = self.tile
        n = R * C
        rng = np.random.default_rng(seed)
        perm = rng.permutation(n).reshape(R, C).astype(np.int64)
        if self.numeric:
            codes = perm + 1
            for e in list(self.prog.sources) + list(self.prog.targets):
                try:                     # exact in every format an element is encoded in
                    encode(codes, self.elem_fmt(e.elem_bits))
                except ValueError as err:
                    raise ValueError(f"{self.name}: {n} elements: {err}") from None
            return codes
        wmin = min(e.elem_bits for e in list(self.prog.sources) + list(self.prog.targets))
        if n > (1 << wmin):
            raise ValueError(f"{self.name}: {n} elements do not fit {wmin}-bit codes")
        if wmin >= 16:
            # spread codes over the whole width so that swapped bytes are visible
            return (perm * 0x9E37 + 0x5A5A) & ((1 << wmin) - 1) if n <= (1 << 16) else perm
        return perm

    # -- layout of the in / out buffers (u32 words) ----------------------------------------
    def plan(self):
        prog = self.prog
        nrun = NPRun(prog)
        self.nrun = nrun
        nbytes = (nrun.nbits + 7) // 8
        self.smem_bytes = max(16, (nbytes + 15) // 16 * 16)
        off = 0
        self.in_smem = off
        off += self.smem_bytes // 4
        self.in_regs: dict[str, int] = {}
        for s in prog.sources:
            if isinstance(s, RegLayout) and s not in self.mma_sources:
                for n in s.names:
                    self.in_regs[n] = off
                    off += 32
        self.in_mma: list[dict[str, int]] = []
        for s in self.mma_sources:
            form = cat.parse(s.opcode)
            d = {}
            for op in ("a", "b"):
                d[op] = off
                off += 32 * form.operands[op].count
            self.in_mma.append(d)
        self.in_chain: list[dict[str, int]] = []
        for t, form, op in self.mma_chain:
            other = "b" if op == "a" else "a"
            self.in_chain.append({other: off})
            off += 32 * form.operands[other].count
        self.in_words = off
        off = 0
        self.out_regs: dict[str, int] = {}
        names = [n for t in prog.targets if isinstance(t, RegLayout) for n in t.names]
        if self.compare_state:
            names = sorted({n for st in prog.steps for n in st.writes})
        for n in names:
            self.out_regs[n] = off
            off += 32
        self.out_smem = off
        off += self.smem_bytes // 4
        self.out_chain: list[int] = []
        for t, form, op in self.mma_chain:
            self.out_chain.append(off)
            off += 32 * form.operands["d"].count
        self.out_words = off

    # -- PTX -----------------------------------------------------------------------------
    def kernel(self, kname: str) -> str:
        self.plan()
        prog = self.prog
        regs32 = sorted(n for n, w in prog.regs.items() if w == 32)
        regs16 = sorted(n for n, w in prog.regs.items() if w == 16)
        regs64 = sorted(n for n, w in prog.regs.items() if w == 64)
        L = [f".visible .entry {kname}(.param .u64 p_in, .param .u64 p_out)", "{",
             "  .reg .pred %hp<4>;", "  .reg .b32 %hl, %hi, %hv, %hs, %ha;", "  .reg .b64 %hin, %hout, %hq<4>;",
             f"  .shared .align 16 .b8 smem[{self.smem_bytes}];"]
        for grp, t in ((regs32, "b32"), (regs16, "b16"), (regs64, "b64")):
            if grp:
                L.append(f"  .reg .{t} " + ", ".join(grp) + ";")
        vals = sorted(prog.values)
        if vals:
            L.append("  .reg .b32 " + ", ".join(vals) + ";")
        body: list[str] = []
        body += ["ld.param.u64 %hin, [p_in];", "ld.param.u64 %hout, [p_out];", "cvta.to.global.u64 %hin, %hin;",
                 "cvta.to.global.u64 %hout, %hout;", "mov.u32 %hl, %laneid;", "mov.u32 %hs, smem;",
                 "mul.wide.u32 %hq0, %hl, 4;", "add.u64 %hq1, %hin, %hq0;", "add.u64 %hq2, %hout, %hq0;"]
        # shared image: word w = lane + 32 k
        nw = self.smem_bytes // 4
        body += ["mov.u32 %hi, %hl;", "SMEM_IN:", f"setp.ge.u32 %hp0, %hi, {nw};", "@%hp0 bra SMEM_IN_DONE;",
                 "mul.wide.u32 %hq3, %hi, 4;", "add.u64 %hq3, %hin, %hq3;",
                 f"ld.global.u32 %hv, [%hq3+{4 * self.in_smem}];", "shl.b32 %ha, %hi, 2;", "add.u32 %ha, %ha, %hs;",
                 "st.shared.u32 [%ha], %hv;", "add.u32 %hi, %hi, 32;", "bra SMEM_IN;", "SMEM_IN_DONE:", "bar.sync 0;"]
        for n, o in self.in_regs.items():
            body.append(f"ld.global.u32 {n}, [%hq1+{4 * o}];")
        extra_regs: list[str] = []
        for s, offs in zip(self.mma_sources, self.in_mma):
            form = cat.parse(s.opcode)
            k = len(extra_regs)
            ra = [f"%hma{k}_{i}" for i in range(form.operands["a"].count)]
            rb = [f"%hmb{k}_{i}" for i in range(form.operands["b"].count)]
            rc = [f"%hmc{k}_{i}" for i in range(form.operands["c"].count)]
            extra_regs += ra + rb + rc
            for i, r in enumerate(ra):
                body.append(f"ld.global.u32 {r}, [%hq1+{4 * (offs['a'] + 32 * i)}];")
            for i, r in enumerate(rb):
                body.append(f"ld.global.u32 {r}, [%hq1+{4 * (offs['b'] + 32 * i)}];")
            body += [f"mov.b32 {r}, 0;" for r in rc]
            body.append(instruction(form, regs={"a": ra, "b": rb, "c": rc, "d": list(s.names)}))
        # values
        comp = _Compiler("hx")
        addr_vals = {st.addr.base for st in prog.steps if isinstance(getattr(st, "addr", None), Addr)
                     and isinstance(st.addr.base, str)}
        for v in vals:
            r = comp.compile(prog.values[v], {"lane": "%hl"})
            comp.lines.append(f"add.u32 {v}, {r}, %hs;" if v in addr_vals else f"mov.b32 {v}, {r};")
        if comp.n or comp.preds:
            if comp.n:
                L.append(f"  .reg .b32 %hx<{comp.n + 1}>;")
            if comp.preds:
                L.append("  .reg .pred " + ", ".join(f"%hxp{i}" for i in range(1, comp.preds + 1)) + ";")
        body += comp.lines
        body += [st.text if st.text.rstrip().endswith(";") else st.text + ";" for st in prog.steps]
        body.append("bar.sync 0;")
        for n, o in self.out_regs.items():
            w = prog.regs[n]
            if w == 32:
                body.append(f"st.global.u32 [%hq2+{4 * o}], {n};")
            elif w == 16:
                body += [f"cvt.u32.u16 %hv, {n};", f"st.global.u32 [%hq2+{4 * o}], %hv;"]
        body += ["mov.u32 %hi, %hl;", "SMEM_OUT:", f"setp.ge.u32 %hp0, %hi, {nw};", "@%hp0 bra SMEM_OUT_DONE;",
                 "shl.b32 %ha, %hi, 2;", "add.u32 %ha, %ha, %hs;", "ld.shared.u32 %hv, [%ha];",
                 "mul.wide.u32 %hq3, %hi, 4;", "add.u64 %hq3, %hout, %hq3;",
                 f"st.global.u32 [%hq3+{4 * self.out_smem}], %hv;", "add.u32 %hi, %hi, 32;", "bra SMEM_OUT;",
                 "SMEM_OUT_DONE:"]
        for j, ((t, form, op), ins, o) in enumerate(zip(self.mma_chain, self.in_chain, self.out_chain)):
            other = "b" if op == "a" else "a"
            ro = [f"%hco{j}_{i}" for i in range(form.operands[other].count)]
            rc = [f"%hcc{j}_{i}" for i in range(form.operands["c"].count)]
            rd = [f"%hcd{j}_{i}" for i in range(form.operands["d"].count)]
            extra_regs += ro + rc + rd
            for i, r in enumerate(ro):
                body.append(f"ld.global.u32 {r}, [%hq1+{4 * (ins[other] + 32 * i)}];")
            body += [f"mov.b32 {r}, 0;" for r in rc]
            regs = {op: list(t.names), other: ro, "c": rc, "d": rd}
            if form.is_sparse:
                body.append("mov.b32 %hv, 0x44444444;")
                regs["e"] = ["%hv"]
            body.append(instruction(form, regs=regs))
            for i, r in enumerate(rd):
                body.append(f"st.global.u32 [%hq2+{4 * (o + 32 * i)}], {r};")
        if extra_regs:
            L.append("  .reg .b32 " + ", ".join(extra_regs) + ";")
        L += ["  " + b for b in body] + ["  ret;", "}"]
        return "\n".join(L) + "\n"

    # -- host side ------------------------------------------------------------------------
    def inputs(self, seed: int) -> dict[str, Any]:
        if not hasattr(self, "in_words"):      # the buffer plan, as kernel() makes it
            self.plan()
        prog = self.prog
        codes = self.codes(seed)
        R, C = codes.shape
        buf = np.zeros(self.in_words, dtype=np.uint32)
        ops = NP()
        # shared image
        nbits = self.smem_bytes * 8
        A = np.arange(nbits, dtype=np.int64)
        mem_bits = np.zeros(nbits, dtype=np.int64)
        for s in prog.sources:
            if isinstance(s, MemLayout):
                c = s.content(ops, A)
                enc = encode(codes, self.elem_fmt(s.elem_bits))
                mem_bits |= _bits(c, enc)
        buf[self.in_smem:self.in_smem + nbits // 32] = _words(mem_bits.reshape(-1, 32))
        L, B = np.meshgrid(np.arange(32), np.arange(32), indexing="ij")
        for s in prog.sources:
            if isinstance(s, RegLayout) and s not in self.mma_sources:
                enc = encode(codes, self.elem_fmt(s.elem_bits))
                for r, n in enumerate(s.names):
                    c = s.content(ops, L, r, B)
                    buf[self.in_regs[n]:self.in_regs[n] + 32] = _words(_bits(c, enc))
        # accumulator sources from a real mma: A = codes of the columns it covers, B = selection
        for s, offs in zip(self.mma_sources, self.in_mma):
            form = cat.parse(s.opcode)
            m, n, k = form.mnk
            a = np.zeros((m, k), np.int64)
            a[:, :n] = codes[s.row_offset:s.row_offset + m, s.col_offset:s.col_offset + n]
            b = np.zeros((k, n), np.int64)
            b[np.arange(n), np.arange(n)] = 1
            self._pack_into(buf, form, "a", a, offs["a"])
            self._pack_into(buf, form, "b", b, offs["b"])
        rng = np.random.default_rng(seed + 1000)
        chain_other = []
        for (t, form, op), ins in zip(self.mma_chain, self.in_chain):
            other = "b" if op == "a" else "a"
            m, n, k = form.mnk
            shape = (k, n) if other == "b" else (m, k // (2 if form.is_sparse else 1))
            if other == "b" and form.is_sparse:
                shape = (k, n)
            if form.operands["d"].etype == "f32":
                mat = rng.integers(-2, 3, size=shape)
            else:
                # f16 accumulators hold integers exactly only up to 2048: one 1 per column
                # of B (row of A), so D = a permuted copy of the coded tile
                mat = np.zeros(shape, np.int64)
                if other == "b":
                    mat[rng.integers(0, shape[0], size=shape[1]), np.arange(shape[1])] = 1
                else:
                    mat[np.arange(shape[0]), rng.integers(0, shape[1], size=shape[0])] = 1
            self._pack_into(buf, form, other, mat, ins[other])
            chain_other.append(mat)
        return {"buf": buf, "codes": codes, "chain_other": chain_other}

    def _pack_into(self, buf, form, operand, mat, off):
        from ..transform.spaces import fragment_endpoint
        ep = fragment_endpoint(form.opcode, operand)
        et = form.operands[operand].etype
        fmt = {"f16": "f16", "bf16": "bf16", "tf32": "f32", "f32": "f32"}.get(et, "raw")
        enc = encode(mat, fmt) & ((1 << ep.elem_bits) - 1)
        L, B = np.meshgrid(np.arange(32), np.arange(ep.reg_bits), indexing="ij")
        for r in range(len(ep.names)):
            held, row, col, b = ep.logical(NP(), L, r, B)
            bits = np.where(held, (enc[np.clip(row, 0, mat.shape[0] - 1), np.clip(col, 0, mat.shape[1] - 1)]
                                   >> np.clip(b, 0, 62)) & 1, 0)
            buf[off + 32 * r: off + 32 * r + 32] = _words(bits)

    def check(self, out: np.ndarray, inp: dict) -> dict:
        """Compare one dump with the prediction; returns counts and the first mismatch."""
        prog = self.prog
        codes = inp["codes"]
        mism = []
        L, B = np.meshgrid(np.arange(32), np.arange(32), indexing="ij")
        if self.compare_state:
            final = len(prog.steps)
            for n, o in self.out_regs.items():
                w = prog.regs[n]
                words = out[o:o + 32].astype(np.int64)
                got = (words[:, None] >> np.arange(w)[None, :]) & 1
                Lw, Bw = np.meshgrid(np.arange(32), np.arange(w), indexing="ij")
                c = self.nrun.read(final, n, Lw, Bw)
                exp = _bits(c, encode(codes, "raw"))
                care = np.asarray(c.kind) != UNDEF
                bad = care & (got != exp)
                for l, b in np.argwhere(bad)[:1]:
                    mism.append({"lane": int(l), "register": n, "bit": int(b), "expected": int(exp[l, b]),
                                 "got": int(got[l, b])})
                if bad.any():
                    mism[-1]["count"] = int(bad.sum())
            nb = self.smem_bytes * 8
            mem = out[self.out_smem:self.out_smem + nb // 32].view(np.uint8).astype(np.int64)
            got = (mem[:, None] >> np.arange(8)[None, :]).reshape(-1) & 1
            c = self.nrun.read_mem(final, np.arange(nb))
            exp = _bits(c, encode(codes, "raw"))
            bad = (np.asarray(c.kind) != UNDEF) & (got != exp)
            if bad.any():
                a = int(np.nonzero(bad)[0][0])
                mism.append({"shared_byte": a // 8, "bit": a % 8, "expected": int(exp[a]), "got": int(got[a]),
                             "count": int(bad.sum())})
            return {"mismatches": int(sum(m.get("count", 1) for m in mism)), "first": mism[0] if mism else None}
        targets = prog.targets
        if isinstance(targets[0], RegLayout):
            for t in targets:
                fmt = self.elem_fmt(t.elem_bits)
                w = t.elem_bits
                for r, n in enumerate(t.names):
                    words = out[self.out_regs[n]:self.out_regs[n] + 32].astype(np.int64)
                    for e in range(t.reg_bits // w):
                        held, row, col, _ = t.logical(NP(), np.arange(32), r, np.full(32, e * w + t.shift))
                        vb = t.value_bits or w
                        got_bits = (words >> (e * w + t.shift)) & ((1 << vb) - 1)
                        rr, cc = row + t.row_offset, col + t.col_offset
                        exp_bits = encode(codes[np.clip(rr, 0, codes.shape[0] - 1), np.clip(cc, 0, codes.shape[1] - 1)],
                                          fmt) & ((1 << vb) - 1)
                        bad = held & (got_bits != exp_bits)
                        for l in np.nonzero(bad)[0]:
                            m = {"lane": int(l), "register": n, "element": e,
                                 "expected": {"row": int(rr[l]), "col": int(cc[l])}}
                            if not mism:         # the first one is reported in full
                                m.update(format=fmt, expected_bits=hex(int(exp_bits[l])),
                                         got_bits=hex(int(got_bits[l])),
                                         got=describe(got_bits[l], fmt, codes, vb if fmt == "raw" else None))
                            mism.append(m)
        else:
            t = targets[0]
            fmt = self.elem_fmt(t.elem_bits)
            mem = out[self.out_smem:self.out_smem + self.smem_bytes // 4].view(np.uint8).astype(np.int64)
            e = t.map.enumerate()
            w = t.elem_bits
            for row, col, offs in zip(e["row"], e["col"], e["offset"]):
                bit0 = 8 * t.base + int(offs) * w
                val = 0
                for b in range(w):
                    a = bit0 + b
                    val |= ((int(mem[a // 8]) >> (a % 8)) & 1) << b
                exp = int(encode(np.array([codes[row, col]]), fmt)[0]) & ((1 << w) - 1)
                if val != exp:
                    m = {"row": int(row), "col": int(col), "byte": bit0 // 8, "got_bits": hex(val),
                         "expected_bits": hex(exp)}
                    if not mism:
                        m.update(format=fmt, got=describe(val, fmt, codes, w if fmt == "raw" else None))
                    mism.append(m)
        res = {"mismatches": len(mism), "first": mism[0] if mism else None}
        # mma chain
        mm = 0
        first_mm = None
        for (t, form, op), o, other in zip(self.mma_chain, self.out_chain, inp["chain_other"]):
            m, n, k = form.mnk
            tile = codes[t.row_offset:t.row_offset + (m if op == "a" else k),
                         t.col_offset:t.col_offset + (k if op == "a" else n)]
            if form.is_sparse and op == "a":
                # metadata 0x44444444: every chunk's two stored values are its columns 0 and 1
                dense = np.zeros((m, k), np.int64)
                kc = np.arange(k // 2)
                dense[:, 4 * (kc // 2) + (kc % 2)] = codes[:m, :k // 2]
                tile = dense
            A, Bm = (tile, other) if op == "a" else (other, tile)
            exp = A.astype(np.float64) @ Bm.astype(np.float64)
            dep = cat.parse(form.opcode)
            dlay = __import__("formal.transform.spaces", fromlist=["x"]).fragment_endpoint(dep.opcode, "d")
            words = out[o:o + 32 * form.operands["d"].count].reshape(-1, 32).T   # [lane, reg]
            dt = form.operands["d"].etype
            for r in range(form.operands["d"].count):
                for e in range(dlay.epr):
                    held, row, col, _ = dlay.logical(NP(), np.arange(32), r, np.full(32, e * dlay.elem_bits))
                    bits = (words[:, r].astype(np.int64) >> (e * dlay.elem_bits)) & ((1 << dlay.elem_bits) - 1)
                    got = (bits.astype(np.uint32).view(np.float32) if dt == "f32"
                           else bits.astype(np.uint16).view(np.float16)).astype(np.float64)
                    want = exp[np.clip(row, 0, m - 1), np.clip(col, 0, n - 1)]
                    bad = held & (got != want)
                    mm += int(bad.sum())
                    if bad.any() and first_mm is None:
                        l = int(np.nonzero(bad)[0][0])
                        first_mm = {"lane": l, "d_reg": r, "elem": e, "row": int(row[l]), "col": int(col[l]),
                                    "expected": float(want[l]), "got": float(got[l])}
        res["mma_mismatches"] = mm
        res["first_mma_mismatch"] = first_mm
        return res


# ---------------------------------------------------------------------------------------
# Probe sets

def recipe_probes() -> list[Probe]:
    out = []
    for r in library():
        if not r.hardware or r.expect.get("status") != "proved":
            continue
        p = Probe(r.name, "recipe", r)
        if not p.skip:
            out.append(p)
    return out


_PRMT_DEFAULT = [0x3210, 0x7654, 0x5410, 0x7632, 0x0123, 0x4567, 0x89AB, 0xCDEF, 0x8F1E, 0x1032, 0xB3A2, 0x0000]


def semantic_probes() -> list[Probe]:
    """Synthetic programs that exercise every documented mode of each movement."""
    texts = []
    # prmt: every mode x selector; the generic form with sign replication
    for mode in ("f4e", "b4e", "rc8", "ecl", "ecr", "rc16"):
        for s in range(4):
            texts.append((f"prmt.{mode}.{s}", f"prmt.b32.{mode} d, a, b, {s};", "bytes"))
    for c in _PRMT_DEFAULT:
        texts.append((f"prmt.{c:04x}", f"prmt.b32 d, a, b, {c:#06x};", "bytes"))
    texts.append(("prmt.lane_selector", "prmt.b32 d, a, b, sel;", "bytes_sel"))
    # shfl.sync: every mode with odd b / c values
    for mode, b, c in (("idx", 5, 0x1f), ("idx", 37, 0x1f), ("idx", 3, 0x181f), ("idx", 9, 0x1807),
                       ("up", 1, 0), ("up", 3, 0x1800), ("up", 2, 0x1e00),
                       ("down", 1, 0x1f), ("down", 5, 0x101f), ("down", 3, 0x1c0f),
                       ("bfly", 1, 0x1f), ("bfly", 16, 0x1f), ("bfly", 6, 0x181f), ("bfly", 12, 0x0f)):
        texts.append((f"shfl.{mode}.b{b}.c{c:#x}", f"shfl.sync.{mode}.b32 d, a, {b}, {c:#x}, 0xffffffff;", "words"))
    texts.append(("shfl.idx.lane_b", "shfl.sync.idx.b32 d, a, src, 0x1f, 0xffffffff;", "words_src"))
    # ldmatrix / stmatrix: every .num x .trans, one row per lane address
    for num in (1, 2, 4):
        regs = ", ".join(f"d{i}" for i in range(num))
        for tr in ("", ".trans"):
            texts.append((f"ldmatrix.x{num}{tr}", f"ldmatrix.sync.aligned.m8n8.x{num}{tr}.shared.b16 {{{regs}}}, [p];",
                          "ldm"))
            texts.append((f"stmatrix.x{num}{tr}", f"stmatrix.sync.aligned.m8n8.x{num}{tr}.shared.b16 [p], {{{regs}}};",
                          "stm"))
    texts.append(("movmatrix", "movmatrix.sync.aligned.m8n8.trans.b16 d, a;", "halves"))
    texts.append(("cvt.f16x2", "cvt.rn.f16x2.f32 d, a, b;", "cvt"))
    texts.append(("cvt.bf16x2", "cvt.rn.bf16x2.f32 d, a, b;", "cvt"))
    out = []
    for name, step, kind in texts:
        text = _semantic_recipe(name, step, kind)
        r = parse_text(text, name)
        p = Probe(name, "semantics", r, compare_state=kind != "cvt")
        if not p.skip:
            out.append(p)
    return out


def _semantic_recipe(name: str, step: str, kind: str) -> str:
    """A recipe around one step; the target only fixes what the decoder compares."""
    if kind in ("bytes", "bytes_sel"):
        src = 'source registers {a, b} 32x8 b8 row "lane" col "4 * reg + elem"'
        extra = "value sel = ((lane * 7919) ^ (lane << 11)) & 0xffff\n" if kind == "bytes_sel" else ""
        tgt = 'target registers {d} 32x8 b8 row "lane" col "elem"'
        return f"recipe {name}\n{src}\n{extra}step {step}\n{tgt}\n"
    if kind in ("words", "words_src"):
        src = 'source registers {a} 32x2 b16 row "lane" col "elem"'
        extra = "value src = (lane * 7 + 3) % 32\n" if kind == "words_src" else ""
        return f"recipe {name}\n{src}\n{extra}step {step}\ntarget registers {{d}} 32x2 b16 row \"lane\" col \"elem\"\n"
    if kind == "ldm":
        return (f"recipe {name}\nsource tile 32x8 b16 offset \"row * 8 + col\"\nvalue p = 16 * lane\nstep {step}\n"
                f"target registers {{d0}} 32x8 b16 row \"lane\" col \"elem\"\n")
    if kind == "stm":
        # registers with distinct codes; the decoder compares the whole shared image with
        # the engine's prediction (the target line is only there to make a recipe)
        n = step.count(", d") + 1
        regs = ", ".join(f"d{i}" for i in range(n))
        return (f"recipe {name}\nsource registers {{{regs}}} 32x{2 * n} b16 row \"lane\" col \"2 * reg + elem\"\n"
                f"value p = 16 * lane\nstep {step}\n"
                f"target registers {{{regs}}} 32x{2 * n} b16 row \"lane\" col \"2 * reg + elem\"\n")
    if kind == "halves":
        return (f"recipe {name}\nsource registers {{a}} 32x2 b16 row \"lane\" col \"elem\"\nstep {step}\n"
                f"target registers {{d}} 32x2 b16 row \"lane\" col \"elem\"\n")
    if kind == "cvt":
        return (f"recipe {name}\nsource registers {{a, b}} 32x2 b32 row \"lane\" col \"1 - reg\"\nstep {step}\n"
                f"target registers {{d}} 32x2 b16 row \"lane\" col \"elem\"\n")
    raise ValueError(kind)


def all_probes() -> list[Probe]:
    return recipe_probes() + semantic_probes()


def kernels(probes: list[Probe] | None = None) -> list[tuple[str, str]]:
    """(probe name, full PTX module) for every probe (the ptxas test assembles each)."""
    out = []
    for i, p in enumerate(probes if probes is not None else all_probes()):
        out.append((p.name, header(TARGET, PTX) + "\n" + p.kernel(f"tp{i}")))
    return out


# ---------------------------------------------------------------------------------------
# Running (on a CUDA machine)

def trial_seed(t: int) -> int:
    """The code seed of trial ``t`` (a run's trial t is replayed by ``inputs(trial_seed(t))``)."""
    return 1 + 7919 * t


def run_transform_probes(out_dir: str | os.PathLike, trials: int = 4, device: int = 0) -> dict:
    """Run every probe ``trials`` times (different codes / operands per trial) on the GPU;
    write ``transform_probes.json`` and the PTX module to ``out_dir``; return the summary."""
    from .runner import GPU

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    gpu = GPU(device)
    cp = gpu.cp
    probes = all_probes()
    names = [f"tp{i}" for i in range(len(probes))]
    src = header(TARGET if gpu.info.cc == (9, 0) else gpu.info.target, PTX) + "\n" + \
        "\n".join(p.kernel(n) for p, n in zip(probes, names))
    (out_dir / "transform_probes.ptx").write_text(src)
    mod = gpu.load(src, gpu.info.target if gpu.info.cc != (9, 0) else "sm_90")
    results = []
    for p, n in zip(probes, names):
        tot, mm, first, first_mma, err, dumps = 0, 0, None, None, None, []
        try:
            k = mod.get_function(n)
            for t in range(trials):
                inp = p.inputs(seed=trial_seed(t))
                d_in = cp.asarray(inp["buf"])
                d_out = cp.zeros(max(1, p.out_words), cp.uint32)
                k((1,), (32,), (d_in, d_out))
                cp.cuda.runtime.deviceSynchronize()
                out = cp.asnumpy(d_out)
                res = p.check(out, inp)
                tot += res["mismatches"]
                mm += res.get("mma_mismatches", 0)
                first = first or (res["first"] and {"trial": t, **res["first"]})
                fm = res.get("first_mma_mismatch")
                first_mma = first_mma or (fm and {"trial": t, **fm})
                if res["mismatches"] or res.get("mma_mismatches"):
                    # the raw buffers, so that a failure can be replayed on the host
                    (out_dir / "dumps").mkdir(exist_ok=True)
                    f = f"dumps/{p.name}.t{t}.npz"
                    np.savez(out_dir / f, inp=inp["buf"], out=out, codes=inp["codes"])
                    dumps.append(f)
        except Exception as e:          # one broken probe must not hide the others
            err = f"{type(e).__name__}: {e}"
        results.append({"name": p.name, "kind": p.kind, "format": p.format, "trials": trials, "mismatches": tot,
                        "first_mismatch": first, "mma_chained": len(p.mma_chain), "mma_mismatches": mm,
                        "first_mma_mismatch": first_mma, **({"dumps": dumps} if dumps else {}),
                        **({"error": err} if err else {})})
    summary = {"device": gpu.info.to_dict(), "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
               "trials": trials, "probes": results,
               "total_mismatches": sum(r["mismatches"] + r["mma_mismatches"] for r in results),
               "errors": sum(1 for r in results if "error" in r), "n_probes": len(results)}
    (out_dir / "transform_probes.json").write_text(json.dumps(summary, indent=1))
    return summary


def simulate(probes: list[Probe] | None = None, trials: int = 1) -> list[dict]:
    """Host-only dry run: feed each probe's *predicted* output to its own decoder (checks the
    encode/decode plumbing without a GPU; a prediction must decode with zero mismatches)."""
    out = []
    for p in probes if probes is not None else all_probes():
        p.kernel("sim")
        for t in range(trials):
            inp = p.inputs(seed=1 + t)
            dump = predicted_dump(p, inp)
            out.append({"name": p.name, **p.check(dump, inp)})
    return out


def predicted_dump(p: Probe, inp: dict) -> np.ndarray:
    """The output buffer the spec predicts (registers and shared memory; mma D by matmul)."""
    prog = p.prog
    codes = inp["codes"]
    nrun = p.nrun
    final = len(prog.steps)
    out = np.zeros(p.out_words, dtype=np.uint32)
    # encodings per location: numeric recipes convert formats at cvt; the predicted value of
    # a location is the element's encoding in the format of the register width there
    for n, o in p.out_regs.items():
        w = prog.regs[n]
        L, B = np.meshgrid(np.arange(32), np.arange(w), indexing="ij")
        c = nrun.read(final, n, L, B)
        width = _elem_width_at(p, n)
        enc = encode(codes, p.elem_fmt(width))
        bits = _bits(c, enc)
        if w < 32:
            bits = np.concatenate([bits, np.zeros((32, 32 - w), np.int64)], axis=1)
        out[o:o + 32] = _words(bits)
    A = np.arange(p.smem_bytes * 8, dtype=np.int64)
    c = nrun.read_mem(final, A)
    width = min(e.elem_bits for e in list(prog.sources) + list(prog.targets))
    enc = encode(codes, p.elem_fmt(next((e.elem_bits for e in prog.targets if isinstance(e, MemLayout)),
                                        next((e.elem_bits for e in prog.sources if isinstance(e, MemLayout)), width))))
    out[p.out_smem:p.out_smem + p.smem_bytes // 4] = _words(_bits(c, enc).reshape(-1, 32))
    for (t, form, op), o, other in zip(p.mma_chain, p.out_chain, inp["chain_other"]):
        m, n, k = form.mnk
        tile = codes[t.row_offset:t.row_offset + (m if op == "a" else k), t.col_offset:t.col_offset + (k if op == "a" else n)]
        if form.is_sparse and op == "a":
            dense = np.zeros((m, k), np.int64)
            kc = np.arange(k // 2)
            dense[:, 4 * (kc // 2) + (kc % 2)] = codes[:m, :k // 2]
            tile = dense
        A_, B_ = (tile, other) if op == "a" else (other, tile)
        D = A_.astype(np.float64) @ B_.astype(np.float64)
        from ..transform.spaces import fragment_endpoint
        dl = fragment_endpoint(form.opcode, "d")
        et = form.operands["d"].etype
        enc = encode(D.round().astype(np.int64), "f32" if et == "f32" else "f16")
        Lw, Bw = np.meshgrid(np.arange(32), np.arange(32), indexing="ij")
        for r in range(form.operands["d"].count):
            held, row, col, b = dl.logical(NP(), Lw, r, Bw)
            bits = np.where(held, (enc[np.clip(row, 0, m - 1), np.clip(col, 0, n - 1)] >> np.clip(b, 0, 62)) & 1, 0)
            out[o + 32 * r:o + 32 * r + 32] = _words(bits)
    return out


def _elem_width_at(p: Probe, name: str) -> int:
    for t in p.prog.targets:
        if isinstance(t, RegLayout) and name in t.names:
            return t.elem_bits
    for s in p.prog.sources:
        if isinstance(s, RegLayout) and name in s.names:
            return s.elem_bits
    return 16
