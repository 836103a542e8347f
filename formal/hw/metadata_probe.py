"""Hardware probe of sparse metadata: which (lane, nibble) of e steers which (row, chunk) of A.

Settles on silicon what ``specs/metadata.toml`` takes from figures: the metadata layout
per form and selector (including the two layouts whose competing hypothesis is kept as
``alternative``), which lanes are ignored, how a nibble places a chunk's stored elements
(both variants, the reversed pairs that plain ``.sp`` allows), and -- as observations
only -- what the hardware does with the nibbles the ISA calls undefined.

Inputs (all exact in every type; C = 0)
---------------------------------------
* A: every chunk's stored element j holds the small integer j + 1 (1..stored), so the
  position of each value in a decoded chunk gives the index the hardware used.  The
  ``random`` configurations use random values 1..7 and random legal words instead.
* B: one-hot by column.  A configuration runs on G = K/8 warps; in warp g,
  B[k][n] = 1 iff k == 8g + n, so D[m][n] = A_logical[m][8g + n]: the G warps together
  read back the whole 16 x K logical A that the hardware formed.
* e, one configuration per line:
    ``base``      every nibble of every lane = 0b0100 (legal in every variant and for tf32)
    ``locate``    base, but lane L nibble n = 0b1110, for all 32 lanes x 8 nibbles; the one
                  (row, chunk) whose non-zeros move from columns {0,1} to {2,3} (pairs, for
                  4:8; element 0 -> 1 for tf32) is the chunk (L, n) controls; no change means
                  the lane is ignored under this selector
    ``value``     every nibble of every lane = v, for each legal v (12 for .sp, 6 for
                  ::ordered_metadata, 2 for tf32)
    ``random``    random legal words, random stored values
    ``ub``        every nibble = v, for each v the ISA calls undefined (observation only)

Decoding (:func:`decode`)
-------------------------
D registers -> D matrices (``formal.layout.unpack``) -> the observed logical A of each
configuration -> (a) for ``locate``: the changed chunk, and the nibble the hardware used
there (read from where values 1..stored landed), giving the observed map
(lane, nibble) -> (row, chunk, nibble seen); compared with the spec's layout and with its
``alternative``; (b) for ``base``/``value``/``random``: equality with the spec's
``decompress``; (c) for ``ub``: which reading of ``specs/metadata.toml`` [[ub_reading]]
(sum / last / sorted / idx0 / idx1) the hardware's A matches, if any.

Running (needs a CUDA GPU, CuPy; the lead's harness)::

    python -m formal.hw.metadata_probe --target sm_90 --ptx 8.7 --json probe.json
    python -m formal.hw.metadata_probe --simulate     # no GPU: the spec plays the hardware
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ..catalog import Form, forms, parse
from ..metadata import codec
from ..metadata.spec import FormMeta, Layout, check_selector, meta
from ..metadata.storage import pack_a
from ..metadata.witness import small_int_codes
from ..catalog.text import Immediates
from .kernels import Case

BASE_NIB = 0b0100
ALT_NIB = 0b1110
B_GROUP = 8                 # N of every sparse shape: one-hot columns per warp


@dataclass
class Config:
    kind: str               # base | locate | value | random | ub
    e: np.ndarray           # [32] uint32
    A: np.ndarray           # [M, K] small-int logical A the registers encode (spec reading), int64
    lane: int | None = None
    nibble: int | None = None
    value: int | None = None


@dataclass
class Probe:
    form: Form
    sel: int
    configs: list[Config]
    groups: int                                  # warps per configuration (K / 8)
    inputs: dict[str, np.ndarray]                # 'a', 'b', 'c', 'e': [W, 32, n] uint32
    stored_values: np.ndarray                    # [len(configs), M, chunks, stored] ints

    @property
    def case(self) -> Case:
        return Case(self.form, Immediates(sel=self.sel))

    @property
    def warps(self) -> int:
        return len(self.configs) * self.groups


def _layout_module():
    from .. import layout

    return layout


def _slots_values(fm: FormMeta, rng: np.random.Generator | None) -> np.ndarray:
    s = fm.gran.stored
    if rng is None:
        return np.broadcast_to(np.arange(1, s + 1), (fm.rows, fm.chunks_per_row, s)).copy()
    return rng.integers(1, 8, (fm.rows, fm.chunks_per_row, s))


def _encode_a(fm: FormMeta, stored: np.ndarray) -> np.ndarray:
    """Stored small ints [M, C, stored] -> A registers [32, nregs] (each at its (lane, i) slot)."""
    codes = small_int_codes(fm.form.atype, stored.reshape(-1)).reshape(stored.shape)
    slots = fm.a_slots()
    a_codes = np.zeros((1, 32, fm.a_elems), dtype=np.uint64)
    a_codes[0, slots[..., 0], slots[..., 1]] = codes
    return pack_a(fm, a_codes)[0]


def _logical(fm: FormMeta, stored: np.ndarray, e: np.ndarray, sel: int, mode: str = "literal",
             layout: Layout | None = None) -> np.ndarray:
    """Logical A [M, K] (ints) the hardware forms from stored values and words e under ``mode``."""
    w, s = fm.gran.width, fm.gran.stored
    tab = fm.e_table(sel, layout)
    nib = np.zeros((fm.rows, fm.chunks_per_row), dtype=np.int64)
    nib[tab[:, 2], tab[:, 3]] = (e.astype(np.int64)[tab[:, 0]] >> tab[:, 4]) & 0xF
    A = np.zeros((fm.rows, fm.chunks_per_row, w), dtype=np.int64)
    if mode == "literal":                       # vectorised; collisions add up
        r, c = np.indices(nib.shape)
        for j in range(s):
            off = np.asarray(codec.offset(fm, j, nib), dtype=np.int64)
            np.add.at(A, (r, c, off), stored[..., j])
    else:
        for r in range(fm.rows):
            for c in range(fm.chunks_per_row):
                A[r, c] = codec.place(fm, int(nib[r, c]), [int(x) for x in stored[r, c]], mode)
    return A.reshape(fm.rows, fm.k)


def _word(nibs: dict[int, int], fill: int) -> int:
    return sum((nibs.get(n, fill)) << (4 * n) for n in range(8))


def build(form: Form | str, sel: int, seed: int = 0, random_configs: int = 4, ub: bool = True) -> Probe:
    """Register-level inputs for one (form, selector); see the module docstring."""
    fm = meta(form)
    check_selector(fm, sel)
    rng = np.random.Generator(np.random.PCG64(seed))
    fixed = _slots_values(fm, None)
    configs: list[Config] = []
    stored_all = []

    def add(kind, e, stored, **kw):
        configs.append(Config(kind, np.asarray(e, dtype=np.uint32), _logical(fm, stored, e, sel), **kw))
        stored_all.append(stored)

    base = np.full(32, _word({}, BASE_NIB), dtype=np.uint32)
    add("base", base, fixed)
    for lane in range(32):
        for n in range(8):
            e = base.copy()
            e[lane] = _word({n: ALT_NIB}, BASE_NIB)
            add("locate", e, fixed, lane=lane, nibble=n)
    for v in fm.legal_nibbles:
        add("value", np.full(32, _word({}, v), dtype=np.uint32), fixed, value=v)
    for _ in range(random_configs):
        nibs = np.array(fm.legal_nibbles)[rng.integers(0, len(fm.legal_nibbles), (32, 8))]
        e = (nibs.astype(np.uint64) << (4 * np.arange(8, dtype=np.uint64))).sum(axis=1).astype(np.uint32)
        add("random", e, _slots_values(fm, rng))
    if ub:
        for v in range(16):
            if v not in fm.legal_nibbles:
                add("ub", np.full(32, _word({}, v), dtype=np.uint32), fixed, value=v)
    G = fm.k // B_GROUP
    W = len(configs) * G
    lay = _layout_module()
    one_b = int(small_int_codes(fm.form.btype, [1])[0])
    B = np.zeros((G, fm.k, B_GROUP), dtype=np.uint64)
    for g in range(G):
        for n in range(B_GROUP):
            B[g, g * B_GROUP + n, n] = one_b
    b_regs = lay.pack(fm.form, "b", B)                                 # [G, 32, nb]
    a = np.stack([_encode_a(fm, s) for s in stored_all])               # [Ncfg, 32, na]
    e = np.stack([c.e for c in configs])                               # [Ncfg, 32]
    nc = fm.form.operands["c"].count
    inputs = {
        "a": np.repeat(a, G, axis=0),
        "b": np.tile(b_regs, (len(configs), 1, 1)).astype(np.uint32),
        "c": np.zeros((W, 32, nc), dtype=np.uint32),
        "e": np.repeat(e, G, axis=0).reshape(W, 32, 1),
    }
    return Probe(fm.form, sel, configs, G, inputs, np.stack(stored_all))


# ----------------------------------------------------------------------------------
# decoding

@dataclass
class ProbeReport:
    opcode: str
    sel: int
    layout_id: str
    ok: bool
    hypotheses: dict[str, bool]                     # layout id -> observed map matches it
    observed: list[dict] = field(default_factory=list)   # lane, nibble, row, chunk, nibble_seen
    ignored_lanes: list[int] = field(default_factory=list)
    mismatches: list[dict] = field(default_factory=list)
    values: dict[str, bool] = field(default_factory=dict)  # '0b0100' -> decoded as the spec says
    random_ok: int = 0
    random_total: int = 0
    ub: dict[str, list[str]] = field(default_factory=dict)  # '0b0101' -> readings that match silicon
    anomalies: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    def text(self) -> str:
        hyp = ", ".join(f"{k}: {'MATCH' if v else 'no'}" for k, v in self.hypotheses.items())
        lines = [f"{self.opcode} sel={self.sel}: {'OK' if self.ok else 'MISMATCH'}  [{hyp}]",
                 f"  ignored lanes: {self.ignored_lanes}",
                 f"  nibble values decoded as the spec says: "
                 f"{sum(self.values.values())}/{len(self.values)}"
                 + ("" if all(self.values.values()) else f"  wrong: {[k for k, v in self.values.items() if not v]}"),
                 f"  random legal words: {self.random_ok}/{self.random_total}"]
        if self.ub:
            lines.append("  undefined nibbles (observation): " +
                         "; ".join(f"{k} -> {', '.join(v) if v else 'no reading'}" for k, v in self.ub.items()))
        for m in self.mismatches[:8]:
            lines.append(f"  mismatch: {m}")
        for a in self.anomalies[:8]:
            lines.append(f"  anomaly: {a}")
        return "\n".join(lines)


def _d_values(form: Form, d_regs: np.ndarray) -> np.ndarray:
    from ..numerics.formats import to_float64

    lay = _layout_module()
    D = lay.unpack(form, "d", d_regs)                                   # [W, M, N] encodings
    if form.dtype == "s32":
        return D.astype(np.uint32).view(np.int32).astype(np.float64)
    return to_float64(D, form.dtype)


def observed_A(probe: Probe, d_regs: np.ndarray) -> np.ndarray:
    """[configs, M, K] float64: the logical A the hardware formed, per configuration."""
    fm = meta(probe.form)
    vals = _d_values(probe.form, np.asarray(d_regs))
    G = probe.groups
    out = vals.reshape(len(probe.configs), G, fm.rows, B_GROUP)           # [cfg, g, m, n]
    return out.transpose(0, 2, 1, 3).reshape(len(probe.configs), fm.rows, fm.k)


def _nibble_seen(fm: FormMeta, chunk_vals: np.ndarray, stored: np.ndarray) -> int | None:
    """The legal-or-not nibble whose placement of ``stored`` gives ``chunk_vals`` (None if none)."""
    hits = [v for v in range(16) if list(codec.place(fm, v, [int(x) for x in stored])) == [int(x) for x in chunk_vals]]
    legal = [v for v in hits if v in fm.legal_nibbles]
    return (legal or hits or [None])[0]


def decode(probe: Probe, d_regs: np.ndarray) -> ProbeReport:
    fm = meta(probe.form)
    w = fm.gran.width
    Aobs = observed_A(probe, d_regs)
    rep = ProbeReport(probe.form.opcode, probe.sel, fm.layout.id, True, {})
    if not np.isfinite(Aobs).all() or (Aobs != np.round(Aobs)).any():
        rep.anomalies.append("non-integral or non-finite D values: inputs were not read as expected")
    Aobs = np.nan_to_num(Aobs).round().astype(np.int64)
    base_i = next(i for i, c in enumerate(probe.configs) if c.kind == "base")
    base = Aobs[base_i]
    # (a) the observed (lane, nibble) -> (row, chunk) map
    seen: dict[tuple[int, int], tuple[int, int]] = {}
    lanes_read = set()
    for i, c in enumerate(probe.configs):
        if c.kind != "locate":
            continue
        diff = (Aobs[i] != base).reshape(fm.rows, fm.chunks_per_row, w).any(-1)
        where = [tuple(int(x) for x in rc) for rc in np.argwhere(diff)]
        if not where:
            continue
        lanes_read.add(c.lane)
        if len(where) > 1:
            rep.anomalies.append(f"lane {c.lane} nibble {c.nibble} changed {len(where)} chunks: {where[:4]}")
        r, ch = where[0]
        nib = _nibble_seen(fm, Aobs[i][r, ch * w:(ch + 1) * w], probe.stored_values[i][r, ch])
        seen[c.lane, c.nibble] = (r, ch)
        rep.observed.append({"lane": c.lane, "nibble": c.nibble, "row": r, "chunk": ch,
                             "nibble_seen": None if nib is None else f"0b{nib:04b}"})
    rep.ignored_lanes = sorted(set(range(32)) - lanes_read)
    hyps: list[Layout] = [fm.layout] + ([fm.layout.alternative] if fm.layout.alternative else [])
    for lay in hyps:
        pred = {(int(l), int(n)): (int(r), int(c)) for l, n, r, c, _lo in fm.e_table(probe.sel, lay)}
        rep.hypotheses[lay.id] = pred == seen
    rep.ok = rep.hypotheses[fm.layout.id]
    # (b) legal configurations decode as the spec says
    for i, c in enumerate(probe.configs):
        if c.kind in ("base", "locate", "value", "random"):
            good = bool((Aobs[i] == c.A).all())
            if c.kind == "value":
                rep.values[f"0b{c.value:04b}"] = good
            if c.kind == "random":
                rep.random_total += 1
                rep.random_ok += good
            if not good:
                bad = np.argwhere(Aobs[i] != c.A)[0]
                rep.mismatches.append({"config": c.kind, "lane": c.lane, "nibble": c.nibble,
                                       "value": None if c.value is None else f"0b{c.value:04b}",
                                       "first": {"row": int(bad[0]), "col": int(bad[1]),
                                                 "spec": int(c.A[tuple(bad)]), "silicon": int(Aobs[i][tuple(bad)])}})
                rep.ok = False
    # (c) undefined nibbles: which reading did the silicon pick?
    from ..metadata.spec import readings

    for i, c in enumerate(probe.configs):
        if c.kind != "ub":
            continue
        cands = [rd for rule in fm.broken_rules(c.value) for rd in readings(rule.id) if rd.mode]
        rep.ub[f"0b{c.value:04b}"] = [rd.id for rd in cands
                                      if (_logical(fm, probe.stored_values[i], c.e, probe.sel, rd.mode) == Aobs[i]).all()]
    return rep


# ----------------------------------------------------------------------------------
# driving it

def sm90_cases(target: str = "sm_90", ptx: str = "8.7", one_per_class: bool = False) -> list[tuple[Form, int]]:
    """Every sparse form legal on ``target`` x every legal selector (``one_per_class``: one form
    per metadata class -- same spec entries, K, packing -- instead of every dtype/satfinite spelling)."""
    fs = forms(target, ptx, "mma.sp")
    if one_per_class:
        seen, keep = set(), []
        for f in fs:
            if meta(f).key not in seen:
                seen.add(meta(f).key)
                keep.append(f)
        fs = keep
    return [(f, s) for f in fs for s in (f.selectors or ())]


def simulate(probe: Probe, layout_override: Layout | None = None) -> np.ndarray:
    """The spec playing the hardware: D registers for ``probe``'s inputs (for tests, --simulate).

    ``layout_override`` replaces the metadata layout (e.g. the alternative hypothesis) so a
    test can check that :func:`decode` tells the two apart.
    """
    from ..numerics.formats import from_float64, to_float64

    fm = meta(probe.form)
    lay = _layout_module()
    W = probe.warps
    B = to_float64(lay.unpack(probe.form, "b", probe.inputs["b"]), probe.form.btype)    # [W, K, N]
    out = np.zeros((W, fm.rows, B_GROUP))
    for ci, c in enumerate(probe.configs):
        A = _logical(fm, probe.stored_values[ci], c.e, probe.sel, layout=layout_override).astype(np.float64)
        for g in range(probe.groups):
            out[ci * probe.groups + g] = A @ B[ci * probe.groups + g]
    if probe.form.dtype == "s32":
        codes = out.astype(np.int64) & 0xFFFFFFFF
    else:
        codes = from_float64(out, probe.form.dtype)
    return lay.pack(probe.form, "d", codes)


def run(gpu: Any, cases: list[tuple[Form, int]], ptx: str = "8.7", target: str | None = None,
        seed: int = 0) -> list[ProbeReport]:
    """Build, run on ``gpu`` (a ``formal.hw.runner.GPU``) and decode every case."""
    probes = [build(f, s, seed) for f, s in cases]
    outs = gpu.run_cases([p.case for p in probes], [p.inputs for p in probes], ptx=ptx, target=target)
    return [decode(p, d) for p, d in zip(probes, outs)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m formal.hw.metadata_probe",
                                 description="Probe the sparse metadata layout of every sm_90 mma.sp form on a GPU.")
    ap.add_argument("--target", default="sm_90")
    ap.add_argument("--ptx", default="8.7")
    ap.add_argument("--form", default=None, help="only this opcode")
    ap.add_argument("--sel", type=int, default=None)
    ap.add_argument("--one-per-class", action="store_true",
                    help="one form per metadata class instead of every dtype/satfinite spelling")
    ap.add_argument("--simulate", action="store_true", help="no GPU: the spec plays the hardware")
    ap.add_argument("--json", default=None, help="write the reports here")
    args = ap.parse_args(argv)
    cases = sm90_cases(args.target, args.ptx, args.one_per_class)
    if args.form:
        f = parse(args.form)
        cases = [(f, s) for s in (f.selectors or ()) if args.sel is None or s == args.sel]
    if args.simulate:
        reports = []
        for f, s in cases:
            p = build(f, s)
            reports.append(decode(p, simulate(p)))
    else:
        from .runner import GPU

        reports = run(GPU(), cases, ptx=args.ptx, target=args.target)
    for r in reports:
        print(r.text())
    bad = [r for r in reports if not r.ok]
    print(f"# {len(reports) - len(bad)}/{len(reports)} (form, selector) cases match the spec")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump([r.to_dict() for r in reports], fh, indent=1)
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
