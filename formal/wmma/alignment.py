"""What the hardware needs for wmma.load / wmma.store alignment, against the text's rule.

Three sources, kept apart and compared:

* **text** -- ``specs/wmma_memory.toml`` through :func:`formal.wmma.check_access`, under
  both readings of "fragment size": legal iff the base pointer and the pitch (stride x
  element size) are multiples of the fragment size (theorem wmma.align_readings_agree).
* **ptxas** -- which memory instructions ptxas emits for each kernel of the alignment
  sweep (:func:`formal.wmma.probes.alignment_probes`), read from the SASS
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

A load that did not fault but returned other registers is decoded (:func:`decode_wrong_data`,
needs the run's raw registers): where in memory each instance of the leading dimension was
really read.  :func:`summarize` condenses a run into the checked-in
``specs/observed/wmma_alignment_sm90.json`` (one row per sweep kernel: every probe's outcome),
from which :func:`summary_doc` rebuilds the probes, so the errata are decided from the
checked-in data alone (``ptx-formal wmma alignment`` without a run).
"""

from __future__ import annotations

import dataclasses
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

from ..catalog.sass import parse_sass  # noqa: F401  (re-exported)
from ..specdata import spec_dir
from . import memory as wmem
from . import probes as W
from .memory import MemoryView

SURVEY_FILE = "observed/wmma_sass_sm90.json"
SUMMARY_FILE = "observed/wmma_alignment_sm90.json"
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


def wmma_accesses(instrs: list[tuple[str, str]], kind: str, window: str) -> list[tuple[str, str]]:
    """The memory accesses of the wmma instruction in an alignment kernel.

    The kernels (formal.wmma.probes._align_kernel) put barriers around the wmma: a load
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


def _sass_functions(kernels, target: str, ptx: str, ptxas_path: str | None = None,
                    cuobjdump_path: str | None = None) -> tuple[dict, str, str]:
    """Assemble alignment kernels with ptxas and disassemble them: ({kernel: [(opcode, operands)]},
    ptxas version, cuobjdump version).  Needs ptxas (CUDA 13.0 preferred: the H100's driver R580
    JITs with that compiler) and cuobjdump (env CUOBJDUMP, PATH, or the nvidia-cuda-cuobjdump wheel)."""
    from ..catalog import ptxas as px

    pa = px.probe(ptxas_path) if ptxas_path else (px.find("13.0") or px.find())
    cu = cuobjdump_path or _find_tool("cuobjdump")
    if pa is None or cu is None:
        raise RuntimeError(f"the SASS survey needs ptxas and cuobjdump (found ptxas={pa}, cuobjdump={cu}); "
                           f"set PTXAS / CUOBJDUMP")
    with tempfile.TemporaryDirectory(prefix="wmma_sass_") as d:
        src = os.path.join(d, "k.ptx")
        Path(src).write_text(W.ptxtext.header(target, ptx) + "\n" + "\n".join(k.ptx for k in kernels))
        cub = os.path.join(d, "k.cubin")
        r = subprocess.run([pa.path, f"-arch={target}", src, "-o", cub], capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(f"ptxas failed: {r.stderr[:500]}")
        sass = subprocess.run([cu, "-sass", cub], capture_output=True, text=True, check=True).stdout
        cuv = subprocess.run([cu, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]
    return parse_sass(sass), pa.version, cuv


def survey(target: str = "sm_90", ptx: str | None = None, ptxas_path: str | None = None,
           cuobjdump_path: str | None = None, families=None) -> dict:
    """Assemble every alignment kernel with ptxas, disassemble, and record each kernel's wmma accesses."""

    ptx = ptx or W.PTX_VERSION
    probes, kernels = W.alignment_probes(target, ptx, families)
    funcs, pav, cuv = _sass_functions(kernels, target, ptx, ptxas_path, cuobjdump_path)
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
                             "(formal.wmma.probes.alignment_probes); width = bytes of alignment the widest needs",
                     "evidence": "ptxas", "target": target, "ptx": ptx, "ptxas": pav, "cuobjdump": cuv,
                     "created": time.strftime("%Y-%m-%d", time.gmtime()),
                     "kernel_structure": "see formal.wmma.alignment.wmma_accesses"},
            "kernels": entries}


# The stride operand of an alignment kernel is its 5th parameter (p_mem, p_regs, p_info, p_off: u64;
# p_stride: u32; formal.wmma.probes._align_kernel), at constant bank 0 offset 0x210 + 4 * 8 on sm_90.
STRIDE_PARAM = "c[0x0][0x230]"
_COPY_OPS = ("MOV", "UMOV", "IMAD.MOV", "IMAD.U32")


def stride_shift(instrs: list[tuple[str, str]]) -> int | None:
    """How many low bits of the stride operand ptxas drops before it forms the row addresses: the
    immediate of the logical right shift (SHF.R.U32.HI / USHF.R.U32.HI) applied to the register
    that holds the stride parameter (or a copy of it); 0 if the stride is used unshifted; None if
    the kernel never reads the parameter (the stride operand omitted).

    ptxas does this where one access covers several elements of a row (a .b32 of two .f16, eight
    .s4, thirty-two .b1; a .64 of two .f32): the row offset is then (stride >> s) accesses of
    2^s elements, i.e. the pitch rounded down to a multiple of that access -- a program whose
    stride is a multiple of 2^s (the text's rule implies it) cannot tell."""
    held: set[str] = set()
    shifts: set[int] = set()
    seen = False
    for op, args in instrs:
        parts = [x.strip() for x in args.split(",")]
        dst = parts[0] if parts else ""
        if STRIDE_PARAM in args:
            seen = True
            if op.split(".")[0] in ("LDC", "ULDC") and not op.endswith(".64"):
                held.add(dst)
                continue
        if op.startswith(("SHF.R.U32.HI", "USHF.R.U32.HI")) and parts[-1] in held:
            shifts.add(int(parts[2], 16))
        if op.startswith(_COPY_OPS) and parts[-1] in held:
            held.add(dst)
            continue
        if dst in held and not op.startswith(("ST", "BAR")):
            held.discard(dst)                    # the register now holds something else
    if not seen:
        return None
    if len(shifts) > 1:
        raise ValueError(f"the stride is shifted by several amounts: {sorted(shifts)}")
    return shifts.pop() if shifts else 0


def stride_shift_survey(target: str = "sm_90", ptx: str | None = None, families=None, **tools) -> dict:
    """{(family, space, window, mode): stride_shift} of every alignment kernel, from ptxas's SASS,
    and the tool versions: {"shifts": {...}, "ptxas": ..., "cuobjdump": ...}."""

    ptx = ptx or W.PTX_VERSION
    _, kernels = W.alignment_probes(target, ptx, families)
    funcs, pav, cuv = _sass_functions(kernels, target, ptx, **tools)
    return {"shifts": {(k.family, k.form.space or "", k.window, k.mode): stride_shift(funcs[k.kernel]) for k in kernels},
            "ptxas": pav, "cuobjdump": cuv}


@lru_cache(maxsize=1)
def stride_shifts() -> dict:
    """(family, space, window, mode) -> stride shift of the kernel's SASS: the column recorded in the
    checked-in summary (specs/observed/wmma_alignment_sm90.json), else redone with ptxas + cuobjdump
    where they are, else {} (unknown: the model then assumes the exact pitch)."""
    s = load_summary()
    if s is not None and "stride_shift" in s["columns"]:
        i = s["columns"].index
        return {(r[i("family")], r[i("space")], r[i("window")], r[i("mode")]): r[i("stride_shift")] for r in s["kernels"]}
    try:
        return stride_shift_survey()["shifts"]
    except (RuntimeError, OSError, subprocess.CalledProcessError):
        return {}


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


def _pow2(x: int) -> int:
    """Largest power of two dividing x (x > 0); 0 for 0."""
    return x & -x


def model_outcome(width: int, base_align: int, pitch: int | None, pitch_align: int, unit: int | None) -> dict:
    """The SASS model of one access pattern: the base must be a multiple of the widest access
    `width`; the row offset ptxas computes is the pitch P rounded down to a multiple of `unit`
    (R = floor(P / unit) * unit; unit None: R = P) and must be a multiple of `width` too.
    outcome: "fault" if either is not, "wrong_data" if R != P (no fault, the rows / columns are
    at R bytes apart instead of P), else "ok".  `pitch` None (unknown, or not a whole number of
    bytes): only its alignment `pitch_align` is known, the pitch taken as exact."""
    if pitch:
        r = pitch // unit * unit if unit else pitch
        r_align = _pow2(r)
    else:
        r, r_align = pitch, pitch_align or 1
    fault = base_align < width or r_align < width
    return {"outcome": "fault" if fault else ("wrong_data" if pitch and r != pitch else "ok"),
            "rounded_pitch": r, "fault": fault}


def predict(p: dict) -> dict | None:
    """The SASS model's verdict for one alignment probe (its manifest dict: family, space, window,
    mode, base_align, pitch_align and, for the rounding, pitch_bytes): :func:`model_outcome`
    with the widest access of the kernel's SASS (the survey) and the stride shift of its SASS
    (:func:`stride_shifts`; unit = 2^shift elements).  None without a survey entry.
    Keys: width, ops, shift (None: unknown), unit (bytes; None: exact pitch), outcome, rounded_pitch, fault."""
    s = load_survey()
    if s is None:
        return None
    key = (p["family"], p["space"], p["window"], p["mode"])
    e = s["index"].get(key)
    if e is None:
        return None
    from .memory import memory_view

    shift = stride_shifts().get(key)
    if shift is None and p["mode"] == "omitted":       # no stride register: the default pitch, known to ptxas
        shift = 0
    unit = (memory_view(p["family"]).elem_bits << shift) // 8 if shift else None
    m = model_outcome(e["width"], p["base_align"], p.get("pitch_bytes"), p["pitch_align"], unit)
    return dict(m, width=e["width"], ops=e["ops"], shift=shift, unit=unit)


def check_access(opcode, ptr, stride=None, **kw):
    """:func:`formal.wmma.memory.check_access` (the text's verdict) plus, where that verdict is
    a question of alignment only, a note on what ptxas 13.0's sm_90 code does (:func:`sm90_note`).
    The SASS model sits above the memory semantics, so the note is added here, not there."""
    res = wmem.check_access(opcode, ptr, stride, **kw)
    if all(v.rule == "align.row_start" for v in res.violations):
        note = sm90_note(res.view, res.ptr, res.stride, res.stride_given, kw.get("points_to"), res.legal)
        if note:
            res.notes.append(note)
    return res


def sm90_note(view: MemoryView, ptr: int, stride: int, stride_given: bool, points_to: str | None, legal: bool) -> str | None:
    """What ptxas 13.0's code for sm_90 does, when it differs from the text's verdict: the SASS
    model of formal.wmma.alignment.predict (the widest access ptxas emits, specs/observed/
    wmma_sass_sm90.json, and the stride shift of its address arithmetic, recorded in
    specs/observed/wmma_alignment_sm90.json), which predicted every one of the 7,118 probes of
    the H100 alignment sweep (errata generic-global-access-width, shared-lds-access-width,
    shared-ldsm-row-alignment, shared-ldsm-subbyte-pitch-rounded, stride-low-bits-dropped).
    A prediction from ptxas's code, not a guarantee of the ISA."""
    window = "shared" if (view.space.startswith("shared") or points_to == "shared") else "global"
    fam = view.opcode.replace(f".{view.space}.", ".") if view.space else view.opcode
    bits = stride * view.elem_bits
    pitch = bits // 8 if bits % 8 == 0 else 0
    pr = predict({"family": fam, "space": view.space, "window": window,
                      "mode": "operand" if stride_given else "omitted", "pitch_bytes": pitch,
                      "base_align": ptr & -ptr if ptr else 1 << 64, "pitch_align": pitch & -pitch if pitch else 0})
    if pr is None:
        return None
    ops = ", ".join(pr["ops"])
    ldsm = any(o.startswith("LDSM") for o in pr["ops"])
    if pr["outcome"] == "wrong_data":
        what = "read" if view.matrix != "d" else "written (and memory outside the matrix overwritten)"
        return (f"sm_90 (ptxas 13.0): ptxas emits {ops} and forms the {view.ld_name} offset from the stride shifted "
                f"right by {pr['shift']} ({pr['unit']}-byte units): no fault, but the {view.ld_name}s are {what} at a "
                f"rounded-down pitch, {pr['rounded_pitch']} bytes apart instead of {pitch} "
                f"(erratum stride-low-bits-dropped{', shared-ldsm-subbyte-pitch-rounded' if ldsm else ''}; "
                f"observed on the H100)")
    if pr["fault"] == (not legal) or (not legal and not pitch):
        return None
    if pr["fault"]:
        which = ("shared-ldsm-subbyte-pitch-rounded" if view.elem_bits < 8 else "shared-ldsm-row-alignment") if ldsm \
            else "generic-global-access-width"
        return (f"sm_90 (ptxas 13.0): legal by the text, but ptxas emits {ops}, which needs {pr['width']}-byte aligned "
                f"{view.ld_name}s: faults on the H100 (erratum {which})")
    return (f"sm_90 (ptxas 13.0): undefined by the text, but ptxas emits {ops}, which needs only {pr['width']}-byte "
            f"alignment: runs on the H100 (errata generic-global-access-width, shared-lds-access-width; depends on "
            f"ptxas's code generation, not a guarantee)")


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
    doc["_raw"] = str(p.parent / "wmma_alignment_raw.npz")
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
                 "fault_classes": dict(Counter(e.get("error_class") for e in probes if e["status"] == "fault")),
                 "overlap": (doc.get("meta") or {}).get("overlap")}
    by_reading = {}
    for rd in ("registers", "elements"):
        allows_fault = [e for e in ran if e["legal"][rd] and e["status"] == "fault"]
        allows_wrong = [e for e in ran if e["legal"][rd] and _code(e) == "W"]
        forbids_works = [e for e in ran if not e["legal"][rd] and _code(e) == "ok"]
        forbids_wrong = [e for e in ran if not e["legal"][rd] and _code(e) == "W"]
        by_reading[rd] = {"text_allows_what_faults": len(allows_fault), "text_allows_wrong_data": len(allows_wrong),
                          "text_forbids_what_works": len(forbids_works), "text_forbids_wrong_data": len(forbids_wrong),
                          "examples_allows_fault": [_short(e) for e in allows_fault[:6]],
                          "examples_forbids_works": [_short(e) for e in forbids_works[:6]],
                          # agreement: legal and the right data, or undefined and a fault or wrong data
                          "agrees": sum(1 for e in ran if e["legal"][rd] == (_code(e) == "ok"))}
    out["text"] = by_reading
    pred = []
    for e in ran:
        pr = predict(e) if "family" in e else None
        pr = pr or e.get("predicted")
        if pr and "outcome" in pr:
            pred.append((e, pr["outcome"]))
    obs = {"ok": "ok", "F": "fault", "A": "fault", "W": "wrong_data"}
    dis = [e for e, o in pred if o != obs[_code(e)]]
    out["sass_model"] = {"checked": len(pred), "disagreements": len(dis),
                         "outcomes": dict(sorted(Counter(f"{o} predicted, {obs[_code(e)]} observed"
                                                         for e, o in pred).items())),
                         "examples": [_short(e) for e in dis[:10]]}
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
    wrong = decode_wrong_data(doc) if out["wrong_data"]["count"] else {}
    out["wrong_data"]["decoded"] = {k: {x: v.get(x) for x in ("kind", "pattern", "pitch", "width", "rounded_pitch",
                                                               "units", "starts", "reproduces", "wrote_outside")}
                                    for k, v in wrong.items()}
    out["errata"] = errata_status(doc, wrong)
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
        if k == "sass":            # an opcode, with or without its modifiers: "LDS" is LDS, LDS.64, not LDSM
            ops = sass.get(e["kernel"]) or {}
            if not any(o == v or o.startswith(v + ".") for o in ops for v in vals):
                return False
        elif k == "matrix":
            if e["family"].split(".")[2] not in vals:
                return False
        elif k == "type":
            if e["family"].rsplit(".", 1)[1] not in vals:
                return False
        elif k == "stride_shifted":
            sh = stride_shifts().get((e["family"], e["space"], e["window"], e["mode"]))
            if sh is None or bool(sh) not in vals:
                return False
        elif e.get(k) not in vals:
            return False
    return True


def _observed(e: dict) -> str:
    return {"ok": "ok", "F": "fault", "A": "fault", "W": "wrong_data"}.get(_code(e), "not run")


def _expected(p: dict, claim: dict) -> tuple[int | None, dict | None]:
    """(N, model outcome) of a probe under a claim (see errata_status); (None, None): the claim
    cannot say (no SASS survey entry, or the stride shift unknown)."""
    pr = predict(p) if "family" in p else None
    need = claim["needs"]
    if need == "sass":
        need = (pr or p.get("predicted") or {}).get("width")
    if need is None:
        return None, None
    rule = claim.get("pitch", "exact")
    if rule == "sass":
        if pr is None or pr["shift"] is None:
            return need, None
        unit = pr["unit"]
    else:
        unit = None if rule == "exact" else int(rule)
    return need, model_outcome(need, p["base_align"], p.get("pitch_bytes"), p["pitch_align"], unit)


def _twin_key(p: dict, repl: dict | None = None) -> tuple:
    q = dict(p, **(repl or {}))
    return (q["family"], q["space"], q["window"], q["mode"], q["offset"], q["stride"])


def errata_status(doc: dict | None, wrong: dict | None = None) -> list[dict]:
    """Each silicon erratum of specs/wmma_memory.toml (entries with `select` and `claim`):
    confirmed / refuted (with witnesses) / partial / pending, on the probes of a run (None: no run).

    A claim predicts every selected probe's outcome exactly:

    * ``needs = N`` (bytes, or ``"sass"``: the widest access of the probe kernel's SASS) and
      ``pitch = "exact"`` (default) / ``U`` (bytes) / ``"sass"`` (U = 2^shift elements, the stride
      shift of the kernel's SASS, :func:`stride_shift`): :func:`model_outcome` -- a fault if the
      base or the row offset R (the pitch, or the pitch rounded down to a multiple of U) is not a
      multiple of N; else wrong data if R differs from the pitch, and then the decoded wrong data
      (:func:`decode_wrong_data`, `wrong` = {probe: decoded}) must put the instances R apart (a
      rounded pattern, reproducing the silicon data); else the right data.
    * ``same_as = {field: value}``: the probe's outcome equals that of its twin (the probe with the
      same family, state space, stride mode, base offset and stride, and these fields replaced),
      and where both moved wrong data, they moved it alike (the same decoded instance starts).

    ``sides = "both"`` (default): confirmed only when probes below N and at or above N ran
    (otherwise "partial"); ``"above"``: the at-or-above side is enough.  Each row counts the
    selected probes by side ("below": min(base alignment, pitch alignment) < N) and outcome."""
    from .memory import spec

    wrong = wrong or {}
    out = []
    for e in spec().errata:
        if "select" not in e or "claim" not in e:
            continue
        claim = e["claim"]
        row = {"id": e["id"], "kind": e.get("kind"), "evidence": e.get("evidence"), "claim": claim}
        if doc is None:
            row.update(status="pending", probes=0)
            out.append(row)
            continue
        sides = claim.get("sides", "both")
        sass = {k["kernel"]: k.get("sass") for k in doc.get("kernels", [])}
        chosen = [p for p in doc["probes"] if _selected(p, e["select"], sass)]
        twins = {_twin_key(p): p for p in doc["probes"]} if "same_as" in claim else {}
        bad: list[str] = []
        n: Counter = Counter()
        ran = 0
        for p in chosen:
            o = _observed(p)
            if "same_as" in claim:
                t = twins.get(_twin_key(p, claim["same_as"]))
                if t is None or not _ran(p) or not _ran(t):
                    n["not run (or no twin)"] += 1
                    continue
                ran += 1
                good = o == _observed(t) and (o != "wrong_data" or
                                              (wrong.get(p["name"]) or {}).get("starts") is not None and
                                              (wrong.get(p["name"]) or {}).get("starts") == (wrong.get(t["name"]) or {}).get("starts"))
                n[f"{o} as its twin" if good else f"{o}, twin {_observed(t)}"] += 1
                if not good:
                    bad.append(_short(p) + f" vs {t['name']}: {_observed(t)}")
                continue
            need, m = _expected(p, claim)
            if need is None or m is None:
                n["not predicted"] += 1
                continue
            side = "below" if min(p["base_align"], p["pitch_align"] or 1) < need else "at or above"
            if not _ran(p):
                n[f"{side} not run"] += 1
                continue
            ran += 1
            n[f"{side} {o}"] += 1
            good = o == m["outcome"]
            if good and o == "wrong_data":
                d = wrong.get(p["name"]) or {}
                good = d.get("pattern") in ROUNDED_PATTERNS and d.get("rounded_pitch") == m["rounded_pitch"] \
                    and d.get("reproduces") is not False
            if not good:
                bad.append(_short(p) + f" (claim: {m['outcome']}" +
                           (f", rows {m['rounded_pitch']} B apart)" if m["outcome"] == "wrong_data" else ")"))
        ran_below = sum(v for k, v in n.items() if k.startswith("below ") and k != "below not run")
        ran_above = sum(v for k, v in n.items() if k.startswith("at or above ") and k != "at or above not run")
        if not ran:
            status = "pending"
        elif bad:
            status = "refuted"
        elif "same_as" not in claim and sides == "both" and not (ran_below and ran_above):
            status = "partial"        # what ran agrees, but one side of the claim was never run
        else:
            status = "confirmed"
        row.update(probes=ran, status=status, sides=sides, outcomes=dict(sorted(n.items())),
                   witnesses=bad[:5], n_witnesses=len(bad),
                   missing=None if status != "partial" else ("below" if not ran_below else "at or above"))
        out.append(row)
    return out


# ----------------------------------------------------------------------------------
# what a probe that did not fault but moved other data really accessed

ROUNDED_PATTERNS = ("rounded_pitch", "rounded_pitch_in_groups_of_8")
UNITS = (1, 2, 4, 8, 16, 32, 64)


def instance_starts(n_ld: int, pitch: int, rounded: int, groups_of_8: bool = False) -> list[int]:
    """Byte offset from the base of each instance of the leading dimension: ld * rounded, or
    (groups_of_8) (ld // 8) * 8 * pitch + (ld % 8) * rounded (the first 8 at the rounded pitch, each
    further group of 8 from the exact 8 * pitch)."""
    return [(ld // 8) * 8 * pitch + (ld % 8) * rounded if groups_of_8 else ld * rounded for ld in range(n_ld)]


def _instance_patterns(starts: list[int], pitch: int) -> list[str]:
    """Which address patterns decoded instance starts follow (r = starts[1] - starts[0]):
    exact: ld * pitch (what the text says); rounded_pitch: ld * r, r != pitch;
    rounded_pitch_in_groups_of_8: instance_starts(..., groups_of_8=True), r != pitch."""
    n = len(starts)
    r = starts[1] - starts[0] if n > 1 else pitch
    pats = {"exact": instance_starts(n, pitch, pitch)}
    if r != pitch:
        pats["rounded_pitch"] = instance_starts(n, pitch, r)
        pats["rounded_pitch_in_groups_of_8"] = instance_starts(n, pitch, r, True)
    return [k for k, v in pats.items() if v == list(starts)]


@lru_cache(maxsize=1)
def silicon_maps() -> dict:
    """family opcode -> the observed sm_90 fragment map (specs/observed/wmma_sm90_h100.json)."""
    from . import maps as mp
    return {m.provenance.get("opcode"): m for m in mp.all_maps() if m.evidence == "silicon"}


def _slot_table(view, m) -> tuple:
    """Every (lane, element) slot of a map: arrays lane, element, instance ld, position in it."""
    import numpy as np

    lane, el, ld, pos = [], [], [], []
    for ln in range(32):
        for i in range(m.elements):
            (row, col), = m.slots[ln][i]
            a, b = (row, col) if view.layout == "row" else (col, row)
            lane.append(ln)
            el.append(i)
            ld.append(a)
            pos.append(b)
    return tuple(np.array(x, np.int64) for x in (lane, el, ld, pos))


def read_fragment(view, m, mem, base: int, starts: list[int]):
    """The registers [32, regs] a load returns that reads instance ld of the leading dimension at
    byte base + starts[ld] (elements packed little-endian, spec [address].bit), through map m."""
    import numpy as np


    lane, el, ld, pos = _slot_table(view, m)
    bits = np.unpackbits(np.asarray(mem, np.uint8), bitorder="little")
    eb = view.elem_bits
    addr = 8 * (base + np.asarray(starts, np.int64)[ld]) + pos * eb
    vals = (bits[addr[:, None] + np.arange(eb)].astype(np.uint64) << np.arange(eb, dtype=np.uint64)).sum(axis=1)
    fields = np.zeros((32, m.elements), np.uint64)
    fields[lane, el] = vals
    return W.register_words(fields, view.reg_bits, m.elems_per_reg)


def write_fragment(view, m, mem, base: int, starts: list[int], words):
    """Memory after a store that writes instance ld at byte base + starts[ld] from the register
    words [32, regs] through map m (the inverse of read_fragment)."""
    import numpy as np


    lane, el, ld, pos = _slot_table(view, m)
    bits = np.unpackbits(np.asarray(mem, np.uint8), bitorder="little")
    eb = view.elem_bits
    fields = W.register_fields(np.asarray(words, np.uint64), view.reg_bits, m.elems_per_reg)[lane, el]
    addr = 8 * (base + np.asarray(starts, np.int64)[ld]) + pos * eb
    bits[addr[:, None] + np.arange(eb)] = ((fields[:, None] >> np.arange(eb, dtype=np.uint64)) & np.uint64(1)).astype(np.uint8)
    return np.packbits(bits, bitorder="little")


def _classify(starts: list[int], pitch: int, width, base: int) -> dict:
    pats = _instance_patterns(starts, pitch)
    r = starts[1] - starts[0] if len(starts) > 1 else pitch
    return {"pattern": pats[0] if pats else "other", "patterns": pats, "starts": starts, "pitch": pitch,
            "width": width, "rounded_pitch": r, "units": [u for u in UNITS if pitch // u * u == r],
            "misaligned_starts": sum(1 for s in starts if width and (base + s) % width)}


def _decode_load(e: dict, p, view, m, regs) -> dict:
    """Locate each instance of the leading dimension in the probe's memory: the instance's elements
    (from the registers through the map) as bytes, searched in the memory; then read the registers
    back from the starts found (read_fragment) -- the two must agree bit for bit."""
    import numpy as np


    mem = W.align_inputs(p)["mem"]
    base = W.ALIGN_PRE + p.offset
    regs = np.asarray(regs).astype(np.uint64).reshape(32, view.regs)
    fields = W.register_fields(regs, view.reg_bits, m.elems_per_reg)
    lane, el, ld, pos = _slot_table(view, m)
    vals: dict[tuple[int, int], int] = {}
    for a, b, c, d in zip(lane, el, ld, pos):
        v = int(fields[a, b])
        if vals.setdefault((int(c), int(d)), v) != v:
            return {"kind": "load", "pattern": "other", "why": f"two slots of instance {c} position {d} differ"}
    memb = mem.tobytes()
    starts = []
    for i in range(view.n_ld):
        inst = W.pack(np.array([vals[(i, q)] for q in range(view.ld_size)], np.uint64), view.elem_bits,
                      view.ld_size * view.elem_bits // 8).tobytes()
        hits, j = [], memb.find(inst)
        while j >= 0:
            hits.append(j - base)
            j = memb.find(inst, j + 1)
        if len(hits) != 1:
            return {"kind": "load", "pattern": "other", "why": f"instance {i} found at {len(hits)} places"}
        starts.append(hits[0])
    width = (e.get("predicted") or {}).get("width")
    back = read_fragment(view, m, mem, base, starts)
    return dict(_classify(starts, e["pitch_bytes"], width, base), kind="load", method="search",
                reproduces=bool(np.array_equal(back, regs)))


def _decode_store(e: dict, p, view, m, matrix) -> dict:
    """Which instance starts make a store reproduce what silicon left in memory: for every rounded
    pitch floor(P / u) * u (u a power of two up to 64; u = 1 is the exact pitch) in both patterns,
    the memory after writing the family's registers there (write_fragment) must equal silicon's at
    every matrix cell and change exactly as many bytes outside the matrix as silicon did."""
    import numpy as np


    before = W.align_inputs(p)["mem"]
    _, words = W.align_codes(p.family)
    base = W.ALIGN_PRE + p.offset
    mask = W._cell_mask(view, p.run_bytes, base, p.stride)
    P = e["pitch_bytes"]
    fits, tried = [], set()
    for r in sorted({P // u * u for u in UNITS}, reverse=True):
        for g in (False, True):
            st = instance_starts(view.n_ld, P, r, g)
            if tuple(st) in tried:
                continue
            tried.add(tuple(st))
            after = write_fragment(view, m, before, base, st, words)
            if np.array_equal(W._extract(view, after, base, p.stride), np.asarray(matrix).astype(np.uint64)) and \
                    int(((before != after) & ~mask).sum()) == e.get("wrote_outside"):
                fits.append(st)
    if len(fits) != 1:
        return {"kind": "store", "pattern": "other", "hypotheses": len(tried), "fits": len(fits),
                "why": f"{len(fits)} of {len(tried)} instance-start hypotheses reproduce the memory"}
    width = (e.get("predicted") or {}).get("width")
    return dict(_classify(fits[0], P, width, base), kind="store", method="simulation", reproduces=True,
                hypotheses=len(tried), wrote_outside=e.get("wrote_outside"))


def _raw_arrays(doc: dict, raw_path=None) -> dict | None:
    """{array name: array} from the run's raw file(s) (a merged run: the later run's array wins)."""
    import numpy as np

    paths = [raw_path] if raw_path else list(doc.get("_raws") or [doc.get("_raw")])
    paths = [p for p in paths if p and os.path.exists(p)]
    if not paths:
        return None
    out: dict = {}
    for pth in paths:
        with np.load(pth) as z:
            out.update({k: z[k] for k in z.files})
    return out


def _overlap(docs: list[dict]) -> dict:
    """Probes that several runs ran (a --resume run re-runs the family reference probes): do they
    agree -- the same outcome, and the same raw registers / memory bit for bit?  (A difference
    would be nondeterminism of the hardware or the harness.)"""
    import numpy as np

    seen: dict[str, tuple[str, int]] = {}
    out = {"probes": 0, "same_outcome": 0, "raw_compared": 0, "raw_identical": 0, "differing": []}
    raws = []
    for d in docs:
        p = d.get("_raw")
        raws.append(np.load(p) if p and os.path.exists(p) else None)
    try:
        for i, d in enumerate(docs):
            for e in d["probes"]:
                if not _ran(e):
                    continue
                if e["name"] in seen:
                    code, j = seen[e["name"]]
                    out["probes"] += 1
                    same = code == _code(e)
                    out["same_outcome"] += same
                    a, b = raws[j], raws[i]
                    if a is not None and b is not None and e["name"] in a.files and e["name"] in b.files:
                        out["raw_compared"] += 1
                        eq = bool(np.array_equal(a[e["name"]], b[e["name"]]))
                        out["raw_identical"] += eq
                        same = same and eq
                    if not same:
                        out["differing"].append(e["name"])
                seen[e["name"]] = (_code(e), i)
    finally:
        for z in raws:
            if z is not None:
                z.close()
    return out


def merge_runs(docs: list[dict]) -> dict:
    """Several runs of the sweep as one (a later run's verdict replaces an earlier one's where it ran):
    e.g. a run cut short by its deadline and its ``--resume`` run."""
    import copy

    if len(docs) == 1:
        return docs[0]
    base = copy.deepcopy(docs[0])
    idx = {e["name"]: i for i, e in enumerate(base["probes"])}
    kern = {k["kernel"] for k in base["kernels"]}
    for d in docs[1:]:
        if d["meta"].get("target") != base["meta"].get("target"):
            raise ValueError("runs of different targets")
        for k in d["kernels"]:
            if k["kernel"] not in kern:
                base["kernels"].append(k)
                kern.add(k["kernel"])
        for e in d["probes"]:
            if e["name"] not in idx:
                idx[e["name"]] = len(base["probes"])
                base["probes"].append(e)
            elif e["status"] != "not_run":
                base["probes"][idx[e["name"]]] = e
        base["reruns"] = list(base.get("reruns") or []) + list(d.get("reruns") or [])
    base["_raws"] = [d.get("_raw") for d in docs]
    base["meta"] = dict(base["meta"], merged=[{k: d["meta"].get(k) for k in ("created", "time_s", "deadline_s")}
                                              for d in docs], overlap=_overlap(docs),
                        execution={"status_counts": dict(Counter(e["status"] for e in base["probes"]))})
    base["probes"].sort(key=lambda e: e["name"])
    return base


def decode_wrong_data(doc: dict, raw_path: str | os.PathLike | None = None) -> dict[str, dict]:
    """For every probe of a run that did not fault but moved other data than its family's
    reference: where each instance of the leading dimension was really read or written.

    The probe's memory is regenerated (formal.wmma.probes.align_inputs: the family's random
    matrix at the probe's place, random padding seeded by the probe's name) and the observed sm_90
    map (specs/observed/) says which cell each register slot holds.  A load is decoded by search
    (:func:`_decode_load`: each instance located in memory, then the registers read back from
    there), a store by simulation (:func:`_decode_store`: the one rounded pitch whose writes
    reproduce the memory).  Returns {probe: {"kind", "pattern" (one of _instance_patterns, or
    "other" / "undecoded" with "why"), "starts" (byte offsets from the base), "rounded_pitch"
    (starts[1] - starts[0]), "units" (the u with floor(pitch / u) * u = rounded_pitch),
    "reproduces", ...}}.  Needs the run's wmma_alignment_raw.npz."""
    from . import memory as wmem

    diff = [e for e in doc["probes"] if e.get("data") == "differs"]
    if not diff:
        return {}
    raw = _raw_arrays(doc, raw_path)
    if raw is None:
        return {e["name"]: {"kind": e["kind"], "pattern": "undecoded", "why": "no raw data"} for e in diff}
    # the probes of the families concerned, matched by what they are (a run of some families only numbers
    # its probes differently); align_inputs seeds the padding by the run's probe name
    fams = sorted({e["family"] for e in diff})
    probes, _ = W.alignment_probes(doc["meta"].get("target", W.TARGET), doc["meta"].get("ptx", W.PTX_VERSION), fams)
    by = {_twin_key(p.manifest()): p for p in probes}
    out: dict[str, dict] = {}
    for e in diff:
        p = by.get(_twin_key(e))
        m = silicon_maps().get(e["family"])
        if p is None or m is None or e["name"] not in raw or not e["pitch_bytes"]:
            out[e["name"]] = {"kind": e["kind"], "pattern": "undecoded",
                              "why": "no probe, observed map, raw data or whole-byte pitch"}
            continue
        p = dataclasses.replace(p, name=e["name"])
        view = wmem.memory_view(e["family"])
        dec = _decode_load if e["kind"] == "load" else _decode_store
        out[e["name"]] = dec(e, p, view, m, raw[e["name"]])
    return out


def check_references(doc: dict, raw_path: str | os.PathLike | None = None) -> dict:
    """The reference probe of every family (the data 'same' compares with) against the observed
    sm_90 map: a load's registers are the family's cells through the map, a store's matrix is the
    family's register words through the map.  {"checked", "agree", "disagree": [family]}."""
    import numpy as np

    from . import maps as mp
    from . import memory as wmem

    raw = _raw_arrays(doc, raw_path)
    if raw is None:
        return {"checked": 0, "agree": 0, "disagree": [], "why": "no raw data"}
    obs = {m.provenance.get("opcode"): m for m in mp.all_maps() if m.evidence == "silicon"}
    res = {"checked": 0, "agree": 0, "disagree": []}
    for fam, name in sorted((doc.get("references") or {}).items()):
        m = obs.get(fam)
        if m is None or name not in raw:
            continue
        view = wmem.memory_view(fam)
        cells, words = W.align_codes(fam)
        tab = m.single()                                   # [32, E] cell index
        if view.matrix != "d":                             # a load (A, B, C); D is stored
            fields = cells.reshape(-1)[tab]
            want = W.register_words(fields, view.reg_bits, m.elems_per_reg)
            got = raw[name].astype(np.uint64).reshape(want.shape)
        else:
            fields = W.register_fields(words, view.reg_bits, m.elems_per_reg)
            want = np.zeros(view.rows * view.cols, np.uint64)
            want[tab.reshape(-1)] = fields.reshape(-1)
            want = want.reshape(view.rows, view.cols)
            got = raw[name].astype(np.uint64)
        res["checked"] += 1
        if np.array_equal(got, want):
            res["agree"] += 1
        else:
            res["disagree"].append(fam)
    return res


def report_text(analysis: dict) -> str:
    a = analysis
    lines = [f"alignment probes: {a['probes']} ({a['status_counts']}); {a['ran']} ran"]
    o = a.get("overlap")
    if o:
        lines.append(f"  probes ran by more than one run: {o['probes']}; same outcome {o['same_outcome']}, raw data "
                     f"identical {o['raw_identical']}/{o['raw_compared']}"
                     + (f"; DIFFERING: {o['differing'][:10]}" if o["differing"] else ""))
    for rd, t in a["text"].items():
        lines.append(f"  text ({rd} reading): agrees on {t['agrees']}/{a['ran']}; allows what faults: "
                     f"{t['text_allows_what_faults']}; forbids what works: {t['text_forbids_what_works']}")
        for x in t["examples_allows_fault"][:3]:
            lines.append(f"    allows, faults: {x}")
        for x in t["examples_forbids_works"][:3]:
            lines.append(f"    forbids, works: {x}")
    s = a["sass_model"]
    lines.append(f"  SASS model (fault iff the base or the row offset ptxas computes -- the pitch, rounded down where "
                 f"ptxas shifts the stride -- is not a multiple of the widest access; wrong data iff that offset is not "
                 f"the pitch): {s['checked'] - s['disagreements']}/{s['checked']} agree {s.get('outcomes', '')}")
    for x in s["examples"][:5]:
        lines.append(f"    disagrees: {x}")
    lines.append(f"  probes that ran without a fault but moved wrong data: {a['wrong_data']['count']}")
    for x in a["wrong_data"]["examples"][:5]:
        lines.append(f"    {x}")
    dec = a["wrong_data"].get("decoded") or {}
    if dec:
        pats = Counter(f"{v.get('kind')} {v['pattern']}" + ("" if v.get("reproduces", True) else " (NOT reproduced)")
                       for v in dec.values())
        lines.append(f"  where they read / wrote (decoded from the raw data): {dict(pats)}; rounded_pitch: instance ld "
                     f"at ld * R, in_groups_of_8: (ld // 8) * 8 * P + (ld % 8) * R (offsets from the base; P the "
                     f"pitch, R = floor(P / u) * u)")
        for k, v in list(dec.items())[:3]:
            if v.get("starts"):
                lines.append(f"    {k}: pitch {v['pitch']} B, access {v['width']} B -> instances at "
                             f"{v['starts'][:10]}{' ...' if len(v['starts']) > 10 else ''} ({v['pattern']})")
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
    lines.append(errata_text(a["errata"]))
    return "\n".join(lines)


def errata_text(errata: list[dict]) -> str:
    lines = []
    for e in errata:
        o = e.get("outcomes") or {}
        lines.append(f"  erratum {e['id']}: {e['status']} ({e['probes']} probes ran"
                     + (f"; {', '.join(f'{k} {v}' for k, v in o.items())}" if o else "") + ")"
                     + (f"; the claim's {e['missing']} side never ran" if e.get("missing") else "")
                     + (f"; e.g. {e['witnesses'][0]}" if e.get("witnesses") else ""))
    return "\n".join(lines)


# ----------------------------------------------------------------------------------
# the checked-in summary of a run (specs/observed/wmma_alignment_sm90.json)

# outcome codes of a probe in the summary
CODES = {"ok": "the right data (registers / memory) and nothing written outside the matrix",
         "W": "no fault, but wrong data (other registers / other memory)",
         "F": "fault: misaligned address (CUDA_ERROR_MISALIGNED_ADDRESS)",
         "A": "fault: illegal address",
         "X": "another launch error (says nothing about alignment)",
         "-": "not run (the run's deadline came first)"}
SUMMARY_KERNEL_COLUMNS = ("kernel", "family", "space", "window", "mode", "kind", "ops", "width", "stride_shift",
                          "first_probe", "probes")


def _code(e: dict) -> str:
    if e["status"] == "ok":
        return "W" if e.get("data") == "differs" else "ok"
    if e["status"] == "fault":
        return {"misaligned": "F", "illegal_address": "A"}.get(e.get("error_class"), "X")
    return "-" if e["status"] == "not_run" else "X"


def _opcode(family: str, space: str) -> str:
    head, t = family.rsplit(".", 1)
    return f"{head}.{space}.{t}" if space else family


def summarize(doc: dict, provenance: dict | None = None, wrong: dict | None = None, shifts: dict | None = None) -> dict:
    """A run condensed: one row per sweep kernel (family x state space x pointer window x stride
    mode) with its SASS (accesses, widest access, stride shift) and every probe's outcome as
    ``offset+stride=code`` (in probe order; probe names are ``wa`` + first_probe + position), the
    decoded wrong data, the reference check, the run2 re-runs, the text-vs-silicon counts and the
    errata verdicts.  `shifts`: {(family, space, window, mode): stride shift}, default
    :func:`stride_shifts`."""
    wrong = decode_wrong_data(doc) if wrong is None else wrong
    shifts = stride_shifts() if shifts is None else shifts
    by_kernel: dict[str, list[dict]] = {}
    for e in doc["probes"]:
        by_kernel.setdefault(e["kernel"], []).append(e)
    rows = []
    for k in doc["kernels"]:
        ps = sorted(by_kernel.get(k["kernel"], []), key=lambda e: e["name"])
        if not ps:
            continue
        first = int(ps[0]["name"][2:])
        assert [int(e["name"][2:]) for e in ps] == list(range(first, first + len(ps))), k["kernel"]
        width = next(((e.get("predicted") or {}).get("width") for e in ps if e.get("predicted")), None)
        ops = ",".join(f"{o}*{n}" for o, n in sorted((k.get("sass") or {}).items()))
        shift = shifts.get((k["family"], k["space"], k["window"], k["mode"]))
        rows.append([k["kernel"], k["family"], k["space"], k["window"], k["mode"], k["kind"], ops, width, shift, first,
                     " ".join(f"{e['offset']}+{e['stride']}={_code(e)}" for e in ps)])
    a = analyse(doc)
    st = errata_status(doc, wrong)
    for r in st:                   # the verdicts; the errata's text stays in specs/wmma_memory.toml
        r.pop("evidence", None)
        r.pop("kind", None)
    meta = {"what": "the wmma.load / wmma.store alignment sweep on silicon, condensed (formal.wmma.alignment.summarize): "
                    "per kernel of formal.wmma.probes.alignment_probes every probe's outcome",
            "evidence": "silicon", "target": doc["meta"].get("target"), "ptx": doc["meta"].get("ptx"),
            "device": doc["meta"].get("device"), "created": doc["meta"].get("created"),
            "deadline_s": doc["meta"].get("deadline_s"), "time_s": doc["meta"].get("time_s"),
            "merged": doc["meta"].get("merged"), "overlap": doc["meta"].get("overlap"), "align_pre": doc["meta"].get("align_pre"), "offsets": doc["meta"].get("offsets"),
            "pitch_aligns": doc["meta"].get("pitch_aligns"),
            "probe_token": "offset+stride=code: the base is 256-aligned + offset bytes, stride in elements; the first "
                           f"{len(doc['meta'].get('offsets') or [])} tokens of a row are the offset probes, the rest the "
                           "pitch probes (offset 0, one stride per pitch alignment)",
            "codes": CODES, "status_counts": a["status_counts"], "ran": a["ran"],
            "text": {rd: {k: v for k, v in t.items() if not k.startswith("examples")} for rd, t in a["text"].items()},
            "sass_model": {k: a["sass_model"][k] for k in ("checked", "disagreements", "outcomes")},
            "stride_shift": "column stride_shift: how many low bits of the stride operand the kernel's SASS (the ptxas of "
                            f"{SURVEY_FILE}) drops before forming row addresses (formal.wmma.alignment.stride_shift); "
                            "null: no stride operand",
            "provenance": provenance or {}}
    reruns = [{k: v for k, v in r.items() if v is not None} for r in a["reruns"]]
    return {"meta": meta, "columns": list(SUMMARY_KERNEL_COLUMNS), "kernels": rows,
            "wrong_data": {k: wrong[k] for k in sorted(wrong)}, "references": check_references(doc),
            "reruns": reruns, "errata": st}


def write_summary(doc: dict, dest: str | os.PathLike | None = None, provenance: dict | None = None) -> Path:
    dest = Path(dest) if dest else spec_dir() / SUMMARY_FILE
    s = summarize(doc, provenance)
    body = json.dumps(s, separators=(",", ":"))
    dest.write_text(body.replace('],["wk', '],\n["wk'))
    load_summary.cache_clear()
    stride_shifts.cache_clear()
    return dest


@lru_cache(maxsize=1)
def load_summary() -> dict | None:
    p = spec_dir() / SUMMARY_FILE
    return json.loads(p.read_text()) if p.exists() else None


def summary_doc(summary: dict | None = None) -> dict | None:
    """The probes of a summary as a run document (the fields errata_status and the group table
    need): {"meta", "kernels", "probes"}."""
    from . import memory as wmem

    s = summary or load_summary()
    if s is None:
        return None
    kernels, probes = [], []
    noff = len(s["meta"]["offsets"])
    for row in s["kernels"]:
        k = dict(zip(s["columns"], row))
        ops = {o: int(n) for o, n in (x.rsplit("*", 1) for x in k["ops"].split(",") if x)}
        kernels.append({"kernel": k["kernel"], "family": k["family"], "space": k["space"], "window": k["window"],
                        "mode": k["mode"], "kind": k["kind"], "sass": ops, "stride_shift": k.get("stride_shift")})
        bits = wmem.memory_view(k["family"]).elem_bits
        for i, tok in enumerate(k["probes"].split()):
            where, code = tok.split("=")
            off, stride = (int(x) for x in where.split("+"))
            pb = stride * bits // 8 if (stride * bits) % 8 == 0 else 0
            status = {"ok": "ok", "W": "ok", "F": "fault", "A": "fault", "-": "not_run"}.get(code, "error")
            probes.append({"name": f"wa{k['first_probe'] + i:05d}", "kernel": k["kernel"], "family": k["family"],
                           "opcode": _opcode(k["family"], k["space"]), "space": k["space"], "window": k["window"],
                           "mode": k["mode"], "kind": k["kind"], "offset": off, "stride": stride, "pitch_bytes": pb,
                           "purpose": "offset" if i < noff else "pitch",
                           "base_align": (s["meta"]["align_pre"] + off) & -(s["meta"]["align_pre"] + off),
                           "pitch_align": pb & -pb if pb else 0, "status": status,
                           "error_class": {"F": "misaligned", "A": "illegal_address"}.get(code),
                           "data": "differs" if code == "W" else ("same" if code == "ok" else None),
                           "predicted": {"width": k["width"]} if k["width"] else None})
    return {"meta": s["meta"], "kernels": kernels, "probes": probes}


def outcome_table(doc: dict) -> list[dict]:
    """Per (state space, pointer window, kind, SASS access, stride shift of the SASS): for each base
    alignment and each pitch alignment, how many probes worked / silently moved wrong data / faulted /
    did not run."""
    from . import memory as wmem

    groups: dict[tuple, dict] = {}
    sass = {k["kernel"]: k.get("sass") or {} for k in doc["kernels"]}
    for e in doc["probes"]:
        ops = sass.get(e["kernel"], {})
        cls = "LDSM" if any(o.startswith(("LDSM", "STSM")) for o in ops) else \
            "+".join(sorted({o for o in ops}))
        shift = stride_shifts().get((e["family"], e["space"], e["window"], "operand"))   # omitted: as the operand twin
        key = (e["space"] or "generic", e["window"], e["kind"], cls, (e.get("predicted") or {}).get("width"),
               wmem.memory_view(e["family"]).elem_bits, shift)
        g = groups.setdefault(key, {"base": {}, "pitch": {}, "families": set()})
        g["families"].add(e["family"])
        code = _code(e) if "status" in e else "-"
        side = "base" if e["purpose"] == "offset" else "pitch"
        a = e["base_align"] if side == "base" else e["pitch_align"]
        c = g[side].setdefault(a, Counter())
        c[code] += 1
    out = []
    for (space, window, kind, cls, width, bits, shift), g in sorted(groups.items(),
                                                                   key=lambda kv: tuple(str(x) for x in kv[0])):
        out.append({"space": space, "window": window, "kind": kind, "access": cls, "width": width, "elem_bits": bits,
                    "stride_shift": shift, "families": len(g["families"]),
                    "base": {a: dict(c) for a, c in sorted(g["base"].items())},
                    "pitch": {a: dict(c) for a, c in sorted(g["pitch"].items())}})
    return out


def outcome_text(table: list[dict]) -> str:
    def cell(c: dict) -> str:
        return "/".join(f"{n}{k}" for k, n in sorted(c.items(), key=lambda kv: list(CODES).index(kv[0])))
    lines = ["  space       window kind  access (bytes) >>stride shift, elem bits, families | base alignment: outcomes | "
             "pitch alignment: outcomes   (ok right data, W wrong data, F fault, - not run)"]
    for r in table:
        b = " ".join(f"{a}:{cell(c)}" for a, c in r["base"].items())
        p = " ".join(f"{a}:{cell(c)}" for a, c in r["pitch"].items())
        acc = f"{r['access'][:16]} ({r['width']})" + (f" >>{r['stride_shift']}" if r.get("stride_shift") else "")
        lines.append(f"  {r['space']:11s} {r['window']:6s} {r['kind']:5s} {acc:24s} {r['elem_bits']:2d} {r['families']:3d} "
                     f"| {b} | {p}")
    return "\n".join(lines)
