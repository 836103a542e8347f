"""The sm_90 wmma records fixed by H100 run3 (wmma load -> mma -> store pipelines).

Two lowerings that ptxas picks for wmma.mma and the mma.sync forms do not have (both read from
the SASS of ptxas 13.0 / 13.5, sm_90 and sm_90a):

* an .f16 D from an .f32 C (m16n16k16, m8n32k16, m32n8k16): ``HMMA.16816.F32`` then
  ``F2FP.F16.F32.PACK_AB`` -- the f32 block (RZ into f32), then RN into f16: two roundings
  (key ``"f16.f16@c=f32"``, a :class:`~formal.numerics.params.Narrowed` record);
* tf32 m16n16k8: two chained ``HMMA.1684.F32.TF32`` per 16x8 tile -- blocks of n = 4
  (key ``"tf32.f32@m16n16k8"``); mma.m16n8k8 is one n = 8 block.

The reverse mixed case (an .f32 D from an .f16 C: ``HADD2.F32`` widens C exactly, then
``HMMA.16816.F32``) is the f32 block with c read as an f32, as before.

Oracles: hand-computed values (the block algorithm of numerics.md §2 worked by hand), and the
silicon D of the checked-in run3 slice (``specs/observed/wmma_pipeline_slice_sm90.*``: inputs
regenerated from the harness seed by tests/test_wmma_pipeline.py); with run3's directory on the
machine, all 276 entries.  Each superseded or alternative reading must differ from silicon.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from formal import catalog as cat
from formal.numerics import MODELS, convert, dot_scalar, dot_terms, from_float64, mma_matrices
from formal.numerics.fit import sm90_alternatives
from formal.specdata import spec_dir

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

SM90 = MODELS["sm_90"]
SLICE = spec_dir() / "observed" / "wmma_pipeline_slice_sm90.json"
RUN3 = Path("/work/hwdata/run3/wmma/wmma_pipeline.json")


def f16(v):
    return np.asarray(from_float64(np.asarray(v, np.float64), "f16"))


def f32(v):
    return np.asarray(from_float64(np.asarray(v, np.float64), "f32"))


def _kw(form):
    return dict(atype=form.atype, btype=form.btype, ctype=form.ctype, dtype=form.dtype, shape=form.mnk)


def _alternatives(form, A, B, C) -> dict:
    """name -> D of every alternative reading of this form's path (fit.sm90_alternatives, plus the
    ones that are not a parameter change)."""
    kw = _kw(form)
    key, _ = SM90.path(form.atype, form.btype, form.ctype, form.dtype, shape=form.mnk)
    out = {n: mma_matrices(A, B, C, arch=m, **kw) for n, m in sm90_alternatives().get(key, {}).items()}
    if key == "tf32.f32@m16n16k8":     # the second HMMA.1684 (k 4-7) first
        perm = [4, 5, 6, 7, 0, 1, 2, 3]
        out["k 4-7 first"] = mma_matrices(A[:, :, perm], B[:, perm, :], C, **kw)
    if key == "f16.f16@c=f32":         # C narrowed to f16 first, then the f16-accumulator HMMA
        out["c to f16, HMMA.F16"] = mma_matrices(A, B, convert(C, "f32", "f16", "rn"), **dict(kw, ctype="f16"))
    if key == "f16.f32" and form.ctype == "f16":   # the f16-accumulator HMMA, then widened
        d16 = mma_matrices(A, B, C, **dict(kw, dtype="f16"))
        out["HMMA.F16 then widen"] = convert(d16, "f16", "f32", "rn")
    return out


# ---------------------------------------------------------------------------
# record selection
# ---------------------------------------------------------------------------

def test_records_are_selected_by_shape_and_c_type():
    p = SM90.path
    assert p("f16", "f16", "f32", "f16", shape=(16, 16, 16))[0] == "f16.f16@c=f32"
    assert p("f16", "f16", "f32", "f16", shape=(8, 32, 16))[0] == "f16.f16@c=f32"
    assert p("f16", "f16", "f32", "f16")[0] == "f16.f16@c=f32"
    assert p("f16", "f16", "f16", "f16", shape=(16, 16, 16))[0] == "f16.f16"
    assert p("f16", "f16", "f16", "f32", shape=(16, 16, 16))[0] == "f16.f32"
    assert p("tf32", "tf32", "f32", "f32", shape=(16, 16, 8))[0] == "tf32.f32@m16n16k8"
    assert p("tf32", "tf32", "f32", "f32", shape=(16, 8, 8))[0] == "tf32.f32"     # mma.m16n8k8: one n=8 block
    assert p("f16", "f16", "f16", "f16", shape=(8, 8, 4))[0] == "f16.f16@m8n8k4"  # the shape key first
    rec = SM90.paths["f16.f16@c=f32"]
    assert rec.inner is SM90.paths["f16.f32"] and (rec.via, rec.rounding, rec.nan_bits) == ("f32", "rn", 0x7FFF)
    assert SM90.paths["tf32.f32@m16n16k8"] == SM90.paths["tf32.f32"].but(
        n=4, evidence=SM90.paths["tf32.f32@m16n16k8"].evidence)
    # the same lowering (SASS) on the other architectures ptxas 13 targets: sm_100 shares sm_90's records,
    # sm_80/sm_89 narrow their own f32 block (their tf32 block is n=4 already), sm_120 takes sm_90's
    assert MODELS["sm_100"].paths["f16.f16@c=f32"] is rec
    for name in ("sm_80", "sm_89"):
        assert MODELS[name].paths["f16.f16@c=f32"].inner is MODELS[name].paths["f16.f32"]
        assert MODELS[name].paths["tf32.f32"].n == 4
    assert MODELS["sm_120"].paths["f16.f16@c=f32"].inner is MODELS["sm_120"].paths["f16.f32"]
    assert MODELS["sm_120"].paths["tf32.f32@m16n16k8"].n == 4
    assert not any("@" in k for k in MODELS["exact"].paths) and not any("@" in k for k in MODELS["sm_70"].paths)


# ---------------------------------------------------------------------------
# by hand
# ---------------------------------------------------------------------------

def test_f16_d_from_f32_c_rounds_twice_by_hand():
    """c = 1 + 2^-11 (f32 0x3F801000, the f16 midpoint of 1 and 1 + 2^-10), one product 2^-12 * 2^-12 = 2^-24.
    f32 block: E = 0, grid 2^-25, S = 1 + 2^-11 + 2^-24, RZ into f32 (ulp 2^-23) -> 1 + 2^-11; F2FP RN:
    a tie -> even -> 1.0 (0x3C00).  One RN rounding of S into f16 is above the tie -> 1 + 2^-10 (0x3C01)."""
    a, b = f16([2.0 ** -12]), f16([2.0 ** -12])
    c = np.uint32(0x3F801000)
    kw = dict(atype="f16", btype="f16", ctype="f32", dtype="f16", shape=(16, 16, 16))
    assert int(dot_terms(a, b, c, **kw)) == 0x3C00
    assert dot_scalar(a, b, c, **kw) == 0x3C00
    once = sm90_alternatives()["f16.f16@c=f32"]["one rounding (f16 block, f32 c)"]
    assert int(dot_terms(a, b, c, arch=once, **kw)) == 0x3C01
    assert dot_scalar(a, b, c, arch=once, **kw) == 0x3C01


def test_f16_d_from_f32_c_conversion_edges_by_hand():
    """F2FP is an IEEE RN conversion: 65519 -> 65504 (0x7BFF), 65520 (the tie with 2^16) -> Inf; a NaN from the
    block -> 0x7FFF; -2^-30 (nonzero, RZ-exact in f32) -> -0 (0x8000: the conversion keeps the sign, unlike an
    HMMA's own zero)."""
    kw = dict(atype="f16", btype="f16", ctype="f32", dtype="f16", shape=(16, 16, 16))
    z = f16([0.0])
    for cval, want in ((65519.0, 0x7BFF), (65520.0, 0x7C00), (-65520.0, 0xFC00), (-2.0 ** -30, 0x8000),
                       (2.0 ** -25, 0x0000), (3 * 2.0 ** -26, 0x0001)):
        c = f32(cval)
        assert int(dot_terms(z, z, c, **kw)) == want, cval
        assert dot_scalar(z, z, c, **kw) == want, cval
    inf, zero = f16([np.inf]), f16([0.0])
    assert int(dot_terms(inf, zero, f32(1.0), **kw)) == 0x7FFF          # Inf * 0: NaN
    assert dot_scalar(inf, zero, f32(1.0), **kw) == 0x7FFF


def test_tf32_m16n16k8_is_two_k4_blocks_by_hand():
    """c = +0; products p0 = 1, p1 = p2 = p3 = -2^-25 (a = -2^-12, b = 2^-13), p4 = 2.
    n = 8, one block: E = 1, grid 2^-24: each -2^-25 truncates to 0 -> 3.0 (0x40400000).
    n = 4: block k0-3: 1 - 3*2^-25, RZ into f32 (ulp 2^-24 below 1) -> 1 - 2^-23; block k4-7: c = 1 - 2^-23 on
    the grid 2^-24, S = 3 - 2^-23, RZ (ulp 2^-22) -> 3 - 2^-22 (0x403FFFFF).
    k 4-7 first: 2, then 2 + 1 with the -2^-25 truncated -> 3.0."""
    a = f32([1.0, -2.0 ** -12, -2.0 ** -12, -2.0 ** -12, 1.0, 0, 0, 0])
    b = f32([1.0, 2.0 ** -13, 2.0 ** -13, 2.0 ** -13, 2.0, 0, 0, 0])
    c = np.uint32(0)
    kw = dict(atype="tf32", btype="tf32", ctype="f32", dtype="f32")
    assert int(dot_terms(a, b, c, shape=(16, 16, 8), **kw)) == 0x403FFFFF
    assert dot_scalar(a, b, c, shape=(16, 16, 8), **kw) == 0x403FFFFF
    assert int(dot_terms(a, b, c, shape=(16, 8, 8), **kw)) == 0x40400000      # mma.m16n8k8
    assert dot_scalar(a, b, c, shape=(16, 8, 8), **kw) == 0x40400000
    perm = [4, 5, 6, 7, 0, 1, 2, 3]
    assert int(dot_terms(a[perm], b[perm], c, shape=(16, 16, 8), **kw)) == 0x40400000


# ---------------------------------------------------------------------------
# silicon (run3)
# ---------------------------------------------------------------------------

def _entries(path: Path, pred=lambda f: True):
    doc = json.loads(path.read_text())
    with np.load(path.with_suffix(".npz")) as z:
        for e in doc["entries"]:
            f = cat.parse(e["opcode"])
            if f.atype in ("f16", "bf16", "tf32") and pred(f):
                yield e["kernel"], f, *(z[f"{e['kernel']}.{x}"] for x in "ABCD")


def test_slice_silicon_equals_the_model():
    """Every floating-point entry of the run3 slice: formal.numerics D == silicon D, every element."""
    seen = set()
    for k, f, A, B, C, D in _entries(SLICE):
        got = mma_matrices(A, B, C, **_kw(f))
        assert np.array_equal(got.astype(np.uint64), D.astype(np.uint64)), k
        seen.add(SM90.path(f.atype, f.btype, f.ctype, f.dtype, shape=f.mnk)[0] + f"<{f.ctype}")
    assert {"f16.f16@c=f32<f32", "tf32.f32@m16n16k8<f32", "f16.f32<f16", "f16.f32<f32", "f16.f16<f16",
            "bf16.f32<f32"} <= seen


def test_slice_elements_that_refuted_the_old_model():
    """The first elements the model before run3 got wrong, against silicon and the scalar reference."""
    rows = {k: (f, A, B, C, D) for k, f, A, B, C, D in _entries(SLICE)}
    for k, (run, i, j), sil in (("wp0035", (0, 7, 26), 0xBFAE), ("wp0067", (3, 24, 0), 0xC5EC),
                                ("wp0216", (0, 0, 0), 0x3FF32A66)):
        f, A, B, C, D = rows[k]
        assert int(D[run, i, j]) == sil
        assert dot_scalar(A[run, i, :], B[run, :, j], C[run, i, j], **_kw(f)) == sil
    f, A, B, C, D = rows["wp0035"]
    old = sm90_alternatives()["f16.f16@c=f32"]["one rounding (f16 block, f32 c)"]
    assert int(mma_matrices(A, B, C, arch=old, **_kw(f))[0, 7, 26]) == 0xBFAF
    f, A, B, C, D = rows["wp0216"]
    n8 = sm90_alternatives()["tf32.f32@m16n16k8"]["n=8 (one block)"]
    assert int(mma_matrices(A, B, C, arch=n8, **_kw(f))[0, 0, 0]) == 0x3FF32A67


def test_slice_refutes_every_alternative():
    """Each alternative reading of the three wmma paths differs from silicon somewhere in the slice."""
    bad: dict = {}
    for k, f, A, B, C, D in _entries(SLICE):
        for name, got in _alternatives(f, A, B, C).items():
            bad[name] = bad.get(name, 0) + int((np.asarray(got).astype(np.uint64) != D.astype(np.uint64)).sum())
    for name in ("one rounding (f16 block, f32 c)", "F2FP RZ", "c to f16, HMMA.F16", "n=8 (one block)",
                 "k 4-7 first", "HMMA.F16 then widen"):
        assert bad.get(name, 0) > 0, (name, bad)
    assert bad["one rounding (f16 block, f32 c)"] == 3     # wp0035 (2), wp0067 (1): the slice keeps every run


@pytest.mark.skipif(not RUN3.exists(), reason="run3 data not on this machine")
def test_run3_silicon_equals_the_model_and_refutes_the_alternatives():
    """All floating-point pipelines of run3 (f16/bf16/tf32: 128 entries x 8 runs) bit-exact; the counts
    quoted in formal.numerics.sm90's evidence strings."""
    entries = 0
    bad: dict = {}
    for k, f, A, B, C, D in _entries(RUN3):
        entries += 1
        assert np.array_equal(mma_matrices(A, B, C, **_kw(f)).astype(np.uint64), D.astype(np.uint64)), k
        key = SM90.path(f.atype, f.btype, f.ctype, f.dtype, shape=f.mnk)[0]
        if key in ("f16.f16@c=f32", "tf32.f32@m16n16k8") or (key == "f16.f32" and f.ctype == "f16"):
            for name, got in _alternatives(f, A, B, C).items():
                bad[name] = bad.get(name, 0) + int((np.asarray(got).astype(np.uint64) != D.astype(np.uint64)).sum())
    assert entries == 128        # 24 per f16 type combination (4), 24 bf16, 8 tf32
    assert bad["one rounding (f16 block, f32 c)"] == 3
    assert bad["F2FP RZ"] == 36483
    assert bad["c to f16, HMMA.F16"] == 3910
    assert bad["n=8 (one block)"] == 2588
    assert bad["k 4-7 first"] == 4063
    assert bad["HMMA.F16 then widen"] == 49147
