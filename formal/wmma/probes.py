"""Design of the wmma probes (no GPU here): kernels, input encodings and decoders shared by
the alignment sweep model (:mod:`formal.wmma.alignment`), the evidence records and the GPU
harness that runs them (``formal.hw.wmma_probe``, which imports this module).

Register words <-> element fields, little-endian element packing of memory buffers, the
alignment probes of every wmma.load/store family (offset x pitch alignment x state space x
stride mode) with their kernels, coded cells and expected verdicts.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import lru_cache

import numpy as np

from .. import catalog as cat
from ..catalog import text as ptxtext
from ..catalog import Form
from . import memory as wmem

PTX_VERSION = "7.8"            # wmma needs <= 7.1; .shared::cta needs 7.8; sm_90 needs 7.8
TARGET = "sm_90"
PRE_BYTES = 256                # coded guard before the base pointer (also keeps it 256-aligned)
LANES = 32


_RAW = {1: np.uint8, 4: np.uint8, 8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


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


def _round_up(x: int, m: int) -> int:
    return (x + m - 1) // m * m


@lru_cache(maxsize=None)
def _stride_modulus(etype: str, matrix: str, shape: str, layout: str, reading: str | None = None) -> int:
    """The smallest positive stride meeting the spec's alignment rule at a PRE_BYTES-aligned pointer
    (by enumeration of the rule; formal.wmma.legal_strides derives and proves the same set with Z3,
    tests/test_wmma_probe.py compares them)."""
    fam = "load" if matrix != "d" else "store"
    view = wmem.memory_view(f"wmma.{fam}.{matrix}.sync.aligned.{layout}.{shape}.{etype}")
    fb = view.frag_bytes(reading)
    for s in range(1, 8 * fb + 1):
        if wmem.legal_py(view, PRE_BYTES, s, fb, ("align.row_start",)):
            return s
    raise RuntimeError(f"no legal stride for {view.opcode} with a {PRE_BYTES}-byte aligned pointer")


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


def safe_stride(view: wmem.MemoryView) -> int:
    """The default stride if it is legal under both readings of 'fragment size', else the
    smallest stride that is (erratum default-stride-misaligned: under the 'registers'
    reading the default stride of .f16 m8n32k16 A .col and m32n8k16 B .row is misaligned)."""
    return _round_up(view.default_stride, _stride_modulus(view.etype, view.matrix, view.form.shape, view.layout))


ALIGN_PRE = 256                           # the matrix base is buffer + 256 + offset (buffer 1024-aligned)
ALIGN_OFFSETS = (0, 4, 8, 16, 32, 64)      # bytes past a 256-aligned base
PITCH_ALIGNS = (1, 2, 4, 8, 16, 32)       # exact power-of-two alignment of the pitch (stride in bytes)
# (state space, pointer window, stride mode) of the kernels of every family.  The stride operand
# omitted (default stride, known to ptxas) or a runtime register; ptxas 13.0 emits the same
# accesses in both modes, for .shared and .shared::cta, and for generic pointers into global and
# into shared memory (specs/observed/wmma_sass_sm90.json), so the sweep runs every space with a
# runtime stride and the omitted stride for one generic and one .shared kernel.
ALIGN_KERNELS = ((("", "global"), "operand"), (("global", "global"), "operand"), (("shared", "shared"), "operand"),
                 (("", "shared"), "operand"), (("shared::cta", "shared"), "operand"),
                 (("", "global"), "omitted"), (("shared", "shared"), "omitted"))
CORE_WINDOWS = (("", "global"), ("global", "global"), ("shared", "shared"))     # generic, .global, .shared


def _exact_align(x: int) -> int:
    """Largest power of two dividing x (x > 0)."""
    return x & -x


@dataclass
class AlignProbe:
    name: str            # job name wa00000
    kernel: str          # wk0000: one per family x (space, window) x mode
    kind: str            # load | store
    family: str          # the opcode without state space
    opcode: str
    space: str           # '' generic, global, shared, shared::cta
    window: str          # where the pointer points: global | shared
    mode: str            # omitted | operand
    offset: int          # bytes past the 256-aligned base
    stride: int          # elements (the default when the operand is omitted)
    pitch_bytes: int     # stride in bytes
    purpose: str         # offset | pitch
    legal: dict          # reading -> {"legal": bool, "rules": [...]} (formal.wmma.check_access)
    run_bytes: int
    etype: str = ""
    elem_bits: int = 0
    regs: int = 0
    reg_bits: int = 0

    @property
    def base_align(self) -> int:
        return _exact_align(ALIGN_PRE + self.offset)

    @property
    def pitch_align(self) -> int:
        return _exact_align(self.pitch_bytes) if self.pitch_bytes else 0

    def manifest(self) -> dict:
        d = asdict(self)
        d.update(base_align=self.base_align, pitch_align=self.pitch_align)
        return d


def _pitch_strides(view: wmem.MemoryView) -> dict[int, int]:
    """pitch alignment a -> the smallest stride >= default whose pitch (whole bytes) has exact alignment a."""
    out = {}
    for a in PITCH_ALIGNS:
        s = view.default_stride
        while s < view.default_stride + 8 * 64:
            bits = s * view.elem_bits
            if bits % 8 == 0 and _exact_align(bits // 8) == a:
                out[a] = s
                break
            s += 1
    return out


@lru_cache(maxsize=None)
def _align_verdicts(family: str, offset: int, stride: int) -> dict:
    """The text's verdict on (base = 256-aligned + offset, stride) under each reading, with the rules
    violated (the spec's rules by enumeration; check_access's Z3 cross-check is too slow for 10^4
    probes, and tests/test_wmma_probe.py compares the two on a sample)."""
    view = wmem.memory_view(family)
    ptr = (1 << 20) | (ALIGN_PRE + offset)             # a representative address with the probe's low bits
    out = {}
    for rd in wmem.READINGS:
        fb = view.frag_bytes(rd)
        bad = [r.id for r in wmem.spec().rules if not wmem.legal_py(view, ptr, stride, fb, (r.id,))]
        out[rd] = {"legal": not bad, "rules": bad}
    return out


def _align_kernel(form: Form, window: str, mode: str, kname: str, run_bytes: int) -> str:
    """params: p_mem (u64, 1024-aligned buffer of run_bytes), p_regs (u64: [32, regs] words),
    p_info (u64: lane 0 writes the address given to wmma), p_off (u64), p_stride (u32)."""
    op = form.operands["r"]
    rb = op.reg_bits // 8
    regs = ptxtext.reg_names(form)["r"]
    sm = window == "shared"
    body = list(ptxtext.declarations(form)) + _COPY_REGS + [
        ".reg .b64 %mem, %gmem, %gregs, %ginfo, %sbase, %off, %t64;",
        ".reg .b32 %lane;",
        ".reg .pred %p0;",
        "ld.param.u64 %mem, [p_mem];",
        "ld.param.u64 %t64, [p_regs];",
        "cvta.to.global.u64 %gregs, %t64;",
        "ld.param.u64 %t64, [p_info];",
        "cvta.to.global.u64 %ginfo, %t64;",
        "ld.param.u64 %off, [p_off];",
        "ld.param.u32 %rs, [p_stride];",
        "mov.u32 %lane, %laneid;",
        f"mul.wide.u32 %t64, %lane, {op.count * rb};",
        "add.u64 %gregs, %gregs, %t64;",
        "cvta.to.global.u64 %gmem, %mem;",
    ]
    if sm:
        body += [f"mov.u64 %sbase, smem_{kname};"]
        body += _copy_loop("Lin", run_bytes // 4, "%gmem", "%sbase", "ld.global", "st.shared")
        body += ["bar.sync 0;"]
    body += _addr_lines(form.space or "", window, "%mem", "%sbase", "%rp")
    body += [f"add.u64 %rp, %rp, {ALIGN_PRE};", "add.u64 %rp, %rp, %off;",
             "setp.eq.u32 %p0, %lane, 0;", "@%p0 st.global.u64 [%ginfo], %rp;"]
    st_t = "f64" if op.reg_bits == 64 else "b32"
    imm = ptxtext.Immediates(stride=(mode == "operand"))
    if form.family == "wmma.load":
        body += [ptxtext.instruction(form, imm)]
        body += [f"st.global.{st_t} [%gregs+{r * rb}], {regs[r]};" for r in range(op.count)]
    else:
        body += [f"ld.global.{st_t} {regs[r]}, [%gregs+{r * rb}];" for r in range(op.count)]
        body += ["bar.sync 0;", ptxtext.instruction(form, imm)]       # the barrier separates the wmma in SASS
        if sm:
            body += ["bar.sync 0;"]
            body += _copy_loop("Lout", run_bytes // 4, "%sbase", "%gmem", "ld.shared", "st.global")
    body += ["ret;"]
    decl = f".shared .align 1024 .b8 smem_{kname}[{run_bytes}];\n" if sm else ""
    return (decl + f".visible .entry {kname}(.param .u64 p_mem, .param .u64 p_regs, .param .u64 p_info, "
            f".param .u64 p_off, .param .u32 p_stride)\n{{\n"
            + "\n".join("  " + b if not b.endswith(":") else b for b in body) + "\n}\n")


@dataclass
class AlignKernel:
    kernel: str
    form: Form
    family: str
    window: str
    mode: str
    run_bytes: int
    ptx: str = ""


def alignment_probes(target: str = TARGET, ptx: str = PTX_VERSION, families=None) -> tuple[list[AlignProbe], list[AlignKernel]]:
    """The sweep: for every wmma.load/.store family and every kernel of ALIGN_KERNELS, the base
    offsets ALIGN_OFFSETS at the default stride (mode omitted) or at the canonical stride (mode
    operand: the default if legal under both readings of 'fragment size', else the smallest stride
    that is), and, in mode operand at offset 0, one stride per pitch alignment in PITCH_ALIGNS (the
    smallest stride >= default whose pitch has exactly that alignment: every boundary of the
    text's rule, which needs a pitch multiple of the fragment size, 4 to 32 bytes).
    `families` (optional): only these family opcodes."""
    probes: list[AlignProbe] = []
    kernels: list[AlignKernel] = []
    by_family: dict[str, list[Form]] = {}
    for fam in ("wmma.load", "wmma.store"):
        for f in _base_forms(fam, target, ptx):
            base = f.opcode.replace(f".{f.space}.", ".") if f.space else f.opcode
            by_family.setdefault(base, []).append(f)
    for family, forms in by_family.items():
        if families is not None and family not in families:
            continue
        view = wmem.memory_view(family)
        canon = safe_stride(view)
        pitches = _pitch_strides(view)
        for (space, window), mode in ALIGN_KERNELS:
            form = next((f for f in forms if (f.space or "") == space), None)
            if form is None:
                continue
            pts = [("offset", off, view.default_stride if mode == "omitted" else canon) for off in ALIGN_OFFSETS]
            if mode == "operand":
                pts += [("pitch", 0, s) for a, s in sorted(pitches.items()) if s != canon]
            max_stride = max(s for _, _, s in pts)
            foot = (view.footprint_elements(max_stride) * view.elem_bits + 7) // 8
            run_bytes = _round_up(ALIGN_PRE + max(ALIGN_OFFSETS) + foot + 64, 256)
            k = AlignKernel(f"wk{len(kernels):04d}", form, family, window, mode, run_bytes)
            k.ptx = _align_kernel(form, window, mode, k.kernel, run_bytes)
            kernels.append(k)
            for purpose, off, s in pts:
                probes.append(AlignProbe(f"wa{len(probes):05d}", k.kernel, "load" if form.family == "wmma.load" else "store",
                                         family, form.opcode, space, window, mode, off, s,
                                         s * view.elem_bits // 8 if (s * view.elem_bits) % 8 == 0 else 0, purpose,
                                         _align_verdicts(family, off, s), run_bytes,
                                         view.etype, view.elem_bits, view.regs, view.reg_bits))
    return probes, kernels


def align_tier(p: AlignProbe, predicted: dict | None) -> int:
    """Run order under a deadline.  1: legal under some reading of the text, or predicted to work
    (the errata's evidence; no restarts); 2: illegal and predicted to fault, just below the
    predicted requirement, for generic / .global / .shared (the model's boundary); 3: the rest."""
    legal = any(v["legal"] for v in p.legal.values())
    if predicted is None or legal or not predicted["fault"]:
        return 1
    w = predicted["width"]
    edge = p.base_align * 2 == w if p.purpose == "offset" else p.pitch_align * 2 == w
    return 2 if edge and (p.space, p.window) in CORE_WINDOWS and p.mode == "operand" else 3


def _family_rng(family: str, what: str) -> np.random.Generator:
    import hashlib
    return np.random.default_rng(int.from_bytes(hashlib.sha256(f"{family}|{what}".encode()).digest()[:8], "little"))


def align_codes(family: str) -> tuple[np.ndarray, np.ndarray]:
    """(cell codes [rows, cols] raw elements, store register words [32, regs]) of a family."""
    view = wmem.memory_view(family)
    rng = _family_rng(family, "cells")
    eb = view.elem_bits
    cells = rng.integers(0, 1 << min(eb, 62), (view.rows, view.cols), dtype=np.uint64)
    if eb == 64:
        cells = (cells << np.uint64(2)) | rng.integers(0, 4, cells.shape, dtype=np.uint64)
    words = _family_rng(family, "regs").integers(0, 1 << min(view.reg_bits, 62), (LANES, view.regs), dtype=np.uint64)
    return cells, words


@lru_cache(maxsize=None)
def _cell_index(family: str, stride: int) -> np.ndarray:
    """[rows, cols] element index of every cell at `stride` (the spec's index formula, vectorised)."""
    view = wmem.memory_view(family)
    r, c = np.meshgrid(np.arange(view.rows), np.arange(view.cols), indexing="ij")
    return np.asarray(view.index(r, c, stride), np.int64) * np.ones_like(r)


def _place(view: wmem.MemoryView, buf: np.ndarray, start: int, stride: int, cells: np.ndarray) -> np.ndarray:
    """buf with the matrix `cells` written at byte `start` (element addresses from the spec)."""
    n = view.footprint_elements(stride)
    nbytes = (n * view.elem_bits + 7) // 8
    region = unpack(buf[start:start + nbytes], view.elem_bits, n)
    region[_cell_index(view.opcode, stride).reshape(-1)] = cells.reshape(-1)
    packed = pack(region, view.elem_bits, nbytes)
    tail = (n * view.elem_bits) % 8
    if tail:                                          # keep the bits of the last byte past the footprint
        keep = np.uint8((0xFF << tail) & 0xFF)
        packed[-1] = (packed[-1] & ~keep) | (buf[start + nbytes - 1] & keep)
    out = buf.copy()
    out[start:start + nbytes] = packed
    return out


def _extract(view: wmem.MemoryView, buf: np.ndarray, start: int, stride: int) -> np.ndarray:
    n = view.footprint_elements(stride)
    region = unpack(buf[start:start + (n * view.elem_bits + 7) // 8], view.elem_bits, n)
    return region[_cell_index(view.opcode, stride)]


def _cell_mask(view: wmem.MemoryView, nbytes: int, start: int, stride: int) -> np.ndarray:
    """Bytes of a buffer that hold (part of) a matrix cell (stores: 16-bit and wider elements)."""
    m = np.zeros(nbytes, bool)
    first = start + _cell_index(view.opcode, stride).reshape(-1) * view.elem_bits // 8
    for b in range((view.elem_bits + 7) // 8):
        m[first + b] = True
    return m


def align_inputs(p: AlignProbe) -> dict[str, np.ndarray]:
    """mem (random bytes, the family's matrix at the probe's place) and, for stores, the register words."""
    view = wmem.memory_view(p.family)
    cells, words = align_codes(p.family)
    rng = _family_rng(p.name, "padding")
    mem = rng.integers(0, 256, p.run_bytes, dtype=np.uint8)
    if p.kind == "load":
        mem = _place(view, mem, ALIGN_PRE + p.offset, p.stride, cells)
        return {"mem": mem}
    return {"mem": mem, "regs": words.astype(_RAW[view.reg_bits])}
