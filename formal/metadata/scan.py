"""Brute force: evaluate a lane's validity predicate on every 32-bit word and count.

The independent cross-check of the solver's count (``proofs.count_words``) and of the
combinatorics: no factoring over nibbles is assumed, each of the 2^32 words is
evaluated.  Two predicates, both compiled from ``specs/metadata.toml`` to numpy:

``chunk``  the per-chunk rules (``idx0 != idx1`` ...), tabulated over the 16 nibble values,
           applied to the nibble at the bits the layout assigns to each (row, chunk) of the lane;
``word``   the closed-form SWAR predicate (``word_sp`` / ``word_ordered``).

Blocks of words are evaluated in a thread pool (numpy releases the GIL in its loops).
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass

import numpy as np

from ..catalog import Form
from .spec import FormMeta, meta, nib_env

FULL = 1 << 32


@dataclass
class ScanResult:
    opcode: str
    sel: int
    lane: int
    predicate: str
    words: int
    count: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.words / self.seconds if self.seconds else float("inf")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["words_per_second"] = self.rate
        return d


def predicate(fm: FormMeta, sel: int, lane: int, kind: str = "chunk"):
    """numpy predicate over a uint32 array of words (True = legal for this lane)."""
    tab = fm.e_table(sel)
    los = [int(lo) for ln, _n, _r, _c, lo in tab if ln == lane]
    if not los:                                      # the lane's e is not read
        return lambda e: np.ones(e.shape, dtype=bool)
    if kind == "word":
        f = fm.gran.word[fm.variant]
        return lambda e: np.asarray(f.eval({"e": e}), dtype=bool)
    if kind != "chunk":
        raise ValueError(f"predicate kind must be 'chunk' or 'word', not {kind!r}")

    # the rules tabulated over their 16-value domain, then applied to every nibble read
    lut = np.array([all(bool(r.require.eval(nib_env(v))) for r in fm.rules) for v in range(16)])

    def chunk_rules(e: np.ndarray) -> np.ndarray:
        ok = lut[e & np.uint32(15)] if los[0] == 0 else lut[(e >> np.uint32(los[0])) & np.uint32(15)]
        for lo in los[1:]:
            ok &= lut[(e >> np.uint32(lo)) & np.uint32(15)]
        return ok

    return chunk_rules


def scan(form: Form | str | FormMeta, sel: int | None = None, lane: int | None = None, kind: str = "chunk",
         start: int = 0, stop: int = FULL, block: int = 1 << 20, threads: int | None = None) -> ScanResult:
    """Count the legal words in [start, stop) for ``lane`` (default: the first contributing lane)."""
    fm = form if isinstance(form, FormMeta) else meta(form)
    sel = fm.selectors[0] if sel is None else sel
    if lane is None:
        lane = int(fm.e_table(sel)[0, 0])
    if not (0 <= start <= stop <= FULL) or start % block or (stop - start) % block:
        raise ValueError(f"range [{start}, {stop}) must be inside [0, 2^32) and a multiple of the block {block}")
    pred = predicate(fm, sel, lane, kind)
    base = np.arange(block, dtype=np.uint32)

    def job(lo: int) -> int:
        return int(np.count_nonzero(pred(base + np.uint32(lo))))

    threads = threads or min(8, os.cpu_count() or 1)
    t0 = time.perf_counter()
    with ThreadPoolExecutor(threads) as ex:
        count = sum(ex.map(job, range(start, stop, block)))
    return ScanResult(fm.form.opcode, sel, lane, kind, stop - start, count, time.perf_counter() - t0)
