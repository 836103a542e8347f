"""The wmma pipeline on silicon (load A, B, C -> wmma.mma -> store D) against the evaluator.

A pipeline run (:func:`formal.hw.wmma_probe.run_wmma_probes`) records, per wmma.mma form
and layout of C/D, the matrices A, B, C it put in memory and the D the device stored, as raw
element encodings (``wmma_pipeline.json`` + ``wmma_pipeline.npz``: arrays ``<kernel>.A``,
``.B``, ``.C``, ``.D``, each [runs, rows, cols]).  :func:`check_pipeline_data` evaluates
``formal.evaluate_matrices(opcode, A, B, C, arch)`` and compares with D bit for bit::

    >>> r = check_pipeline_data("specs/observed/wmma_pipeline_slice_sm90.json")   # doctest: +SKIP
    >>> r.counts                                                                  # doctest: +SKIP
    {'match': 14}

Every entry ends in one of: ``match`` (every run, every element), ``mismatch`` (the first
differing run and element, with both encodings, and how many differ), ``no_silicon_output``
(the device produced no D: the run's status/error says why) or ``evaluator_error``.

:func:`extract_slice` writes a small checked-in slice of a run (a few entries per type
combination, chosen runs), with provenance, for the tests.

Run3 (H100, 2026-11-22): all 276 entries match bit for bit.  The first check found 266: the 10
others showed two wmma lowerings the sm_90 arithmetic model (formal.numerics) then lacked -- an
.f16 D from an .f32 C is HMMA.16816.F32 then F2FP (two roundings), tf32 m16n16k8 is two chained
HMMA.1684 (blocks of 4) -- and are now model records (formal.numerics.sm90).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .. import catalog as cat


@dataclass
class EntryResult:
    kernel: str
    opcode: str
    clayout: str
    status: str                    # match | mismatch | no_silicon_output | evaluator_error
    runs: int = 0
    detail: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class PipelineReport:
    source: str
    arch: str
    meta: dict
    entries: list[EntryResult]

    @property
    def counts(self) -> dict:
        return dict(Counter(e.status for e in self.entries))

    @property
    def ok(self) -> bool:
        """Every entry that has silicon output matches (and at least one has)."""
        c = self.counts
        return c.get("match", 0) > 0 and not c.get("mismatch") and not c.get("evaluator_error")

    def by_type(self) -> dict:
        """(atype, btype, ctype, dtype) -> status counts."""
        out: dict = {}
        for e in self.entries:
            f = cat.parse(e.opcode)
            key = f"{f.atype}x{f.btype}+{f.ctype}->{f.dtype}"
            out.setdefault(key, Counter())[e.status] += 1
        return {k: dict(v) for k, v in sorted(out.items())}

    def to_dict(self) -> dict:
        return {"source": self.source, "arch": self.arch, "counts": self.counts, "ok": self.ok,
                "by_type": self.by_type(), "device": self.meta.get("device"),
                "entries": [e.to_dict() for e in self.entries]}

    def text(self) -> str:
        dev = self.meta.get("device") or {}
        lines = [f"{self.source}: {len(self.entries)} pipeline entries, device {dev.get('name', '?')}, "
                 f"evaluator arch {self.arch}: {self.counts}"]
        for k, v in self.by_type().items():
            lines.append(f"  {k:28s} {v}")
        for e in self.entries:
            if e.status == "mismatch":
                d = e.detail
                lines.append(f"  MISMATCH {e.kernel} {e.opcode} (C/D {e.clayout}): run {d['run']} ({d['mode']}), "
                             f"D[{d['row']}, {d['col']}] silicon {d['silicon']} evaluator {d['expected']}; "
                             f"{d['differing_elements']} elements differ in {d['differing_runs']} runs")
            elif e.status == "evaluator_error":
                lines.append(f"  EVALUATOR ERROR {e.kernel} {e.opcode}: {e.detail.get('error')}")
        nos = [e for e in self.entries if e.status == "no_silicon_output"]
        if nos:
            why = Counter(str(e.detail.get("error")) for e in nos)
            lines.append(f"  no silicon output for {len(nos)} entries: "
                         + "; ".join(f"{n} x {w[:120]}" for w, n in why.most_common(3)))
        return "\n".join(lines)


def _paths(path: str | os.PathLike) -> tuple[Path, Path]:
    p = Path(path)
    if p.is_dir():
        return p / "wmma_pipeline.json", p / "wmma_pipeline.npz"
    if p.suffix == ".json":
        return p, p.with_suffix(".npz")
    raise cat.BadArgument(f"{p}: give a pipeline run directory or its .json file")


def _hex(x, bits: int) -> str:
    return f"0x{int(x):0{max(1, bits // 4)}x}"


def compare(opcode: str, store: str, A, B, C, D, arch: str = "sm_90", modes=None) -> tuple[str, dict]:
    """(status, detail) of one pipeline result D against evaluate_matrices(opcode, A, B, C, arch)."""
    from .. import evaluate as ev
    from . import memory as wmem

    try:
        want = np.asarray(ev.evaluate_matrices(opcode, A, B, C, arch=arch))
    except Exception as x:  # noqa: BLE001 - reported per entry, never silently
        return "evaluator_error", {"error": f"{type(x).__name__}: {x}"}
    if D is None:
        return "no_silicon_output", {"evaluator": "ok"}
    bits = wmem.spec().element_bits[wmem.memory_view(store).etype]
    got = np.asarray(D).astype(np.uint64)
    exp = want.astype(np.uint64)
    if got.shape != exp.shape:
        return "evaluator_error", {"error": f"shape {list(exp.shape)} vs silicon {list(got.shape)}"}
    if np.array_equal(got, exp):
        return "match", {}
    diff = np.argwhere(got != exp)
    run, row, col = (int(x) for x in diff[0])
    modes = modes or []
    return "mismatch", {"run": run, "mode": modes[run] if run < len(modes) else None, "row": row, "col": col,
                        "silicon": _hex(got[run, row, col], bits), "expected": _hex(exp[run, row, col], bits),
                        "differing_elements": int(len(diff)), "differing_runs": int(len(set(diff[:, 0].tolist())))}


# Known gaps: none.  When silicon and the evaluator disagree, the computation silicon follows (read
# from the SASS) goes into the arithmetic model (formal.numerics) as a record of its own, and the
# readings it replaces stay as refuted hypotheses (formal.numerics.fit.sm90_alternatives; checked by
# tests/test_numerics_run3.py and tests/test_wmma_pipeline.py).


def check_pipeline_data(path: str | os.PathLike, arch: str | None = None) -> PipelineReport:
    """Evaluate every entry of a pipeline run and compare with the silicon D bit for bit
    (the evaluator's D is computed for entries without silicon output too: every form must be covered)."""
    from . import memory as wmem

    jp, zp = _paths(path)
    if not jp.exists() or not zp.exists():
        raise cat.BadArgument(f"{jp.parent} holds no wmma pipeline run ({jp.name} + {zp.name})")
    doc = json.loads(jp.read_text())
    meta = doc.get("meta", {})
    arch = arch or meta.get("target", "sm_90")
    out: list[EntryResult] = []
    with np.load(zp) as z:
        for e in doc["entries"]:
            k = e["kernel"]
            D = z[f"{k}.D"] if f"{k}.D" in z.files else None
            status, detail = compare(e["opcode"], e["store"], z[f"{k}.A"], z[f"{k}.B"], z[f"{k}.C"], D, arch, e.get("modes"))
            if status == "no_silicon_output":
                detail.update(error=e.get("error") or "no D and no error recorded: the kernel did not run",
                              run_status=e.get("status"))
            elif status == "mismatch":
                detail.update(loads=e.get("loads"), store=e.get("store"), strides=e.get("strides"))
            out.append(EntryResult(k, e["opcode"], wmem.memory_view(e["store"]).layout, status,
                                   0 if D is None else int(D.shape[0]), detail))
    return PipelineReport(str(jp), arch, meta, out)


def extract_slice(src: str | os.PathLike, dest: str | os.PathLike, *, per_type: int = 1, runs=(0, 4),
                  always=("wp0000",), all_runs=(), provenance: dict | None = None) -> Path:
    """Write ``dest`` (.json) + .npz: `per_type` entries per (atype, btype, ctype, dtype) of the run
    at `src`, plus the kernels in `always` and `all_runs`, keeping the runs `runs` (first 'values'
    and first 'bits' run by default; every run for the kernels in `all_runs`), with the run's meta
    and `provenance`."""
    jp, zp = _paths(src)
    doc = json.loads(jp.read_text())
    seen: Counter = Counter()
    pick = []
    for e in doc["entries"]:
        f = cat.parse(e["opcode"])
        key = (f.atype, f.btype, f.ctype, f.dtype)
        if e["kernel"] in always or e["kernel"] in all_runs or seen[key] < per_type:
            seen[key] += 1
            pick.append(e)
    arrays = {}
    entries = []
    with np.load(zp) as z:
        for e in pick:
            keep = list(range(e["runs"])) if e["kernel"] in all_runs else [r for r in runs if r < e["runs"]]
            for x in "ABCD":
                name = f"{e['kernel']}.{x}"
                if name in z.files:
                    arrays[name] = z[name][keep]
            entries.append(dict(e, runs=len(keep), modes=[(e.get("modes") or [None] * e["runs"])[r] for r in keep],
                                source_runs=keep))
    dest = Path(dest)
    meta = dict(doc.get("meta", {}))
    meta["slice"] = dict(provenance or {}, source=str(jp), entries=len(entries), runs_kept=list(runs),
                         rule=f"{per_type} entr{'y' if per_type == 1 else 'ies'} per (atype, btype, ctype, dtype) "
                              f"+ {list(always)}" + (f" + {list(all_runs)} (every run)" if all_runs else ""))
    dest.write_text(json.dumps({"meta": meta, "how_to_check": doc.get("how_to_check"), "entries": entries}, indent=1))
    np.savez_compressed(dest.with_suffix(".npz"), **arrays)
    return dest
