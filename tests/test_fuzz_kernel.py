"""Fuzz `kernel lint|check|run` with malformed modules, specs and --inputs (issue 19).

Every case runs in-process under a per-case time limit and must give an exit code in {0,1,2,3}
(never 4, never a hang), no traceback, and for 2 and 3 one line on stderr starting with
``ptx-formal`` that is not an echo of a huge input.  Targeted cases (a construct known to be bad
input, or unsupported) must give exactly their code.  The cases are generated deterministically
from the checked-in tiny_mma kernel and its spec; the whole file runs in a few seconds.
"""

from __future__ import annotations

import contextlib
import io
import random
import signal
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from formal.cli import main

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "kernels_small"
PTX = (DATA / "tiny_mma.ptx").read_text()
SPEC = (DATA / "tiny_mma.toml").read_text()
CASE_SECONDS = 5.0
ANY = {0, 1, 2, 3}


class _Timeout(BaseException):
    pass


# ------------------------------------------------------------------ generation

def _module_cases(rng: random.Random) -> list:
    """(name, module text or bytes, allowed exit codes for lint, check)."""
    out = []
    lines = PTX.split("\n")
    body = [i for i, l in enumerate(lines) if l.startswith("\t") and "bra" not in l]

    def sub(old, new):
        assert old in PTX, old
        return PTX.replace(old, new, 1)
    # targeted: each a known verdict (lint code, check code)
    targeted = [
        ("version99", sub(".version 7.8", ".version 99.0"), 2, 2),
        ("version_text", sub(".version 7.8", ".version x.y"), 2, 2),
        ("version_missing", sub(".version 7.8", ""), 2, 2),
        ("target999", sub(".target sm_80", ".target sm_999"), 2, 2),
        ("target_empty", sub(".target sm_80", ".target"), 2, 2),
        ("target_new_for_version", sub(".target sm_80", ".target sm_100a"), 2, 2),
        ("address_size", sub(".address_size 64", ".address_size 65"), 2, 2),
        ("reg_range_huge", sub(".reg .b32 \t%r<40>;", ".reg .b32 \t%r<40>;\n\t.reg .b32 \t%q<999999999999>;"), 0, 0),
        ("reg_range_absurd", sub(".reg .b32 \t%r<40>;", ".reg .b32 \t%q<9999999999999999999999>;"), 2, 2),
        ("shared_huge", sub("sA[512]", "sA[99999999999]"), 2, 2),
        ("shared_dim_expr", sub("sA[512]", "sA[9**9]"), 2, 2),
        ("local_huge", sub(".shared .align 16 .b8 sB[256];", ".shared .align 16 .b8 sB[256];\n\t.local .b8 l[999999999];"), 2, 2),
        ("global_huge", sub(".visible .entry", ".global .b8 g[99999999999];\n.visible .entry"), 0, 3),
        ("offset_pow", sub("[%rd9+256]", "[%rd9+9**9**9]"), 2, 2),
        ("offset_long", sub("[%rd9+256]", "[%rd9+" + "1+" * 500 + "1]"), 2, 2),
        ("offset_deep", sub("[%rd9+256]", "[%rd9+" + "(" * 500 + "1" + ")" * 500 + "]"), 2, 2),
        ("offset_digits", sub("[%rd9+256]", "[%rd9+" + "9" * 5000 + "]"), 2, 2),
        ("offset_expr_ok", sub("[%rd9+256]", "[%rd9+(128*2)]"), 0, 0),
        ("imm_huge", sub("shl.b32 \t%r2, %r1, 4;", "shl.b32 \t%r2, %r1, 99999999999999999999999;"), 2, 2),
        ("label_twice", sub("\tret;", "$L1:\n$L1:\n\tret;"), 2, 2),
        ("label_scoped_twice", sub("\tret;", "{\n$L1:\n}\n{\n$L1:\n}\n\tret;"), 0, 0),
        ("unbalanced_open", sub("\tret;", "{\n\tret;"), 2, 2),
        ("unbalanced_close", PTX + "\n}\n", 2, 2),
        ("deep_blocks", sub("\tret;", "{" * 3000 + "}" * 3000 + "\n\tret;"), 0, 0),
        ("unknown_directive", sub("\tret;", "\t.frobnicate 3;\n\tret;"), 2, 2),
        ("unknown_module_directive", sub(".visible .entry", ".frobnicate 3;\n.visible .entry"), 2, 2),
        ("unknown_fn_directive", sub(".reqntid 32", ".reqntid 32 .frob 1"), 2, 2),
        ("reqntid_mismatch", sub(".reqntid 32", ".reqntid 64"), 0, 2),
        ("maxntid_small", sub(".reqntid 32", ".maxntid 16"), 0, 2),
        ("explicitcluster", sub(".reqntid 32", ".reqntid 32\n.explicitcluster"), 0, 0),     # a 1-CTA cluster
        ("cluster2", sub(".reqntid 32", ".reqntid 32\n.reqnctapercluster 2"), 0, 2),       # the spec says 1 CTA
        ("call_undeclared", sub("\tret;", "\tcall.uni foo;\n\tret;"), 0, 3),
        ("call_extern", sub(".visible .entry", ".extern .func foo();\n.visible .entry").replace("\tret;", "\tcall.uni foo;\n\tret;"), 0, 3),
        ("call_indirect", sub("\tret;", "\tcall.uni %rd1, ();\n\tret;"), 0, 3),
        ("call_no_target", sub("\tret;", "\tcall.uni;\n\tret;"), 2, 2),
        ("call_bad_list", sub("\tret;", "\tcall.uni (a, foo;\n\tret;"), 2, 2),
        ("atom", sub("\tbar.sync \t0;", "\tatom.shared.add.u32 \t%r39, [%r8], 1;"), 0, 3),
        ("wgmma", sub("\tbar.sync \t0;", "\twgmma.fence.sync.aligned;"), 1, 3),
        ("tma_operand", sub("\tbar.sync \t0;", "\tcp.async.bulk.prefetch.tensor.2d.L2.global.tile [%rd1, {%r1, %r2}];"), 0, 3),
        ("undeclared_reg", sub("mov.u32 \t%r1, %tid.x;", "mov.u32 \t%r1, %zz9;"), 0, 3),
        ("sym_init", sub(".visible .entry", ".global .u64 gp = generic(gp);\n.visible .entry"), 0, 0),
        ("float_init", sub(".visible .entry", ".const .f32 cf[2] = {1.5, 0f3F800000};\n.visible .entry"), 0, 0),
        ("bad_init", sub(".visible .entry", ".const .u32 cf[2] = {1, 2;\n.visible .entry"), 2, 2),
        ("comment_open", sub("\tret;", "\t/* never closed\n\tret;"), 2, 2),
        ("string_open", sub("\tret;", '\t.pragma "nounroll;\n\tret;'), 2, 2),
        ("mma_shape", sub("m16n8k16.row.col", "m16n8k99.row.col"), 2, 2),
        ("mma_target_old", sub(".target sm_80", ".target sm_75"), 1, 0),
        ("no_entry", sub(".visible .entry tiny_mma", ".visible .func tiny_mma"), 0, 2),
        ("two_functions_same", PTX + PTX[PTX.index(".visible"):], 2, 2),
        ("params_unclosed", sub(".param .u64 tiny_mma_param_2       // C\n)", ".param .u64 tiny_mma_param_2\n"), 2, 2),
        ("align_bad", sub(".shared .align 16 .b8 sA", ".shared .align 3 .b8 sA"), 2, 2),
        ("reg_no_type", sub(".reg .f32 \t%f<8>;", ".reg \t%f<8>;"), 2, 2),
        ("reg_nospace", sub(".reg .f32 \t%f<8>;", ".reg.f32 \t%f<8>;"), 0, 0),
        ("empty", "", 2, 2),
        ("binary", bytes(range(256)) * 8, 2, 2),
        ("latin1", PTX.replace("// A: 512", "// caf\xe9 512").encode("latin-1"), 2, 2),
        ("nul", PTX.replace("\tret;", "\t\x00ret;"), 2, 2),
        ("long_line", sub("\tret;", "\tmov.u32 %r1, " + "1" * 200_000 + ";\n\tret;"), 2, 2),
        ("many_ops", sub("\tret;", "\tadd.u32 %r1" + ", %r2" * 20_000 + ";\n\tret;"), 0, 3),
        ("big_module", sub("\tret;", "\tadd.u32 \t%r39, %r39, 1;\n" * 20_000 + "\tret;"), 0, 0),
    ]
    out += [(f"mod-{n}", t, {lc}, {cc}) for n, t, lc, cc in targeted]
    # random: a line deleted, a token replaced, the text cut
    nasty = ["9**9**9", "%r<999999999>", "{", "}", ";", "::", '"', "/*", "0x" + "f" * 40, "\u00df", "[%rd1+", "]",
             "@", "@!", "%", ".", "-", "0f", "0dZZ", "_", "{%r1,}", "[[%rd1]]", "%p1|", "|", "(", ")", "1e999",
             ".reg", ".b8 x[]", "//", "\\", "'", "\t", "%tid.w", "%ctaid.x.y", "!%r1"]
    for k in range(60):
        i = rng.choice(body)
        out.append((f"mod-del-{k}", "\n".join(lines[:i] + lines[i + 1:]), ANY, ANY))
    for k in range(70):
        i = rng.choice(body)
        toks = lines[i].split()
        j = rng.randrange(len(toks))
        toks[j] = rng.choice(nasty) if rng.random() < 0.8 else toks[j][::-1]
        out.append((f"mod-tok-{k}", "\n".join(lines[:i] + ["\t" + " ".join(toks)] + lines[i + 1:]), ANY, ANY))
    for k in range(20):
        out.append((f"mod-cut-{k}", PTX[:rng.randrange(len(PTX))], ANY, ANY))
    return out


def _spec_cases(rng: random.Random) -> list:
    """(name, spec text or bytes, allowed exit codes for check and run)."""
    def sub(old, new):
        assert old in SPEC, old
        return SPEC.replace(old, new, 1)
    targeted = [
        ("stides", sub("shape = [16, 8]\n", "shape = [16, 8]\nstides = [8, 1]\n")),
        ("shred_bytes", "shred_bytes = 0\n" + SPEC),
        ("top_typo", sub("grid =", "gird =")),
        ("buffer_typo", sub("shape = [16, 16]", "shpe = [16, 16]")),
        ("contract_table_typo", sub("[contract]", "[contracts]")),
        ("pointer_override", sub("[contract]", "[params]\ntiny_mma_param_0 = 5\n[contract]")),
        ("no_such_param", sub('"tiny_mma_param_2"', '"tiny_mma_param_9"')),
        ("hash_param_range", sub('"tiny_mma_param_2"', '"#7"')),
        ("hash_param_huge", sub('"tiny_mma_param_2"', '"#99999999999"')),
        ("no_such_entry", sub('entry = "tiny_mma"', 'entry = "tiny_mm"')),
        ("param_not_in_module", sub("[contract]", "[params]\nn = 3\n[contract]")),
        ("param_too_wide", sub("[contract]", "[params]\n\"#0\" = 1\n[contract]")),
        ("zero_strides", sub("shape = [16, 8]\n", "shape = [16, 8]\nstrides = [0, 1]\n")),
        ("overlap_strides", sub("shape = [16, 8]\n", "shape = [16, 8]\nstrides = [1, 1]\n")),
        ("huge_shape", sub("shape = [16, 16]", "shape = [100000, 100000]")),
        ("huge_int", sub("shape = [16, 16]", "shape = [99999999999999999999, 2]")),
        ("neg_shape", sub("shape = [16, 16]", "shape = [-16, 16]")),
        ("float_shape", sub("shape = [16, 16]", "shape = [16.5, 16]")),
        ("rank5", sub("shape = [16, 16]", "shape = [1, 1, 1, 1, 1]")),
        ("type_unknown", sub('type = "f16"', 'type = "f17"')),
        ("type_subbyte", sub('type = "f16"', 'type = "s4"')),
        ("grid_zero", sub("grid = [1, 1, 1]", "grid = [0, 1, 1]")),
        ("grid_huge", sub("grid = [1, 1, 1]", "grid = [2147483647, 2147483647, 1]")),
        ("block_big", sub("block = [32, 1, 1]", "block = [2048, 1, 1]")),
        ("block_mismatch", sub("block = [32, 1, 1]", "block = [64, 1, 1]")),
        ("contract_bad", sub('C = "A @ B"', 'C = "A * B"')),
        ("contract_deep", sub('C = "A @ B"', 'C = "' + "(" * 5000 + "A @ B" + ")" * 5000 + '"')),
        ("contract_long", sub('C = "A @ B"', 'C = "' + "A @ " * 5000 + 'B"')),
        ("contract_unknown", sub('C = "A @ B"', 'C = "A @ X"')),
        ("contract_shapes", sub('C = "A @ B"', 'C = "A @ B.T"')),
        ("contract_twice", sub('C = "A @ B"', 'C = "A @ B"\nD = "A @ B"')),
        ("toml_deep", SPEC + "note = " + "[" * 20000 + "]" * 20000 + "\n"),
        ("toml_bad", SPEC + "x = = 1\n"),
        ("toml_binary", bytes(range(256))),
        ("toml_empty", ""),
        ("toml_huge", "note = \"" + "x" * 2_000_000 + "\"\n"),
        ("view_missing_buffer", SPEC + '[[view]]\nname = "D"\nbuffer = "Z"\n'),
        ("view_layout", SPEC + '[[view]]\nname = "D"\nbuffer = "C"\nlayout = "diag"\n'),
        ("view_typo", SPEC + '[[view]]\nname = "D"\nbufer = "C"\n'),
        ("view_outside", SPEC + '[[view]]\nname = "D"\nbuffer = "C"\noffset = 100\n'),
        ("view_as_table", SPEC + '[view]\nname = "D"\n'),
        ("params_words_big", sub("[contract]", "[params]\n\"#0\" = [1, 2, 3]\n[contract]")),
        ("params_hex_bad", sub("[contract]", "[params]\n\"#0\" = \"0xZZ\"\n[contract]")),
        ("params_field_type", sub("[contract]", "[params.\"#0\"]\n0 = { q32 = 1 }\n[contract]")),
        ("params_field_offset", sub("[contract]", "[params.\"#0\"]\nx = { u32 = 1 }\n[contract]")),
        ("params_bool", sub("[contract]", "[params]\n\"#0\" = true\n[contract]")),
        ("buffer_offset_scalar", sub('param = "tiny_mma_param_2"', 'param = "tiny_mma_param_2"\noffset = 8')),
        ("buffer_offset_huge", sub('param = "tiny_mma_param_2"', 'param = "tiny_mma_param_2"\noffset = 99999999999')),
        ("same_param", sub('"tiny_mma_param_2"', '"tiny_mma_param_1"')),
        ("names_repeat", sub('name = "C"', 'name = "A"')),
        ("buffer_not_table", sub("[[buffer]]\nname = \"C\"", "buffer = 3\n[[x]]\nname = \"C\"")),
        ("chained_bad", 'chained = ["Q"]\n' + SPEC),
    ]
    # all bad input (2); a contract only check reads: run does not look at it
    out = [(f"spec-{n}", t, {2}, {0} if n == "contract_shapes" else {2}) for n, t in targeted]
    keys = ["entry", "grid", "block", "name", "param", "type", "shape", "contract"]
    for k in range(40):
        key = rng.choice(keys)
        i = rng.randrange(len(key))
        typo = key[:i] + key[i + 1:] if rng.random() < 0.5 else key[:i] + rng.choice("xyz_") + key[i:]
        if typo == key:
            continue
        out.append((f"spec-typo-{k}", SPEC.replace(f"{key} =", f"{typo} =", 1).replace(f"[{key}]", f"[{typo}]", 1),
                    {2}, {2}))
    values = ["-1", "0", "1.5", '"x"', "[]", "[[1]]", "{}", "true", "99999999999999999999", "[1, 2, 3, 4, 5]",
              '"' + "y" * 5000 + '"', "nan", "inf", "[0]", '["a"]']
    for k in range(50):
        key = rng.choice(["grid", "block", "shape", "type", "name", "param", "entry"])
        v = rng.choice(values)
        lines = SPEC.split("\n")
        idx = [i for i, l in enumerate(lines) if l.startswith(f"{key} =")]
        i = rng.choice(idx)
        lines[i] = f"{key} = {v}"
        out.append((f"spec-val-{k}", "\n".join(lines), ANY, ANY))
    return out


def _input_cases(rng: random.Random) -> list:
    """(name, builder(dir) -> path, allowed exit codes for run)."""
    from formal import kernel
    spec = kernel.load_spec(SPEC)
    good = kernel.make_inputs(spec, seed=1, names=["A", "B"])

    def npz(**arrays):
        def build(d, name):
            p = d / f"{name}.npz"
            np.savez(p, **arrays)
            return p
        return build

    def raw(data: bytes, suffix=".npz"):
        def build(d, name):
            p = d / f"{name}{suffix}"
            p.write_bytes(data)
            return p
        return build

    def npy(arr):
        def build(d, name):
            p = d / f"{name}.npy"
            np.save(p, arr)
            return p
        return build
    buf = io.BytesIO()
    np.savez(buf, **good)
    whole = buf.getvalue()
    zbuf = io.BytesIO()
    with zipfile.ZipFile(zbuf, "w") as z:
        z.writestr("A.npy", b"not an array")
    cases = [
        ("empty", raw(b""), {2}),
        ("npy", npy(good["A"]), {2}),
        ("zip_garbage", raw(zbuf.getvalue()), {2}),
        ("text", raw(b"hello"), {2}),
        ("float32", npz(A=good["A"].astype(np.float32), B=good["B"]), {2}),
        ("float64", npz(A=good["A"].astype(np.float64), B=good["B"]), {2}),
        ("float16_values", npz(A=good["A"].view(np.float16), B=good["B"]), {2}),
        ("complex", npz(A=good["A"].astype(np.complex64), B=good["B"]), {2}),
        ("bool", npz(A=good["A"] > 0, B=good["B"]), {2}),
        ("strings", npz(A=np.array(["x"] * 256).reshape(16, 16), B=good["B"]), {2}),
        ("shape", npz(A=good["A"][:8], B=good["B"]), {2}),
        ("rank", npz(A=good["A"].ravel(), B=good["B"]), {2}),
        ("scalar", npz(A=np.uint16(3), B=good["B"]), {2}),
        ("unknown_name", npz(A=good["A"], Z=good["B"]), {2}),
        ("out_of_range", npz(A=good["A"].astype(np.uint32) + 70000, B=good["B"]), {2}),
        ("negative_ok", npz(A=good["A"].astype(np.int16), B=good["B"]), {0}),
        ("wide_ok", npz(A=good["A"].astype(np.uint64), B=good["B"]), {0}),
        ("empty_archive", npz(), {0}),
        ("good", npz(**good), {0}),
    ]
    for k in range(25):
        cut = rng.randrange(1, len(whole))
        cases.append((f"trunc-{k}", raw(whole[:cut]), {2}))
    for k in range(10):
        b = bytearray(whole)
        for _ in range(rng.randint(1, 40)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        cases.append((f"flip-{k}", raw(bytes(b)), ANY))
    return [(f"in-{n}", b, c) for n, b, c in cases]


_RNG = random.Random(19)
MODULES = _module_cases(_RNG)
SPECS = _spec_cases(_RNG)
INPUTS = _input_cases(_RNG)
OUTS = [("dev_full", "/dev/full", {2}), ("missing_dir", "{d}/no/such/dir/out.npz", {2}),
        ("under_file", "{d}/regular/out.npz", {2}), ("is_dir", "{d}", {2}), ("plain_name", "{d}/out_plain", {0})]


# ------------------------------------------------------------------ running

@pytest.fixture(scope="module")
def work(tmp_path_factory):
    d = tmp_path_factory.mktemp("kfuzz")
    (d / "regular").write_text("a file")
    (d / "tiny.ptx").write_text(PTX)
    (d / "tiny.toml").write_text(SPEC)
    return d


def run_case(argv: list[str]) -> tuple[int, str, str, float]:
    out, err = io.StringIO(), io.StringIO()

    def alarm(*_):
        raise _Timeout(f"more than {CASE_SECONDS} s")
    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, CASE_SECONDS)
    t = time.monotonic()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(argv)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    return rc, out.getvalue(), err.getvalue(), time.monotonic() - t


def check_contract(argv, allowed, rc, out, err, dt):
    where = f"argv={[a if len(a) < 100 else a[:60] + '...' for a in argv]} exit {rc} in {dt:.1f}s\nstderr: {err[-800:]}"
    assert "_Timeout" not in err, "hang: " + where
    assert "Traceback" not in out + err, where
    assert rc in allowed, where
    if rc in (2, 3):
        lines = err.strip().split("\n")
        assert len(lines) == 1 and lines[0].startswith("ptx-formal"), where
        assert len(lines[0]) <= 700, f"an error line of {len(lines[0])} characters\n{where}"
    if rc == 4:
        pytest.fail("internal error: " + where)


def _write(path: Path, content) -> Path:
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


# targeted cases under both commands; random ones alternate between them (fewer runs, the same reach)
MODULE_RUNS = [(c, cmd) for i, c in enumerate(MODULES) for cmd in ("lint", "check")
               if not c[0].startswith(("mod-del-", "mod-tok-", "mod-cut-")) or cmd == ("lint", "check")[i % 2]]
SPEC_RUNS = [(c, cmd) for i, c in enumerate(SPECS) for cmd in ("check", "run")
             if not c[0].startswith(("spec-typo-", "spec-val-")) or cmd == ("check", "run")[i % 2]]


@pytest.mark.parametrize("case,cmd", MODULE_RUNS, ids=[f"{c[0]}-{cmd}" for c, cmd in MODULE_RUNS])
def test_malformed_modules(case, cmd, work):
    name, content, lint_codes, check_codes = case
    p = _write(work / f"{name}.ptx", content)
    argv = ["kernel", cmd, str(p)] + (["--spec", str(work / "tiny.toml"), "--no-lanes"] if cmd == "check" else [])
    check_contract(argv, lint_codes if cmd == "lint" else check_codes, *run_case(argv))


@pytest.mark.parametrize("case,cmd", SPEC_RUNS, ids=[f"{c[0]}-{cmd}" for c, cmd in SPEC_RUNS])
def test_malformed_specs(case, cmd, work):
    name, content, check_codes, run_codes = case
    p = _write(work / f"{name}.toml", content)
    argv = ["kernel", cmd, str(work / "tiny.ptx"), "--spec", str(p)] + (["--no-lanes"] if cmd == "check" else [])
    check_contract(argv, check_codes if cmd == "check" else run_codes, *run_case(argv))


@pytest.mark.parametrize("case", INPUTS, ids=[c[0] for c in INPUTS])
def test_malformed_inputs(case, work):
    name, build, codes = case
    p = build(work, name)
    argv = ["kernel", "run", str(work / "tiny.ptx"), "--spec", str(work / "tiny.toml"), "--inputs", str(p)]
    check_contract(argv, codes, *run_case(argv))


@pytest.mark.parametrize("case", OUTS, ids=[c[0] for c in OUTS])
def test_outputs(case, work):
    name, out, codes = case
    path = out.format(d=work)
    argv = ["kernel", "run", str(work / "tiny.ptx"), "--spec", str(work / "tiny.toml"), "--out", path]
    rc, stdout, err, dt = run_case(argv)
    check_contract(argv, codes, rc, stdout, err, dt)
    if rc == 0:
        assert Path(path).is_file() and not Path(path + ".npz").exists() and f"wrote {path}" in stdout
    else:
        assert "wrote" not in stdout


def test_missing_inputs_file_and_missing_output_directory_fail_before_the_run(work, monkeypatch):
    import formal.kernel
    calls = []
    monkeypatch.setattr(formal.kernel, "run", lambda *a, **k: calls.append(1))
    for argv in (["kernel", "run", str(work / "tiny.ptx"), "--spec", str(work / "tiny.toml"), "--out",
                  str(work / "nodir" / "o.npz")],
                 ["kernel", "run", str(work / "tiny.ptx"), "--spec", str(work / "tiny.toml"), "--inputs",
                  str(work / "missing.npz")]):
        rc, _, err, _ = run_case(argv)
        assert rc == 2 and err.count("\n") == 1
    assert not calls


def test_enough_cases():
    n = len(MODULE_RUNS) + len(SPEC_RUNS) + len(INPUTS) + len(OUTS)
    assert n >= 300, n
