"""Fuzz ``audit``, ``layout audit --triton | --cute-tile`` and ``layout audit-atom`` with malformed
input (issue 19): over 300 cases, every one must end in 0, 1, 2 or 3 (never 4, an internal
error), exit 2 with exactly one ``ptx-formal: error:`` line that does not echo a huge input, no
traceback, and within a time limit (a watchdog turns a hang into a failure).

Cases are generated deterministically: hand-written malformed values, and mutations (a
character dropped, doubled or replaced; a number made huge, zero or negative) of small valid
baselines, so a valid mutant still audits in a fraction of a second.
"""

from __future__ import annotations

import io
import random
import signal
import textwrap
import time
from contextlib import redirect_stderr, redirect_stdout

import pytest

from formal.cli import main

F16 = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
BF16 = "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
F16K8 = "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32"
SP = "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32"
M8 = "mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32"
WMMA = "wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32"
WL = "wmma.load.a.sync.aligned.row.m16n16k16.global.f16"
LIMIT_S = 30            # a case slower than this is a hang

MMA = "#mma = #ttg.nvidia_mma<{versionMajor = 2, versionMinor = 0, warpsPerCTA = [1, 1], instrShape = [16, 8]}>"
T_ACC = MMA + "\ntensor<16x8xf32, #mma>"
T_A = MMA + "\ntensor<16x16xf16, #ttg.dot_op<{opIdx = 0, parent = #mma, kWidth = 2}>>"
T_B = MMA + "\ntensor<16x8xf16, #ttg.dot_op<{opIdx = 1, parent = #mma, kWidth = 2}>>"
T_LIN = ("#ttg.linear<{register = [[0, 1], [8, 0]], lane = [[0, 2], [0, 4], [1, 0], [2, 0], [4, 0]], "
         "warp = [], block = []}>")
CUTE_C = "((4,8,2,2),(2,2)):((64,1,16,256),(32,8))"
CUTE_A = "((4,8),(2,2,2)):((32,1),(16,8,128))"
CUTE_B = "((4,8),(2,2)):((16,1),(8,64))"

MODELS = textwrap.dedent('''
    import os, sys, time
    import numpy as np
    from formal.evaluate import evaluate_matrices

    def good(opcode, A, B, C):
        return evaluate_matrices(opcode, A, B, C)

    def none(opcode, A, B, C):
        return None

    def text(opcode, A, B, C):
        return "D"

    def lst(opcode, A, B, C):
        return [[1, 2], [3]]

    def floats(opcode, A, B, C):
        return np.asarray(good(opcode, A, B, C)).astype(np.float64)

    def huge(opcode, A, B, C):
        return np.asarray(good(opcode, A, B, C)).astype(object) * (1 << 80)

    def neg(opcode, A, B, C):
        return -np.ones(np.asarray(good(opcode, A, B, C)).shape, np.int64)

    def scalar(opcode, A, B, C):
        return 7

    def boolean(opcode, A, B, C):
        return np.asarray(good(opcode, A, B, C)) > 0

    def raises(opcode, A, B, C):
        raise KeyError("x")

    def exits(opcode, A, B, C):
        sys.exit(0)

    def os_exit(opcode, A, B, C):
        os._exit(0)

    def sleeps(opcode, A, B, C):
        time.sleep(1000)

    def recursion(opcode, A, B, C):
        return recursion(opcode, A, B, C)

    def interrupt(opcode, A, B, C):
        raise KeyboardInterrupt

    def generator(opcode, A, B, C):
        yield 1

    not_callable = 5

    def lay(lane, reg, elem):
        return (lane, reg)

    def lay_raises(lane, reg, elem):
        raise ZeroDivisionError("lay")

    def lay_exit(lane, reg, elem):
        os._exit(3) if False else sys.exit(1)

    def lay_none(lane, reg, elem):
        return None

    def lay_huge(lane, reg, elem):
        return (1 << 80, 0)
''')


class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang(f"no answer within {LIMIT_S} s")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz_audit")
    f = {}
    f["models"] = d / "models.py"
    f["models"].write_text(MODELS)
    f["import_raises"] = d / "import_raises.py"
    f["import_raises"].write_text("raise RuntimeError('at import')\n")
    f["import_exits"] = d / "import_exits.py"
    f["import_exits"].write_text("import os\nos._exit(0)\n")
    f["import_sleeps"] = d / "import_sleeps.py"
    f["import_sleeps"].write_text("import time\ntime.sleep(1000)\n")
    f["syntax"] = d / "syntax.py"
    f["syntax"].write_text("def f(:\n")
    f["binary"] = d / "binary.py"
    f["binary"].write_bytes(bytes(range(256)) * 8)
    f["empty"] = d / "empty.py"
    f["empty"].write_text("")
    f["dir"] = d / "adir"
    f["dir"].mkdir()
    f["regfile"] = d / "regfile"
    f["regfile"].write_text("x\n")
    f["triton_file"] = d / "acc.mlir"
    f["triton_file"].write_text(T_ACC)
    f["triton_binary"] = d / "bin.mlir"
    f["triton_binary"].write_bytes(b"\xff\xfe" * 100)
    f["table"] = d / "t.csv"
    f["table"].write_text("lane,reg,elem,row,col\n0,0,0,0,0\n")
    return {k: str(v) for k, v in f.items()}


def _mutate(rng: random.Random, s: str) -> str:
    """One deterministic mutation of s: drop, double or replace a character, or change a number."""
    import re

    k = rng.randrange(6)
    if k == 0 and s:
        i = rng.randrange(len(s))
        return s[:i] + s[i + 1:]
    if k == 1 and s:
        i = rng.randrange(len(s))
        return s[:i] + s[i] + s[i:]
    if k == 2 and s:
        i = rng.randrange(len(s))
        return s[:i] + rng.choice("()[],:;x<>{}=#-0 a\n") + s[i + 1:]
    nums = list(re.finditer(r"\d+", s))
    if not nums:
        return s + rng.choice([")", "(", ",", "]"])
    m = rng.choice(nums)
    new = rng.choice(["0", "-1", "3", "99999999999", "4294967296", "1" + "0" * 30, "65536", "7"])
    return s[:m.start()] + new + s[m.end():]


def _cases(f, heavy: bool = True) -> list[tuple[str, list[str]]]:
    """Every case; ``heavy=False`` leaves out the slow ones (a model that sleeps until the time
    limit, --identify, and the later mutants) for the default run."""
    rng = random.Random(19)
    cases: list[tuple[str, list[str]]] = []
    count: dict = {}

    def add(kind, *argv, slow=False):
        count[kind] = count.get(kind, 0) + 1
        if heavy or not slow:
            cases.append((kind, [str(a) for a in argv]))

    m = f["models"]
    cheap = ["--level", "matrix", "--count", "0", "--coverage", "probes"]     # a fuzzed option given later wins
    # ---- audit: options
    for op in ["", "x", "mma", F16[:-1] + "9", F16 + ".f32", WL, "\u202e" * 3, "a" * 5000, SP.replace("k32", "k33")]:
        add("audit", "audit", op, "--python", f"{m}:good", *cheap)
    for v in ["-1", "100000001", "x", "1e3", "", "99999999999999999999"]:
        add("audit", "audit", BF16, "--python", f"{m}:good", *cheap, "--count", v)
    for v in ["0", "-1", "nan", "inf", "-inf", "1e999", "x", ""]:
        add("audit", "audit", BF16, "--python", f"{m}:good", *cheap, "--model-timeout", v)
    for v in ["", ",", "nosuch", "mechanisms,nosuch", "a" * 3000]:
        add("audit", "audit", BF16, "--python", f"{m}:good", *cheap, "--coverage", v)
    for v in ["sm_9000", "", "exact ", "x" * 300]:
        add("audit", "audit", BF16, "--python", f"{m}:good", *cheap, "--arch", v)
    for v in ["x", "", "-99999999999999999999999"]:
        add("audit", "audit", BF16, "--python", f"{m}:good", *cheap, "--seed", v)
    for v in ["tensor", "", "regs regs"]:
        add("audit", "audit", BF16, "--python", f"{m}:good", *cheap, "--level", v)
    for opt in ("--markdown", "--save-vectors"):
        for p in (f["dir"], f["regfile"] + "/x.md", "/nonexistent/dir/x.md", ""):
            add("audit", "audit", BF16, "--python", f"{m}:good", *cheap, opt, p)
    # ---- audit: the --python argument
    for spec in ["", ":", "good", f"{m}", f"{m}:", f"{m}:nosuch", f"{m}:not_callable", f"{f['dir']}:f",
                 f"/nonexistent.py:f", f"{f['binary']}:f", f"{f['syntax']}:f", f"{f['empty']}:f",
                 f"{f['import_raises']}:f", f"{f['import_exits']}:f", f"{f['regfile']}:f", "a" * 5000 + ":f",
                 f"{m}:good:extra"]:
        add("audit", "audit", BF16, "--python", spec, *cheap)
    add("audit", "audit", BF16, "--python", f"{f['import_sleeps']}:f", *cheap, "--model-timeout", "1", slow=True)
    # ---- audit: what the model does (each runs in its own child process)
    for i, fn in enumerate(["none", "floats", "huge", "raises", "os_exit", "text", "lst", "neg", "scalar", "boolean",
                            "exits", "recursion", "interrupt", "generator"]):
        add("audit", "audit", BF16, "--python", f"{m}:{fn}", *cheap, slow=i >= 5)
    add("audit", "audit", BF16, "--python", f"{m}:sleeps", *cheap, "--model-timeout", "1", slow=True)
    add("audit", "audit", BF16, "--python", f"{m}:floats", "--level", "matrix", "--identify", slow=True)
    add("audit", "audit", BF16, "--python", f"{m}:os_exit", "--level", "matrix", "--identify", slow=True)

    # ---- layout audit --triton
    triton_bad = ["", " ", "#", "#ttg", "#ttg.linear<{}>", "#ttg.linear<{lane = []}>", "tensor<>", "tensor<16x8xf32>",
                  "#ttg.dot_op<{opIdx = 0, parent = #mma, kWidth = 2}>", "{", "[", "a" * 10000,
                  MMA + "\ntensor<0x0xf32, #mma>", MMA + "\ntensor<3x5xf32, #mma>",
                  MMA + "\ntensor<16x8x2xf32, #mma>", MMA + "\ntensor<100000x100000xf32, #mma>",
                  MMA.replace("versionMajor = 2", "versionMajor = 3") + "\ntensor<16x8xf32, #mma>",
                  MMA.replace("[1, 1]", "[4096, 4096]") + "\ntensor<64x64xf32, #mma>",
                  MMA.replace("[1, 1]", "[3, 1]") + "\ntensor<64x64xf32, #mma>",
                  MMA.replace("[1, 1]", "[0, 1]") + "\ntensor<64x64xf32, #mma>",
                  MMA.replace("[1, 1]", "[-1, 1]") + "\ntensor<64x64xf32, #mma>",
                  T_A.replace("kWidth = 2", "kWidth = 0"), T_A.replace("kWidth = 2", "kWidth = 3"),
                  T_A.replace("kWidth = 2", "kWidth = 1048576"), T_A.replace("opIdx = 0", "opIdx = 2"),
                  T_A.replace("xf16", "xf99"), T_A.replace("parent = #mma", "parent = #blocked"),
                  T_LIN.replace("[[0, 1], [8, 0]]", "[[0, 1], [8, 0], [0, 1099511627776]]"),
                  T_LIN.replace("[[0, 2], [0, 4], [1, 0], [2, 0], [4, 0]]", "[[0, 2]]"),
                  T_LIN.replace("[[0, 1], [8, 0]]", "[[0, 1, 2], [8]]"),
                  T_LIN.replace("[[0, 1], [8, 0]]", "[[0, -1], [-8, 0]]"),
                  T_LIN.replace("[[0, 1], [8, 0]]", ",".join(["[0, 1]"] * 40)),
                  "#ttg.linear<{register = [[0, 1]], lane = " + "[" * 5000 + "]" * 5000 + "}>",
                  f["triton_binary"], f["dir"], "/nonexistent.mlir"]
    for t in triton_bad:
        add("triton", "layout", "audit", F16, "--operand", "c", "--triton", t)
        add("triton", "layout", "audit", "--triton", t)
    for i in range(60):
        base = rng.choice([T_ACC, T_A, T_B, T_LIN])
        t = _mutate(rng, base)
        add("triton", "layout", "audit", "--triton", t, *(["--operand", "c"] if base in (T_ACC, T_LIN) else []),
            slow=i >= 40)
    for extra in (["--triton-shape", "0x0"], ["--triton-shape", "16"], ["--triton-shape", "1e9x1e9"],
                  ["--triton-shape", "-16x8"], ["--triton-dtype", "f99"], ["--operand", "z"], ["--operand", "b"],
                  ["--triton", T_B], ["--triton", T_B, "--triton", T_B], ["--triton", T_ACC], ["--operand", "a",
                                                                                             "--triton", T_B]):
        add("triton", "layout", "audit", "--triton", T_A, *extra)
    add("triton", "layout", "audit", F16, "--triton", "#ttg.dot_op<{opIdx = 0, parent = #mma, kWidth = 2}>",
        "--triton-shape", "16x16", "--triton-dtype", "f16")

    # ---- layout audit --cute-tile
    for tile in ["", "x", "32", "32x", "x16", "0x16", "-32x16", "32x16x2", "1e9x1e9", "100000x100000", "٣٢x16",
                 "32X16", "32 x 16", "99999999999999999999x1"]:
        add("cute", "layout", "audit", F16, "--operand", "c", "--cute", CUTE_C, "--cute-tile", tile)
    for tv in ["", "(", "((4,8,2,2),(2,2))", "((4,8,4096,4096),(2,2)):((64,1,16,256),(32,8))",
               "((4,8,2,2),(2,2)):((64,1,16,256),(32,8,1))", "((4,8,2),(2,2)):((64,1,16),(32,8))",
               "((4,8,2,2),(2,3)):((64,1,16,256),(32,8))", "((4,8,2,2),(2,2)):((-64,1,16,256),(32,8))",
               "((4,8,2,2),(2,2)):((4294967296,1,16,256),(32,8))", "((0,8,2,2),(2,2)):((64,1,16,256),(32,8))",
               "(4,8):(1,4)", "4:1", "((4,8,2,2),(2,2)):((64,1,16,256),(32,8)):(1)", "a" * 5000,
               "(" * 40 + "4" + ")" * 40 + ":" + "(" * 40 + "1" + ")" * 40]:
        add("cute", "layout", "audit", F16, "--operand", "c", "--cute", tv, "--cute-tile", "32x16")
    for i in range(40):
        add("cute", "layout", "audit", F16, "--operand", "c", "--cute", _mutate(rng, CUTE_C), "--cute-tile", "32x16",
            slow=i >= 16)
    for op in ("e", "scale_a", "z", "d", "b"):
        add("cute", "layout", "audit", F16, "--operand", op, "--cute", CUTE_C, "--cute-tile", "32x16")
    for form in (SP, M8, WMMA, WL):
        add("cute", "layout", "audit", form, "--operand", "c", "--cute", CUTE_C, "--cute-tile", "32x16")
    add("cute", "layout", "audit", F16, "--cute", CUTE_C, "--cute-tile", "32x16")

    # ---- layout audit-atom
    atom_bad = ["", ":", "bogus:1", "cute:", "cute:(", "cute:" + "a" * 5000, "cute:((4,8),(2,2)):((32,1),(16,8),(1))",
                "cute:((4,8),(2,2,2)):((32,1),(16,8,128))", "cute:((4,8),(2,2)):((4294967296,1),(16,8))",
                "table:", "table:/nonexistent.csv", f"table:{f['table']}", f"table:{f['dir']}",
                "formula:", "formula:row=lane", "formula:row=lane;col=lane % 0", "formula:row=(((lane;col=1",
                "formula:row=lane**99999;col=1", "python:", f"python:{m}", f"python:{m}:nosuch",
                f"python:{m}:lay", f"python:{m}:lay_raises", f"python:{m}:lay_exit", f"python:{m}:lay_none",
                f"python:{m}:lay_huge", f"python:{f['import_raises']}:f", f"python:{f['syntax']}:f",
                "triton:", "triton:#ttg", "triton:" + T_ACC, "triton:" + T_A.replace("kWidth = 2", "kWidth = 3"),
                "triton:" + MMA.replace("[1, 1]", "[4096, 4096]") + "\ntensor<64x64xf32, #mma>",
                "spec:", "SPEC", "spec"]
    for v in atom_bad:
        for o in ("--a", "--b", "--c"):
            add("atom", "layout", "audit-atom", F16, o, v)
    for i in range(30):
        add("atom", "layout", "audit-atom", F16, "--a", "cute:" + _mutate(rng, CUTE_A), "--b", "cute:" + CUTE_B,
            slow=i >= 10)
    for form in (SP, M8, WMMA, WL, "", "x", F16 + "x"):
        add("atom", "layout", "audit-atom", form, "--a", "cute:" + CUTE_A)
    add("atom", "layout", "audit-atom", F16)
    add("atom", "layout", "audit-atom", F16, F16, "--a", "spec")
    add("atom", "layout", "audit-atom")
    return cases


def _run(argv):
    out, err = io.StringIO(), io.StringIO()
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(LIMIT_S)
    t0 = time.monotonic()
    try:
        with redirect_stdout(out), redirect_stderr(err):
            rc = main(argv)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return rc, out.getvalue(), err.getvalue(), time.monotonic() - t0


def test_enough_cases(files):
    for heavy, least in ((False, 300), (True, 440)):
        cases = _cases(files, heavy)
        kinds = {}
        for k, _ in cases:
            kinds[k] = kinds.get(k, 0) + 1
        assert len(cases) >= least, len(cases)
        assert all(kinds[k] >= 50 for k in ("audit", "triton", "cute", "atom")), kinds


@pytest.mark.parametrize("kind", ["audit", "triton", "cute", "atom"])
def test_fuzz(files, kind):
    _fuzz(files, kind, heavy=False)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["audit", "triton", "cute", "atom"])
def test_fuzz_all(files, kind):
    _fuzz(files, kind, heavy=True)


def _fuzz(files, kind, heavy):
    bad = []
    for k, argv in _cases(files, heavy):
        if k != kind:
            continue
        rc, out, err, dt = _run(argv)
        why = None
        if rc not in (0, 1, 2, 3):
            why = f"exit {rc}"
        elif "Traceback" in err or "Traceback" in out:
            why = "traceback"
        elif rc == 2 and (err.count("\n") != 1 or not err.startswith("ptx-formal: error:")):
            why = "exit 2 without one error line"
        elif len(err) > 4500:
            why = f"{len(err)} characters on stderr (a huge input echoed back?)"
        elif dt > LIMIT_S:
            why = f"{dt:.1f} s"
        if why:
            bad.append((why, [a[:80] for a in argv], err[-300:]))
    assert not bad, "\n".join(f"{w}: {a} -> {e}" for w, a, e in bad)
