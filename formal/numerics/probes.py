"""Probe experiments that decide between numerics hypotheses on sm_90 (numerics.md §9).

Each :class:`Probe` is data: a form that runs on sm_90, the k entries of A row 0 and
B column 0 (everything else 0), c = C[0][0], and competing hypotheses.  A hypothesis
is an :class:`~formal.numerics.params.ArchModel` variant (a parameter change of the
sm_90 model) or, for behaviours the model does not parameterise, explicit bits.
``probe.predictions()`` gives each hypothesis' D[0][0] bits; ``probe.matrices()`` the
full A, B, C encodings for a hardware harness (one warp per probe), and
``probe.expected_d(name)`` the full D under a hypothesis (all other outputs are
+0 + products of zeros, itself a signed-zero check).

The first hypothesis of every probe is the current sm_90 model (``"sm_90"``).
``notes_expect`` records the bits that numerics.md §9 predicts, so a test can check the
model against that independent hand computation.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from .archs import SM90
from .engine import mma_matrices
from .formats import from_float64, get_format, to_float64
from .params import ArchModel, Emulated, mod4_groups

F32MAX = float(np.finfo(np.float32).max)


@dataclass(frozen=True)
class Bits:
    """A raw encoding given instead of a value (NaN payloads, tf32 low bits, ...)."""

    code: int


def parse_shape(shape: str):
    s = shape.lstrip(".").lstrip("m")
    m, rest = s.split("n")
    n, k = rest.split("k")
    return int(m), int(n), int(k)


@dataclass(frozen=True)
class Probe:
    id: str
    feature: str
    form: Mapping                      # shape, atype, btype, ctype, dtype (+ rounding, satfinite, bitop)
    a: Mapping                         # k -> value (exact in atype) or Bits
    b: Mapping
    c: object = 0.0                    # value (exact in ctype) or Bits
    hypotheses: Mapping = field(default_factory=dict)   # name -> ArchModel | int (bits)
    notes_expect: int | None = None    # numerics.md §9 prediction for the sm_90 model
    question: str = ""

    # -- encodings ---------------------------------------------------------------
    @property
    def mnk(self):
        return parse_shape(self.form["shape"])

    def _enc(self, v, t):
        if isinstance(v, Bits):
            return v.code
        f = get_format(t)
        if f.cls in ("int", "bit"):
            return int(v) & ((1 << f.bits) - 1)
        if t == "tf32":
            code = int(np.asarray(v, np.float32).view(np.uint32))
        else:
            code = int(from_float64(np.float64(v), t))
        val = to_float64(np.array([code], dtype=f.np_container), t)[0]
        if not (np.isnan(val) and np.isnan(v)) and val != v:
            raise ValueError(f"probe {self.id}: {v!r} is not exact in {t}")
        return code

    def codes(self):
        """(a [K], b [K], c) encodings of the probed dot product."""
        M, N, K = self.mnk
        at, bt, ct = self.form["atype"], self.form["btype"], self.form["ctype"]
        fa, fb = get_format(at), get_format(bt)
        a = np.zeros(K, fa.np_container)
        b = np.zeros(K, fb.np_container)
        for k, v in self.a.items():
            a[k] = self._enc(v, at)
        for k, v in self.b.items():
            b[k] = self._enc(v, bt)
        c = np.asarray(self._enc(self.c, ct), dtype=get_format(ct).np_container)
        return a, b, c

    def matrices(self):
        """Full A [M,K], B [K,N], C [M,N] encodings: row 0 / column 0 / C[0][0] set, rest 0."""
        M, N, K = self.mnk
        a, b, c = self.codes()
        A = np.zeros((M, K), a.dtype)
        B = np.zeros((K, N), b.dtype)
        C = np.zeros((M, N), c.dtype)
        A[0] = a
        B[:, 0] = b
        C[0, 0] = c
        return A, B, C

    def _kw(self):
        kw = {k: self.form[k] for k in ("atype", "btype", "ctype", "dtype")}
        for k in ("rounding", "satfinite", "bitop", "kind"):
            if k in self.form:
                kw[k] = self.form[k]
        kw["shape"] = self.mnk
        return kw

    def expected_d(self, name: str | None = None) -> np.ndarray:
        """Full D [M,N] encodings predicted by one hypothesis (default: the first)."""
        name = name or next(iter(self.hypotheses))
        h = self.hypotheses[name]
        A, B, C = self.matrices()
        if isinstance(h, ArchModel):
            return mma_matrices(A[None], B[None], C[None], arch=h, **self._kw())[0]
        D = mma_matrices(A[None], B[None], C[None], arch=SM90, **self._kw())[0]
        D[0, 0] = h
        return D

    def predictions(self) -> dict:
        """Hypothesis name -> predicted D[0][0] bits."""
        out = {}
        A, B, C = self.matrices()
        for name, h in self.hypotheses.items():
            if isinstance(h, ArchModel):
                out[name] = int(mma_matrices(A[None, :1], B[None][:, :, :1], C[None, :1, :1], arch=h,
                                             **self._kw())[0, 0, 0])
            else:
                out[name] = int(h)
        return out

    def decisive(self) -> bool:
        return len(set(self.predictions().values())) > 1

    def to_dict(self) -> dict:
        enc = lambda x: {"bits": hex(x.code)} if isinstance(x, Bits) else x  # noqa: E731
        a, b, c = self.codes()
        return {"id": self.id, "feature": self.feature, "form": dict(self.form), "question": self.question,
                "a": {int(k): enc(v) for k, v in self.a.items()}, "b": {int(k): enc(v) for k, v in self.b.items()},
                "c": enc(self.c), "a_codes": [hex(int(x)) for x in a], "b_codes": [hex(int(x)) for x in b],
                "c_code": hex(int(c)),
                "predictions": {k: hex(v) for k, v in self.predictions().items()}}


# ---------------------------------------------------------------------------
# Hypotheses (variants of the sm_90 model)
# ---------------------------------------------------------------------------

def _v(key: str, name: str, **kw) -> ArchModel:
    return SM90.replace_path(key, new_name=name, **kw)


def _emu(name: str, dtype: str, **kw) -> ArchModel:
    key = "f8." + dtype
    return SM90.with_path(key, SM90.paths[key].but(**kw), new_name=name)


def _emu_hmma(name: str, dtype: str, **kw) -> ArchModel:
    key = "f8." + dtype
    p: Emulated = SM90.paths[key]
    return SM90.with_path(key, p.but(hmma=p.hmma.but(**kw)), new_name=name)


def _wgmma_like(dtype: str) -> ArchModel:
    """Native fp8 block (QGMMA-like): BLOCK(32, 13, -133, RZ, 13) with c inside."""
    key = "f8." + dtype
    base = SM90.paths["f16." + dtype]
    blk = base.but(n=32, F=13, out_frac=13 if dtype == "f32" else None)
    return SM90.with_path(key, blk, new_name="native fp8 block (n=32, F=13)")


SEQ16 = ((32, (tuple(range(16)), tuple(range(16, 32)))), (16, (tuple(range(8)), tuple(range(8, 16)))))
EVENODD = ((32, (tuple(range(0, 32, 2)), tuple(range(1, 32, 2)))),)
SPLIT16 = ((16, mod4_groups(16)),)
ONE16 = ((32, mod4_groups(32)), (16, (tuple(range(16)),)))

F16_F32 = {"shape": "m16n8k16", "atype": "f16", "btype": "f16", "ctype": "f32", "dtype": "f32"}
F16_K8 = {"shape": "m16n8k8", "atype": "f16", "btype": "f16", "ctype": "f32", "dtype": "f32"}
BF16_K8 = {"shape": "m16n8k8", "atype": "bf16", "btype": "bf16", "ctype": "f32", "dtype": "f32"}
TF32_K4 = {"shape": "m16n8k4", "atype": "tf32", "btype": "tf32", "ctype": "f32", "dtype": "f32"}
F64_K8 = {"shape": "m16n8k8", "atype": "f64", "btype": "f64", "ctype": "f64", "dtype": "f64"}
F64_K4b = {"shape": "m16n8k4", "atype": "f64", "btype": "f64", "ctype": "f64", "dtype": "f64"}
F16_F16 = {"shape": "m16n8k16", "atype": "f16", "btype": "f16", "ctype": "f16", "dtype": "f16"}
BF16_F32 = {"shape": "m16n8k16", "atype": "bf16", "btype": "bf16", "ctype": "f32", "dtype": "f32"}
TF32_K8 = {"shape": "m16n8k8", "atype": "tf32", "btype": "tf32", "ctype": "f32", "dtype": "f32"}
E5M2_K32 = {"shape": "m16n8k32", "atype": "e5m2", "btype": "e5m2", "ctype": "f32", "dtype": "f32"}
E4M3_K32_F16 = {"shape": "m16n8k32", "atype": "e4m3", "btype": "e4m3", "ctype": "f16", "dtype": "f16"}
E5M2_K16 = {"shape": "m16n8k16", "atype": "e5m2", "btype": "e5m2", "ctype": "f32", "dtype": "f32"}
F64_K4 = {"shape": "m8n8k4", "atype": "f64", "btype": "f64", "ctype": "f64", "dtype": "f64"}
F16_M8 = {"shape": "m8n8k4", "atype": "f16", "btype": "f16", "ctype": "f32", "dtype": "f32"}
F16_M8H = {"shape": "m8n8k4", "atype": "f16", "btype": "f16", "ctype": "f16", "dtype": "f16"}
F64_K16 = {"shape": "m16n8k16", "atype": "f64", "btype": "f64", "ctype": "f64", "dtype": "f64"}
S8_K32 = {"shape": "m16n8k32", "atype": "s8", "btype": "s8", "ctype": "s32", "dtype": "s32"}
S4_K64 = {"shape": "m16n8k64", "atype": "s4", "btype": "s4", "ctype": "s32", "dtype": "s32"}
B1_K256 = {"shape": "m16n8k256", "atype": "b1", "btype": "b1", "ctype": "s32", "dtype": "s32"}

def p2(e: int) -> float:
    return float(2.0 ** e)


def _probes() -> list[Probe]:
    P = []
    add = P.append
    hm = "f16.f32"
    add(Probe("A", "alignment window F (f16->f32)", F16_F32,
              {k: p2(-13) for k in range(8)}, {k: p2(-13) for k in range(8)}, 1.0,
              {"sm_90": SM90, "F=26": _v(hm, "F=26", F=26), "F=24": _v(hm, "F=24", F=24)},
              0x3F800000, "eight 2^-26 terms vanish below a 25-bit window"))
    add(Probe("B", "truncation of negative addends", F16_F32, {0: -p2(-15)}, {0: p2(-15)}, 1.0,
              {"sm_90": SM90, "floor (two's complement)": _v(hm, "floor", truncation="floor"),
               "RZ of the exact sum": _v(hm, "none", truncation="none")},
              0x3F800000, "1 - 2^-30: magnitude truncation keeps 1.0"))
    add(Probe("C", "final rounding RZ (f32 out)", F16_F32, {0: p2(-12), 1: p2(-12)}, {0: p2(-12), 1: p2(-13)}, 1.0,
              {"sm_90": SM90, "RNE": _v(hm, "rn", rounding="rn")}, 0x3F800000, "1 + 3*2^-25"))
    for j in range(1, 16):
        add(Probe(f"D{j}", f"block size: a term at k={j} shares the block of k=0?", F16_F32,
                  {0: 1.0, j: p2(-12)}, {0: 1.0, j: p2(-11)}, 1.0 + p2(-23),
                  {"sm_90": SM90, "n=8": _v(hm, "n=8", n=8), "n=4": _v(hm, "n=4", n=4)},
                  0x40000001 if j == 9 else None, "maps block boundaries inside k=0..15"))
    for form, tag in ((F16_K8, "Dk8"), (BF16_K8, "Dk8bf")):
        add(Probe(tag, "m16n8k8: all 8 k in one block?", form, {0: 1.0, 7: p2(-12)}, {0: 1.0, 7: p2(-11)},
                  1.0 + p2(-23), {"sm_90": SM90, "n=4": _v(form["atype"] + ".f32", "n=4", n=4)}, 0x40000001))
    add(Probe("E1", "c inside the window", F16_F32, {0: 1.0, 1: -1.0}, {0: 1.0, 1: 1.0}, p2(-26),
              {"sm_90": SM90, "late c": _v(hm, "late c", c_entry="after")}, 0x00000000))
    add(Probe("E2", "c inside the window", F16_F32, {0: 1.0, 1: -1.0}, {0: 1.0, 1: 1.0}, p2(-25),
              {"sm_90": SM90, "late c": _v(hm, "late c", c_entry="after")}, 0x33000000))
    add(Probe("F", "unnormalised product exponent", F16_F32, {0: 1.5, 1: -1.5, 2: p2(-12)},
              {0: 1.5, 1: 1.5, 2: p2(-13)}, 0.0,
              {"sm_90": SM90, "normalised products": _v(hm, "normalised", normalise_products=True)}, 0x33000000))
    bm = "bf16.f32"
    add(Probe("G", "minexp clamp -133 (bf16)", BF16_F32, {0: p2(-70), 1: -p2(-80)}, {0: p2(-70), 1: p2(-80)}, 0.0,
              {"sm_90": SM90, "no clamp": _v(bm, "no clamp", minexp=None), "-132": _v(bm, "-132", minexp=-132),
               "-134": _v(bm, "-134", minexp=-134)}, 0x00000200))
    for t, a1, b1 in ((-158, -79, -79), (-159, -79, -80)):
        add(Probe(f"G{-t}", f"minexp exactly: does -2^{t} survive next to 2^-140 (bf16)?", BF16_F32,
                  {0: p2(-70), 1: -p2(a1)}, {0: p2(-70), 1: p2(b1)}, 0.0,
                  {"sm_90": SM90, "-132": _v(bm, "-132", minexp=-132), "-134": _v(bm, "-134", minexp=-134)},
                  0x000001FF if t == -158 else 0x00000200,
                  "a term survives the window iff t >= minexp - F"))
    f16 = "f16.f16"
    add(Probe("G16", "minexp clamp of the f16 accumulator (-21 vs <= -23)", F16_F16,
              {0: p2(-12), 1: p2(-24)}, {0: p2(-13), 1: p2(-24)}, 0.0,
              {"sm_90": SM90, "no clamp": _v(f16, "no clamp", minexp=None),
               "-23": _v(f16, "-23", minexp=-23), "-22": _v(f16, "-22", minexp=-22)},
              None, "2^-25 + 2^-48: a tie at half the smallest subnormal unless 2^-48 survives"))
    for t, a1, b1 in ((-46, -23, -23), (-47, -24, -23)):
        add(Probe(f"G16_{-t}", f"f16 minexp exactly: does 2^{t} break the 2^-25 tie?", F16_F16,
                  {0: p2(-12), 1: p2(a1)}, {0: p2(-13), 1: p2(b1)}, 0.0,
                  {"sm_90": SM90, "-20": _v(f16, "-20", minexp=-20), "-22": _v(f16, "-22", minexp=-22)},
                  0x0001 if t == -46 else 0x0000))
    add(Probe("H1", "overflow of the RZ path", BF16_F32, {0: p2(104)}, {0: 1.0}, F32MAX,
              {"sm_90": SM90, "IEEE RZ (max finite)": _v(bm, "ieee", overflow="ieee")}, 0x7F800000))
    add(Probe("H2", "no overflow just below", BF16_F32, {0: p2(103)}, {0: 1.0}, F32MAX,
              {"sm_90": SM90, "IEEE RZ (max finite)": _v(bm, "ieee", overflow="ieee")}, 0x7F7FFFFF))
    add(Probe("H3", "products beyond the f32 range enter the window exactly", BF16_F32,
              {0: p2(100), 1: p2(100)}, {0: p2(100), 1: -p2(100)}, 1.0,
              {"sm_90": SM90, "exact sum": _v(bm, "exact", truncation="none"),
               "saturating products": 0x7FFFFFFF}, 0x00000000))
    add(Probe("H16", "f16 accumulator overflow at 65504 + half an ulp", F16_F16, {0: 16.0}, {0: 1.0}, 65504.0,
              {"sm_90": SM90, "satfinite": _v("f16.f16", "sat", overflow="satfinite")}, 0x7C00))
    add(Probe("P", "f16 accumulator rounds to nearest even", F16_F16, {0: p2(-11), 1: p2(-12)}, {0: 1.0, 1: 1.0},
              1.0, {"sm_90": SM90, "RZ": _v("f16.f16", "rz", rounding="rz")}, 0x3C01))
    add(Probe("R", "subnormal inputs align at emin", F16_F32, {0: p2(-24), 1: p2(-24)}, {0: 1.0, 1: p2(-16)}, 0.0,
              {"sm_90": SM90, "true exponents": _v(hm, "unpinned", pin_subnormals=False)}, 0x33800000))
    add(Probe("R16", "a subnormal f16 c aligns at emin -14 (f16 accumulator)", F16_F16, {0: p2(-12), 1: p2(-24)},
              {0: p2(-13), 1: p2(-20)}, p2(-23),
              {"sm_90": SM90, "c at its true exponent (read as f32)": _v("f16.f16", "c as f32", c_as_f32=True)},
              0x0002,
              "c = 2^-23 (f16 subnormal) + 2^-25 + 2^-44: c at -14 makes E = -14 and cuts 2^-44, leaving a "
              "2.5 ulp tie (-> 2); c at -23 keeps E = -21 and 2^-44 breaks the tie (-> 3). Silicon (run2): 2"))
    add(Probe("R32", "a subnormal f32 c aligns at emin -126 (bf16 -> f32)", BF16_F32, {0: -p2(-78)}, {0: p2(-77)},
              p2(-133),
              {"sm_90": SM90, "c at its leading one": _v("bf16.f32", "c unpinned", pin_c=False)}, 0x00010000,
              "c = 2^-133 at -126 gives E = -126 and cuts the -2^-155 product (D = c); at -133 the product "
              "stays and RZ gives 2^-133 - 2^-149"))
    # an exact zero times a large factor takes no part in the alignment (MMA-Sim's Hopper model gives a
    # zero exponent -126: the zero product sets E and truncates c / the real terms)
    add(Probe("Z0", "a zero product takes no part in the alignment (f16 -> f32)", F16_F32, {0: 0.0}, {0: 65504.0},
              Bits(0x00000001),
              {"sm_90": SM90, "zero at -126": _v(hm, "zero -126", zero_factor_exp=-126),
               "zero at -14": _v(hm, "zero -14", zero_factor_exp=-14)}, 0x00000001,
              "0 x 65504 + 2^-149: a zero aligned at -126 (or -14) lifts E to -111 (or 1) and cuts c"))
    add(Probe("Z0bf", "a zero product takes no part in the alignment (bf16 -> f32)", BF16_F32, {0: 0.0},
              {0: p2(127)}, p2(-30), {"sm_90": SM90, "zero at -126": _v(bm, "zero -126", zero_factor_exp=-126)},
              0x30800000, "0 x 2^127 + 2^-30: a zero aligned at -126 lifts E to 1 and cuts c"))
    add(Probe("Z0h", "a zero product takes no part in the alignment (f16 -> f16)", F16_F16,
              {0: 0.0, 1: p2(-12), 2: p2(-13)}, {0: 65504.0, 1: p2(-13), 2: p2(-13)}, 0.0,
              {"sm_90": SM90, "zero at -14": _v("f16.f16", "zero -14", zero_factor_exp=-14)}, 0x0001,
              "0 x 65504 + 2^-25 + 2^-26 rounds to 2^-24; a zero aligned at -14 lifts E to 1 and cuts both"))
    tm = "tf32.f32"
    add(Probe("Z0tf", "a zero product takes no part in the alignment (tf32 -> f32)", TF32_K8, {0: 0.0},
              {0: p2(127)}, p2(-30), {"sm_90": SM90, "zero at -126": _v(tm, "zero -126", zero_factor_exp=-126)},
              0x30800000, "0 x 2^127 + 2^-30: a zero aligned at -126 lifts E to 1 and cuts c"))
    add(Probe("K1", "tf32: low 13 bits ignored", TF32_K8, {0: Bits(0x3F801800)}, {0: 1.0}, 0.0,
              {"sm_90": SM90, "RN conversion": _v(tm, "rn", tf32_conversion="rn")}, 0x3F800000))
    add(Probe("K2", "tf32: NaN with payload only in the low 13 bits", TF32_K8, {0: Bits(0x7F800001)}, {0: 1.0},
              0.0, {"sm_90": SM90, "NaN kept": _v(tm, "keep", tf32_nan="keep")}, 0x7F800000))
    add(Probe("K1k4", "tf32 m16n8k4: low 13 bits ignored", TF32_K4, {0: Bits(0x3F801800)}, {0: 1.0}, 0.0,
              {"sm_90": SM90, "RN conversion": _v(tm, "rn", tf32_conversion="rn")}, 0x3F800000))
    for j in (3, 4, 5, 7):
        add(Probe(f"DT{j}", f"tf32 block size: k={j} in the block of k=0?", TF32_K8,
                  {0: 1.0, j: p2(-12)}, {0: 1.0, j: p2(-11)}, 1.0 + p2(-23),
                  {"sm_90": SM90, "n=4": _v(tm, "n=4", n=4), "n=2": _v(tm, "n=2", n=2)}, None))
    # fp8 mma.sync (emulated on sm_90)
    emu = {"sm_90": SM90, "native fp8 block": _wgmma_like("f32"),
           "c in first HMMA": _emu("c in window", "f32", c_add="window"),
           "sequential 16+16": _emu("seq16", "f32", groups=SEQ16),
           "even/odd": _emu("evenodd", "f32", groups=EVENODD)}
    add(Probe("M1", "emulated fp8: k mod 4 grouping", E5M2_K32, {0: 1.0, 1: p2(-12), 4: -1.0},
              {0: 1.0, 1: p2(-12), 4: 1.0}, 0.0, emu, 0x33800000))
    add(Probe("M2", "emulated fp8: k mod 4 grouping", E5M2_K32, {0: 1.0, 1: p2(-12), 2: -1.0},
              {0: 1.0, 1: p2(-12), 2: 1.0}, 0.0, emu, 0x00000000))
    add(Probe("M3", "emulated fp8: c added last (RN)", E5M2_K32, {0: 1.0, 4: -1.0}, {0: 1.0, 4: 1.0}, p2(-30),
              emu, 0x30800000))
    add(Probe("L3", "emulated fp8 keeps all bits of c", E5M2_K32, {}, {}, 1.0 + p2(-23), emu, 0x3F800001))
    add(Probe("M16", "fp8 m16n8k16: two HMMA.1688 over k mod 4 in {0,1} / {2,3}", E5M2_K16,
              {0: 1.0, 1: p2(-12), 2: -1.0}, {0: 1.0, 1: p2(-12), 2: 1.0}, 0.0,
              {"sm_90": SM90, "one HMMA over 16 k": _emu("k16 one group", "f32", groups=ONE16),
               "native fp8 block": _wgmma_like("f32")}, 0x00000000,
              "k 0,1 in the first HMMA: RZ(1 + 2^-24) = 1 in f32; k 2 in the second: 1 - 1 = 0; "
              "one 16-k block keeps 2^-24"))
    emu16 = {"sm_90": SM90, "native fp8 block": _wgmma_like("f16"),
             "c in first HMMA": _emu("c in window", "f16", c_add="window"),
             "sequential 16+16": _emu("seq16", "f16", groups=SEQ16)}
    add(Probe("M2h", "emulated fp8 -> f16: k mod 4 grouping", E4M3_K32_F16, {0: 1.0, 1: p2(-8), 2: -1.0},
              {0: 1.0, 1: p2(-8), 2: 1.0}, 0.0, emu16, None))
    # specials
    for name, a0, b0, c in (("S1a", Bits(0x7E01), 1.0, 0.0), ("S1b", Bits(0xFE01), 1.0, 0.0),
                            ("S1c", 0.0, 1.0, Bits(0x7FC00001)), ("S1d", Bits(0x7C00), 0.0, 0.0)):
        add(Probe(name, "NaN output pattern", F16_F32, {0: a0}, {0: b0}, c,
                  {"sm_90": SM90, "quiet 0x7fc00000": 0x7FC00000,
                   "propagate payload": 0x7FC00001 if name == "S1c" else 0xFFC02000 if name == "S1b"
                   else 0x7FC02000 if name == "S1a" else 0x7FC00000}, 0x7FFFFFFF))
    add(Probe("S1e", "+Inf + -Inf", F16_F32, {0: Bits(0x7C00), 1: Bits(0xFC00)}, {0: 1.0, 1: 1.0}, 0.0,
              {"sm_90": SM90, "quiet 0x7fc00000": 0x7FC00000, "0xffc00000 (x86 default NaN)": 0xFFC00000},
              0x7FFFFFFF))
    add(Probe("S1f", "Inf * 0", F16_F32, {0: Bits(0x7C00)}, {0: 0.0}, 1.0,
              {"sm_90": SM90, "quiet 0x7fc00000": 0x7FC00000, "0xffc00000 (x86 default NaN)": 0xFFC00000},
              0x7FFFFFFF))
    add(Probe("S1g", "Inf propagates with its sign", F16_F32, {0: Bits(0xFC00)}, {0: 2.0}, 1.0,
              {"sm_90": SM90}, 0xFF800000))
    zs = {"sm_90": SM90, "IEEE zero signs": _v(hm, "ieee zeros", zero_sign="ieee")}
    add(Probe("S2i", "sign of an exact cancellation", F16_F32, {0: 1.0, 1: -1.0}, {0: 1.0, 1: 1.0}, 0.0, zs, 0))
    add(Probe("S2ii", "c = -0, all products +0", F16_F32, {}, {}, -0.0, zs, 0))
    add(Probe("S2iii", "all products -0, c = -0", F16_F32, {k: -0.0 for k in range(16)}, {}, -0.0, zs, 0))
    add(Probe("S2f8", "emulated fp8: sign of zero with c = -0 and -0 products", E5M2_K32,
              {k: -0.0 for k in range(32)}, {}, -0.0,
              {"sm_90": SM90, "IEEE zeros, c in first HMMA":
               SM90.with_path("f8.f32", SM90.paths["f8.f32"].but(c_add="window",
                                                                  hmma=SM90.paths["f8.f32"].hmma.but(zero_sign="ieee")),
                              new_name="ieee zeros, c in window")}, 0x00000000))
    # integers
    add(Probe("I1", "s32 wrap", S8_K32, {0: 1}, {0: 1}, 2**31 - 1, {"sm_90": SM90}, 0x80000000))
    add(Probe("I2", ".satfinite clamps the final sum", dict(S8_K32, satfinite=True), {0: 127, 1: -127},
              {0: 127, 1: 127}, 2**31 - 1,
              {"sm_90": SM90, "per-step saturation": SM90.replace_path("int", new_name="per step",
                                                                      saturation="per_step")}, 0x7FFFFFFF))
    add(Probe("I3", "s4 sign extension", S4_K64, {0: -1}, {0: 1}, 0, {"sm_90": SM90, "zero-extended": 15},
              0xFFFFFFFF))
    add(Probe("I4", "b1 xor popc", dict(B1_K256, bitop="xor"), {k: 1 for k in range(0, 256, 3)}, {}, 5,
              {"sm_90": SM90}, 5 + len(range(0, 256, 3))))
    # f64
    f64h = {"sm_90": SM90,
            "descending": SM90.replace_path("f64", new_name="descending", order="descending"),
            "c last": SM90.replace_path("f64", new_name="c last", c_first=False)}
    from .archs import EXACT
    f64h["exact sum"] = EXACT
    add(Probe("D64", "f64 FMA chain order", F64_K4, {0: p2(60), 1: 1.0, 2: -p2(60), 3: 1.0},
              {0: 1.0, 1: 1.0, 2: 1.0, 3: 1.0}, 0.0, f64h, 0x3FF0000000000000))
    add(Probe("D64c", "f64: where c enters", F64_K4, {0: -p2(60), 1: 1.0}, {0: 1.0, 1: 1.0}, p2(60), f64h,
              0x3FF0000000000000))
    add(Probe("D64k16", "f64 m16n8k16 order", F64_K16, {0: p2(60), 14: -p2(60), 15: 1.0},
              {0: 1.0, 14: 1.0, 15: 1.0}, 0.0, f64h, 0x3FF0000000000000))
    for form, tag in ((F64_K8, "D64k8"), (F64_K4b, "D64k4")):
        K = form["shape"].split("k")[1]
        K = int(K)
        add(Probe(tag, f"f64 {form['shape']} order", form, {0: p2(60), K - 2: -p2(60), K - 1: 1.0},
                  {0: 1.0, K - 2: 1.0, K - 1: 1.0}, 0.0, f64h, 0x3FF0000000000000))
    for rnd, bits in (("rn", 0x3FF0000000000000), ("rz", 0x3FF0000000000000), ("rm", 0x3FF0000000000000),
                      ("rp", 0x3FF0000000000001)):
        add(Probe(f"D64{rnd}", f"f64 .{rnd}", dict(F64_K4, rounding=rnd), {0: p2(-60)}, {0: 1.0}, 1.0,
                  {"sm_90": SM90}, bits))
    # f64 NaN rule (settled by run1's 33,389 NaN outputs; clean single-case confirmations)
    nanh = {"sm_90": SM90, "canonical NaN": SM90.replace_path("f64", new_name="canonical", nan_rule="canonical"),
            "a before b": SM90.replace_path("f64", new_name="a,b,c", nan_priority=("a", "b", "c")),
            "c first": SM90.replace_path("f64", new_name="c,b,a", nan_priority=("c", "b", "a")),
            "positive default NaN": SM90.replace_path("f64", new_name="+default", default_nan=0x7FF8000000000000)}
    add(Probe("N64a", "f64 NaN: b's payload beats a's", F64_K4, {0: Bits(0x7FF0000000000123)},
              {0: Bits(0xFFF8000000000456)}, 0.0, nanh, 0xFFF8000000000456))
    add(Probe("N64b", "f64 NaN: the accumulator's (c) beats a's; signalling NaN quieted", F64_K4,
              {0: Bits(0xFFF0000000000001)}, {0: 1.0}, Bits(0x7FF4000000000789), nanh, 0x7FFC000000000789))
    add(Probe("N64c", "f64 Inf*0: default NaN", F64_K4, {0: Bits(0x7FF0000000000000)}, {0: 0.0}, 1.0, nanh,
              0xFFF8000000000000))
    add(Probe("N64d", "f64 +Inf + -Inf: default NaN", F64_K4, {0: Bits(0x7FF0000000000000)}, {0: 1.0},
              Bits(0xFFF0000000000000), nanh, 0xFFF8000000000000))
    add(Probe("N64e", "f64: a NaN made at k=0 travels as the accumulator and beats a later a_k NaN", F64_K4,
              {0: Bits(0x7FF0000000000000), 1: Bits(0x7FF8000000000abc)}, {0: 0.0, 1: 1.0}, 0.0, nanh,
              0xFFF8000000000000))
    # zero signs where run1 had no exact zero
    add(Probe("S2bf", "bf16: all products -0, c = -0", BF16_F32, {k: -1.0 for k in range(16)}, {}, -0.0,
              {"sm_90": SM90, "IEEE zero signs": _v("bf16.f32", "ieee zeros", zero_sign="ieee")}, 0))
    add(Probe("S2tf", "tf32: all products -0, c = -0", TF32_K8, {k: -1.0 for k in range(8)}, {}, -0.0,
              {"sm_90": SM90, "IEEE zero signs": _v("tf32.f32", "ieee zeros", zero_sign="ieee")}, 0))
    add(Probe("S2h", "f16 accumulator: all products -0, c = -0", F16_F16, {k: -1.0 for k in range(16)}, {}, -0.0,
              {"sm_90": SM90, "IEEE zero signs": _v("f16.f16", "ieee zeros", zero_sign="ieee")}, 0))
    # a NONZERO window sum that rounds to zero (run2 vectors: +0 on the f16 accumulator)
    add(Probe("S2u16", "f16 accumulator: -2^-26 (nonzero) rounds to zero, c = -0", F16_F16, {0: -p2(-12)},
              {0: p2(-14)}, -0.0,
              {"sm_90": SM90, "the sum's sign (IEEE)": _v("f16.f16", "signed", rounded_zero_sign="sum")}, 0x0000))
    add(Probe("S2u", "bf16 -> f32: -2^-150 (nonzero) truncates to zero, c = -0", BF16_F32, {0: -p2(-75)},
              {0: p2(-75)}, -0.0,
              {"sm_90": SM90, "the sum's sign (IEEE)": _v("bf16.f32", "signed", rounded_zero_sign="sum")}, 0x00000000,
              "E = -133 keeps -2^-150 in the window (grid 2^-158); RZ into f32 gives a zero"))
    add(Probe("S2utf", "tf32 -> f32: -2^-150 (nonzero) truncates to zero, c = -0", TF32_K8, {0: -p2(-75)},
              {0: p2(-75)}, -0.0,
              {"sm_90": SM90, "the sum's sign (IEEE)": _v("tf32.f32", "signed", rounded_zero_sign="sum")}, 0x00000000))
    add(Probe("S2f64", "f64: -0 products onto c = -0 stay -0 (IEEE FMA)", F64_K4, {k: -1.0 for k in range(4)}, {},
              -0.0, {"sm_90": SM90, "+0": 0}, 0x8000000000000000))
    # m8n8k4 .f16 on the FMA pipe: the chain's first step (sign of zero only)
    m8 = SM90.paths["f16.f32@m8n8k4"]
    m8h = SM90.paths["f16.f16@m8n8k4"]
    add(Probe("Z4", "m8n8k4 f32 D: first step FFMA(a, b, +0) (not FMUL): -0 products, c = -0", F16_M8,
              {k: -1.0 for k in range(4)}, {}, -0.0,
              {"sm_90": SM90, "FMUL first": SM90.with_path("f16.f32@m8n8k4", m8.but(start="mul"), new_name="mul")},
              0x00000000))
    add(Probe("Z4h", "m8n8k4 f16 D: first step FMUL: -0 products, c = -0", F16_M8H,
              {k: -1.0 for k in range(4)}, {}, -0.0,
              {"sm_90": SM90, "FFMA(., ., +0) first":
               SM90.with_path("f16.f16@m8n8k4", m8h.but(start="fma_zero"), new_name="fma0")}, 0x8000))
    add(Probe("O4", "m8n8k4 f32 D: FFMA chain k = 0..3 (ascending), then + c", F16_M8,
              {0: p2(-13), 1: 1.0, 2: -1.0}, {0: p2(-12), 1: 1.0, 2: 1.0}, 0.0,
              {"sm_90": SM90, "tensor-core block": SM90.with_path("f16.f32@m8n8k4", SM90.paths["f16.f32"],
                                                                  new_name="hmma"),
               "descending chain": SM90.with_path("f16.f32@m8n8k4", m8.but(groups=((3, 2, 1, 0),)),
                                                  new_name="desc")}, 0x00000000,
              "2^-25, then RN(2^-25 + 1) = 1, then 1 - 1 = +0; descending or one block keep 2^-25"))
    return P


PROBES: list[Probe] = _probes()


def by_id(pid: str) -> Probe:
    for p in PROBES:
        if p.id == pid:
            return p
    raise KeyError(pid)


def table() -> str:
    """Markdown table: probe, form, predictions per hypothesis."""
    rows = ["| id | feature | form | predictions |", "|---|---|---|---|"]
    for p in PROBES:
        f = p.form
        form = f"{f['shape']} {f['atype']}->{f['dtype']}"
        preds = "; ".join(f"{k}: {v:#x}" for k, v in p.predictions().items())
        rows.append(f"| {p.id} | {p.feature} | {form} | {preds} |")
    return "\n".join(rows)


def export() -> list[dict]:
    """Every probe as plain data (JSON-ready), predictions included."""
    return [p.to_dict() for p in PROBES]


if __name__ == "__main__":  # pragma: no cover
    import json
    import sys

    if "--json" in sys.argv:
        print(json.dumps(export(), indent=1))
    else:
        print(table())
