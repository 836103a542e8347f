"""Whole instructions are checked the way ptxas checks them.

A table of instruction lines (registers of the pool of ``formal.catalog.ptxas.module_text``:
``%r0..63`` .b32, ``%fd0..31`` .f64, ``%rl0..7`` .b64) with the catalog's verdict:
legal (exit 0), illegal with a rule (exit 1) or malformed (exit 2).  Without ptxas the
catalog and the CLI are held to the table; with ptxas 13.0 (tests marked ``ptxas``) every
line is assembled and ptxas's accept/reject must be the table's, except where a listed
erratum records that ptxas and the text disagree.  A second ptxas test moves the qualifiers
of documented forms into random orders and holds the catalog's order rules
(specs/spelling.toml) to ptxas.
"""

from __future__ import annotations

import io
import random
from contextlib import redirect_stderr, redirect_stdout

import pytest

from formal import catalog as cat
from formal.catalog import ptxas as P
from formal.cli import main

D4, A4, B2, C4 = "{%r0, %r1, %r2, %r3}", "{%r4, %r5, %r6, %r7}", "{%r8, %r9}", "{%r10, %r11, %r12, %r13}"
B4 = "{%r8, %r9, %r14, %r15}"
MMA = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
SP = "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32"
SPD = f"{SP} {D4}, {A4}, {B4}, {C4}, %r16"
F64 = "mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64"
R8 = "{" + ", ".join(f"%r{i}" for i in range(8)) + "}"
R8b = "{" + ", ".join(f"%r{i}" for i in range(8, 16)) + "}"
R8c = "{" + ", ".join(f"%r{i}" for i in range(16, 24)) + "}"
R8d = "{" + ", ".join(f"%r{i}" for i in range(24, 32)) + "}"
R4c = "{%r16, %r17, %r18, %r19}"
R4d = "{%r24, %r25, %r26, %r27}"
CUTLASS_F8 = ("mma.sync.aligned.kind::mxf8f6f4.sp::ordered_metadata.block_scale.scale_vec::1X.m16n8k64.row.col"
              ".f32.e4m3.e4m3.f32.ue8m0")
CUTLASS_F4 = ("mma.sync.aligned.kind::mxf4nvf4.sp::ordered_metadata.block_scale.scale_vec::2X.m16n8k128.row.col"
              ".f32.e2m1.e2m1.f32.ue8m0")
BS = f"{D4}, {A4}, {B4}, {C4}, %r16, 0, %r17"
WLD = "wmma.load.a.sync.aligned.row.m16n16k16.global.f16"
WB1 = "wmma.mma.xor.popc.sync.aligned.row.col.m8n8k128.s32.b1.b1.s32 {%r0, %r1}, {%r2}, {%r3}, {%r4, %r5}"
MB1 = "{%r0, %r1}, {%r2}, {%r3}, {%r4, %r5}"

# (instruction, target, ptx, verdict, erratum where ptxas disagrees with that verdict)
TABLE: list[tuple[str, str, str, str, str]] = [
    # operand count and register vectors
    (f"{MMA} {D4}, {A4}, {B2}, {C4};", "sm_80", "8.0", "legal", ""),
    (f"{MMA} {D4}, {A4};", "sm_80", "8.0", "malformed", ""),
    (f"{MMA} {D4}, {A4}, {B2};", "sm_80", "8.0", "malformed", ""),
    (f"{MMA} {D4}, {A4}, {B2}, {C4}, %r14;", "sm_80", "8.0", "malformed", ""),
    (f"{MMA} {D4}, {{%r4, %r5}}, {B2}, {C4};", "sm_80", "8.0", "malformed", ""),
    (f"{MMA} {{%r0, %r1, %r2}}, {A4}, {B2}, {C4};", "sm_80", "8.0", "malformed", ""),
    (f"{MMA} {D4}, {A4}, {B2}, {{%r10, %r11, %r12, %r13, %r14}};", "sm_80", "8.0", "malformed", ""),
    (f"{MMA} {D4}, {A4}, %r8, {C4};", "sm_80", "8.0", "malformed", ""),
    (f"{MMA} {D4}, {A4}, {B2}, {{0f00000000, %r11, %r12, %r13}};", "sm_80", "8.0", "legal", ""),
    (f"{MMA} {{_, %r1, %r2, %r3}}, {A4}, {B2}, {C4};", "sm_80", "8.0", "legal", ""),
    (f"{MMA} {D4}, {A4}, {B2}, {{_, %r11, %r12, %r13}};", "sm_80", "8.0", "malformed", ""),
    (f"{MMA} {D4}, {A4}, {B2}, {{%r10, %r11, %r12, %r13,}};", "sm_80", "8.0", "malformed", ""),
    (f"{MMA} {D4}, {A4}, {B2}, {{{{%r10, %r11}}}};", "sm_80", "8.0", "malformed", ""),
    (f"{F64} {{%fd0, %fd1}}, {{%fd2}}, {{%fd3}}, {{%fd4, %fd5}};", "sm_80", "8.0", "legal", ""),
    (f"{F64} {{%fd0, %fd1}}, %fd2, %fd3, {{%fd4, %fd5}};", "sm_80", "8.0", "malformed", ""),
    # qualifier orders
    (f"mma.row.sync.aligned.m16n8k16.col.f32.f16.f16.f32 {D4}, {A4}, {B2}, {C4};", "sm_80", "8.0", "legal", ""),
    (f"mma.sync.aligned.m16n8k16.col.row.f32.f16.f16.f32 {D4}, {A4}, {B2}, {C4};", "sm_80", "8.0", "illegal", ""),
    (f"mma.sync.aligned.m8n8k128.row.col.s32.b1.b1.s32.xor.popc {MB1};", "sm_80", "8.0", "legal", ""),
    (f"mma.xor.sync.aligned.m8n8k128.row.col.s32.b1.b1.s32.popc {MB1};", "sm_80", "8.0", "legal", ""),
    (f"mma.sync.aligned.m8n8k128.row.col.s32.b1.b1.s32.popc.xor {MB1};", "sm_80", "8.0", "malformed", ""),
    (f"{WB1};", "sm_80", "8.0", "legal", ""),
    (WB1.replace("xor.popc", "popc.xor") + ";", "sm_80", "8.0", "malformed", ""),
    (WB1.replace("xor.popc.sync", "sync.xor.popc") + ";", "sm_80", "8.0", "legal", ""),
    (WB1.replace("xor.popc.sync", "popc.sync.xor") + ";", "sm_80", "8.0", "malformed", ""),
    (f"wmma.load.a.row.sync.aligned.m16n16k16.global.f16 {R8}, [%rl0];", "sm_80", "8.0", "legal", ""),
    (f"wmma.load.sync.a.aligned.row.m16n16k16.global.f16 {R8}, [%rl0];", "sm_80", "8.0", "malformed", ""),
    # real PTX qualifiers the instruction does not take: illegal with the rule
    (f"{WLD.replace('global', 'local')} {R8}, [%rl0];", "sm_80", "8.0", "illegal", ""),
    (f"{WLD.replace('global', 'param')} {R8}, [%rl0];", "sm_80", "8.0", "illegal", ""),
    (f"mma.sync.aligned.ftz.m16n8k16.row.col.f32.f16.f16.f32 {D4}, {A4}, {B2}, {C4};", "sm_80", "8.0", "illegal", ""),
    (f"{MMA}.global {D4}, {A4}, {B2}, {C4};", "sm_80", "8.0", "illegal", ""),
    (f"mma.sync.aligned.m16n8k16.row.col.f32.b16.b16.f32 {D4}, {A4}, {B2}, {C4};", "sm_80", "8.0", "illegal", ""),
    # the sparsity selector: constant expressions as ptxas reads them
    *[(f"{SPD}, {s};", "sm_80", "8.5", "legal", "") for s in
      ("0", "1", "0x1", "01", "1+0", "(1)", "0b1", "1U", "~-2", "!0", "1?0:1", "4-3*1", "1<<0", "-0")],
    *[(f"{SPD}, {s};", "sm_80", "8.5", "illegal", "") for s in ("-1", "4", "010", "4294967296")],
    *[(f"{SPD}, {s};", "sm_80", "8.5", "malformed", "") for s in
      ("abc", "%r17", "1.0", "08", "0x", "1/0", "(1", "1 2")],
    (f"{SPD};", "sm_80", "8.5", "malformed", ""),
    (f"{SPD}, 0, 1;", "sm_80", "8.5", "malformed", ""),
    (f"{SP} {D4}, {A4}, {B4}, {C4}, 0, 0;", "sm_80", "8.5", "malformed", ""),
    (f"{SPD}, 2;", "sm_80", "8.5", "illegal", "E-SP-SEL-K32-F16F32"),
    (f"{SPD}, 3;", "sm_90", "8.5", "illegal", "E-SP-SEL-K32-F16F32"),
    (f"mma.sp.sync.aligned.m16n8k32.row.col.f16.f16.f16.f16 {{%r0, %r1}}, {A4}, {B4}, {{%r2, %r3}}, %r16, 2;",
     "sm_80", "8.5", "illegal", ""),
    (f"mma.sp.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {D4}, {{%r4, %r5}}, {B2}, {C4}, %r16, 3;",
     "sm_80", "8.5", "legal", ""),
    (f"mma.sp.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {D4}, {{%r4, %r5}}, {B2}, {C4}, %r16, 4;",
     "sm_80", "8.5", "illegal", ""),
    # block scaling: CUTLASS 4.2's SM120 spelling, the selector pairs
    (f"{CUTLASS_F8} {BS}, {{0, 0}}, %r18, {{0, 0}};", "sm_120a", "8.7", "legal", ""),
    (f"{CUTLASS_F4} {BS}, {{0, 0}}, %r18, {{0, 0}};", "sm_120a", "8.7", "legal", ""),
    (f"{CUTLASS_F8} {BS}, {{0, 1}}, %r18, {{1, 3}};", "sm_120a", "8.7", "legal", ""),
    (f"{CUTLASS_F8} {BS}, {{0x0, 1+1}}, %r18, {{0, 0}};", "sm_120a", "8.7", "illegal", ""),
    (f"{CUTLASS_F8} {BS}, {{-1, 0}}, %r18, {{0, 0}};", "sm_120a", "8.7", "illegal", ""),
    (f"{CUTLASS_F8} {BS}, {{1.0, 0}}, %r18, {{0, 0}};", "sm_120a", "8.7", "malformed", ""),
    (f"{CUTLASS_F8} {D4}, {A4}, {B4}, {C4}, {{%r16}}, 0, {{%r17}}, {{0, 0}}, {{%r18}}, {{0, 0}};", "sm_120a", "8.7",
     "legal", ""),
    (f"{CUTLASS_F8} {BS}, {{0}}, %r18, {{0, 0}};", "sm_120a", "8.7", "malformed", ""),
    (f"{CUTLASS_F8} {BS}, 0, %r18, {{0, 0}};", "sm_120a", "8.7", "malformed", ""),
    (f"{CUTLASS_F8} {BS}, {{0, 0}}, %r18;", "sm_120a", "8.7", "malformed", ""),
    (f"{CUTLASS_F8} {D4}, {A4}, {B4}, {C4}, %r16, 0, 0, {{0, 0}}, %r18, {{0, 0}};", "sm_120a", "8.7", "malformed", ""),
    (f"{CUTLASS_F8} {D4}, {A4}, {B4}, {C4}, %r16, 1, %r17, {{0, 0}}, %r18, {{0, 0}};", "sm_120a", "8.7", "illegal", ""),
    (f"{CUTLASS_F8} {BS}, {{0, 0}}, %r18, {{0, 0}};", "sm_90", "8.7", "illegal", ""),
    # wmma operands
    (f"{WLD} {R8}, [%rl0];", "sm_80", "8.0", "legal", ""),
    (f"{WLD} {R8}, [%rl0], %r63;", "sm_80", "8.0", "legal", ""),
    (f"{WLD} {R8}, [%rl0], 16;", "sm_80", "8.0", "legal", ""),
    (f"{WLD} {R8}, [%rl0], 0x10;", "sm_80", "8.0", "legal", ""),
    (f"{WLD} {R8}, [%rl0+16];", "sm_80", "8.0", "legal", ""),
    (f"{WLD} {R8}, %rl0;", "sm_80", "8.0", "malformed", ""),
    (f"{WLD} {R8}, [%rl0], 16, 1;", "sm_80", "8.0", "malformed", ""),
    (f"{WLD} {R8};", "sm_80", "8.0", "malformed", ""),
    (f"{WLD} {{%r0, %r1, %r2, %r3, %r4, %r5, %r6}}, [%rl0];", "sm_80", "8.0", "malformed", ""),
    (f"wmma.store.d.sync.aligned.row.m16n16k16.global.f32 [%rl0], {R8};", "sm_80", "8.0", "legal", ""),
    (f"wmma.store.d.sync.aligned.row.m16n16k16.global.f32 [%rl0], {R8}, %r63;", "sm_80", "8.0", "legal", ""),
    (f"wmma.store.d.sync.aligned.row.m16n16k16.global.f32 {R8}, [%rl0];", "sm_80", "8.0", "malformed", ""),
    (f"wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32 {R8}, {R8b}, {R8c}, {R8d};", "sm_80", "8.0", "legal", ""),
    (f"wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32 {R8}, {R8b}, {R8c};", "sm_80", "8.0", "malformed", ""),
    # the undocumented four-type f16 wmma.mma spelling (all 12: 3 shapes x dtype x ctype)
    *[(f"wmma.mma.sync.aligned.row.col.{shape}.{d}.f16.f16.{c} "
       f"{R8 if d == 'f32' else '{%r0, %r1, %r2, %r3}'}, {R8b}, {R8c}, {R8d if c == 'f32' else R4d};",
       "sm_80", "8.0", "illegal", "")
      for shape in ("m16n16k16", "m8n32k16", "m32n8k16") for d in ("f16", "f32") for c in ("f16", "f32")],
]


def _verdict(line: str, target: str, ptx: str) -> tuple[str, cat.Legality | None]:
    try:
        form, imm = cat.parse_instruction(line)
        res = cat.legality(line, target, ptx, sel=imm.get("sel"), scale_a=imm.get("scale_a"),
                           scale_b=imm.get("scale_b"))
    except cat.MalformedOpcode:
        return "malformed", None
    return ("legal" if res.ok else "illegal"), res


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def test_table_size():
    assert len(TABLE) >= 80
    assert {v for *_, v, _ in TABLE} == {"legal", "illegal", "malformed"}


@pytest.mark.parametrize("line,target,ptx,want,erratum", TABLE, ids=[f"{i}" for i in range(len(TABLE))])
def test_catalog_verdict(line, target, ptx, want, erratum):
    got, res = _verdict(line, target, ptx)
    assert got == want, (line, res and [str(r) for r in res.reasons])
    if res is not None and not res.ok:
        assert all(r.section for r in res.reasons)         # every rule cites its section


@pytest.mark.parametrize("i", range(0, len(TABLE), 4))
def test_cli_exit_codes(i):
    line, target, ptx, want, _ = TABLE[i]
    rc, out, err = _cli("check", line, "--target", target, "--ptx", ptx)
    assert rc == {"legal": 0, "illegal": 1, "malformed": 2}[want], (line, out, err)
    if want == "malformed":
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    if want == "illegal":
        assert "[PTX ISA " in out


def test_cutlass_spelling_notes_the_text_order():
    res = cat.legality(CUTLASS_F8, "sm_120a", "8.7")
    assert res.ok and res.form.opcode.startswith("mma.sp::ordered_metadata.sync.aligned.m16n8k64")
    assert any("E-QUALIFIER-ORDER" in n for n in res.notes)
    assert not cat.legality(res.form.opcode, "sm_120a", "8.7").notes


def test_const_expr():
    assert [cat.const_expr(s) for s in ("0x1f", "017", "0b101", "-(2*3)", "1<<4|1", "7%4", "-7/2", "3>2&&1")] == \
        [31, 15, 5, -6, 17, 3, -3, 1]
    for bad in ("", "1.5", "x", "1 +", "((1)", "1/0", "99999999999999999999999", "(" * 100 + "1" + ")" * 100):
        with pytest.raises(cat.MalformedOpcode):
            cat.const_expr(bad)


# ---- against ptxas ------------------------------------------------------------------------------

PX = P.find("13.0")
needs_ptxas13 = pytest.mark.skipif(PX is None, reason="ptxas 13.0 not found (the table records its verdicts)")


@needs_ptxas13
@pytest.mark.ptxas
def test_table_agrees_with_ptxas():
    groups: dict[tuple[str, str], list[int]] = {}
    for i, (_, target, ptx, _, _) in enumerate(TABLE):
        groups.setdefault((target, ptx), []).append(i)
    agree = 0
    for (target, ptx), idx in groups.items():
        vs = P.assemble_lines([TABLE[i][0] for i in idx], target, ptx, PX)
        for i, v in zip(idx, vs):
            line, _, _, want, erratum = TABLE[i]
            expected = (want == "legal") != bool(erratum)
            assert v.accepted == expected, (line, target, ptx, want, v.messages)
            agree += 1
    assert agree == len(TABLE)


def _permute(op: str, rng: random.Random) -> str:
    """The qualifiers after the lead in a random order, the layouts and the types kept in
    their relative order; now and then a lead token or .popc/.xor moved too."""
    toks = op.split(".")
    lead = cat._order_rule(cat.parse(op).family)["lead"]
    head, rest = toks[:lead], toks[lead:]
    vocab = cat._vocab()
    keep = [t for t in rest if t in vocab["layout"] or t in vocab["type"]]
    shuffled = rest[:]
    rng.shuffle(shuffled)
    it = iter(keep)
    shuffled = [next(it) if t in vocab["layout"] or t in vocab["type"] else t for t in shuffled]
    if rng.random() < 0.15 and lead > 1:
        tok = head.pop(rng.randrange(1, lead))
        shuffled.insert(rng.randrange(len(shuffled) + 1), tok)
    return ".".join(head + shuffled)


@needs_ptxas13
@pytest.mark.ptxas
def test_random_qualifier_orders_agree_with_ptxas():
    rng = random.Random(11)
    forms = list(cat.documented_forms())
    rng.shuffle(forms)
    targets = ("sm_80", "sm_90", "sm_120a", "sm_90a")
    by_target: dict[str, list[tuple[str, str]]] = {t: [] for t in targets}
    for f in forms[:160]:
        t = next((t for t in targets if cat.legality(f, t, "9.0").ok), None)
        if t is None:
            continue
        canon = P.instruction_line(P.Probe(f))
        ops = canon[len(f.opcode):]
        by_target[t].append((canon, f.opcode))
        for _ in range(4):
            by_target[t].append((_permute(f.opcode, rng) + ops, f.opcode))
    compared = disagree = 0
    for t, pairs in by_target.items():
        vs = P.assemble_lines([ln for ln, _ in pairs], t, "9.0", PX)
        canon_ok = {op: v.accepted for (ln, op), v in zip(pairs, vs) if ln.startswith(op + " ")}
        for (ln, op), v in zip(pairs, vs):
            if not canon_ok.get(op):
                continue                  # ptxas rejects the form itself (an erratum), not its order
            got, _ = _verdict(ln, t, "9.0")
            compared += 1
            if (got == "legal") != v.accepted:
                disagree += 1
                print("DISAGREE", t, ln.split()[0], got, v.messages[:1])
    assert compared >= 300 and disagree == 0


def test_docstring_examples():
    import doctest
    res = doctest.testmod(cat)
    assert res.attempted >= 4 and res.failed == 0


def test_selector_2_cites_the_ptxas_and_silicon_errata():
    res = cat.legality(SP, "sm_90", "8.5", sel=2)
    assert not res.ok and "E-SP-SEL-K32-F16F32" in res.reasons[0].message and "S-SP-SELECTOR-OOB-TRAP" in res.reasons[0].message
    res = cat.legality(SP.replace("f32.f16.f16.f32", "f32.bf16.bf16.f32"), "sm_90", "8.5", sel=2)
    assert not res.ok and "E-SP-SEL" not in res.reasons[0].message      # ptxas enforces [0..1] for bf16
