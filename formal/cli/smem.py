"""``ptx-formal smem ...``: wgmma operands in shared memory (descriptors, swizzles, layouts).

    ptx-formal smem desc VALUE [--operand b --type f16 --n 64 --major K]   decode a matrix descriptor
    ptx-formal smem encode --start B --lbo B --sbo B [--swizzle 128B] [--base-offset N]
    ptx-formal smem where --desc VALUE --operand b --type f16 --n 64 [--major K] [--mn I --k J]
    ptx-formal smem audit (--triton TEXT|FILE | --cute TEXT) --operand a|b [--type T] [--shape RxC]
                          [--cute-tile RxC] [--n N] [--desc VALUE]       prove a layout readable, or refute it
    ptx-formal smem layouts [--major K|MN] [--swizzle S] [--type T]       the canonical layouts, CuTe, Triton

``--model NAME=VALUE,...`` picks the answers to the text's open questions (swizzle_on =
absolute|relative, base_offset = phase|added|ignored, lbo_k_swizzled = ignored|used); the
default is what the silicon settled (specs/wgmma_smem.toml [[choice]]).

Exit codes: 0 shown / audit proved, 1 audit refuted, 2 bad input, 3 audit unknown.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from . import InputError, one_line, timeout_seconds


def _int(s: str, what: str) -> int:
    try:
        return int(str(s).replace("_", ""), 0)
    except ValueError:
        raise InputError(f"{what}: not an integer: {one_line(s, 60)} (decimal or 0x hex)") from None


def _shape(s: str | None, what: str) -> tuple[int, int] | None:
    if s is None:
        return None
    m = re.fullmatch(r"\s*(\d+)\s*[xX,]\s*(\d+)\s*", s)
    if not m:
        raise InputError(f"{what}: expected RxC, got {one_line(s, 60)}")
    return int(m.group(1)), int(m.group(2))


def _model(args):
    from ..smem import Model
    return Model.parse(getattr(args, "model", None))


def _text_or_file(s: str, what: str) -> str:
    from . import read_text
    if "<" not in s and "(" not in s and len(s) < 4096:
        p = Path(s)
        if p.is_file():
            return read_text(p, what)
    return s


# ------------------------------------------------------------------------------------- desc / encode

def _field_lines(d) -> list[str]:
    from ..smem import spec as S
    out = []
    for f in S.fields():
        v = getattr(d, f.name)
        if f.unit_bytes:
            extra = f"= {v * f.unit_bytes} bytes ({f.unit_bytes}-byte units)"
        elif f.name == "swizzle":
            m = d.mode
            extra = f"= {m.name}" + (f" ({m.cute}, pattern {m.pattern_bytes} bytes)" if m.B else " (no swizzle)")
        else:
            extra = f"= bits 7-9 of the pattern start ({d.mode.B} of its bits take part)" if d.mode.B else \
                "(not used without a swizzle)"
        out.append(f"  bits {f.hi:2d}-{f.lo:<2d} {f.name:12s} {v:#07x} {extra}")
    res = ", ".join(f"{lo + w - 1}-{lo}" for lo, w in S.reserved())
    out.append(f"  undescribed bits {res}: {d.reserved:#x}")
    return out


def cmd_desc(args) -> int:
    from ..smem import address as A
    from ..smem import codec
    v = _int(args.value, "descriptor")
    d = codec.decode(v)
    info = {"descriptor": d.to_dict(), "warnings": codec.warnings(d)}
    lines = [f"{v:#018x}  (PTX ISA 9.1 §9.7.15.5.1.2.2)"] + _field_lines(d)
    if args.type:
        op = A.operand(args.operand, args.type, args.n, args.major)
        text = A.canonical_text(op.major, d.mode.name, op.bits, d.lbo_bytes, d.sbo_bytes, _model(args))
        byte, bit = A.addresses(d, op, _model(args))
        lo, hi = int(byte.min()), int(byte.max()) + max(1, op.bits // 8)
        info |= {"operand": op.describe(), "canonical": text, "bytes_read": [lo, hi]}
        lines += [f"{op.describe()}: canonical layout (PTX ISA 9.1 §9.7.15.5.1.2.1.3)", f"  {text}",
                  f"  reads bytes [{lo:#x}, {hi:#x}); element (0,0) at {int(byte[0, 0]):#x}, (1,0) at "
                  f"{int(byte[min(1, op.mn - 1), 0]):#x}, (0,1) at {int(byte[0, min(1, op.k - 1)]):#x}"]
    for w in info["warnings"]:
        lines.append(f"  note: {w}")
    print(json.dumps(info, indent=2) if args.json else "\n".join(lines))
    return 0


def cmd_encode(args) -> int:
    from ..smem import codec
    v = codec.make(start=_int(args.start, "--start"), lbo=_int(args.lbo, "--lbo"), sbo=_int(args.sbo, "--sbo"),
                   swizzle=args.swizzle, base_offset=_int(args.base_offset, "--base-offset"))
    d = codec.decode(v)
    if args.json:
        print(json.dumps({"descriptor": d.to_dict(), "warnings": codec.warnings(d)}, indent=2))
    else:
        print(f"{v:#018x}")
    return 0


# ------------------------------------------------------------------------------------- where

def cmd_where(args) -> int:
    from ..smem import address as A
    from ..smem import codec
    d = codec.decode(_int(args.desc, "--desc"))
    op = A.operand(args.operand, args.type, args.n, args.major)
    model = _model(args)
    if (args.mn is None) != (args.k is None):
        raise InputError("give both --mn and --k (one element), or neither (every element)")
    if args.mn is not None:
        mn, k = _int(args.mn, "--mn"), _int(args.k, "--k")
        b, bit = A.element_address(d, op, mn, k, model)
        where = f"byte {b:#x} ({b})" + (f" bit {bit}" if op.bits == 1 else "")
        if args.json:
            print(json.dumps({"mn": mn, "k": k, "byte": b, "bit": bit, "operand": op.describe(),
                              "descriptor": d.to_dict(), "model": model.label()}))
        else:
            print(f"{op.describe()} element (mn={mn}, k={k}) through {d.value:#018x}: {where}")
        return 0
    byte, bit = A.addresses(d, op, model)
    if args.json:
        print(json.dumps({"operand": op.describe(), "descriptor": d.to_dict(), "model": model.label(),
                          "byte": byte.tolist(), **({"bit": bit.tolist()} if op.bits == 1 else {})}))
    elif args.csv:
        print("mn,k,byte" + (",bit" if op.bits == 1 else ""))
        for i in range(op.mn):
            for j in range(op.k):
                print(f"{i},{j},{int(byte[i, j])}" + (f",{int(bit[i, j])}" if op.bits == 1 else ""))
    else:
        print(f"{op.describe()} through {d.value:#018x}: byte address of element (mn, k); rows mn, columns k")
        w = len(f"{int(byte.max()):x}") + 1
        print("mn\\k " + " ".join(f"{j:>{w}d}" for j in range(op.k)))
        for i in range(op.mn):
            print(f"{i:4d} " + " ".join(f"{int(byte[i, j]):>{w}x}" for j in range(op.k)))
    return 0


# ------------------------------------------------------------------------------------- audit

def build_user(args, operand: str, triton: str | None, cute: str | None, shape=None, dtype_bits=None):
    from ..transform import smem_layouts as peers
    if (triton is None) == (cute is None):
        raise InputError("give one of --triton '#ttg.nvmma_shared<{...}>' or --cute LAYOUT")
    if triton is not None:
        return peers.parse_triton(_text_or_file(triton, "--triton"), operand, shape, dtype_bits)
    u = peers.parse_cute(_text_or_file(cute, "--cute"), dtype_bits)
    tile = _shape(getattr(args, "cute_tile", None), "--cute-tile")
    if tile:
        u = peers.cute_tile(u, *tile)
    return u


def type_bits(dtype: str | None) -> int | None:
    """Element bits of a PTX type (f16, tf32, e4m3, ...) or a Triton one (f16, f32, i8, f8E4M3FN, ...)."""
    from ..transform import smem_layouts as peers
    from ..smem import spec as S
    if not dtype:
        return None
    tb = S.type_bits() | peers._TRITON_BITS
    if dtype not in tb:
        raise InputError(f"element type {dtype}: one of {', '.join(tb)}")
    return tb[dtype]


def run_audit(args, operand: str, triton: str | None, cute: str | None, n: int | None, desc: str | None,
              shape=None, dtype=None) -> int:
    from ..transform import smem_layouts as peers
    bits = type_bits(dtype)
    if operand not in ("a", "b", "a.sp", "b.sp"):
        raise InputError(f"--operand {operand}: a, b, a.sp or b.sp (the shared-memory operands of wgmma)")
    user = build_user(args, operand, triton, cute, shape, bits)
    if cute is not None and not getattr(args, "cute_tile", None):
        # a bare CuTe atom: tile_to_shape it to whole instruction tiles, as a kernel's smem layout would be
        import math
        mn_i, k_i = peers.instruction_tile(operand, user.bits, n, user.rows)
        rows, cols = math.lcm(user.rows, mn_i), math.lcm(user.cols, k_i)
        if (rows, cols) != (user.rows, user.cols):
            user = peers.cute_tile(user, rows, cols)
    rep = peers.audit(user, operand, n=n, desc=None if desc is None else _int(desc, "--desc"), model=_model(args),
                      timeout_ms=timeout_seconds(20.0 if getattr(args, "timeout", None) is None
                                                 else args.timeout))
    if getattr(args, "json", False):
        print(json.dumps(rep.to_dict(), indent=2))
    else:
        print(f"audit {user.describe()}")
        print(f"  wgmma operand {operand}: tiles of {rep.instr[0]} x {rep.instr[1]} (mn x k), "
              f"{rep.tiles[0]} x {rep.tiles[1]} of them")
        if rep.descriptor:
            dd = rep.descriptor
            print(f"  descriptor of tile (0,0): {dd['value']} (start {dd['start_bytes']}, LBO {dd['lbo_bytes']}, SBO "
                  f"{dd['sbo_bytes']} bytes, {dd['swizzle_mode']}, base offset {dd['base_offset']}); the other tiles "
                  f"add their first element's offset >> 4 to it")
        for nte in rep.notes:
            print(f"  note: {nte}")
        if rep.status == "proved":
            print(f"  PROVED: every element of every tile is read from the byte the layout puts it at "
                  f"(Z3 {rep.proof.z3}, enumeration {rep.proof.enumeration})")
        elif rep.status == "refuted":
            print(f"  REFUTED: {rep.reason}")
        else:
            print(f"  UNKNOWN: {rep.reason}")
    return {"proved": 0, "refuted": 1}.get(rep.status, 3)


def cmd_audit(args) -> int:
    return run_audit(args, args.operand, args.triton, args.cute, args.n, args.desc, _shape(args.shape, "--shape"),
                     args.type)


# ------------------------------------------------------------------------------------- layouts

def cmd_layouts(args) -> int:
    from ..smem import address as A
    from ..transform import smem_layouts as peers
    from ..smem import spec as S
    raw = S.raw()
    rows = []
    for c in S.canonicals():
        if args.major and c.major != S.normalize_major(args.major):
            continue
        if args.swizzle and c.swizzle != S.mode(args.swizzle).name:
            continue
        row = {"major": c.major, "swizzle": c.swizzle, "isa": f"{c.isa_swizzle} o {c.isa}"}
        if args.type:
            bits = S.type_bits().get(args.type)
            if bits is None:
                raise InputError(f"--type {args.type}: one of {', '.join(S.type_bits())}")
            am, ak = S.atom_shape(c.major, c.swizzle, bits)
            atom = f"Layout_{c.major}_{'INTER' if c.swizzle == 'none' else 'SW' + c.swizzle[:-1]}_Atom"
            row |= {"atom_elements": [am, ak], "cute": peers.cute_atom_text(atom, bits) if bits > 1 else None,
                    "cute_name": atom,
                    "packed_64": A.canonical_text(c.major, c.swizzle, bits, *_packed(c, bits))}
        rows.append(row)
    if args.json:
        print(json.dumps({"section": raw["canonical"]["section"], "layouts": rows}, indent=2))
        return 0
    print(f"canonical layouts, PTX ISA 9.1 §{raw['canonical']['section']} (elements; T = 128 / element bits)")
    for r in rows:
        print(f"  {r['major']:>2}-major {r['swizzle']:>4}: {r['isa']}")
        if "cute" in r:
            print(f"      Table 38 atom {r['atom_elements'][0]} x {r['atom_elements'][1]} elements; CuTe "
                  f"{r['cute_name']}: {r['cute'] or '(no b1 atom)'}")
            print(f"      a 64-row tile packed: {r['packed_64']}")
    return 0


def _packed(c, bits):
    from ..smem import address as A
    p = A.packed(c.major, c.swizzle, bits, 64, 256 // bits)
    return p.lbo, p.sbo


# ------------------------------------------------------------------------------------- argparse

def register(sub) -> None:
    p = sub.add_parser("smem", help="wgmma shared-memory operands: descriptors, swizzles, canonical layouts, audits",
                       description="wgmma operands in shared memory (PTX ISA 9.1 §9.7.15.5.1.2): decode/encode matrix "
                                   "descriptors, where each operand element lives, the canonical layouts, and audits "
                                   "of CuTe / Triton shared-memory layouts (specs/wgmma_smem.toml).")
    ss = p.add_subparsers(dest="smem_command", metavar="SUBCOMMAND")

    def operand_args(q, required=True):
        q.add_argument("--operand", default="b", choices=["a", "b", "a.sp", "b.sp"],
                       help="a (64 x K), b (N x K), a.sp (stored sparse A), b.sp (sparse B); default b")
        q.add_argument("--type", required=required, help="element type: f16 bf16 tf32 e4m3 e5m2 s8 u8 b1")
        q.add_argument("--n", type=int, help="N of the shape (operand b, b.sp)")
        q.add_argument("--major", default="K", help="K (imm-trans = 0, default) or MN (imm-trans = 1, f16/bf16)")

    def model_arg(q):
        q.add_argument("--model", metavar="NAME=VALUE,...",
                       help="answers to the text's open questions (default: the silicon's): swizzle_on=absolute|"
                            "relative, base_offset=phase|added|ignored, lbo_k_swizzled=ignored|used")

    q = ss.add_parser("desc", help="decode a 64-bit matrix descriptor (fields, units; with --type, the layout it implies)")
    q.add_argument("value", help="the descriptor, e.g. 0x4000004000010040")
    operand_args(q, required=False)
    model_arg(q)
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=cmd_desc)

    q = ss.add_parser("encode", help="a descriptor from byte quantities")
    q.add_argument("--start", required=True, help="start address in bytes (16-byte aligned)")
    q.add_argument("--lbo", default="0", help="leading dimension byte offset in bytes")
    q.add_argument("--sbo", default="0", help="stride dimension byte offset in bytes")
    q.add_argument("--swizzle", default="none", help="none, 32B, 64B, 128B")
    q.add_argument("--base-offset", default="0", help="the 3-bit base offset field")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=cmd_encode)

    q = ss.add_parser("where", help="the shared-memory byte of operand element (mn, k), or of every element")
    q.add_argument("--desc", required=True, help="the descriptor value")
    operand_args(q)
    q.add_argument("--mn", help="row along M (operand a) or N (operand b)")
    q.add_argument("--k", help="column along K")
    model_arg(q)
    fmt = q.add_mutually_exclusive_group()
    fmt.add_argument("--csv", action="store_true")
    fmt.add_argument("--json", action="store_true")
    q.set_defaults(func=cmd_where)

    q = ss.add_parser("audit", help="prove a CuTe / Triton shared-memory layout readable by wgmma descriptors "
                                    "(exit 0 proved, 1 refuted with the first wrong element, 3 unknown)")
    q.add_argument("--triton", metavar="TEXT|FILE", help="#ttg.nvmma_shared<{...}> (with its !ttg.memdesc<RxCxT, ...> "
                                                          "type, or --shape)")
    q.add_argument("--cute", metavar="TEXT", help="a GMMA atom (GMMA::Layout_K_SW128_Atom<half_t>) or a layout as CuTe "
                                                   "prints it (Sw<3,4,3> o smem_ptr[16b](unset) o (_8,_64):(_64,_1)); "
                                                   "mode 0 = MN, mode 1 = K")
    q.add_argument("--cute-tile", metavar="RxC", help="tile_to_shape the CuTe atom to R x C (mn x k)")
    q.add_argument("--shape", metavar="RxC", help="the Triton tensor shape (A: M x K, B: K x N)")
    q.add_argument("--operand", default="b", help="a (tensor M x K) or b (tensor K x N); also a.sp, b.sp")
    q.add_argument("--type", help="element type when the layout does not say it")
    q.add_argument("--n", type=int, help="operand b: the instruction's N (default: the tile's rows, at most 256)")
    q.add_argument("--desc", help="the descriptor of the first tile (default: derive it as CuTe / Triton do)")
    q.add_argument("--timeout", type=float, default=20.0, help="seconds per solver query")
    model_arg(q)
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=cmd_audit)

    q = ss.add_parser("layouts", help="the canonical layouts (ISA text), Table 38 atoms, CuTe's atoms")
    q.add_argument("--major")
    q.add_argument("--swizzle")
    q.add_argument("--type")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=cmd_layouts)

    def no_sub(args):
        raise InputError("ptx-formal smem: give a subcommand (desc, encode, where, audit, layouts)")
    p.set_defaults(func=no_sub)
