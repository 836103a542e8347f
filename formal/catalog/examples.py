"""The PTX text's own examples, assembled as written.

Every ``mma`` / ``mma.sp`` / ``wmma`` example of the PTX ISA text (the seed texts the project
transcribes) is extracted with the declarations the example writes and assembled *literally*:
one module per example, its module-scope declarations (``.global`` ...) at module scope, its
``.reg`` declarations and the instruction, unchanged, in the kernel body. The module adds only
what no example writes: the header (``.version``/``.target`` = the PTX ISA version and target the
text documents for the form) and, for an address or stride the example never declares (``[ptr]``,
``s``), a ``.b64`` / ``.u32`` register of that name ("context").

Which declarations an example writes: the ``.reg``/``.global``/``.shared``/``.const``/``.local``
statements between the previous instruction of the same example block (the text under one
"Examples" heading) and this one; an example with none there reuses those of the example before
it (the text declares once for several examples).

A rejected example is then repaired for punctuation only (a declaration's missing ``;`` or the
commas between its names) and assembled again: accepted now -> ``punctuation``; still rejected ->
``substantive``. An example whose operands are elided with ``...`` is ``elided`` (the text marks the
elision itself; nothing to assemble). Independently of ptxas, :func:`diagnose` reads the example
against the text's own fragment rules (undeclared registers, register counts, register types:
the type the fragment description names, or a bit-size type of the same width, PTX's rule for
bit-size types); the two verdicts are cross-checked by tests/test_seed_examples.py.

``proofs/seed-examples.json`` is the recorded artefact (``python3 -m formal.catalog.examples
--write proofs/seed-examples`` regenerates it and its markdown from the seeds and both ptxas).
"""

from __future__ import annotations

import glob
import json
import os
import re
from dataclasses import asdict, dataclass, field
from typing import Iterable

from . import parse_instruction, parse_target
from . import ptxas as P

# an instruction: opcode, then an operand list starting with a register vector or an address, up to ';'
_INSN = re.compile(r"(?<![\w.])(w?mma(?:\.[A-Za-z0-9_:]+)+)\s*((?:\{\s*[%A-Za-z]|\[)[^;]*);", re.S)
# a declaration: a state space at a statement start, up to ';' or the end of its line
_DECL = re.compile(r"(?<![\w.%])\.(reg|global|shared|const|local)\s[^;\n]*;?")
# what starts a new example block: an "Examples" heading or a section heading
_BLOCK = re.compile(r"(?m)Examples\b|^#+ |^\s*9\.7\.\d+(?:\.\d+)+\.\s")
_SECTION = re.compile(r"(9\.7\.\d+(?:\.\d+)+)\.\s")
_NAME = re.compile(r"(?<![\w.%])%?[A-Za-z_][A-Za-z0-9_]*")


@dataclass
class Example:
    id: str
    seed: str                    # seed file name
    line: int                    # line of the instruction in the seed
    section: str                 # PTX ISA 9.1 section the example is in
    instruction: str             # as written (lines stripped, joined by newlines)
    declarations: list[str]      # as written, in order
    also_in: list[str] = field(default_factory=list)   # other seeds quoting the same instruction

    @property
    def key(self) -> str:
        return " ".join(self.instruction.split())


def _blocks(text: str) -> list[tuple[int, int]]:
    cuts = sorted({0, len(text)} | {m.start() for m in _BLOCK.finditer(text)})
    return list(zip(cuts, cuts[1:]))


def extract(text: str, seed: str) -> list[Example]:
    """The examples of one seed text, each with the declarations it writes."""
    out: list[Example] = []
    for lo, hi in _blocks(text):
        part = text[lo:hi]
        insns = [(m.start(), m.end(), m) for m in _INSN.finditer(part)]
        decls = [(m.start(), m.group(0).strip()) for m in _DECL.finditer(part)
                 if not any(a <= m.start() < b for a, b, _ in insns)]
        in_force: list[str] = []
        prev_end = 0
        for a, b, m in insns:
            own = [d for pos, d in decls if prev_end <= pos < a]
            if own:
                in_force = own
            prev_end = b
            pos = lo + a
            secs = _SECTION.findall(text[:pos])
            literal = "\n".join(ln.strip() for ln in m.group(0).splitlines() if ln.strip())
            out.append(Example("", seed, text.count("\n", 0, pos) + 1, secs[-1] if secs else "", literal,
                               list(in_force)))
    return out


def seed_files(seeds: str | None = None) -> list[str]:
    d = seeds or os.environ.get("PTX_FORMAL_SEEDS") or os.path.join(
        os.path.dirname(__file__), "..", "..", "..", "shared", "seeds")
    return sorted(glob.glob(os.path.join(d, "*.txt")))


def all_examples(files: Iterable[str]) -> list[Example]:
    """Every example of the seeds, once (the first seed quoting an instruction wins; the
    others are listed in ``also_in``), numbered X01, X02, ... in seed order."""
    seen: dict[str, Example] = {}
    for fn in files:
        with open(fn, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for ex in extract(text, os.path.basename(fn)):
            if ex.key in seen:
                first = seen[ex.key]
                same = [" ".join(d.split()) for d in ex.declarations] == [" ".join(d.split()) for d in first.declarations]
                first.also_in.append(f"{ex.seed}:{ex.line}" + ("" if same else " (other declarations: "
                                                               + " ".join(ex.declarations) + ")"))
            else:
                seen[ex.key] = ex
    out = list(seen.values())
    for i, ex in enumerate(out, 1):
        ex.id = f"X{i:02d}"
    return out


# ---------------------------------------------------------------------------------------------
# declarations

_TYPE_BITS = {"pred": 1, "f16x2": 32, "bf16x2": 32, "e4m3x2": 16, "e5m2x2": 16}


def type_bits(t: str) -> int | None:
    t = t.lstrip(".")
    if t in _TYPE_BITS:
        return _TYPE_BITS[t]
    m = re.fullmatch(r"[bsuf](\d+)", t)
    return int(m.group(1)) if m else None


def parse_decl(d: str) -> tuple[str, str, list[str]]:
    """(state space, element type, declared names) of a declaration; ``name<N>`` gives
    name0 .. name<N-1>, ``A[256]`` gives A.  Separators (commas, ';') are not required."""
    body = d.rstrip().rstrip(";")
    toks = re.split(r"[\s,]+", body)
    space = toks[0].lstrip(".")
    types = [t for t in toks[1:] if t.startswith(".") and t != ".align"]
    etype = types[-1].lstrip(".") if types else ""
    names: list[str] = []
    skip = False
    for t in toks[1:]:
        if skip:
            skip = False
            continue
        if t == ".align":
            skip = True
            continue
        if not t or t.startswith("."):
            continue
        m = re.fullmatch(r"(%?[A-Za-z_]\w*?)<(\d+)>", t)
        if m:
            names += [f"{m.group(1)}{i}" for i in range(int(m.group(2)))]
            continue
        m = re.fullmatch(r"(%?[A-Za-z_]\w*)(\[\d*\])?", t)
        if m:
            names.append(m.group(1))
    return space, etype, names


def repair(d: str) -> str:
    """A declaration with only its punctuation fixed: commas between the names, a final ';'."""
    body = d.strip().rstrip(";").strip()
    m = re.match(r"^(\.\w+(?:\s+(?:\.\w+|\d+))*)\s+(.*)$", body)
    if not m:
        return body + ";"
    names = [x for x in re.split(r"[\s,]+", m.group(2)) if x]
    return f"{m.group(1)} {', '.join(names)};"


def declared(decls: Iterable[str]) -> dict[str, tuple[str, str]]:
    """name -> (state space, element type) over the declarations."""
    out: dict[str, tuple[str, str]] = {}
    for d in decls:
        space, et, names = parse_decl(d)
        for n in names:
            out[n] = (space, et)
    return out


# ---------------------------------------------------------------------------------------------
# the instruction's operands

def _vectors(operands: str) -> list[list[str]]:
    out, depth, cur = [], 0, ""
    for ch in operands:
        if ch == "{":
            depth, cur = depth + 1, ""
        elif ch == "}":
            depth -= 1
            out.append([x.strip() for x in cur.split(",") if x.strip()])
        elif depth:
            cur += ch
    return out


def _split(ex: Example) -> tuple[str, str]:
    m = _INSN.match(ex.instruction.replace("\n", " "))
    return (m.group(1), m.group(2)) if m else (ex.instruction.split()[0], "")


def used_names(ex: Example) -> list[str]:
    """Every register-like name the instruction's operands use, in order."""
    _, ops = _split(ex)
    return [n for n in _NAME.findall(ops) if not re.fullmatch(r"0x[0-9a-fA-F]+", n)]


def context_names(ex: Example) -> dict[str, str]:
    """Names the example uses as the address (``[ptr]``) or the stride after it and declares
    nowhere: the reader's own pointer and stride, supplied as registers."""
    _, ops = _split(ex)
    decl = declared(ex.declarations)
    out: dict[str, str] = {}
    for m in re.finditer(r"\[\s*(%?[A-Za-z_]\w*)\s*\]", ops):
        if m.group(1) not in decl:
            out[m.group(1)] = "b64"
    m = re.search(r"\]\s*,\s*(%?[A-Za-z_]\w*)\s*$", ops.strip())
    if m and m.group(1) not in decl:
        out[m.group(1)] = "u32"
    return out


def is_elided(ex: Example) -> bool:
    return "..." in _split(ex)[1]


def diagnose(ex: Example) -> list[str]:
    """The example against the text's own rules, without ptxas: elisions, undeclared
    registers, a vector holding another operand's registers, register counts and register
    types (the type the fragment description names, or .bN of the same width)."""
    faults: list[str] = []
    if is_elided(ex):
        faults.append("operands elided with '...'")
    decl = declared(ex.declarations)
    ctx = context_names(ex)
    undeclared = [n for n in dict.fromkeys(used_names(ex)) if n not in decl and n not in ctx]
    if undeclared:
        faults.append("undeclared: " + ", ".join(undeclared))
    form, _ = parse_instruction(ex.instruction.replace("\n", " "), strict=False)
    _, ops = _split(ex)
    vecs = _vectors(ops)
    names = ["r"] if form.family in ("wmma.load", "wmma.store") else ["d", "a", "b", "c"]
    base = {}
    for name, vec in zip(names, vecs):
        base[name] = {re.sub(r"\d+$", "", r) for r in vec}
    for name, vec in zip(names, vecs):
        if any("..." in r for r in vec):
            continue
        op = form.operands[name]
        if len(vec) != op.count:
            faults.append(f"operand {name}: {len(vec)} registers, the fragment has {op.count}")
        for other, bs in base.items():
            if other != name and len(names) > 1:
                foreign = [r for r in vec if re.sub(r"\d+$", "", r) in bs
                           and re.sub(r"\d+$", "", r) not in {re.sub(r"\d+$", "", x) for x in vec[:1]}]
                if foreign:
                    faults.append(f"operand {name} holds {', '.join(foreign)} (registers of {other})")
        want, bits = op.ptx_type, op.reg_bits
        bad = sorted({(r, decl[r][1]) for r in vec if r in decl and not _compatible(decl[r][1], want, bits)})
        if bad:
            types = sorted({t for _, t in bad})
            faults.append(f"operand {name}: registers declared .{'/.'.join(types)}, the fragment is .{want} "
                          f"({bits}-bit) registers")
    return faults


def _compatible(declared_type: str, want: str, bits: int) -> bool:
    """The text names the fragment's register type; a bit-size type of the same width is
    compatible with any type of that width."""
    if declared_type == want:
        return True
    return declared_type.startswith("b") and type_bits(declared_type) == bits


# ---------------------------------------------------------------------------------------------
# modules and verdicts

def documented_target(form) -> tuple[str, str]:
    """The target and PTX ISA version the text documents for a form: the a-target of an arch
    rule, the first listed target, else sm_<highest 'sm' floor>; PTX = the highest 'introduced
    in' version, at least the target's own."""
    from . import min_ptx, requirements, _pv

    reqs = requirements(form)
    arch = [r["arch"] for r in reqs if "arch" in r]
    listed = [r["targets"][0] for r in reqs if "targets" in r]
    if arch:
        target = arch[0]
    elif listed:
        target = listed[0]
    else:
        target = f"sm_{max(int(r['sm']) for r in reqs if 'sm' in r)}"
    ptx = max([min_ptx(form), parse_target(target).ptx], key=_pv)
    return target, ptx


def module(ex: Example, target: str, ptx: str, repaired: bool = False) -> str:
    """The complete module for an example: header, module-scope declarations, one kernel with
    the context registers, the example's own .reg declarations and the instruction."""
    decls = [repair(d) if repaired else d for d in ex.declarations]
    top = [d for d in decls if parse_decl(d)[0] in ("global", "const")]
    body = [d for d in decls if d not in top]
    lines = [f".version {ptx}", f".target {target}", ".address_size 64", ""]
    lines += top + ([""] if top else [])
    lines += [".visible .entry example()", "{"]
    lines += [f"  .reg .{t} {n};  // context: not declared by the example" for n, t in context_names(ex).items()]
    lines += [f"  {d}" for d in body]
    lines += [f"  {ln}" for ln in ex.instruction.splitlines()]
    lines += ["  ret;", "}", ""]
    return "\n".join(lines)


@dataclass
class Verdict:
    ptxas: str
    target: str
    ptx: str
    accepted: bool
    messages: list[str]


def assemble_module(text: str, target: str, px: P.Ptxas) -> tuple[bool, list[str]]:
    rc, out = P._run_module(px.path, text, P.arch_for(target))
    per_line, other = P._parse_messages(out)
    msgs = [f"line {n}: {sev}: {m}" for n, ms in sorted(per_line.items()) for sev, m in ms if sev in ("error", "fatal")]
    msgs += [f"{sev}: {m}" for sev, m in other if sev in ("error", "fatal")]
    return rc == 0, msgs


def check(ex: Example, pxs: list[P.Ptxas]) -> dict:
    """The recorded record of one example: module, diagnosis, verdicts (as documented, repaired,
    at each ptxas's newest PTX ISA version) and the category."""
    form, _ = parse_instruction(ex.instruction.replace("\n", " "), strict=False)
    target, ptx = documented_target(form)
    rec = dict(asdict(ex), target=target, ptx=ptx, form=form.opcode, diagnosis=diagnose(ex),
               context=context_names(ex), module=module(ex, target, ptx), verdicts=[], repaired=[], newest=[])
    for px in pxs:
        if P._pv(ptx) > P._pv(px.max_ptx):
            continue
        ok, msgs = assemble_module(rec["module"], target, px)
        rec["verdicts"].append(asdict(Verdict(px.version, target, ptx, ok, msgs)))
        if not ok:
            ok2, msgs2 = assemble_module(module(ex, target, ptx, repaired=True), target, px)
            rec["repaired"].append(asdict(Verdict(px.version, target, ptx, ok2, msgs2)))
        ok3, msgs3 = assemble_module(module(ex, target, px.max_ptx), target, px)
        rec["newest"].append(asdict(Verdict(px.version, target, px.max_ptx, ok3, msgs3)))
    rec["category"] = category(rec)
    return rec


def category(rec: dict) -> str:
    """ok | punctuation | substantive | elided, from the verdicts of every ptxas (they must agree)."""
    if any("elided" in f for f in rec["diagnosis"]):
        return "elided"
    if all(v["accepted"] for v in rec["verdicts"]):
        return "ok"
    if rec["repaired"] and all(v["accepted"] for v in rec["repaired"]):
        return "punctuation"
    return "substantive"


def record(seeds: str | None = None, pxs: list[P.Ptxas] | None = None) -> dict:
    pxs = pxs if pxs is not None else P.installations()
    exs = all_examples(seed_files(seeds))
    return {"kind": "ptx-formal: the PTX text's examples assembled as written",
            "ptx_isa": "9.1",
            "ptxas": [p.version for p in pxs],
            "examples": [check(ex, pxs) for ex in exs]}


def markdown(rec: dict) -> str:
    from collections import Counter

    exs = rec["examples"]
    cnt = Counter(e["category"] for e in exs)
    L = ["# The PTX text's own examples, assembled as written", "",
         "Generated by `python3 -m formal.catalog.examples --write proofs/seed-examples` (`formal/catalog/examples.py`); "
         "do not edit. Every `mma` / `mma.sp` / `wmma` example of the PTX ISA 9.1 text (the seeds) in a module of its "
         "own with the declarations it writes, assembled by ptxas " + " and ".join(rec["ptxas"]) + " at the target and "
         "PTX ISA version the text documents for the form. A rejected example is assembled again with only the "
         "punctuation of its declarations repaired: `punctuation` if it is accepted then, else `substantive`; "
         "`elided` examples write `...` for operands. The diagnosis is the project's own reading of the example "
         "against the text's fragment rules, independent of ptxas.", "",
         f"{len(exs)} examples: {cnt['ok']} ok, {cnt['substantive']} substantive failures, "
         f"{cnt['punctuation']} punctuation only, {cnt['elided']} elided.", "",
         "| id | seed:line | section | category | erratum | instruction | diagnosis | ptxas (as documented) |",
         "|---|---|---|---|---|---|---|---|"]
    for e in exs:
        v = e["verdicts"][0] if e["verdicts"] else None
        msg = "accepted" if v and v["accepted"] else ("; ".join(v["messages"][:2]) if v else "not run")
        L.append(f"| {e['id']} | {e['seed'][:3]}:{e['line']} | {e['section']} | {e['category']} | "
                 f"{e.get('erratum') or ''} | `{' '.join(e['instruction'].split())[:90]}` | "
                 f"{'; '.join(e['diagnosis']) or '-'} | {msg.replace('|', '/')} |")
    L.append("")
    for e in exs:
        if e["category"] in ("substantive", "punctuation"):
            L += [f"## {e['id']} ({e['category']}; {e.get('erratum') or 'no erratum'})", "",
                  "```ptx", e["module"].rstrip(), "```", ""]
            for v in e["verdicts"]:
                L.append(f"- ptxas {v['ptxas']}, {v['target']}, PTX {v['ptx']}: "
                         + ("accepted" if v["accepted"] else "rejected: " + "; ".join(v["messages"])))
            for v in e["repaired"]:
                L.append(f"- punctuation repaired, ptxas {v['ptxas']}: "
                         + ("accepted" if v["accepted"] else "rejected: " + "; ".join(v["messages"])))
            L.append("")
    return "\n".join(L).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", metavar="STEM", required=True, help="write STEM.json and STEM.md")
    ap.add_argument("--seeds", default=None)
    a = ap.parse_args(argv)
    rec = record(a.seeds)
    attach_errata(rec)
    with open(a.write + ".json", "w") as f:
        json.dump(rec, f, indent=1)
        f.write("\n")
    with open(a.write + ".md", "w") as f:
        f.write(markdown(rec))
    return 0


def attach_errata(rec: dict) -> None:
    """Each example's erratum: the erratum whose ``examples`` list names the example."""
    from ..specdata import load_spec

    by_ex: dict[str, str] = {}
    for name in ("errata", "errata_examples"):
        for e in load_spec(name).get("erratum", []):
            for x in e.get("examples", []):
                by_ex.setdefault(x, e["id"])
    for e in rec["examples"]:
        e["erratum"] = by_ex.get(e["id"])


if __name__ == "__main__":
    raise SystemExit(main())
