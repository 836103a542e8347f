"""formal.catalog.ptxas (the assembler driver) and formal.catalog.sweep (catalog vs ptxas).

* The driver's decision procedure is tested against a scripted fake ptxas (no ptxas
  needed): errors are attributed by line, messages from ptxas's own helper code are not,
  and nothing is accepted unless a module containing it assembled with exit status 0.
* Tests marked ``ptxas`` run NVIDIA's assembler (skipped with a message when none is found):
  a representative sample of legal and illegal forms on sm_80, sm_89, sm_90, sm_100a and
  sm_120a agrees with the catalog modulo specs/errata.toml, every erratum's evidence is
  reproduced by the same ptxas release, and every erratum formula matches its own evidence.
* The whole-space sweep is ``-m slow``.
"""

from __future__ import annotations

import io
import os
import re
from contextlib import redirect_stderr, redirect_stdout

import pytest

from formal import catalog as cat
from formal import legality, parse
from formal.catalog import ptxas as P
from formal.catalog import sweep as S
from formal.cli import main

FOUND = P.installations()
needs_ptxas = pytest.mark.skipif(
    not FOUND, reason="no ptxas found: set $PTXAS, `pip install nvidia-cuda-nvcc`, or put CUDA's ptxas on PATH")
SAMPLE_TARGETS = ("sm_80", "sm_89", "sm_90", "sm_100a", "sm_120a")


# ---- the decision procedure, against a scripted fake ptxas ---------------------------------------

FAKE = P.Ptxas("/fake/ptxas", "99.0", "99.0.0", "9.5", "test")


class FakeRunner:
    """Plays ptxas: a line containing BAD gets an error on its line; a module containing
    HELPER fails with a message from ptxas's '<builtin>' file; a module containing SILENT
    fails with no message at all; a module with .target sm_1 fails as a whole."""

    def __init__(self):
        self.calls: list[tuple[int, list[str]]] = []

    def __call__(self, path, text, arch, timeout=600):
        lines = text.splitlines()
        body = [ln.strip() for ln in lines if ln.strip().startswith("mma")]
        if ".target sm_1\n" in text + "\n":
            self.calls.append((1, body))
            return 1, "ptxas m.ptx, line 2; fatal   : Unknown target\nptxas fatal   : Ptx assembly aborted due to errors\n"
        out, rc = [], 0
        for n, ln in enumerate(lines, 1):
            if "BAD" in ln:
                out.append(f"ptxas m.ptx, line {n}; error   : Unknown modifier '.BAD'")
                rc = 1
        if any("HELPER" in b for b in body):
            out.append("ptxas <builtin>, line 16; error   : Unknown symbol '__cuda_internal'")
            rc = 1
        if any("SILENT" in b for b in body):
            rc = 1
        if rc:
            out.append("ptxas fatal   : Ptx assembly aborted due to errors")
        self.calls.append((rc, body))
        return rc, "\n".join(out) + "\n"


@pytest.fixture
def fake(monkeypatch):
    runner = FakeRunner()
    monkeypatch.setattr(P, "_run_module", runner)
    monkeypatch.setattr(P, "arch_for", lambda t: t)
    return runner


def _lines(tags):
    return [f"mma.{t}.line{i};" for i, t in enumerate(tags)]


def test_errors_are_attributed_by_line(fake):
    lines = _lines(["ok", "BAD", "ok", "BAD", "ok"])
    res = P.decide_lines(lines, "sm_80", "9.0", FAKE)
    assert [ok for ok, _, _ in res] == [True, False, True, False, True]
    assert res[1][1] == ["error: Unknown modifier '.BAD'"] and res[1][2] == "error on its line"
    assert res[0][1] == [] and "rc=0" in res[0][2]


def test_builtin_messages_are_not_attributed_and_get_bisected(fake):
    # the <builtin> error carries a line number of ptxas's own file: it must not reject
    # whatever instruction happens to sit on that line of ours
    tags = ["ok"] * 20
    tags[3] = tags[11] = "HELPER"
    lines = _lines(tags)
    res = P.decide_lines(lines, "sm_80", "9.0", FAKE)
    assert [i for i, (ok, _, _) in enumerate(res) if not ok] == [3, 11]
    assert any("<builtin>" in m and "Unknown symbol" in m for m in res[3][1])


def test_nothing_is_accepted_from_silence(fake):
    tags = ["ok", "SILENT", "ok", "BAD", "ok", "SILENT", "ok", "ok"]
    lines = _lines(tags)
    res = P.decide_lines(lines, "sm_80", "9.0", FAKE)
    assert [ok for ok, _, _ in res] == [t == "ok" for t in tags]
    # every accepted line was in a module that assembled with rc == 0
    clean = [set(body) for rc, body in fake.calls if rc == 0]
    for line, (ok, _, _) in zip(lines, res):
        if ok:
            assert any(line in c for c in clean), line


def test_a_target_ptxas_refuses_rejects_everything_without_bisecting(fake):
    res = P.decide_lines(_lines(["ok", "ok", "ok"]), "sm_1", "9.0", FAKE)
    assert all(not ok and how == "empty module rejected" for ok, _, how in res)
    assert len(fake.calls) == 1 and res[0][1] == ["fatal: Unknown target"]


def test_parse_messages():
    text = ("ptxas m.ptx, line 12; error   : Illegal alayout '.col' for instruction 'mma'\n"
            "ptxas m.ptx, line 14; info    : Advisory: something\n"
            "ptxas <builtin>, line 16; error   : Unknown symbol 'x'\n"
            "ptxas fatal   : Ptx assembly aborted due to errors\n")
    per_line, other = P._parse_messages(text)
    assert per_line == {12: [("error", "Illegal alayout '.col' for instruction 'mma'")], 14: [("info", "Advisory: something")]}
    assert other == [("error", "<builtin>, line 16: Unknown symbol 'x'")]


def test_instruction_lines_use_the_register_pool():
    f = parse("mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64.rn")
    line = P.instruction_line(P.Probe(f))
    assert line.startswith(f.opcode + " {%fd") and line.endswith(";")
    assert len(re.findall(r"%fd\d+", line)) == sum(o.count for o in f.operands.values())
    sp = P.instruction_line(P.as_probe("mma.sp.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32 {%r1}, {%r2}, {%r3}, {%r4}, %r5, 0x1"))
    assert sp.endswith(", 1;")
    w = P.instruction_line(P.Probe(parse("wmma.load.a.sync.aligned.row.m16n16k16.f16"),
                                   spelling="wmma.load.a.sync.aligned.m16n16k16.row.f16"))
    assert w.startswith("wmma.load.a.sync.aligned.m16n16k16.row.f16 {%r0")
    text, first = P.module_text([line, sp], "sm_90", "9.0")
    assert text.splitlines()[first - 1].strip() == line


def test_arch_for_old_targets():
    assert P.arch_for("sm_70") == "sm_75" and P.arch_for("sm_72") == "sm_75"
    assert P.arch_for("sm_90a") == "sm_90a" and P.arch_for("sm_120f") == "sm_120f"


# ---- the sweep's case generators (no ptxas) -------------------------------------------------------

def test_near_misses_are_single_axis_mutations():
    nm = S.near_miss_probes("warp")            # wgmma's: tests/test_wgmma_catalog.py
    assert len(nm) > 10000
    documented = {f.opcode for f in cat.documented_forms()}
    for probe, (axis, frm, to), parent in nm[::97]:
        assert probe.opcode not in documented
        p = parse(parent)
        diff = [a for a in cat.AXES if getattr(p, a) != getattr(probe.form, a)]
        if axis == "matrix":              # the type moves with the matrix
            assert set(diff) <= {"matrix", "atype", "btype", "ctype"}
        elif axis == "sparsity":          # mma <-> mma.sp
            assert set(diff) <= {"sparsity", "family"}
        elif axis == "type":
            assert len(diff) == 1 and diff[0].endswith("type")
        else:
            assert diff == [axis], (parent, probe.opcode, diff)
    axes = {m[1][0] for m in nm}
    # (no .space near misses: every wmma syntax block allows every state space)
    assert {"shape", "atype", "btype", "dtype", "ctype", "kind", "scale_vec", "stype", "alayout", "blayout",
            "layout", "sparsity", "satfinite", "aligned", "sync", "bitop", "rounding", "matrix", "type",
            "block_scale", "popc"} <= axes


def test_selector_and_spelling_cases():
    sel = S.selector_cases(["sm_90"], "9.0")
    assert {c.probe.sel for c in sel} == {0, 1, 2, 3, 4}
    assert len(sel) == 5 * len(cat.forms("sm_90", "9.0", "mma.sp"))
    sp = S.spelling_cases(["sm_90"], "9.0")
    spellings = {c.spelling for c in sp}
    assert "wmma.load.b.sync.aligned.m16n16k16.row.f16" in spellings          # the seed's order
    assert "wmma.load.a.sync.m16n16k16.global.row.f16" in spellings           # shape, space, layout; no .aligned
    assert "wmma.mma.sync.aligned.m16n16k16.row.col.f32.f32" in spellings
    assert "wmma.mma.sync.m16n16k16.row.col.f32.f32" in spellings


def test_boundary_cases_bracket_min_ptx():
    order = ["sm_70", "sm_72", "sm_75", "sm_80", "sm_89", "sm_90", "sm_120a"]
    cases = S.boundary_cases(order, "9.5")
    by = {}
    for c in cases:
        by.setdefault(c.spelling, []).append((c.target, c.ptx))
    assert ("sm_89", "8.6") in by["mma.sync.aligned.m16n8k16.row.col.f32.e4m3.e5m2.f32"]
    assert ("sm_89", "8.7") in by["mma.sync.aligned.m16n8k16.row.col.f32.e4m3.e5m2.f32"]
    assert {("sm_70", "6.2"), ("sm_70", "6.3")} <= set(by["wmma.load.a.sync.row.m16n16k16.f16"])
    # one below a form's minimum PTX version is illegal, the minimum itself legal
    for c in cases[::11]:
        ok = legality(c.probe.form, c.target, c.ptx, sel=c.probe.sel).ok
        assert ok == (c.note.startswith(("min PTX", "last PTX"))), (c.spelling, c.target, c.ptx, c.note)


def test_errata_file_is_well_formed():
    ids = [e.id for e in S.errata()]
    assert len(ids) == len(set(ids)) >= 10
    for e in S.errata():
        assert e.kind in ("ptxas-accepts", "ptxas-rejects", "text")
        assert e.section and e.data.get("text") and e.data.get("catalog") and e.summary
        assert (e.when is not None) == (e.kind != "text"), e.id
        ev = e.data.get("evidence", [])
        assert ev, f"{e.id} has no evidence"
        for x in ev:
            if isinstance(x, str):            # a text erratum may cite a proof or a probe instead of ptxas
                assert e.kind == "text" and x, e.id
                continue
            assert re.fullmatch(r"\d+\.\d+\.\d+", x["ptxas"]) and x["instruction"].endswith(";")
            cat.parse_target(x["target"]), cat.check_ptx(x["ptx"])
            # accepted silently <=> no message; a rejection quotes ptxas's exact message
            assert isinstance(x["accepted"], bool) and (x["message"] == "") == x["accepted"], (e.id, x)


def test_erratum_formulas_match_their_accepted_evidence():
    # a ptxas-accepts erratum must explain its own evidence of acceptance, and the catalog
    # must indeed call that instruction illegal
    for e in S.errata():
        if e.kind != "ptxas-accepts":
            continue
        hits = 0
        for x in e.data["evidence"]:
            if not x["accepted"]:
                continue
            probe = P.as_probe(x["instruction"])
            case = S.Case("evidence", probe, x["target"], x["ptx"])
            ok, _ = S.catalog_verdict(case)
            assert not ok, (e.id, x["instruction"])
            assert S.explain(case, ok, True) == e.id, (e.id, x["instruction"])
            hits += 1
        assert hits, e.id


# ---- with a real ptxas ----------------------------------------------------------------------------

@needs_ptxas
@pytest.mark.ptxas
def test_probe_finds_version_and_max_ptx():
    for px in FOUND:
        assert re.fullmatch(r"\d+\.\d+", px.release) and px.version.startswith(px.release)
        versions = load_versions()
        assert px.max_ptx in versions
        ok = P.decide_lines([], "sm_80", px.max_ptx, px)             # empty list: just the probe
        assert ok == []
        rc, _ = P._run_module(px.path, P._empty_module(px.max_ptx, "sm_80"), "sm_80")
        assert rc == 0
        i = versions.index(px.max_ptx)
        if i + 1 < len(versions):
            rc, text = P._run_module(px.path, P._empty_module(versions[i + 1], "sm_80"), "sm_80")
            assert rc != 0 and "version" in text.lower()


def load_versions():
    from formal.specdata import load_spec

    return list(load_spec("targets")["ptx"]["versions"])


def _sample_cases(target: str, ptx: str) -> list[S.Case]:
    from tests.test_catalog_nearmiss import NEAR_MISSES

    cases = [S.Case("documented", P.Probe(f, sel=0 if f.is_sparse else None), target, ptx)
             for f in cat.documented_forms()]
    cases += S.selector_cases([target], ptx)
    for op, t, p, sel, *_ in NEAR_MISSES:
        if t == target and p == "9.0":
            probe = P.as_probe(op)
            cases.append(S.Case("near-miss", P.Probe(probe.form, sel=sel if probe.form.is_sparse else None), target, ptx))
    # a slice of the generated near misses
    cases += [S.Case("near-miss", p, target, ptx, mutation=m) for p, m, _ in S.near_miss_probes("warp")[::40]]
    return cases


@needs_ptxas
@pytest.mark.ptxas
@pytest.mark.parametrize("target", SAMPLE_TARGETS)
def test_sample_agrees_with_catalog_modulo_errata(target):
    for px in FOUND:
        ptx = S.catalog_ptx(px)
        cases = _sample_cases(target, ptx)
        verdicts = P.assemble([c.probe for c in cases], target, ptx, px)
        legal = accepted = 0
        bad = []
        for c, v in zip(cases, verdicts):
            ok, reasons = S.catalog_verdict(c)
            legal += ok
            accepted += v.accepted
            if ok != v.accepted and S.explain(c, ok, v.accepted) is None:
                bad.append((c.spelling, c.probe.sel, ok, v.messages, reasons[:1]))
        assert not bad, f"ptxas {px.version} {target}: {len(bad)} unexplained, e.g. {bad[:5]}"
        # the sample has both verdicts in quantity
        assert legal > 300 and len(cases) - legal > 300, (legal, len(cases))


@needs_ptxas
@pytest.mark.ptxas
def test_errata_evidence_is_reproduced():
    by_release = {px.release: px for px in FOUND}
    checked = 0
    for e in S.errata():
        for x in e.data["evidence"]:
            if isinstance(x, str):                # not a ptxas line (test_errata_file_is_well_formed)
                continue
            rel = ".".join(x["ptxas"].split(".")[:2])
            px = by_release.get(rel)
            if px is None or P._pv(x["ptx"]) > P._pv(px.max_ptx):
                continue
            v = P.assemble_lines([x["instruction"]], x["target"], x["ptx"], px)[0]
            assert v.accepted == x["accepted"], (e.id, x, v.messages)
            if x["message"]:
                assert x["message"] in v.messages, (e.id, x["message"], v.messages)
            checked += 1
    assert checked >= 10


@needs_ptxas
@pytest.mark.ptxas
def test_cli_ptxas_check():
    out = io.StringIO()
    with redirect_stdout(out):
        rc = main(["ptxas-check", "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32", "-t", "sm_80"])
    assert rc == 0 and "agree" in out.getvalue() and "requires sm_89 or higher" in out.getvalue()
    out = io.StringIO()
    with redirect_stdout(out):
        rc = main(["ptxas-check", "mma.sp.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32", "-t", "sm_80", "--sel", "3"])
    assert rc == 0 and "erratum E-SP-SEL-K32-F16F32" in out.getvalue()


@needs_ptxas
@pytest.mark.ptxas
@pytest.mark.parametrize("target", S.FAMILY_TARGETS)
def test_cli_ptxas_check_family_targets_are_explained(target):
    # .kind::f8f6f4 with fp8 operands on every family-specific target: agree, or an erratum names it
    out = io.StringIO()
    with redirect_stdout(out):
        rc = main(["ptxas-check", "mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e4m3.e4m3.f32", "-t", target])
    assert rc == 0 and "no erratum" not in out.getvalue(), out.getvalue()
    if target in ("sm_100f", "sm_103f", "sm_110f"):
        assert "erratum E-KIND-F8F6F4-SM10X" in out.getvalue()


@needs_ptxas
@pytest.mark.ptxas
def test_cli_ptxas_check_unexplained_is_exit_1(monkeypatch):
    monkeypatch.setattr(S, "errata", lambda: ())
    with redirect_stdout(io.StringIO()):
        rc = main(["ptxas-check", "mma.sp.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32", "-t", "sm_80", "--sel", "3"])
    assert rc == 1


def test_cli_without_ptxas_is_exit_3(monkeypatch):
    monkeypatch.setattr(P, "installations", lambda: [])
    err = io.StringIO()
    with redirect_stderr(err), redirect_stdout(io.StringIO()):
        assert main(["ptxas-sweep", "--targets", "sm_80"]) == 3
        assert main(["ptxas-check", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"]) == 3
    assert "no ptxas found" in err.getvalue()


def test_cli_bad_input_is_exit_2():
    err = io.StringIO()
    with redirect_stderr(err), redirect_stdout(io.StringIO()):
        assert main(["ptxas-sweep", "--targets", "sm_99"]) == 2
        assert main(["ptxas-sweep", "--categories", "nonsense"]) == 2
        assert main(["ptxas-check", "mma.sync.aligned.m16n8k16.row.col.f32.bf61.f16.f32"]) == 2
    assert all(line.startswith("ptx-formal: error:") for line in err.getvalue().splitlines())


@needs_ptxas
@pytest.mark.slow
def test_full_sweep_has_no_unexplained_disagreement():
    res = S.sweep(FOUND)
    assert not res.unexplained, [(r.ptxas, r.target, r.spelling, r.sel, r.messages) for r in res.unexplained[:20]]
    # the whole space: every category ran on every target
    cats = {(k[1], k[3]) for k in res.counts}
    for t in S.SWEEP_TARGETS:
        for c in ("documented", "near-miss", "spelling"):
            assert (t, c) in cats


# ---- the checked-in sweep report (proofs/ptxas-sweep.json) stays consistent with the errata --------

REPORT = os.path.join(os.path.dirname(__file__), "..", "proofs", "ptxas-sweep.json")


REPORT_WGMMA = REPORT[:-5] + "-wgmma.json"     # `ptxas-sweep --family wgmma` (the warpgroup instructions)


@pytest.mark.skipif(not os.path.exists(REPORT), reason="proofs/ptxas-sweep.json not generated yet")
def test_recorded_sweep_is_explained_by_the_current_errata():
    res = S.reexplain(S.load_report(REPORT))
    assert not res.unexplained, [(r.ptxas, r.target, r.spelling, r.sel) for r in res.unexplained[:10]]
    # it covers the whole space: every target and category, two ptxas releases
    releases = {p["release"] for p in res.ptxas}
    assert len(releases) >= 2
    seen = {(k[1], k[3]) for k in res.counts}
    for t in S.SWEEP_TARGETS:
        for c in ("documented", "near-miss", "spelling"):
            assert (t, c) in seen, (t, c)
    wg = S.reexplain(S.load_report(REPORT_WGMMA))
    assert not wg.unexplained
    # the immediate category is wgmma's alone
    assert {k[3] for k in res.counts} | {k[3] for k in wg.counts} == set(S.CATEGORIES)
    # every ptxas-* erratum explains at least one recorded disagreement (none is stale)
    used = {r.erratum for r in res.rows} | {r.erratum for r in wg.rows}
    for e in S.errata():
        if e.kind != "text":
            assert e.id in used, f"{e.id} explains nothing in the recorded sweeps"
    # each report's markdown is the rendering of its JSON
    for r, path in ((res, REPORT), (wg, REPORT_WGMMA)):
        md = S.report_markdown(r)
        with open(path[:-5] + ".md") as f:
            recorded = f.read()
        strip = lambda s: re.sub(r"Wall time \d+ s", "", s)
        assert strip(md) == strip(recorded), path
