"""The peers' errata (specs/errata_peers.toml): every entry cites file, line, commit and upstream
status, and the layout witnesses are re-derived here with ptx-formal's audits."""

from __future__ import annotations

import re

import pytest

from formal.transform import atom, cute
from formal.layout import LayoutError
from formal.prove import audit_layout as audit
from formal.specdata import load_spec

ENTRIES = {e["id"]: e for e in load_spec("errata_peers")["erratum"]}
S4 = "mma.sync.aligned.m16n8k32.row.col.s32.s4.s4.s32"
B1K128 = "mma.sync.aligned.m16n8k128.row.col.s32.b1.b1.s32.xor.popc"
B1K256 = "mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.xor.popc"
F16K8 = "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32"


def _rep(form, op, tv):
    return {r.obligation.family: r for r in audit(cute.from_cute(tv, form, op), form, op).results}


def test_every_entry_is_cited():
    assert len(ENTRIES) == 6
    for e in ENTRIES.values():
        for k in ("file", "line", "commit", "upstream_status", "witness", "summary", "section", "checked"):
            assert e.get(k), (e["id"], k)
        # re-checked at the newest revision stored: a commit, and an honest status
        assert re.fullmatch(r"[0-9a-f]{40}", e["commit"]), e["id"]
        assert e["upstream_status"].startswith(("open", "fixed")), e["id"]
        assert "not resolved" not in str(e["line"]) and "could not" not in str(e["line"]), e["id"]


def test_llvm_entries_give_line_numbers_and_the_fix():
    for i in ("P-LLVM-WMMA-SP-SELECTORS", "P-LLVM-WMMA-SP-F8F6F4-MIXED-ACC"):
        e = ENTRIES[i]
        assert re.match(r"\d+-\d+", e["line"]) and e["commit"].startswith("0179af46")
        assert "000d27c9" in e["upstream_status"] and e["upstream_status"].startswith("fixed")


def test_the_wrong_llvm_entry_is_withdrawn_with_its_reason():
    w = {x["id"]: x for x in load_spec("errata_peers").get("withdrawn", [])}
    assert "P-LLVM-WMMA-SM120A-PTX86" in w and "P-LLVM-WMMA-SM120A-PTX86" not in ENTRIES
    r = w["P-LLVM-WMMA-SM120A-PTX86"]["reason"]
    assert "ptx_version < 87" in r and "line 1087" in r and "does not support .target sm_120a" in r


def test_k128_b1_a_stride_nested_too_deep():
    with pytest.raises(LayoutError, match="same nesting"):
        cute.from_cute("((4,8),(32,2)):((512,1),((16,8)))", B1K128, "a")
    assert all(r.status == "proved" for r in _rep(B1K128, "a", "((4,8),(32,2)):((512,1),(16,8))").values())


def test_int4_b_before_pr3140():
    r = _rep(S4, "b", "((4,8),8):((32,1),8)")
    assert r["audit.injective"].witness["cell"] == {"row": 4, "col": 0}
    assert r["audit.surjective"].witness["cell"] == {"row": 20, "col": 0}
    assert all(x.status == "proved" for x in _rep(S4, "b", "((4,8),8):((64,1),8)").values())


def test_b1_k256_before_pr1856():
    a = _rep(B1K256, "a", "(32,(8,4,2,2)):(64,(64,16,8,2048))")
    assert a["audit.range"].witness["cell"] == {"row": 0, "col": 256}
    assert a["audit.range"].witness["point"]["lane"] == 25
    b = _rep(B1K256, "b", "(32,(32,2)):(32,(1,1024))")
    assert b["audit.equal"].witness["candidate"]["row"] == 0 and b["audit.equal"].witness["spec"]["row"] == 1
    for op, tv in (("a", "((4,8),(32,2,2)):((512,1),(16,8,2048))"), ("b", "((4,8),(32,2)):((256,1),(8,1024))")):
        assert all(x.status == "proved" for x in _rep(B1K256, op, tv).values())


def test_sm75_m_relabelling_is_wrong_alone_and_right_together():
    old = "((4,8),(2,2)):((32,2),(16,1))"
    assert _rep(F16K8, "a", old)["audit.equal"].witness["candidate"]["row"] == 1
    rep = atom.audit_atom(F16K8, {"a": cute.from_cute(old, F16K8, "a"), "c": cute.from_cute(old, F16K8, "c"),
                                  "b": cute.from_cute("((4,8),2):((16,1),8)", F16K8, "b")})
    assert rep.status == "proved" and rep.permutations["M"][:2] == [0, 2] and rep.permutations["M"][8] == 1
