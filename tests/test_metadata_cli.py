"""``ptx-formal metadata``: exit codes, one-line errors, JSON."""

from __future__ import annotations

import json

from formal.cli import main

OP = "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.bf16.bf16.f32"
I8 = "mma.sp.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_check_valid_invalid_ignored(capsys):
    rc, out, _ = run(capsys, "metadata", "check", OP, "--sel", "1", "0x44444444")
    assert rc == 0 and "VALID" in out
    rc, out, _ = run(capsys, "metadata", "check", OP, "--sel", "1", "0x4444E441", "--lane", "3")
    assert rc == 1 and "bits [3:0] = 0b0001" in out and "rule increasing" in out
    rc, out, _ = run(capsys, "metadata", "check", OP, "--sel", "1", "0", "--lane", "1")
    assert rc == 0 and "does not contribute" in out
    rc, out, _ = run(capsys, "metadata", "check", OP, "--sel", "2", "0x44444444")
    assert rc == 1 and "not legal" in out


def test_check_json(capsys):
    rc, out, _ = run(capsys, "metadata", "check", I8, "--sel", "0", "0b0101", "--json")
    d = json.loads(out)
    assert rc == 1 and d["valid"] is False and d["word"] == "0x00000005"
    ids = [(e["nibble"], [r["id"] for r in e["rules"]]) for e in d["nibbles"] if not e["ok"]]
    assert ids == [(n, ["distinct"]) for n in range(8)]


def test_bad_input_exit_2_one_line(capsys):
    for argv in (["metadata", "check", OP, "0x1FFFFFFFF"], ["metadata", "check", OP, "zz"],
                 ["metadata", "check", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "0"],
                 ["metadata", "check", "mma.sp.nonsense", "0"], ["metadata", "check", OP, "0", "--lane", "32"],
                 ["metadata", "explain", OP, "--sel", "5"], ["metadata", "witness", OP, "--kind", "tf32-value"]):
        rc, out, err = run(capsys, *argv)
        assert rc == 2, argv
        assert err.count("\n") == 1 and err.startswith("ptx-formal: error:"), (argv, err)


def test_explain_table(capsys, tmp_path):
    svg = tmp_path / "e.svg"
    rc, out, _ = run(capsys, "metadata", "explain", I8, "--sel", "1", "--svg", str(svg))
    assert rc == 0
    assert "T3: [3..0] in cell [8][0..3]" in out            # lane 3 = T2f+1 of group 0: row 8
    assert "competing hypothesis" in out
    assert svg.read_text().startswith("<svg")
    rc, out, _ = run(capsys, "metadata", "explain", OP, "--sel", "0", "--json")
    d = json.loads(out)
    assert d["contributing_lanes"] == [l for l in range(32) if l % 4 < 2]
    assert len(d["cells"]) == 16 * 8


def test_prove_and_witness(capsys):
    rc, out, _ = run(capsys, "metadata", "prove", I8, "--sel", "0")
    assert rc == 0 and "PROVED" in out and "REFUTED" not in out
    rc, out, _ = run(capsys, "metadata", "witness", I8, "--kind", "alternative", "--json")
    d = json.loads(out)
    assert rc == 0 and d[0]["kind"] == "wrong-bits/alternative"
