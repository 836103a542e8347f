"""The errata list: every place where silicon, ptxas and the PTX ISA text disagree, or
where the text contradicts itself or is silent and a reading had to be chosen.

The entries live beside the facts they qualify (one source of truth each):

* ``specs/errata.toml``         ptxas vs text, and text-internal contradictions (catalog)
* ``specs/errata_layout.toml``  fragment-layout text errors (layouts)
* ``specs/wmma_memory.toml``    wmma memory-semantics ambiguities
* ``specs/errata_silicon.toml`` H100 findings: silicon vs text, or text silent
* ``specs/errata_examples.toml`` the text's own examples that do not assemble (proofs/seed-examples.json)
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
    ("text examples", "errata_examples"),
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
    citations: list[dict] = field(default_factory=list)   # {ptx_isa, section, numbers, renumbered, ...}
    witness: dict | None = None                           # silicon: {ptx, inputs, observed, expected, source}
    tier: str = ""       # why this severity (required for silent-wrong-result and trap)
    text: str = ""       # the sentence(s) of the text involved
    text_is: str = ""    # "" (verbatim, checked against the seeds), or "paraphrase" / "figure" / "syntax"
    examples: list[str] = field(default_factory=list)      # ids of proofs/seed-examples.json
    raw: dict = field(default_factory=dict, repr=False)     # the entry as written (reports read it)

    @property
    def is_reading(self) -> bool:
        return self.severity == READING

    @property
    def is_peer(self) -> bool:
        return self.source == "peers"

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("raw")
        return d


@dataclass
class Withdrawn:
    """An entry taken back, with the reason (listed apart; never counted)."""

    id: str
    file: str
    summary: str
    reason: str
    checked: list[str] = field(default_factory=list)


# Where PTX ISA versions number the warp-level matrix sections (9.7.14 in 9.1) differently.
# 9.2: tcgen05 is still 9.7.16 there (third-party citations of "PTX ISA 9.2, section 9.7.16
# TensorCore 5th Generation" / "9.7.16.3"), so the warp-level MMA sections keep 9.7.14.x;
# 9.3: 9.7.15.x (citations of "PTX ISA 9.3 ... 9.7.15.5.10", "9.7.15.5.14 Multiply-and-Accumulate
# Instruction: mma"); 9.4: 9.7.16.x ("version 9.4, section 9.7.16.5.8 / 9.7.16.5.14 / 9.7.16.5.15").
# No copy of the 9.5 text was found: its numbering is not given.  Table and figure numbers are
# those of 9.1 only (they move between releases; no newer numbering was verified).
RENUMBERING = (("9.2", "9.7.14"), ("9.3", "9.7.15"), ("9.4", "9.7.16"))
_SEC = re.compile(r"\b9\.7\.14((?:\.\d+)*(?:\.x)?)")


def renumber(text: str, version: str) -> str:
    """``text`` with every 9.7.14.x section number as PTX ISA ``version`` numbers it."""
    new = dict(RENUMBERING)[version]
    return _SEC.sub(lambda m: new + m.group(1), text)


def citations(section: str, ptx_isa: str) -> list[dict]:
    """Each ';'-separated citation of a section field with the PTX ISA version its numbers
    refer to, and every 9.7.14.x number in it (not only the first) as 9.3 and 9.4 number it."""
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
        numbers = re.findall(r"\b\d+\.\d+(?:\.\d+)+\b", part)
        later = {}
        secs = [n for n in numbers if n.startswith("9.7.14")]
        if secs:
            later = {v: ", ".join(renumber(n, v) for n in secs) for v, n in RENUMBERING if n != "9.7.14"}
        # a citation of another document (e.g. the CUDA C++ Programming Guide) has no PTX ISA version
        out.append({"ptx_isa": ptx_isa if m else None, "section": part, "numbers": numbers,
                    "renumbered": later, "section_from_9_4": later.get("9.4")})
    return out


def cite(c: dict) -> str:
    s = f"PTX ISA {c['ptx_isa']} {c['section']}" if c["ptx_isa"] else c["section"]
    if c.get("renumbered"):
        s += " (" + "; ".join(f"{v} in PTX ISA {k}" for k, v in c["renumbered"].items()) + ")"
    return s


def _norm_quote(s: str) -> str:
    """Text as the seeds render it and as errata quote it, made comparable: markdown markup
    (backticks, links, emphasis underscores, table bars), quotes and whitespace dropped."""
    s = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", s)
    s = re.sub(r"(?<![A-Za-z0-9])_([A-Za-z0-9_]+?)_(?![A-Za-z0-9])", r"\1", s)
    s = s.replace("\\_", "_").replace("`", "").replace("*", "").replace("|", " ").replace("\u2019", "'")
    s = re.sub(r"\s*\.\.\s*", "..", s)
    return " ".join(s.split()).lower()


def quote_fragments(text: str) -> list[str]:
    """The verbatim pieces of a `text` field: split at ' ... ' (an omission), each stripped of
    surrounding quotes and of a leading label ('Syntax:', 'Example:', 'Examples:', 'PTX ISA
    Notes:', 'Target ISA Notes:')."""
    out = []
    for part in re.split(r"\s*(?:\.\.\.|\u2026)\s*", text):
        part = part.strip().strip("'\"").strip()
        part = re.sub(r"^(Syntax|Examples?|PTX ISA Notes|Target ISA Notes)\s*:\s*", "", part)
        if len(part) >= 8:
            out.append(part)
    return out


def unquoted(text: str, corpus: str) -> list[str]:
    """The fragments of ``text`` that are not in ``corpus`` (the seed texts), verbatim up to markup."""
    n = _norm_quote(corpus)
    return [f for f in quote_fragments(text) if _norm_quote(f) not in n]


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
    for x in e.get("checked", []):
        out.append(f"re-checked: {x}")
    for k, v in (e.get("decided_elsewhere") or {}).items():
        out.append(f"alternative '{k}' decided outside the probes: {v}")
    if e.get("alternative_refuted"):
        out.append(f"what the witness rules out: {e['alternative_refuted']}")
    for x in e.get("examples", []):
        out += _example_evidence(x)
    for k in ("witness", "hardware"):
        if e.get(k) and isinstance(e[k], str):
            out.append(f"{k}: {e[k]}")
    return out


@lru_cache(maxsize=1)
def seed_examples() -> dict:
    """proofs/seed-examples.json by example id ({} where the checkout has no proofs/)."""
    from .specdata import spec_dir

    path = spec_dir().parent / "proofs" / "seed-examples.json"
    try:
        with open(path) as f:
            return {x["id"]: x for x in json.load(f)["examples"]}
    except OSError:
        return {}


def _example_evidence(xid: str) -> list[str]:
    x = seed_examples().get(xid)
    if not x:
        return [f"example {xid} (proofs/seed-examples.json)"]
    out = []
    for v in x["verdicts"]:
        verdict = "accepted" if v["accepted"] else "rejected: " + "; ".join(v["messages"][:2])
        out.append(f"ptxas {v['ptxas']} {v['target']} PTX {v['ptx']}: example {xid} ({x['seed'][:3]} line {x['line']}, "
                   f"`{' '.join(x['instruction'].split())}`) assembled as written with its declarations: {verdict}")
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
                               citations(section, str(doc.get("ptx_isa", ""))), witness,
                               " ".join(str(e.get("tier", "")).split()), str(e.get("text", "")),
                               str(e.get("text_is", "")), list(e.get("examples", [])), dict(e)))
    return out


def withdrawn() -> list[Withdrawn]:
    """Entries taken back ([[withdrawn]] in any errata file), with the reason."""
    out = []
    for _, name in SOURCES:
        for w in load_spec(name).get("withdrawn", []):
            out.append(Withdrawn(str(w["id"]), f"specs/{name}.toml", " ".join(str(w.get("summary", "")).split()),
                                 " ".join(str(w["reason"]).split()), list(w.get("checked", []))))
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
    if e.text:
        label = "the text (PTX ISA " + (e.citations[0]["ptx_isa"] or "9.1") + ")" if e.citations else "the text"
        lines += ["", f"*{label}{', ' + e.text_is if e.text_is else ', verbatim'}:* " + " ".join(e.text.split())]
    if e.tier:
        lines += ["", f"*Tier:* {e.tier}"]
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


def _counts(es: list[Erratum]) -> str:
    return ", ".join(f"{sum(e.severity == s for e in es)} {SEVERITY_LABEL[s]}" for s in SEVERITIES)


def headline(errata: list[Erratum] | None = None) -> str:
    """The counts, the project's own errata (NVIDIA's text, ptxas, silicon) and the peers' apart."""
    errata = errata if errata is not None else all_errata()
    errs = [e for e in errata if not e.is_reading]
    own = [e for e in errs if not e.is_peer]
    peers = [e for e in errs if e.is_peer]
    wd = withdrawn()
    return (f"{len(own)} errata of the PTX ISA text, ptxas and the H100 ({_counts(own)}); "
            f"{len(peers)} errata of peer projects ({_counts(peers)}); "
            f"{len(errata) - len(errs)} readings; {len(wd)} withdrawn.")


def markdown(errata: list[Erratum] | None = None) -> str:
    errata = errata if errata is not None else all_errata()
    lines = ["# ptx-formal errata", "",
             "Generated by `ptx-formal errata --write`; do not edit (a test regenerates it). Every place where "
             "silicon (H100), NVIDIA's assembler and the PTX ISA text disagree, or where the text contradicts "
             "itself or is silent, with its severity, what ptx-formal does, the evidence and, for silicon, a "
             "minimal witness. Section numbers are those of PTX ISA 9.1 (the version of the text the project "
             "transcribes); every 9.7.14.x number is also given as PTX ISA 9.3 (9.7.15.x) and 9.4 (9.7.16.x) number it; "
             "table and figure numbers are those of 9.1. The "
             "project's own modelling choices are listed apart, under Readings. The entries live in the spec "
             "files named below, next to the facts they qualify.", ""]
    errs = [e for e in errata if not e.is_reading]
    lines += [headline(errata), ""]
    for peers in (False, True):
        for sev in SEVERITIES:
            group = [e for e in errs if e.severity == sev and e.is_peer == peers]
            if not group:
                continue
            lines += [f"## {'peers: ' if peers else ''}{SEVERITY_LABEL[sev]} ({len(group)})", ""]
            for label, name in SOURCES:
                for e in (x for x in group if x.source == label):
                    lines += _entry_md(e)
    rd = [e for e in errata if e.is_reading]
    if rd:
        lines += [f"## Readings: the project's modelling choices ({len(rd)})", ""]
        for e in rd:
            lines += _entry_md(e)
    wd = withdrawn()
    if wd:
        lines += [f"## Withdrawn ({len(wd)})", ""]
        for w in wd:
            lines += [f"### {w.id}  [withdrawn; {w.file}]", "", w.summary, "", f"*Why withdrawn:* {w.reason}", ""]
            lines += [f"- checked: {x}" for x in w.checked] + [""]
    return "\n".join(lines).rstrip() + "\n"
