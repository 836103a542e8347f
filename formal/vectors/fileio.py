"""Vector files (jsonl, hex, npz) and device-under-test result files.

Grammar of the hex format (one case per line, like Berkeley TestFloat)::

    file      = { comment | case } ;
    comment   = "#" text NL ;                 the first one is the header: "# ptx-formal-vectors " JSON
    case      = opcode { SP field } [ SP "#" SP note ] NL ;
    opcode    = the form's canonical spelling (formal.catalog Form.opcode) ;
    field     = "sel=" decimal                sparsity selector (mma.sp only)
              | op "=" lanes                  op = a | b | c | d   (register level)
              | "e=" word { "|" word }        32 metadata registers, lane 0 first (mma.sp)
              | mat "=" rows                  mat = A | B | C | SA | SB | D   (matrix level:
                                              wmma.mma and block-scaled forms) ;
    lanes     = lane { "|" lane } ;           exactly 32 lanes, lane 0 first
    lane      = word { "," word } ;           the lane's registers of that operand, in order
    word      = 8 hex digits (16 for 64-bit registers, f64), lower case, no "0x" ;
    rows      = row { "|" row } ; row = elem { "," elem } ;
    elem      = hex, ceil(bits / 4) digits (the element's encoding, right-aligned) ;
    note      = "id=" decimal SP "points=" points [ SP "seen=" points ] SP "why=" text ;
    points    = point { "," point } ;         built for / observed (see formal.vectors.coverage)

    d (or D) is the expected result.  Fields may come in any order; readers ignore
    unknown fields.

Example (m16n8k8 bf16, lanes abridged)::

    mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 a=3f803f80,3f803f80|... b=...|... c=00000000,...|... d=3f800000,...|... # id=3 points=nan_in:a,nan_out why=NaN in A (quiet, ...)

A *result* file holds a device's outputs, one per case, in vector order: the same hex
lines with only ``d=`` needed (``opcode [sel=S] d=...``; a ``# id=N`` note matches by
id instead of order), or JSONL objects ``{"id": N, "d": [[hex, ...] x 32]}``, or an npz
with ``d`` ``[T, 32, nd]`` (``D`` ``[T, M, N]`` at matrix level).  The CUDA harness
template (``formal/hw/template``) writes the hex form.

JSONL: the first line is the header object (``"format": "ptx-formal-vectors"``), then
one object per case with ``id, opcode, sel, points, why, targets`` and the operands as
hex strings (``a``: 32 lists of register words; ``e``: 32 words; matrices: lists of rows).
NPZ: ``a, b, c, d`` ``[T, 32, n]``, ``e`` ``[T, 32]``, ``sel`` ``[T]`` (-1: none) or
``A, B, C, D`` (+ ``scale_a, scale_b``), and ``meta``: the header and per-case notes as JSON.
"""

from __future__ import annotations

import json
import os
import zipfile
from typing import Any

import numpy as np

from .build import FORMAT_NAME, Case, VectorError, VectorSet

REG_OPS = ("a", "b", "c", "e", "d")
MAT_OPS = {"A": "A", "B": "B", "C": "C", "SA": "scale_a", "SB": "scale_b", "D": "D"}
FORMATS = ("jsonl", "hex", "npz")


def infer_format(path: str, fmt: str | None = None) -> str:
    if fmt:
        if fmt not in FORMATS:
            raise VectorError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
        return fmt
    ext = os.path.splitext(path)[1].lower()
    return {".jsonl": "jsonl", ".json": "jsonl", ".npz": "npz", ".hex": "hex", ".txt": "hex"}.get(ext, "jsonl")


# ------------------------------------------------------------------------------------------
# hex words

def _w(reg_bits: int) -> int:
    return 16 if reg_bits == 64 else 8


def _ew(bits: int) -> int:
    return max(1, -(-bits // 4))


def _reg_bits(vs_or_form, op: str) -> int:
    ops = vs_or_form.form.operands if hasattr(vs_or_form, "form") else vs_or_form.operands
    return ops[op].reg_bits


def _elem_bits(form, key: str) -> int:
    from ..numerics.formats import get_format

    t = {"A": form.atype, "B": form.btype, "C": form.c_type, "D": form.dtype,
         "scale_a": form.stype, "scale_b": form.stype}[key]
    return get_format(t).bits


def regs_to_hex(x: np.ndarray, reg_bits: int) -> str:
    w = _w(reg_bits)
    x = np.asarray(x)
    if x.ndim == 1:  # e
        return "|".join(f"{int(v):0{w}x}" for v in x)
    return "|".join(",".join(f"{int(v):0{w}x}" for v in lane) for lane in x)


def mat_to_hex(x: np.ndarray, bits: int) -> str:
    w = _ew(bits)
    return "|".join(",".join(f"{int(v):0{w}x}" for v in row) for row in np.asarray(x))


def _parse_words(s: str, what: str) -> list[list[int]]:
    try:
        return [[int(w, 16) for w in lane.split(",")] for lane in s.split("|")]
    except ValueError:
        raise VectorError(f"{what}: not hex words separated by ',' and '|'") from None


def hex_to_regs(s: str, count: int, reg_bits: int, what: str, vector: bool = False) -> np.ndarray:
    rows = _parse_words(s, what)
    dt = np.uint64 if reg_bits == 64 else np.uint32
    if len(rows) != 32:
        raise VectorError(f"{what}: {len(rows)} lanes, expected 32")
    if vector:
        if any(len(r) != 1 for r in rows):
            raise VectorError(f"{what}: one word per lane expected")
        return np.array([r[0] for r in rows], dtype=dt)
    if any(len(r) != count for r in rows):
        raise VectorError(f"{what}: expected {count} registers per lane")
    lim = 1 << reg_bits
    if any(v >= lim for r in rows for v in r):
        raise VectorError(f"{what}: a word does not fit in {reg_bits} bits")
    return np.array(rows, dtype=dt)


def hex_to_mat(s: str, shape: tuple[int, int], what: str) -> np.ndarray:
    rows = _parse_words(s, what)
    if len(rows) != shape[0] or any(len(r) != shape[1] for r in rows):
        raise VectorError(f"{what}: expected a {shape[0]} x {shape[1]} matrix")
    return np.array(rows, dtype=np.uint64)


def _mat_shape(form, key: str) -> tuple[int, int]:
    M, N, K = form.mnk
    nsf = {"1X": 1, "2X": 2, "4X": 4}.get(form.scale_vec_effective or "", 1)
    return {"A": (M, K), "B": (K, N), "C": (M, N), "D": (M, N), "scale_a": (M, nsf), "scale_b": (nsf, N)}[key]


# ------------------------------------------------------------------------------------------
# writing

def case_fields(vs: VectorSet, c: Case) -> list[str]:
    """The hex fields of one case (without the opcode and the note)."""
    form = vs.form
    out = []
    if c.sel is not None:
        out.append(f"sel={c.sel}")
    if c.level == "matrix":
        for tag, key in MAT_OPS.items():
            if key == "D":
                out.append(f"D={mat_to_hex(c.expected, _elem_bits(form, 'D'))}")
            elif key in c.inputs:
                out.append(f"{tag}={mat_to_hex(c.inputs[key], _elem_bits(form, key))}")
        return out
    for op in ("a", "b", "c", "e"):
        if op in c.inputs:
            out.append(f"{op}={regs_to_hex(c.inputs[op], _reg_bits(form, op))}")
    out.append(f"d={regs_to_hex(c.expected, _reg_bits(form, 'd'))}")
    return out


def _note(c: Case) -> str:
    why = " ".join(c.why.split())
    seen = f" seen={','.join(c.seen)}" if c.seen else ""
    return f"# id={c.id} points={','.join(c.points)}{seen} why={why}"


def dumps_hex(vs: VectorSet) -> str:
    lines = [f"# {FORMAT_NAME} {json.dumps(vs.header, sort_keys=True)}"]
    for c in vs.cases:
        lines.append(" ".join([c.opcode] + case_fields(vs, c)) + " " + _note(c))
    return "\n".join(lines) + "\n"


def _case_json(vs: VectorSet, c: Case) -> dict:
    form = vs.form
    rec: dict[str, Any] = {"id": c.id, "opcode": c.opcode, "sel": c.sel, "points": c.points, "seen": c.seen,
                           "why": c.why, "targets": c.targets}
    if c.level == "matrix":
        for key, x in c.inputs.items():
            w = _ew(_elem_bits(form, key))
            rec[key] = [[f"{int(v):0{w}x}" for v in row] for row in np.asarray(x)]
        w = _ew(_elem_bits(form, "D"))
        rec["D"] = [[f"{int(v):0{w}x}" for v in row] for row in c.expected]
        return rec
    for op in ("a", "b", "c", "e"):
        if op in c.inputs:
            w = _w(_reg_bits(form, op))
            x = np.asarray(c.inputs[op])
            rec[op] = [f"{int(v):0{w}x}" for v in x] if op == "e" else [[f"{int(v):0{w}x}" for v in lane] for lane in x]
    w = _w(_reg_bits(form, "d"))
    rec["d"] = [[f"{int(v):0{w}x}" for v in lane] for lane in c.expected]
    return rec


def dumps_jsonl(vs: VectorSet) -> str:
    lines = [json.dumps(vs.header, sort_keys=True)]
    lines += [json.dumps(_case_json(vs, c)) for c in vs.cases]
    return "\n".join(lines) + "\n"


def _npz_arrays(vs: VectorSet) -> dict[str, np.ndarray]:
    meta = {"header": vs.header,
            "cases": [{"id": c.id, "points": c.points, "seen": c.seen, "why": c.why, "targets": c.targets,
                       "sel": c.sel}
                      for c in vs.cases]}
    arr: dict[str, np.ndarray] = {"meta": np.array(json.dumps(meta))}
    if vs.level == "matrix":
        for key in ("A", "B", "C", "scale_a", "scale_b"):
            if vs.cases and key in vs.cases[0].inputs:
                arr[key] = np.stack([np.asarray(c.inputs[key]) for c in vs.cases])
        arr["D"] = np.stack([c.expected for c in vs.cases])
        return arr
    for op in ("a", "b", "c", "e"):
        if vs.cases and op in vs.cases[0].inputs:
            arr[op] = np.stack([c.inputs[op] for c in vs.cases])
    arr["d"] = np.stack([c.expected for c in vs.cases])
    arr["sel"] = np.array([-1 if c.sel is None else c.sel for c in vs.cases], np.int64)
    return arr


def write(vs: VectorSet, path: str, fmt: str | None = None) -> str:
    """Write ``vs`` to ``path`` (``-`` = stdout for jsonl/hex); returns the format used."""
    from .build import digest

    fmt = infer_format(path, fmt)
    vs.header["digest"] = digest(vs)      # the cases may have been filtered since generate()
    if fmt == "npz":
        if path == "-":
            raise VectorError("npz needs a file (-o FILE)")
        with open(path, "wb") as fh:
            np.savez_compressed(fh, **_npz_arrays(vs))
        return fmt
    text = dumps_hex(vs) if fmt == "hex" else dumps_jsonl(vs)
    if path == "-":
        import sys

        sys.stdout.write(text)
    else:
        with open(path, "w") as fh:
            fh.write(text)
    return fmt


# ------------------------------------------------------------------------------------------
# reading vectors

def _sniff(path: str) -> str:
    with open(path, "rb") as fh:
        head = fh.read(4)
    if head[:2] == b"PK":
        return "npz"
    with open(path, "r", errors="replace") as fh:
        first = fh.readline().lstrip()
    if first.startswith("{"):
        return "jsonl"
    return "hex"


def read(path: str) -> VectorSet:
    """Read a vector file of any of the three formats (detected from its content)."""
    if not os.path.isfile(path):
        raise VectorError(f"{path}: no such file")
    fmt = _sniff(path)
    try:
        if fmt == "npz":
            return _read_npz(path)
        with open(path) as fh:
            text = fh.read()
        return _read_jsonl(text, path) if fmt == "jsonl" else _read_hex(text, path)
    except VectorError:
        raise
    except (ValueError, KeyError, TypeError, IndexError, json.JSONDecodeError, zipfile.BadZipFile, OSError) as e:
        raise VectorError(f"{path}: not a ptx-formal vector file ({type(e).__name__}: {e})") from None


def _check_header(h: dict, path: str) -> dict:
    if not isinstance(h, dict) or h.get("format") != FORMAT_NAME:
        raise VectorError(f"{path}: not a ptx-formal vector file (no '{FORMAT_NAME}' header)")
    if int(h.get("version", 0)) > 1:
        raise VectorError(f"{path}: vector format version {h.get('version')} is newer than this tool reads (1)")
    return h


def _mk(header: dict, cases: list[Case]) -> VectorSet:
    from .build import digest

    vs = VectorSet(header["opcode"], header.get("arch", "?"), int(header.get("seed", 0)),
                   header.get("level", "regs"), cases, header)
    want = header.get("digest")
    if want and digest(vs) != want:
        raise VectorError(f"vector file digest mismatch: the header says {want}, the cases give {digest(vs)} "
                          f"(edited or truncated file)")
    return vs


def parse_hex_line(line: str, form, path: str, lineno: int) -> tuple[dict, dict]:
    """One hex line -> (fields {name: array | int}, note {id, points, why})."""
    body, _, note = line.partition("#")
    toks = body.split()
    where = f"{path}:{lineno}"
    if not toks:
        raise VectorError(f"{where}: empty case line")
    if "=" in toks[0]:            # a result line may leave out the opcode ("d=... # id=N")
        toks = [form.opcode] + toks
    if toks[0] != form.opcode:
        from ..catalog import parse

        try:
            other = parse(toks[0]).opcode
        except Exception:
            raise VectorError(f"{where}: {toks[0]!r} is not an opcode") from None
        if other != form.opcode:
            raise VectorError(f"{where}: case is for {other}, not {form.opcode}")
    fields: dict[str, Any] = {}
    for t in toks[1:]:
        k, eq, v = t.partition("=")
        if not eq:
            raise VectorError(f"{where}: field {t[:20]!r} is not name=value")
        if k == "sel":
            try:
                fields["sel"] = int(v)
            except ValueError:
                raise VectorError(f"{where}: sel={v!r} is not a number") from None
        elif k in ("a", "b", "c", "d"):
            op = form.operands[k]
            fields[k] = hex_to_regs(v, op.count, op.reg_bits, f"{where} field {k}")
        elif k == "e":
            fields["e"] = hex_to_regs(v, 1, 32, f"{where} field e", vector=True)
        elif k in MAT_OPS:
            key = MAT_OPS[k]
            fields[key] = hex_to_mat(v, _mat_shape(form, key), f"{where} field {k}")
    nt: dict[str, Any] = {}
    head, _, why = note.partition("why=")
    for part in head.split():
        k, eq, v = part.partition("=")
        if k == "id" and eq:
            try:
                nt["id"] = int(v)
            except ValueError:
                pass
        elif k in ("points", "seen") and eq:
            nt[k] = [p for p in v.split(",") if p]
    if why:
        nt["why"] = why.strip()
    return fields, nt


def _read_hex(text: str, path: str) -> VectorSet:
    from ..catalog import parse

    header = None
    cases = []
    for i, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s:
            continue
        if s.startswith("#"):
            if header is None and FORMAT_NAME in s:
                header = _check_header(json.loads(s.split(FORMAT_NAME, 1)[1]), path)
            continue
        if header is None:
            raise VectorError(f"{path}:{i}: case before the '# {FORMAT_NAME} {{...}}' header line")
        form = parse(header["opcode"])
        f, nt = parse_hex_line(s, form, path, i)
        level = header.get("level", "regs")
        if level == "matrix":
            inputs = {k: f[k] for k in ("A", "B", "C", "scale_a", "scale_b") if k in f}
            if "D" not in f or not all(k in f for k in ("A", "B", "C")):
                raise VectorError(f"{path}:{i}: a matrix-level case needs A, B, C and D")
            exp = f["D"]
        else:
            need = ["a", "b", "c", "d"] + (["e"] if form.is_sparse else [])
            miss = [k for k in need if k not in f]
            if miss:
                raise VectorError(f"{path}:{i}: missing field {miss[0]}=")
            inputs = {k: f[k] for k in ("a", "b", "c", "e") if k in f}
            exp = f["d"]
        cases.append(Case(nt.get("id", len(cases)), form.opcode, f.get("sel"), nt.get("points", []),
                          nt.get("why", ""), inputs, exp, [], level, nt.get("seen", [])))
    if header is None:
        raise VectorError(f"{path}: no '# {FORMAT_NAME} {{...}}' header line")
    return _mk(header, cases)


def _from_hex_json(x, dt) -> np.ndarray:
    if isinstance(x, list) and x and isinstance(x[0], list):
        return np.array([[int(v, 16) for v in row] for row in x], dtype=dt)
    return np.array([int(v, 16) for v in x], dtype=dt)


def _read_jsonl(text: str, path: str) -> VectorSet:
    from ..catalog import parse

    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        raise VectorError(f"{path}: empty file")
    header = _check_header(json.loads(lines[0]), path)
    form = parse(header["opcode"])
    level = header.get("level", "regs")
    cases = []
    for n, ln in enumerate(lines[1:], 2):
        r = json.loads(ln)
        if level == "matrix":
            inputs = {k: _from_hex_json(r[k], np.uint64) for k in ("A", "B", "C", "scale_a", "scale_b") if k in r}
            exp = _from_hex_json(r["D"], np.uint64)
        else:
            inputs = {}
            for op in ("a", "b", "c", "e"):
                if op in r:
                    dt = np.uint64 if op != "e" and form.operands[op].reg_bits == 64 else np.uint32
                    inputs[op] = _from_hex_json(r[op], dt)
            dt = np.uint64 if form.operands["d"].reg_bits == 64 else np.uint32
            exp = _from_hex_json(r["d"], dt)
            for op, x in list(inputs.items()) + [("d", exp)]:
                want = (32,) if op == "e" else (32, form.operands[op].count)
                if x.shape != want:
                    raise VectorError(f"{path}:{n}: operand {op} has shape {list(x.shape)}, expected {list(want)}")
        cases.append(Case(int(r.get("id", len(cases))), form.opcode, r.get("sel"), list(r.get("points", [])),
                          r.get("why", ""), inputs, exp, list(r.get("targets", [])), level, list(r.get("seen", []))))
    return _mk(header, cases)


def _read_npz(path: str) -> VectorSet:
    from ..catalog import parse

    with np.load(path, allow_pickle=False) as z:
        if "meta" not in z:
            raise VectorError(f"{path}: npz without 'meta' (not a ptx-formal vector file)")
        meta = json.loads(str(z["meta"]))
        header = _check_header(meta.get("header"), path)
        form = parse(header["opcode"])
        level = header.get("level", "regs")
        notes = meta.get("cases", [])
        arrays = {k: z[k] for k in z.files if k != "meta"}
    cases = []
    T = len(notes)
    for i in range(T):
        nt = notes[i]
        if level == "matrix":
            inputs = {k: arrays[k][i] for k in ("A", "B", "C", "scale_a", "scale_b") if k in arrays}
            exp = arrays["D"][i]
        else:
            inputs = {k: arrays[k][i] for k in ("a", "b", "c", "e") if k in arrays}
            exp = arrays["d"][i]
        sel = nt.get("sel")
        cases.append(Case(int(nt.get("id", i)), form.opcode, sel, list(nt.get("points", [])), nt.get("why", ""),
                          inputs, exp, list(nt.get("targets", [])), level, list(nt.get("seen", []))))
    return _mk(header, cases)


# ------------------------------------------------------------------------------------------
# reading results

def read_results(path: str, vs: VectorSet) -> list[np.ndarray]:
    """A device's outputs for every case of ``vs``, in vector order (see module docstring)."""
    if not os.path.isfile(path):
        raise VectorError(f"{path}: no such file")
    try:
        fmt = _sniff(path)
        if fmt == "npz":
            got = _results_npz(path, vs)
        else:
            with open(path) as fh:
                text = fh.read()
            got = _results_jsonl(text, path, vs) if fmt == "jsonl" else _results_hex(text, path, vs)
    except VectorError:
        raise
    except (ValueError, KeyError, TypeError, IndexError, json.JSONDecodeError, zipfile.BadZipFile, OSError) as e:
        raise VectorError(f"{path}: unreadable result file ({type(e).__name__}: {e})") from None
    return got


def _want_shape(vs: VectorSet) -> tuple[int, ...]:
    form = vs.form
    if vs.level == "matrix":
        M, N, _ = form.mnk
        return (M, N)
    return (32, form.operands["d"].count)


def _order(path: str, vs: VectorSet, items: list[tuple[int | None, np.ndarray]]) -> list[np.ndarray]:
    ids = [c.id for c in vs.cases]
    shape = _want_shape(vs)
    for k, (_, x) in enumerate(items):
        if tuple(x.shape) != shape:
            raise VectorError(f"{path}: result {k} has shape {list(x.shape)}, expected {list(shape)}")
    if items and all(i is not None for i, _ in items):
        by = {i: x for i, x in items}
        miss = [i for i in ids if i not in by]
        if miss:
            raise VectorError(f"{path}: no result for case id {miss[0]} ({len(miss)} missing of {len(ids)})")
        return [by[i] for i in ids]
    if len(items) != len(ids):
        raise VectorError(f"{path}: {len(items)} results for {len(ids)} cases")
    return [x for _, x in items]


def _results_hex(text: str, path: str, vs: VectorSet) -> list[np.ndarray]:
    form = vs.form
    items = []
    key = "D" if vs.level == "matrix" else "d"
    for i, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        f, nt = parse_hex_line(s, form, path, i)
        if key not in f:
            raise VectorError(f"{path}:{i}: no {key}= field")
        items.append((nt.get("id"), f[key]))
    return _order(path, vs, items)


def _results_jsonl(text: str, path: str, vs: VectorSet) -> list[np.ndarray]:
    items = []
    key = "D" if vs.level == "matrix" else "d"
    dt = np.uint64 if vs.level == "matrix" or vs.form.operands["d"].reg_bits == 64 else np.uint32
    for ln in text.splitlines():
        if not ln.strip():
            continue
        r = json.loads(ln)
        if not isinstance(r, dict):
            raise VectorError(f"{path}: each line must be a JSON object")
        if r.get("format") == FORMAT_NAME:
            continue
        if key not in r:
            raise VectorError(f"{path}: a result object has no {key!r}")
        items.append((r.get("id"), _from_hex_json(r[key], dt)))
    return _order(path, vs, items)


def _results_npz(path: str, vs: VectorSet) -> list[np.ndarray]:
    key = "D" if vs.level == "matrix" else "d"
    with np.load(path, allow_pickle=False) as z:
        if key not in z:
            raise VectorError(f"{path}: npz has no array {key!r}")
        arr = np.asarray(z[key])
        ids = z["id"].tolist() if "id" in z.files else None
    if arr.ndim != 1 + len(_want_shape(vs)):
        raise VectorError(f"{path}: {key} has shape {list(arr.shape)}, expected [T, {', '.join(map(str, _want_shape(vs)))}]")
    items = [((ids[i] if ids is not None else None), arr[i]) for i in range(arr.shape[0])]
    return _order(path, vs, items)


def write_results(path: str, vs: VectorSet, got: list[np.ndarray]) -> None:
    """Write a result file (hex: ``opcode [sel=S] d=... # id=N``) for outputs in vector order."""
    form = vs.form
    lines = []
    for c, g in zip(vs.cases, got):
        sel = f" sel={c.sel}" if c.sel is not None else ""
        if vs.level == "matrix":
            body = f"D={mat_to_hex(g, _elem_bits(form, 'D'))}"
        else:
            body = f"d={regs_to_hex(g, form.operands['d'].reg_bits)}"
        lines.append(f"{c.opcode}{sel} {body} # id={c.id}")
    with open(path, "w") as fh:
        fh.write("\n".join(lines) + "\n")
