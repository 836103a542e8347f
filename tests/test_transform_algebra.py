"""The layout algebra (formal.algebra): laws, literal tables, witnesses, and that Z3 and
enumeration agree (and never report a timeout as proved)."""

import numpy as np
import pytest

from formal import algebra as alg
from formal.algebra import AlgebraError, NotInvertible

FRAG_A = {  # PTX ISA 9.7.14.5.8, mma.m16n8k16 .f16 A, written with reg/elem (i = 2 reg + elem)
    "row": "(lane >> 2) + 8 * (reg & 1)",
    "col": "2 * (lane & 3) + elem + 8 * (reg >> 1)",
}


def frag_a():
    return alg.from_formulas([("lane", 32), ("reg", 4), ("elem", 2)], [("row", 16), ("col", 16)], FRAG_A, name="A")


def rowmajor(rows=16, cols=16):
    return alg.from_formulas([("row", rows), ("col", cols)], [("offset", rows * cols)],
                             {"offset": f"row * {cols} + col"}, name="rowmajor")


def test_literal_points():
    a = frag_a()
    # PTX table: lane 5 (groupID 1, threadID 1), a2 = reg 1 elem 0 -> row 9, col 2
    assert a.eval({"lane": 5, "reg": 1, "elem": 0}) == {"row": 9, "col": 2}
    # a7 of lane 31: groupID 7 + 8, col 2*3 + 1 + 8
    assert a.eval({"lane": 31, "reg": 3, "elem": 1}) == {"row": 15, "col": 15}


def test_bijection_and_inverse_laws():
    for m in (frag_a(), rowmajor(),
              alg.from_formulas([("row", 8), ("col", 64)], [("offset", 512)],
                                {"offset": "row * 64 + (col ^ ((row & 7) << 3))"}, name="swizzle128B")):
        p = m.bijective()
        assert p.status == "proved", p
        inv = m.invert()
        assert inv.certificate.status == "proved"
        ins = [(d.name, d.size) for d in m.ins]
        outs = [(d.name, d.size) for d in m.outs]
        assert m.compose(inv).equals(alg.identity(ins)).status == "proved"
        assert inv.compose(m).equals(alg.identity(outs)).status == "proved"


def test_inverse_literal():
    inv = rowmajor().invert()
    assert inv.eval({"offset": 37}) == {"row": 2, "col": 5}
    inv_a = frag_a().invert()
    # element (row 9, col 2) is a2 of lane 5 (PTX table)
    assert inv_a.eval({"row": 9, "col": 2}) == {"lane": 5, "reg": 1, "elem": 0}


def test_not_injective_witness():
    bad = alg.from_formulas([("row", 16), ("col", 16)], [("offset", 256)], {"offset": "row * 8 + col"}, name="bad")
    p = bad.injective()
    assert p.status == "refuted"
    # first point with an earlier twin: (1, 0) -> 8 == (0, 8) -> 8
    assert p.witness == {"x.row": 1, "x.col": 0, "y.row": 0, "y.col": 8}
    assert p.enumeration == "agrees"
    with pytest.raises(NotInvertible) as e:
        bad.invert()
    assert "(row=0, col=8) and (row=1, col=0)" in str(e.value)


def test_not_onto_witness_and_partial_inverse():
    half = alg.from_formulas([("i", 8)], [("x", 16)], {"x": "2 * i"}, name="even")
    p = half.surjective()
    assert p.status == "refuted" and p.witness == {"x": 1}
    with pytest.raises(NotInvertible):
        half.invert()
    g = half.invert(onto="image")
    assert g.eval({"x": 6}) == {"i": 3}
    assert not g.domain_mask({"x": np.array([7])})[0]


def test_compose_requires_image_in_domain():
    f = alg.from_formulas([("i", 8)], [("x", 16)], {"x": "i + 5"}, name="shift5")
    g = alg.from_formulas([("x", 10)], [("y", 10)], {"y": "x"}, name="id10")
    with pytest.raises(AlgebraError) as e:
        f.compose(g)
    assert e.value.witness == {"i": 5}          # 5 + 5 = 10 is outside x < 10
    with pytest.raises(AlgebraError):
        f.compose(alg.from_formulas([("z", 16)], [("y", 16)], {"y": "z"}))   # names do not match


def test_restrict():
    a = frag_a()
    r = a.restrict(reg=0)
    assert r.signature() == "(lane:32, elem:2) -> (row:16, col:16)"
    assert r.eval({"lane": 5, "elem": 1}) == {"row": 1, "col": 3}
    q = a.restrict(lane=(4, 8))
    assert q.eval({"lane": 0, "reg": 0, "elem": 0}) == {"row": 1, "col": 0}    # lane 4
    w = a.restrict(where="lane < 4")
    assert int(w.domain_mask(w.box()).sum()) == 4 * 4 * 2
    assert w.injective().status == "proved"
    assert w.surjective().status == "refuted"


def test_product_tiles_like_triton():
    # an 8x8 quadrant layout times a 2x2 arrangement of quadrants = the 16x16 A layout
    quad = alg.from_formulas([("lane", 32), ("elem", 2)], [("row", 8), ("col", 8)],
                             {"row": "lane >> 2", "col": "2 * (lane & 3) + elem"}, name="quad")
    tiles = alg.from_formulas([("reg", 4)], [("row", 2), ("col", 2)], {"row": "reg & 1", "col": "reg >> 1"},
                              name="tiles")
    prod = quad.product(tiles)
    assert prod.signature() == "(lane:32, elem:2, reg:4) -> (row:16, col:16)"
    # same map as A once the inputs are ordered alike
    reorder = alg.Composed(alg.identity([("lane", 32), ("reg", 4), ("elem", 2)]), prod)
    assert reorder.equals(frag_a()).status == "proved"
    # shared input dims multiply: (i of size 2) * (i of size 4) -> i of size 8, i = i1 + 2 i2
    p = alg.from_formulas([("i", 2)], [("x", 2)], {"x": "i"}).product(alg.from_formulas([("i", 4)], [("x", 4)], {"x": "i"}))
    assert p.signature() == "(i:8) -> (x:8)"
    assert p.eval({"i": 5}) == {"x": 5}


def test_equals_witness():
    sw = alg.from_formulas([("row", 16), ("col", 16)], [("offset", 256)], {"offset": "row * 16 + (col ^ (row & 7))"})
    p = rowmajor().equals(sw)
    assert p.status == "refuted" and p.witness == {"row": 1, "col": 0}
    assert "(offset=16)" in p.detail and "(offset=17)" in p.detail


def test_fuse_split_rename():
    a = frag_a()
    f = a.fuse(["reg", "elem"], "i")
    assert f.eval({"lane": 5, "i": 2}) == {"row": 9, "col": 2}
    s = f.split("i", [("reg", 4), ("elem", 2)])
    assert alg.Composed(alg.identity([("lane", 32), ("reg", 4), ("elem", 2)]), s).equals(a).status == "proved"
    r = a.rename(row="m", col="k")
    assert r.eval({"lane": 5, "reg": 1, "elem": 0}) == {"m": 9, "k": 2}


def test_linearity():
    a = frag_a()
    assert alg.is_linear(a).status == "proved"
    bases = alg.linear_bases(a)
    # Triton's bases of the A fragment: lane bits -> col 2, col 4, row 1, row 2, row 4
    assert [(b["row"], b["col"]) for b in bases["lane"]] == [(0, 2), (0, 4), (1, 0), (2, 0), (4, 0)]
    nonlin = alg.from_formulas([("i", 8)], [("x", 32)], {"x": "3 * i"}, name="times3")
    p = alg.is_linear(nonlin)
    assert p.status == "refuted" and p.witness == {"i": 3}    # 9 != 3 ^ 6 = 5


def test_table_and_function_maps_agree_with_formulas():
    a = frag_a()
    t = a.table()
    assert t.equals(a).status == "proved"
    f = alg.from_function([("lane", 32), ("reg", 4), ("elem", 2)], [("row", 16), ("col", 16)],
                          lambda lane, reg, elem: {"row": (lane >> 2) + 8 * (reg & 1),
                                                   "col": 2 * (lane & 3) + elem + 8 * (reg >> 1)})
    assert f.equals(a).status == "proved"


def test_unknown_is_never_proved(monkeypatch):
    import z3

    class Stubborn:
        def __init__(self, *a, **k):
            self.s = z3.Solver()

        def set(self, *a, **k):
            pass

        def add(self, *a):
            self.s.add(*a)

        def to_smt2(self):
            return ""

        def check(self, *a):
            return z3.unknown

    monkeypatch.setattr(alg, "_solver", lambda timeout_ms: Stubborn())
    p = rowmajor().injective()
    assert p.status == "unknown" and not p
    p = rowmajor().equals(rowmajor())
    assert p.status == "unknown"


def test_disagreement_is_unknown_not_proved():
    def neg():
        import z3
        x = z3.BitVec("x", 32)
        return [x == 3], [("x", x)]

    p = alg.decide("claim", neg, lambda: None)          # Z3 finds x = 3, enumeration finds nothing
    assert p.status == "unknown" and p.enumeration == "DISAGREES"
