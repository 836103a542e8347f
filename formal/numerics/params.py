"""Parameter records of the arithmetic models (pure data, shared by the vectorised and
the scalar reference implementations).

Every hardware behaviour that silicon has to pin down is a *named field* here, so a
hypothesis is a parameter change (``dataclasses.replace``), not a code change.  Each
record carries an ``evidence`` string: confidence (HIGH / MED / LOW, as in
numerics.md) and where the number comes from.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Mapping

# Citation keys used in evidence strings (numerics.md §0).
SOURCES: Mapping[str, str] = {
    "PTX": "NVIDIA PTX ISA 8.x/9.x, 9.7.14.5.14 (mma: precision and rounding), 9.7.14.3 (block scaling), 5.2.3 (formats)",
    "KM25": "Khattak & Mikaitis, Accurate Models of NVIDIA Tensor Cores, arXiv 2512.07004 (ACM TACO); "
            "code+data github.com/north-numerical-computing/MATLAB-tensor-core",
    "KM25b": "Khattak & Mikaitis, Generalized Methodology for Determining Numerical Features of Hardware "
             "Floating-Point Matrix Multipliers, IEEE HPEC 2025, arXiv 2510.15884",
    "FHMP21": "Fasi, Higham, Mikaitis, Pranesh, Numerical behavior of NVIDIA tensor cores, PeerJ CS 7:e330 (2021)",
    "FTTN": "Li et al., FTTN: Feature-Targeted Testing for Numerical Properties of NVIDIA & AMD Matrix "
            "Accelerators, CCGrid 2024, arXiv 2403.00232",
    "VLPG25": "Valpey et al., An SMT Formalization of Mixed-Precision Matrix Multiplication, arXiv 2502.15999",
    "dfyz": "I. Komarov, github.com/dfyz/tc-playground (C++ Hopper bf16 tensor-core model vs wgmma)",
    "huweim": "github.com/huweim/emulation_sys bit_width_test_ (window widths per GPU)",
    "SA2": "SageAttention2, arXiv 2411.10958 (fp8 mma accumulates in 1+8+13 bits on Ada/Hopper)",
    "DSV3": "DeepSeek-V3 technical report, arXiv 2412.19437 §3.3.2 (14-bit fp8 accumulation on Hopper)",
    "CUT1986": "NVIDIA/cutlass#1986: mma.sync m16n8k32 e4m3 is emulated through the f16 tensor core on sm_90",
    "DG176": "deepseek-ai/DeepGEMM#176: B200 kind::f8f6f4 keeps a 25-bit mantissa",
    "OCP-MX": "OCP Microscaling Formats (MX) v1.0 (2023)",
    "HW1": "H100 80GB HBM3 capture run1 (2026-11-22; driver 13.0, ptxas 13.0, sm_90a): every register-level "
           "sm_90 mma/mma.sp form x 6 input regimes; tools/compare_capture.py, slice in tests/data/numerics_hw_slice.npz",
    "HW2": "H100 80GB HBM3 run2 (2026-11-22; driver 580.159.04 / CUDA 13.0, ptxas 13.0, sm_90a): 85 numerics "
           "probes (formal.hw.numerics_probe), hw-check 262 cases x 12,000 warps (f64 errored), 14,742 edge-case "
           "vectors (formal.vectors) over 198 forms; slice in tests/data/numerics_run2_slice.json",
    "HW3": "H100 80GB HBM3 run3 (2026-11-22; driver 580.159.04 / CUDA 13.0, PTX 7.8 JIT for sm_90): 276 wmma "
           "load -> mma -> store pipelines x 8 runs (formal.hw.wmma_probe; formal.wmma.check_pipeline_data), "
           "slice in specs/observed/wmma_pipeline_slice_sm90.json",
    "SASS": "cuobjdump -sass of the harness kernels assembled by ptxas 13.0 for sm_90a (formal.hw.kernels)",
    "NOTES": "shared/reference/numerics.md (project research notes; re-implementation of [KM25] "
             "reproduced all 240,000 published hardware vectors)",
}


@dataclass(frozen=True)
class BlockFMA:
    """The block-FMA of numerics.md §2 (one tensor-core "block"), chained over K.

    Algorithm (see :mod:`formal.numerics.block` for the code, step by step):

    1. specials first: NaN if any NaN input / Inf*0 / +Inf and -Inf both present;
       else any Inf -> that Inf.  NaN bits = ``nan_bits``.
    2. decode inputs without normalising (``pin_subnormals``).
    3. exact products with alignment exponent ``e_a + e_b`` (``normalise_products``);
       zero products take no part (``zero_factor_exp``).
    4. c is an ordinary addend (``c_entry``), aligned by its field exponent in the format it
       is read as (``c_as_f32``; subnormals at that format's emin unless ``pin_c`` is off).
    5. E = max(all alignment exponents, ``minexp``).
    6. every addend truncated to the grid 2**(E - F) (``truncation``).
    7. exact integer sum S.
    8. one rounding of S * 2**(E - F) into the output (``rounding``, ``out_frac``,
       ``overflow``, ``subnormal_output``); the sign of a zero result: ``zero_sign`` when
       S = 0, ``rounded_zero_sign`` when S != 0 rounds to zero.
    9. K > n: consecutive blocks k = 0..n-1, n..2n-1, ...; the first takes c, each later
       one takes the previous block's rounded output as its c.
    """

    n: int | None                  # terms per block (None: the whole instruction's K in one block)
    F: int                         # fraction bits the alignment window keeps below 2**E
    minexp: int | None             # floor on the common exponent E (None: no floor)
    rounding: str                  # final normalisation: "rz" | "rn" (ties to even) | "rm" | "rp"
    out_frac: int | None = None    # fraction bits of the output (None: the dtype's own)
    overflow: str = "inf"          # "inf": +-Inf even when rounding is RZ; "ieee"; "satfinite"
    nan_bits: int | None = None    # output NaN encoding (None: the format's canonical all-ones)
    zero_sign: str = "positive"    # sign of a zero result from an exact-zero sum S: "positive" (+0) | "ieee"
                                   #   (IEEE 754-2019 §6.3: -0 iff every addend is -0, or rm and any -0
                                   #   addend or a cancellation; tests/test_numerics_zero_sign.py)
    rounded_zero_sign: str = "sum"  # sign of a zero result from a NONZERO sum (it rounds to zero):
                                   #   "sum" (the sum's sign, as IEEE 754) | "positive" (+0)
    pin_subnormals: bool = True    # subnormal inputs align at emin (True) or at their leading one
    c_as_f32: bool = True          # c (or a chained partial) is read as an f32 (an f16 c: its f32 exponent,
                                   #   so a subnormal f16 c aligns at its leading one) | in its own format
    pin_c: bool = True             # a subnormal c (in the format it is read as) aligns at that format's
                                   #   emin (True) or at its leading one (False)
    truncation: str = "magnitude"  # per-term alignment: "magnitude" (toward 0) | "floor" | "none" (exact)
    normalise_products: bool = False  # alignment exponent of a product = its leading one
    zero_factor_exp: int | None = None  # None: a zero product takes no part in the alignment (step 5);
                                   #   an int Z: an exact-zero A/B element takes part with exponent Z, so
                                   #   0 * 2**127 sets E = Z + 127 and truncates the real terms (MMA-Sim's
                                   #   Hopper model, Z = -126; a wrong variant, see distinguish.mechanisms;
                                   #   refuted on silicon: probes Z0, Z0bf, Z0h, Z0tf, H200 2026-11-28)
    c_entry: str = "window"        # "window": c is an addend of the first block; "after": c added
                                   #   exactly to the block's (truncated) sum, then one rounding
    subnormal_output: str = "gradual"  # "gradual" | "ftz"
    tf32_conversion: str = "truncate"  # f32 container -> tf32: "truncate" (drop 13 bits) | "rn"
    tf32_nan: str = "blind"        # NaN with payload only in the dropped bits: "blind" -> Inf | "keep"
    scale_mode: str = "window"     # block scaling: "window" (every scaled product is a window term)
                                   #   | "block_exact" (each scale block summed exactly first)
    evidence: str = ""

    def but(self, **kw) -> "BlockFMA":
        return replace(self, **kw)


@dataclass(frozen=True)
class Emulated:
    """A form that ptxas lowers to other tensor-core instructions (numerics.md §3.4).

    sm_90 ``mma.sync ... e4m3/e5m2``: (1) convert every element exactly to ``via``
    (f16); (2) run one ``hmma`` block per group of k indices, the first with C = 0
    and each later one with C = the previous group's result; (3) add the
    instruction's c last with an IEEE add rounded ``c_add`` (FADD/HADD), so c is
    never truncated.  ``c_add = "window"`` instead feeds c to the first HMMA.
    """

    via: str                       # element format of the emulating tensor-core op ("f16")
    hmma: BlockFMA                 # block parameters of that op (with the dtype's accumulator)
    groups: tuple                  # ((K, ((k, ...), (k, ...), ...)), ...): k groups per HMMA, by K
    c_add: str = "rn"              # rounding of the final c add, or "window"
    add_nan_bits: int | None = None  # NaN bits of the final add (None: the format's canonical)
    add_zero_sign: str = "ieee"    # the final add is IEEE: x + (-x) = +0, -0 + -0 = -0
    evidence: str = ""

    def groups_for(self, K: int):
        for k, g in self.groups:
            if k == K:
                return g
        return (tuple(range(K)),)

    def but(self, **kw) -> "Emulated":
        return replace(self, **kw)


@dataclass(frozen=True)
class FmaChain:
    """f64 (DMMA): a chain of correctly rounded f64 fused multiply-adds.

    order ``"ascending"``: acc = c; for k = 0..K-1: acc = fma(a_k, b_k, acc).
    ``"descending"``: k = K-1..0.  ``c_first = False``: acc starts at -0 (the IEEE
    neutral element) and c is added last with one more rounded add.

    NaN results (``nan_rule``):

    ``"propagate"``
        each step returns an input NaN, quieted (bit 51 set, sign and payload kept),
        choosing by ``nan_priority`` among the step's operands ``"a"``, ``"b"`` and
        ``"c"`` (the running accumulator, i.e. c or the previous step's result); a
        step without a NaN operand that is invalid (Inf*0, Inf-Inf) returns
        ``default_nan``.  So a NaN made by an earlier step travels on as the
        accumulator.
    ``"canonical"``
        every NaN result is ``nan_bits``.
    """

    order: str = "ascending"
    c_first: bool = True
    nan_bits: int | None = 0x7FFFFFFFFFFFFFFF
    nan_rule: str = "canonical"
    nan_priority: tuple = ("b", "c", "a")
    default_nan: int = 0xFFF8000000000000
    evidence: str = ""

    def but(self, **kw) -> "FmaChain":
        return replace(self, **kw)


@dataclass(frozen=True)
class FmaPipe:
    """An MMA that ptxas lowers to scalar FP32 code on the FMA pipe (no tensor core).

    sm_90 ``mma.sync.m8n8k4`` .f16 (SASS: ``HADD2.F32`` conversions, ``FMUL`` /
    ``FFMA`` / ``FADD``, ``F2FP.F16.F32.PACK_AB``; no HMMA):

    1. every a, b (and an f16 c) is converted exactly to ``work`` (f32);
    2. per group g of k indices, in order: the first product is ``FMUL(a, b)``
       (``start = "mul"``) or ``FFMA(a, b, +0)`` (``start = "fma_zero"``: a -0 product
       becomes +0), then ``p_g = FFMA(a_k, b_k, p_g)`` for the group's later k;
    3. ``acc = c``; ``acc = FADD(acc, p_g)`` for each group in order;
    4. D = acc, or ``F2FP`` (f32 -> f16 round to nearest even) for an f16 D.

    Every operation is IEEE binary32, round to nearest even, subnormals kept (no
    ``.FTZ``), overflow to Inf; a NaN result of an FFMA/FADD is ``nan_bits`` and of the
    f16 conversion ``out_nan_bits``.
    """

    groups: tuple = ((0, 1, 2, 3),)
    start: str = "fma_zero"
    work: str = "f32"
    nan_bits: int | None = 0x7FFFFFFF
    out_nan_bits: int | None = 0x7FFF
    evidence: str = ""

    def but(self, **kw) -> "FmaPipe":
        return replace(self, **kw)


@dataclass(frozen=True)
class Narrowed:
    """An MMA computed into a wider accumulator, then converted once into D.

    sm_90 ``wmma.mma`` with an .f16 D and an .f32 C (SASS: ``HMMA.16816.F32`` then
    ``F2FP.F16.F32.PACK_AB``): the tensor core has no f16-output block that reads an f32
    C, so ptxas runs the f32-accumulator block and converts its result:

    1. ``d = inner`` evaluated with D of type ``via`` (the instruction's c, a, b as given);
    2. D = ``d`` converted into the instruction's dtype, rounded ``rounding`` (F2FP: to
       nearest even), IEEE: overflow to Inf, gradual underflow, the sign of a zero kept,
       a NaN is ``nan_bits``.

    So the result is rounded twice (the block's rounding into ``via``, then this one).
    """

    inner: "BlockFMA"              # the record that computes the wide result (an HMMA block)
    via: str = "f32"               # its output type
    rounding: str = "rn"           # the conversion's rounding
    nan_bits: int | None = 0x7FFF  # NaN written by the conversion (None: the format's canonical)
    evidence: str = ""

    def but(self, **kw) -> "Narrowed":
        return replace(self, **kw)


@dataclass(frozen=True)
class IntegerDot:
    """s8/u8/s4/u4 -> s32: exact products and sum; wrap mod 2**32, or ``.satfinite``.

    saturation ``"final"``: clamp the exact final sum; ``"per_step"``: clamp after
    every addition (c first, k ascending).
    """

    saturation: str = "final"
    evidence: str = ""

    def but(self, **kw) -> "IntegerDot":
        return replace(self, **kw)


@dataclass(frozen=True)
class Popc:
    """b1: d = c + popc(row OP col), 32-bit wrap (OP = .and / .xor)."""

    evidence: str = ""


@dataclass(frozen=True)
class ExactRound:
    """Reference semantics: exact sum of all exact products plus c, rounded once.

    rounding: the default rounding (rn = nearest even); f64 forms use the
    instruction's .rnd when one is given.  Integers: exact, wrap or saturate.
    """

    rounding: str = "rn"
    nan_bits: int | None = None
    zero_sign: str = "ieee"
    tf32_conversion: str = "truncate"
    evidence: str = "definition (not a hardware model)"


PathParams = BlockFMA | Emulated | FmaChain | FmaPipe | Narrowed | IntegerDot | Popc | ExactRound


def shape_tag(shape) -> str:
    """(8, 8, 4) -> "m8n8k4" (the suffix of a shape-specific path key)."""
    m, n, k = (int(x) for x in shape)
    return f"m{m}n{n}k{k}"


def ctype_tag(ctype) -> str:
    """"f32" -> "c=f32" (the suffix of a C-type-specific path key)."""
    return f"c={str(ctype).lstrip('.')}"


def mod4_groups(K: int) -> tuple:
    """k split of the fp8->f16 emulation: {k : k mod 4 in {0,1}} then {k mod 4 in {2,3}}."""
    return (tuple(k for k in range(K) if k % 4 < 2), tuple(k for k in range(K) if k % 4 >= 2))


@dataclass(frozen=True)
class ArchModel:
    """One architecture's arithmetic: which parameter record serves which type path.

    Path keys: ``"f16.f32"``, ``"f16.f16"`` (inputs . accumulator), ``"bf16.f32"``,
    ``"tf32.f32"``, ``"f8.f32"``, ``"f8.f16"`` (any of e4m3/e5m2/e3m2/e2m3/e2m1 without
    block scaling), ``"scaled.f32"`` (``.block_scale`` kinds), ``"f64"``, ``"int"``, ``"b1"``.

    A key may carry a shape, ``"f16.f32@m8n8k4"``: that record serves only instructions
    of that shape (``path(..., shape=(8, 8, 4))``), e.g. a shape ptxas lowers to other
    hardware; ``"f8.f32@m64"`` serves every shape with M = 64 (the warpgroup's wgmma).  A key may instead carry the C type, ``"f16.f16@c=f32"``: that record
    serves the path when c has that type (an f16 D from an f32 C).  Lookup order: the
    shape key, then the C-type key, then the plain key.
    """

    name: str
    evidence: str
    sources: tuple
    paths: Mapping[str, PathParams]
    input_types: frozenset
    notes: Mapping[str, str] = field(default_factory=dict)
    #: the named model a variant was made from ("" for a named model); see ``target``
    base: str = ""

    # The mappings make the generated hash fail (dict / mappingproxy); name and path keys
    # are enough for a hash consistent with ==, so a model can key a dict or a cache.
    def __hash__(self) -> int:
        return hash((self.name, self.base, tuple(sorted(self.paths))))

    @property
    def target(self) -> str:
        """The architecture this model stands for (a variant keeps its base model's)."""
        return self.base or self.name

    @property
    def citations(self) -> tuple:
        """Full citations of ``sources``."""
        return tuple(f"[{k}] {SOURCES.get(k, k)}" for k in self.sources)

    def key(self, atype: str, btype: str, ctype: str, dtype: str, kind: str | None = None,
            scaled: bool = False) -> str:
        f8 = {"e4m3", "e5m2", "e3m2", "e2m3", "e2m1"}
        ints = {"s8", "u8", "s4", "u4"}
        if atype in ints and btype in ints:
            return "int"
        if atype == btype == "b1":
            return "b1"
        if atype == btype == "f64":
            return "f64"
        if atype in f8 and btype in f8:
            if scaled or (kind or "").lstrip(".").replace("kind::", "").startswith("mx"):
                return "scaled.f32"
            return "f8." + dtype
        if atype == btype and atype in ("f16", "bf16", "tf32"):
            return f"{atype}.{dtype}"
        raise UnsupportedPath(f"no arithmetic path for a={atype} b={btype}")

    def path(self, atype, btype, ctype, dtype, kind=None, scaled=False, shape=None):
        """(key, record) serving these types; ``shape`` = (M, N, K) selects a
        shape-specific record (key ``"<key>@mMnNkK"``) when the model has one, else a
        C-type-specific one (key ``"<key>@c=<ctype>"``) is used when the model has one."""
        for t in (atype, btype):
            if t not in self.input_types:
                raise UnsupportedPath(f"{self.name}: element type {t} is not supported by this model")
        k = self.key(atype, btype, ctype, dtype, kind, scaled)
        if shape is not None:
            for ks in (f"{k}@{shape_tag(shape)}", f"{k}@m{int(shape[0])}"):
                if ks in self.paths:
                    return ks, self.paths[ks]
        kc = f"{k}@{ctype_tag(ctype)}"
        if kc in self.paths:
            return kc, self.paths[kc]
        if k not in self.paths:
            raise UnsupportedPath(f"{self.name}: no path {k!r} (a={atype} b={btype} c={ctype} d={dtype})")
        return k, self.paths[k]

    def replace_path(self, key: str, new_name: str | None = None, **overrides) -> "ArchModel":
        """A variant model (a hypothesis): one path's parameters overridden."""
        if key not in self.paths:
            raise UnsupportedPath(f"{self.name}: no path {key!r}; paths: {', '.join(sorted(self.paths))}")
        rec = self.paths[key]
        names = {f.name for f in fields(rec)}
        for k in overrides:
            if k not in names:
                raise UnsupportedPath(f"{self.name}: path {key!r} ({type(rec).__name__}) has no parameter {k!r}; "
                                      f"parameters: {', '.join(sorted(names))}")
        paths = dict(self.paths)
        paths[key] = replace(rec, **overrides)
        tag = ",".join(f"{k}={v}" for k, v in overrides.items())
        return replace(self, name=new_name or f"{self.name}[{key}:{tag}]", paths=paths, base=self.target)

    def with_path(self, key: str, params: PathParams, new_name: str | None = None) -> "ArchModel":
        paths = dict(self.paths)
        paths[key] = params
        return replace(self, name=new_name or f"{self.name}[{key}]", paths=paths, base=self.target)


class UnsupportedPath(ValueError):
    """The requested type combination has no model on this architecture."""
