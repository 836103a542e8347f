"""Upstream-ready reports: one self-contained text per strong erratum, in the form a vendor's
bug tracker takes -- what the text says (quoted, versioned), what ptxas or the silicon does, a
minimal reproducer (a complete .ptx module, the ptxas command and its recorded output; for
silicon the inputs and the observed outputs of the recorded evidence), the expected behaviour,
the severity and who is affected.

Strong: an erratum of the project's own lists (not a reading, not a peer's) with a reproducer
NVIDIA's tools can run -- ptxas evidence (specs/errata.toml), one of the text's own examples
(proofs/seed-examples.json), or a silicon witness naming an instruction.
``ptx-formal errata --report ID`` prints one, ``--report all --out DIR`` writes them all;
tests/test_errata_reports.py assembles every reproducer with the ptxas release it names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from . import catalog as cat
from .catalog import ptxas as P
from .catalog import text as T
from .errata import SEVERITY_LABEL, Erratum, all_errata, cite, seed_examples


@dataclass
class Repro:
    module: str                  # a complete .ptx module
    target: str
    ptx: str
    ptxas: str                   # the ptxas version whose verdict is recorded
    accepted: bool               # the recorded verdict
    messages: list[str]          # ptxas's recorded messages ("" list = accepted silently)
    what: str                    # one line: what the module contains


def _evidence_records(e: Erratum) -> list[dict]:
    ev = e.raw.get("evidence")
    return [x for x in ev if isinstance(x, dict)] if isinstance(ev, list) else []


def _witness_form(e: Erratum) -> tuple[cat.Form, dict] | None:
    w = e.witness or {}
    ptx = w.get("ptx", "")
    if not ptx:
        return None
    try:
        return cat.parse_instruction(ptx, strict=False)
    except Exception:       # a witness line with placeholder operands ("d, a, b, c"): the opcode alone
        try:
            return cat.parse(ptx.split()[0]), {}
        except cat.MalformedOpcode:
            return None


def is_strong(e: Erratum) -> bool:
    if e.is_reading or e.is_peer:
        return False
    if _evidence_records(e) or e.examples:
        return True
    return _witness_form(e) is not None


def strong_errata() -> list[Erratum]:
    return [e for e in all_errata() if is_strong(e)]


# ---------------------------------------------------------------------------------------------
# reproducers

def _primary(e: Erratum) -> dict:
    """The evidence line that shows the defect: an acceptance for ptxas-accepts, a rejection
    for ptxas-rejects, else the first line."""
    recs = _evidence_records(e)
    want = {"ptxas-accepts": True, "ptxas-rejects": False}.get(e.kind)
    for x in recs:
        if want is None or x["accepted"] == want:
            return x
    return recs[0]


def _ptxas_repro(e: Erratum) -> Repro:
    x = _primary(e)
    text, _ = P.module_text([x["instruction"]], x["target"], x["ptx"])
    return Repro(text, x["target"], x["ptx"], x["ptxas"], x["accepted"],
                 [x["message"]] if x["message"] else [], "the instruction of the evidence line, in a kernel of its own")


def _example_repro(e: Erratum) -> Repro | None:
    for xid in e.examples:
        x = seed_examples().get(xid)
        if x and x["verdicts"]:
            v = x["verdicts"][0]
            return Repro(x["module"], v["target"], v["ptx"], v["ptxas"], v["accepted"], v["messages"],
                         f"example {xid} of the text ({x['seed']} line {x['line']}) with the declarations it writes, "
                         "as written")
    return None


def _mma_kernel(form: cat.Form, imm: T.Immediates) -> list[str]:
    """One warp: lane L loads its registers of a, b, c (and e) from in + L * (bytes per lane),
    executes the instruction, stores d to out + L * (bytes of d)."""
    regs = T.reg_names(form)
    ins = [n for n in ("a", "b", "c", "e") if n in form.operands]
    width = {n: (8 if form.operands[n].reg_bits == 64 else 4) for n in list(ins) + ["d"]}
    per_lane = sum(width[n] * len(regs[n]) for n in ins)
    out_lane = width["d"] * len(regs["d"])
    L = [".visible .entry repro(.param .u64 p_in, .param .u64 p_out)", "{",
         "  .reg .b32 %lane;", "  .reg .b64 %pin, %pout, %off;"]
    L += ["  " + d for d in T.declarations(form, with_address=False)]
    L += ["  ld.param.u64 %pin, [p_in];", "  ld.param.u64 %pout, [p_out];",
          "  cvta.to.global.u64 %pin, %pin;", "  cvta.to.global.u64 %pout, %pout;",
          "  mov.u32 %lane, %laneid;",
          f"  mul.wide.u32 %off, %lane, {per_lane};", "  add.u64 %pin, %pin, %off;",
          f"  mul.wide.u32 %off, %lane, {out_lane};", "  add.u64 %pout, %pout, %off;"]
    pos = 0
    for n in ins:
        for r in regs[n]:
            L.append(f"  ld.global.b{8 * width[n]} {r}, [%pin+{pos}];")
            pos += width[n]
    L.append("  " + T.instruction(form, imm))
    for i, r in enumerate(regs["d"]):
        L.append(f"  st.global.b{8 * width['d']} [%pout+{i * width['d']}], {r};")
    L += ["  ret;", "}"]
    return L


def _wmma_kernel(form: cat.Form, stride: int | None, offset: int) -> list[str]:
    """A wmma.load of the witness: base = a 256-byte aligned buffer (.shared for .shared forms,
    else the kernel's global argument) + offset, the stride as an immediate; the fragment is
    stored to out per lane."""
    regs = T.reg_names(form)
    frag = regs["r"]
    w = 8 if form.operands["r"].reg_bits == 64 else 4
    shared = (form.space or "").startswith("shared")
    L = []
    if shared:
        L.append(".shared .align 256 .b8 tile[8192];")
    L += [".visible .entry repro(.param .u64 p_base, .param .u64 p_out)", "{",
          "  .reg .b32 %lane;", "  .reg .b64 %pout, %off;"]
    L += ["  " + d for d in T.declarations(form, with_address=True) if "%rs" not in d]
    if shared:
        L.append(f"  mov.u64 %rp, tile;")
    else:
        L += ["  ld.param.u64 %rp, [p_base];", "  cvta.to.global.u64 %rp, %rp;" if form.space == "global" else ""]
    if offset:
        L.append(f"  add.u64 %rp, %rp, {offset};")
    line = T.instruction(form, T.Immediates())
    if stride is not None:
        line = line.rstrip(";") + f", {stride};"
    L.append("  " + line)
    L += ["  ld.param.u64 %pout, [p_out];", "  cvta.to.global.u64 %pout, %pout;",
          "  mov.u32 %lane, %laneid;", f"  mul.wide.u32 %off, %lane, {w * len(frag)};",
          "  add.u64 %pout, %pout, %off;"]
    L += [f"  st.global.b{8 * w} [%pout+{i * w}], {r};" for i, r in enumerate(frag)]
    L += ["  ret;", "}"]
    return [x for x in L if x]


SILICON_TARGET = "sm_90a"       # the H100 runs' -arch (proofs/evidence: ptxas 13.0 -arch=sm_90a)


def _silicon_repro(e: Erratum) -> Repro | None:
    got = _witness_form(e)
    if got is None:
        return None
    form, imm = got
    ptx = max([cat.min_ptx(form), "8.0"], key=cat._pv)
    w = e.witness or {}
    if form.family == "wmma.load":
        m = re.search(r"\],\s*(\d+)\s*;", w.get("ptx", ""))
        stride = int(m.group(1)) if m else None
        mo = re.search(r"base (\d+) bytes past|base offset (\d+)", w.get("inputs", ""))
        offset = int(next(g for g in mo.groups() if g)) if mo else 0
        body = _wmma_kernel(form, stride, offset)
        what = (f"the wmma.load of the witness: base = a 256-byte aligned {'.shared' if (form.space or '').startswith('shared') else 'global'} "
                f"buffer + {offset} bytes" + (f", stride {stride}" if stride is not None else "") + "; lane L stores its fragment to "
                "out + L * (fragment bytes)")
    else:
        sel = imm.get("sel", 0) if form.is_sparse else 0
        body = _mma_kernel(form, T.Immediates(sel=sel))
        what = ("one warp: lane L reads its a, b, c" + (", e" if form.is_sparse else "") + " registers in that order "
                "(32-bit words; 64-bit for .f64) from in + L * (bytes per lane), runs the instruction of the witness, "
                "and writes its d registers to out + L * (bytes of d); the matrix elements of the inputs below go "
                "where the text's fragment layouts put them (`ptx-formal layout " + form.opcode + " --operand a --by lane` "
                "prints each lane's registers)")
    module = T.header(SILICON_TARGET, ptx) + "\n".join(body) + "\n"
    return Repro(module, SILICON_TARGET, ptx, "13.0.88", True, [], what)


def fixes(e: Erratum) -> list[tuple[str, Repro]]:
    """The entry's corrected examples (``fix.Xnn`` = replacement declarations and, where the
    instruction itself is wrong, the instruction), each as a module at the example's target
    and PTX ISA version; the text's examples corrected must assemble (tests check it)."""
    from dataclasses import replace

    from .catalog.examples import Example, module

    out = []
    for xid, fx in sorted((e.raw.get("fix") or {}).items()):
        x = seed_examples().get(xid)
        if not x:
            continue
        ex = Example(x["id"], x["seed"], x["line"], x["section"], x["instruction"], list(x["declarations"]))
        ex = replace(ex, declarations=list(fx["declarations"]), instruction=fx.get("instruction", ex.instruction))
        v = x["verdicts"][0]
        out.append((xid, Repro(module(ex, v["target"], v["ptx"]), v["target"], v["ptx"], v["ptxas"], True, [],
                               f"example {xid} corrected")))
    return out


def reproducer(e: Erratum) -> Repro | None:
    if e.examples:
        r = _example_repro(e)
        if r:
            return r
    if _evidence_records(e):
        return _ptxas_repro(e)
    return _silicon_repro(e)


# ---------------------------------------------------------------------------------------------
# the report

_COMPONENT = {"ptxas/text": "ptxas and the PTX ISA document", "text examples": "the PTX ISA document (its examples)",
              "silicon": "the GPU (H100, sm_90) and the PTX ISA document", "wmma memory": "the GPU (H100, sm_90), ptxas "
              "code generation and the PTX ISA document", "layout text": "the PTX ISA document"}


def _affects(e: Erratum) -> str:
    raw = e.raw
    if raw.get("affects"):
        return " ".join(str(raw["affects"]).split())
    if e.kind == "ptxas-accepts":
        return ("anyone whose PTX uses these spellings on these targets: ptxas assembles them without a diagnostic "
                "although the text does not allow them")
    if e.kind == "ptxas-rejects":
        return "anyone who writes these forms as the text documents them: ptxas refuses them"
    if e.source == "text examples" or e.examples:
        return "readers who copy the example: it does not assemble as written"
    if e.source in ("silicon", "wmma memory"):
        return ("compilers, libraries and simulators that model this instruction on sm_90 from the text alone, "
                "and programs that rely on the behaviour the text leaves open")
    return "readers of the PTX ISA text"


def _verdict(accepted: bool, messages: list[str]) -> str:
    return "accepted (exit status 0, no message)" if accepted else "rejected: " + "; ".join(messages)


def report(e: Erratum) -> str:
    """The report for one erratum, as text (markdown)."""
    r = reproducer(e)
    sev = SEVERITY_LABEL.get(e.severity, e.severity)
    title = _title(e)
    L = [f"# [PTX ISA {e.citations[0]['ptx_isa'] if e.citations and e.citations[0]['ptx_isa'] else '9.1'}] {title}", "",
         f"- erratum: {e.id} (ptx-formal, {e.file})",
         f"- component: {_COMPONENT.get(e.source, e.source)}",
         f"- severity: {sev}",
         *([f"- why this severity: {e.tier.split(': ', 1)[-1]}"] if e.tier else []),
         f"- sections: " + "; ".join(cite(c) for c in e.citations), ""]
    L += ["## What the PTX ISA text says", ""]
    if e.text:
        how = e.text_is or "verbatim"
        L += [f"PTX ISA {e.citations[0]['ptx_isa'] or '9.1'}, section {e.citations[0]['section'] if e.citations else ''}, {how}:", "",
              "> " + " ".join(e.text.split()), ""]
    else:
        L += ["(no sentence of the text decides this case; see the sections above)", ""]
    L += ["## What happens", "", e.summary, ""]
    for x in e.evidence:
        L.append(f"- {x}")
    L.append("")
    if r:
        L += ["## Reproducer", "", r.what + ":", "", "~~~ptx", r.module.rstrip(), "~~~", "",
              f"`ptxas -arch={P.arch_for(r.target)} repro.ptx -o repro.cubin` with ptxas {r.ptxas}: "
              + _verdict(r.accepted, r.messages), ""]
    for xid, fx in fixes(e)[:1]:
        L += ["## The example corrected", "", "~~~ptx", fx.module.rstrip(), "~~~", "",
              f"`ptxas -arch={P.arch_for(fx.target)} fixed.ptx -o fixed.cubin` with ptxas {fx.ptxas}: "
              + _verdict(True, []), ""]
    if e.witness:
        w = e.witness
        L += ["## Inputs and observed outputs (recorded evidence)", "",
              f"- instruction: `{w.get('ptx', '')}`", f"- inputs: {w.get('inputs', '')}",
              f"- observed: {w.get('observed', '')}"]
        if w.get("expected"):
            L.append(f"- expected instead: {w['expected']}")
        if w.get("source"):
            L.append(f"- recorded in: {w['source']}")
        L.append("")
    L += ["## Expected", "", _expected(e), "",
          "## Severity and who is affected", "", f"{sev}" + (f" ({e.tier.split(': ', 1)[-1]})" if e.tier else "") + ".", "",
          "Affects: " + _affects(e) + ".", "",
          "## Environment", "", _environment(e, r), ""]
    return "\n".join(L)


def _title(e: Erratum) -> str:
    """The entry's title, else the first sentence of the summary, cut at a word boundary."""
    if e.raw.get("title"):
        return str(e.raw["title"])
    first = re.split(r"(?<=[a-z0-9)'])[.;] ", e.summary)[0]
    if len(first) <= 120:
        return first
    return first[:117].rsplit(" ", 1)[0] + " ..."


def _expected(e: Erratum) -> str:
    if e.witness and e.witness.get("expected"):
        return e.witness["expected"]
    if e.kind == "ptxas-accepts":
        return ("ptxas rejects what the text does not allow (as it does for the neighbouring forms in the evidence), "
                "or the text documents what ptxas accepts. ptx-formal's reading: " + e.resolution)
    if e.kind == "ptxas-rejects":
        return "ptxas accepts what the text documents, or the text stops documenting it. ptx-formal's reading: " + e.resolution
    if e.examples:
        return "examples that assemble as written (each corrected example of the entry assembles). " + e.resolution
    return "the text corrected so that it is consistent with itself and with ptxas. ptx-formal's reading: " + e.resolution


def _environment(e: Erratum, r: Repro | None) -> str:
    vs = sorted({x["ptxas"] for x in _evidence_records(e)} | ({r.ptxas} if r else set())
                | {v["ptxas"] for xid in e.examples for v in (seed_examples().get(xid) or {}).get("verdicts", [])})
    s = "ptxas " + ", ".join(f"{v} (CUDA {'.'.join(v.split('.')[:2])})" for v in vs) if vs else ""
    if e.source in ("silicon", "wmma memory"):
        s += ("; NVIDIA H100 80GB HBM3, driver 580.159.04 (CUDA 13.0), CUDA runtime 13.2, kernels assembled by "
              "ptxas 13.0 -arch=sm_90a (the runs of proofs/evidence/ and specs/observed/)")
    return s or "the PTX ISA 9.1 text"


def write_all(out_dir: str) -> list[str]:
    import os

    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for e in strong_errata():
        p = os.path.join(out_dir, f"{e.id}.md")
        with open(p, "w") as f:
            f.write(report(e))
        paths.append(p)
    return paths
