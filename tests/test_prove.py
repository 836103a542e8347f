"""formal.prove: both engines, certificates, the registry, the report, exit codes."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from formal import catalog as cat
from formal import layout as L
from formal import prove as P
from formal.cli import main
from formal.specdata import spec_dir

F16 = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
MX = "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0"
REPORT = spec_dir().parent / "proofs" / "REPORT.md"


def _layout_obligations(forms=None):
    fs = list(cat.documented_forms()) if forms is None else forms
    return P.dedupe(P.layout_obligations(fs))


def _stratified(obs, every):
    """Every `every`-th obligation of each family (at least the first of each): a CI-sized slice
    that still reaches every family and every layout kind."""
    seen: dict[str, int] = {}
    out = []
    for o in obs:
        i = seen.get(o.family, 0)
        seen[o.family] = i + 1
        if i % every == 0:
            out.append(o)
    return out


def _engines_agree(obs):
    by = {}
    for engine in ("z3", "enum", "both"):
        res = P.run(obs, P.Options(engine=engine))
        by[engine] = [r.status for r in res]
        solvers = {r.solver for r in res}
        if engine == "both":
            assert solvers <= {"z3+enum", "catalog", "arithmetic"}
    assert by["z3"] == by["enum"] == by["both"]
    assert set(by["both"]) == {"proved"}


def test_a_stratified_slice_of_the_catalog_is_proved_by_each_engine_alone_and_by_both():
    """Every 8th layout obligation of each family: Z3 alone, enumeration alone and both agree.
    The whole catalog: test_the_whole_catalog_is_proved_by_each_engine_alone_and_by_both (slow)."""
    obs = _layout_obligations()
    part = _stratified(obs, 8)
    assert {o.family for o in part} == {o.family for o in obs} and len(part) * 6 < len(obs)
    _engines_agree(part)


@pytest.mark.slow
def test_the_whole_catalog_is_proved_by_each_engine_alone_and_by_both():
    """Every layout verdict is reached by Z3 alone and by enumeration alone, and they agree."""
    obs = _layout_obligations()
    assert len(obs) > 500
    _engines_agree(obs)


def test_obligation_families_and_dedupe():
    obs = _layout_obligations()
    fams = {o.family for o in obs}
    assert fams == {"layout.resolve", "layout.regcount", "layout.packing", "layout.range", "layout.injective",
                    "layout.surjective", "layout.products", "layout.shared", "layout.same_as"}
    # dedupe: far fewer unique map proofs than form-operands, but every form-operand is covered
    inj = [o for o in obs if o.family == "layout.injective"]
    covered = {c for o in inj for c in o.cover}
    want = {(f.opcode, op) for f in cat.documented_forms() if f.family in L.LAYOUT_FAMILIES for op in L.layout_operands(f)}
    assert covered == want and len(inj) < len(want) / 10
    # the shared-layout claim is made exactly where the text makes it
    shared = {c[0] for o in obs if o.family == "layout.shared" for c in o.cover}
    mixed = {f.opcode for f in cat.documented_forms() if f.shape == "m8n8k4" and f.atype == "f16" and f.ctype != f.dtype}
    mma_forms = {f.opcode for f in cat.documented_forms() if f.family in ("mma", "mma.sp")}
    assert shared == mma_forms - mixed and mixed


def test_one_form_proves_quickly_with_certificates(tmp_path):
    import time

    t = time.perf_counter()
    res = P.run(P.collect([cat.parse(F16)]))
    assert time.perf_counter() - t < 10
    assert {r.status for r in res} == {"proved"}
    n = P.write_certificates(res, tmp_path)
    files = sorted(tmp_path.rglob("*.smt2"))
    assert n == len(files) > 5
    for f in files:
        text = f.read_text()
        assert "; claim:" in text and "(check-sat)" in text
        assert P.recheck(text) == "unsat", f


def test_certificates_are_specific_to_the_layout():
    """A certificate states the negated claim about THIS map: the same query with the K256
    text formula is satisfiable (a certificate that any map passes would be worthless)."""
    spec_lay = L.fragment("mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.xor.popc", "a")
    good = P.check_injective(spec_lay, "k256 spec", P.Options(engine="z3"))
    assert good.status == "proved" and P.recheck(good.smt2) == "unsat"
    text = L.Layout.from_formulas(
        "groupID if (0 <= i < 32 or 64 <= i < 96) else groupID + 8",
        "(threadID_in_group * 32) + i if i < 64 else (threadID_in_group * 32) + (i & 0x1F) + 128",
        let=dict(L.spec().let), like=spec_lay)
    import z3

    p, q = P._point("p"), P._point("q")
    rp, cp, pp = text.z3_terms(*p)
    rq, cq, pq = text.z3_terms(*q)
    s = z3.Solver()
    s.add(text.z3_held(*p), text.z3_held(*q), P._lt_lex(list(p), list(q)), rp == rq, cp == cq, pp == pq)
    assert P.recheck(s.to_smt2()) == "sat"


def test_engines_disagreeing_or_timing_out_is_unknown(monkeypatch):
    ob = P.Obligation("layout.injective", "x", "claim")
    r = P._combine(ob, ("proved", "smt"), ("refuted", {"p": 1}), 0.0)
    assert r.status == "unknown" and "disagree" in r.reason
    r = P._combine(ob, ("unknown", "timeout"), ("proved", None), 0.0)
    assert r.status == "unknown"
    r = P._combine(ob, ("refuted", {"p": 1, "q": 2}), ("refuted", {"p": 1, "q": 3}), 0.0)
    assert r.status == "unknown" and "different minimal witnesses" in r.reason
    # a solver that gives up: never counted as proved, exit code 3
    monkeypatch.setattr(P, "_check", lambda s: "unknown")
    res = P.run(_layout_obligations([cat.parse(F16)]))
    solver_based = [r for r in res if r.obligation.family in ("layout.injective", "layout.range", "layout.surjective")]
    assert solver_based and all(r.status == "unknown" for r in solver_based)
    assert P.exit_code(res) == 3


def test_exit_codes():
    ob = P.Obligation("f", "s", "c")
    assert P.exit_code([P.Proved(ob, "z3")]) == 0
    assert P.exit_code([P.Proved(ob, "z3"), P.Unknown(ob, "t")]) == 3
    assert P.exit_code([P.Refuted(ob, {}), P.Unknown(ob, "t")]) == 1


def test_a_crashing_obligation_is_unknown_not_fatal():
    ob = P.Obligation("x.crash", "s", "c", run=lambda o: 1 / 0)
    r = ob.prove()
    assert r.status == "unknown" and "ZeroDivisionError" in r.reason


@dataclass
class _ForeignResult:          # the shape other modules' results have (duck-typed)
    status: str
    obligation: str
    subject: str
    detail: str = ""
    witness: dict | None = None
    seconds: float = 0.0
    smt2: str | None = None


def test_registry_accepts_obligations_and_foreign_results(monkeypatch):
    monkeypatch.setattr(P, "_REGISTRY", {})
    seen_forms = []

    def gen_forms(forms):
        seen_forms.append(len(forms))
        ob = P.Obligation("demo.claim", "demo", "always", key="k1", cover=[(forms[0].opcode, "demo")])
        ob.run = lambda opts: P.Proved(ob, "demo")
        twin = P.Obligation("demo.claim", "demo", "always", key="k1", cover=[(forms[-1].opcode, "demo")])
        return [ob, twin]

    def gen_results(round_trip=True):          # takes no forms: called with no argument
        return [_ForeignResult("proved", "cover", f"{F16} sel=0", "fine", smt2="(check-sat)"),
                _ForeignResult("refuted", "codec", f"{MX}", witness={"nibble": 5}),
                _ForeignResult("unknown", "word", "catalog-wide", "timeout")]

    P.register_obligations("demo", gen_forms)
    P.register_obligations("meta", gen_results)
    obs = P.collect()
    assert seen_forms == [len(cat.documented_forms())]
    demo = [o for o in obs if o.family == "demo.claim"]
    assert len(demo) == 1 and len(demo[0].cover) == 2          # deduplicated, covers merged
    res = {o.family: o.prove() for o in obs}
    assert res["meta.cover"].status == "proved" and res["meta.cover"].smt2 == "(check-sat)"
    assert res["meta.codec"].status == "refuted" and res["meta.codec"].witness == {"nibble": 5}
    assert res["meta.word"].status == "unknown"
    # one form: foreign obligations about other forms are dropped, catalog-wide ones kept
    one = P.collect([cat.parse(F16)])
    fams = sorted(o.family for o in one)
    assert fams == ["demo.claim", "meta.cover", "meta.word"]
    with pytest.raises(TypeError):
        P.register_obligations("bad", lambda: [42])
        P.collect()


def test_optional_modules_are_skipped_only_when_absent(monkeypatch):
    assert P.load_optional_modules(["formal._surely_not_a_module"]) == {"formal._surely_not_a_module": "absent"}
    import importlib

    def boom(name):
        raise ModuleNotFoundError("No module named 'z9'", name="z9")

    monkeypatch.setattr(importlib, "import_module", boom)
    with pytest.raises(ModuleNotFoundError):
        P.load_optional_modules(["formal.metadata"])


@pytest.fixture(scope="module")
def catalog_run():
    """What `ptx-formal prove --all` runs (the whole registry over every documented form; about 30 s)."""
    modules = P.load_optional_modules()
    forms = list(cat.documented_forms())
    return modules, forms, P.run(P.collect(forms))


@pytest.mark.slow
def test_report_is_current(catalog_run):
    """proofs/REPORT.md is what `ptx-formal prove --all` writes today (timings are not in it).
    CI runs test_report_agrees_with_a_sample_run (the counts, and a slice of the verdicts)."""
    modules, forms, res = catalog_run
    text = P.report_markdown(res, forms, modules)
    assert REPORT.exists(), "run `ptx-formal prove --all` to write proofs/REPORT.md"
    assert REPORT.read_text() == text, "proofs/REPORT.md is stale: run `ptx-formal prove --all`"
    assert "seconds" not in text.lower()


def _quick_wmma(obs):
    return [o for o in obs if o.family.startswith("wmma.") and not o.family.startswith("wmma.memory")]


@pytest.fixture(scope="module")
def sample_run():
    """The registry over every documented form, run on every 16th obligation of each family
    (at least one of each) plus every quick wmma obligation; the whole run is catalog_run (slow)."""
    P.load_optional_modules()
    forms = list(cat.documented_forms())
    obs = P.collect(forms)
    keep = {id(o) for o in _stratified(obs, 16) + _quick_wmma(obs)}
    part = [o for o in obs if id(o) in keep]
    return forms, obs, P.run(part)


def _report_tables():
    """REPORT.md's summary rows {family: (unique, covers, proved, refuted, unknown)} and its
    refuted/unknown rows {(family, subject): status}."""
    summary, bad = {}, {}
    for line in REPORT.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 7 and cells[0].startswith("`") and cells[2].isdigit():
            summary[cells[0].strip("`")] = tuple(int(c) for c in cells[2:])
        elif len(cells) == 4 and cells[0].startswith("`") and cells[2] in ("refuted", "unknown"):
            bad[(cells[0].strip("`"), cells[1])] = cells[2]
    return summary, bad


def test_report_agrees_with_a_sample_run(sample_run):
    """proofs/REPORT.md against today's registry: every family's obligation and cover counts are
    the registry's, and each sampled verdict is the one the report gives (proved unless listed
    under 'Refuted and unknown').  The byte-for-byte regeneration: test_report_is_current (slow)."""
    forms, obs, res = sample_run
    assert REPORT.exists(), "run `ptx-formal prove --all` to write proofs/REPORT.md"
    summary, bad = _report_tables()
    counts: dict[str, list[int]] = {}
    for o in obs:
        c = counts.setdefault(o.family, [0, 0])
        c[0] += 1
        c[1] += len(o.cover)
    assert {f: tuple(c) for f, c in counts.items()} == {f: row[:2] for f, row in summary.items()}, \
        "proofs/REPORT.md is stale: run `ptx-formal prove --all`"
    assert {r.obligation.family for r in res} == set(summary)
    for r in res:
        want = bad.get((r.obligation.family, r.obligation.subject), "proved")
        assert r.status == want, (r.obligation.family, r.obligation.subject, r.status, want)
    assert f"Catalog: {len(forms)} documented forms" in REPORT.read_text()


def test_wmma_registers_on_import_and_everything_proves(sample_run):
    """(from tests/test_wmma_registry.py: its obligations are decided by the sample run above,
    which holds every quick wmma obligation)"""
    import formal.wmma  # noqa: F401
    assert "wmma" in P.registered()
    obs = P.collect(family="wmma")
    fams = {o.family for o in obs}
    assert {"wmma.theorem.pipeline", "wmma.theorem.accumulator_f16_to_f32_undefined", "wmma.memory.align_readings_agree",
            "wmma.map.covers"} <= fams
    mem = [o for o in obs if o.family == "wmma.memory.align_readings_agree"]
    assert len(mem) == len({o.subject for o in mem}) == 114          # spaces and .aligned merged
    quick = [o for o in obs if not o.family.startswith("wmma.memory")]
    # the same obligations, decided by the same P.run over the registry
    res = [r for r in sample_run[2] if r.obligation.family.startswith("wmma.") and
           not r.obligation.family.startswith("wmma.memory")]
    assert sorted(r.obligation.key for r in res) == sorted(o.key for o in quick)
    assert all(r.status == "proved" for r in res), [r.to_dict() for r in res if r.status != "proved"]
    ex = next(r for r in res if r.obligation.family == "wmma.theorem.accumulator_f16_to_f32_undefined")
    assert "example" in ex.note and "f32_map" in ex.note


# ------------------------------------------------------------------------------------------ CLI

def test_cli_prove_one_form(capsys):
    assert main(["prove", F16, "--family", "layout"]) == 0
    out = capsys.readouterr().out
    assert "PROVED  layout.injective" in out and "total" in out


def test_cli_prove_json_and_certificates(tmp_path, capsys):
    d = tmp_path / "certs"
    assert main(["prove", MX, "--family", "layout", "--json", "--smt2", str(d)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["exit"] == 0 and data["summary"]["layout.injective"]["proved"] > 0
    assert all(r["status"] == "proved" for r in data["results"])
    assert main(["prove", "--recheck", str(d)]) == 0
    assert "re-check as unsat" in capsys.readouterr().out


def test_cli_prove_bad_input(capsys):
    assert main(["prove"]) == 2
    assert main(["prove", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16"]) == 2
    assert main(["prove", F16, "--all"]) == 2
    assert main(["prove", "--recheck", "/nonexistent-dir"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err


def test_parallel_run_gives_the_sequential_results_in_order():
    """-j N: forked workers, results re-attached to their obligations in the input order,
    obligations that share a computation (share label) kept in one worker."""
    P.load_optional_modules()
    forms = [f for f in cat.documented_forms() if f.shape in ("m16n8k16", "m16n16k16")]
    obs = P.collect(forms)
    obs = [o for o in obs if o.family.startswith(("layout.injective", "layout.packing", "wmma.memory", "wmma.theorem.elementwise"))]
    assert len(obs) > 20 and any(o.share for o in obs)
    seq = P.run(obs, P.Options())
    par = P.run(obs, P.Options(), jobs=2)
    assert [r.obligation for r in par] == obs
    # certificates compared by presence: Z3 names its let-terms by process-local ids
    key = lambda r: (r.status, r.solver, getattr(r, "smt2", None) is None, getattr(r, "note", None),  # noqa: E731
                     getattr(r, "witness", None))
    assert [key(r) for r in par] == [key(r) for r in seq]
    assert all(P.recheck(r.smt2) == "unsat" for r in par[:5] if getattr(r, "smt2", None))
    batches = P._batches(obs, 2)
    assert sorted(i for b in batches for i in b) == list(range(len(obs)))
    for lab in {o.share for o in obs if o.share}:
        assert sum(any(obs[i].share == lab for i in b) for b in batches) == 1


def test_cli_prove_jobs_option(capsys):
    assert main(["prove", "--all", "--jobs", "0"]) == 2
    assert main(["prove", F16, "--family", "layout.injective", "-j", "2"]) == 0
    assert "PROVED  layout.injective" in capsys.readouterr().out
