"""PTX text for a form: register declarations and the instruction line.

Shared by the ptxas checks (``formal.catalog.ptxas``) and the hardware harness
(``formal.hw``), so that what is assembled is exactly what is run.

Registers are declared ``.b32`` (``.b64``/``.f64`` for 64-bit operands); ptxas accepts
untyped 32-bit registers for f16x2/f32/s32 fragments, which keeps the generated kernels
uniform.  Names: ``%ra0..`` for operand a, ``%rb*``, ``%rc*``, ``%rd*``, ``%re`` (sparse
metadata), ``%rsa``/``%rsb`` (block-scale data), ``%rr*`` (wmma.load/.store fragment),
``%rp`` (address), ``%rs`` (stride).
"""

from __future__ import annotations

from dataclasses import dataclass

from . import Form, Operand

_PREFIX = {"a": "ra", "b": "rb", "c": "rc", "d": "rd", "e": "re", "scale_a": "rsa", "scale_b": "rsb", "r": "rr"}


def reg_type(op: Operand) -> str:
    if op.reg_bits == 64:
        return "f64" if op.ptx_type == "f64" else "b64"
    return "b32"


def reg_names(form: Form) -> dict[str, list[str]]:
    out = {}
    for name, op in form.operands.items():
        p = _PREFIX[name]
        out[name] = [f"%{p}{i}" for i in range(op.count)] if op.count > 1 or name in ("a", "b", "c", "d", "r") else [f"%{p}"]
    return out


def declarations(form: Form, with_address: bool = True) -> list[str]:
    lines = []
    for name, op in form.operands.items():
        p = _PREFIX[name]
        if name in ("e", "scale_a", "scale_b"):
            lines.append(f".reg .{reg_type(op)} %{p};")
        else:
            lines.append(f".reg .{reg_type(op)} %{p}<{op.count}>;")
    if form.is_wmma and form.family != "wmma.mma" and with_address:
        lines.append(".reg .b64 %rp;")
        lines.append(".reg .b32 %rs;")
    return lines


def _vec(regs: list[str]) -> str:
    return "{" + ", ".join(regs) + "}"


@dataclass
class Immediates:
    sel: int = 0
    scale_a: tuple[int, int] = (0, 0)
    scale_b: tuple[int, int] = (0, 0)
    stride: bool = False          # wmma.load/.store: pass the %rs stride operand


def instruction(form: Form, imm: Immediates | None = None, regs: dict[str, list[str]] | None = None,
                address: str = "%rp", stride: str = "%rs") -> str:
    """The instruction line (with trailing ';') for ``form``."""
    imm = imm or Immediates()
    regs = regs or reg_names(form)
    op = form.opcode
    if form.family in ("mma", "mma.sp"):
        parts = [_vec(regs["d"]), _vec(regs["a"]), _vec(regs["b"]), _vec(regs["c"])]
        if form.is_sparse:
            parts += [regs["e"][0], str(imm.sel)]
        if form.block_scale:
            parts += [regs["scale_a"][0], "{%d, %d}" % imm.scale_a, regs["scale_b"][0], "{%d, %d}" % imm.scale_b]
        return f"{op} {', '.join(parts)};"
    if form.family == "wmma.mma":
        return f"{op} {_vec(regs['d'])}, {_vec(regs['a'])}, {_vec(regs['b'])}, {_vec(regs['c'])};"
    s = f", {stride}" if imm.stride else ""
    if form.family == "wmma.load":
        return f"{op} {_vec(regs['r'])}, [{address}]{s};"
    return f"{op} [{address}], {_vec(regs['r'])}{s};"


def header(target: str, ptx: str) -> str:
    return f".version {ptx}\n.target {target}\n.address_size 64\n"


def check_kernel(form: Form, name: str = "k", imm: Immediates | None = None) -> str:
    """A minimal kernel containing just this instruction (for assembler checks)."""
    body = declarations(form) + [instruction(form, imm)]
    return f".visible .entry {name}()\n{{\n" + "\n".join("  " + b for b in body) + "\n  ret;\n}\n"
