"""``hw-check``: run forms on a GPU and compare with the evaluator bit for bit.

For every case (a form, and for mma.sp each legal selector) and every input regime,
``trials`` warps of random inputs (``formal.vectors.regimes``) run through the GPU kernel
(``formal.hw.kernels``) and through ``formal.evaluate``; every destination register of
every lane must agree bit for bit.  The result is a per-case table and an evidence
record (GPU, driver, CUDA version, forms, trials, mismatches) that can be checked in.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import platform
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable

import numpy as np

from ..catalog import Form, forms, parse
from ..catalog.text import Immediates
from ..vectors.regimes import REGIMES, random_inputs
from .kernels import Case

DEFAULT_REGIMES = ("bits", "normal", "finite", "align", "extreme", "special", "tiny")


@dataclass
class Mismatch:
    regime: str
    seed: int
    warp: int
    lane: int
    reg: int
    got: str
    expected: str
    inputs: dict[str, list] = field(default_factory=dict)   # that warp's registers, hex strings [32][n]


@dataclass
class CaseResult:
    opcode: str
    sel: int | None
    trials: int = 0
    mismatched_warps: int = 0
    errored_warps: int = 0
    per_regime: dict[str, list[int]] = field(default_factory=dict)   # regime -> [trials, mismatches]
    first: list[Mismatch] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None and self.mismatched_warps == 0 and self.trials > 0


def cases_for(fs: Iterable[Form], sels: dict | None = None) -> list[Case]:
    out = []
    for f in fs:
        if f.family not in ("mma", "mma.sp") or f.block_scale:
            continue
        if f.is_sparse:
            for s in (sels or {}).get(f.opcode, f.selectors or (0,)):
                out.append(Case(f, Immediates(sel=s)))
        else:
            out.append(Case(f))
    return out


def all_cases(target: str = "sm_90", ptx: str = "9.0") -> list[Case]:
    return cases_for(forms(target, ptx))


def _seed(base: int, key: str, regime: str, chunk: int) -> int:
    h = hashlib.sha256(f"{base}|{key}|{regime}|{chunk}".encode()).digest()
    return int.from_bytes(h[:8], "little")


def _hexify(x: np.ndarray) -> list:
    w = 16 if x.dtype == np.uint64 else 8
    return [[f"{int(v):0{w}x}" for v in row] for row in x.reshape(x.shape[0], -1)]


def compare(case: Case, regime: str, seed: int, inp: dict[str, np.ndarray], got: np.ndarray, arch: str,
            keep: int = 3) -> tuple[int, list[Mismatch]]:
    """Evaluate and compare one batch; returns (mismatched warps, first few mismatches)."""
    from ..evaluate import evaluate

    exp = evaluate(case.form, inp["a"], inp["b"], inp["c"], e=inp.get("e"),
                   sel=case.imm.sel if case.form.is_sparse else None, arch=arch)
    bad = got != exp
    warps = np.nonzero(bad.any(axis=(1, 2)))[0]
    out = []
    for w in warps[:keep]:
        lanes, regs = np.nonzero(bad[w])
        L, R = int(lanes[0]), int(regs[0])
        width = 16 if got.dtype == np.uint64 else 8
        out.append(Mismatch(regime, seed, int(w), L, R, f"{int(got[w, L, R]):0{width}x}", f"{int(exp[w, L, R]):0{width}x}",
                            {k: _hexify(v[w]) for k, v in inp.items()}))
    return len(warps), out


def _compare_job(args):
    opcode, sel, regime, seed, n, got, arch = args
    case = Case(parse(opcode), Immediates(sel=sel if sel is not None else 0))
    try:
        inp = random_inputs(case.form, n, regime, seed)   # regenerated: deterministic from the seed
        bad, mm = compare(case, regime, seed, inp, got, arch)
        return opcode, sel, regime, n, bad, mm, None
    except Exception as e:  # report, never hide
        return opcode, sel, regime, n, 0, [], f"{type(e).__name__}: {e}"


def run(cases: list[Case], trials: int, seed: int = 0, regimes: Iterable[str] = DEFAULT_REGIMES,
        arch: str = "sm_90", gpu=None, workers: int | None = None, chunk: int = 2048,
        progress: Callable[[str], None] | None = None) -> list[CaseResult]:
    """Run ``cases`` on the GPU with ``trials`` warps each (split evenly over ``regimes``).

    The GPU runs in this process; comparisons run in ``workers`` processes, which
    regenerate each batch's inputs from its seed, so only outputs cross processes.
    """
    from concurrent.futures import FIRST_COMPLETED, wait

    from .runner import GPU

    regimes = list(regimes)
    for r in regimes:
        if r not in REGIMES:
            raise ValueError(f"unknown regime {r!r}; known: {', '.join(REGIMES)}")
    gpu = gpu or GPU()
    results = {c.key: CaseResult(c.form.opcode, c.imm.sel if c.form.is_sparse else None) for c in cases}
    per = max(1, trials // len(regimes))
    t0 = time.time()
    nw = workers or max(1, (os.cpu_count() or 2) - 1)
    pool = ProcessPoolExecutor(nw) if nw > 1 else None
    pending: set = set()
    ndone = 0

    def absorb(res) -> None:
        nonlocal ndone
        opcode, sel, regime, n, bad, mm, err = res
        r = results[opcode + (f" sel={sel}" if sel is not None else "")]
        if err:   # a batch the evaluator could not take is an error, never a passed trial
            r.errored_warps += n
            if not r.error:
                r.error = err
            ndone += 1
            return
        r.trials += n
        r.mismatched_warps += bad
        pr = r.per_regime.setdefault(regime, [0, 0])
        pr[0] += n
        pr[1] += bad
        for m in mm:
            if len(r.first) < 3:
                r.first.append(m)
        ndone += 1

    nbatches = len(cases) * len(regimes) * ((per + chunk - 1) // chunk)
    for regime in regimes:
        done, k = 0, 0
        while done < per:
            n = min(chunk, per - done)
            seeds = [_seed(seed, c.key, regime, k) for c in cases]
            inputs = [random_inputs(c.form, n, regime, s) for c, s in zip(cases, seeds)]
            outs = gpu.run_cases(cases, inputs)
            del inputs
            for c, s, got in zip(cases, seeds, outs):
                job = (c.form.opcode, c.imm.sel if c.form.is_sparse else None, regime, s, n, got, arch)
                if pool is None:
                    absorb(_compare_job(job))
                    continue
                pending.add(pool.submit(_compare_job, job))
                while len(pending) > 4 * nw:
                    fin, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for f in fin:
                        absorb(f.result())
            done += n
            k += 1
            if progress:
                progress(f"[{time.time() - t0:6.1f}s] regime {regime}: {done}/{per} warps per case on the GPU; "
                         f"{ndone}/{nbatches} batches compared")
    if pool is not None:
        for f in pending:
            absorb(f.result())
        pool.shutdown()
    if progress:
        progress(f"[{time.time() - t0:6.1f}s] done: {ndone} batches")
    for r in results.values():
        r.seconds = time.time() - t0
    return list(results.values())


def evidence_record(results: list[CaseResult], gpu_info: dict, seed: int, regimes, arch: str,
                    extra: dict | None = None) -> dict[str, Any]:
    from .. import __version__

    tot_trials = sum(r.trials for r in results)
    tot_bad = sum(r.mismatched_warps for r in results)
    rec = {
        "kind": "ptx-formal hw-check evidence",
        "tool": f"ptx-formal {__version__}",
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "gpu": gpu_info,
        "host": {"python": platform.python_version(), "numpy": np.__version__},
        "arch_model": arch,
        "seed": seed,
        "regimes": list(regimes),
        "cases": len(results),
        "forms": len({r.opcode for r in results}),
        "trials": tot_trials,
        "mismatched_warps": tot_bad,
        "errors": sum(1 for r in results if r.error),
        "seconds": round(max((r.seconds for r in results), default=0.0), 1),   # GPU runs + comparisons
        "results": [
            {"opcode": r.opcode, "sel": r.sel, "trials": r.trials, "mismatches": r.mismatched_warps,
             "errored_warps": r.errored_warps,
             "per_regime": r.per_regime, "error": r.error,
             "first": [asdict(m) for m in r.first[:1]]}
            for r in results
        ],
    }
    if extra:
        rec.update(extra)
    return rec


def table(results: list[CaseResult]) -> str:
    lines = [f"{'form':92s} {'sel':>3s} {'trials':>8s} {'mismatch':>8s}  first difference"]
    for r in results:
        first = ""
        if r.error:
            first = f"ERROR {r.error}"
        elif r.first:
            m = r.first[0]
            first = f"{m.regime} warp {m.warp} lane {m.lane} reg {m.reg}: got {m.got} expected {m.expected}"
        lines.append(f"{r.opcode:92s} {'' if r.sel is None else r.sel:>3} {r.trials:8d} {r.mismatched_warps:8d}  {first}")
    return "\n".join(lines)
