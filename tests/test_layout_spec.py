"""The fragment spec against an independent transcription, and the errata.

``/work/shared/reference/layouts.json`` (research data compiled from the PTX text, CuTe,
MLIR, Triton, TileLang; see its README) writes every layout as closed-form Python
expressions over (lane, i), with the packing (register, bit offset) of each element type.
Our specs/fragments_mma*.toml are a separate transcription written the way the ISA writes
them (conditionals, groupID).  Two transcriptions agreeing on every (lane, i) of every
documented form and operand is the check; the reference's CuTe TV layouts are a third
(audited through formal.transform.cute).

The reference is third-party data: it is read, never imported or copied.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from formal import catalog as cat
from formal import layout as L
from formal.prove import audit_layout
from formal import prove as P
from formal.specdata import spec_dir

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover
    import tomli as tomllib

REF = Path(__file__).resolve().parent / "data" / "reference_layouts.json"   # copy of shared/reference/layouts.json
ERRATA = spec_dir() / "errata_layout.toml"

pytestmark = pytest.mark.skipif(not REF.exists(), reason="research table shared/reference/layouts.json not present")


def _ref() -> dict:
    return {e["id"]: e for e in json.loads(REF.read_text())["entries"]}


def _ev(src: str, **env):
    return eval(src, {"__builtins__": {}}, env)  # noqa: S307 - formulas of a local data file


MMA_FORMS = [f for f in cat.documented_forms() if f.family in ("mma", "mma.sp")]


# ------------------------------------------------------------------------------------------
# which reference entry describes (form, operand): written from the reference's own naming

def _cls(form: cat.Form) -> str:
    s, t = form.shape, form.atype
    if form.family == "mma":
        if s == "m8n8k4":
            return "f16" if t == "f16" else "f64"
        if s in ("m16n8k4",):
            return "tf32" if t == "tf32" else "f64"
        if s == "m16n8k8":
            return {"f16": "f16", "bf16": "f16", "tf32": "tf32", "f64": "f64"}[t]
        if s == "m16n8k16":
            return {"f16": "f16", "bf16": "f16", "f64": "f64"}.get(t, "i8f8")
        if s == "m16n8k32":
            return "i4" if t in ("u4", "s4") else "i8f8"
        if s == "m16n8k64":
            return "i4f4"
        return "b1"
    return {"m16n8k16": "f16" if t in ("f16", "bf16") else "tf32", "m16n8k8": "tf32",
            "m16n8k32": "f16" if t in ("f16", "bf16") else "i8",
            "m16n8k64": "i8f8" if t not in ("u4", "s4") else "i4", "m16n8k128": "i4f4"}[s]


def ref_id(form: cat.Form, op: str) -> str:
    OP = op.upper()
    if form.family == "mma.sp":
        if op in ("c", "d"):
            return "mma.m16n8k32.i8f8.C"         # "same as" the dense m16n8 accumulators (.s32/.f32/.f16)
        return f"mma.sp.{form.shape}.{_cls(form)}.{OP}"
    s = form.shape
    if op in ("c", "d"):
        OP = "C"
    if s == "m8n8k4" and form.atype == "f16":
        if op == "a":
            return f"mma.m8n8k4.f16.A.{form.alayout}"
        if op == "b":
            return f"mma.m8n8k4.f16.B.{form.blayout}"
        return f"mma.m8n8k4.f16.C.{form.ctype if op == 'c' else form.dtype}"
    if s in ("m8n8k16", "m8n8k32", "m8n8k128"):
        return f"mma.{s}.{OP}"
    return f"mma.{s}.{_cls(form)}.{OP}"


def _packing_type(form: cat.Form, op: str) -> str:
    t = form.operands[op].etype
    if op in ("c", "d"):
        return f".{t}"
    if form.kind in ("f8f6f4", "mxf8f6f4"):
        return f"f8f6f4:.{t}"
    if form.kind in ("mxf4", "mxf4nvf4"):
        return "mxf4:.e2m1"
    return f".{t}"


def _ref_map(entry: dict, op: str, lanes: np.ndarray, ii: np.ndarray):
    row_src = entry["row"]
    col_src = entry.get("compressed_col", entry.get("col"))
    rows = np.array([_ev(row_src, lane=int(l), i=int(i)) for l, i in zip(lanes, ii)])
    cols = np.array([_ev(col_src, lane=int(l), i=int(i)) for l, i in zip(lanes, ii)])
    if "mma_index" in entry:
        prods = np.array([_ev(entry["mma_index"], lane=int(l), i=int(i)) for l, i in zip(lanes, ii)])
    else:
        prods = np.zeros_like(rows)
    return rows, cols, prods


def _operands(form):
    return [o for o in ("a", "b", "c", "d") if o in form.operands]


def _groups():
    """(reference id, fragment key) -> one representative (form, operand): identical content is checked once."""
    out: dict[tuple, tuple] = {}
    for form in MMA_FORMS:
        for op in _operands(form):
            out.setdefault((ref_id(form, op), L.fragment(form, op).key, _packing_type(form, op)), (form, op))
    return out


GROUPS = _groups()


def test_groups_cover_every_form_operand():
    n = sum(len(_operands(f)) for f in MMA_FORMS)
    assert n > 1500 and len(GROUPS) < n
    covered = {(ref_id(f, op), L.fragment(f, op).key, _packing_type(f, op)) for f in MMA_FORMS for op in _operands(f)}
    assert covered == set(GROUPS)


@pytest.mark.parametrize("form,op", list(GROUPS.values()), ids=lambda x: x if isinstance(x, str) else x.opcode)
def test_every_form_operand_matches_the_reference(form, op):
    ref = _ref()
    if True:
        lay = L.fragment(form, op)
        e = ref[ref_id(form, op)]
        shape = e.get("compressed_shape") if (op == "a" and form.family == "mma.sp") else e["matrix_shape"]
        assert (lay.rows, lay.cols) == tuple(shape), (op, e["id"])
        assert lay.elements == e["num_elems"], (op, e["id"])
        pts = lay.enumerate()
        assert pts["lane"].size == 32 * e["num_elems"]
        rows, cols, prods = _ref_map(e, op, pts["lane"], pts["i"])
        assert (pts["row"] == rows).all() and (pts["col"] == cols).all(), (op, e["id"])
        assert (pts["product"] == prods).all(), (op, e["id"])
        # packing: the reference gives register index and container offset per element type
        pk = {p["type"]: p for p in e["packings"]}
        want = _packing_type(form, op)
        p = pk[want]
        assert lay.nregs == p["num_regs"] and lay.elem_bits == p["container_bits"]
        assert lay.value_bits == p["value_bits"] and lay.reg_bits == p["reg_bits"]
        regs = np.array([_ev(p["reg"], i=int(i)) for i in pts["i"]])
        off = 0
        note = p.get("container_note", "")
        m = re.search(r"bits \[(\d+):(\d+)\]", note)
        if m:
            off = int(m.group(2))
        bit_lo = np.array([_ev(p["bit_lo"], i=int(i)) for i in pts["i"]]) + off
        assert (pts["reg"] == regs).all() and (pts["bit_lo"] == bit_lo).all(), (op, e["id"], want)


def test_scale_factor_selection_matches_the_reference():
    ref = _ref()
    checked = 0
    seen: set = set()
    for form in MMA_FORMS:
        if not form.block_scale:
            continue
        sv = form.scale_vec_effective
        head = ("mma.sp::ordered_metadata" if form.is_sparse else "mma") + f".{form.shape}.kind::{form.kind}"
        for op, suf in (("scale_a", "SFA"), ("scale_b", "SFB")):
            e = ref[f"{head}.block_scale.scale_vec::{sv}.{suf}"]
            for prm in L.param_space(form, op):
                lay = L.fragment(form, op, **prm)
                if (e["id"], lay.map_key) in seen:      # same reference entry, same map: checked already
                    continue
                seen.add((e["id"], lay.map_key))
                env = {"byte_id": prm["byte_id"], "thread_id": prm["thread_id"]}
                pt = lay.enumerate()
                got = {(int(a), int(b)): (int(r), int(c))
                       for a, b, r, c in zip(pt["lane"], pt["elem"], pt["row"], pt["col"])}
                want = {}
                for lane in range(32):
                    for b in range(4):
                        if not (_ev(e["active"], lane=lane, **env) and _ev(e["chunk_valid"], b=b, **env)):
                            continue
                        chunk = _ev(e["chunk"], b=b, **env)
                        if op == "scale_a":
                            want[(lane, b)] = (_ev(e["row"], lane=lane, **env), chunk)
                        else:
                            want[(lane, b)] = (chunk, _ev(e["col"], lane=lane, **env))
                assert got == want, (form.opcode, op, prm)
                checked += 1
    assert checked >= 50          # every (scale entry, selector) pair of the reference


def _fmt(x) -> str:
    return str(x) if isinstance(x, int) else "(" + ",".join(_fmt(y) for y in x) + ")"


def test_reference_cute_layouts_audit_equal_to_the_spec():
    """The reference's CuTe TV layouts (a third transcription) are proved equal to the spec."""
    from formal.transform import cute

    ref = _ref()
    audited: dict[tuple, str] = {}
    forms_checked = 0
    for form in MMA_FORMS:
        for op in _operands(form):
            e = ref.get(ref_id(form, op))
            if not e or "cute_tv_layout" not in e or (op == "a" and form.is_sparse):
                continue                  # CuTe's sparse A atoms are over the logical K
            c = e["cute_tv_layout"]
            tv = f"({_fmt(c['thr'][0])},{_fmt(c['val'][0])}):({_fmt(c['thr'][1])},{_fmt(c['val'][1])})"
            ttl = None if c["thr_to_lane"] == "identity" else f"{_fmt(c['thr_to_lane'][0])}:{_fmt(c['thr_to_lane'][1])}"
            key = (tv, ttl, L.fragment(form, op).key)
            if key not in audited:        # the same CuTe layout against the same fragment: one proof
                cand = cute.from_cute(tv, form, op, thr_to_lane=ttl, product_lane_stride=4)
                audited[key] = audit_layout(cand, form, op).status
            assert audited[key] == "proved", (form.opcode, op, tv)
            forms_checked += 1
    assert forms_checked > 1000 and len(audited) > 40


# ------------------------------------------------------------------------------------------
# resolution: every documented form and operand has exactly one entry

def test_every_form_operand_resolves_to_exactly_one_entry():
    n = 0
    for form in MMA_FORMS:
        for op in L.layout_operands(form):
            ents = L.resolve(form, op)
            assert len(ents) == 1, (form.opcode, op, [e.id for e in ents])
            n += 1
    assert n == sum(len(L.layout_operands(f)) for f in MMA_FORMS) > 1500


def test_every_entry_is_used_and_cites_a_section():
    forms = MMA_FORMS + [f for f in cat.documented_forms() if f.family == "wgmma"]
    used = {L.resolve(f, op)[0].id for f in forms for op in L.layout_operands(f)}
    for e in L.spec().entries:
        assert e.id in used, f"spec entry {e.id} matches no documented form"
        assert re.match(r"9\.7\.14\.(3|5\.\d+|6\.2\.\d+)|9\.7\.15\.(5\.1\.1|6\.2)", e.section), (e.id, e.section)
        assert e.evidence, e.id


def test_kind_f8f6f4_containers_and_packed_mxf4():
    f = cat.parse("mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e2m1.e3m2.f32")
    a, b = L.fragment(f, "a"), L.fragment(f, "b")
    # e2m1 in the central 4 bits of each byte, e3m2 in the low 6 bits (9.7.14.5.14)
    assert (a.elem_bits, a.value_bits, a.shift) == (8, 4, 2)
    assert (b.elem_bits, b.value_bits, b.shift) == (8, 6, 0)
    assert a.enumerate()["bit_lo"][:4].tolist() == [2, 10, 18, 26]
    g = cat.parse("mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.f32.e2m1.e2m1.f32.ue8m0")
    a4 = L.fragment(g, "a")
    assert (a4.elem_bits, a4.value_bits, a4.shift, a4.epr, a4.nregs) == (4, 4, 0, 8, 4)


def test_f64_uses_64_bit_registers_and_m8n8k4_runs_four_products():
    f = L.fragment("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64", "a")
    assert (f.reg_bits, f.nregs, f.epr) == (64, 4, 1)
    q = L.fragment("mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32", "c")
    assert q.products == 4
    e = q.enumerate()
    # "MMA computation 2: Threads with %laneid 4-7 (low group) and 20-23 (high group)"
    lanes_of_1 = sorted(set(e["lane"][e["product"] == 1].tolist()))
    assert lanes_of_1 == [4, 5, 6, 7, 20, 21, 22, 23]


# ------------------------------------------------------------------------------------------
# errata: the literal text is refuted with the recorded (hand-derived) witness

def _errata() -> list[dict]:
    return tomllib.loads(ERRATA.read_text())["erratum"]


def test_errata_file_is_well_formed():
    ids = set()
    for e in _errata():
        assert e["id"] not in ids
        ids.add(e["id"])
        assert e["kind"] in ("formula", "listing", "silent", "cosmetic")
        assert e["status"] in ("corrected", "read", "open")
        assert e["evidence"]
        if "spec_entry" in e:
            assert e["spec_entry"] in L.spec().by_id
        if "form" in e:
            ents = L.resolve(e["form"], e["operand"])
            assert [x.id for x in ents] == [e["spec_entry"]]


def test_k256_text_formula_is_refuted_and_the_correction_proved():
    (e,) = [x for x in _errata() if x["id"] == "E-LAYOUT-K256-A-COL"]
    spec_lay = L.fragment(e["form"], e["operand"])
    text = L.Layout.from_formulas(e["text_row"], e["text_col"], let=dict(L.spec().let), like=spec_lay,
                                  name="ptx-text")
    opts = P.Options()
    inj = P.check_injective(text, "text", opts)
    sur = P.check_surjective(text, "text", opts)
    assert inj.status == "refuted" and sur.status == "refuted"
    assert inj.witness == e["witness_injective"]
    assert sur.witness["cell"] == e["witness_surjective"]["cell"]
    for fn in (P.check_range, P.check_injective, P.check_surjective):
        assert fn(spec_lay, "spec", opts).status == "proved"
    # the text and the spec agree except in the i < 64 column term
    rep = audit_layout(text, e["form"], e["operand"])
    assert rep.first_difference["point"] == {"lane": 0, "reg": 1, "elem": 0}      # a32: text col 32, spec col 0


def test_sparse_tf32_b_holds_one_element_per_register():
    f = cat.parse("mma.sp.sync.aligned.m16n8k16.row.col.f32.tf32.tf32.f32")
    lay = L.fragment(f, "b")
    assert (lay.nregs, lay.epr, lay.elements) == (4, 1, 4)
    assert f.operands["b"].count == 4
