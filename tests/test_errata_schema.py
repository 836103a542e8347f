"""The errata are actionable: every entry has a severity (or is a reading, the project's own
modelling choice, listed apart), every citation names the PTX ISA version its section number
refers to, and every silicon finding carries a minimal self-contained witness (PTX line,
inputs, observed output)."""

from __future__ import annotations

import io
import json
import re
from contextlib import redirect_stdout

import pytest

from formal import catalog as cat
from formal.cli import main
from formal.errata import READING, SEVERITIES, all_errata, errata_only, markdown, readings

ES = all_errata()


def test_every_entry_has_a_severity_or_is_a_reading():
    for e in ES:
        assert e.severity in SEVERITIES + (READING,), (e.id, e.severity)
    assert len(errata_only()) + len(readings()) == len(ES)
    used = {e.severity for e in errata_only()}
    assert used <= set(SEVERITIES) and {"silent-wrong-result", "trap", "documentation"} <= used
    # no entry is "rejected valid code" since E-WMMA-F64-EXAMPLE-B32 was found to break the text's own rule
    assert next(e for e in ES if e.id == "E-WMMA-F64-EXAMPLE-B32").severity == "documentation"
    assert len(readings()) >= 5


@pytest.mark.parametrize("e", ES, ids=[e.id for e in ES])
def test_citations_are_versioned(e):
    assert any(c["ptx_isa"] for c in e.citations), e.id
    for c in e.citations:
        m = re.match(r"(\d+(?:\.\d+)+)", c["section"])
        if not m:                        # another document (CUDA C++ guide): no PTX ISA version
            assert c["ptx_isa"] is None and not re.match(r"\d", c["section"]), (e.id, c)
            continue
        assert c["ptx_isa"] == "9.1", (e.id, c)
        # every 9.7.14.x number of the citation (not only the first) as 9.3 and 9.4 number it
        secs = [n for n in re.findall(r"\b\d+\.\d+(?:\.\d+)+\b", c["section"]) if n.startswith("9.7.14")]
        if secs:
            assert c["renumbered"]["9.3"] == ", ".join("9.7.15" + n[6:] for n in secs), (e.id, c)
            assert c["renumbered"]["9.4"] == ", ".join("9.7.16" + n[6:] for n in secs), (e.id, c)
            assert c["section_from_9_4"] == c["renumbered"]["9.4"]
        else:
            assert not c["renumbered"] and c["section_from_9_4"] is None
        assert ".x" not in c["section"], (e.id, "a placeholder section number")


# silicon findings, and every entry where code silently computes something else or traps (the
# peers' entries carry ptx-formal audit witnesses instead, re-derived in test_errata_peers.py)
SILICON_LIKE = [e for e in ES if not e.is_reading and e.source != "peers"
                and (e.source == "silicon" or e.severity in ("trap", "silent-wrong-result"))
                and e.id != "E-SP-SEL-K32-F16F32"]      # its witness is S-SP-SELECTOR-OOB-TRAP's


@pytest.mark.parametrize("e", SILICON_LIKE, ids=[e.id for e in SILICON_LIKE])
def test_silicon_entries_have_a_minimal_witness(e):
    w = e.witness
    assert w and all(w.get(k) for k in ("ptx", "inputs", "observed", "source")), e.id
    # the witness's instruction is a real spelling the catalog reads
    form = cat.parse(w["ptx"].split()[0])
    assert form.family in cat.FAMILIES
    assert "0x" in w["observed"] or "CUDA" in w["observed"] or "reading" in w["observed"] or "rows" in w["observed"] \
        or "cuda" in w["observed"].lower() or "layout" in w["observed"] or "SASS" in w["observed"] or "MMA" in w["observed"]


def test_probe_witnesses_are_the_recorded_observations():
    ev = {r["id"]: r for r in json.load(open("proofs/evidence/numerics_probes_h100.json"))["results"]}
    from formal.specdata import load_spec
    n = 0
    for e in load_spec("errata_silicon")["erratum"]:
        if "witness_probe" in e:
            w = next(x for x in ES if x.id == e["id"]).witness
            r = ev[e["witness_probe"]]
            assert w["observed"] == f"D[0][0] = {r['observed']}" and w["ptx"].startswith(r["opcode"] + " ")
            n += 1
    assert n >= 10


def test_scopes_fixed():
    byid = {e.id: e for e in ES}
    assert "tf32" in byid["S-SP-REPEATED-INDEX"].summary
    assert "m8n32k16" in byid["S-WMMA-LOWERING"].witness["ptx"]
    assert "xor.popc" in byid["E-MMA-INT4-BITOP"].summary and "SASS" in byid["E-MMA-INT4-BITOP"].summary
    assert "6 of the 8" in byid["E-WMMA-SUBBYTE-SHAPES"].summary
    assert byid["E-SP-SEL-K32-F16F32"].severity == byid["S-SP-SELECTOR-OOB-TRAP"].severity == "trap"


def test_markdown_lists_readings_apart_and_counts_severities():
    md = markdown()
    assert "## Readings" in md and "## silent wrong result" in md and "## trap" in md
    head = md[:md.index("## ")]
    assert re.search(r"\(\d+ silent wrong result, \d+ trap, \d+ rejected valid code, \d+ documentation\)", head)
    assert "in PTX ISA 9.3; 9.7.16." in md and " in PTX ISA 9.4)" in md
    # the headline says the project's errata and the peers' apart
    assert re.search(r"\d+ errata of the PTX ISA text, ptxas and the H100 \(.*\); \d+ errata of peer projects", head)


def test_cli_severity_filter():
    out = io.StringIO()
    with redirect_stdout(out):
        rc = main(["errata", "--severity", "trap"])
    assert rc == 0 and "S-SP-SELECTOR-OOB-TRAP" in out.getvalue() and "S-NAN-CANONICAL" not in out.getvalue()
    assert main(["errata", "--severity", "bogus"]) == 2


def test_sweep_report_names_no_machine_path():
    with open("proofs/ptxas-sweep.md") as f:
        md = f.read()
    assert not re.search(r"(/work/|/usr/|/root/|/home/|site-packages)", md)


# ---- the SASS behind two scope fixes (ptxas 13.0 + cuobjdump) ------------------------------------

def _cuobjdump():
    import glob
    import shutil
    return shutil.which("cuobjdump") or next(iter(glob.glob(
        __import__("sysconfig").get_paths()["purelib"] + "/triton/backends/nvidia/bin/cuobjdump")), None)


def _sass(ptx_body: str, arch: str = "sm_80") -> list[str]:
    import os
    import subprocess
    import tempfile
    from formal.catalog import ptxas as P
    px = P.find("13.0")
    with tempfile.TemporaryDirectory() as d:
        src, cub = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
        with open(src, "w") as f:
            f.write(f".version 8.0\n.target {arch}\n.address_size 64\n.visible .entry k(.param .u64 p)\n{{\n"
                    " .reg .b32 %r<32>; .reg .b64 %rd<4>;\n ld.param.u64 %rd1, [p];\n"
                    " ld.global.v4.u32 {%r0, %r1, %r2, %r3}, [%rd1];\n ld.global.v4.u32 {%r4, %r5, %r6, %r7}, [%rd1+16];\n"
                    " ld.global.v4.u32 {%r8, %r9, %r10, %r11}, [%rd1+32];\n" + ptx_body + " ret;\n}\n")
        subprocess.run([px.path, f"-arch={arch}", src, "-o", cub], check=True, capture_output=True)
        out = subprocess.run([_cuobjdump(), "-sass", cub], check=True, capture_output=True, text=True).stdout
    return [" ".join(re.sub(r"/\*[0-9a-f]+\*/", "", ln).split()) for ln in out.splitlines()
            if re.match(r"\s+/\*[0-9a-f]{4}\*/", ln)]


def _have_tools():
    from formal.catalog import ptxas as P
    return P.find("13.0") is not None and _cuobjdump() is not None


@pytest.mark.ptxas
@pytest.mark.skipif(not _have_tools(), reason="needs ptxas 13.0 and cuobjdump")
def test_int4_bitop_is_dropped_in_sass():
    ops = "{%r12, %r13, %r14, %r15}, {%r0, %r1}, {%r2}, {%r4, %r5, %r6, %r7};\n st.global.v4.u32 [%rd1+64], {%r12, %r13, %r14, %r15};\n"
    plain = "mma.sync.aligned.m16n8k32.row.col.s32.s4.s4.s32"
    for arch in ("sm_80", "sm_90"):
        base = _sass(f" {plain} {ops}", arch)
        assert any("IMMA" in x or "IMAD" in x for x in base)
        for bitop in (".xor.popc", ".and.popc", ".xor"):
            assert _sass(f" {plain}{bitop} {ops}", arch) == base, (arch, bitop)


@pytest.mark.ptxas
@pytest.mark.skipif(not _have_tools(), reason="needs ptxas 13.0 and cuobjdump")
def test_subbyte_wmma_shape_is_an_m8n8k32_product_with_six_registers_unwritten():
    sass = _sass(" wmma.mma.sync.aligned.row.col.m16n16k16.s32.s4.s4.s32 {%r12, %r13, %r14, %r15, %r16, %r17, %r18, %r19}, "
                 "{%r0}, {%r1}, {%r4, %r5, %r6, %r7, %r8, %r9, %r10, %r11};\n"
                 " st.global.v4.u32 [%rd1+64], {%r12, %r13, %r14, %r15};\n st.global.v4.u32 [%rd1+80], {%r16, %r17, %r18, %r19};\n")
    mma = [x for x in sass if "MMA" in x]
    assert len(mma) == 1 and mma[0].startswith("IMMA.8832.S4.S4"), mma
    dst = re.match(r"IMMA\.\S+ R(\d+),", mma[0]).group(1)
    stores = [x for x in sass if x.startswith("STG.E.128")]
    assert len(stores) == 2
    stored = {int(re.search(r", R(\d+)", s).group(1)) + i for s in stores for i in range(4)}
    written = {int(dst), int(dst) + 1}                      # IMMA.8832 writes a register pair
    defined = written | {int(r) for x in sass if not x.startswith(("STG", "IMMA"))
                         for r in re.findall(r"^\S+ R(\d+)", x)}
    assert len(stored - defined) == 6, (sass, stored, defined)
