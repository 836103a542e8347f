"""Every module ptxas accepts is read (issue 19): PTX scoping, .func calls, by-value struct and
wide parameters, the directives compilers emit; what the engine does not model is unsupported
(exit 3) with its line, never malformed (2) or misread.  The modules in tests/data/kernels_frontend/
are hand-written for this test, each assembled by ptxas here when it is installed."""

from __future__ import annotations

import io
import shutil
import subprocess
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import numpy as np
import pytest

from formal import kernel
from formal.cli import main
from formal.kernel import parse as P

DATA = Path(__file__).parent / "data" / "kernels_frontend"
ARCH = {"scope.ptx": "sm_80", "calls.ptx": "sm_80", "directives.ptx": "sm_90a"}


def text(name: str) -> str:
    return (DATA / name).read_text()


def cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="needs ptxas")
@pytest.mark.parametrize("name", sorted(ARCH))
def test_ptxas_accepts_every_module(name, tmp_path):
    subprocess.run(["ptxas", f"-arch={ARCH[name]}", str(DATA / name), "-o", str(tmp_path / "x.cubin")], check=True)


@pytest.mark.parametrize("name", sorted(ARCH))
def test_lint_reads_every_module(name):
    rc, out, err = cli("kernel", "lint", str(DATA / name))
    assert rc == 0 and err == "", err


# ------------------------------------------------------------------ scoping

SCOPE_SPEC = """
entry = "scope"
grid = [1]
block = [32]
[[buffer]]
name = "out"
param = "scope_param_0"
type = "s32"
shape = [32]
"""


def test_block_scoped_labels_and_registers():
    mod = kernel.parse_module(text("scope.ptx"))
    f = mod.entry()
    waits = sorted(l for l in f.labels if l.startswith("LAB_WAIT"))
    assert len(waits) == 2 and len(set(f.labels[w] for w in waits)) == 2
    # the inner %r2 shadows the outer one: the loop counts its own %r2 to 3, the outer stays 5
    out = kernel.run(mod, SCOPE_SPEC, {})
    assert not out.witnesses
    assert np.array_equal(out["out"], np.arange(32) + 3 + 5)


def test_label_defined_twice_in_one_block_is_malformed():
    bad = text("scope.ptx").replace("\tLAB_WAIT:\n\t}", "\tLAB_WAIT:\n\tLAB_WAIT:\n\t}")
    with pytest.raises(kernel.PTXSyntaxError, match="LAB_WAIT defined twice"):
        kernel.parse_module(bad)


def test_launch_against_reqntid():
    with pytest.raises(kernel.SpecError, match=r"reqntid 32, 1, 1.*\[32, 1, 1\]"):
        kernel.run(kernel.parse_module(text("scope.ptx")), SCOPE_SPEC.replace("block = [32]", "block = [64]"), {})


# ------------------------------------------------------------------ calls and struct parameters

CALLS_SPEC = """
entry = "calls"
grid = [1]
block = [32]
[params]
calls_param_1 = {which}
[params.calls_param_0]
8 = {{ s32 = 16 }}
12 = {{ f32 = 2.0 }}
[[buffer]]
name = "a"
param = "calls_param_0"
type = "f32"
shape = [32]
[[buffer]]
name = "out"
param = "calls_param_0"
offset = 24
type = "f32"
shape = [32]
"""


def test_calls_inlined_with_struct_parameters():
    mod = kernel.parse_module(text("calls.ptx"))
    f = mod.entry("calls")
    assert not any(i.head == "call" and i.unsupported is None for i in f.instrs)   # pick, scale (via .alias)
    a = (np.arange(32, dtype=np.float32) + 0.5)
    out = kernel.run(mod, CALLS_SPEC.format(which=0), {"a": a.view(np.uint32)})
    assert not out.witnesses
    want = np.where(np.arange(32) < 16, a * 2.0, 0).astype(np.float32)
    assert np.array_equal(out["out"].view(np.float32), want)


@pytest.mark.parametrize("which,line,why", [(1, 66, "recursive call of down"),
                                            (2, 156, "vprintf, which has no body in this module")])
def test_calls_that_cannot_be_inlined_are_unsupported_with_their_line(which, line, why, tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text(CALLS_SPEC.format(which=which))
    rc, _, err = cli("kernel", "run", str(DATA / "calls.ptx"), "--spec", str(spec))
    assert rc == 3 and f"line {line}:" in err and why in err and err.count("\n") == 1, err


@pytest.mark.parametrize("edit,needle", [
    (lambda s: s.replace("offset = 24", "offset = 32"), "writes bytes 32..39 of calls_param_0, which has 32 bytes"),
    (lambda s: s.replace("offset = 24", "offset = 20"), "not 8-byte aligned"),
    (lambda s: s.replace("offset = 24", "offset = 8"), "both set bytes of calls_param_0"),
    (lambda s: s.replace("12 = { f32 = 2.0 }", "12 = { f32 = 2.0 }\n0 = { u64 = 5 }"), "both set bytes"),
    (lambda s: s.replace("calls_param_1 = 0", "calls_param_1 = 4294967296"), "does not fit the 32-bit"),
    (lambda s: s.replace("calls_param_1 = 0", "calls_param_2 = 0"), "parameters: calls_param_0 (32-byte struct), "
                                                                   "calls_param_1 (32-bit)"),
    (lambda s: s.replace('param = "calls_param_0"\ntype = "f32"\nshape = [32]\n[[buffer]]', 'param = "#5"\ntype = "f32"\n'
                         'shape = [32]\n[[buffer]]'), "#5, but calls has 2 parameters"),
    (lambda s: s.replace('offset = 24\n', '').replace('name = "out"\nparam = "calls_param_0"',
                                                      'name = "out"\nparam = "calls_param_1"'), "too small for a 64-bit pointer"),
    (lambda s: s.replace("8 = { s32 = 16 }", "8 = { s32 = 16.5 }"), "not an integer"),
    (lambda s: s.replace("8 = { s32 = 16 }", "8 = { s33 = 16 }"), "(did you mean 's32'?)"),
])
def test_struct_parameter_errors(edit, needle):
    with pytest.raises(kernel.SpecError) as e:
        kernel.run(kernel.parse_module(text("calls.ptx")), edit(CALLS_SPEC.format(which=0)), {})
    assert needle in str(e.value) and "\n" not in str(e.value), str(e.value)


# ------------------------------------------------------------------ directives, initialisers, wide parameters

DIRS_SPEC = """
entry = "dirs"
grid = [1]
block = [64]
[params]
dirs_param_1 = {shape}
[[buffer]]
name = "out"
param = "dirs_param_0"
type = "s32"
shape = [64]
"""
# 1 + 2 + 3 (the 96-bit shape) + bytes 4..7 of tab_bytes + counter + weak_word + cvt.rzi(tab_f32[1] = 2.0)
DIRS_WANT = 1 + 2 + 3 + 0x08070605 + 7 + 3 + 2


@pytest.mark.parametrize("shape", ["[1, 2, 3]", '"0x00000003_00000002_00000001"', "{ 0 = { u32 = [1, 2, 3] } }",
                                   "{ 0 = { u64 = 0x0000000200000001 }, 8 = { s32 = 3 } }",
                                   "0x0000000300000002_00000001"])     # Python's TOML reader keeps 96 bits
def test_wide_parameter_forms_and_directives(shape):
    mod = kernel.parse_module(text("directives.ptx"))
    assert mod.entry("dirs").directives == {"maxntid": [128, 1, 1], "minnctapersm": [2], "maxnreg": [128]}
    assert mod.targets == ["sm_90a", "texmode_independent"]
    out = kernel.run(mod, DIRS_SPEC.format(shape=shape), {})
    assert not out.witnesses and np.all(out["out"] == DIRS_WANT)


def test_initialisers_read_bit_exactly():
    mod = kernel.parse_module(text("directives.ptx"))
    v = {x.name: x for x in mod.vars}
    assert v["tab_f32"].init == np.array([1.5, 2.0, -0.25], np.float32).tobytes()
    assert v["tab_f64"].init == np.array([1.5]).tobytes()
    assert v["counter"].init == (7).to_bytes(4, "little") and v["weak_word"].init == (3).to_bytes(4, "little")
    assert v["self_ptr"].init is None and "generic(counter)" in v["self_ptr"].init_unmodelled
    assert v["dyn_smem"].extern and v["shared_flag"].size == 4


@pytest.mark.parametrize("spec_edit,code,needle", [
    (lambda s: s.replace("[params]", "[params]\ndirs_param_2 = 64"), 3, "line 68: cp.async.bulk.prefetch.tensor"),
    (lambda s: s.replace('entry = "dirs"', 'entry = "uses_self_ptr"').replace("block = [64]", "block = [32]")
     .replace("dirs_param_1 = [1, 2, 3]", "").replace("dirs_param_0", "uses_self_ptr_param_0"), 3,
     "line 15: self_ptr (initialiser 'generic(counter)'"),
    (lambda s: s.replace('entry = "dirs"', 'entry = "clustered"').replace("dirs_param_1 = [1, 2, 3]", "")
     .replace("dirs_param_0", "clustered_param_0").replace("grid = [1]", "grid = [4]\ncluster = [4]"), 2,
     "has 4 CTAs, but clustered declares .maxclusterrank 2"),
    (lambda s: s.replace('entry = "dirs"', 'entry = "clustered"').replace("dirs_param_1 = [1, 2, 3]", "")
     .replace("dirs_param_0", "clustered_param_0").replace("grid = [1]", "grid = [3]\ncluster = [2]"), 2,
     "grid [3, 1, 1] is not a whole number of clusters"),
    (lambda s: s.replace("block = [64]", "block = [256]"), 2, "declares .maxntid 128, 1, 1"),
    (lambda s: s.replace("[1, 2, 3]", "[1, 2, 3, 4]"), 2, "4 words are 16 bytes; dirs_param_1 has 12"),
    (lambda s: s.replace("[1, 2, 3]", '"0x1_00000000_00000000_00000000"'), 2, "25 hex digits do not fit"),
    (lambda s: s.replace("[1, 2, 3]", "1.5"), 2, "a float for the 12-byte parameter"),
    (lambda s: s.replace('entry = "dirs"', 'entry = "dir"'), 2, "(did you mean 'dirs'?); entries: dirs, "
                                                                 "uses_self_ptr, clustered"),
])
def test_directive_and_parameter_verdicts(spec_edit, code, needle, tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text(spec_edit(DIRS_SPEC.format(shape="[1, 2, 3]")))
    rc, _, err = cli("kernel", "run", str(DATA / "directives.ptx"), "--spec", str(spec))
    assert rc == code and needle in err and err.count("\n") == 1, err


# ------------------------------------------------------------------ the module's own syntax

HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"


def _entry(body: str, head: str = HEAD) -> str:
    return head + ".visible .entry k(.param .u64 k_param_0)\n{\n" + body + "\n}\n"


@pytest.mark.parametrize("head,needle", [
    (".version 99.0\n.target sm_80\n", ".version 99.0 is not one ptxas knows"),
    (".version 99\n.target sm_80\n", "cannot read .version"),
    (".version 8.0\n.target sm_999\n", ".target sm_999: unknown target"),
    (".version 7.0\n.target sm_90a\n", ".target sm_90a needs .version 8.0 or later"),
    (".version 8.0\n.target sm_80\n.address_size 48\n", "bad .address_size"),
])
def test_what_ptxas_rejects_is_bad_input(head, needle):
    with pytest.raises(kernel.PTXSyntaxError, match=needle.replace(".", r"\.").replace("(", r"\(")):
        kernel.parse_module(_entry("ret;", head))


def test_old_targets_and_ranges():
    m = kernel.parse_module(_entry("ret;", ".version 6.0\n.target sm_61\n"))
    assert m.target == "sm_61"
    m = kernel.parse_module(_entry(".reg .b32 %r<999999999>;\n.reg .pred %p<3>;\nmov.u32 %r999999998, 1;\nret;"))
    f = m.entry()
    assert f.regs["%r999999998"] == 32 and "%r999999999" not in f.regs and f.regs.get("%p2") == 1
    assert "%r01" not in f.regs and f.reg_types["%r5"] == "b32"


@pytest.mark.parametrize("off,want", [("+16", 16), ("+(8+8)*2", 32), ("-8", -8), ("+0x10", 16), ("+-4", -4),
                                      ("+2*-3", -6)])
def test_address_offsets(off, want):
    f = kernel.parse_module(_entry(f".reg .b64 %rd<3>;\nld.global.u32 %rd1, [%rd2{off}];\nret;")).entry()
    assert f.instrs[0].ops[1] == P.Addr(P.Reg("%rd2"), want)


@pytest.mark.parametrize("off", ["+9**9**9", "+" + "9" * 30, "+" + "(" * 40 + "1" + ")" * 40, "+1" + "+1" * 200,
                                 "+(1", "+1)", "+a", "+0x" + "f" * 17, "+4294967296*4294967296*2"])
def test_address_offsets_out_of_reach_are_malformed(off):
    with pytest.raises(kernel.PTXSyntaxError, match="address offset"):
        kernel.parse_module(_entry(f".reg .b64 %rd<3>;\nld.global.u32 %rd1, [%rd2{off}];\nret;"))


def test_tensor_address_operand():
    f = kernel.parse_module(text("directives.ptx")).entry("dirs")
    ins = next(i for i in f.instrs if i.opcode.startswith("cp.async.bulk"))
    assert ins.ops[0] == P.TensorAddr(P.Reg("%rd6"), P.Vec((P.Reg("%r1"), P.Reg("%r2"))))


def test_size_limits(monkeypatch):
    with pytest.raises(kernel.PTXSyntaxError, match="bytes, more than the 232,448"):
        kernel.parse_module(_entry(".shared .align 4 .b8 s[99999999999];\nret;"))
    monkeypatch.setattr(P, "MAX_MODULE_CHARS", 1000)
    with pytest.raises(kernel.PTXSyntaxError, match="more than the limit of 1,000"):
        kernel.parse_module(_entry("ret;\n" * 400))


def test_a_big_module_is_read_in_reasonable_time():
    import time
    body = ".reg .b32 %r<8>;\n" + "add.u32 %r1, %r2, %r3;\n" * 20_000 + "ret;"
    t = time.process_time()
    f = kernel.parse_module(_entry(body)).entry()
    assert len(f.instrs) == 20_001 and time.process_time() - t < 5
