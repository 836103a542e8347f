"""Arithmetic models of the other architectures, and the ``exact`` reference model.

Numbers are carried over from published measurements with their citations
(numerics.md §2.1, §4, §5); no code from those projects is copied.  ``MODELS`` maps
the names accepted by ``dot_terms(arch=...)`` to :class:`ArchModel` records.
"""
from __future__ import annotations

from types import MappingProxyType

from .params import ArchModel, BlockFMA, ExactRound, IntegerDot, Narrowed, Popc
from .sm90 import (F64_CHAIN, FP8_EMULATION_F16, FP8_EMULATION_F32, HMMA_F16, HMMA_F32, HMMA_F32_TO_F16, INTEGER, POPC,
                   SM90, TF32_F32, TF32_F32_WMMA_K8)

_INTS = {"s8", "u8", "s4", "u4", "b1"}

# ---- sm_70 (V100; T4 sm_75 same per [FHMP21]) -------------------------------------------
SM70_F32 = BlockFMA(n=4, F=23, minexp=None, rounding="rz", nan_bits=0x7FFFFFFF,
                    evidence="HIGH ([KM25] V100 data; [FHMP21] 4-term FMA, no extra bits, RZ)")
SM70_F16 = BlockFMA(n=4, F=23, minexp=-19, rounding="rn", nan_bits=0x7FFF,
                    evidence="HIGH ([KM25] V100 f16 data); minexp MED")

SM70 = ArchModel(
    name="sm_70",
    evidence="V100 (T4 sm_75 same per [FHMP21]); f16 paths HIGH from [KM25] data",
    sources=("KM25", "FHMP21", "FTTN", "VLPG25"),
    paths=MappingProxyType({"f16.f32": SM70_F32, "f16.f16": SM70_F16,
                            "int": IntegerDot(evidence="HIGH (PTX; exact), sm_72+"),
                            "b1": Popc(evidence="HIGH (PTX), sm_75+")}),
    input_types=frozenset({"f16"} | _INTS),
)

# ---- sm_80 (A100, A2, A30; RTX-3060 sm_86 same per [KM25b]) -------------------------------
SM80_F32 = BlockFMA(n=8, F=24, minexp=-132, rounding="rz", nan_bits=0x7FFFFFFF,
                    evidence="HIGH ([KM25] A100/A2/A30 data, 8-term blocks, 1 extra bit; [FTTN] 1 bit, "
                             "FMA width 8); chaining order inside m16n8k16 MED")
SM80_F16 = SM80_F32.but(minexp=-20, rounding="rn", nan_bits=0x7FFF,
                        evidence="HIGH ([KM25] A100 f16 data); minexp MED")
SM80_TF32 = SM80_F32.but(n=4, evidence="HIGH F/RZ, n=4 ([KM25] A100 tf32 data); input truncation MED")
# wmma .f16 D from an .f32 C: ptxas (13.0, sm_80 and sm_89) emits HMMA.16816.F32 then F2FP(.F16.F32).PACK_AB,
# as on sm_90 (where silicon confirms the two roundings): the f32 block, then RN into f16.
SM80_F32_TO_F16 = Narrowed(inner=SM80_F32, via="f32", rounding="rn", nan_bits=0x7FFF,
                           evidence="MED: SASS (ptxas 13.0, sm_80/sm_89: HMMA.16816.F32 then F2FP.PACK_AB); the "
                                    "f32 block as SM80_F32, the conversion as on sm_90 (silicon, H100 run3); "
                                    "no silicon on this architecture")
SM80_PATHS = {"f16.f32": SM80_F32, "bf16.f32": SM80_F32, "f16.f16": SM80_F16, "f16.f16@c=f32": SM80_F32_TO_F16,
              "tf32.f32": SM80_TF32,
              "f64": F64_CHAIN.but(evidence="HIGH FMA semantics ([FHMP21] A100 binary64: RN, no extra bits); "
                                            "order and the NaN rule carried over from H100 silicon (MED-LOW)"),
              "int": INTEGER, "b1": POPC}
SM80 = ArchModel(
    name="sm_80",
    evidence="A100 family; HIGH for f16/bf16/tf32 single blocks ([KM25] data)",
    sources=("KM25", "KM25b", "FHMP21", "FTTN", "VLPG25"),
    paths=MappingProxyType(SM80_PATHS),
    input_types=frozenset({"f16", "bf16", "tf32", "f64"} | _INTS),
)

# ---- sm_89 (Ada: RTX-1000, L40S, 4090) ----------------------------------------------------
SM89_FP8_F32 = BlockFMA(n=16, F=13, minexp=-132, rounding="rz", out_frac=13, nan_bits=0x7FFFFFFF,
                        evidence="HIGH ([KM25] Ada/L40S data incl. two chained 16-term blocks; "
                                 "[SA2] 1+8+13 accumulator; [DSV3] 14 bits)")
SM89_FP8_F16 = BlockFMA(n=16, F=13, minexp=-20, rounding="rn", out_frac=None, nan_bits=0x7FFF,
                        evidence="HIGH (NOTES §2.1: decoded from [KM25] Ada f16 data; [KM25]'s own model wrong)")
SM89 = ArchModel(
    name="sm_89",
    evidence="Ada; f16/bf16/tf32 as sm_80, native fp8 QMMA HIGH ([KM25] data)",
    sources=("KM25", "SA2", "DSV3"),
    paths=MappingProxyType({**SM80_PATHS, "f8.f32": SM89_FP8_F32, "f8.f16": SM89_FP8_F16}),
    input_types=frozenset({"f16", "bf16", "tf32", "e4m3", "e5m2", "f64"} | _INTS),
)

# ---- sm_100 (B200: legacy warp-level mma.sync / wmma path) ---------------------------------
SM100 = ArchModel(
    name="sm_100",
    evidence="B200 legacy mma.sync/wmma path equals sm_90: f16/bf16/tf32 HIGH ([KM25] B200 data), "
             "fp8 emulation HIGH (NOTES §3.4 decoded from [KM25] B200 files); the wmma lowerings of sm_90 "
             "(f16 D from an f32 C: HMMA.16816.F32 + F2FP; tf32 m16n16k8: 2 x HMMA.1684) are what ptxas 13.0 "
             "emits for sm_100a too (SASS). tcgen05 not modelled.",
    sources=("KM25", "DG176", "NOTES"),
    paths=MappingProxyType(dict(SM90.paths)),
    input_types=SM90.input_types,
)

# ---- sm_120 (RTX 5090 / RTX PRO 6000): native QMMA/OMMA -----------------------------------
SM120_F8_F32 = BlockFMA(n=32, F=25, minexp=-133, rounding="rz", nan_bits=0x7FFFFFFF,
                        evidence="LOW-MED: [huweim] 25-bit RZ window for fp8/fp4 mma.sync on RTX 5090; "
                                 "n=32 and c in block from [KM25]'s B200/RTX PRO 6000 model")
SM120_F8_F16 = SM120_F8_F32.but(minexp=-21, rounding="rn", nan_bits=0x7FFF,
                                evidence="LOW: by analogy with the f16 accumulators of sm_90")
SM120_SCALED = SM120_F8_F32.but(
    n=None, scale_mode="window",
    evidence="LOW hypothesis (NOTES §5 (a)): each product times its two scales is exact and every scaled "
             "product of the instruction enters one F=25 window ([huweim] 25-bit for MXFP4/NVFP4). "
             "Alternative (b) scale_mode='block_exact' ([DG176] '34-37 bits')")
SM120 = ArchModel(
    name="sm_120",
    evidence="RTX 5090 / RTX PRO 6000; LOW-MED: f16/bf16/tf32 taken equal to sm_90 ([KM25] maps RTX PRO "
             "6000 to its B200 model); native fp8/fp6/fp4 and block scaling LOW",
    sources=("KM25", "huweim", "OCP-MX", "PTX"),
    paths=MappingProxyType({"f16.f32": HMMA_F32, "bf16.f32": HMMA_F32, "f16.f16": HMMA_F16,
                            # wmma: the same lowering as sm_90 (SASS, ptxas 13.0 sm_120a: HMMA.16816.F32 +
                            # F2FP.F16.F32.PACK_AB; 2 x HMMA.1684.F32.TF32 for m16n16k8)
                            "f16.f16@c=f32": HMMA_F32_TO_F16.but(
                                evidence="LOW-MED: SASS (ptxas 13.0 sm_120a, as sm_90) + the sm_90 record"),
                            "tf32.f32@m16n16k8": TF32_F32_WMMA_K8.but(
                                evidence="LOW-MED: SASS (ptxas 13.0 sm_120a: 2 x HMMA.1684.F32.TF32, as sm_90) + "
                                         "the sm_90 record"),
                            "tf32.f32": TF32_F32, "f8.f32": SM120_F8_F32, "f8.f16": SM120_F8_F16,
                            "scaled.f32": SM120_SCALED, "f64": F64_CHAIN, "int": INTEGER, "b1": POPC}),
    input_types=frozenset({"f16", "bf16", "tf32", "e4m3", "e5m2", "e3m2", "e2m3", "e2m1", "f64"} | _INTS),
)

# ---- exact --------------------------------------------------------------------------------
_EXACT = ExactRound()
EXACT = ArchModel(
    name="exact",
    evidence="definition: the infinitely precise sum of all exact products plus c, rounded once "
             "(nearest even, or the f64 form's .rnd); integers exact then wrap / .satfinite; b1 popc",
    sources=("PTX",),
    paths=MappingProxyType({k: _EXACT for k in ("f16.f32", "f16.f16", "bf16.f32", "tf32.f32", "f8.f32",
                                                 "f8.f16", "scaled.f32", "f64", "int", "b1")}),
    input_types=frozenset({"f16", "bf16", "tf32", "e4m3", "e5m2", "e3m2", "e2m3", "e2m1", "f64"} | _INTS),
)

MODELS: dict = {m.name: m for m in (SM90, EXACT, SM70, SM80, SM89, SM100, SM120)}

#: other target names served by one of the models above
ALIASES = {"sm_90a": "sm_90", "sm_75": "sm_70", "sm_86": "sm_80", "sm_87": "sm_80", "sm_100a": "sm_100",
           "sm_100f": "sm_100", "sm_120a": "sm_120", "sm_120f": "sm_120"}


def get_model(arch) -> ArchModel:
    if isinstance(arch, ArchModel):
        return arch
    try:
        return MODELS[ALIASES.get(str(arch), str(arch))]
    except KeyError:
        raise KeyError(f"unknown arch model {arch!r}; known: {sorted(MODELS)}") from None


__all__ = ["MODELS", "get_model", "SM90", "SM70", "SM80", "SM89", "SM100", "SM120", "EXACT",
           "HMMA_F32", "HMMA_F16", "TF32_F32", "FP8_EMULATION_F32", "FP8_EMULATION_F16", "HMMA_F32_TO_F16",
           "TF32_F32_WMMA_K8", "SM80_F32_TO_F16"]


def _fmt(name, v):
    return hex(v) if name.endswith("bits") and isinstance(v, int) else repr(v)


def describe_models(models=None) -> str:
    """Markdown: every model's paths with their parameters and evidence (docs stay in sync)."""
    from dataclasses import fields

    from .params import BlockFMA, Emulated, Narrowed
    out = []
    for m in (models or [MODELS[k] for k in MODELS]):
        out.append(f"### {m.name}\n\n{m.evidence}\n\nSources: " + ", ".join(f"[{s}]" for s in m.sources) + "\n")
        out.append("| path | record | parameters | evidence |\n|---|---|---|---|")
        for key, p in m.paths.items():
            if isinstance(p, BlockFMA):
                base = BlockFMA(n=None, F=0, minexp=None, rounding="")
                core = f"n={p.n}, F={p.F}, minexp={p.minexp}, {p.rounding}"
                extra = [f"{f.name}={_fmt(f.name, getattr(p, f.name))}" for f in fields(p)
                         if f.name not in ("n", "F", "minexp", "rounding", "evidence")
                         and getattr(p, f.name) != getattr(base, f.name)]
                desc = ", ".join([core] + extra)
            elif isinstance(p, Emulated):
                gs = "; ".join(f"K={k}: {len(g)} HMMA" for k, g in p.groups)
                desc = (f"via {p.via}, HMMA n={p.hmma.n} F={p.hmma.F} minexp={p.hmma.minexp} "
                        f"{p.hmma.rounding}; {gs}; c added {p.c_add}")
            elif isinstance(p, Narrowed):
                q = p.inner
                inner = (f"n={q.n}, F={q.F}, minexp={q.minexp}, {q.rounding}" if isinstance(q, BlockFMA)
                         else type(q).__name__)
                desc = f"{type(q).__name__}({inner}) into {p.via}, then {p.rounding} into D; nan_bits={_fmt('nan_bits', p.nan_bits)}"
            else:
                desc = ", ".join(f"{f.name}={_fmt(f.name, getattr(p, f.name))}" for f in fields(p)
                                 if f.name != "evidence")
            out.append(f"| {key} | {type(p).__name__} | {desc} | {p.evidence} |")
        out.append("")
    return "\n".join(out)
