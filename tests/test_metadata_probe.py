"""The hardware probe of sparse metadata, run against the spec playing the hardware.

On a GPU, ``python -m formal.hw.metadata_probe`` runs the same inputs; here the decoder
must (1) report a match when the "hardware" is the spec, (2) name the other hypothesis
when the "hardware" uses the competing layout, (3) flag a hardware that reads reversed
pairs differently, and (4) see ignored lanes as ignored.
"""

from __future__ import annotations

import pytest

from formal.catalog import parse
from formal.hw import metadata_probe as mp
from formal.metadata import meta

I8_K32 = "mma.sp.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"
U4_K64 = "mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.s32.u4.u4.s32"
F16_K16 = "mma.sp.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16"
BF16_K32 = "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.bf16.bf16.f32"
TF32_K8 = "mma.sp.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"
E4M3_K64 = "mma.sp.sync.aligned.m16n8k64.row.col.f32.e4m3.e5m2.f32"
U4_K128 = "mma.sp.sync.aligned.m16n8k128.row.col.s32.u4.u4.s32"


def test_sm90_case_list_covers_every_type_variant_and_selector():
    cases = mp.sm90_cases()
    got = {(f.atype, f.sparsity, f.shape, s) for f, s in cases}
    for t, shapes in {"f16": ("m16n8k16", "m16n8k32"), "bf16": ("m16n8k16", "m16n8k32"),
                      "tf32": ("m16n8k8", "m16n8k16"), "e4m3": ("m16n8k64",), "e5m2": ("m16n8k64",),
                      "s8": ("m16n8k32", "m16n8k64"), "u8": ("m16n8k32", "m16n8k64"),
                      "s4": ("m16n8k64", "m16n8k128"), "u4": ("m16n8k64", "m16n8k128")}.items():
        for shape in shapes:
            for var in ("sp", "sp::ordered_metadata"):
                sels = {s for (a, v, sh, s) in got if (a, v, sh) == (t, var, shape)}
                assert sels, (t, var, shape)
                f = next(f for f, s in cases if (f.atype, f.sparsity, f.shape) == (t, var, shape))
                assert sels == set(f.selectors)
    assert not any(f.kind for f, _ in cases)          # no sm_120 kinds on sm_90


def test_probe_inputs_shapes():
    p = mp.build(U4_K128, 0)
    fm = meta(U4_K128)
    f = parse(U4_K128)
    assert p.groups == 16 and p.warps == len(p.configs) * 16
    assert p.inputs["a"].shape == (p.warps, 32, f.operands["a"].count)
    assert p.inputs["b"].shape == (p.warps, 32, f.operands["b"].count)
    assert p.inputs["e"].shape == (p.warps, 32, 1)
    kinds = [c.kind for c in p.configs]
    assert kinds.count("locate") == 256 and kinds.count("base") == 1
    assert kinds.count("value") == len(fm.legal_nibbles) == 12
    assert p.case.imm.sel == 0 and p.case.form == f


@pytest.mark.parametrize("op,sel", [(I8_K32, 1), (U4_K64, 0), (F16_K16, 3), (BF16_K32, 1), (TF32_K8, 2),
                                    (E4M3_K64, 0)])
def test_spec_as_hardware_matches(op, sel):
    p = mp.build(op, sel)
    rep = mp.decode(p, mp.simulate(p))
    assert rep.ok, rep.text()
    fm = meta(op)
    assert rep.hypotheses[fm.layout.id]
    assert all(rep.values.values()) and len(rep.values) == len(fm.legal_nibbles)
    assert rep.random_ok == rep.random_total == 4
    active = {int(x) for x in fm.e_table(sel)[:, 0]}
    assert set(rep.ignored_lanes) == set(range(32)) - active
    assert len(rep.observed) == 8 * len(active)
    # the locate configurations moved the non-zeros from {0,1} to {2,3}: nibble 0b1110 seen
    assert {o["nibble_seen"] for o in rep.observed} == {"0b1110"}
    if fm.layout.alternative:
        assert rep.hypotheses[fm.layout.alternative.id] is False


@pytest.mark.parametrize("op", [I8_K32, "mma.sp.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32"])
def test_decoder_names_the_competing_hypothesis(op):
    fm = meta(op)
    p = mp.build(op, 0)
    rep = mp.decode(p, mp.simulate(p, layout_override=fm.layout.alternative))
    assert not rep.ok
    assert rep.hypotheses == {fm.layout.id: False, fm.layout.alternative.id: True}


def test_decoder_flags_a_hardware_that_sorts_reversed_pairs(monkeypatch):
    """If silicon ignored the order of a reversed pair under plain .sp, the value
    configurations of the reversed nibbles must fail (and only those)."""
    p = mp.build(I8_K32, 0)
    real = mp._logical
    monkeypatch.setattr(mp, "_logical", lambda fm, st, e, sel, mode="literal", layout=None:
                        real(fm, st, e, sel, "sorted" if mode == "literal" else mode, layout))
    d = mp.simulate(p)
    monkeypatch.setattr(mp, "_logical", real)
    rep = mp.decode(p, d)
    wrong = {k for k, v in rep.values.items() if not v}
    assert wrong == {f"0b{v:04b}" for v in meta(I8_K32).legal_nibbles if (v & 3) > (v >> 2)}
    assert rep.hypotheses[meta(I8_K32).layout.id]             # the layout itself is still right


def test_decoder_reports_ub_readings():
    p = mp.build(F16_K16, 0)
    rep = mp.decode(p, mp.simulate(p))
    # the simulated hardware reads literally: a repeated index sums both stored values
    assert set(rep.ub) == {"0b0000", "0b0101", "0b1010", "0b1111"}
    assert all("repeated-sum" in v and "repeated-last" not in v for v in rep.ub.values())


def test_decoder_sees_garbage_as_anomaly():
    p = mp.build(TF32_K8, 0)
    d = mp.simulate(p)
    d = d.copy()
    d[0, 0, 0] = 0x7FC00000          # a NaN in the base configuration
    rep = mp.decode(p, d)
    assert rep.anomalies and not rep.ok


def test_main_simulate_one_form(capsys):
    assert mp.main(["--simulate", "--form", I8_K32]) == 0
    out = capsys.readouterr().out
    assert "2/2 (form, selector) cases match the spec" in out
