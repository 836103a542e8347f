"""Confronting the models with hardware captures.

* :func:`decide` reads observed probe outputs and says which hypotheses survive.
* :func:`mismatches` / :func:`score` compare a model (or several variants) with captured
  matrix-level vectors, bit for bit, and show the first disagreements.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .engine import mma_matrices
from .probes import PROBES, by_id


@dataclass
class Verdict:
    probe: str
    observed: int
    survivors: list           # hypothesis names whose prediction equals the observation
    predictions: dict         # name -> bits

    @property
    def model_ok(self) -> bool:
        """The current sm_90 model (the first hypothesis) predicted the observation."""
        return "sm_90" in self.survivors

    def __str__(self) -> str:
        tag = "ok" if self.model_ok else ("REFINE: " + (", ".join(self.survivors) or "no hypothesis fits"))
        return f"{self.probe}: observed {self.observed:#x} -> {tag}"


def decide(observed: dict) -> list[Verdict]:
    """observed: probe id -> D[0][0] bits (int), or -> the full D [M, N] array.

    A full D is also checked away from [0][0] (those outputs must equal the sm_90 model's
    expectation, e.g. +0); a disagreement there is reported as a pseudo-hypothesis
    ``"<other outputs differ>"`` in the verdict's predictions.
    """
    out = []
    for pid, obs in observed.items():
        p = by_id(pid)
        preds = p.predictions()
        if np.ndim(obs) == 2:
            full = np.asarray(obs)
            exp = p.expected_d()
            v = int(full[0, 0])
            rest = full.copy()
            rest[0, 0] = exp[0, 0]
            if not np.array_equal(rest, exp):
                preds = dict(preds, **{"<other outputs differ>": -1})
        else:
            v = int(obs)
        out.append(Verdict(pid, v, [k for k, b in preds.items() if b == v], preds))
    return out


def mismatches(A, B, C, D, *, arch="sm_90", limit: int = 10, **kw):
    """Indices [(t, m, n), ...] where ``mma_matrices(A, B, C, arch=arch, **kw)`` != D."""
    got = mma_matrices(A, B, C, arch=arch, **kw)
    bad = np.argwhere(got != np.asarray(D))
    return [tuple(int(i) for i in x) for x in bad[:limit]], int(len(bad)), got


def score(A, B, C, D, models: dict, **kw) -> dict:
    """Model name -> number of mismatching outputs on captured matrices."""
    return {name: mismatches(A, B, C, D, arch=m, **kw)[1] for name, m in models.items()}


#: sm_90 path keys added from run3 (wmma pipelines)
RUN3_KEYS = ("f16.f16@c=f32", "tf32.f32@m16n16k8")


def run1_fit():
    """The sm_90 model as fitted to run1, before the run2 refinements: every HMMA block
    reads c as an f32 (a subnormal f16 c at its true exponent) and a nonzero sum that
    rounds to zero keeps its sign.  Silicon matched it on the whole run2 hw-check, so
    where the current model differs from it on those inputs the current model is wrong
    (``tools/compare_capture.py --hw-check``)."""
    from dataclasses import replace

    from .archs import SM90 as S
    from .params import BlockFMA, Emulated

    undo = dict(rounded_zero_sign="sum", c_as_f32=True)
    paths = {}
    for k, p in S.paths.items():
        if k in RUN3_KEYS:       # the wmma records came with run3: that model read these forms by the plain keys
            continue
        if isinstance(p, BlockFMA):
            p = p.but(**undo)
        elif isinstance(p, Emulated):
            p = p.but(hmma=p.hmma.but(**undo))
        paths[k] = p
    return replace(S, name="sm_90@run1", paths=paths)


def sm90_alternatives() -> dict:
    """Refuted-or-open alternatives of the sm_90 model, per path key: {key: {name: ArchModel}}.

    ``tools/compare_capture.py RUN --hypotheses`` counts, for each, the captured
    registers it gets wrong (0 = the capture cannot tell it from the model; the
    evidence strings of :mod:`formal.numerics.sm90` quote these counts for run1).
    """
    from .archs import SM90 as S
    from .params import mod4_groups

    def path(key, **kw):
        return S.replace_path(key, **kw)

    def emu(key, **kw):
        return S.with_path(key, S.paths[key].but(**kw))

    def emu_hmma(key, **kw):
        p = S.paths[key]
        return S.with_path(key, p.but(hmma=p.hmma.but(**kw)))

    one16 = ((32, mod4_groups(32)), (16, (tuple(range(16)),)))
    alts = {
        "f16.f32": {"zero_sign=ieee": path("f16.f32", zero_sign="ieee"),
                    "nan=0x7fc00000": path("f16.f32", nan_bits=0x7FC00000),
                    "overflow=ieee": path("f16.f32", overflow="ieee"), "minexp=-132": path("f16.f32", minexp=-132),
                    "minexp=-134": path("f16.f32", minexp=-134), "F=24": path("f16.f32", F=24),
                    "F=26": path("f16.f32", F=26), "n=8": path("f16.f32", n=8), "rn": path("f16.f32", rounding="rn"),
                    "unpinned subnormals": path("f16.f32", pin_subnormals=False),
                    "c after the window": path("f16.f32", c_entry="after"),
                    "floor truncation": path("f16.f32", truncation="floor")},
        "bf16.f32": {"zero_sign=ieee": path("bf16.f32", zero_sign="ieee"),
                     "nan=0x7fc00000": path("bf16.f32", nan_bits=0x7FC00000),
                     "overflow=ieee": path("bf16.f32", overflow="ieee"), "minexp=-132": path("bf16.f32", minexp=-132),
                     "minexp=-134": path("bf16.f32", minexp=-134),
                     "unpinned subnormals": path("bf16.f32", pin_subnormals=False),
                     "rounded zero keeps the sum's sign": path("bf16.f32", rounded_zero_sign="sum"),
                     "subnormal c at its leading one": path("bf16.f32", pin_c=False)},
        "f16.f16": {"zero_sign=ieee": path("f16.f16", zero_sign="ieee"), "nan=0x7e00": path("f16.f16", nan_bits=0x7E00),
                    "minexp=-20": path("f16.f16", minexp=-20), "minexp=-22": path("f16.f16", minexp=-22),
                    "overflow=satfinite": path("f16.f16", overflow="satfinite"),
                    "c read as f32 (true exponent)": path("f16.f16", c_as_f32=True),
                    "rounded zero keeps the sum's sign": path("f16.f16", rounded_zero_sign="sum")},
        "tf32.f32": {"tf32_nan=keep": path("tf32.f32", tf32_nan="keep"),
                     "tf32 RN conversion": path("tf32.f32", tf32_conversion="rn"), "n=4": path("tf32.f32", n=4),
                     "zero_sign=ieee": path("tf32.f32", zero_sign="ieee"),
                     "nan=0x7fc00000": path("tf32.f32", nan_bits=0x7FC00000),
                     "rounded zero keeps the sum's sign": path("tf32.f32", rounded_zero_sign="sum"),
                     "subnormal c at its leading one": path("tf32.f32", pin_c=False)},
        "f8.f32": {"m16n8k16 one HMMA": emu("f8.f32", groups=one16),
                   "c in the first HMMA": emu("f8.f32", c_add="window"),
                   "HMMA zero_sign=ieee": emu_hmma("f8.f32", zero_sign="ieee"),
                   "add nan=0x7fc00000": emu("f8.f32", add_nan_bits=0x7FC00000)},
        "f8.f16": {"m16n8k16 one HMMA": emu("f8.f16", groups=one16),
                   "c in the first HMMA": emu("f8.f16", c_add="window"),
                   "add nan=0x7e00": emu("f8.f16", add_nan_bits=0x7E00)},
        # wgmma (H200 run 2026-11-28, docs/wgmma.md): fp8 is native there; the mma.sync fp8 path (f16
        # HMMAs, c added last) is what a simulator that reuses its mma.sync model would compute
        "f8.f32@m64": {"n=16": path("f8.f32@m64", n=16), "F=14": path("f8.f32@m64", F=14),
                       "full f32 output (23 fraction bits)": path("f8.f32@m64", out_frac=None),
                       "the mma.sync fp8 path (f16 HMMAs, c added last)":
                           S.with_path("f8.f32@m64", S.paths["f8.f32"], "sm_90 mma.sync fp8 path")},
        "f8.f16@m64": {"n=16": path("f8.f16@m64", n=16), "F=14": path("f8.f16@m64", F=14),
                       "the mma.sync fp8 path (f16 HMMAs, c added last)":
                           S.with_path("f8.f16@m64", S.paths["f8.f16"], "sm_90 mma.sync fp8 path")},
        # wmma (run3 pipelines: formal.wmma.check_pipeline_data, tests/test_numerics_run3.py)
        "f16.f16@c=f32": {"one rounding (f16 block, f32 c)": S.with_path("f16.f16@c=f32", S.paths["f16.f16"]),
                          "F2FP RZ": emu("f16.f16@c=f32", rounding="rz")},
        "tf32.f32@m16n16k8": {"n=8 (one block)": path("tf32.f32@m16n16k8", n=8)},
        "f16.f32@m8n8k4": {"tensor-core block": S.with_path("f16.f32@m8n8k4", S.paths["f16.f32"]),
                           "FMUL first": emu("f16.f32@m8n8k4", start="mul"),
                           "2+2 split": emu("f16.f32@m8n8k4", groups=((0, 1), (2, 3))),
                           "descending chain": emu("f16.f32@m8n8k4", groups=((3, 2, 1, 0),)),
                           "nan=0x7fc00000": emu("f16.f32@m8n8k4", nan_bits=0x7FC00000)},
        "f16.f16@m8n8k4": {"tensor-core block": S.with_path("f16.f16@m8n8k4", S.paths["f16.f16"]),
                           "one f32 chain": emu("f16.f16@m8n8k4", groups=((0, 1, 2, 3),), start="fma_zero"),
                           "FFMA(.,.,+0) first": emu("f16.f16@m8n8k4", start="fma_zero"),
                           "nan=0x7e00": emu("f16.f16@m8n8k4", out_nan_bits=0x7E00)},
        "f64": {"canonical NaN": path("f64", nan_rule="canonical"), "descending": path("f64", order="descending"),
                "c last": path("f64", c_first=False), "NaN priority a,b,c": path("f64", nan_priority=("a", "b", "c")),
                "NaN priority c,b,a": path("f64", nan_priority=("c", "b", "a")),
                "default NaN 0x7ff8..": path("f64", default_nan=0x7FF8000000000000)},
        "int": {"per-step saturation": path("int", saturation="per_step")},
    }
    return alts


__all__ = ["decide", "mismatches", "score", "Verdict", "PROBES", "sm90_alternatives", "run1_fit"]
