"""ptx-formal transform: exit codes, JSON, one-line errors."""

import json

from formal.cli import main
from formal.transform.recipe import library_dir

LIB = library_dir()
F16 = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"


def test_proved_exit_0_and_json(capsys):
    assert main(["transform", str(LIB / "accumulator_to_a_f16.recipe"), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["status"] == "proved" and d["z3"] == "unsat" and d["enumeration"] == "agrees"
    assert d["expectation"]["met"] is True


def test_refuted_exit_1_with_witness_and_path(capsys, tmp_path):
    # a broken recipe that expects its refutation: the expectation is met -> 0 (as --library says)
    src = LIB / "broken_ldmatrix_b_missing_trans.recipe"
    assert main(["transform", str(src)]) == 0
    out = capsys.readouterr().out
    assert "REFUTED" in out and "lane 0, register b0, element 1" in out and "path" in out
    assert "expectation (refuted lane=0 register=b0 element=1): met" in out
    # without the expect line the refutation itself is the verdict -> 1
    lines = [x for x in src.read_text().splitlines() if not x.startswith("expect")]
    (tmp_path / "noexpect.recipe").write_text("\n".join(lines) + "\n")
    assert main(["transform", str(tmp_path / "noexpect.recipe")]) == 1
    # an expectation that is not met -> 1
    (tmp_path / "wrong.recipe").write_text("\n".join(lines) + "\nexpect proved\n")
    assert main(["transform", str(tmp_path / "wrong.recipe")]) == 1
    assert "NOT met" in capsys.readouterr().out
    # and a correct recipe that expects proved -> 0
    assert main(["transform", str(LIB / "ldmatrix_x2_a_m16n8k8.recipe")]) == 0


def test_bad_input_exit_2_one_line(capsys, tmp_path):
    assert main(["transform", str(tmp_path / "missing.recipe")]) == 2
    p = tmp_path / "bad.recipe"
    p.write_text('source tile 16x16 b16 offset "row*16+col"\nstep ldmatrix.sync.aligned.m8n8.x3.b16 {a}, [p];\n'
                 'target tile 16x16 b16 offset "row*16+col"\n')
    assert main(["transform", str(p)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 2 and "Traceback" not in err
    assert main(["transform"]) == 2
    assert main(["transform", "--export", "triton", F16, "z"]) == 2


def test_unknown_exit_3(tmp_path, monkeypatch, capsys):
    import z3

    from formal import algebra as alg

    class Stubborn:
        def __init__(self):
            self.s = z3.Solver()

        def set(self, *a):
            pass

        def add(self, *a):
            self.s.add(*a)

        def to_smt2(self):
            return ""

        def check(self, *a):
            return z3.unknown

    monkeypatch.setattr(alg, "_solver", lambda t: Stubborn())
    assert main(["transform", str(LIB / "ldmatrix_x4_a_m16n8k16.recipe")]) == 3
    assert "UNKNOWN" in capsys.readouterr().out


def test_export_and_check(capsys):
    assert main(["transform", "--export", "triton", F16, "a"]) == 0
    text = capsys.readouterr().out.strip()
    assert text.startswith("#ttg.linear<{register = [[0, 1], [8, 0], [0, 8]]")
    assert main(["transform", "--check-triton", text, F16, "a"]) == 0
    assert main(["transform", "--check-triton", text, F16, "c"]) == 1
    capsys.readouterr()
    assert main(["transform", "--export", "cute", F16, "a"]) == 0
    assert capsys.readouterr().out.strip() == "((4,8),(2,2,2)):((32,1),(16,8,128))"


def test_library(capsys):
    assert main(["transform", "--library", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and all(r["met"] for r in rows)


def test_smt2_certificate(tmp_path):
    import z3
    for name, n in (("movmatrix_transpose_8x8.recipe", 1), ("ldmatrix_x4_a_m16n8k16.recipe", 4)):
        out = tmp_path / "c.smt2"
        assert main(["transform", str(LIB / name), "--smt2", str(out)]) == 0
        parts = out.read_text().split("(reset)")
        assert len(parts) == n                      # one query per target register
        for part in parts:
            s = z3.Solver()
            s.from_string(part)
            assert s.check() == z3.unsat            # the negated obligation, re-checked from the text
