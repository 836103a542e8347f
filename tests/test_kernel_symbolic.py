"""ldmatrix addressing over a symbolic lane (Z3), cross-checked by the 32-lane enumeration."""

from pathlib import Path

from formal import kernel

DATA = Path(__file__).parent / "data" / "kernels_small"
SPEC = kernel.load_spec(DATA / "tiny_mma.toml")


def lane_proofs(text):
    return kernel.check(kernel.parse_module(text), SPEC).stats["lane_proofs"]


def test_triton_swizzled_addressing_proved():
    spec = kernel.load_spec(DATA / "triton_mm_f16.toml")
    recs = kernel.check(kernel.parse_module((DATA / "triton_mm_f16_sm80.ptx").read_text()), spec).stats["lane_proofs"]
    assert [r["line"] for r in recs] == [320, 321, 323, 324]
    assert all(r["status"] == "proved" and r["aligned"] and r["distinct"] and r["agrees_with_enumeration"]
               for r in recs)


def test_duplicate_rows_refuted_by_z3_and_enumeration():
    text = (DATA / "tiny_mma.ptx").read_text().replace("and.b32 \t%r14, %r1, 7;", "and.b32 \t%r14, %r1, 3;")
    rec = lane_proofs(text)[0]
    assert rec["line"] == 56 and rec["status"] == "refuted"
    assert rec["aligned"] and not rec["distinct"] and rec["agrees_with_enumeration"]


def test_misaligned_rows_refuted_with_a_lane():
    # row stride 24 bytes instead of 32: odd rows are not 16-byte aligned (and rows overlap)
    text = (DATA / "tiny_mma.ptx").read_text().replace("shl.b32 \t%r21, %r18, 5;", "mul.lo.s32 \t%r21, %r18, 24;")
    res = kernel.check(kernel.parse_module(text), SPEC)
    rec = res.stats["lane_proofs"][0]
    assert rec["status"] == "refuted" and not rec["aligned"] and not rec["distinct"] and rec["agrees_with_enumeration"]
    lane = rec["aligned_counterexample_lane"]
    assert ((lane % 8) + 8 * ((lane // 8) % 2)) * 24 % 16 != 0          # the model's lane is misaligned
    assert any(w.kind == "undefined" and w.line == 56 for w in res.witnesses)   # the run saw it too


def test_unknown_when_the_term_cannot_be_built():
    # a row address loaded from memory is not an integer term of the lane
    text = (DATA / "tiny_mma.ptx").read_text().replace("add.u32 \t%r24, %r7, %r23;",
                                                        "add.u32 \t%r24, %r7, %r23;\n\tld.shared.u32 \t%r39, [%r8];")
    recs = lane_proofs(text)
    assert recs[0]["status"] == "proved"          # the extra load does not touch %r24
    assert kernel.check(kernel.parse_module((DATA / "tiny_mma.ptx").read_text()), SPEC,
                        lanes=False).stats["lane_proofs"] == []
