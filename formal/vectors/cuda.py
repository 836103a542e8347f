"""Fill the standalone CUDA harness template (``formal/hw/template/vectors_harness.cu``) for a form.

The template is a complete program for one default form; :func:`render` replaces the
block between ``// ===== BEGIN FORM =====`` and ``// ===== END FORM =====`` with the
opcode, register counts and one inline-asm statement per legal selector.  The
instruction text is ``formal.catalog.text.instruction`` (the same text the hardware harness and
the ptxas checks use), with ``%N`` operands for inline asm.
"""

from __future__ import annotations

import os

from ..catalog import Form, parse
from ..catalog.text import Immediates, instruction
from .build import VectorError

TEMPLATE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "hw", "template", "vectors_harness.cu")
BEGIN = "// ===== BEGIN FORM ====="
END = "// ===== END FORM ====="


def _asm(form: Form, sel: int) -> str:
    ops = form.operands
    wide = ops["d"].reg_bits == 64
    n = {k: ops[k].count for k in ("a", "b", "c", "d")}
    idx = 0
    regs: dict[str, list[str]] = {}
    for k in ("d", "a", "b", "c"):
        regs[k] = [f"%{idx + i}" for i in range(n[k])]
        idx += n[k]
    if form.is_sparse:
        regs["e"] = [f"%{idx}"]
    text = instruction(form, Immediates(sel=sel), regs=regs)
    if wide:   # .f64 operands: "d" constraints on doubles, bit-cast from the 64-bit words
        outs = ", ".join(f'"=d"(dd[{i}])' for i in range(n["d"]))
        ins = [f'"d"(__longlong_as_double((long long){k}[{i}]))' for k in ("a", "b", "c") for i in range(n[k])]
        body = (f"  double dd[{n['d']}];\n"
                f"  asm volatile(\"{text}\"\n               : {outs}\n               : {', '.join(ins)});\n"
                f"  for (int i = 0; i < {n['d']}; ++i) d[i] = (reg_t)__double_as_longlong(dd[i]);\n")
    else:
        outs = ", ".join(f'"=r"(d[{i}])' for i in range(n["d"]))
        ins = [f'"r"({k}[{i}])' for k in ("a", "b", "c") for i in range(n[k])]
        if form.is_sparse:
            ins.append('"r"(e)')
        body = f"  asm volatile(\"{text}\"\n               : {outs}\n               : {', '.join(ins)});\n"
    if not form.is_sparse:
        body = "  (void)e;\n" + body
    return (f"__device__ __forceinline__ void mma_sel{sel}(const reg_t* a, const reg_t* b, const reg_t* c, "
            f"reg_t* d, uint32_t e) {{\n{body}}}\n")


def form_block(form: Form) -> str:
    ops = form.operands
    sels = list(form.selectors) if form.is_sparse else [0]
    lines = [BEGIN,
             f'static const char* FORM_OPCODE = "{form.opcode}";',
             f"#define NA {ops['a'].count}", f"#define NB {ops['b'].count}", f"#define NC {ops['c'].count}",
             f"#define ND {ops['d'].count}", f"#define SPARSE {1 if form.is_sparse else 0}",
             f"typedef {'uint64_t' if ops['d'].reg_bits == 64 else 'uint32_t'} reg_t;",
             f"static const int SELECTORS[] = {{{', '.join(map(str, sels))}}};", ""]
    for s in sels:
        lines.append(_asm(form, s))
    lines.append("__device__ __forceinline__ void mma_dispatch(int sel, const reg_t* a, const reg_t* b, "
                 "const reg_t* c, reg_t* d, uint32_t e) {")
    if len(sels) == 1:
        lines += ["  (void)sel;", f"  mma_sel{sels[0]}(a, b, c, d, e);"]
    else:
        lines.append("  switch (sel) {")
        for s in sels:
            lines.append(f"    case {s}: mma_sel{s}(a, b, c, d, e); break;")
        lines.append("  }")
    lines += ["}", END]
    return "\n".join(lines)


def render(opcode) -> str:
    """The harness source for ``opcode`` (a register-level mma / mma.sp form)."""
    form = opcode if isinstance(opcode, Form) else parse(opcode)
    if form.family not in ("mma", "mma.sp") or form.block_scale:
        raise VectorError(f"{form.opcode}: the CUDA harness runs register-level mma / mma.sp forms "
                          "(wmma fragments are unspecified; block scaling needs scale operands; a wgmma needs a "
                          "warpgroup, descriptors and a shared-memory image: formal/hw/wgmma_probe.py)")
    with open(TEMPLATE) as fh:
        src = fh.read()
    i, j = src.index(BEGIN), src.index(END) + len(END)
    return src[:i] + form_block(form) + src[j:]
