"""wgmma on the H100: one warpgroup per CTA runs one ``wgmma.mma_async`` on given inputs.

The harness knows no layout.  Per CTA ``t`` it copies a raw shared-memory image
(``img[t]``, bytes) into a 1024-byte-aligned shared array, adds the array's address to
the start-address field of the two given descriptors (``desc[t] = (a-desc, b-desc)``,
start addresses relative to the array), loads each thread's A registers (``a[t, thread]``,
when A comes from registers), metadata (``e[t, thread]``) and accumulator (``c[t, thread]``)
from global memory, runs ``wgmma.fence`` / ``mma_async`` / ``commit_group`` /
``wait_group 0`` and stores the accumulator registers (``d[t, thread]``); thread =
32 * warp + lane.  ``scale-d`` is a predicate read from ``flags[t] & 1``.  What the
registers and the image hold is the caller's business (the probe designs below), so the
same kernels measure layouts, descriptors and numerics.

Kernels are assembled by ptxas for sm_90a wherever ptxas runs (no GPU needed):
``python -m formal.hw.wgmma_probe build DIR`` writes the cubin, the kernel list and every
probe's inputs; ``run DIR`` (on the GPU) writes the outputs; ``analyse DIR`` decides.
"""
from __future__ import annotations

import json
import os
import subprocess
from dataclasses import asdict, dataclass

import numpy as np

IMG = 32768          # bytes of shared memory image per CTA (static shared, <= 48 KiB)
PTX_VERSION = "8.7"


@dataclass(frozen=True)
class WgKernel:
    """One kernel: a complete wgmma spelling and where A comes from."""

    name: str
    shape: str             # m64nNkK
    dtype: str
    atype: str
    btype: str
    asrc: str = "desc"     # desc | reg
    sparse: bool = False
    sel: int = 0
    satfinite: bool = False
    scale_a: int = 1
    scale_b: int = 1
    trans_a: int = 0
    trans_b: int = 0
    img: int = IMG         # bytes of the shared-memory image

    @property
    def n(self) -> int:
        return int(self.shape.split("n")[1].split("k")[0])

    @property
    def k(self) -> int:
        return int(self.shape.split("k")[1])

    @property
    def nd(self) -> int:
        return self.n // 4 if self.dtype == "f16" else self.n // 2

    @property
    def floating(self) -> bool:
        return self.atype not in ("s8", "u8", "b1")

    def instruction(self, d: list[str], a: str, b: str, e: str | None, p: str) -> str:
        op = "wgmma.mma_async" + (".sp" if self.sparse else "") + ".sync.aligned." + self.shape
        if self.satfinite:
            op += ".satfinite"
        op += f".{self.dtype}.{self.atype}.{self.btype}"
        if self.atype == "b1":
            op += ".and.popc"
        args = ["{" + ", ".join(d) + "}", a, b]
        if self.sparse:
            args += [e, str(self.sel)]
        args.append(p)
        if self.floating:
            args += [str(self.scale_a), str(self.scale_b)]
            if self.atype in ("f16", "bf16"):
                if self.asrc == "desc":
                    args.append(str(self.trans_a))
                args.append(str(self.trans_b))
        return f"{op} {', '.join(args)};"


def kernel_ptx(k: WgKernel) -> str:
    nd = k.nd
    L = [f".visible .entry {k.name}(.param .u64 p_img, .param .u64 p_desc, .param .u64 p_a, .param .u64 p_c,",
         "    .param .u64 p_e, .param .u64 p_flags, .param .u64 p_d)", "{",
         f"  .shared .align 1024 .b8 smem[{k.img}];",
         "  .reg .b32 %r<16>;", "  .reg .b64 %rd<24>;", "  .reg .pred %p<4>;",
         f"  .reg .b32 %d<{nd}>;", "  .reg .b32 %a<4>;", "  .reg .b32 %e0;",
         "  mov.u32 %r0, %tid.x;", "  mov.u32 %r1, %ctaid.x;",
         "  ld.param.u64 %rd0, [p_img];", "  cvta.to.global.u64 %rd0, %rd0;",
         f"  mul.wide.u32 %rd1, %r1, {k.img};", "  add.s64 %rd0, %rd0, %rd1;",
         "  mov.u32 %r2, smem;", "  mov.u32 %r3, %r0;",
         "COPY:",
         f"  setp.ge.u32 %p0, %r3, {k.img // 16};", "  @%p0 bra COPIED;",
         "  mul.wide.u32 %rd2, %r3, 16;", "  add.s64 %rd3, %rd0, %rd2;",
         "  ld.global.v4.u32 {%r4, %r5, %r6, %r7}, [%rd3];",
         "  shl.b32 %r8, %r3, 4;", "  add.u32 %r9, %r2, %r8;",
         "  st.shared.v4.u32 [%r9], {%r4, %r5, %r6, %r7};",
         "  add.u32 %r3, %r3, 128;", "  bra COPY;",
         "COPIED:",
         "  fence.proxy.async.shared::cta;", "  bar.sync 0;",
         # descriptors: start address fields are relative to smem
         "  ld.param.u64 %rd4, [p_desc];", "  cvta.to.global.u64 %rd4, %rd4;",
         "  mul.wide.u32 %rd5, %r1, 16;", "  add.s64 %rd4, %rd4, %rd5;",
         "  ld.global.u64 %rd6, [%rd4];", "  ld.global.u64 %rd7, [%rd4+8];",
         "  cvt.u64.u32 %rd8, %r2;", "  shr.u64 %rd8, %rd8, 4;",
         "  add.s64 %rd6, %rd6, %rd8;", "  add.s64 %rd7, %rd7, %rd8;",
         # g = ctaid * 128 + tid
         "  mad.lo.u32 %r10, %r1, 128, %r0;",
         "  ld.param.u64 %rd9, [p_c];", "  cvta.to.global.u64 %rd9, %rd9;",
         f"  mul.wide.u32 %rd10, %r10, {4 * nd};", "  add.s64 %rd9, %rd9, %rd10;"]
    for j in range(nd):
        L.append(f"  ld.global.u32 %d{j}, [%rd9+{4 * j}];")
    if k.asrc == "reg":
        L += ["  ld.param.u64 %rd11, [p_a];", "  cvta.to.global.u64 %rd11, %rd11;",
              "  mul.wide.u32 %rd12, %r10, 16;", "  add.s64 %rd11, %rd11, %rd12;"]
        L += [f"  ld.global.u32 %a{j}, [%rd11+{4 * j}];" for j in range(4)]
    if k.sparse:
        L += ["  ld.param.u64 %rd13, [p_e];", "  cvta.to.global.u64 %rd13, %rd13;",
              "  mul.wide.u32 %rd14, %r10, 4;", "  add.s64 %rd13, %rd13, %rd14;", "  ld.global.u32 %e0, [%rd13];"]
    L += ["  ld.param.u64 %rd15, [p_flags];", "  cvta.to.global.u64 %rd15, %rd15;",
          "  mul.wide.u32 %rd16, %r1, 4;", "  add.s64 %rd15, %rd15, %rd16;", "  ld.global.u32 %r11, [%rd15];",
          "  and.b32 %r12, %r11, 1;", "  setp.ne.u32 %p1, %r12, 0;",
          "  wgmma.fence.sync.aligned;"]
    a = "{%a0, %a1, %a2, %a3}" if k.asrc == "reg" else "%rd6"
    L.append("  " + k.instruction([f"%d{j}" for j in range(nd)], a, "%rd7", "%e0" if k.sparse else None, "%p1"))
    L += ["  wgmma.commit_group.sync.aligned;", "  wgmma.wait_group.sync.aligned 0;",
          "  ld.param.u64 %rd17, [p_d];", "  cvta.to.global.u64 %rd17, %rd17;",
          "  add.s64 %rd17, %rd17, %rd10;"]
    L += [f"  st.global.u32 [%rd17+{4 * j}], %d{j};" for j in range(nd)]
    L += ["  ret;", "}"]
    return "\n".join(L)


def module_ptx(kernels: list[WgKernel]) -> str:
    head = [f".version {PTX_VERSION}", ".target sm_90a", ".address_size 64", ""]
    return "\n".join(head + [kernel_ptx(k) + "\n" for k in kernels])


def assemble(kernels: list[WgKernel], out_dir: str, ptxas: str = "ptxas", chunk: int = 24) -> list[str]:
    """One cubin per chunk of kernels (ptxas 13.0 for sm_90a); returns the cubin file names."""
    names = []
    procs = []
    for i in range(0, len(kernels), chunk):
        src = os.path.join(out_dir, f"wg{i // chunk}.ptx")
        cub = os.path.join(out_dir, f"wg{i // chunk}.cubin")
        with open(src, "w") as f:
            f.write(module_ptx(kernels[i:i + chunk]))
        procs.append((subprocess.Popen([ptxas, "-arch=sm_90a", src, "-o", cub], stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True), src))
        names.append(os.path.basename(cub))
    for p, src in procs:
        out, err = p.communicate()
        if p.returncode != 0:
            raise RuntimeError(f"ptxas failed on {src}: {err.strip()[:600]}")
    return names


# --------------------------------------------------------------------------------- running

def run_dir(d: str, log=print) -> None:
    """On the GPU: every probe of DIR/probes.json with its inputs, outputs to DIR/out_*.npz."""
    import cupy as cp

    meta = json.load(open(os.path.join(d, "probes.json")))
    kernels = {k["name"]: WgKernel(**k) for k in meta["kernels"]}
    mods = {}
    for i, cub in enumerate(meta["cubins"]):
        mods[i] = cp.RawModule(path=os.path.join(d, cub))
    where = meta["kernel_module"]
    for group in meta["groups"]:
        z = np.load(os.path.join(d, f"in_{group}.npz"))
        out = {}
        for key in sorted({f.rsplit(".", 1)[0] for f in z.files}):
            kname = str(z[key + ".kernel"])
            k = kernels[kname]
            fn = mods[where[kname]].get_function(kname)
            img = z[key + ".img"]
            T = img.shape[0]
            dev = {n: cp.asarray(np.ascontiguousarray(z[key + "." + n])) for n in ("img", "desc", "a", "c", "e", "flags")}
            dd = cp.zeros((T, 128, k.nd), cp.uint32)
            fn((T,), (128,), (dev["img"], dev["desc"], dev["a"], dev["c"], dev["e"], dev["flags"], dd))
            cp.cuda.runtime.deviceSynchronize()
            out[key] = cp.asnumpy(dd)
        np.savez_compressed(os.path.join(d, f"out_{group}.npz"), **out)
        log(f"  {group}: {len(out)} probes")


def pack_inputs(k: WgKernel, img, desc, a=None, c=None, e=None, flags=None) -> dict[str, np.ndarray]:
    T = img.shape[0]
    assert img.shape == (T, k.img) and img.dtype == np.uint8
    return {"kernel": np.asarray(k.name), "img": img, "desc": np.asarray(desc, np.uint64).reshape(T, 2),
            "a": np.zeros((T, 128, 4), np.uint32) if a is None else np.asarray(a, np.uint32).reshape(T, 128, 4),
            "c": np.zeros((T, 128, k.nd), np.uint32) if c is None else np.asarray(c, np.uint32).reshape(T, 128, k.nd),
            "e": np.zeros((T, 128), np.uint32) if e is None else np.asarray(e, np.uint32).reshape(T, 128),
            "flags": np.ones(T, np.uint32) if flags is None else np.asarray(flags, np.uint32).reshape(T)}


def kernel_dicts(kernels) -> list[dict]:
    return [asdict(k) for k in kernels]


# --------------------------------------------------------------------------------- probe designs
#
# Inputs are built from the PTX ISA 9.1 layouts as the research transcribed them (and CuTe and
# Triton agree): the one-hot probes then either reproduce the predicted registers exactly or
# record what the silicon did, so a wrong model shows as a mismatch, never as a silent fit.

EBITS = {"f16": 16, "bf16": 16, "tf32": 32, "e4m3": 8, "e5m2": 8, "s8": 8, "u8": 8, "b1": 1}
ONE = {"f16": 0x3C00, "bf16": 0x3F80, "tf32": 0x3F800000, "e4m3": 0x38, "e5m2": 0x3C, "s8": 1, "u8": 1, "b1": 1}
SWIZZLE_CODE = {0: 0, 128: 1, 64: 2, 32: 3}


def desc(start: int, lbo: int, sbo: int, swizzle: int = 0, base: int = 0) -> int:
    """The matrix descriptor (PTX ISA 9.1 §9.7.15.5.1.2.2), byte quantities in."""
    return (((start & 0x3FFFF) >> 4) | (((lbo & 0x3FFFF) >> 4) << 16) | (((sbo & 0x3FFFF) >> 4) << 32)
            | ((base & 7) << 49) | (SWIZZLE_CODE[swizzle] << 62))


def thread_coords(thread):
    w, lane = thread // 32, thread % 32
    return w, lane >> 2, lane & 3


def d_map(n: int, dtype: str):
    """(thread, reg, half) -> (row, col) of the accumulator (isa.md F.1); arrays [128, nd, h]."""
    th = np.arange(128)[:, None]
    w, g, t = thread_coords(th)
    ne = n // 2
    i = np.arange(ne)[None, :]
    row = 16 * w + g + 8 * ((i >> 1) & 1)
    col = 8 * (i >> 2) + 2 * t + (i & 1)
    if dtype == "f16":      # element i in register i >> 1, half i & 1
        return row.reshape(128, ne // 2, 2), col.reshape(128, ne // 2, 2)
    return row[:, :, None], col[:, :, None]


def a_map(atype: str):
    """(thread, element i) -> (row, col) of A in registers (isa.md F.2-F.5); E elements."""
    th = np.arange(128)[:, None]
    w, g, t = thread_coords(th)
    if atype == "tf32":
        i = np.arange(4)[None, :]
        return 16 * w + g + 8 * (i & 1), t + 4 * (i >> 1)
    if EBITS[atype] == 16:
        i = np.arange(8)[None, :]
        return 16 * w + g + 8 * ((i >> 1) & 1), 2 * t + (i & 1) + 8 * (i >> 2)
    if EBITS[atype] == 8:
        i = np.arange(16)[None, :]
        return 16 * w + g + 8 * ((i >> 2) & 1), 4 * t + (i & 3) + 16 * (i >> 3)
    i = np.arange(128)[None, :]
    return 16 * w + g + 8 * ((i >> 5) & 1), 32 * t + (i & 31) + 128 * (i >> 6)


def pack_a(atype: str, A: np.ndarray) -> np.ndarray:
    """A [T, 64, K] codes -> registers [T, 128, 4]."""
    r, c = a_map(atype)
    el = A[:, r, c].astype(np.uint64)                        # [T, 128, E]
    bits = EBITS[atype]
    E = el.shape[2]
    per = 32 // bits
    el = el.reshape(el.shape[0], 128, 4, per)
    sh = (np.arange(per) * bits).astype(np.uint64)
    mask = np.uint64((1 << bits) - 1)
    return np.bitwise_or.reduce((el & mask) << sh, axis=3).astype(np.uint32) if E else None


def unpack_d(dtype: str, n: int, d: np.ndarray) -> np.ndarray:
    """registers [T, 128, nd] -> D [T, 64, N] codes."""
    r, c = d_map(n, dtype)
    T = d.shape[0]
    out = np.zeros((T, 64, n), np.uint32)
    if dtype == "f16":
        v = np.stack([d & 0xFFFF, d >> 16], axis=-1)
    else:
        v = d[..., None]
    out[:, r, c] = v
    return out


def pack_c(dtype: str, n: int, C: np.ndarray) -> np.ndarray:
    r, c = d_map(n, dtype)
    v = C[:, r, c].astype(np.uint32)
    if dtype == "f16":
        return (v[..., 0] & 0xFFFF) | (v[..., 1] << 16)
    return v[..., 0]


def kmajor_offsets(rows: int, K: int, bits: int):
    """Byte offset and bit of element (mn, k) in the no-swizzle K-major canonical layout
    ("interleave": 8 x 16-byte core matrices; LBO = 128 between core matrices along K,
    SBO = 128 * (16-byte chunks of K) between 8-row groups).  Returns (byte, bit, lbo, sbo)."""
    per16 = 128 // bits
    chunks = max(1, K // per16)
    lbo, sbo = 128, 128 * chunks
    mn = np.arange(rows)[:, None]
    k = np.arange(K)[None, :]
    byte_in = (k % per16) * bits // 8
    bit = (k % per16) * bits % 8
    byte = (mn % 8) * 16 + (mn // 8) * sbo + byte_in + (k // per16) * lbo
    return byte, bit, lbo, sbo


def write_kmajor(img: np.ndarray, base: int, M: np.ndarray, bits: int):
    """Place a [T, rows, K] code matrix into images [T, IMG] at byte ``base`` (K-major, no swizzle)."""
    T, rows, K = M.shape
    byte, bit, lbo, sbo = kmajor_offsets(rows, K, bits)
    nbytes = max(1, bits // 8)
    for j in range(nbytes):
        if bits >= 8:
            img[:, base + byte + j] = (M >> (8 * j)) & 0xFF
    if bits < 8:     # b1: element k at bit k % 8 of its byte (register order, little-endian)
        flat = (base + byte).reshape(-1)
        sh = np.broadcast_to(bit, byte.shape).reshape(-1).astype(np.uint64)
        vals = ((M.reshape(T, -1).astype(np.uint64) & np.uint64(1)) << sh).astype(np.uint8)
        for j in range(8):          # one bit position at a time: no two writes to a byte collide
            sel = sh == j
            img[:, flat[sel]] |= vals[:, sel]
    return lbo, sbo


# digit coding: integers every type holds exactly (A or B element = digit, the other operand 1)
DIGIT_BASE = {"f16": 2048, "bf16": 256, "tf32": 2048, "e4m3": 16, "e5m2": 8, "s8": 128, "u8": 256, "b1": 2}


def int_codes(t: str, v: np.ndarray) -> np.ndarray:
    """Codes of small non-negative integers (exact in type t)."""
    from ..numerics.formats import from_float64

    v = np.asarray(v)
    if t in ("s8", "u8", "b1"):
        return v.astype(np.uint64)
    if t == "tf32":
        return from_float64(v.astype(np.float64), "f32").astype(np.uint64)
    return from_float64(v.astype(np.float64), t).astype(np.uint64)


def _digits(x: np.ndarray, base: int, count: int):
    return [(x // base ** j) % base for j in range(count)]


def _ndigits(n: int, base: int) -> int:
    c = 1
    while base ** c < n:
        c += 1
    return c


@dataclass
class Probe:
    group: str
    key: str
    kernel: WgKernel
    inputs: dict
    info: dict


def _kname(*parts) -> str:
    return "wg_" + "_".join(str(p) for p in parts)


def _img(k: WgKernel, T: int) -> np.ndarray:
    return np.zeros((T, k.img), np.uint8)


def dlayout_probes() -> list[Probe]:
    """D for every N: D[m][n] = n + 256 m (f32 / s32), or n and m in two CTAs (f16)."""
    out = []
    ns_float = list(range(8, 257, 8))
    ns_int = [8, 16, 24] + list(range(32, 257, 16))
    for dtype, at, ns in (("f32", "f16", ns_float), ("f16", "f16", ns_float), ("s32", "u8", ns_int)):
        K = 16 if at == "f16" else 32
        bits = EBITS[at]
        for n in ns:
            k = WgKernel(_kname("dl", dtype, n), f"m64n{n}k{K}", dtype, at, at, img=2048 + n * K * bits // 8)
            m = np.arange(64)
            nn = np.arange(n)
            if dtype == "f16":
                targets = [("n", 1), ("m", 0)]
            else:
                targets = [("nm", None)]
            T = len(targets)
            A = np.zeros((T, 64, K), np.int64)
            B = np.zeros((T, K, n), np.int64)
            for j, (what, _) in enumerate(targets):
                if what == "n":
                    A[j, :, 0], B[j, 0, :] = 1, nn
                elif what == "m":
                    A[j, :, 1], B[j, 1, :] = m, 1
                else:
                    A[j, :, 0], B[j, 0, :] = 1, nn
                    A[j, :, 1], A[j, :, 2] = m, m
                    B[j, 1, :], B[j, 2, :] = 128, 128
            img = _img(k, T)
            lbo, sbo = write_kmajor(img, 0, int_codes(at, A).reshape(A.shape), bits)
            boff = 2048
            write_kmajor(img, boff, int_codes(at, np.swapaxes(B, 1, 2)).reshape(T, n, K), bits)
            dsc = [(desc(0, lbo, sbo), desc(boff, lbo, sbo))] * T
            out.append(Probe("layout", f"dl.{dtype}.n{n}", k, pack_inputs(k, img, dsc, flags=np.zeros(T)),
                             {"kind": "dlayout", "dtype": dtype, "n": n, "targets": [t[0] for t in targets]}))
    return out


def alayout_probes() -> list[Probe]:
    """A from registers: element (thread, i) holds a digit of its index; B = one-hot (k == n % K)."""
    out = []
    for at, K in (("tf32", 8), ("f16", 16), ("bf16", 16), ("e4m3", 32), ("e5m2", 32), ("s8", 32), ("u8", 32), ("b1", 256)):
        dtype = "s32" if at in ("s8", "u8", "b1") else "f32"
        n = 256 if at == "b1" else 32
        bits = EBITS[at]
        k = WgKernel(_kname("al", at), f"m64n{n}k{K}", dtype, at, at, asrc="reg", img=2048 + n * K * bits // 8 + 1024)
        r, c = a_map(at)
        E = r.shape[1]
        idx = np.arange(128)[:, None] * E + np.arange(E)[None, :]
        base = DIGIT_BASE[at]
        nd = _ndigits(128 * E, base)
        T = nd
        A = np.zeros((T, 64, K), np.int64)
        for j, dig in enumerate(_digits(idx, base, nd)):
            A[j][r, c] = dig
        B = np.zeros((T, K, n), np.int64)
        B[:, np.arange(n) % K, np.arange(n)] = 1
        img = _img(k, T)
        lbo, sbo = write_kmajor(img, 0, int_codes(at, np.swapaxes(B, 1, 2)).reshape(T, n, K), bits)
        areg = pack_a(at, int_codes(at, A).reshape(A.shape))
        dsc = [(0, desc(0, lbo, sbo))] * T
        out.append(Probe("layout", f"al.{at}", k, pack_inputs(k, img, dsc, a=areg, flags=np.zeros(T)),
                         {"kind": "alayout", "atype": at, "n": n, "K": K, "base": base, "digits": nd}))
    return out


def _canonical(major: str, sw: int, rows: int, K: int, bits: int) -> tuple[int, int]:
    """(LBO, SBO) bytes of a canonical layout of a rows x K operand (isa.md §H)."""
    W = max(1, sw // 16)
    if major == "K":
        if sw == 0:
            return 128, 128 * max(1, K * bits // 128)
        return 16, 8 * 16 * W
    per = 128 // bits                        # elements per 16 bytes
    if sw == 0:
        return 128 * (rows // per), 128      # LBO: between 8-row K groups; SBO: between 16-byte column groups
    return 8 * 16 * W * max(1, K // 8), 8 * 16 * W   # LBO: between W*16-byte column groups; SBO: between 8-row K groups


def readout_configs(major: str, rows: int, K: int, bits: int) -> list[dict]:
    cfgs = []
    for sw in (0, 32, 64, 128):
        lbo, sbo = _canonical(major, sw, rows, K, bits)
        for start in (0, 16, 32, 64, 128, 256, 512):
            cfgs.append({"sw": sw, "lbo": lbo, "sbo": sbo, "start": start, "base": 0})
        if sw:
            for base in (1, 2, 3, 4, 7):
                cfgs.append({"sw": sw, "lbo": lbo, "sbo": sbo, "start": 0, "base": base})
                cfgs.append({"sw": sw, "lbo": lbo, "sbo": sbo, "start": 384, "base": base})
            if major == "K":
                for lb in (0, 4096):
                    cfgs.append({"sw": sw, "lbo": lb, "sbo": sbo, "start": 0, "base": 0})
    return cfgs


def _slot_image(k: WgKernel, T: int, bits: int, digit: int, base: int, region: int, t: str) -> np.ndarray:
    """Every element slot of bytes [0, region) holds digit ``digit`` of its own slot index."""
    img = _img(k, T)
    if bits >= 8:
        nslot = region // (bits // 8)
        val = int_codes(t, (np.arange(nslot) // base ** digit) % base)
        for j in range(bits // 8):
            img[:, j:region:bits // 8] = ((val >> np.uint64(8 * j)) & np.uint64(0xFF)).astype(np.uint8)
    else:
        s = np.arange(region * 8)
        v = ((s // base ** digit) % base).reshape(region, 8)
        img[:, :region] = np.bitwise_or.reduce(v.astype(np.uint8) << np.arange(8, dtype=np.uint8), axis=1)
    return img


def readout_probes() -> list[Probe]:
    """Which shared-memory element does each operand element come from, for a descriptor?"""
    out = []
    specs = [("B", "f16", 0, 128, 16), ("B", "f16", 1, 128, 16), ("B", "tf32", 0, 64, 8), ("B", "e4m3", 0, 64, 32),
             ("A", "f16", 0, 16, 16), ("A", "f16", 1, 16, 16), ("A", "tf32", 0, 8, 8), ("A", "e4m3", 0, 32, 32)]
    for opnd, at, trans, n, K in specs:
        bits = EBITS[at]
        major = "MN" if trans else "K"
        asrc = "reg" if opnd == "B" else "desc"
        k = WgKernel(_kname("ro", opnd, at, major), f"m64n{n}k{K}", "f32", at, at, asrc=asrc,
                     trans_a=trans if opnd == "A" else 0, trans_b=trans if opnd == "B" else 0, img=32768)
        region = 16384
        base = DIGIT_BASE[at]
        nd = _ndigits(region * 8 // bits, base)
        rows = n if opnd == "B" else 64
        for ci, cfg in enumerate(readout_configs(major, rows, K, bits)):
            T = nd
            imgs = np.concatenate([_slot_image(k, 1, bits, j, base, region, at) for j in range(nd)])
            dd = desc(cfg["start"], cfg["lbo"], cfg["sbo"], cfg["sw"], cfg["base"])
            if opnd == "B":
                A = np.zeros((T, 64, K), np.int64)
                A[:, np.arange(64), np.arange(64) % K] = 1
                areg = pack_a(at, int_codes(at, A).reshape(A.shape))
                inp = pack_inputs(k, imgs, [(0, dd)] * T, a=areg, flags=np.zeros(T))
            else:
                B = np.zeros((T, K, n), np.int64)
                B[:, np.arange(n) % K, np.arange(n)] = 1
                lbo, sbo = write_kmajor(imgs, region, int_codes(at, np.swapaxes(B, 1, 2)).reshape(T, n, K), bits)
                inp = pack_inputs(k, imgs, [(dd, desc(region, lbo, sbo))] * T, flags=np.zeros(T))
            out.append(Probe("readout", f"ro.{opnd}.{at}.{major}.{ci}", k, inp,
                             {"kind": "readout", "operand": opnd, "atype": at, "major": major, "n": n, "K": K,
                              "cfg": cfg, "desc": f"{dd:#018x}", "base": base, "digits": nd, "bits": bits}))
    return out


DENSE_COMBOS = ([("f32", "f16", "f16"), ("f16", "f16", "f16"), ("f32", "bf16", "bf16"), ("f32", "tf32", "tf32")]
                + [(d, a, b) for d in ("f32", "f16") for a in ("e4m3", "e5m2") for b in ("e4m3", "e5m2")]
                + [("s32", a, b) for a in ("s8", "u8") for b in ("s8", "u8")] + [("s32", "b1", "b1")])
K_OF = {"f16": 16, "bf16": 16, "tf32": 8, "e4m3": 32, "e5m2": 32, "s8": 32, "u8": 32, "b1": 256}


def _mats(rng, at, bt, ct, T, K, n, regime):
    from ..vectors.regimes import random_elements

    A = random_elements(rng, at, T * 64 * K, regime, "a").reshape(T, 64, K)
    B = random_elements(rng, bt, T * K * n, regime, "b").reshape(T, K, n)
    C = random_elements(rng, ct, T * 64 * n, regime, "c").reshape(T, 64, n)
    return A.astype(np.uint64), B.astype(np.uint64), C.astype(np.uint64)


def _numerics_probe(group, key, k, A, B, C, flags, info):
    T, _, K = A.shape
    n = B.shape[2]
    bits_a, bits_b = EBITS[k.atype], EBITS[k.btype]
    img = _img(k, T)
    lbo, sbo = write_kmajor(img, 0, np.swapaxes(B, 1, 2), bits_b)
    inp = pack_inputs(k, img, [(0, desc(0, lbo, sbo))] * T, a=pack_a(k.atype, A), c=pack_c(k.dtype, n, C), flags=flags)
    assert bits_a == bits_b or k.atype in ("s8", "u8", "e4m3", "e5m2")
    return Probe(group, key, k, inp, info)


WGMMA_PROBE_IDS = frozenset(
    "A B C D1 D2 D3 D4 D5 D6 D7 D8 D9 D10 D11 D12 D13 D14 D15 E1 E2 F G G158 G159 G16 G16_46 G16_47 H1 H2 H3 H16 P R "
    "R16 R32 K1 K2 DT3 DT4 DT5 DT7 M1 M2 M3 L3 M2h S1a S1b S1c S1d S1e S1f S1g S2i S2ii S2iii S2f8 I1 I4 S2bf S2tf "
    "S2h S2u16 S2u S2utf".split())


def numerics_probes(T: int = 32, seed: int = 20261128) -> list[Probe]:
    """Random warpgroups of every dense type combination in every regime of formal.vectors.regimes
    (scale-d = 0 in every other CTA of the special regime), imm-scale -1 variants, and the sm_90
    numerics probes of formal.numerics.probes whose K is the instruction's."""
    from ..vectors.regimes import REGIMES

    out = []
    n = 8
    for ci, (dt, at, bt) in enumerate(DENSE_COMBOS):
        K = K_OF[at]
        ct = dt
        sats = (False, True) if dt == "s32" and at != "b1" else (False,)
        for sat in sats:
            k = WgKernel(_kname("nu", dt, at, bt, "sat" if sat else ""), f"m64n{n}k{K}", dt, at, bt, asrc="reg",
                         satfinite=sat, img=4096)
            for ri, r in enumerate(REGIMES):
                rng = np.random.default_rng([seed, ci, ri, int(sat)])
                A, B, C = _mats(rng, at, bt, ct, T, K, n, r)
                flags = (np.arange(T) % 2) if r == "special" else np.ones(T)
                out.append(_numerics_probe("numerics", f"nu.{dt}.{at}.{bt}.{int(sat)}.{r}", k, A, B, C, flags,
                                           {"kind": "random", "dtype": dt, "atype": at, "btype": bt, "ctype": ct,
                                            "satfinite": sat, "regime": r, "n": n, "K": K}))
    for ci, (dt, at, bt) in enumerate([("f32", "f16", "f16"), ("f32", "bf16", "bf16"), ("f32", "tf32", "tf32"),
                                       ("f32", "e4m3", "e4m3"), ("f16", "e5m2", "e5m2"), ("f16", "f16", "f16")]):
        K = K_OF[at]
        for sa, sb in ((-1, 1), (1, -1), (-1, -1)):
            k = WgKernel(_kname("ns", dt, at, bt, "m" if sa < 0 else "p", "m" if sb < 0 else "p"), f"m64n{n}k{K}",
                         dt, at, bt, asrc="reg", scale_a=sa, scale_b=sb, img=4096)
            for ri, r in enumerate(("special", "normal", "tiny")):
                rng = np.random.default_rng([seed, 100 + ci, ri, sa + 1, sb + 1])
                A, B, C = _mats(rng, at, bt, dt, T, K, n, r)
                flags = (np.arange(T) % 2) if r == "special" else np.ones(T)
                out.append(_numerics_probe("numx", f"ns.{dt}.{at}.{bt}.{sa}.{sb}.{r}", k, A, B, C, flags,
                                           {"kind": "scale", "dtype": dt, "atype": at, "btype": bt, "ctype": dt,
                                            "scale_a": sa, "scale_b": sb, "regime": r, "n": n, "K": K}))
    # the sm_90 numerics probes whose K is the wgmma instruction's, one CTA each (row 0, column 0);
    # the list is fixed (the run's inputs must rebuild bit for bit as formal.numerics.probes grows)
    from ..numerics import probes as P

    by = {}
    for p in P._probes():
        if p.id not in WGMMA_PROBE_IDS:
            continue
        f = p.form
        combo = (f["dtype"], f["atype"], f["btype"])
        if combo not in DENSE_COMBOS or f["ctype"] != f["dtype"] or p.mnk[2] != K_OF[f["atype"]] \
                or f.get("satfinite") or f.get("rounding"):
            continue
        by.setdefault(combo, []).append(p)
    for combo, ps in sorted(by.items()):
        dt, at, bt = combo
        K = K_OF[at]
        k = WgKernel(_kname("np", dt, at, bt), f"m64n{n}k{K}", dt, at, bt, asrc="reg", img=4096)
        T = len(ps)
        A = np.zeros((T, 64, K), np.uint64)
        B = np.zeros((T, K, n), np.uint64)
        C = np.zeros((T, 64, n), np.uint64)
        for j, p in enumerate(ps):
            a, b, c = p.codes()
            A[j, 0], B[j, :, 0], C[j, 0, 0] = a, b, c
        out.append(_numerics_probe("numx", f"np.{dt}.{at}.{bt}", k, A, B, C, np.ones(T),
                                   {"kind": "probes", "dtype": dt, "atype": at, "btype": bt, "ctype": dt, "n": n,
                                    "K": K, "ids": [p.id for p in ps]}))
    return out


# --------------------------------------------------------------------------------- sparse
# Per warp w, wgmma.mma_async.sp reads rows 16w..16w+15 as the mma.sp instruction of the same
# types reads its 16 rows (isa.md §D/F.6-F.7: the same compressed-A and metadata figures).

SPARSE_COMBOS = ([("f32", "f16", "f16"), ("f16", "f16", "f16"), ("f32", "bf16", "bf16"), ("f32", "tf32", "tf32")]
                 + [(d, a, b) for d in ("f32", "f16") for a in ("e4m3", "e5m2") for b in ("e4m3", "e5m2")]
                 + [("s32", a, b) for a in ("s8", "u8") for b in ("s8", "u8")])
SPARSE_K = {"f16": 32, "bf16": 32, "tf32": 16, "e4m3": 64, "e5m2": 64, "s8": 64, "u8": 64}


def mma_sp_twin(dtype: str, atype: str, btype: str) -> str:
    """The mma.sp form whose 16 rows a warp of the sparse wgmma reads like."""
    K = SPARSE_K[atype]
    return f"mma.sp.sync.aligned.m16n8k{K}.row.col.{dtype}.{atype}.{btype}.{dtype}"


def selectors(atype: str) -> tuple[int, ...]:
    return (0, 1) if atype in ("f16", "bf16", "tf32") else (0,)


def _metadata(rng, dtype, atype, btype, T, sel):
    from ..catalog import parse
    from ..vectors.regimes import random_metadata

    f = parse(mma_sp_twin(dtype, atype, btype))
    return np.concatenate([random_metadata(rng, f, T) for _ in range(4)], axis=1).astype(np.uint32)


def sparse_terms(dtype, atype, btype, a_regs, e, sel):
    """(vals [T,64,K/2], kidx [T,64,K/2]): each warp's rows through its mma.sp twin."""
    from ..metadata import gather_terms

    form = mma_sp_twin(dtype, atype, btype)
    parts = [gather_terms(form, a_regs[:, 32 * w:32 * w + 32], e[:, 32 * w:32 * w + 32], sel) for w in range(4)]
    return np.concatenate([p[0] for p in parts], axis=1), np.concatenate([p[1] for p in parts], axis=1)


def sparse_probes(T: int = 16, seed: int = 20261129) -> list[Probe]:
    """Layout: stored A elements hold digits of (thread * E + i + 1), B one-hot (k == n % K), so
    D[m][n] names the stored element the metadata put at logical column n % K (0: none).
    Numerics: random stored A, metadata, B, C in four regimes, every selector."""
    out = []
    for ci, (dt, at, bt) in enumerate(SPARSE_COMBOS):
        K = SPARSE_K[at]
        bits = EBITS[at]
        for sel in selectors(at):
            if (dt, at, bt) in (("f32", "f16", "f16"), ("f32", "tf32", "tf32"), ("f32", "e4m3", "e4m3"),
                                ("s32", "s8", "s8"), ("f32", "bf16", "bf16")):
                n = max(K, 8)
                k = WgKernel(_kname("sl", dt, at, bt, sel), f"m64n{n}k{K}", dt, at, bt, asrc="reg", sparse=True, sel=sel,
                             img=2048 + n * K * EBITS[bt] // 8 + 1024)
                r, c = a_map(at)
                E = r.shape[1]
                idx = np.arange(128)[:, None] * E + np.arange(E)[None, :] + 1
                base = DIGIT_BASE[at]
                nd = _ndigits(128 * E + 1, base)
                rng = np.random.default_rng([seed, ci, sel])
                e = np.repeat(_metadata(rng, dt, at, bt, 1, sel), nd, axis=0)
                A = np.zeros((nd, 64, K // 2), np.int64)
                for j, dig in enumerate(_digits(idx, base, nd)):
                    A[j][r, c] = dig
                B = np.zeros((nd, K, n), np.int64)
                B[:, np.arange(n) % K, np.arange(n)] = 1
                img = _img(k, nd)
                lbo, sbo = write_kmajor(img, 0, int_codes(bt, np.swapaxes(B, 1, 2)).reshape(nd, n, K), EBITS[bt])
                areg = pack_a(at, int_codes(at, A).reshape(A.shape))
                cz = np.zeros((nd, 128, k.nd), np.uint32)
                out.append(Probe("sparse", f"sl.{dt}.{at}.{bt}.{sel}", k,
                                 pack_inputs(k, img, [(0, desc(0, lbo, sbo))] * nd, a=areg, c=cz, e=e, flags=np.zeros(nd)),
                                 {"kind": "sparse_layout", "dtype": dt, "atype": at, "btype": bt, "sel": sel, "n": n,
                                  "K": K, "base": base, "digits": nd}))
            n = 8
            k = WgKernel(_kname("sn", dt, at, bt, sel), f"m64n{n}k{K}", dt, at, bt, asrc="reg", sparse=True, sel=sel,
                         img=4096)
            for ri, regime in enumerate(("normal", "finite", "special", "tiny")):
                rng = np.random.default_rng([seed, ci, sel, ri, 7])
                A, B, C = _mats(rng, at, bt, dt, T, K // 2, n, regime)
                B = _mats(rng, bt, bt, dt, T, K, n, regime)[1]
                e = _metadata(rng, dt, at, bt, T, sel)
                img = _img(k, T)
                lbo, sbo = write_kmajor(img, 0, np.swapaxes(B, 1, 2), EBITS[bt])
                flags = (np.arange(T) % 2) if regime == "special" else np.ones(T)
                out.append(Probe("sparse", f"sn.{dt}.{at}.{bt}.{sel}.{regime}", k,
                                 pack_inputs(k, img, [(0, desc(0, lbo, sbo))] * T, a=pack_a(at, A), c=pack_c(dt, n, C),
                                             e=e, flags=flags),
                                 {"kind": "sparse_random", "dtype": dt, "atype": at, "btype": bt, "ctype": dt, "sel": sel,
                                  "regime": regime, "n": n, "K": K}))
    return out


def validation_probes() -> list[Probe]:
    """Fresh random data (another seed) for the same numerics kernels: the model decided on the
    first run's data is checked on data it has not seen."""
    out = []
    for p in numerics_probes(T=16, seed=20261130):
        if p.info["kind"] != "probes":
            out.append(Probe("validate", "v" + p.key, p.kernel, p.inputs, p.info))
    return out


def sparse_desc_probes(T: int = 8, seed: int = 20261130) -> list[Probe]:
    """Sparse A from shared memory (operand a.sp of specs/wgmma_smem.toml): the compressed
    64 x K/2 tile K-major without swizzle at byte 1024, B at byte 0, random metadata, every
    selector, two regimes; the analysis compares with formal.evaluate.evaluate_wgmma."""
    out = []
    for ci, (dt, at, bt) in enumerate(SPARSE_COMBOS):
        K = SPARSE_K[at]
        for sel in selectors(at):
            n = 8
            k = WgKernel(_kname("sd", dt, at, bt, sel), f"m64n{n}k{K}", dt, at, bt, asrc="desc", sparse=True,
                         sel=sel, img=4096)
            for ri, regime in enumerate(("normal", "special")):
                rng = np.random.default_rng([seed, ci, sel, ri, 11])
                A, _, C = _mats(rng, at, bt, dt, T, K // 2, n, regime)
                B = _mats(rng, bt, bt, dt, T, K, n, regime)[1]
                e = _metadata(rng, dt, at, bt, T, sel)
                img = _img(k, T)
                lbo_b, sbo_b = write_kmajor(img, 0, np.swapaxes(B, 1, 2), EBITS[bt])
                lbo_a, sbo_a = write_kmajor(img, 1024, A, EBITS[at])
                flags = (np.arange(T) % 2) if regime == "special" else np.ones(T)
                out.append(Probe("sparse_desc", f"sd.{dt}.{at}.{bt}.{sel}.{regime}", k,
                                 pack_inputs(k, img, [(desc(1024, lbo_a, sbo_a), desc(0, lbo_b, sbo_b))] * T,
                                             c=pack_c(dt, n, C), e=e, flags=flags),
                                 {"kind": "sparse_desc", "dtype": dt, "atype": at, "btype": bt, "sel": sel,
                                  "regime": regime, "n": n, "K": K}))
    return out


def witness_probes(path: str = "proofs/evidence/mmasim_wgmma_grading.json") -> list[Probe]:
    """The reduced witnesses where MMA-Sim's wgmma model departs from the spec's (element (0, 0),
    every other element zero): one CTA each, so the silicon says which of the two it computes."""
    if not os.path.exists(path):
        return []
    out = []
    for f in json.load(open(path))["forms"]:
        w = f.get("vectors", {}).get("witness")
        if not w:
            continue
        red = w["reduced"]
        dt, at, bt = f["qualifier"].split(".")[-3:]
        shape = f["qualifier"].split(".")[0]
        k = WgKernel(_kname("mw", dt, at, bt), shape, dt, at, bt, asrc="reg", img=4096)
        n, K = k.n, k.k
        A = np.zeros((1, 64, K), np.uint64)
        B = np.zeros((1, K, n), np.uint64)
        C = np.zeros((1, 64, n), np.uint64)
        for kk, v in red["a"].items():
            A[0, w["row"], int(kk)] = int(v, 16)
        for kk, v in red["b"].items():
            B[0, int(kk), w["col"]] = int(v, 16)
        C[0, w["row"], w["col"]] = int(red["c"], 16)
        out.append(_numerics_probe("mmasim_witness", f"mw.{f['qualifier']}", k, A, B, C, np.ones(1),
                                   {"kind": "mmasim_witness", "form": f["form"], "row": w["row"], "col": w["col"],
                                    "spec": red["expected"], "mmasim": red["got"], "cause": w["cause"]}))
    return out


# --------------------------------------------------------------------------------- vectors
# Matrix-level vectors written by `ptx-formal vectors <wgmma form> --level matrix --format npz`
# (dense forms): each case runs as one CTA with A in registers and B K-major in shared memory,
# and the expected D the file carries is compared with the silicon's (tools/wgmma_vectors_silicon.py).

def vector_probes(vdir: str) -> list[Probe]:
    out = []
    for fn in sorted(os.listdir(vdir)) if os.path.isdir(vdir) else []:
        if not fn.endswith(".npz"):
            continue
        z = np.load(os.path.join(vdir, fn))
        head = json.loads(str(z["meta"]))["header"]
        parts = head["opcode"].split(".")
        shape = next(p for p in parts if p.startswith("m64n"))
        dt, at, bt = parts[-3:]
        k = WgKernel(_kname("vec", fn[:-4].replace(".", "_")), shape, dt, at, bt, asrc="reg",
                     satfinite="satfinite" in parts, img=4096)
        A, B, C = z["A"], z["B"], z["C"]
        out.append(_numerics_probe("vectors", fn[:-4], k, A, B, C, np.ones(A.shape[0]),
                                   {"kind": "vectors", "file": fn, "opcode": head["opcode"], "cases": int(A.shape[0])}))
    return out


GROUPS = {"layout": lambda: dlayout_probes() + alayout_probes(), "readout": readout_probes,
          "numerics": lambda: [p for p in numerics_probes() if p.group == "numerics"],
          "numx": lambda: [p for p in numerics_probes() if p.group == "numx"],
          "sparse": sparse_probes, "validate": validation_probes,
          "sparse_desc": sparse_desc_probes, "mmasim_witness": witness_probes,
          "vectors": lambda: vector_probes(os.environ.get("WG_VECTORS", ".devdata/wgvec"))}


def all_probes(groups=("layout", "readout", "numerics", "numx")) -> list[Probe]:
    out = []
    for g in groups:
        out += GROUPS[g]()
    return out


def input_digest(v) -> str:
    """The digest a run records per input array (device_session's input_digests.json)."""
    import hashlib
    return hashlib.sha256(np.ascontiguousarray(v).tobytes()).hexdigest()[:16]


def rebuilt_differ(probes: list[Probe], digests: dict) -> list[str]:
    """The inputs (``key.name``) of ``probes`` rebuilt here that are not the ones a run recorded
    (``digests``: group -> key.name -> digest): empty when the analysis reads the run's inputs."""
    return [f"{p.key}.{n}" for p in probes for n, v in p.inputs.items()
            if digests.get(p.group, {}).get(f"{p.key}.{n}") != input_digest(v)]


def build(d: str, probes: list[Probe] | None = None, ptxas: str = "ptxas") -> dict:
    """Kernels assembled (ptxas, sm_90a) and every probe's inputs written to DIR."""
    os.makedirs(d, exist_ok=True)
    probes = all_probes() if probes is None else probes
    kernels = list({p.kernel.name: p.kernel for p in probes}.values())
    chunk = 24
    cubins = assemble(kernels, d, ptxas=ptxas, chunk=chunk)
    groups: dict[str, dict] = {}
    for p in probes:
        g = groups.setdefault(p.group, {})
        for n, v in p.inputs.items():
            g[f"{p.key}.{n}"] = v
    for g, arrs in groups.items():
        np.savez_compressed(os.path.join(d, f"in_{g}.npz"), **arrs)
    meta = {"kernels": kernel_dicts(kernels), "cubins": cubins,
            "kernel_module": {k.name: i // chunk for i, k in enumerate(kernels)}, "groups": sorted(groups)}
    json.dump(meta, open(os.path.join(d, "probes.json"), "w"))
    return meta


def main(argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m formal.hw.wgmma_probe")
    ap.add_argument("what", choices=["build", "run"])
    ap.add_argument("dir")
    ap.add_argument("--groups", default="layout,readout,numerics,numx", help="probe groups: " + ", ".join(GROUPS))
    a = ap.parse_args(argv)
    if a.what == "build":
        meta = build(a.dir, all_probes(a.groups.split(",")))
        print(f"{len(meta['kernels'])} kernels in {len(meta['cubins'])} cubins; groups {meta['groups']}")
    else:
        run_dir(a.dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


# --------------------------------------------------------------------------------- decoding
# What the silicon did, read back from the outputs without a layout model beyond the one the
# probe was built with: the tests compare these tables with the spec (fragments, descriptors).

def observed_a_index(p: Probe, d: np.ndarray) -> np.ndarray:
    """alayout probe: [64, K] -> index 128*E-coded (thread * E + element) that silicon put at A[m][k]."""
    from ..numerics.formats import to_float64

    n, K = p.info["n"], p.info["K"]
    D = unpack_d(p.kernel.dtype, n, d)
    v = to_float64(D, "f32") if p.kernel.dtype == "f32" else D.astype(np.int64)
    idx = sum(v[j] * p.info["base"] ** j for j in range(p.info["digits"]))
    return idx[:, :K].astype(np.int64)


def observed_d_coords(p: Probe, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """dlayout probe: (row, col) each accumulator register slot [128, nregs, halves] holds."""
    from ..numerics.formats import to_float64

    dt, n = p.info["dtype"], p.info["n"]
    if dt == "f16":
        v = to_float64(np.stack([d & 0xFFFF, d >> 16], axis=-1).astype(np.uint16), "f16")    # [T,128,nd,2]
        return v[1].astype(np.int64), v[0].astype(np.int64)
    v = to_float64(d, "f32") if dt == "f32" else d.astype(np.int64)
    v = v[0].astype(np.int64)[..., None]
    return v // 256, v % 256


def observed_readout(p: Probe, d: np.ndarray) -> np.ndarray:
    """readout probe: byte address (relative to the 1024-aligned array) of every operand element,
    [K, N] for B, [64, K] for A."""
    from ..numerics.formats import to_float64

    n, K, bits = p.info["n"], p.info["K"], p.info["bits"]
    v = to_float64(unpack_d("f32", n, d), "f32")
    idx = sum(v[j] * p.info["base"] ** j for j in range(p.info["digits"])).astype(np.int64)
    slots = idx[:K, :] if p.info["operand"] == "B" else idx[:, :K]
    return slots * bits // 8
