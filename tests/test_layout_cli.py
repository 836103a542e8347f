"""`ptx-formal layout`: tables both ways, figures, audits; exit codes and one-line errors."""

from __future__ import annotations

import csv
import io
import json
import xml.etree.ElementTree as ET

from formal import layout as L
from formal.cli import main

F16 = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
I4 = "mma.sync.aligned.m16n8k32.row.col.s32.s4.s4.s32"
M884 = "mma.sync.aligned.m8n8k4.col.row.f16.f16.f16.f16"
MX = "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.f32.e2m1.e2m1.f32.ue8m0"


def run(capsys, *argv):
    code = main(list(argv))
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_text_shows_both_directions(capsys):
    code, out, err = run(capsys, "layout", F16, "--operand", "a")
    assert code == 0
    assert "spec entry mma.m16n8k16.f16.a" in out and "9.7.14.5.8" in out
    assert "element -> lane" in out and "lane / register -> element" in out
    # row 9, column 2 is a2 of lane 5; lane 5 register 1 holds a2 at bits [15:0]
    assert "T5:a2" in out
    assert "lane  5 reg 1: a2[15:0]=(9,2) a3[31:16]=(9,3)" in out


def test_csv_by_lane_and_by_element(capsys):
    code, out, _ = run(capsys, "layout", I4, "--operand", "b", "--csv")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == 32 * 8 and rows[0] == {"lane": "0", "reg": "0", "elem": "0", "i": "0", "bits": "[3:0]",
                                               "row": "0", "col": "0"}
    code, out, _ = run(capsys, "layout", I4, "--operand", "b", "--csv", "--by", "element")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [(int(r["row"]), int(r["col"])) for r in rows] == sorted((int(r["row"]), int(r["col"])) for r in rows)


def test_markdown_and_json(capsys):
    code, out, _ = run(capsys, "layout", M884, "--operand", "c", "--md")
    assert code == 0 and "#### element -> lane / register / bits" in out and "| lane | reg |" in out
    code, out, _ = run(capsys, "layout", M884, "--operand", "c", "--json")
    d = json.loads(out)
    assert d["products"] == 4 and d["entry"]["id"] == "mma.m8n8k4.f16.c.f16"
    assert len(d["by_lane"]) == len(d["by_element"]) == 256


def test_every_operand_when_none_is_named(capsys):
    code, out, _ = run(capsys, "layout", MX)
    assert code == 0
    for op in ("operand a:", "operand b:", "operand c:", "operand d:", "operand scale_a:", "operand scale_b:"):
        assert op in out


def test_scale_selectors(capsys):
    code, out, _ = run(capsys, "layout", MX, "--operand", "scale_a", "--byte-id", "3", "--thread-id", "1", "--json")
    d = json.loads(out)
    assert d["params"] == {"byte_id": 3, "thread_id": 1}
    assert {r["lane"] % 4 for r in d["by_lane"]} == {2, 3} and {r["elem"] for r in d["by_lane"]} == {3}
    code, _, err = run(capsys, "layout", MX, "--operand", "scale_a", "--thread-id", "2")
    assert code == 2 and "not a legal selector" in err


def test_svg_figure(tmp_path, capsys):
    f = tmp_path / "a.svg"
    code, _, _ = run(capsys, "layout", F16, "--operand", "a", "--svg", str(f))
    assert code == 0
    root = ET.fromstring(f.read_text())
    texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert texts.count("T5") == 8 and "a7" in texts          # every cell labelled: lane and element
    rects = [r for r in root.iter("{http://www.w3.org/2000/svg}rect") if r.get("width") != "100%"]
    assert len(rects) == 16 * 16


def test_all_figures(tmp_path, capsys):
    code, _, err = run(capsys, "layout", "--all-figures", str(tmp_path))
    assert code == 0
    names = {p.name for p in tmp_path.glob("*.svg")}
    for e in L.spec().entries:
        assert any(n.startswith(e.id + ".") for n in names), e.id
    assert "index.md" in {p.name for p in tmp_path.iterdir()}
    ET.fromstring((tmp_path / "mma.m8n8k4.f16.c.f32.svg").read_text())


def test_audit_cute_equal_and_refuted(capsys):
    code, out, _ = run(capsys, "layout", "audit", F16, "--operand", "a", "--cute",
                       "((4,8),(2,2,2)):((32,1),(16,8,128))")
    assert code == 0 and "equal to the spec and bijective" in out
    # CUTLASS's int4 B layout before PR #3140 (thread stride 32)
    code, out, _ = run(capsys, "layout", "audit", I4, "--operand", "b", "--cute", "((4,8),8):((32,1),8)", "--json")
    assert code == 1
    d = json.loads(out)
    res = {r["obligation"]["family"]: r for r in d["results"]}
    assert res["audit.injective"]["witness"]["p"] == {"lane": 0, "reg": 0, "elem": 4, "i": 4}
    assert res["audit.equal"]["witness"]["point"] == {"lane": 1, "reg": 0, "elem": 0}
    # the C++ spelling, and the quad-pair form with CuTe's ThrID
    code, out, _ = run(capsys, "layout", "audit", M884, "--operand", "a", "--cute",
                       "Layout<Shape<Shape<Shape<_4,_2>>,_4>, Stride<Stride<Stride<_8,_4>>,_1>>",
                       "--cute-thr", "(4,2):(1,16)", "--cute-product-stride", "4")
    assert code == 0, out


def test_audit_formula_table_python(tmp_path, capsys):
    code, out, _ = run(capsys, "layout", "audit", F16, "--operand", "c", "--formula",
                       "row=groupID + 8 * (i >> 1)", "col=2 * threadID_in_group + (i & 1)")
    assert code == 0
    code, out, _ = run(capsys, "layout", "audit", F16, "--operand", "c", "--formula",
                       "row=groupID + 8 * (i & 1)", "col=2 * threadID_in_group + (i >> 1)")
    assert code == 1 and "REFUTED" in out
    ref = L.fragment(F16, "b")
    t = tmp_path / "b.csv"
    t.write_text(L.records_csv(L.by_lane(ref)))
    assert run(capsys, "layout", "audit", F16, "--operand", "b", "--table", str(t))[0] == 0
    py = tmp_path / "mine.py"
    py.write_text("def b(lane, reg, elem):\n    i = reg * 2 + elem\n"
                  "    return (2 * (lane % 4) + (i & 1) + 8 * (i >> 1), lane // 4)\n"
                  "def bad(lane, reg, elem):\n    return (0, 0)\n")
    assert run(capsys, "layout", "audit", F16, "--operand", "b", "--python", f"{py}:b")[0] == 0
    code, out, _ = run(capsys, "layout", "audit", F16, "--operand", "b", "--python", f"{py}:bad")
    assert code == 1


def test_bad_input_is_one_line_exit_2(capsys, tmp_path):
    cases = [
        ["layout"],
        ["layout", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16"],
        ["layout", F16, "--operand", "e"],
        ["layout", F16, "--operand", "q"],
        ["layout", "audit", F16],
        ["layout", "audit", F16, "--operand", "a"],
        ["layout", "audit", F16, "--operand", "a", "--cute", "((4,8),(2,2)):((32,1)"],
        ["layout", "audit", F16, "--operand", "a", "--cute", "((4,8),(2,2)):((32,1),(16,8))"],   # 4 values, not 8
        ["layout", "audit", F16, "--operand", "a", "--table", str(tmp_path / "missing.csv")],
        ["layout", "audit", F16, "--operand", "a", "--formula", "row=lane +"],
        ["layout", "audit", F16, "--operand", "a", "--python", "nofile.py:f"],
        ["layout", "wmma.load.a.sync.aligned.row.m16n16k16.f16"],
    ]
    for argv in cases:
        code, out, err = run(capsys, *argv)
        assert code == 2, (argv, out, err)
        assert "Traceback" not in err and err.count("\n") == 1, (argv, err)
