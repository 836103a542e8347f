"""Observe wmma fragment maps on a GPU, and run the whole wmma pipeline on random matrices.

What runs (every kernel is plain PTX from :mod:`formal.catalog.text`, one warp per block, one block
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
  element encodings ``[T, M, K]`` etc. for ``formal.evaluate.evaluate_matrices``
  (:func:`formal.wmma.check_pipeline_data`).
* **alignment sweep** -- :func:`run_wmma_alignment_probes`: for every load/store family and
  state space, which base offsets and strides fault, each probe's verdict isolated; see the
  section "alignment probes" below.

Execution is fault-isolated (:func:`run_isolated`): every probe is one kernel launch run by a
worker process (``formal/wmma/cuda_worker.py``) that synchronises and checks after every
launch, and after a fault continues only in a fresh CUDA context.  A misaligned address is a
*sticky* error -- run2 (2026-11-22) lost 782 of 798 probes and every pipeline kernel to one
fault, and the two later errors it logged were that fault's leftover.

Variants per load/store form: the stride operand omitted (``default``), given equal to
the default (``explicit_default``) and given larger than the default with the padding
coded too (``padded``) -- all through a generic pointer into global memory; plus, for the
padded stride, every other state space (``.global``, ``.shared``, ``.shared::cta``, and a
generic pointer into shared memory).

Addresses come from ``specs/wmma_memory.toml`` (:mod:`formal.wmma.memory`); sub-byte
elements are placed little-endian within a byte (erratum ``subbyte-order``; recorded in
the output as ``memory_packing``).

On a CUDA machine (driver API through ctypes; CuPy as the fallback)::

    python -m formal.hw.wmma_probe OUT_DIR               # or: run_wmma_probes("OUT_DIR")
    python -m formal.hw.wmma_probe --alignment OUT_DIR   # or: run_wmma_alignment_probes("OUT_DIR")

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
from ..catalog import text as ptxtext
from ..catalog import Form
from ..wmma import memory as wmem
# the probe design (formal.wmma.probes) this module runs; its names stay importable from here
from ..wmma.probes import (  # noqa: F401
    PTX_VERSION, TARGET, PRE_BYTES, LANES, _RAW, _bit_positions, pack, unpack, register_fields,
    register_words, _round_up, _stride_modulus, _base_forms, _addr_lines, _copy_loop, _COPY_REGS,
    safe_stride, ALIGN_PRE, ALIGN_OFFSETS, PITCH_ALIGNS, ALIGN_KERNELS, CORE_WINDOWS, _exact_align,
    AlignProbe, _pitch_strides, _align_verdicts, _align_kernel, AlignKernel, alignment_probes, align_tier,
    _family_rng, align_codes, _cell_index, _place, _extract, _cell_mask, align_inputs,
)

MEMORY_PACKING = ("little-endian: element j of a buffer occupies bits [j*b, (j+1)*b) counting bit 8*a+i as bit i "
                  "of byte a (specs/wmma_memory.toml [address].bit; erratum subbyte-order)")

# element encodings of the codes: value = BASE + (digit << SHIFT) (| marker for tf32)
_BASE = {"f16": 0x3C00, "bf16": 0x3F80, "f32": 0x3F800000, "tf32": 0x3F800000, "s32": 0x10000000,
         "f64": 0x3FF0000000000000}
_SHIFT = {"tf32": 13}
_SENTINEL = {"f16": 0xC000, "f32": 0xC0000000, "s32": 0x5A5A5A5A, "f64": 0xC000000000000000}


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




def _padded_stride(view: wmem.MemoryView, rule: str = "map") -> int:
    """A legal stride above the default: the default rounded up to a modulus, plus one modulus.

    rule 'text' (run2): the modulus of the alignment rule ('registers' reading).  On the
    H100 it faulted for wmma.load.a .row .m16n16k16 .shared .s8 (stride 24: a 24-byte
    pitch; ptxas lowers .shared loads of 8/16-bit A/B fragments to LDSM, which needs
    16-byte aligned rows).  rule 'map' (default since run3): also a multiple of 16 bytes
    and legal under both readings, so that the map probes observe every form; what
    faults is measured separately by :func:`run_wmma_alignment_probes`.
    """
    g = _stride_modulus(view.etype, view.matrix, view.form.shape, view.layout)
    if rule == "map":
        g16 = 128 // math.gcd(128, view.elem_bits)          # elements in 16 bytes
        g_el = _stride_modulus(view.etype, view.matrix, view.form.shape, view.layout, "elements")
        g = math.lcm(g, g16, g_el)
    elif rule != "text":
        raise ValueError(f"unknown padded-stride rule {rule!r}")
    return _round_up(view.default_stride, g) + g




def _kname(prefix: str, i: int) -> str:
    return f"{prefix}{i:04d}"










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


def memory_probes(kind: str, target: str = TARGET, ptx: str = PTX_VERSION, padded: str = "map") -> list[Probe]:
    """Load (kind='load') or store (kind='store') probes for every form legal on target/ptx
    (`padded`: the padded-stride rule, see :func:`_padded_stride`)."""
    fam = "wmma.load" if kind == "load" else "wmma.store"
    out = []
    for form in _base_forms(fam, target, ptx):
        view = wmem.memory_view(form)
        for variant, window in _variants(form):
            stride = _padded_stride(view, padded) if variant == "padded" else view.default_stride
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
    idx = _cell_indices(view.opcode, stride)
    for r in range(view.rows):
        for c in range(view.cols):
            flat[idx[r][c]] = int(mat[r, c])
    return pack(flat, view.elem_bits, nbytes)


def _memory_to_matrix(view: wmem.MemoryView, mem: np.ndarray, stride: int) -> np.ndarray:
    flat = unpack(mem, view.elem_bits, view.footprint_elements(stride))
    out = np.zeros((view.rows, view.cols), np.uint64)
    idx = _cell_indices(view.opcode, stride)
    for r in range(view.rows):
        for c in range(view.cols):
            out[r, c] = flat[idx[r][c]]
    return out


@lru_cache(maxsize=4096)
def _cell_indices(opcode: str, stride: int) -> tuple[tuple[int, ...], ...]:
    """view.index(r, c, stride) of every cell, [row][col] (the simulated device asks for the same
    form and stride once per run and lane)."""
    view = wmem.memory_view(opcode)
    return tuple(tuple(int(view.index(r, c, stride)) for c in range(view.cols)) for r in range(view.rows))


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
# fault-isolated execution: every job is one kernel launch, run in a worker process
# (formal/wmma/cuda_worker.py) that owns one CUDA context and stops at its first fault

WORKER = Path(__file__).resolve().parent.parent / "wmma" / "cuda_worker.py"


@dataclass
class JobRecord:
    """What happened to one job: ok | fault | load_error | context_error | crash | timeout | not_run | init_error.

    A ``fault`` is an error of the job's own launch (the context was healthy just before);
    `error_class` says which: misaligned | illegal_address | other."""

    status: str
    error: str | None = None
    seconds: float | None = None
    attempt: int = 0                   # which worker process ran it (1, 2, ...)
    isolated: bool = False             # ran in a worker process of its own
    context: int = 0                   # which CUDA context of that worker (a new one after every fault)
    out: dict | None = None            # where the worker put the output buffers (ok jobs)

    @property
    def error_class(self) -> str | None:
        if self.status != "fault":
            return None
        e = (self.error or "").lower()
        if "misaligned" in e:
            return "misaligned"
        if "illegal" in e and "address" in e:
            return "illegal_address"
        return "other"

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("out")
        d["error_class"] = self.error_class
        return d


def _segments(jobs: list[dict], isolate: set[str], workers: int) -> list[list[dict]]:
    """Segments in priority order (job['tier'], then as given): per tier, each isolated job alone,
    then the others in at most `workers` runs of consecutive jobs."""
    segs: list[list[dict]] = []
    for t in sorted({j.get("tier", 0) for j in jobs}):
        group = [j for j in jobs if j.get("tier", 0) == t]
        segs += [[j] for j in group if j["name"] in isolate]
        plain = [j for j in group if j["name"] not in isolate]
        if plain:
            size = -(-len(plain) // max(1, min(workers, len(plain))))
            segs += [plain[i:i + size] for i in range(0, len(plain), size)]
    return segs


def run_isolated(jobs: list[dict], root: str | os.PathLike, *, workers: int = 8, isolate: set[str] | None = None,
                 device: int = 0, deadline_s: float | None = None, child_timeout_s: float = 300.0,
                 simulate: str | bool | None = None, backend: str = "driver",
                 log=None) -> tuple[dict[str, JobRecord], dict]:
    """Run launch jobs (format: formal/wmma/cuda_worker.py) with exact fault attribution.

    Each worker process runs a segment of jobs, synchronising and checking after every
    launch.  After a fault the worker drops its context and continues in a fresh, checked
    one (driver backend), or exits and a fresh worker takes the rest of the segment (CuPy
    backend, or when no fresh context can be made).  Jobs named in `isolate` run in a
    worker process of their own.  Up to `workers` processes run at once (a fault kills
    only its own context).  After `deadline_s` no new worker starts and running workers
    are stopped (the jobs left are ``not_run``).  `simulate`: 'plain' / 'recover' (tests:
    the stand-in device without / with fresh contexts).  Outputs: ``root/res/<name>.npz``.
    Returns ({name: JobRecord}, device info).
    """
    import subprocess
    import threading
    from collections import deque

    log = log or (lambda s: print(s, file=sys.stderr))
    root = Path(root)
    _close_inputs(root)
    res = root / "res"
    res.mkdir(parents=True, exist_ok=True)
    isolate = set(isolate or ())
    queue = deque(_segments(jobs, isolate, workers))
    records: dict[str, JobRecord] = {}
    info: dict = {}
    lock = threading.Lock()
    counter = [0]
    t_end = None if deadline_s is None else time.time() + deadline_s

    def one(seg: list[dict]) -> list[dict]:
        """Run a worker on `seg`; return the jobs it did not reach."""
        with lock:
            counter[0] += 1
            attempt = counter[0]
        f = root / "seg" / f"s{attempt:05d}.json"
        f.parent.mkdir(exist_ok=True)
        f.write_text(json.dumps({"root": str(root), "jobs": seg}))
        sim = {True: "plain", "plain": "plain", "recover": "recover"}.get(simulate) if simulate else None
        cmd = ([sys.executable, str(WORKER), str(f), str(res), "--device", str(device), "--backend", backend]
               + ({"plain": ["--simulate"], "recover": ["--simulate-recover"]}[sim] if sim else []))
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        timed_out = False
        limit = child_timeout_s if t_end is None else max(1.0, min(child_timeout_s, t_end - time.time() + 5.0))
        try:
            out, err = proc.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            proc.kill()                       # our own child, by its handle
            out, err = proc.communicate()
            timed_out = True
        events = []
        for line in out.splitlines():
            try:
                events.append(json.loads(line))
            except ValueError:
                continue
        started, done = None, set()
        iso = len(seg) == 1 and seg[0]["name"] in isolate
        with lock:
            for ev in events:
                if ev.get("event") == "device" and not info:
                    info.update(ev["info"])
                    if ev.get("note"):
                        info["note"] = ev["note"]
                        log(f"worker {attempt}: {ev['note']}")
                elif ev.get("event") == "init_error":
                    for j in seg:
                        records[j["name"]] = JobRecord("init_error", ev.get("error"), attempt=attempt, isolated=iso)
                    log(f"worker {attempt}: no device: {ev.get('error')}")
                    return []
                elif ev.get("event") == "start":
                    started = ev["name"]
                elif ev.get("event") == "done":
                    done.add(ev["name"])
                    records[ev["name"]] = JobRecord(ev["status"], ev.get("error"), ev.get("seconds"), attempt, iso,
                                                    ev.get("context", 0), ev.get("out"))
                    if ev["status"] != "ok":
                        log(f"{ev['name']}: {ev['status']}: {ev.get('error')}")
            if started is not None and started not in done:
                why = "timeout" if timed_out else "crash"
                if timed_out and t_end is not None and time.time() >= t_end:
                    why = "not_run"             # stopped at the deadline, not a verdict
                records[started] = JobRecord(why, f"worker exit {proc.returncode}: {err.strip()[-300:]}",
                                             attempt=attempt, isolated=iso)
                done.add(started)
                log(f"{started}: {why} (worker exit {proc.returncode})")
            if started is None and proc.returncode not in (0, None):
                # died before reporting anything: do not loop on it
                for j in seg:
                    records[j["name"]] = JobRecord("crash", f"worker exit {proc.returncode}: {err.strip()[-300:]}",
                                                   attempt=attempt, isolated=iso)
                return []
        reached = [i for i, j in enumerate(seg) if j["name"] in done]
        last = max(reached) if reached else -1
        return seg[last + 1:]

    barren = [0]          # worker processes in a row that ended without a single ok job

    def worker_loop() -> None:
        while True:
            with lock:
                if not queue:
                    return
                seg = queue.popleft()
                stop = ("deadline" if t_end is not None and time.time() > t_end else
                        "device unusable: many workers in a row ended without one job done" if barren[0] > 3 * workers + 3
                        else None)
            if stop:
                with lock:
                    for j in seg:
                        records.setdefault(j["name"], JobRecord("not_run", stop))
                continue
            rest = one(seg)
            with lock:
                ran = [records.get(j["name"]) for j in seg]
                barren[0] = 0 if any(r is not None and r.status == "ok" for r in ran) else barren[0] + 1
                if rest:
                    queue.appendleft(rest)     # continue the same run of jobs in a fresh context

    threads = [threading.Thread(target=worker_loop) for _ in range(max(1, workers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for j in jobs:
        records.setdefault(j["name"], JobRecord("not_run", "never reached"))
    return records, info


_BLOBS: dict[str, Any] = {}


def _write_job_inputs(root: Path, name: str, arrays: dict[str, np.ndarray]) -> dict[str, list]:
    """Append a job's input arrays to root/in.bin; returns {buffer: [file, offset, bytes]}."""
    from ..wmma.cuda_worker import BlobWriter

    key = str(root)
    if key not in _BLOBS:
        _BLOBS[key] = BlobWriter(Path(root) / "in.bin")
    return {k: _BLOBS[key].put(a) for k, a in arrays.items()}


def _close_inputs(root: Path) -> None:
    w = _BLOBS.pop(str(root), None)
    if w is not None:
        w.close()


def _read_outputs(root: Path, rec: "JobRecord") -> dict[str, np.ndarray]:
    from ..wmma.cuda_worker import read_ref

    return {k: read_ref(root / "res", ref) for k, ref in (rec.out or {}).items()}


def _write_ptx(root: Path, kernel: str, text: str) -> str:
    (root / "k").mkdir(parents=True, exist_ok=True)
    rel = f"k/{kernel}.ptx"
    p = root / rel
    if not p.exists():
        p.write_text(text)
    return rel


def probe_job(p: Probe, inputs: dict[str, np.ndarray], root: Path, target: str = TARGET, ptx: str = PTX_VERSION) -> dict:
    """The launch job of a load / store / pipeline probe (the kernels of :func:`memory_probes`
    and :func:`pipeline_probes`, their inputs written under `root`)."""
    rel = _write_ptx(root, p.name, module_text([p], target, ptx))
    job = {"name": p.name, "ptx": rel, "kernel": p.name, "grid": p.runs, "block": LANES}
    if p.kind == "pipeline":
        files = _write_job_inputs(root, p.name, {k: inputs[k] for k in ("mem_a", "mem_b", "mem_c")})
        job["bufs"] = [{"name": k, "bytes": int(inputs[k].nbytes), "init": files[k], "align": 1024}
                       for k in ("mem_a", "mem_b", "mem_c")]
        job["bufs"].append({"name": "mem_d", "bytes": int(inputs["mem_d"].nbytes), "align": 1024, "out": True})
        job["args"] = [{"buf": k} for k in ("mem_a", "mem_b", "mem_c", "mem_d")]
        return job
    regs_bytes = p.runs * LANES * p.extra["regs"] * p.extra["reg_bits"] // 8
    if p.kind == "load":
        files = _write_job_inputs(root, p.name, {"mem": inputs["mem"]})
        job["bufs"] = [{"name": "mem", "bytes": int(inputs["mem"].nbytes), "init": files["mem"], "align": 1024},
                       {"name": "regs", "bytes": regs_bytes, "align": 256, "out": True}]
    else:
        files = _write_job_inputs(root, p.name, {"mem": inputs["mem"], "regs": inputs["regs"]})
        job["bufs"] = [{"name": "mem", "bytes": int(inputs["mem"].nbytes), "init": files["mem"], "align": 1024, "out": True},
                       {"name": "regs", "bytes": regs_bytes, "init": files["regs"], "align": 256}]
    job["args"] = [{"buf": "mem"}, {"buf": "regs"}, {"u32": int(p.stride)}]
    return job


def probe_result(p: Probe, out: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A job's output buffers as the probe's result arrays (load: dump [R, 32, regs]; store: mem; pipeline: mem_d)."""
    if p.kind == "load":
        return {"dump": out["regs"].view(_RAW[p.extra["reg_bits"]]).reshape(p.runs, LANES, p.extra["regs"])}
    if p.kind == "store":
        return {"mem": out["mem"]}
    return {"mem_d": out["mem_d"]}


# ----------------------------------------------------------------------------------
# alignment probes: which base-pointer alignments and strides fault on the device
#
# One kernel per (family, state space, pointer window, stride mode); the byte offset
# added to a 256-aligned base and the stride are kernel parameters, so one kernel serves
# the whole sweep of its family.  Every probe is one launch; it runs in the fault-isolated
# executor, so each verdict (ok / fault) belongs to exactly that probe.  A probe that
# does not fault must also move the right data: memory holds the same random matrix
# (cells coded by (row, col), padding random per probe) wherever it is placed, so a
# correct wmma.load gives the same registers in every probe of a family, and a correct
# wmma.store writes the same cells and nothing else.

RUN2_FAILED = ("wl0016", "wl0063", "wp0000")   # the three errors of run2 (2026-11-22), re-run alone
































def align_job(p: AlignProbe, k: AlignKernel, root: Path, target: str = TARGET, ptx: str = PTX_VERSION) -> dict:
    rel = _write_ptx(root, k.kernel, ptxtext.header(target, ptx) + "\n" + k.ptx)
    inp = align_inputs(p)
    files = _write_job_inputs(root, p.name, inp)
    rbytes = LANES * p.regs * p.reg_bits // 8
    bufs = [{"name": "mem", "bytes": p.run_bytes, "init": files["mem"], "align": 1024, "out": p.kind == "store"},
            {"name": "regs", "bytes": rbytes, "align": 256, "out": p.kind == "load"},
            {"name": "info", "bytes": 8, "align": 256, "out": True}]
    if p.kind == "store":
        bufs[1]["init"] = files["regs"]
    return {"name": p.name, "ptx": rel, "kernel": k.kernel, "grid": 1, "block": LANES, "bufs": bufs,
            "args": [{"buf": "mem"}, {"buf": "regs"}, {"buf": "info"}, {"u64": p.offset}, {"u32": p.stride}]}


def align_outcome(p: AlignProbe, out: dict[str, np.ndarray]) -> dict:
    """What a probe that did not fault did: the address it used, and (load) its registers /
    (store) the matrix it wrote and whether it wrote outside the matrix."""
    view = wmem.memory_view(p.family)
    addr = int(out["info"].view(np.uint64)[0])
    res: dict[str, Any] = {"address_low_bits": addr % 1024, "address_offset_ok": (addr - ALIGN_PRE - p.offset) % 1024 == 0}
    if p.kind == "load":
        res["regs"] = out["regs"].view(_RAW[p.reg_bits]).reshape(LANES, p.regs)
        return res
    before = align_inputs(p)["mem"]
    after = out["mem"]
    start = ALIGN_PRE + p.offset
    res["matrix"] = _extract(view, after, start, p.stride)
    mask = _cell_mask(view, p.run_bytes, start, p.stride)
    res["wrote_outside"] = int(((before != after) & ~mask).sum())
    return res


def _rerun_probes(target: str = TARGET, ptx: str = PTX_VERSION) -> tuple[list[Probe], list[Probe]]:
    """run2's three errors and the other probes legal under one reading only, exactly as run2 built them
    (padded-stride rule 'text'), and run2's first pipeline kernel (seed 0)."""
    loads = memory_probes("load", target, ptx, padded="text")
    risky = [p for p in loads if not all(p.extra["legal_under"].values())]
    mem = [p for p in loads if p.name in RUN2_FAILED] + [p for p in risky if p.name not in RUN2_FAILED]
    pipes = [p for p in pipeline_probes(target, ptx, 8) if p.name in RUN2_FAILED]
    return mem, pipes


def run_wmma_alignment_probes(out_dir: str | os.PathLike, *, device: int = 0, workers: int = 8,
                              deadline_s: float | None = 55.0, families=None, reruns: bool = True,
                              target: str = TARGET, ptx: str = PTX_VERSION, simulate=None, log=None,
                              only=None) -> dict:
    """The targeted alignment re-run: every probe of :func:`alignment_probes` and the run2
    re-runs (:func:`_rerun_probes`), each verdict isolated (:func:`run_isolated`).

    Order (what a deadline cuts last comes last): the run2 re-runs, each in a worker process
    of its own; then the probes by :func:`align_tier` -- legal under some reading or predicted
    to work; the predicted boundary; the remaining predicted faults.  Every fault is followed
    by a fresh context, so each verdict belongs to its probe alone.

    Writes ``wmma_alignment.json`` (probes with the text's verdicts, the SASS prediction, the
    status and outcome; the analysis of :func:`formal.wmma.alignment.analyse`) and
    ``wmma_alignment_raw.npz`` (registers of the loads, matrices of the stores, the re-runs'
    raw data and pipeline arrays).  Returns the analysis.  `simulate(probe) -> "ok" | "fault" |
    "rounded"` (tests) replaces the GPU by the stand-in device (:func:`_sim_align_out`): the family's
    registers / matrix through the observed map, at the exact pitch ("ok") or at the SASS model's
    rounded-down pitch ("rounded"), or a fault.
    `only` (a set of probe names of the whole sweep): run just these (names keep their meaning;
    ``--resume PREV``: the probes PREV did not run), e.g. to finish a sweep a deadline cut short;
    ``ptx-formal wmma alignment PREV OUT`` merges the two runs.
    """
    from ..wmma import alignment as wal

    log = log or (lambda s: print(s, file=sys.stderr))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    probes, kernels = alignment_probes(target, ptx, families)
    if only is not None:
        # plus each family's reference probe (default stride, generic pointer into global memory,
        # offset 0): the data of the others is compared with it (_compare_with_references)
        fams = {p.family for p in probes if p.name in only}
        refs = {p.name for p in probes if p.family in fams and p.space == "" and p.window == "global"
                and p.mode == "omitted" and p.offset == 0}
        probes = [p for p in probes if p.name in only or p.name in refs]
        used = {p.kernel for p in probes}
        kernels = [k for k in kernels if k.kernel in used]
    kmap = {k.kernel: k for k in kernels}
    rmem, rpipe = _rerun_probes(target, ptx) if reruns else ([], [])
    pred = {p.name: wal.predict(p.manifest()) for p in probes}
    tier = {p.name: align_tier(p, pred[p.name]) for p in probes}
    root = Path(tempfile.mkdtemp(prefix="wmma_align_"))
    jobs, isolate = [], set()
    rin: dict[str, dict] = {}
    for p in rmem + rpipe:
        rin[p.name] = pipeline_inputs(p, 0) if p.kind == "pipeline" else _load_inputs_of(p)
        job = probe_job(p, rin[p.name], root, target, ptx)
        job.update(name="rerun." + p.name, tier=0)
        if simulate is not None:
            job["sim"] = {"fault": simulate(p) == "fault"}
        jobs.append(job)
        isolate.add(job["name"])
    for p in sorted(probes, key=lambda q: tier[q.name]):
        job = align_job(p, kmap[p.kernel], root, target, ptx)
        job["tier"] = tier[p.name]
        if simulate is not None:
            v = simulate(p)
            job["sim"] = {"fault": v == "fault",
                          "out": _write_job_inputs(root, p.name + ".sim", _sim_align_out(p, rounded=v == "rounded"))}
        jobs.append(job)
    from collections import Counter
    nt = Counter(tier.values())
    nf = Counter(tier[n] for n, x in pred.items() if x and x["fault"])
    log(f"{len(probes)} alignment probes in {len(kernels)} kernels, tiers {dict(sorted(nt.items()))} (predicted faults "
        f"{dict(sorted(nf.items()))}) + {len(rmem) + len(rpipe)} run2 re-runs; {workers} workers, deadline {deadline_s} s; "
        f"prepared in {time.time() - t0:.1f}s")
    try:
        remaining = None if deadline_s is None else max(1.0, deadline_s - (time.time() - t0))
        records, info = run_isolated(jobs, root, workers=workers, isolate=isolate, device=device, deadline_s=remaining,
                                     simulate="recover" if simulate is not None else None, log=log)
        raw: dict[str, np.ndarray] = {}
        entries = []
        outcomes: dict[str, dict] = {}
        for p in probes:
            rec = records[p.name]
            e = {k: v for k, v in p.manifest().items() if k not in ("etype", "elem_bits", "regs", "reg_bits", "run_bytes")}
            e["legal"] = {rd: v["legal"] for rd, v in p.legal.items()}
            e.update(status=rec.status, context=rec.context, worker=rec.attempt, tier=tier[p.name],
                     predicted=None if pred[p.name] is None else {k: pred[p.name][k] for k in ("width", "fault")})
            if rec.status != "ok":
                e.update(error=rec.error, error_class=rec.error_class)
            else:
                o = align_outcome(p, _read_outputs(root, rec))
                outcomes[p.name] = o
                e.update({k: v for k, v in o.items() if k not in ("regs", "matrix")})
            entries.append(e)
        refs = _compare_with_references(probes, entries, outcomes)
        for p, e in zip(probes, entries):          # raw data: the references and whatever differs from them
            if e.get("data") in ("reference", "differs"):
                raw[p.name] = outcomes[p.name]["regs" if p.kind == "load" else "matrix"]
        reruns_out = []
        for p in rmem + rpipe:
            rec = records["rerun." + p.name]
            r = {"name": p.name, "opcode": p.opcode, "kind": p.kind, "stride": p.stride, "variant": p.variant,
                 "window": p.window, "status": rec.status, "error": rec.error, "legal_under": p.extra.get("legal_under")}
            if rec.status == "ok":
                res = probe_result(p, _read_outputs(root, rec))
                if p.kind == "load":
                    raw[f"rerun.{p.name}"] = res["dump"]
                    m = decode_load(p, res["dump"])
                    r["map"] = {"cells": m["cells"], "anomalies": {k: (len(v) if isinstance(v, list) else v)
                                                                   for k, v in m["anomalies"].items()}}
                else:
                    from ..wmma import pipeline as wpl
                    for k in ("A", "B", "C"):
                        raw[f"rerun.{p.name}.{k}"] = rin[p.name][k]
                    D = pipeline_output(p, res["mem_d"])
                    raw[f"rerun.{p.name}.D"] = D
                    st, det = wpl.compare(p.opcode, p.extra["store"], rin[p.name]["A"], rin[p.name]["B"],
                                          rin[p.name]["C"], D, target)
                    r["pipeline_check"] = dict(det, status=st)
            reruns_out.append(r)
    finally:
        import shutil
        shutil.rmtree(root, ignore_errors=True)
    meta = {"device": info, "target": target, "ptx": ptx, "align_pre": ALIGN_PRE, "offsets": list(ALIGN_OFFSETS),
            "pitch_aligns": list(PITCH_ALIGNS), "kernels_per_family": [[list(w), m] for w, m in ALIGN_KERNELS],
            "workers": workers, "deadline_s": deadline_s, "simulated": simulate is not None,
            "time_s": round(time.time() - t0, 2), "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "sass_survey": wal.survey_meta(),
            "execution": {k: v for k, v in _record_summary(records).items() if k != "not_ok"}}
    survey = wal.load_survey()

    def sass(k: AlignKernel):
        e = survey["index"].get((k.family, k.form.space or "", k.window, k.mode)) if survey else None
        return e["ops"] if e else None
    doc = {"meta": meta, "kernels": [{"kernel": k.kernel, "family": k.family, "opcode": k.form.opcode, "window": k.window,
                                      "mode": k.mode, "run_bytes": k.run_bytes, "sass": sass(k),
                                      "kind": "load" if k.form.family == "wmma.load" else "store",
                                      "space": k.form.space or ""} for k in kernels],
           "references": refs, "probes": entries, "reruns": reruns_out}
    # the raw data first: the analysis decodes the wrong data from it
    np.savez_compressed(out / "wmma_alignment_raw.npz", **raw)
    doc["_raw"] = str(out / "wmma_alignment_raw.npz")
    doc["analysis"] = wal.analyse(doc)
    del doc["_raw"]
    doc["probes"] = wal.pack_probes(entries)
    (out / "wmma_alignment.json").write_text(json.dumps(doc, separators=(",", ":"), default=_json_default))
    log(f"alignment run done in {time.time() - t0:.1f}s: {meta['execution']['status_counts']}; "
        f"{out / 'wmma_alignment.json'}")
    return doc["analysis"]


def _json_default(x):
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.bool_,)):
        return bool(x)
    if isinstance(x, np.ndarray):
        return x.tolist()
    raise TypeError(f"not JSON serialisable: {type(x).__name__}")


def _compare_with_references(probes: list[AlignProbe], entries: list[dict], outcomes: dict[str, dict]) -> dict[str, str]:
    """Mark each probe that did not fault: did it move the family's data (registers / matrix)?

    Reference: the probe of the family at offset 0 with the stride operand omitted through a
    generic pointer into global memory (legal under every reading), else the first probe of
    the family that ran."""
    ref: dict[str, str] = {}
    for p in probes:
        if p.name in outcomes and p.family not in ref and p.space == "" and p.window == "global" and p.mode == "omitted" \
                and p.offset == 0:
            ref[p.family] = p.name
    for p in probes:
        if p.name in outcomes and p.family not in ref:
            ref[p.family] = p.name
    for p, e in zip(probes, entries):
        if p.name not in outcomes:
            continue
        r = ref.get(p.family)
        key = "regs" if p.kind == "load" else "matrix"
        same = bool(np.array_equal(outcomes[p.name][key], outcomes[r][key]))
        e["data"] = "reference" if r == p.name else ("same" if same else "differs")
        if p.kind == "store" and outcomes[p.name]["wrote_outside"]:
            e["data"] = "differs" if e["data"] == "same" else e["data"]
    return ref


def _sim_align_out(p: AlignProbe, rounded: bool = False) -> dict[str, np.ndarray]:
    """What the stand-in device returns for an alignment probe (tests): the family's registers
    (load) or the family's matrix written (store) through the observed sm_90 map of the family
    (specs/observed/; a fixed lane-major map where there is none), every instance of the leading
    dimension at its place -- or, `rounded`, at the rounded-down pitch of the SASS model
    (formal.wmma.alignment.predict: instance ld at ld * R), as the H100 does where ptxas shifts
    the stride."""
    from ..wmma import alignment as wal

    view = wmem.memory_view(p.family)
    cells, words = align_codes(p.family)
    inp = align_inputs(p)
    addr = np.array([(1 << 40) + ALIGN_PRE + p.offset], np.uint64).view(np.uint8)
    m = wal.silicon_maps().get(p.family)
    base = ALIGN_PRE + p.offset
    pitch = p.pitch_bytes
    r = wal.predict(p.manifest())["rounded_pitch"] if rounded else pitch
    starts = wal.instance_starts(view.n_ld, pitch, r) if pitch else None
    if m is not None and starts is not None:
        if p.kind == "load":
            regs = wal.read_fragment(view, m, inp["mem"], base, starts).astype(_RAW[view.reg_bits])
            return {"regs": np.ascontiguousarray(regs).view(np.uint8).reshape(-1), "info": addr}
        return {"mem": wal.write_fragment(view, m, inp["mem"], base, starts, words), "info": addr}
    if rounded:
        raise ValueError(f"{p.name}: no observed map to simulate a rounded pitch with")
    if p.kind == "load":
        E = view.regs * view.elems_per_reg
        flat = cells.reshape(-1)
        fields = np.stack([flat[(np.arange(E) + lane * E) % flat.size] for lane in range(LANES)])
        regs = register_words(fields, view.reg_bits, view.elems_per_reg).astype(_RAW[view.reg_bits])
        return {"regs": np.ascontiguousarray(regs).view(np.uint8).reshape(-1), "info": addr}
    fields = register_fields(words, view.reg_bits, view.elems_per_reg)
    E = fields.shape[1]
    mat = np.zeros((view.rows, view.cols), np.uint64)
    for lane in range(LANES):
        for i in range(E):
            k = lane * E + i
            if k < view.rows * view.cols:
                mat[divmod(k, view.cols)] = fields[lane, i]
    mem = _place(view, inp["mem"], ALIGN_PRE + p.offset, p.stride, mat)
    return {"mem": mem, "info": addr}


# ----------------------------------------------------------------------------------
# execution: in-process (simulated devices) or fault-isolated (a GPU)

def _execute_inprocess(backend, probes: list[Probe], inputs_of, log) -> tuple[dict, dict[str, JobRecord]]:
    """Run probes in this process on `backend` (tests: SimulatedBackend; no sticky errors there)."""
    results: dict = {}
    records: dict[str, JobRecord] = {}
    if not probes:
        return results, records
    try:
        mod = backend.load(module_text(probes), probes[0].kind)
        mods = {p.name: mod for p in probes}
    except Exception as e:  # noqa: BLE001 - report and fall back to one module per probe
        log(f"module load failed ({type(e).__name__}: {str(e)[:200]}); loading probes one by one")
        mods = {}
        for p in probes:
            try:
                mods[p.name] = backend.load(module_text([p]), p.name)
            except Exception as e2:  # noqa: BLE001
                records[p.name] = JobRecord("load_error", f"{type(e2).__name__}: {str(e2)[:300]}")
    for p in probes:
        if p.name not in mods:
            continue
        try:
            results[p.name] = backend.run(mods[p.name], p, inputs_of(p))
            records[p.name] = JobRecord("ok")
        except Exception as e:  # noqa: BLE001
            records[p.name] = JobRecord("fault", f"{type(e).__name__}: {str(e)[:300]}")
            log(f"{p.name} ({p.opcode}) failed: {records[p.name].error}")
    return results, records


def _job_outputs(p: Probe, res: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Inverse of probe_result: a SimulatedBackend result as the job's output buffers."""
    if p.kind == "load":
        return {"regs": np.ascontiguousarray(res["dump"].astype(_RAW[p.extra["reg_bits"]])).view(np.uint8).reshape(-1)}
    if p.kind == "store":
        return {"mem": res["mem"]}
    return {"mem_d": res["mem_d"]}


def _execute_isolated(probes: list[Probe], inputs_of, root: Path, *, workers: int, isolate: set[str], device: int,
                      deadline_s: float | None, simulate=None, sim_faults=(), target: str = TARGET,
                      ptx: str = PTX_VERSION, log=None) -> tuple[dict, dict[str, JobRecord], dict]:
    """Run probes as launch jobs in the fault-isolated executor; `simulate` (a SimulatedBackend)
    computes what the stand-in device returns, and the probes named in `sim_faults` fault."""
    jobs = []
    for p in probes:
        inp = inputs_of(p)
        job = probe_job(p, inp, root, target, ptx)
        if simulate is not None:
            outs = _job_outputs(p, simulate.run(None, p, inp))
            job["sim"] = {"fault": p.name in set(sim_faults), "out": _write_job_inputs(root, p.name + ".sim", outs)}
        jobs.append(job)
    records, info = run_isolated(jobs, root, workers=workers, isolate=isolate, device=device, deadline_s=deadline_s,
                                 simulate=simulate is not None, log=log)
    results = {}
    for p in probes:
        if records[p.name].status == "ok":
            results[p.name] = probe_result(p, _read_outputs(root, records[p.name]))
    return results, records, info


def _load_inputs_of(p: Probe) -> dict:
    if p.kind == "load":
        return {"mem": load_inputs(p)}
    regs, mem = store_inputs(p)
    return {"regs": regs, "mem": mem}


def _record_summary(records: dict[str, JobRecord]) -> dict:
    from collections import Counter
    return {"status_counts": dict(Counter(r.status for r in records.values())),
            "worker_processes": max((r.attempt for r in records.values()), default=0),
            "not_ok": {n: r.to_dict() for n, r in records.items() if r.status != "ok"}}


def run_wmma_probes(out_dir: str | os.PathLike, *, device: int = 0, seed: int = 0, pipeline_runs: int = 8,
                    backend=None, target: str = TARGET, ptx: str = PTX_VERSION, log=None,
                    with_pipeline: bool = True, only=None, workers: int = 8, isolate=None,
                    deadline_s: float | None = None, simulate=None, sim_faults=(), padded: str = "map") -> list[Path]:
    """Run every probe on the GPU; write raw data, decoded maps and pipeline data to out_dir.

    Execution (default): every probe -- load, store, pipeline -- is one launch job of the
    fault-isolated executor (:func:`run_isolated`, `workers` CUDA contexts at a time): the
    launch is synchronised and checked before the next job starts, a fault is recorded for
    exactly the probe that raised it (``manifest['status']``), and the rest runs on in a
    fresh context.  Probes that may fault -- legal under one reading of 'fragment size'
    only (the default stride of .f16 m8n32k16 A .col / m32n8k16 B .row), and the names in
    `isolate` -- run in a worker of their own.

    ``backend`` (tests: :class:`SimulatedBackend`) runs everything in this process instead;
    ``simulate`` (a SimulatedBackend) runs the isolated executor with a stand-in device that
    returns what `simulate` computes and faults on the probes named in `sim_faults`.
    ``only(probe) -> bool`` selects a subset.  Returns the paths written.
    """
    log = log or (lambda s: print(s, file=sys.stderr))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    mems = memory_probes("load", target, ptx, padded) + memory_probes("store", target, ptx, padded)
    pipes = pipeline_probes(target, ptx, pipeline_runs) if with_pipeline else []
    if only is not None:
        mems, pipes = [p for p in mems if only(p)], [p for p in pipes if only(p)]
    risky = {p.name for p in mems if not all(p.extra["legal_under"].values())}
    pin = {p.name: pipeline_inputs(p, seed + i) for i, p in enumerate(pipes)}

    def inputs_of(p: Probe) -> dict:
        return pin[p.name] if p.kind == "pipeline" else _load_inputs_of(p)

    probes = mems + pipes
    log(f"{len(mems)} load/store probes ({len(risky)} legal under one reading only, each run alone), "
        f"{len(pipes)} pipeline kernels")
    if backend is not None:
        info = dict(getattr(backend, "info", {}))
        results, records = _execute_inprocess(backend, probes, inputs_of, log)
        execution = {"mode": "in-process", "backend": info.get("name")}
    else:
        root = Path(tempfile.mkdtemp(prefix="wmma_jobs_"))
        try:
            results, records, info = _execute_isolated(
                probes, inputs_of, root, workers=workers, isolate=risky | set(isolate or ()), device=device,
                deadline_s=deadline_s, simulate=simulate, sim_faults=sim_faults, target=target, ptx=ptx, log=log)
        finally:
            import shutil
            shutil.rmtree(root, ignore_errors=True)
        execution = {"mode": "isolated", "workers": workers, "simulated": simulate is not None}
    execution.update(_record_summary(records))
    meta = {"device": info, "target": target, "ptx": ptx, "memory_packing": MEMORY_PACKING, "pre_bytes": PRE_BYTES,
            "seed": seed, "padded_stride_rule": padded, "time_s": round(time.time() - t0, 2),
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "execution": execution}
    raw = {n: (r["dump"] if "dump" in r else r["mem"]) for n, r in results.items() if n in {p.name for p in mems}}
    np.savez_compressed(out / "wmma_probe_raw.npz", **raw)
    manifest = {"meta": meta, "probes": [p.manifest() for p in mems],
                "status": {p.name: records[p.name].to_dict() for p in mems},
                "errors": {p.name: f"{records[p.name].status}: {records[p.name].error}" for p in mems
                           if records[p.name].status != "ok"}}
    (out / "wmma_probe_manifest.json").write_text(json.dumps(manifest, indent=1))
    paths = [out / "wmma_probe_raw.npz", out / "wmma_probe_manifest.json"]
    if pipes:
        arrays: dict[str, np.ndarray] = {}
        entries = []
        for p in pipes:
            rec = records[p.name]
            entries.append({"kernel": p.name, "opcode": p.opcode, "loads": p.extra["loads"], "store": p.extra["store"],
                            "strides": p.extra["strides"], "runs": p.runs, "seed": seed + pipes.index(p),
                            "modes": ["values"] * (p.runs // 2) + ["bits"] * (p.runs - p.runs // 2),
                            "status": rec.status, "error": None if rec.status == "ok" else f"{rec.status}: {rec.error}"})
            for k in ("A", "B", "C"):
                arrays[f"{p.name}.{k}"] = pin[p.name][k]
            if p.name in results:
                arrays[f"{p.name}.D"] = pipeline_output(p, results[p.name]["mem_d"])
        np.savez_compressed(out / "wmma_pipeline.npz", **arrays)
        (out / "wmma_pipeline.json").write_text(json.dumps(
            {"meta": meta,
             "how_to_check": "formal.wmma.check_pipeline_data(DIR): for each entry formal.evaluate_matrices(opcode, A, B, "
                             "C, arch) == D bit for bit (raw element encodings; arrays '<kernel>.A', '.B', '.C', '.D' in "
                             "wmma_pipeline.npz)",
             "entries": entries}, indent=1))
        paths += [out / "wmma_pipeline.npz", out / "wmma_pipeline.json"]
    paths.append(decode_dir(out))
    log(f"done in {time.time() - t0:.1f}s: {execution['status_counts']}; {', '.join(str(p) for p in paths)}")
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
                 "run": {"errors": man.get("errors", {}), "probes": len(man["probes"]),
                         "probes_with_data": sum(1 for d in man["probes"] if d["name"] in raw.files),
                         "status_counts": dict(__import__("collections").Counter(
                             r["status"] for r in man.get("status", {}).values())) or None}})
    dest = Path(dest) if dest else out / "wmma_sm90_observed.json"
    dest.write_text(json.dumps({"meta": meta, "maps": maps}))
    return dest


def condense(observed: str | os.PathLike, dest: str | os.PathLike, provenance: dict | None = None,
             target: str = TARGET, ptx: str = PTX_VERSION) -> Path:
    """The file to check in under specs/observed/: one map per form (the canonical variant:
    stride operand omitted, generic pointer into global memory; else the first variant),
    with every other variant of the form summarised as agreeing or not (and where).
    ``meta.coverage`` lists the load/store families the run observed and those it did not;
    `provenance` (run id, driver, notes) is recorded as ``meta.provenance``."""
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
    fams = set()
    for fam in ("wmma.load", "wmma.store"):
        for f in _base_forms(fam, target, ptx):
            fams.add(f"{'load' if fam == 'wmma.load' else 'store'}:" +
                     (f.opcode.replace(f".{f.space}.", ".") if f.space else f.opcode))
    meta = dict(doc["meta"])
    meta["coverage"] = {"families": len(fams), "observed": sorted(k for k in groups if k in fams),
                        "not_observed": sorted(fams - set(groups))}
    if provenance:
        meta["provenance"] = provenance
    dest = Path(dest)
    dest.write_text(json.dumps({"meta": meta, "maps": out}, separators=(",", ":")))
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
                idx = _cell_indices(view.opcode, p.stride)
                for lane in range(LANES):
                    for i in range(E):
                        rr, cc = divmod(int(tab[lane, i]), cols)
                        fields[lane, i] = vals[x["pre_elements"] + (idx[rr][cc] if 0 <= rr < rows else
                                                                    int(view.index(rr, cc, p.stride)))]
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
            idx = _cell_indices(view.opcode, p.stride)
            for lane in range(LANES):
                for i in range(E):
                    rr, cc = divmod(int(tab[lane, i]), cols)
                    vals[x["pre_elements"] + (idx[rr][cc] if 0 <= rr < rows else
                                              int(view.index(rr, cc, p.stride)))] = fields[lane, i]
            mem[r * p.run_bytes:(r + 1) * p.run_bytes] = pack(vals, x["elem_bits"], p.run_bytes)
        del rows
        return {"mem": mem}


USAGE = """usage: python -m formal.hw.wmma_probe OUT_DIR [--device N] [--seed S] [--workers W]
       python -m formal.hw.wmma_probe --alignment OUT_DIR [--device N] [--workers W] [--deadline SECONDS]
                                      [--resume PREV_DIR]

OUT_DIR: every load/store map probe and pipeline kernel (fault-isolated; about a minute).
--alignment: the alignment sweep and the run2 re-runs (stops starting work after --deadline seconds,
default 55; prints the analysis; default 12 workers).  --resume PREV_DIR: only the probes an earlier
alignment run did not run (no re-runs); merge with `ptx-formal wmma alignment PREV_DIR OUT_DIR`."""


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stderr)
        return 2

    def opt(name: str, conv, default):
        if name not in argv:
            return default
        i = argv.index(name)
        try:
            v = conv(argv[i + 1])
        except (IndexError, ValueError):
            print(f"wmma_probe: {name} needs a value", file=sys.stderr)
            raise SystemExit(2) from None
        del argv[i:i + 2]
        return v

    dev = opt("--device", int, 0)
    seed = opt("--seed", int, 0)
    workers = opt("--workers", int, 0)
    deadline = opt("--deadline", float, 55.0)
    resume = opt("--resume", str, None)
    if argv[0] == "--alignment":
        workers = workers or 12            # the sweep is bound by fresh contexts after faults: more at once
        if len(argv) != 2:
            print(USAGE, file=sys.stderr)
            return 2
        only = None
        if resume is not None:
            from ..wmma import alignment as wal
            try:
                prev = wal.load_run(resume)
            except (OSError, ValueError) as x:
                print(f"wmma_probe: --resume {resume}: {x}", file=sys.stderr)
                return 2
            only = {e["name"] for e in prev["probes"] if e["status"] == "not_run"}
            print(f"resuming {resume}: {len(only)} probes it did not run", file=sys.stderr)
        summary = run_wmma_alignment_probes(argv[1], device=dev, workers=workers, deadline_s=deadline,
                                            only=only, reruns=only is None)
        from ..wmma import alignment as wal
        print(wal.report_text(summary))
        if not summary["ran"]:
            print("wmma_probe: no probe ran (no usable GPU?); see the errors above", file=sys.stderr)
            return 1
        return 0
    if len(argv) != 1:
        print(USAGE, file=sys.stderr)
        return 2
    paths = run_wmma_probes(argv[0], device=dev, seed=seed, workers=workers or 8)
    for pth in paths:
        print(pth)
    man = json.loads((Path(argv[0]) / "wmma_probe_manifest.json").read_text())
    if not man["meta"]["execution"]["status_counts"].get("ok"):
        print("wmma_probe: no probe ran (no usable GPU?); see the errors above", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
