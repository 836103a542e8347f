"""Observe wmma fragment maps on a GPU, and run the whole wmma pipeline on random matrices.

What runs (every kernel is plain PTX from :mod:`formal.ptx`, one warp per block, one block
per *run*):

* **load probes** -- for every wmma.load form ptxas accepts for the target: memory holds a
  *coded* matrix (every element slot of the buffer, padding and guards included, carries
  its own position number), the warp executes ``wmma.load`` and every lane writes its
  registers out.  Element positions need up to 11 bits, which 16-bit and wider types hold
  in one run; 8-, 4- and 1-bit types spread the number over several runs ("digit
  planes": 8, 4 or 1 bits of the position per run).  Every plane is run twice, the second
  time with the complemented number, so a register that does not come from memory (a
  constant, a stale value) cannot decode consistently.
* **store probes** -- every wmma.store form: every (lane, register, element) slot holds
  its own code, the warp executes ``wmma.store`` into memory filled with a sentinel, and
  the buffer is read back.
* **pipeline** -- every wmma.mma form, both layouts of A and B and of C/D: wmma.load A, B,
  C from random memory, wmma.mma, wmma.store D.  The memory images and D come back as raw
  element encodings ``[T, M, K]`` etc. for ``formal.evaluate.evaluate_matrices``.

Variants per load/store form: the stride operand omitted (``default``), given equal to
the default (``explicit_default``) and given larger than the default with the padding
coded too (``padded``) -- all through a generic pointer into global memory; plus, for the
padded stride, every other state space (``.global``, ``.shared``, ``.shared::cta``, and a
generic pointer into shared memory).

Addresses come from ``specs/wmma_memory.toml`` (:mod:`formal.wmma.memory`); sub-byte
elements are placed little-endian within a byte (erratum ``subbyte-order``; recorded in
the output as ``memory_packing``).

On a CUDA machine with CuPy::

    python -m formal.hw.wmma_probe OUT_DIR          # or: run_wmma_probes("OUT_DIR")

returns/writes ``wmma_probe_manifest.json``, ``wmma_probe_raw.npz`` (every register dump
and memory image), ``wmma_sm90_observed.json`` (decoded maps, the format of
``specs/observed/``) and ``wmma_pipeline.json`` + ``wmma_pipeline.npz``.
:func:`decode_dir` redoes the decoding from the manifest and the raw data alone.
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from .. import catalog as cat
from .. import ptx as ptxtext
from ..catalog import Form
from ..wmma import memory as wmem

PTX_VERSION = "7.8"            # wmma needs <= 7.1; .shared::cta needs 7.8; sm_90 needs 7.8
TARGET = "sm_90"
PRE_BYTES = 256                # coded guard before the base pointer (also keeps it 256-aligned)
LANES = 32
MEMORY_PACKING = ("little-endian: element j of a buffer occupies bits [j*b, (j+1)*b) counting bit 8*a+i as bit i "
                  "of byte a (specs/wmma_memory.toml [address].bit; erratum subbyte-order)")

# element encodings of the codes: value = BASE + (digit << SHIFT) (| marker for tf32)
_BASE = {"f16": 0x3C00, "bf16": 0x3F80, "f32": 0x3F800000, "tf32": 0x3F800000, "s32": 0x10000000,
         "f64": 0x3FF0000000000000}
_SHIFT = {"tf32": 13}
_SENTINEL = {"f16": 0xC000, "f32": 0xC0000000, "s32": 0x5A5A5A5A, "f64": 0xC000000000000000}
_RAW = {1: np.uint8, 4: np.uint8, 8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


def _tf32_marker(ids: np.ndarray) -> np.ndarray:
    """Low 13 bits of a tf32 code: nonzero, below 0x1000, so truncation, rounding to nearest
    (no carry) and preservation are told apart by reading them back."""
    return ((ids.astype(np.int64) * 37 + 1) & 0x0FFF) | 1


# ----------------------------------------------------------------------------------
# codes

@dataclass(frozen=True)
class Coder:
    """Position numbers in [0, 2**bits) as element values, over `planes` x 2 runs."""

    etype: str
    elem_bits: int
    bits: int

    @property
    def digit_bits(self) -> int:
        return self.bits if self.elem_bits >= 16 else self.elem_bits

    @property
    def planes(self) -> int:
        return max(1, math.ceil(self.bits / self.digit_bits))

    @property
    def runs(self) -> int:
        return 2 * self.planes        # each plane, then its complement

    def digits(self, ids: np.ndarray, run: int) -> np.ndarray:
        plane, comp = divmod(run, 2)
        v = ids.astype(np.int64)
        if comp:
            v = ((1 << self.bits) - 1) - v
        return (v >> (plane * self.digit_bits)) & ((1 << self.digit_bits) - 1)

    def encode(self, ids: np.ndarray, run: int) -> np.ndarray:
        """Raw element values (unsigned, elem_bits wide) of run `run`."""
        d = self.digits(ids, run).astype(np.uint64)
        if self.elem_bits < 16:
            return d
        v = np.uint64(_BASE[self.etype]) + (d << np.uint64(_SHIFT.get(self.etype, 0)))
        if self.etype == "tf32":
            v = v | _tf32_marker(ids).astype(np.uint64)
        return v

    def digit_of(self, raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(digit, valid) of raw element values."""
        raw = raw.astype(np.uint64)
        if self.elem_bits < 16:
            return raw.astype(np.int64), np.ones(raw.shape, bool)
        sh = np.uint64(_SHIFT.get(self.etype, 0))
        base = np.uint64(_BASE[self.etype])
        top = raw >> sh
        b = base >> sh
        ok = top >= b
        d = np.where(ok, top - b, 0).astype(np.int64)
        ok &= d < (1 << self.digit_bits)
        return d, ok

    def decode(self, raws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """raws [runs, ...] -> (ids, consistent): normal and complement runs must agree."""
        n = np.zeros(raws.shape[1:], np.int64)
        c = np.zeros(raws.shape[1:], np.int64)
        ok = np.ones(raws.shape[1:], bool)
        for run in range(self.runs):
            plane, comp = divmod(run, 2)
            d, v = self.digit_of(raws[run])
            ok &= v
            if comp:
                c |= d << (plane * self.digit_bits)
            else:
                n |= d << (plane * self.digit_bits)
        c = ((1 << self.bits) - 1) - c
        return n, ok & (n == c)


def coder_for(etype: str, n_ids: int) -> Coder:
    eb = wmem.spec().element_bits[etype]
    return Coder(etype, eb, max(1, int(n_ids - 1).bit_length()))


# ----------------------------------------------------------------------------------
# memory images (addresses from the spec)

def _bit_positions(n: int, elem_bits: int) -> np.ndarray:
    """Bit address of element j of a buffer, j < n (spec [address].bit with ptr = 0)."""
    j = np.arange(n, dtype=np.int64)
    return np.asarray(wmem.spec().address["bit"].eval({"ptr": 0, "index": j, "elem_bits": elem_bits}), np.int64)


def pack(values: np.ndarray, elem_bits: int, nbytes: int) -> np.ndarray:
    """Element values (element j at spec bit address j * bits) -> little-endian bytes."""
    buf = np.zeros(nbytes, np.uint8)
    pos = _bit_positions(len(values), elem_bits)
    vals = values.astype(np.uint64)
    if elem_bits >= 8:
        for b in range(elem_bits // 8):
            buf[pos // 8 + b] = ((vals >> np.uint64(8 * b)) & np.uint64(0xFF)).astype(np.uint8)
        return buf
    for b in range(elem_bits):
        bit = pos + b
        np.bitwise_or.at(buf, bit // 8, (((vals >> np.uint64(b)) & np.uint64(1)).astype(np.uint8) << (bit % 8)).astype(np.uint8))
    return buf


def unpack(buf: np.ndarray, elem_bits: int, n: int) -> np.ndarray:
    pos = _bit_positions(n, elem_bits)
    out = np.zeros(n, np.uint64)
    if elem_bits >= 8:
        for b in range(elem_bits // 8):
            out |= buf[pos // 8 + b].astype(np.uint64) << np.uint64(8 * b)
        return out
    for b in range(elem_bits):
        bit = pos + b
        out |= ((buf[bit // 8] >> (bit % 8)) & 1).astype(np.uint64) << np.uint64(b)
    return out


def register_fields(words: np.ndarray, reg_bits: int, epr: int) -> np.ndarray:
    """[..., regs] register words -> [..., regs * epr] element fields (lowest bits first)."""
    fb = reg_bits // epr
    w = words.astype(np.uint64)
    parts = [(w >> np.uint64(e * fb)) & np.uint64((1 << fb) - 1 if fb < 64 else 0xFFFFFFFFFFFFFFFF) for e in range(epr)]
    return np.stack(parts, axis=-1).reshape(*words.shape[:-1], -1)


def register_words(fields: np.ndarray, reg_bits: int, epr: int) -> np.ndarray:
    fb = reg_bits // epr
    f = fields.astype(np.uint64).reshape(*fields.shape[:-1], -1, epr)
    out = np.zeros(f.shape[:-1], np.uint64)
    for e in range(epr):
        out |= f[..., e] << np.uint64(e * fb)
    return out


# ----------------------------------------------------------------------------------
# probes

@dataclass
class Probe:
    kind: str                      # load | store | pipeline
    name: str                      # kernel name
    opcode: str                    # the wmma.load/.store/.mma form probed
    variant: str                   # default | explicit_default | padded (load/store); '' pipeline
    window: str                    # global | shared: where the pointer points
    stride: int                    # elements (the default when the operand is omitted)
    stride_operand: bool
    runs: int
    run_bytes: int
    n_ids: int = 0                 # load: coded element positions per run buffer; store: slots
    code_bits: int = 0
    extra: dict = field(default_factory=dict)
    ptx: str = ""

    def manifest(self) -> dict:
        d = asdict(self)
        d.pop("ptx")
        return d


def _round_up(x: int, m: int) -> int:
    return (x + m - 1) // m * m


def _padded_stride(view: wmem.MemoryView) -> int:
    """A legal stride above the default: the default rounded up to the stride modulus, plus one modulus."""
    g = _stride_modulus(view.etype, view.matrix, view.form.shape, view.layout)
    return _round_up(view.default_stride, g) + g


@lru_cache(maxsize=None)
def _stride_modulus(etype: str, matrix: str, shape: str, layout: str) -> int:
    fam = "load" if matrix != "d" else "store"
    op = f"wmma.{fam}.{matrix}.sync.aligned.{layout}.{shape}.{etype}"
    s = wmem.legal_strides(op, ptr_align=PRE_BYTES, enumerate_strides=0)
    if s.empty or s.modulus is None:
        raise RuntimeError(f"no legal stride for {op} with a {PRE_BYTES}-byte aligned pointer")
    return s.modulus


def _kname(prefix: str, i: int) -> str:
    return f"{prefix}{i:04d}"


def _base_forms(family: str, target: str, ptx: str) -> list[Form]:
    return [f for f in cat.forms(target, ptx, family) if f.aligned]


def _addr_lines(space: str, window: str, gbase: str, sbase: str, out: str) -> list[str]:
    """Set `out` to the wmma address for (instruction space, pointer window)."""
    if window == "global":
        if space == "global":
            return [f"cvta.to.global.u64 {out}, {gbase};"]
        return [f"mov.u64 {out}, {gbase};"]          # generic address of global memory
    if space in ("shared", "shared::cta"):
        return [f"mov.u64 {out}, {sbase};"]          # shared-window address
    return [f"cvta.shared.u64 {out}, {sbase};"]       # generic address of shared memory


def _copy_loop(label: str, nwords: int, src: str, dst: str, ld: str, st: str) -> list[str]:
    return [f"mov.u32 %ci, %lane;",
            f"{label}:",
            f"setp.ge.u32 %cp, %ci, {nwords};",
            f"@%cp bra {label}_done;",
            "mul.wide.u32 %co, %ci, 4;",
            f"add.u64 %ca, {src}, %co;",
            f"{ld}.b32 %cw, [%ca];",
            f"add.u64 %ca, {dst}, %co;",
            f"{st}.b32 [%ca], %cw;",
            "add.u32 %ci, %ci, 32;",
            f"bra {label};",
            f"{label}_done:"]


_COPY_REGS = [".reg .b32 %ci, %cw;", ".reg .b64 %co, %ca;", ".reg .pred %cp;"]


def _memory_kernel(p: Probe, form: Form, smem_name: str | None) -> str:
    """Kernel of a load or store probe.

    params: p_mem (u64: R run buffers of run_bytes), p_regs (u64: [R, 32, regs] register
    words), p_stride (u32).  load: memory -> wmma.load -> p_regs.  store: p_regs ->
    wmma.store -> memory.  The run index is %ctaid.x; a block is one warp.
    """
    op = form.operands["r"]
    rb = op.reg_bits // 8
    regs = ptxtext.reg_names(form)["r"]
    body = list(ptxtext.declarations(form)) + _COPY_REGS + [
        ".reg .b64 %mem, %gmem, %gregs, %gbase, %sbase, %t64;",
        ".reg .b32 %lane, %run, %t32;",
        "ld.param.u64 %mem, [p_mem];",
        "ld.param.u64 %t64, [p_regs];",
        "cvta.to.global.u64 %gregs, %t64;",
        "ld.param.u32 %rs, [p_stride];",
        "mov.u32 %lane, %laneid;",
        "mov.u32 %run, %ctaid.x;",
        f"mul.wide.u32 %t64, %run, {p.run_bytes};",
        "add.u64 %gbase, %mem, %t64;",                       # generic pointer to this run's buffer
        "cvta.to.global.u64 %gmem, %gbase;",
        f"mad.lo.u32 %t32, %run, {LANES}, %lane;",
        f"mul.wide.u32 %t64, %t32, {op.count * rb};",
        "add.u64 %gregs, %gregs, %t64;",                     # this lane's register words
    ]
    if smem_name:
        body += [f"mov.u64 %sbase, {smem_name};"]
        body += _copy_loop("Lin", p.run_bytes // 4, "%gmem", "%sbase", "ld.global", "st.shared")
        body += ["bar.sync 0;"]
    sb = "%sbase" if smem_name else "%gbase"
    body += _addr_lines(form.space or "", p.window, "%gbase", sb, "%rp")
    body += [f"add.u64 %rp, %rp, {PRE_BYTES};"]
    st_t = "f64" if op.reg_bits == 64 else "b32"
    imm = ptxtext.Immediates(stride=p.stride_operand)
    if p.kind == "load":
        body += [ptxtext.instruction(form, imm)]
        body += [f"st.global.{st_t} [%gregs+{r * rb}], {regs[r]};" for r in range(op.count)]
    else:
        body += [f"ld.global.{st_t} {regs[r]}, [%gregs+{r * rb}];" for r in range(op.count)]
        body += [ptxtext.instruction(form, imm)]
        if smem_name:
            body += ["bar.sync 0;"]
            body += _copy_loop("Lout", p.run_bytes // 4, "%sbase", "%gmem", "ld.shared", "st.global")
    body += ["ret;"]
    decl = f".shared .align 256 .b8 {smem_name}[{p.run_bytes}];\n" if smem_name else ""
    return (decl + f".visible .entry {p.name}(.param .u64 p_mem, .param .u64 p_regs, .param .u32 p_stride)\n{{\n"
            + "\n".join("  " + b if not b.endswith(":") else b for b in body) + "\n}\n")


def _variants(form: Form) -> list[tuple[str, str]]:
    """(variant, window) pairs probed for a form."""
    if (form.space or "") == "":
        return [("default", "global"), ("explicit_default", "global"), ("padded", "global"), ("padded", "shared")]
    if form.space == "global":
        return [("padded", "global")]
    return [("padded", "shared")]


def memory_probes(kind: str, target: str = TARGET, ptx: str = PTX_VERSION) -> list[Probe]:
    """Load (kind='load') or store (kind='store') probes for every form legal on target/ptx."""
    fam = "wmma.load" if kind == "load" else "wmma.store"
    out = []
    for form in _base_forms(fam, target, ptx):
        view = wmem.memory_view(form)
        for variant, window in _variants(form):
            stride = _padded_stride(view) if variant == "padded" else view.default_stride
            name = _kname("wl" if kind == "load" else "ws", len(out))
            nfoot = view.footprint_elements(stride)
            if kind == "load":
                pre = PRE_BYTES * 8 // view.elem_bits
                post = max(view.ld_size, 64)                   # coded guard after the last instance
                n_ids = pre + nfoot + post
                coder = coder_for(view.etype, n_ids)
                runs = coder.runs
                code_bits = coder.bits
            else:
                n_ids = LANES * view.regs * view.elems_per_reg
                coder = coder_for(view.etype, n_ids)
                runs, code_bits = 2, coder.bits
                pre, post = PRE_BYTES * 8 // view.elem_bits, max(view.ld_size, 64)
            run_bytes = _round_up(((pre + nfoot + post) * view.elem_bits + 7) // 8, 256)
            p = Probe(kind, name, form.opcode, variant, window, stride, variant != "default", runs, run_bytes,
                      n_ids, code_bits, {"pre_elements": pre, "post_elements": post, "footprint_elements": nfoot,
                                         "buffer_elements": pre + nfoot + post, "elem_bits": view.elem_bits,
                                         "etype": view.etype, "regs": view.regs, "reg_bits": view.reg_bits,
                                         "elems_per_reg": view.elems_per_reg, "space": form.space or "",
                                         "legal_under": {rd: wmem.legal_py(view, PRE_BYTES, stride, view.frag_bytes(rd))
                                                         for rd in wmem.READINGS}})
            p.ptx = _memory_kernel(p, form, f"smem_{name}" if window == "shared" else None)
            out.append(p)
    return out


# ----------------------------------------------------------------------------------
# pipeline (load -> mma -> store)

def _mma_parts(f: Form, clayout: str) -> dict[str, Form]:
    a = cat.parse(f"wmma.load.a.sync.aligned.{f.alayout}.{f.shape}.{f.atype}")
    b = cat.parse(f"wmma.load.b.sync.aligned.{f.blayout}.{f.shape}.{f.btype}")
    c = cat.parse(f"wmma.load.c.sync.aligned.{clayout}.{f.shape}.{f.ctype}")
    d = cat.parse(f"wmma.store.d.sync.aligned.{clayout}.{f.shape}.{f.dtype}")
    return {"a": a, "b": b, "c": c, "d": d}


def safe_stride(view: wmem.MemoryView) -> int:
    """The default stride if it is legal under both readings of 'fragment size', else the
    smallest stride that is (erratum default-stride-misaligned: under the 'registers'
    reading the default stride of .f16 m8n32k16 A .col and m32n8k16 B .row is misaligned)."""
    return _round_up(view.default_stride, _stride_modulus(view.etype, view.matrix, view.form.shape, view.layout))


def pipeline_probes(target: str = TARGET, ptx: str = PTX_VERSION, runs: int = 8) -> list[Probe]:
    out = []
    for f in _base_forms("wmma.mma", target, ptx):
        for clayout in ("row", "col"):
            parts = _mma_parts(f, clayout)
            views = {k: wmem.memory_view(v) for k, v in parts.items()}
            strides = {k: safe_stride(v) for k, v in views.items()}
            nbytes = {k: _round_up(v.footprint_elements(strides[k]) * v.elem_bits // 8, 256) for k, v in views.items()}
            name = _kname("wp", len(out))
            p = Probe("pipeline", name, f.opcode, "", "global", 0, any(strides[k] != views[k].default_stride for k in strides),
                      runs, 0, extra={"loads": {k: parts[k].opcode for k in "abc"}, "store": parts["d"].opcode,
                                      "clayout": clayout, "bytes": nbytes, "strides": strides})
            regs = ptxtext.reg_names(f)
            body = list(ptxtext.declarations(f)) + [
                ".reg .b64 %pa, %pb, %pc, %pd, %t64;", ".reg .b32 %run, %sa, %sb, %sc, %sd;", "mov.u32 %run, %ctaid.x;"]
            for k, reg in (("a", "%pa"), ("b", "%pb"), ("c", "%pc"), ("d", "%pd")):
                body += [f"ld.param.u64 {reg}, [p_{k}];", f"mul.wide.u32 %t64, %run, {nbytes[k]};",
                         f"add.u64 {reg}, {reg}, %t64;", f"mov.u32 %s{k}, {strides[k]};"]
            # the stride operand is passed only where the default stride is not used
            imm = {k: ptxtext.Immediates(stride=strides[k] != views[k].default_stride) for k in strides}
            for k in "abc":
                body.append(ptxtext.instruction(parts[k], imm[k], regs={"r": regs[k]}, address=f"%p{k}", stride=f"%s{k}"))
            body.append(ptxtext.instruction(f))
            body.append(ptxtext.instruction(parts["d"], imm["d"], regs={"r": regs["d"]}, address="%pd", stride="%sd"))
            body.append("ret;")
            p.ptx = (f".visible .entry {name}(.param .u64 p_a, .param .u64 p_b, .param .u64 p_c, .param .u64 p_d)\n{{\n"
                     + "\n".join("  " + b for b in body) + "\n}\n")
            out.append(p)
    return out


def module_text(probes: list[Probe], target: str = TARGET, ptx: str = PTX_VERSION) -> str:
    return ptxtext.header(target, ptx) + "\n" + "\n".join(p.ptx for p in probes)


# ----------------------------------------------------------------------------------
# inputs and decoding (host side, no GPU)

def load_inputs(p: Probe) -> np.ndarray:
    """The R run buffers of a load probe, concatenated (uint8)."""
    eb, n = p.extra["elem_bits"], p.extra["buffer_elements"]
    coder = Coder(p.extra["etype"], eb, p.code_bits)
    ids = np.arange(n, dtype=np.int64)
    return np.concatenate([pack(coder.encode(ids, r), eb, p.run_bytes) for r in range(p.runs)])


def store_inputs(p: Probe) -> tuple[np.ndarray, np.ndarray]:
    """(register words [R, 32, regs], memory [R * run_bytes] filled with the sentinel)."""
    x = p.extra
    epr, regs = x["elems_per_reg"], x["regs"]
    coder = Coder(x["etype"], x["elem_bits"], p.code_bits)
    ids = np.arange(LANES * regs * epr, dtype=np.int64).reshape(LANES, regs * epr)
    words = np.stack([register_words(coder.encode(ids, r), x["reg_bits"], epr) for r in range(p.runs)])
    sent = np.full(x["buffer_elements"], _SENTINEL[x["etype"]], np.uint64)
    mem = np.concatenate([pack(sent, x["elem_bits"], p.run_bytes) for _ in range(p.runs)])
    return words.astype(_RAW[x["reg_bits"]]), mem


def _inverse_index(view: wmem.MemoryView, stride: int) -> dict[int, tuple[int, int]]:
    out = {}
    for r in range(view.rows):
        for c in range(view.cols):
            out[int(view.index(r, c, stride))] = (r, c)
    return out


def _map_meta(p: Probe, view: wmem.MemoryView) -> dict:
    return {"id": f"sm90.{p.kind}.{p.opcode}.{p.variant}.{p.window}", "opcode": p.opcode, "kind": p.kind,
            "variant": f"{p.variant}/{p.window}", "space": p.extra["space"], "pointer_window": p.window,
            "stride": p.stride, "stride_operand": p.stride_operand, "legal_under": p.extra.get("legal_under"),
            "shape": view.form.shape, "matrix": view.matrix,
            "type": view.etype, "layout": view.layout, "rows": view.rows, "cols": view.cols,
            "elements": view.regs * view.elems_per_reg, "elems_per_reg": view.elems_per_reg, "regs": view.regs}


def decode_load(p: Probe, dump: np.ndarray) -> dict:
    """Register dump [R, 32, regs] -> map entry: (lane, reg, elem) -> [(row, col)], and anomalies."""
    view = wmem.memory_view(p.opcode)
    x = p.extra
    coder = Coder(x["etype"], x["elem_bits"], p.code_bits)
    fields = register_fields(dump.reshape(p.runs, LANES, x["regs"]), x["reg_bits"], x["elems_per_reg"])
    ids, ok = coder.decode(fields)
    inv = _inverse_index(view, p.stride)
    out = _map_meta(p, view)
    cells, anomalies = [], {"undecodable": [], "outside_matrix": [], "tf32_low_bits": None}
    for lane in range(LANES):
        for i in range(fields.shape[-1]):
            reg, e = divmod(i, x["elems_per_reg"])
            cell = -1
            if not ok[lane, i]:
                anomalies["undecodable"].append([lane, reg, e, [int(v) for v in fields[:, lane, i]]])
            else:
                off = int(ids[lane, i]) - x["pre_elements"]
                if off in inv:
                    cell = inv[off][0] * view.cols + inv[off][1]
                else:
                    anomalies["outside_matrix"].append([lane, reg, e, off])
            cells.append(cell)
    if x["etype"] == "tf32":
        low = (fields[0].astype(np.int64) & 0x1FFF)
        want = _tf32_marker(ids)
        anomalies["tf32_low_bits"] = ("preserved" if (low[ok] == want[ok]).all() else
                                      "zeroed" if (low[ok] == 0).all() else "other")
    out["cells"] = cells
    out["multi"] = {}
    out["anomalies"] = anomalies
    return out


def decode_store(p: Probe, mem: np.ndarray) -> dict:
    """Memory [R * run_bytes] after the store -> map entry (lane, reg, elem) -> cells written."""
    view = wmem.memory_view(p.opcode)
    x = p.extra
    coder = Coder(x["etype"], x["elem_bits"], p.code_bits)
    n = x["buffer_elements"]
    vals = np.stack([unpack(mem[r * p.run_bytes:(r + 1) * p.run_bytes], x["elem_bits"], n) for r in range(p.runs)])
    sent = np.uint64(_SENTINEL[x["etype"]])
    untouched = (vals == sent).all(axis=0)
    ids, ok = coder.decode(vals)
    inv = _inverse_index(view, p.stride)
    E = x["regs"] * x["elems_per_reg"]
    cells_of: dict[int, list] = {}
    anomalies: dict[str, Any] = {"unwritten_cells": [], "written_outside_matrix": [], "garbage": []}
    for pos in range(n):
        off = pos - x["pre_elements"]
        if untouched[pos]:
            if off in inv:
                anomalies["unwritten_cells"].append(list(inv[off]))
            continue
        if not ok[pos] or ids[pos] >= LANES * E:
            anomalies["garbage"].append([off, [int(v) for v in vals[:, pos]]])
            continue
        if off not in inv:
            anomalies["written_outside_matrix"].append([off, int(ids[pos])])
            continue
        cells_of.setdefault(int(ids[pos]), []).append(list(inv[off]))
    out = _map_meta(p, view)
    cells, multi = [], {}
    for k in range(LANES * E):
        cs = [r * view.cols + c for (r, c) in cells_of.get(k, [])]
        cells.append(cs[0] if len(cs) == 1 else -1)
        if len(cs) > 1:
            multi[str(k)] = cs
    out["cells"] = cells
    out["multi"] = multi
    out["anomalies"] = anomalies
    return out


# -- pipeline data ---------------------------------------------------------------------

def _raw_dtype(etype: str):
    return _RAW[max(8, wmem.spec().element_bits[etype])]


def random_elements(etype: str, shape: tuple, rng: np.random.Generator, mode: str) -> np.ndarray:
    """Raw element encodings: 'values' = N(0, 1) rounded to the type (ints: uniform over the
    range), 'bits' = random bit patterns without NaN/Inf (tf32: low 13 bits random too)."""
    import ml_dtypes

    n = int(np.prod(shape))
    if etype in ("s8", "u8"):
        return rng.integers(0, 256, n).astype(np.uint8).reshape(shape)
    if etype in ("s4", "u4"):
        return rng.integers(0, 16, n).astype(np.uint8).reshape(shape)
    if etype == "b1":
        return rng.integers(0, 2, n).astype(np.uint8).reshape(shape)
    if etype == "s32":
        if mode == "values":
            return rng.integers(-(1 << 20), 1 << 20, n).astype(np.int64).astype(np.uint32).reshape(shape)
        return rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32).reshape(shape)
    spec = {"f16": (np.float16, np.uint16, 5, 10), "bf16": (ml_dtypes.bfloat16, np.uint16, 8, 7),
            "f32": (np.float32, np.uint32, 8, 23), "tf32": (np.float32, np.uint32, 8, 23),
            "f64": (np.float64, np.uint64, 11, 52)}[etype]
    ftype, utype, ebits, mbits = spec
    if mode == "values":
        v = rng.standard_normal(n).astype(ftype).view(utype)
        if etype == "tf32":
            v = v & np.uint32(0xFFFFE000)
        return v.reshape(shape)
    total = 1 + ebits + mbits
    raw = rng.integers(0, 1 << 63, n, dtype=np.uint64) & np.uint64((1 << total) - 1 if total < 64 else 0xFFFFFFFFFFFFFFFF)
    exp = (raw >> np.uint64(mbits)) & np.uint64((1 << ebits) - 1)
    raw = np.where(exp == (1 << ebits) - 1, raw ^ (np.uint64(1) << np.uint64(mbits)), raw)   # no Inf/NaN
    return raw.astype(utype).reshape(shape)


def _matrix_to_memory(view: wmem.MemoryView, mat: np.ndarray, nbytes: int, stride: int) -> np.ndarray:
    """[rows, cols] raw encodings -> memory image at `stride` (spec addresses; padding zero)."""
    n = view.footprint_elements(stride)
    flat = np.zeros(n, np.uint64)
    for r in range(view.rows):
        for c in range(view.cols):
            flat[int(view.index(r, c, stride))] = int(mat[r, c])
    return pack(flat, view.elem_bits, nbytes)


def _memory_to_matrix(view: wmem.MemoryView, mem: np.ndarray, stride: int) -> np.ndarray:
    flat = unpack(mem, view.elem_bits, view.footprint_elements(stride))
    out = np.zeros((view.rows, view.cols), np.uint64)
    for r in range(view.rows):
        for c in range(view.cols):
            out[r, c] = flat[int(view.index(r, c, stride))]
    return out


def pipeline_inputs(p: Probe, seed: int) -> dict[str, np.ndarray]:
    """Matrices (raw encodings) and memory images of the R runs; half 'values', half 'bits'."""
    rng = np.random.default_rng(seed)
    x = p.extra
    views = {k: wmem.memory_view(x["loads"][k]) for k in "abc"}
    views["d"] = wmem.memory_view(x["store"])
    mats, mems = {}, {}
    for k in "abc":
        v = views[k]
        ms = [random_elements(v.etype, (v.rows, v.cols), rng, "values" if r < p.runs // 2 else "bits")
              for r in range(p.runs)]
        mats[k] = np.stack(ms).astype(_raw_dtype(v.etype))
        mems[k] = np.concatenate([_matrix_to_memory(v, m, x["bytes"][k], x["strides"][k]) for m in ms])
    mems["d"] = np.zeros(p.runs * x["bytes"]["d"], np.uint8)
    return {"A": mats["a"], "B": mats["b"], "C": mats["c"], "mem_a": mems["a"], "mem_b": mems["b"],
            "mem_c": mems["c"], "mem_d": mems["d"]}


def pipeline_output(p: Probe, mem_d: np.ndarray) -> np.ndarray:
    v = wmem.memory_view(p.extra["store"])
    nb = p.extra["bytes"]["d"]
    return np.stack([_memory_to_matrix(v, mem_d[r * nb:(r + 1) * nb], p.extra["strides"]["d"])
                     for r in range(p.runs)]).astype(_raw_dtype(v.etype))


# ----------------------------------------------------------------------------------
# execution backends

class CupyBackend:
    """Loads one PTX module (driver JIT) and launches probes on GPU `device`."""

    def __init__(self, device: int = 0):
        import cupy as cp

        self.cp = cp
        cp.cuda.Device(device).use()
        props = cp.cuda.runtime.getDeviceProperties(device)
        name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        v = cp.cuda.runtime.driverGetVersion()
        rt = cp.cuda.runtime.runtimeGetVersion()
        self.info = {"name": name, "compute_capability": f"{props['major']}.{props['minor']}",
                     "driver": f"{v // 1000}.{(v % 1000) // 10}", "cuda_runtime": f"{rt // 1000}.{(rt % 1000) // 10}",
                     "cupy": cp.__version__}
        self.mods: list = []
        self._tmp = tempfile.mkdtemp(prefix="wmma_probe_")

    def load(self, text: str, tag: str):
        path = os.path.join(self._tmp, f"{tag}.ptx")
        Path(path).write_text(text)
        return self.cp.RawModule(path=path)

    def run(self, mod, p: Probe, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        cp = self.cp
        k = mod.get_function(p.name)
        if p.kind == "load":
            mem = cp.asarray(inputs["mem"])
            regs = cp.zeros(p.runs * LANES * p.extra["regs"], dtype=_RAW[p.extra["reg_bits"]])
            k((p.runs,), (LANES,), (mem, regs, np.uint32(p.stride)))
            cp.cuda.runtime.deviceSynchronize()
            return {"dump": cp.asnumpy(regs).reshape(p.runs, LANES, p.extra["regs"])}
        if p.kind == "store":
            mem = cp.asarray(inputs["mem"])
            regs = cp.asarray(inputs["regs"].reshape(-1))
            k((p.runs,), (LANES,), (mem, regs, np.uint32(p.stride)))
            cp.cuda.runtime.deviceSynchronize()
            return {"mem": cp.asnumpy(mem)}
        bufs = [cp.asarray(inputs[k_]) for k_ in ("mem_a", "mem_b", "mem_c", "mem_d")]
        k((p.runs,), (LANES,), tuple(bufs))
        cp.cuda.runtime.deviceSynchronize()
        return {"mem_d": cp.asnumpy(bufs[3])}


def _execute(backend, probes: list[Probe], inputs_of, log) -> tuple[dict, dict]:
    """Run probes (one module; per-probe modules if the whole module does not load)."""
    results, errors = {}, {}
    if not probes:
        return results, errors
    try:
        mod = backend.load(module_text(probes), probes[0].kind if probes else "empty")
        mods = {p.name: mod for p in probes}
    except Exception as e:  # noqa: BLE001 - report and fall back to one module per probe
        log(f"module load failed ({type(e).__name__}: {str(e)[:200]}); loading probes one by one")
        mods = {}
        for p in probes:
            try:
                mods[p.name] = backend.load(module_text([p]), p.name)
            except Exception as e2:  # noqa: BLE001
                errors[p.name] = f"load: {type(e2).__name__}: {str(e2)[:300]}"
    for p in probes:
        if p.name not in mods:
            continue
        try:
            results[p.name] = backend.run(mods[p.name], p, inputs_of(p))
        except Exception as e:  # noqa: BLE001 - a sticky CUDA error ends the run; record and stop
            errors[p.name] = f"run: {type(e).__name__}: {str(e)[:300]}"
            log(f"{p.name} ({p.opcode}) failed: {errors[p.name]}")
            if "illegal" in str(e).lower() or "misaligned" in str(e).lower():
                break
    return results, errors


def _load_inputs_of(p: Probe) -> dict:
    if p.kind == "load":
        return {"mem": load_inputs(p)}
    regs, mem = store_inputs(p)
    return {"regs": regs, "mem": mem}


def run_wmma_probes(out_dir: str | os.PathLike, *, device: int = 0, seed: int = 0, pipeline_runs: int = 8,
                    backend=None, target: str = TARGET, ptx: str = PTX_VERSION, log=None,
                    with_pipeline: bool = True, only=None) -> list[Path]:
    """Run every probe on the GPU; write raw data, decoded maps and pipeline data to out_dir.

    Phases, each saved before the next starts (a faulting kernel leaves a dead CUDA context,
    so what may fault runs last): (1) load and store probes legal under both readings of
    'fragment size'; (2) the pipeline; (3) the probes legal only under the 'elements'
    reading (the default stride of .f16 m8n32k16 A .col / m32n8k16 B .row).
    Returns the paths written.  Needs CuPy and a CUDA GPU (``backend`` replaces them in
    tests; ``only(probe) -> bool`` selects a subset).
    """
    log = log or (lambda s: print(s, file=sys.stderr))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    backend = backend or CupyBackend(device)
    info = dict(getattr(backend, "info", {}))
    mems = memory_probes("load", target, ptx) + memory_probes("store", target, ptx)
    pipes = pipeline_probes(target, ptx, pipeline_runs) if with_pipeline else []
    if only is not None:
        mems, pipes = [p for p in mems if only(p)], [p for p in pipes if only(p)]
    safe = [p for p in mems if all(p.extra["legal_under"].values())]
    risky = [p for p in mems if not all(p.extra["legal_under"].values())]
    log(f"{len(safe)} load/store probes, {len(pipes)} pipeline kernels, then {len(risky)} probes legal under one "
        f"reading only; device {info.get('name', backend)}")
    raw: dict[str, np.ndarray] = {}
    errors: dict[str, str] = {}
    manifest = {"meta": {"device": info, "target": target, "ptx": ptx, "memory_packing": MEMORY_PACKING,
                         "pre_bytes": PRE_BYTES, "seed": seed, "time_s": None,
                         "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
                "probes": [p.manifest() for p in safe + risky], "errors": errors}

    def save_memory_phase(res: dict, err: dict) -> None:
        for name, r in res.items():
            raw[name] = r["dump"] if "dump" in r else r["mem"]
        errors.update(err)
        np.savez_compressed(out / "wmma_probe_raw.npz", **raw)
        manifest["meta"]["time_s"] = round(time.time() - t0, 2)
        (out / "wmma_probe_manifest.json").write_text(json.dumps(manifest, indent=1))

    save_memory_phase(*_execute(backend, safe, _load_inputs_of, log))
    paths = [out / "wmma_probe_raw.npz", out / "wmma_probe_manifest.json"]
    if pipes:
        pin = {p.name: pipeline_inputs(p, seed + i) for i, p in enumerate(pipes)}
        res_p, err_p = _execute(backend, pipes, lambda p: pin[p.name], log)
        arrays: dict[str, np.ndarray] = {}
        entries = []
        for p in pipes:
            e = {"kernel": p.name, "opcode": p.opcode, "loads": p.extra["loads"], "store": p.extra["store"],
                 "strides": p.extra["strides"], "runs": p.runs,
                 "modes": ["values"] * (p.runs // 2) + ["bits"] * (p.runs - p.runs // 2), "error": err_p.get(p.name)}
            for k in ("A", "B", "C"):
                arrays[f"{p.name}.{k}"] = pin[p.name][k]
            if p.name in res_p:
                arrays[f"{p.name}.D"] = pipeline_output(p, res_p[p.name]["mem_d"])
            entries.append(e)
        np.savez_compressed(out / "wmma_pipeline.npz", **arrays)
        (out / "wmma_pipeline.json").write_text(json.dumps(
            {"meta": dict(manifest["meta"], seed=seed),
             "how_to_check": "for each entry: formal.evaluate.evaluate_matrices(opcode, A, B, C) == D (raw element "
                             "encodings; arrays '<kernel>.A', '.B', '.C', '.D' in wmma_pipeline.npz)",
             "entries": entries}, indent=1))
        paths += [out / "wmma_pipeline.npz", out / "wmma_pipeline.json"]
    if risky:
        save_memory_phase(*_execute(backend, risky, _load_inputs_of, log))
    paths.append(decode_dir(out))
    log(f"done in {time.time() - t0:.1f}s: {', '.join(str(p) for p in paths)}")
    return paths


def _probe_from_manifest(d: dict) -> Probe:
    return Probe(**{k: v for k, v in d.items() if k in Probe.__dataclass_fields__})


def decode_dir(out_dir: str | os.PathLike, dest: str | os.PathLike | None = None) -> Path:
    """Decode wmma_probe_raw.npz with wmma_probe_manifest.json into the observed-map JSON."""
    out = Path(out_dir)
    man = json.loads((out / "wmma_probe_manifest.json").read_text()) if (out / "wmma_probe_manifest.json").exists() else None
    raw = np.load(out / "wmma_probe_raw.npz")
    if man is None:          # decoding right after the run, before the manifest is final
        raise FileNotFoundError(f"{out / 'wmma_probe_manifest.json'} missing")
    maps = []
    for d in man["probes"]:
        p = _probe_from_manifest(d)
        if p.name not in raw.files:
            continue
        maps.append(decode_load(p, raw[p.name]) if p.kind == "load" else decode_store(p, raw[p.name]))
    meta = dict(man["meta"])
    meta.update({"evidence": "silicon", "archs": [man["meta"]["target"]],
                 "run": {"errors": man.get("errors", {}), "probes": len(man["probes"])}})
    dest = Path(dest) if dest else out / "wmma_sm90_observed.json"
    dest.write_text(json.dumps({"meta": meta, "maps": maps}))
    return dest


def condense(observed: str | os.PathLike, dest: str | os.PathLike) -> Path:
    """The file to check in under specs/observed/: one map per form (the canonical variant:
    stride operand omitted, generic pointer into global memory; else the first variant),
    with every other variant of the form summarised as agreeing or not (and where)."""
    doc = json.loads(Path(observed).read_text())
    groups: dict[str, list[dict]] = {}
    for m in doc["maps"]:
        key = m["opcode"].replace(f".{m['space']}.", ".") if m["space"] else m["opcode"]
        groups.setdefault(f"{m['kind']}:{key}", []).append(m)
    out = []
    for key, ms in groups.items():
        canon = next((m for m in ms if m["variant"] == "default/global"), ms[0])
        c = dict(canon)
        c["id"] = f"sm90.{canon['kind']}.{canon['shape']}.{canon['matrix']}.{canon['type']}.{canon['layout']}"
        c["variants"] = []
        for m in ms:
            if m is canon:
                continue
            diff = [k for k, (a, b) in enumerate(zip(m["cells"], canon["cells"])) if a != b]
            c["variants"].append({"opcode": m["opcode"], "variant": m["variant"], "stride": m["stride"],
                                  "same_as_canonical": not diff and m["multi"] == canon["multi"],
                                  "differing_slots": diff[:8], "n_differing": len(diff),
                                  "anomalies": {k: (len(v) if isinstance(v, list) else v) for k, v in m["anomalies"].items()}})
        out.append(c)
    dest = Path(dest)
    dest.write_text(json.dumps({"meta": doc["meta"], "maps": out}, separators=(",", ":")))
    return dest


# ----------------------------------------------------------------------------------
# a simulated device (tests): executes the kernels' contract under a hypothetical map

class SimulatedBackend:
    """Runs probes as the kernels would if the hardware used `maps` (tests only: no PTX is
    interpreted).  maps: (opcode) -> array [32, elements] of cell index row * cols + col."""

    info = {"name": "simulated"}

    def __init__(self, maps_for):
        self.maps_for = maps_for

    def load(self, text: str, tag: str):
        return None

    def run(self, mod, p: Probe, inputs: dict) -> dict:
        if p.kind == "pipeline":
            # no arithmetic here: D := C when the types agree (exercises packing and layouts)
            vc, vd = wmem.memory_view(p.extra["loads"]["c"]), wmem.memory_view(p.extra["store"])
            nb, nd = p.extra["bytes"]["c"], p.extra["bytes"]["d"]
            out = np.zeros(p.runs * nd, np.uint8)
            if vc.etype == vd.etype:
                for r in range(p.runs):
                    m = _memory_to_matrix(vc, inputs["mem_c"][r * nb:(r + 1) * nb], p.extra["strides"]["c"])
                    out[r * nd:(r + 1) * nd] = _matrix_to_memory(vd, m, nd, p.extra["strides"]["d"])
            return {"mem_d": out}
        view = wmem.memory_view(p.opcode)
        x = p.extra
        tab = self.maps_for(p.opcode)                       # [32, E] cells
        E = x["regs"] * x["elems_per_reg"]
        rows, cols = view.rows, view.cols
        if p.kind == "load":
            out = np.zeros((p.runs, LANES, x["regs"]), np.uint64)
            for r in range(p.runs):
                buf = inputs["mem"][r * p.run_bytes:(r + 1) * p.run_bytes]
                vals = unpack(buf, x["elem_bits"], x["buffer_elements"])
                fields = np.zeros((LANES, E), np.uint64)
                for lane in range(LANES):
                    for i in range(E):
                        rr, cc = divmod(int(tab[lane, i]), cols)
                        fields[lane, i] = vals[x["pre_elements"] + int(view.index(rr, cc, p.stride))]
                fb = x["reg_bits"] // x["elems_per_reg"]
                if fb < 64:
                    fields &= np.uint64((1 << fb) - 1)
                out[r] = register_words(fields, x["reg_bits"], x["elems_per_reg"])
            return {"dump": out.astype(_RAW[x["reg_bits"]])}
        mem = inputs["mem"].copy()
        words = inputs["regs"].reshape(p.runs, LANES, x["regs"])
        for r in range(p.runs):
            fields = register_fields(words[r], x["reg_bits"], x["elems_per_reg"])
            buf = mem[r * p.run_bytes:(r + 1) * p.run_bytes]
            vals = unpack(buf, x["elem_bits"], x["buffer_elements"])
            for lane in range(LANES):
                for i in range(E):
                    rr, cc = divmod(int(tab[lane, i]), cols)
                    vals[x["pre_elements"] + int(view.index(rr, cc, p.stride))] = fields[lane, i]
            mem[r * p.run_bytes:(r + 1) * p.run_bytes] = pack(vals, x["elem_bits"], p.run_bytes)
        del rows
        return {"mem": mem}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m formal.hw.wmma_probe OUT_DIR [--device N] [--seed S]", file=sys.stderr)
        return 2
    out = argv[0]
    dev = int(argv[argv.index("--device") + 1]) if "--device" in argv else 0
    seed = int(argv[argv.index("--seed") + 1]) if "--seed" in argv else 0
    for pth in run_wmma_probes(out, device=dev, seed=seed):
        print(pth)
    return 0


if __name__ == "__main__":
    sys.exit(main())
