"""Kernel spec loading: the documented keys, defaults, and one-line errors naming the key."""

import numpy as np
import pytest

from formal.kernel.spec import SpecError, load_spec, make_inputs, parse_contract

BASE = """
entry = "mm"
grid = [2, 2, 1]
block = [128, 1, 1]
shared_bytes = 49152
[params]
mm_param_3 = 128
[[buffer]]
name = "A"
param = "mm_param_0"
type = "f16"
shape = [128, 64]
strides = [64, 1]
[[buffer]]
name = "B"
param = "mm_param_1"
type = "f16"
shape = [64, 128]
[[buffer]]
name = "C"
param = "mm_param_2"
type = "f32"
shape = [128, 128]
[contract]
C = "A @ B"
"""


def test_documented_example(tmp_path):
    p = tmp_path / "mm.toml"
    p.write_text(BASE)
    s = load_spec(p)
    assert s.entry == "mm" and s.grid == (2, 2, 1) and s.block == (128, 1, 1) and s.shared_bytes == 49152
    assert s.params == {"mm_param_3": 128}
    assert s.buffer("B").strides == (128, 1)          # row-major default
    assert s.buffer("C").nbytes == 128 * 128 * 4
    (c,) = s.contracts
    assert (c.out, c.lhs, c.rhs, c.lhs_t, c.rhs_t, c.addend) == ("C", "A", "B", False, False, None)
    assert s.threads == 4 * 128


@pytest.mark.parametrize("text,parts", [
    ("A @ B + C", ("A", "B", False, False, "C")),
    ("A.T @ B", ("A", "B", True, False, None)),
    ("A @ B.T", ("A", "B", False, True, None)),
])
def test_contract_forms(text, parts):
    c = parse_contract("D", text)
    assert (c.lhs, c.rhs, c.lhs_t, c.rhs_t, c.addend) == parts


@pytest.mark.parametrize("edit,needle", [
    (lambda t: t.replace('grid = [2, 2, 1]', 'grid = [0, 1]'), "grid"),
    (lambda t: t.replace('block = [128, 1, 1]', 'block = [2048]'), "block"),
    (lambda t: t.replace('type = "f16"', 'type = "f17"', 1), "f17"),
    (lambda t: t.replace('C = "A @ B"', 'C = "A * B"'), "contract"),
    (lambda t: t.replace('C = "A @ B"', 'C = "A @ X"'), "'X'"),
    (lambda t: t.replace('shape = [128, 64]', 'shape = [100000, 100000]'), "limit"),
    (lambda t: t.replace('strides = [64, 1]', 'strides = [64]'), "strides"),
    (lambda t: t.replace('mm_param_3 = 128', 'mm_param_3 = "x"'), "mm_param_3"),
])
def test_errors_name_the_key(edit, needle):
    with pytest.raises(SpecError) as e:
        load_spec(edit(BASE))
    msg = str(e.value)
    assert needle in msg and "\n" not in msg


def test_inputs_are_deterministic_raw_encodings():
    s = load_spec(BASE)
    x, y = make_inputs(s, seed=3), make_inputs(s, seed=3)
    assert x["A"].dtype == np.uint16 and x["C"].dtype == np.uint32 and x["A"].shape == (128, 64)
    assert all(np.array_equal(x[k], y[k]) for k in x)
    assert not np.array_equal(x["A"], make_inputs(s, seed=4)["A"])
    # normal regime: finite f16 of magnitude in [1/8, 2]
    v = x["A"].view(np.float16).astype(np.float64)
    assert np.all(np.isfinite(v)) and np.all((np.abs(v) >= 0.125) & (np.abs(v) <= 2.0))


@pytest.mark.parametrize("edit,needle", [
    (lambda t: t.replace("strides = [64, 1]", "stides = [64, 1]"), "unknown key 'stides' (did you mean 'strides'?)"),
    (lambda t: t.replace("shared_bytes = 49152", "shred_bytes = 49152"),
     "unknown key 'shred_bytes' (did you mean 'shared_bytes'?)"),
    (lambda t: t.replace("[contract]", "[contracts]"), "unknown key 'contracts' (did you mean 'contract'?)"),
    (lambda t: t.replace('type = "f16"', 'typ = "f16"', 1), "unknown key 'typ' (did you mean 'type'?)"),
    (lambda t: t + '[[view]]\nname = "D"\nbuffer = "C"\nlayot = "col"\n', "unknown key 'layot' (did you mean 'layout'?)"),
    (lambda t: t + '[[view]]\nname = "D"\nbuffer = "X"\n', "names no [[buffer]]"),
    (lambda t: t + '[[view]]\nname = "D"\nbuffer = "C"\nlayout = "diag"\n', 'layout must be "row" or "col"'),
    (lambda t: t + '[[view]]\nname = "D"\nbuffer = "C"\noffset = 1\n', "reaches element 16384 of C"),
    (lambda t: t + '[[view]]\nname = "A"\nbuffer = "C"\n', "names repeat"),
    (lambda t: t.replace('param = "mm_param_2"', 'param = "mm_param_1"'), "a second layout over one buffer's memory"),
    (lambda t: t.replace("mm_param_3 = 128", "mm_param_3 = [1, 2, 4294967296]"), "32-bit words"),
    (lambda t: t.replace("mm_param_3 = 128", 'mm_param_3 = "12"'), "one hex number"),
    (lambda t: t.replace("mm_param_3 = 128", "mm_param_3 = { x = 1 }"), "byte offsets"),
    (lambda t: t.replace("mm_param_3 = 128", "mm_param_3 = true"), "must be a number"),
    (lambda t: t.replace("strides = [64, 1]", "strides = [1, 1]"), "put two elements at one address"),
    (lambda t: 'chained = ["Q"]\n' + t, "chained must list contract outputs"),
])
def test_unknown_keys_views_and_values(edit, needle):
    with pytest.raises(SpecError) as e:
        load_spec(edit(BASE))
    assert needle in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_views_and_wide_values_load():
    s = load_spec(BASE.replace("mm_param_3 = 128", 'mm_param_3 = 128\nmm_param_4 = [1, 2, 3]\nmm_param_5 = "0xff"\n'
                               '[params.mm_param_6]\n0 = { s32 = [1, -2] }\n16 = { f32 = 1.5 }')
                  + '[[view]]\nname = "D"\nbuffer = "C"\nlayout = "col"\n')
    (d,) = s.views
    assert (d.view_of, d.strides, d.shape, d.param) == ("C", (1, 128), (128, 128), "mm_param_2")
    assert s.base("D").name == "C" and s.buffer("D") is d
    assert s.params["mm_param_6"] == {"0": {"s32": [1, -2]}, "16": {"f32": 1.5}}
