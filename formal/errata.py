"""The errata list: every place where silicon, ptxas and the PTX ISA text disagree, or
where the text contradicts itself or is silent and a reading had to be chosen.

The entries live beside the facts they qualify (one source of truth each):

* ``specs/errata.toml``         ptxas vs text, and text-internal contradictions (catalog)
* ``specs/errata_layout.toml``  fragment-layout text errors (layouts)
* ``specs/wmma_memory.toml``    wmma memory-semantics ambiguities
* ``specs/errata_silicon.toml`` H100 findings: silicon vs text, or text silent
* ``specs/errata_peers.toml``   other projects' layouts / validity rules vs the text

This module reads them all into one list (``ptx-formal errata``, ``proofs/ERRATA.md``).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from functools import lru_cache

from .specdata import load_spec

SOURCES = (
    ("ptxas/text", "errata"),
    ("layout text", "errata_layout"),
    ("wmma memory", "wmma_memory"),
    ("silicon", "errata_silicon"),
    ("peers", "errata_peers"),
)


SEVERITIES = ("silent-wrong-result", "trap", "rejected-valid-code", "documentation")
SEVERITY_LABEL = {"silent-wrong-result": "silent wrong result", "trap": "trap",
                  "rejected-valid-code": "rejected valid code", "documentation": "documentation"}
READING = "reading"      # the project's own modelling choice: listed apart from the errata


@dataclass
class Erratum:
    id: str
    source: str          # which list (ptxas/text, layout text, wmma memory, silicon)
    file: str            # specs/<file>.toml
    kind: str
    section: str
    summary: str
    resolution: str      # what the project does
    evidence: list[str] = field(default_factory=list)
    severity: str = ""   # one of SEVERITIES, or READING
    citations: list[dict] = field(default_factory=list)   # {ptx_isa, section, section_from_9_4}
    witness: dict | None = None                           # silicon: {ptx, inputs, observed, expected, source}

    @property
    def is_reading(self) -> bool:
        return self.severity == READING

    def to_dict(self) -> dict:
        return asdict(self)


def citations(section: str, ptx_isa: str) -> list[dict]:
    """Each ';'-separated citation of a section field with the PTX ISA version its number
    refers to; 9.7.14.x citations also get their number from PTX ISA 9.4 on (9.7.16.x)."""
    parts, depth, cur = [], 0, ""
    for ch in str(section):             # split at top-level ';' only ("9.7.14.6.3 (Syntax; Notes)")
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == ";" and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    out = []
    for part in (x.strip() for x in parts):
        if not part:
            continue
        m = re.match(r"(\d+(?:\.\d+)+)", part)
        later = None
        if m and m.group(1).startswith("9.7.14"):
            later = "9.7.16" + m.group(1)[len("9.7.14"):]
        # a citation of another document (e.g. the CUDA C++ Programming Guide) has no PTX ISA version
        out.append({"ptx_isa": ptx_isa if m else None, "section": part, "section_from_9_4": later})
    return out


def cite(c: dict) -> str:
    s = f"PTX ISA {c['ptx_isa']} {c['section']}" if c["ptx_isa"] else c["section"]
    if c.get("section_from_9_4"):
        s += f" (= {c['section_from_9_4']} from PTX ISA 9.4)"
    return s


def _probe_witness(pid: str) -> dict:
    """A numerics probe as a self-contained witness: the PTX line, the nonzero inputs of
    row 0 of A / column 0 of B / C[0][0] (everything else zero), silicon's D[0][0] and the
    alternatives the probe refutes (formal/numerics/probes.py + proofs/evidence)."""
    from .numerics import probes

    p = probes.by_id(pid)
    a, b, c = p.codes()
    rec = _numerics_evidence().get(pid, {})
    ks = [k for k in range(len(a)) if int(a[k]) or int(b[k])]
    width = {8: 2, 16: 4, 32: 8, 64: 16}
    def h(v, t):
        from .numerics.formats import get_format
        bits = get_format(t).bits if t not in ("tf32",) else 32
        return f"0x{int(v):0{width.get(max(bits, 8), 8)}x}"
    at, bt, ct = p.form["atype"], p.form["btype"], p.form["ctype"]
    if len(ks) > 8:
        same = len({int(a[k]) for k in ks}) == 1 and len({int(b[k]) for k in ks}) == 1
        ins = (f"A row 0: a[k] = {h(a[ks[0]], at)} and B column 0: b[k] = {h(b[ks[0]], bt)} for k in "
               f"{{{', '.join(map(str, ks[:3]))}, ..., {ks[-1]}}} ({len(ks)} values)" if same else
               f"A row 0 / B column 0 nonzero at {len(ks)} positions (probe {pid})")
    else:
        ins = "; ".join(f"a[{k}] = {h(a[k], at)}, b[{k}] = {h(b[k], bt)}" for k in ks)
    alts = {k: v for k, v in rec.get("predictions", {}).items() if k != "sm_90" and v != rec.get("observed")}
    return {
        "ptx": f"{rec.get('opcode', '')} d, a, b, c;",
        "inputs": f"{ins}; C[0][0] = {h(c, ct)}; every other element of A, B, C is 0",
        "observed": f"D[0][0] = {rec.get('observed', '?')}",
        "expected": "; ".join(f"{k}: {v}" for k, v in alts.items()),
        "source": f"numerics probe {pid} (formal/numerics/probes.py; proofs/evidence/numerics_probes_h100.json, "
                  f"{rec.get('_run', '')})",
    }


@lru_cache(maxsize=1)
def _numerics_evidence() -> dict:
    from .specdata import spec_dir

    path = spec_dir().parent / "proofs" / "evidence" / "numerics_probes_h100.json"
    try:
        with open(path) as f:
            d = json.load(f)
    except OSError:
        return {}
    return {r["id"]: dict(r, _run=f"{d.get('run', '')} {d.get('date', '')}".strip()) for r in d.get("results", [])}


def _evidence(e: dict) -> list[str]:
    ev = e.get("evidence", [])
    out: list[str] = []
    if isinstance(ev, str):
        out.append(ev)
    elif isinstance(ev, list):
        for x in ev:
            if isinstance(x, dict):   # ptxas evidence records
                verdict = "accepted" if x.get("accepted") else "rejected"
                msg = f": {x['message']}" if x.get("message") else ""
                out.append(f"ptxas {x.get('ptxas')} {x.get('target')} PTX {x.get('ptx')}: `{x.get('instruction', '')}` {verdict}{msg}")
            else:
                out.append(str(x))
    if e.get("file"):
        out.append(f"{e.get('peer', 'peer')}: {e['file']} line {e.get('line')} at {e.get('commit')}; "
                   f"upstream: {e.get('upstream_status', '?')}")
    for k in ("witness", "hardware"):
        if e.get(k) and isinstance(e[k], str):
            out.append(f"{k}: {e[k]}")
    return out


def all_errata() -> list[Erratum]:
    out = []
    for label, name in SOURCES:
        doc = load_spec(name)
        for e in doc.get("erratum", []):
            summary = e.get("summary") or e.get("question") or e.get("silicon") or e.get("text", "")
            if label == "silicon" and e.get("silicon"):
                summary = e["silicon"]
            resolution = e.get("catalog") or e.get("spec") or e.get("decision") or e.get("model") or ""
            section = str(e.get("section", doc.get("section", "")))
            witness = dict(e["witness_min"]) if "witness_min" in e else (
                _probe_witness(e["witness_probe"]) if "witness_probe" in e else None)
            out.append(Erratum(str(e["id"]), label, f"specs/{name}.toml", str(e.get("kind", "reading")),
                               section, " ".join(str(summary).split()),
                               " ".join(str(resolution).split()), _evidence(e), str(e.get("severity", "")),
                               citations(section, str(doc.get("ptx_isa", ""))), witness))
    return out


def errata_only() -> list[Erratum]:
    """The errata proper (every entry with a severity), without the readings."""
    return [e for e in all_errata() if not e.is_reading]


def readings() -> list[Erratum]:
    """The project's own modelling choices where the text is ambiguous or silent."""
    return [e for e in all_errata() if e.is_reading]


def _entry_md(e: Erratum) -> list[str]:
    sev = "reading" if e.is_reading else SEVERITY_LABEL.get(e.severity, e.severity)
    lines = [f"### {e.id}  [{sev}; {e.kind}]", "", e.summary, "",
             "*Cites:* " + "; ".join(cite(c) for c in e.citations)]
    if e.resolution:
        lines += ["", f"*ptx-formal:* {e.resolution}"]
    if e.witness:
        w = e.witness
        lines += ["", "*Witness:*", f"- PTX: `{w.get('ptx', '')}`", f"- inputs: {w.get('inputs', '')}",
                  f"- observed: {w.get('observed', '')}"]
        if w.get("expected"):
            lines.append(f"- instead of: {w['expected']}")
        if w.get("source"):
            lines.append(f"- from: {w['source']}")
    if e.evidence:
        lines += ["", "*Evidence:*"] + [f"- {x}" for x in e.evidence[:6]]
        if len(e.evidence) > 6:
            lines.append(f"- ... {len(e.evidence) - 6} more in `{e.file}`")
    lines.append("")
    return lines


def markdown(errata: list[Erratum] | None = None) -> str:
    errata = errata if errata is not None else all_errata()
    lines = ["# ptx-formal errata", "",
             "Generated by `ptx-formal errata --write`; do not edit (a test regenerates it). Every place where "
             "silicon (H100), NVIDIA's assembler and the PTX ISA text disagree, or where the text contradicts "
             "itself or is silent, with its severity, what ptx-formal does, the evidence and, for silicon, a "
             "minimal witness. Section numbers are those of PTX ISA 9.1 (the version of the text the project "
             "transcribes); from PTX ISA 9.4 on, 9.7.14.x is numbered 9.7.16.x (given in parentheses). The "
             "project's own modelling choices are listed apart, under Readings. The entries live in the spec "
             "files named below, next to the facts they qualify.", ""]
    errs = [e for e in errata if not e.is_reading]
    counts = ", ".join(f"{sum(e.severity == s for e in errs)} {SEVERITY_LABEL[s]}" for s in SEVERITIES)
    lines += [f"{len(errs)} errata ({counts}); {len(errata) - len(errs)} readings.", ""]
    for sev in SEVERITIES:
        group = [e for e in errs if e.severity == sev]
        if not group:
            continue
        lines += [f"## {SEVERITY_LABEL[sev]} ({len(group)})", ""]
        for label, name in SOURCES:
            for e in (x for x in group if x.source == label):
                lines += _entry_md(e)
    rd = [e for e in errata if e.is_reading]
    if rd:
        lines += [f"## Readings: the project's modelling choices ({len(rd)})", ""]
        for e in rd:
            lines += _entry_md(e)
    return "\n".join(lines).rstrip() + "\n"
