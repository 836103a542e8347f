"""PTX kernels that run one register-level mma / mma.sp form per warp.

Each kernel reads every lane's operand registers from global memory, executes the
instruction exactly as ``formal.catalog.text.instruction`` prints it, and writes the
destination registers back.  Warp ``w`` of the grid handles inputs ``w``; arrays are
laid out ``[W, 32, nregs]`` per operand, 32-bit operands in one ``uint32`` buffer and
64-bit operands in one ``uint64`` buffer, each operand at its own word offset.

Parameters: ``(u64 in32, u64 in64, u64 out32, u64 out64, u32 nwarps)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..catalog import Form
from ..catalog.text import Immediates, declarations, header, instruction, reg_names


@dataclass
class Case:
    """One kernel: a form and its immediates."""

    form: Form
    imm: Immediates = field(default_factory=Immediates)

    @property
    def key(self) -> str:
        s = self.form.opcode
        if self.form.is_sparse:
            s += f" sel={self.imm.sel}"
        return s


def operand_layout(form: Form) -> dict[str, tuple[str, int, int]]:
    """operand -> (buffer '32'/'64', word offset per warp-row, registers); offsets are
    per warp in units of the buffer's word and are multiplied by W at run time."""
    out: dict[str, tuple[str, int, int]] = {}
    off = {"32": 0, "64": 0}
    for name in ("a", "b", "c", "e"):
        if name not in form.operands:
            continue
        op = form.operands[name]
        buf = "64" if op.reg_bits == 64 else "32"
        out[name] = (buf, off[buf], op.count)
        off[buf] += 32 * op.count
    dop = form.operands["d"]
    out["d"] = ("64" if dop.reg_bits == 64 else "32", 0, dop.count)
    return out


def words_per_warp(form: Form) -> tuple[int, int, int, int]:
    """(in32, in64, out32, out64) words per warp."""
    lay = operand_layout(form)
    i32 = sum(32 * n for k, (b, _, n) in lay.items() if k != "d" and b == "32")
    i64 = sum(32 * n for k, (b, _, n) in lay.items() if k != "d" and b == "64")
    b, _, n = lay["d"]
    return i32, i64, (32 * n if b == "32" else 0), (32 * n if b == "64" else 0)


def kernel_source(case: Case, name: str) -> str:
    form = case.form
    regs = reg_names(form)
    lay = operand_layout(form)
    i32, i64, o32, o64 = words_per_warp(form)
    L = [f".visible .entry {name}(.param .u64 in32, .param .u64 in64, .param .u64 out32, .param .u64 out64, .param .u32 nwarps)",
         "{",
         "  .reg .b32 %t<6>;",
         "  .reg .b64 %q<12>;",
         "  .reg .pred %pexit;"]
    L += ["  " + d for d in declarations(form, with_address=False)]
    L += [
        "  mov.u32 %t0, %ctaid.x;",
        "  mov.u32 %t1, %ntid.x;",
        "  mov.u32 %t2, %tid.x;",
        "  mad.lo.u32 %t3, %t0, %t1, %t2;",      # global thread id
        "  shr.u32 %t4, %t3, 5;",                 # warp index (uniform in the warp)
        "  ld.param.u32 %t5, [nwarps];",
        "  setp.ge.u32 %pexit, %t4, %t5;",
        "  @%pexit bra DONE;",
        "  cvt.u64.u32 %q0, %t3;",                # (w*32 + lane)
        "  cvt.u64.u32 %q1, %t5;",                # W
        "  ld.param.u64 %q2, [in32];",
        "  ld.param.u64 %q3, [in64];",
        "  ld.param.u64 %q4, [out32];",
        "  ld.param.u64 %q5, [out64];",
        "  cvta.to.global.u64 %q2, %q2;",
        "  cvta.to.global.u64 %q3, %q3;",
        "  cvta.to.global.u64 %q4, %q4;",
        "  cvta.to.global.u64 %q5, %q5;",
    ]

    def addr(buf: str, base_words: int, n: int, dst: str, root: str) -> list[str]:
        wb = 8 if buf == "64" else 4
        # byte address = root + (base_words * W + (w*32+lane) * n) * wb
        return [f"  mul.lo.u64 %q6, %q1, {base_words * wb};",
                f"  mad.lo.u64 %q7, %q0, {n * wb}, %q6;",
                f"  add.u64 {dst}, {root}, %q7;"]

    for name in ("a", "b", "c", "e"):
        if name not in lay:
            continue
        buf, base, n = lay[name]
        root = "%q2" if buf == "32" else "%q3"
        L += addr(buf, base, n, "%q8", root)
        wb = 8 if buf == "64" else 4
        suf = "b64" if buf == "64" else "b32"
        for r, reg in enumerate(regs[name]):
            L.append(f"  ld.global.{suf} {reg}, [%q8+{r * wb}];")
    L.append("  " + instruction(form, case.imm))
    buf, base, n = lay["d"]
    root = "%q4" if buf == "32" else "%q5"
    L += addr(buf, 0, n, "%q9", root)
    wb = 8 if buf == "64" else 4
    suf = "b64" if buf == "64" else "b32"
    for r, reg in enumerate(regs["d"]):
        L.append(f"  st.global.{suf} [%q9+{r * wb}], {reg};")
    L += ["DONE:", "  ret;", "}"]
    return "\n".join(L) + "\n"


def module_source(cases: list[Case], target: str, ptx: str) -> tuple[str, list[str]]:
    """One PTX module with a kernel per case; returns (source, kernel names)."""
    names = [f"k{i}" for i in range(len(cases))]
    body = [header(target, ptx)] + [kernel_source(c, n) for c, n in zip(cases, names)]
    return "\n".join(body), names
