"""What the hardware needs for wmma.load / wmma.store alignment, against the text's rule.

Three sources, kept apart and compared:

* **text** -- ``specs/wmma_memory.toml`` through :func:`formal.wmma.check_access`, under
  both readings of "fragment size": legal iff the base pointer and the pitch (stride x
  element size) are multiples of the fragment size (theorem wmma.align_readings_agree).
* **ptxas** -- which memory instructions ptxas emits for each kernel of the alignment
  sweep (:func:`formal.hw.wmma_probe.alignment_probes`), read from the SASS
  (``specs/observed/wmma_sass_sm90.json``, written by :func:`write_survey`; needs ptxas and
  cuobjdump).  Each access instruction needs its own width of alignment (``LDSM``: every
  lane's row address 16 bytes; ``LD.E.64``: 8; ``LD.E.U8``: 1).  Every access is at the base
  plus a multiple of the pitch plus an immediate multiple of its width, so the *model*
  predicts: a probe faults iff min(base alignment, pitch alignment) < the widest access.
* **silicon** -- the run of :func:`formal.hw.wmma_probe.run_wmma_alignment_probes`
  (``wmma_alignment.json``): per probe ``ok`` / ``fault`` with exact attribution, and for
  probes that did not fault whether they moved the right data.

:func:`analyse` compares the three; :func:`errata_status` decides the ``[[erratum]]``
entries of ``specs/wmma_memory.toml`` that carry a ``select`` / ``claim`` (``pending`` until a
run covers them).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections import Counter
from functools import lru_cache
from pathlib import Path

from ..specdata import spec_dir

SURVEY_FILE = "observed/wmma_sass_sm90.json"
LOAD_RE = re.compile(r"^(LD|LDG|LDS|LDSM)(\.|$)")
STORE_RE = re.compile(r"^(ST|STG|STS|STSM)(\.|$)")


# ----------------------------------------------------------------------------------
# SASS: which accesses ptxas emits

def access_width(op: str) -> int:
    """Bytes of alignment one SASS access needs (LDSM/STSM: each lane's 16-byte row address)."""
    if op.startswith(("LDSM", "STSM")):
        return 16
    for suffix, w in ((".128", 16), (".64", 8), (".U8", 1), (".S8", 1), (".U16", 2), (".S16", 2)):
        if suffix in op.split(" ")[0]:
            return w
    return 4


def parse_sass(text: str) -> dict[str, list[tuple[str, str]]]:
    """cuobjdump -sass output -> {function: [(opcode, operands)]} in program order."""
    funcs: dict[str, list[tuple[str, str]]] = {}
    cur = None
    for line in text.splitlines():
        m = re.search(r"Function : (\S+)", line)
        if m:
            cur = m.group(1)
            funcs[cur] = []
            continue
        m = re.search(r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)([^;]*);", line)
        if cur is not None and m:
            funcs[cur].append((m.group(1), m.group(2).strip()))
    return funcs


def wmma_accesses(instrs: list[tuple[str, str]], kind: str, window: str) -> list[tuple[str, str]]:
    """The memory accesses of the wmma instruction in an alignment kernel.

    The kernels (formal.hw.wmma_probe._align_kernel) put barriers around the wmma: a load
    kernel's wmma loads are the loads after its last barrier (the register dump is stores);
    a store kernel's wmma stores sit between the barrier after the register loads and the
    next barrier (shared window: the copy-out follows), or after the last barrier (global).
    """
    segs: list[list[tuple[str, str]]] = [[]]
    for op, args in instrs:
        if op.startswith("BAR.SYNC"):
            segs.append([])
        else:
            segs[-1].append((op, args))
    if kind == "load":
        return [(o, a) for o, a in segs[-1] if LOAD_RE.match(o) and not o.startswith("LDC")]
    seg = segs[-2] if window == "shared" else segs[-1]
    return [(o, a) for o, a in seg if STORE_RE.match(o)]


def _immediates(args: str) -> list[int]:
    return [int(x, 16) for x in re.findall(r"\+(0x[0-9a-f]+)\]", args)]


def _find_tool(name: str) -> str | None:
    env = os.environ.get(name.upper())
    if env and os.path.exists(env):
        return env
    p = shutil.which(name)
    if p:
        return p
    try:
        import nvidia  # noqa: F401 - the CUDA wheels (nvidia-cuda-nvcc, nvidia-cuda-cuobjdump)
        for base in nvidia.__path__:
            for sub in ("cu13/bin", "cuda_nvcc/bin", "cuda_cuobjdump/bin"):
                c = os.path.join(base, sub, name)
                if os.path.exists(c):
                    return c
    except ImportError:
        pass
    c = f"/usr/local/cuda/bin/{name}"
    return c if os.path.exists(c) else None


def survey(target: str = "sm_90", ptx: str | None = None, ptxas_path: str | None = None,
           cuobjdump_path: str | None = None, families=None) -> dict:
    """Assemble every alignment kernel with ptxas, disassemble, and record each kernel's wmma accesses.

    Needs ptxas (CUDA 13.0 preferred: the H100's driver R580 JITs with that compiler) and
    cuobjdump (env CUOBJDUMP, PATH, or the nvidia-cuda-cuobjdump wheel)."""
    from .. import ptxas as px
    from ..hw import wmma_probe as W

    ptx = ptx or W.PTX_VERSION
    pa = px.probe(ptxas_path) if ptxas_path else (px.find("13.0") or px.find())
    cu = cuobjdump_path or _find_tool("cuobjdump")
    if pa is None or cu is None:
        raise RuntimeError(f"survey needs ptxas and cuobjdump (found ptxas={pa}, cuobjdump={cu}); set PTXAS / CUOBJDUMP")
    probes, kernels = W.alignment_probes(target, ptx, families)
    with tempfile.TemporaryDirectory(prefix="wmma_sass_") as d:
        src = os.path.join(d, "k.ptx")
        Path(src).write_text(W.ptxtext.header(target, ptx) + "\n" + "\n".join(k.ptx for k in kernels))
        cub = os.path.join(d, "k.cubin")
        r = subprocess.run([pa.path, f"-arch={target}", src, "-o", cub], capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(f"ptxas failed: {r.stderr[:500]}")
        sass = subprocess.run([cu, "-sass", cub], capture_output=True, text=True, check=True).stdout
        cuv = subprocess.run([cu, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]
    funcs = parse_sass(sass)
    entries = []
    for k in kernels:
        kind = "load" if k.form.family == "wmma.load" else "store"
        acc = wmma_accesses(funcs[k.kernel], kind, k.window)
        ops = Counter(o for o, _ in acc)
        width = max((access_width(o) for o, _ in acc), default=0)
        entries.append({"family": k.family, "space": k.form.space or "", "window": k.window, "mode": k.mode,
                        "kind": kind, "ops": dict(sorted(ops.items())), "width": width,
                        "immediates_multiple_of_width": all(i % max(access_width(o), 1) == 0
                                                            for o, a in acc for i in _immediates(a))})
    return {"meta": {"what": "memory instructions ptxas emits for the wmma of each alignment kernel "
                             "(formal.hw.wmma_probe.alignment_probes); width = bytes of alignment the widest needs",
                     "evidence": "ptxas", "target": target, "ptx": ptx, "ptxas": pa.version, "cuobjdump": cuv,
                     "created": time.strftime("%Y-%m-%d", time.gmtime()),
                     "kernel_structure": "see formal.wmma.alignment.wmma_accesses"},
            "kernels": entries}


_SURVEY_COLUMNS = ("family", "space", "window", "mode", "kind", "width", "ops", "immediates_multiple_of_width")


def write_survey(dest: str | os.PathLike | None = None, **kw) -> Path:
    """Run :func:`survey` and write it (rows of _SURVEY_COLUMNS; ops as 'OP*count,...')."""
    dest = Path(dest) if dest else spec_dir() / SURVEY_FILE
    doc = survey(**kw)
    rows = [[e[c] if c != "ops" else ",".join(f"{o}*{n}" for o, n in e["ops"].items()) for c in _SURVEY_COLUMNS]
            for e in doc["kernels"]]
    dest.write_text(json.dumps({"meta": doc["meta"], "columns": list(_SURVEY_COLUMNS), "rows": rows},
                               separators=(",", ":")).replace("],[", "],\n["))
    load_survey.cache_clear()
    return dest


@lru_cache(maxsize=1)
def load_survey() -> dict | None:
    """The checked-in survey: {"meta", "kernels": [dict], "index": {(family, space, window, mode): dict}}."""
    p = spec_dir() / SURVEY_FILE
    if not p.exists():
        return None
    raw = json.loads(p.read_text())
    kernels = []
    for row in raw["rows"]:
        e = dict(zip(raw["columns"], row))
        e["ops"] = {o: int(n) for o, n in (x.rsplit("*", 1) for x in e["ops"].split(",") if x)}
        kernels.append(e)
    return {"meta": raw["meta"], "kernels": kernels,
            "index": {(e["family"], e["space"], e["window"], e["mode"]): e for e in kernels}}


def survey_meta() -> dict | None:
    s = load_survey()
    return None if s is None else s["meta"]


def predict(p: dict) -> dict | None:
    """The SASS model's verdict for one alignment probe (its manifest dict): fault iff
    min(base alignment, pitch alignment) < the widest access.  None without a survey entry."""
    s = load_survey()
    if s is None:
        return None
    e = s["index"].get((p["family"], p["space"], p["window"], p["mode"]))
    if e is None:
        return None
    w = e["width"]
    got = min(p["base_align"], p["pitch_align"] or 1)
    return {"width": w, "ops": e["ops"], "fault": got < w}


# ----------------------------------------------------------------------------------
# the run file: probes as rows (columns below), joined with their kernel on load

COLUMNS = ("name", "kernel", "offset", "stride", "pitch_bytes", "purpose", "base_align", "pitch_align",
           "legal_registers", "legal_elements", "status", "error_class", "context", "worker", "tier",
           "predicted_width", "predicted_fault", "address_offset_ok", "data", "wrote_outside")
KERNEL_FIELDS = ("family", "opcode", "space", "window", "mode", "kind")


def pack_probes(probes: list[dict]) -> dict:
    rows = []
    for e in probes:
        flat = dict(e, legal_registers=e["legal"]["registers"], legal_elements=e["legal"]["elements"],
                    predicted_width=(e.get("predicted") or {}).get("width"),
                    predicted_fault=(e.get("predicted") or {}).get("fault"))
        rows.append([flat.get(c) for c in COLUMNS])
    return {"columns": list(COLUMNS), "rows": rows,
            "errors": {e["name"]: e["error"] for e in probes if e.get("error")}}


def unpack_probes(packed: dict, kernels: list[dict]) -> list[dict]:
    ks = {k["kernel"]: k for k in kernels}
    out = []
    for row in packed["rows"]:
        e = dict(zip(packed["columns"], row))
        k = ks[e["kernel"]]
        e.update({f: k.get(f) for f in KERNEL_FIELDS})
        e["legal"] = {"registers": e.pop("legal_registers"), "elements": e.pop("legal_elements")}
        w, f = e.pop("predicted_width"), e.pop("predicted_fault")
        e["predicted"] = None if w is None else {"width": w, "fault": f}
        e["error"] = packed.get("errors", {}).get(e["name"])
        out.append(e)
    return out


def load_run(path: str | os.PathLike) -> dict:
    """A run file (wmma_alignment.json, or its directory) with the probes expanded to dicts."""
    p = Path(path)
    if p.is_dir():
        p = p / "wmma_alignment.json"
    doc = json.loads(p.read_text())
    if isinstance(doc.get("probes"), dict):
        doc["probes"] = unpack_probes(doc["probes"], doc["kernels"])
    return doc


# ----------------------------------------------------------------------------------
# silicon against text and model

def _group_key(e: dict) -> tuple:
    return (e["family"], e["space"], e["window"], e["mode"])


def _ran(e: dict) -> bool:
    """A verdict: the probe ran and did not fault, or faulted on an address (misaligned / illegal);
    any other launch error (an invalid launch, a lost worker) says nothing about alignment."""
    return e["status"] == "ok" or (e["status"] == "fault" and e.get("error_class") in ("misaligned", "illegal_address"))


def analyse(doc: dict) -> dict:
    """Compare a run (``wmma_alignment.json`` content) with the text and the SASS model."""
    probes = doc["probes"]
    status = Counter(e["status"] for e in probes)
    ran = [e for e in probes if _ran(e)]
    out: dict = {"probes": len(probes), "status_counts": dict(status), "ran": len(ran),
                 "fault_classes": dict(Counter(e.get("error_class") for e in probes if e["status"] == "fault"))}
    by_reading = {}
    for rd in ("registers", "elements"):
        allows_fault = [e for e in ran if e["legal"][rd] and e["status"] == "fault"]
        forbids_works = [e for e in ran if not e["legal"][rd] and e["status"] == "ok" and e.get("data") != "differs"]
        by_reading[rd] = {"text_allows_what_faults": len(allows_fault), "text_forbids_what_works": len(forbids_works),
                          "examples_allows_fault": [_short(e) for e in allows_fault[:6]],
                          "examples_forbids_works": [_short(e) for e in forbids_works[:6]],
                          "agrees": sum(1 for e in ran if e["legal"][rd] == (e["status"] == "ok"))}
    out["text"] = by_reading
    pred = [e for e in ran if e.get("predicted")]
    dis = [e for e in pred if e["predicted"]["fault"] != (e["status"] == "fault")]
    out["sass_model"] = {"checked": len(pred), "disagreements": len(dis), "examples": [_short(e) for e in dis[:10]]}
    wrong = [e for e in ran if e.get("data") == "differs"]
    out["wrong_data"] = {"count": len(wrong), "examples": [_short(e) for e in wrong[:10]]}
    addr = [e for e in ran if e["status"] == "ok" and e.get("address_offset_ok") is False]
    out["address_check_failures"] = [_short(e) for e in addr[:10]]
    groups: dict[tuple, list[dict]] = {}
    for e in probes:
        groups.setdefault(_group_key(e), []).append(e)
    table = []
    for key, es in groups.items():
        ok_b = sorted({e["base_align"] for e in es if e["status"] == "ok" and e["purpose"] == "offset"})
        bad_b = sorted({e["base_align"] for e in es if _ran(e) and e["status"] == "fault" and e["purpose"] == "offset"})
        ok_p = sorted({e["pitch_align"] for e in es if e["status"] == "ok"})
        bad_p = sorted({e["pitch_align"] for e in es if _ran(e) and e["status"] == "fault" and e["base_align"] >= 256})
        need_b = min(ok_b) if ok_b and (not bad_b or max(bad_b) < min(ok_b)) else None
        need_p = min(ok_p) if ok_p and (not bad_p or max(bad_p) < min(ok_p)) else None
        e0 = es[0]
        table.append({"family": key[0], "space": key[1] or "generic", "window": key[2], "mode": key[3],
                      "base_ok": ok_b, "base_fault": bad_b, "pitch_ok": ok_p, "pitch_fault": bad_p,
                      "needs_base": need_b, "needs_pitch": need_p,
                      "monotone": (not bad_b or not ok_b or max(bad_b) < min(ok_b)) and
                                  (not bad_p or not ok_p or max(bad_p) < min(ok_p)),
                      "sass_width": (e0.get("predicted") or {}).get("width"),
                      "not_run": sum(1 for e in es if not _ran(e))})
    out["groups"] = table
    out["errata"] = errata_status(doc)
    out["reruns"] = [dict({k: r.get(k) for k in ("name", "opcode", "stride", "window", "status", "error", "pipeline_check")},
                          map_anomalies=(r.get("map") or {}).get("anomalies")) for r in doc.get("reruns", [])]
    return out


def _short(e: dict) -> str:
    return (f"{e['name']} {e['opcode']} window={e['window']} mode={e['mode']} offset={e['offset']} stride={e['stride']} "
            f"(base align {e['base_align']}, pitch {e['pitch_bytes']} B align {e['pitch_align']}): {e['status']}"
            + (f", data {e['data']}" if e.get("data") else ""))


def _selected(e: dict, sel: dict, sass: dict) -> bool:
    for k, v in sel.items():
        vals = v if isinstance(v, list) else [v]
        if k == "sass":
            ops = sass.get(e["kernel"]) or {}
            if not any(o.startswith(tuple(vals)) for o in ops):
                return False
        elif k == "matrix":
            if e["family"].split(".")[2] not in vals:
                return False
        elif k == "type":
            if e["family"].rsplit(".", 1)[1] not in vals:
                return False
        elif e.get(k) not in vals:
            return False
    return True


def errata_status(doc: dict | None) -> list[dict]:
    """Each silicon erratum of specs/wmma_memory.toml (entries with `select` and `claim`):
    confirmed / refuted (with witnesses) / pending, on the probes of a run (None: no run yet).

    claim ``needs = N``: a selected probe faults iff min(base alignment, pitch alignment) < N;
    ``needs = "sass"``: the same with N = the widest access of the probe's SASS."""
    from .memory import spec

    out = []
    for e in spec().errata:
        if "select" not in e or "claim" not in e:
            continue
        row = {"id": e["id"], "kind": e.get("kind"), "evidence": e.get("evidence"), "claim": e["claim"]}
        if doc is None:
            row.update(status="pending", probes=0)
            out.append(row)
            continue
        sass = {k["kernel"]: k.get("sass") for k in doc.get("kernels", [])}
        sel = [p for p in doc["probes"] if _ran(p) and _selected(p, e["select"], sass)]
        bad = []
        for p in sel:
            need = e["claim"]["needs"]
            if need == "sass":
                need = (p.get("predicted") or {}).get("width")
                if need is None:
                    continue
            fault = min(p["base_align"], p["pitch_align"] or 1) < need
            if fault != (p["status"] == "fault") or (p["status"] == "ok" and p.get("data") == "differs"):
                bad.append(_short(p))
        row.update(probes=len(sel), status="pending" if not sel else ("refuted" if bad else "confirmed"),
                   witnesses=bad[:5], n_witnesses=len(bad))
        out.append(row)
    return out


def report_text(analysis: dict) -> str:
    a = analysis
    lines = [f"alignment probes: {a['probes']} ({a['status_counts']}); {a['ran']} ran"]
    for rd, t in a["text"].items():
        lines.append(f"  text ({rd} reading): agrees on {t['agrees']}/{a['ran']}; allows what faults: "
                     f"{t['text_allows_what_faults']}; forbids what works: {t['text_forbids_what_works']}")
        for x in t["examples_allows_fault"][:3]:
            lines.append(f"    allows, faults: {x}")
        for x in t["examples_forbids_works"][:3]:
            lines.append(f"    forbids, works: {x}")
    s = a["sass_model"]
    lines.append(f"  SASS model (fault iff min(base, pitch alignment) < widest access): {s['checked'] - s['disagreements']}"
                 f"/{s['checked']} agree")
    for x in s["examples"][:5]:
        lines.append(f"    disagrees: {x}")
    lines.append(f"  probes that ran without a fault but moved wrong data: {a['wrong_data']['count']}")
    for x in a["wrong_data"]["examples"][:5]:
        lines.append(f"    {x}")
    for r in a["reruns"]:
        extra = ""
        if r.get("pipeline_check"):
            pc = r["pipeline_check"]
            extra = f"; D vs evaluate_matrices: {pc['status']}" + (
                f" (first at run {pc['run']} D[{pc['row']}, {pc['col']}]: silicon {pc['silicon']}, evaluator "
                f"{pc['expected']})" if pc["status"] == "mismatch" else "")
        elif r.get("map_anomalies"):
            extra = f"; map anomalies {r['map_anomalies']}"
        lines.append(f"  run2 re-run {r['name']} {r['opcode']} stride {r['stride']}: {r['status']}"
                     + (f" ({r['error']})" if r.get("error") else "") + extra)
    for e in a["errata"]:
        lines.append(f"  erratum {e['id']}: {e['status']} ({e['probes']} probes)"
                     + (f"; e.g. {e['witnesses'][0]}" if e.get("witnesses") else ""))
    return "\n".join(lines)
