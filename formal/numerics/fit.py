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


__all__ = ["decide", "mismatches", "score", "Verdict", "PROBES"]
