"""Test vectors: construction, annotations, solver-found corners, file formats, verify, CLI.

Independent checks: the inputs a solver found are re-checked with exact rational
arithmetic (fractions.Fraction) here, not with the solver's own encoding; the value at a
case's target element is recomputed from the draft's terms by the element-level model
and compared with the register-level evaluation (layout packing, metadata placement).
"""

from __future__ import annotations

import json
import os
from fractions import Fraction

import numpy as np
import pytest

from formal import layout
from formal.catalog import parse
from formal.cli import main
from formal.numerics.formats import decode, get_format
from formal.vectors import fileio, generate, read, verify, write
from formal.vectors.draft import register_elements

F16 = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
BF16 = "mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32"
S8SAT = "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.u8.s32"
U8 = "mma.sync.aligned.m8n8k16.row.col.s32.u8.u8.s32"
SP = "mma.sp.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
SP_ORD = "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"
F64 = "mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64"
M884 = "mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32"
WMMA = "wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32"


def value(code: int, t: str):
    """Exact value of one encoding: Fraction, or 'nan' / '+inf' / '-inf'."""
    d = decode(np.array([code], np.uint64), t)
    if d.nan[0]:
        return "nan"
    if d.inf[0]:
        return "-inf" if d.neg[0] else "+inf"
    f = get_format(t)
    v = Fraction(int(d.sig[0])) * Fraction(2) ** (int(d.exp[0]) - f.mantissa)
    return -v if d.neg[0] else v


def D_of(vs, case):
    from formal.vectors.draft import output_matrix

    return output_matrix(vs.form, case.expected)


def A_B_C(vs, case):
    """Matrices of a dense register-level case (layout.unpack), with a product axis."""
    f = vs.form
    out = []
    for op in ("a", "b", "c"):
        m = layout.unpack(f, op, case.inputs[op][None])[0]
        out.append(m if m.ndim == 3 else m[None])
    return out


def exact_dot(vs, case, p, m, n):
    """The exact sum of row m of A times column n of B plus C[m, n] (dense forms), or a special."""
    f = vs.form
    A, B, C = A_B_C(vs, case)
    terms = [value(int(A[p, m, k]), f.atype) for k in range(A.shape[2])]
    bterms = [value(int(B[p, k, n]), f.btype) for k in range(B.shape[1])]
    c = value(int(C[p, m, n]), f.ctype)
    if any(isinstance(x, str) for x in terms + bterms + [c]):
        return None
    return sum((x * y for x, y in zip(terms, bterms)), Fraction(0)) + c


@pytest.fixture(scope="module")
def f16set():
    return generate(F16, count=12, seed=3)


@pytest.fixture(scope="module")
def sparse_set():
    return generate(SP, count=8, seed=1, coverage=["metadata", "selector", "specials", "layout", "subnormal"])


# ------------------------------------------------------------------------------------------
# construction and annotations


def test_every_applicable_model_contributes(f16set):
    built = {p for c in f16set.cases for p in c.points}
    for p in ["nan_in:a", "nan_in:b", "nan_in:c", "inf_in:a", "inf_in:c", "inf_times_zero", "inf_minus_inf",
              "inf_minus_inf_c", "subnormal_in:a", "subnormal_out", "zero_sum:all_neg", "align_shift:24",
              "align_far_sum", "cancel_exact_zero", "cancel_catastrophic", "layout:a", "layout:b", "layout:c"]:
        assert p in built, p
    assert {f"random:{r}" for r in ("bits", "normal", "finite", "align", "extreme", "special")} <= built
    nc = f16set.header["not_covered"]
    # f16 products cannot overflow f32; the mechanisms that f16 inputs cannot show (the f32 floor, IEEE
    # overflow: the products stay far inside f32) are listed with the reason, never dropped silently
    assert {k for k in nc if not k.startswith(("mech:", "silicon:"))} == {"overflow_out"}
    assert {k.split(" ")[0] for k in nc if k != "overflow_out"} <= {"mech:acc_floor", "silicon:f16.f32:minexp=-132",
                                                                   "silicon:f16.f32:minexp=-134",
                                                                   "silicon:f16.f32:overflow=ieee"}
    assert all("unobservable" in nc[k] for k in nc if k != "overflow_out")
    assert "proved unreachable" in f16set.header["not_covered"]["overflow_out"]
    assert all(c.why for c in f16set.cases)


def test_targets_match_the_element_model(f16set):
    """D at each target, from register-level evaluation, equals the element-level model on the draft's terms."""
    from formal.vectors.draft import element

    f = f16set.form
    n = 0
    for case in f16set.cases:
        A, B, C = A_B_C(f16set, case)
        D = D_of(f16set, case)
        for t in case.targets:
            p, m, nn = t["product"], t["row"], t["col"]
            assert int(D[p, m, nn]) == element(f, "sm_90", A[p, m], B[p, :, nn], int(C[p, m, nn]))
            # the register position recorded for the target holds that element
            reg = int(case.expected[t["lane"], t["reg"]])
            eb = f.operands["d"].elem_bits
            assert (reg >> (t["elem"] * eb)) & ((1 << eb) - 1) == int(D[p, m, nn])
            n += 1
    assert n > 20


def test_built_points_are_true(f16set):
    f = f16set.form
    for case in f16set.cases:
        D = D_of(f16set, case)
        for t in case.targets:
            code = int(D[t["product"], t["row"], t["col"]])
            if t["check"] == "nan":
                assert value(code, f.dtype) == "nan", (case.id, t)
            if t["check"] == "subnormal":
                v = value(code, f.dtype)
                assert v != 0 and abs(v) < Fraction(2) ** get_format(f.dtype).emin
        for p in case.points:
            if p.startswith(("nan_in:", "inf_in:", "subnormal_in:")):
                kind, op = p.split(":")
                els = register_elements(f, op, case.inputs[op])
                d = decode(els.astype(np.uint64), {"a": f.atype, "b": f.btype, "c": f.ctype}[op])
                hit = {"nan_in": d.nan, "inf_in": d.inf,
                       "subnormal_in": ~d.zero & ~d.nan & ~d.inf & (d.sig < (1 << d.fmt.mantissa))}[kind]
                assert hit.any(), (case.id, p)


def test_solver_alignment_and_cancellation_inputs(f16set):
    """Re-check the solver's claims with exact rational arithmetic."""
    f = f16set.form
    seen = set()
    for case in f16set.cases:
        A, B, C = A_B_C(f16set, case)
        for t in case.targets:
            p, m, n = t["product"], t["row"], t["col"]
            ks = [k for k in range(A.shape[2]) if value(int(A[p, m, k]), f.atype) != 0]
            c = value(int(C[p, m, n]), f.ctype)
            if t["point"] == "align_shift:24":
                (k,) = ks
                prod = value(int(A[p, m, k]), f.atype) * value(int(B[p, k, n]), f.btype)
                ea = decode(np.array([A[p, m, k]], np.uint64), f.atype).exp[0]
                eb = decode(np.array([B[p, k, n]], np.uint64), f.btype).exp[0]
                ec = decode(np.array([C[p, m, n]], np.uint64), f.ctype).exp[0]
                assert 24 <= ec - (ea + eb) <= 26
                ulp = Fraction(2) ** (int(ec) - 23)
                rest = abs(c + prod) % ulp                  # the bits below c's ulp decide the rounding
                assert (prod > 0) == (c > 0) and rest >= 3 * ulp / 4
                seen.add(t["point"])
            if t["point"] == "cancel_exact_zero":
                assert exact_dot(f16set, case, p, m, n) == 0 and c != 0
                seen.add(t["point"])
            if t["point"] == "cancel_catastrophic":
                s = exact_dot(f16set, case, p, m, n)
                addends = [abs(value(int(A[p, m, k]), f.atype) * value(int(B[p, k, n]), f.btype)) for k in ks] + [abs(c)]
                assert s != 0 and abs(s) * 2 ** 24 <= max(addends)
                seen.add(t["point"])
            if t["point"] == "align_far_sum":
                ec = int(decode(np.array([C[p, m, n]], np.uint64), f.ctype).exp[0])
                prods = [value(int(A[p, m, k]), f.atype) * value(int(B[p, k, n]), f.btype) for k in ks]
                ulp = Fraction(2) ** (ec - 23)
                assert all(abs(x) < ulp / 2 for x in prods) and abs(sum(prods)) >= ulp
                seen.add(t["point"])
    assert seen == {"align_shift:24", "cancel_exact_zero", "cancel_catastrophic", "align_far_sum"}


def test_overflow_found_where_reachable():
    vs = generate(BF16, coverage=["overflow"])
    f = vs.form
    assert "overflow_out" not in vs.header["not_covered"]
    hits = 0
    for case in vs.cases:
        for t in case.targets:
            s = exact_dot(vs, case, t["product"], t["row"], t["col"])
            assert s is not None and abs(s) >= Fraction(2) ** 128
            assert value(int(D_of(vs, case)[t["product"], t["row"], t["col"]]), f.dtype) in ("+inf", "-inf")
            hits += 1
    assert hits >= 1


def test_integer_bounds_exact():
    """Solver sums just past +-2**31, checked with Python integers; the expected D clamps (.satfinite)."""
    vs = generate(S8SAT, coverage=["int_bounds"])
    f = vs.form
    got = {}
    for case in vs.cases:
        A, B, C = A_B_C(vs, case)
        D = D_of(vs, case)
        for t in case.targets:
            p, m, n = t["product"], t["row"], t["col"]
            iv = lambda code, ty: int(value(int(code), ty))  # noqa: E731
            s = sum(iv(A[p, m, k], f.atype) * iv(B[p, k, n], f.btype) for k in range(A.shape[2])) + iv(C[p, m, n], "s32")
            d = iv(D[p, m, n], "s32")
            assert d == max(-2**31, min(2**31 - 1, s))
            got.setdefault(t["point"], []).append(s)
    assert all(2**31 <= s < 2**31 + 2**15 for s in got["int_sat_hi"])
    assert all(-2**31 - 2**15 <= s < -2**31 for s in got["int_sat_lo"])
    assert got["int_at_max"] == [2**31 - 1] * len(got["int_at_max"])
    assert "int_sat_transient" in got


def test_unsigned_products_cannot_wrap_low():
    vs = generate(U8, coverage=["int_bounds"])
    assert "proved unreachable" in vs.header["not_covered"]["int_wrap_lo"]
    assert "int_wrap_hi" in vs.header["points"]
    for case in vs.cases:
        A, B, C = A_B_C(vs, case)
        D = D_of(vs, case)
        for t in case.targets:
            if t["point"] != "int_wrap_hi":
                continue
            p, m, n = t["product"], t["row"], t["col"]
            s = sum(int(A[p, m, k]) * int(B[p, k, n]) for k in range(A.shape[2])) + int(value(int(C[p, m, n]), "s32"))
            assert s > 2**31 - 1 and int(D[p, m, n]) == s % 2**32           # wraps


def test_m8n8k4_products_and_f64():
    vs = generate(M884, coverage=["specials", "layout"])
    assert vs.form.operands["a"].count == 2
    assert {t["product"] for c in vs.cases for t in c.targets} == {0}
    vs = generate(F64, coverage=["subnormal", "overflow", "cancellation"])
    assert "subnormal_out" in vs.header["points"] and "overflow_out" in vs.header["points"]
    assert vs.cases[0].inputs["a"].dtype == np.uint64


def test_deterministic(tmp_path):
    a = generate(F16, count=6, seed=5, coverage=["specials", "alignment", "random"])
    b = generate(F16, count=6, seed=5, coverage=["specials", "alignment", "random"])
    c = generate(F16, count=6, seed=6, coverage=["specials", "alignment", "random"])
    assert fileio.dumps_hex(a) == fileio.dumps_hex(b)
    ra = [x for x in a.cases if x.points[0].startswith("random")]
    rc = [x for x in c.cases if x.points[0].startswith("random")]
    assert any((x.inputs["a"] != y.inputs["a"]).any() for x, y in zip(ra, rc))


# ------------------------------------------------------------------------------------------
# sparse


def test_sparse_metadata_every_pair_every_selector(sparse_set):
    from formal.metadata import gather_terms, meta

    f = sparse_set.form
    fm = meta(f)
    want = {(f"metadata_pair:0x{n:x}", s) for n in fm.legal_nibbles for s in fm.selectors}
    have = set()
    for case in sparse_set.cases:
        for p in case.points:
            if p.startswith("metadata_pair:"):
                nib = int(p.split(":")[1], 16)
                have.add((p, case.sel))
                # the registers really carry that pair in every (row, chunk): read back by gather_terms
                _, kidx = gather_terms(f, case.inputs["a"][None], case.inputs["e"][None], case.sel)
                offs = fm.offsets(nib)
                w, s = fm.gran.width, fm.gran.stored
                exp = np.array([ch * w + offs[j] for ch in range(fm.chunks_per_row) for j in range(s)])
                assert (kidx[0] == exp[None, :]).all()
    assert want <= have
    sels = {int(p.split(":")[1]) for c in sparse_set.cases for p in c.all_points if p.startswith("selector:")}
    assert sels == set(fm.selectors)
    assert any("metadata_idle_lanes" in c.points for c in sparse_set.cases)


def test_sparse_targets_match_element_model(sparse_set):
    from formal.metadata import gather_terms
    from formal.vectors.draft import element

    f = sparse_set.form
    n = 0
    for case in sparse_set.cases:
        if not case.targets:
            continue
        vals, kidx = gather_terms(f, case.inputs["a"][None], case.inputs["e"][None], case.sel)
        B = layout.unpack(f, "b", case.inputs["b"][None])[0]
        C = layout.unpack(f, "c", case.inputs["c"][None])[0]
        D = D_of(sparse_set, case)[0]
        for t in case.targets:
            m, nn = t["row"], t["col"]
            assert int(D[m, nn]) == element(f, "sm_90", vals[0, m], B[kidx[0, m], nn], int(C[m, nn]))
            n += 1
    assert n >= 5


def test_sparse_ordered_integer():
    vs = generate(SP_ORD, coverage=["metadata", "int_bounds"], count=2)
    assert any(p.startswith("metadata_pair:0x") for p in vs.header["points"])
    assert "int_wrap_hi" in vs.header["points"]


# ------------------------------------------------------------------------------------------
# matrix level


def test_wmma_matrix_level(tmp_path):
    from formal.evaluate import evaluate_matrices

    vs = generate(WMMA, count=4, coverage=["specials", "random"])
    assert vs.level == "matrix" and len(vs) > 4
    c = vs.cases[0]
    D = evaluate_matrices(WMMA, c.inputs["A"][None], c.inputs["B"][None], c.inputs["C"][None])[0]
    assert (D == c.expected).all()
    for fmt in ("hex", "jsonl", "npz"):
        p = str(tmp_path / f"w.{fmt}")
        write(vs, p)
        back = read(p)
        assert all((x.expected == y.expected).all() and (x.inputs["A"] == y.inputs["A"]).all()
                   for x, y in zip(vs.cases, back.cases))
        assert verify(back, [c.expected for c in vs.cases]).ok


# ------------------------------------------------------------------------------------------
# files and verify


@pytest.mark.parametrize("fmt", ["hex", "jsonl", "npz"])
def test_round_trip(tmp_path, sparse_set, fmt):
    p = str(tmp_path / f"v.{fmt}")
    write(sparse_set, p)
    back = read(p)
    assert back.opcode == sparse_set.opcode and len(back) == len(sparse_set)
    for x, y in zip(sparse_set.cases, back.cases):
        assert x.id == y.id and x.sel == y.sel and x.points == y.points and x.seen == y.seen
        assert x.why == " ".join(y.why.split()) or x.why == y.why
        for k in ("a", "b", "c", "e"):
            assert (x.inputs[k] == y.inputs[k]).all() and y.inputs[k].dtype == x.inputs[k].dtype
        assert (x.expected == y.expected).all()
    assert back.header["points"] == sparse_set.header["points"]


def test_hex_line_grammar(f16set):
    text = fileio.dumps_hex(f16set)
    lines = text.splitlines()
    assert lines[0].startswith("# ptx-formal-vectors {")
    assert json.loads(lines[0].split(" ", 2)[2])["opcode"] == F16
    body, _, note = lines[1].partition(" # ")
    toks = body.split()
    assert toks[0] == F16 and [t.split("=")[0] for t in toks[1:]] == ["a", "b", "c", "d"]
    a = toks[1].split("=")[1].split("|")
    assert len(a) == 32 and all(len(lane.split(",")) == 4 for lane in a)
    assert all(len(w) == 8 for w in a[0].split(","))
    assert note.startswith("id=0 points=") and " why=" in note


def test_verify_pass_and_fail(tmp_path, f16set):
    vpath = str(tmp_path / "v.jsonl")
    write(f16set, vpath)
    good = [c.expected.copy() for c in f16set.cases]
    assert verify(vpath, good).ok
    # one wrong bit at a NaN target: only the points of that case fail, the mismatch says where
    case = next(c for c in f16set.cases if "nan_in:a" in c.points and c.targets)
    t = case.targets[0]
    bad = [g.copy() for g in good]
    bad[case.id][t["lane"], t["reg"]] ^= 1
    rep = verify(vpath, bad)
    assert not rep.ok and rep.failed == 1
    assert rep.caught_by == ["nan_in:a"]
    m = rep.mismatches[0]
    assert m.case == case.id and m.where["lane"] == t["lane"] and m.where["reg"] == t["reg"]
    assert (m.where["row"], m.where["col"]) == (t["row"], t["col"])
    assert set(m.inputs) == {"a", "b", "c"}
    # a background difference in the same case is not blamed on the NaN point
    bad2 = [g.copy() for g in good]
    other = next((ln, r) for ln in range(32) for r in range(4)
                 if (ln, r) not in {(x["lane"], x["reg"]) for x in case.targets})
    bad2[case.id][other] ^= 1
    rep2 = verify(vpath, bad2)
    assert rep2.failed == 1 and rep2.caught_by == [] and "nan_in:a" not in rep2.caught_by


def test_result_files_all_formats(tmp_path, f16set):
    from formal.vectors import write_results

    vpath = str(tmp_path / "v.hex")
    write(f16set, vpath)
    got = [c.expected.copy() for c in f16set.cases]
    got[2][0, 0] ^= 0x80000000
    rh = str(tmp_path / "r.hex")
    write_results(rh, f16set, got)
    rj = str(tmp_path / "r.jsonl")
    with open(rj, "w") as fh:
        for c, g in zip(f16set.cases, got):
            fh.write(json.dumps({"id": c.id, "d": [[f"{int(v):08x}" for v in lane] for lane in g]}) + "\n")
    rn = str(tmp_path / "r.npz")
    np.savez(rn, d=np.stack(got))
    for r in (rh, rj, rn):
        rep = verify(vpath, r)
        assert rep.failed == 1 and rep.mismatches[0].case == 2, r


def test_bad_files(tmp_path, f16set):
    from formal.vectors import VectorError

    vpath = str(tmp_path / "v.hex")
    write(f16set, vpath)
    junk = tmp_path / "junk.hex"
    junk.write_text("hello world\n")
    with pytest.raises(VectorError):
        read(str(junk))
    short = tmp_path / "short.hex"
    lines = open(vpath).read().splitlines()
    short.write_text(lines[0] + "\n" + lines[1].replace("|", "", 1) + "\n")     # 31 lanes in a=
    with pytest.raises(VectorError, match="lanes"):
        read(str(short))
    few = tmp_path / "few.npz"
    np.savez(few, d=np.stack([c.expected for c in f16set.cases[:3]]))
    with pytest.raises(VectorError, match="results for"):
        verify(vpath, str(few))
    other = tmp_path / "other.hex"
    other.write_text(lines[1].replace(F16, BF16, 1) + "\n")
    with pytest.raises(VectorError, match="not"):
        verify(vpath, str(other))


# ------------------------------------------------------------------------------------------
# CLI


def test_cli_vectors_and_verify(tmp_path, capsys):
    v = str(tmp_path / "v.hex")
    assert main(["vectors", S8SAT, "--coverage", "int_bounds", "random", "--count", "3", "-o", v]) == 0
    assert os.path.getsize(v) > 1000
    r = str(tmp_path / "r.hex")
    vs = read(v)
    from formal.vectors import write_results

    write_results(r, vs, [c.expected for c in vs.cases])
    assert main(["verify", S8SAT, v, r]) == 0
    out = capsys.readouterr().out
    assert "int_sat_hi" in out and "all pass" in out
    got = [c.expected.copy() for c in vs.cases]
    got[0][3, 1] += 1
    write_results(r, vs, got)
    assert main(["verify", S8SAT, v, r, "--json"]) == 1
    rep = json.loads(capsys.readouterr().out)
    assert rep["failed"] == 1 and rep["mismatches"][0]["where"]["lane"] == 3
    # bad input: one line on stderr, exit 2
    (tmp_path / "bad.hex").write_text("garbage\n")
    assert main(["verify", S8SAT, v, str(tmp_path / "bad.hex")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "error" in err
    assert main(["verify", F16, v, r]) == 2                          # vectors are for another form
    assert main(["vectors", S8SAT, "--coverage", "nosuch"]) == 2
    assert main(["vectors", "mma.sync.aligned.m16n8k16.bogus"]) == 2
    assert main(["vectors", S8SAT, "--format", "npz"]) == 2           # npz needs -o
    assert main(["vectors", "wmma.load.a.sync.aligned.row.m16n16k16.global.f16"]) == 2
    capsys.readouterr()


def test_cli_list_coverage_and_help(capsys):
    assert main(["vectors", "--list-coverage"]) == 0
    out = capsys.readouterr().out
    for name in ("specials", "invalid", "subnormal", "signed_zero", "alignment", "cancellation", "overflow", "fp8",
                 "int_bounds", "b1", "metadata", "selector", "block_scale", "layout", "random"):
        assert name in out
    assert main(["vectors", "--list-coverage", SP, "--json"]) == 0
    names = [m["name"] for m in json.loads(capsys.readouterr().out)]
    assert "metadata" in names and "int_bounds" not in names
    assert main(["vectors", "--help"]) == 0        # main returns argparse's exit code, never raises
    out = capsys.readouterr().out
    assert "LANES = 32 lanes separated by '|'" in out and "result files for 'verify'" in out
