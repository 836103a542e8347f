"""PTX text for a form: register declarations and the instruction line.

Shared by the ptxas checks (``formal.catalog.ptxas``) and the hardware harness
(``formal.hw``), so that what is assembled is exactly what is run.

Registers are declared ``.b32`` (``.b64``/``.f64`` for 64-bit operands); ptxas accepts
untyped 32-bit registers for f16x2/f32/s32 fragments, which keeps the generated kernels
uniform.  Names: ``%ra0..`` for operand a, ``%rb*``, ``%rc*``, ``%rd*``, ``%re`` (sparse
metadata), ``%rsa``/``%rsb`` (block-scale data), ``%rr*`` (wmma.load/.store fragment),
``%rp`` (address), ``%rs`` (stride), ``%rad``/``%rbd`` (wgmma matrix descriptors, .b64).

wgmma lines take their immediates from :class:`Immediates` (``wg``: scale-d, imm-scale-a/b,
imm-trans-a/b by the keys of :func:`formal.catalog.parse_instruction`; defaults 1, 1, 1, 0, 0)
and A from registers or a descriptor as the form's ``asource`` says (a descriptor when open).
"""

from __future__ import annotations

from dataclasses import dataclass

from . import Form, Operand

_PREFIX = {"a": "ra", "b": "rb", "c": "rc", "d": "rd", "e": "re", "scale_a": "rsa", "scale_b": "rsb", "r": "rr",
           "a_desc": "rad", "b_desc": "rbd"}


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
        if name in ("e", "scale_a", "scale_b", "a_desc", "b_desc"):
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
    wg: dict | None = None        # wgmma: scale_d, imm_scale_a, imm_scale_b, imm_trans_a, imm_trans_b; n (wait_group)


def instruction(form: Form, imm: Immediates | None = None, regs: dict[str, list[str]] | None = None,
                address: str = "%rp", stride: str = "%rs") -> str:
    """The instruction line (with trailing ';') for ``form``."""
    imm = imm or Immediates()
    op = form.opcode
    if form.is_wgmma:
        return _wgmma_instruction(form, imm, regs)
    regs = regs or reg_names(form)
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


_WG_DEFAULT = {"scale_d": 1, "imm_scale_a": 1, "imm_scale_b": 1, "imm_trans_a": 0, "imm_trans_b": 0, "n": 0}


def _wgmma_instruction(form: Form, imm: Immediates, regs: dict[str, list[str]] | None) -> str:
    from . import imm_key, immediates

    wg = dict(_WG_DEFAULT, **(imm.wg or {}))
    op = form.opcode
    if form.family == "wgmma.wait_group":
        return f"{op} {wg['n']};"
    if form.family != "wgmma":
        return f"{op};"
    if form.asource is None:
        form = form.with_asource("desc")
    regs = regs or reg_names(form)
    parts = [_vec(regs["d"]), _vec(regs["a"]) if form.asource == "reg" else regs["a_desc"][0], regs["b_desc"][0]]
    if form.is_sparse:
        parts += [regs["e"][0], str(imm.sel)]
    try:
        names = [imm_key(r.data["name"]) for r in immediates(form)]
    except (KeyError, ValueError):
        names = ["scale_d"]
    parts += [str(wg.get(k, 0)) for k in names]
    return f"{op} {', '.join(parts)};"


def header(target: str, ptx: str) -> str:
    return f".version {ptx}\n.target {target}\n.address_size 64\n"


def check_kernel(form: Form, name: str = "k", imm: Immediates | None = None) -> str:
    """A minimal kernel containing just this instruction (for assembler checks)."""
    body = declarations(form) + [instruction(form, imm)]
    return f".visible .entry {name}()\n{{\n" + "\n".join("  " + b for b in body) + "\n  ret;\n}\n"
