"""Recipes: a source layout, movement steps, a target layout -- as text or JSON.

Text format (one directive per line, ``#`` starts a comment; see recipes/README.md)::

    recipe  ldmatrix_x4_a_m16n8k16
    about   ldmatrix.x4 from a row-major 16x16 f16 tile gives the A fragment of mma.m16n8k16
    source  tile 16x16 b16 offset "row * 16 + col"
    value   p = 2 * ((lane % 16) * 16 + (lane // 16) * 8)
    step    ldmatrix.sync.aligned.m8n8.x4.shared.b16 {a0, a1, a2, a3}, [p];
    target  fragment mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 a {a0, a1, a2, a3}
    expect  proved

Endpoints (``source`` may repeat; ``target`` once):

    tile RxC bW offset "F(row, col)" [base BYTES]          shared-memory tile, element offsets
    fragment OPCODE OPERAND {regs} [at row=R col=C] [k=v ..] the spec fragment (formal.layout)
    registers {regs} RxC bW row "F" col "F" [let "n = F; .."] [epr N] [value BITS] [shift BITS]
                                                           a user layout over lane, reg, elem, i
    triton FILE.json {regs} RxC bW                         Triton linear layout (register, lane)
    cute "SHAPE:STRIDE" RxC bW {regs} [nk]                 CuTe (thread, value) -> index layout, column-major
                                                           over RxC (nk: over CxR, CuTe's N x K for B)

``target`` may repeat (register layouts over disjoint registers: e.g. the B fragments of two
n-tiles).  Other directives: ``value NAME = F(lane)`` (per-lane integers: addresses, lanes, selectors),
``reg .bW a, b`` (register widths), ``step PTX`` (in order), ``expect proved`` or ``expect
refuted [lane=L register=R element=E]`` (checked by ``ptx-formal transform`` and the tests),
``hardware no`` (the probe skips it), ``wmma-map OPCODE row "F" col "F"`` or ``wmma-map OPCODE
observed MAP_ID`` (the fragment map a wmma.load/.store step assumes -- PTX leaves it
unspecified; MAP_ID names an observation of ``formal.wmma.maps``).

JSON: ``{"recipe", "about", "sources": [...], "values": {}, "regs": {}, "steps": [],
"target": {...}, "expect": {}}`` with endpoints as objects: ``{"kind": "tile", "rows": 16,
"cols": 16, "bits": 16, "offset": "row * 16 + col"}``, ``{"kind": "fragment", "opcode":
..., "operand": "a", "regs": [..], "row_offset": 0, "col_offset": 0}``, ``{"kind":
"registers", "regs": [..], "rows", "cols", "bits", "row", "col", "let": {}}``, ``{"kind":
"triton", "bases": {...} | "file": ..., "regs", "rows", "cols", "bits"}``, ``{"kind": "cute",
"layout": "...", "rows", "cols", "regs", "bits"}``.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from .. import algebra as alg
from ..expr import Formula, FormulaError
from .engine import Program, TransformResult, prove_program
from .spaces import MemLayout, RegLayout, TransformError, fragment_endpoint
from .steps import make_step


@dataclass
class Recipe:
    name: str
    sources: list[dict]
    steps: list[str]
    target: dict
    values: dict[str, str] = field(default_factory=dict)
    regs: dict[str, int] = field(default_factory=dict)
    about: str = ""
    expect: dict = field(default_factory=dict)
    hardware: bool = True
    wmma_maps: dict = field(default_factory=dict)
    path: str = ""
    base_dir: str = "."

    def program(self) -> Program:
        values = {}
        for k, v in self.values.items():
            try:
                f = Formula(v)
            except FormulaError as e:
                raise TransformError(f"value {k}: {e}") from None
            if f.names - {"lane"}:
                raise TransformError(f"value {k} = {v}: may use only `lane` (uses {sorted(f.names - {'lane'})})")
            values[k] = f
        sources = [endpoint(s, self.base_dir) for s in self.sources]
        tl = self.target if isinstance(self.target, list) else [self.target]
        target = [endpoint(t, self.base_dir) for t in tl]
        target = target[0] if len(target) == 1 else target
        steps = [make_step(s) for s in self.steps]
        return Program(sources, steps, target, values, dict(self.regs), wmma_map_objects(self.wmma_maps))

    def prove(self, timeout_ms: int | None = None) -> TransformResult:
        prog = self.program()
        kw = {} if timeout_ms is None else {"timeout_ms": timeout_ms}
        return prove_program(prog, claim=self.about or None, **kw)

    def to_json(self) -> dict:
        d = {"recipe": self.name, "about": self.about, "sources": self.sources, "values": self.values,
             "regs": self.regs, "steps": self.steps, "target": self.target, "expect": self.expect}
        if not self.hardware:
            d["hardware"] = False
        if self.wmma_maps:
            d["wmma_maps"] = self.wmma_maps
        return d

    def expectation_met(self, res: TransformResult) -> tuple[bool, str]:
        """Whether a result matches this recipe's ``expect`` line."""
        want = self.expect.get("status")
        if not want:
            return True, "no expectation"
        if res.status != want:
            return False, f"expected {want}, got {res.status}"
        for k, v in self.expect.items():
            if k == "status":
                continue
            got = (res.witness or {}).get(k)
            if str(got) != str(v):
                return False, f"expected witness {k}={v}, got {k}={got}"
        return True, "as expected"


# ---------------------------------------------------------------------------------------
# Endpoints from dicts

def _dims(s: str, what: str) -> tuple[int, int]:
    m = re.fullmatch(r"(\d+)x(\d+)", str(s))
    if not m:
        raise TransformError(f"{what}: expected ROWSxCOLS, got {s!r}")
    return int(m.group(1)), int(m.group(2))


def _bits(s) -> int:
    m = re.fullmatch(r"[bfu]?(\d+)", str(s))
    if not m:
        raise TransformError(f"expected an element size like b16, got {s!r}")
    return int(m.group(1))


MAX_ELEMENTS, MAX_BITS = 1 << 20, 64      # bounds checked before anything is allocated


def _check_size(kind: str, rows: int, cols: int, bits: int | None = None) -> None:
    if not (0 < rows and 0 < cols and rows * cols <= MAX_ELEMENTS):
        raise TransformError(f"{kind} endpoint: {rows}x{cols} is not a size this tool handles "
                             f"(positive, at most {MAX_ELEMENTS} elements)")
    if bits is not None and not 0 < bits <= MAX_BITS:
        raise TransformError(f"{kind} endpoint: element size {bits} bits is not in 1..{MAX_BITS}")


def endpoint(d: dict, base_dir: str = "."):
    if not isinstance(d, dict):
        raise TransformError(f"an endpoint must be an object, got {type(d).__name__}")
    kind = d.get("kind")
    label = d.get("label", "")
    try:
        if kind == "tile":
            rows, cols, bits = int(d["rows"]), int(d["cols"]), int(d["bits"])
            _check_size(kind, rows, cols, bits)
            let = {"rows": str(rows), "cols": str(cols), **dict(d.get("let") or {})}
            m = alg.from_formulas([("row", rows), ("col", cols)], [("offset", 1 << 30)],
                                  {"offset": d["offset"]}, let=let,
                                  name=label or f"tile {rows}x{cols} @ {d['offset']}")
            offs = m.enumerate()["offset"]
            if offs.min() < 0:
                raise TransformError(f"tile offset {d['offset']!r} is negative somewhere")
            # the offset box is exactly what the tile spans (keeps the certified inverse small)
            m = alg.from_formulas([("row", rows), ("col", cols)], [("offset", int(offs.max()) + 1)],
                                  {"offset": d["offset"]}, let=let, name=m.name)
            return MemLayout(m, bits, int(d.get("base", 0)), label=label or f"shared {rows}x{cols} b{bits} tile "
                             f"(offset {d['offset']})")
        if kind == "fragment":
            params = {k: int(v) for k, v in d.get("params", {}).items()}
            ep = fragment_endpoint(d["opcode"], d["operand"], d.get("regs"), int(d.get("row_offset", 0)),
                                   int(d.get("col_offset", 0)), **params)
            if label:
                ep.label = label
            return ep
        if kind == "registers":
            regs = list(d["regs"])
            bits = int(d["bits"])
            epr = int(d.get("epr", 32 // bits if bits <= 32 else 1))
            rows, cols = int(d["rows"]), int(d["cols"])
            _check_size(kind, rows, cols, bits)
            let = dict(d.get("let", {}))
            let = {"i": f"reg * {epr} + elem", **let}
            m = alg.from_formulas([("lane", 32), ("reg", len(regs)), ("elem", epr)], [("row", rows), ("col", cols)],
                                  {"row": d["row"], "col": d["col"]}, let=let,
                                  where=d.get("where"), name=label or "user layout")
            return RegLayout(regs, m, bits, int(d.get("reg_bits", 32)), int(d.get("row_offset", 0)),
                             int(d.get("col_offset", 0)), label=label or f"registers {{{', '.join(regs)}}} "
                             f"(row {d['row']}, col {d['col']})",
                             value_bits=int(d["value_bits"]) if d.get("value_bits") else None,
                             shift=int(d.get("shift", 0)))
        if kind == "triton":
            from .triton import from_triton_json, to_reg_layout
            if "bases" in d:
                bases = d["bases"]
            else:
                p = Path(d["file"])
                if not p.is_absolute():
                    p = Path(base_dir) / p
                bases = json.loads(p.read_text())
            lin = from_triton_json(bases, rows=int(d["rows"]), cols=int(d["cols"]))
            return to_reg_layout(lin, list(d["regs"]), int(d["bits"]), label=label or "Triton linear layout")
        if kind == "cute":
            from .cute import cute_endpoint
            return cute_endpoint(d["layout"], int(d["rows"]), int(d["cols"]), list(d["regs"]), int(d["bits"]),
                                 label=label, transpose=bool(d.get("nk", False)))
    except TransformError:
        raise
    except KeyError as e:
        raise TransformError(f"{kind} endpoint is missing field {e}") from None
    except (FormulaError, alg.AlgebraError) as e:
        raise TransformError(f"{kind} endpoint: {e}") from None
    except (ValueError, TypeError, OverflowError) as e:     # e.g. "rows": "x" in a JSON recipe
        raise TransformError(f"{kind} endpoint: {e}") from None
    raise TransformError(f"unknown endpoint kind {kind!r} (tile, fragment, registers, triton, cute)")


def wmma_map_objects(maps: dict) -> dict:
    """wmma opcode -> algebra map (lane, reg, elem) -> (row, col) from the recipe's formulas."""
    from .. import catalog as cat

    out = {}
    for opcode, d in maps.items():
        try:
            form = cat.parse(opcode)
        except cat.MalformedOpcode as e:
            raise TransformError(f"wmma-map {opcode}: {e}") from None
        if form.family not in ("wmma.load", "wmma.store"):
            raise TransformError(f"wmma-map {opcode}: not a wmma.load / wmma.store form")
        op = form.operands["r"]
        m, n, k = form.mnk
        rows, cols = {"a": (m, k), "b": (k, n), "c": (m, n), "d": (m, n)}[form.matrix]
        epr = max(1, op.elems_per_reg)
        if "observed" in d:
            out[form.opcode] = _observed_wmma_map(d["observed"], form, rows, cols, op.count, epr)
            continue
        let = {"i": f"reg * {epr} + elem", **dict(d.get("let", {}))}
        try:
            out[form.opcode] = alg.from_formulas([("lane", 32), ("reg", op.count), ("elem", epr)],
                                                 [("row", rows), ("col", cols)], {"row": d["row"], "col": d["col"]},
                                                 let=let, name=f"assumed fragment map of {form.opcode}")
        except (FormulaError, alg.AlgebraError, KeyError) as e:
            raise TransformError(f"wmma-map {opcode}: {e}") from None
    return out


def _observed_wmma_map(map_id: str, form, rows: int, cols: int, nregs: int, epr: int):
    """An observed wmma fragment map (formal.wmma.maps, by id) as an algebra table map."""
    import numpy as np

    from ..wmma import maps as wm

    found = [m for m in wm.all_maps() if m.id == map_id]
    if not found:
        raise TransformError(f"wmma-map: no observed map {map_id!r} (formal.wmma.maps.all_maps())")
    fm = found[0]
    if (fm.rows, fm.cols) != (rows, cols) or fm.elements != nregs * epr:
        raise TransformError(f"wmma-map {map_id}: a {fm.rows}x{fm.cols} map with {fm.elements} elements per lane "
                             f"does not fit {form.opcode} ({rows}x{cols}, {nregs * epr} elements)")
    single = fm.single().reshape(32, nregs, epr)
    if (single == -2).any():
        raise TransformError(f"wmma-map {map_id}: a slot holds several cells (a store map); not a gather")
    held = single >= 0
    return alg.TableMap([("lane", 32), ("reg", nregs), ("elem", epr)], [("row", rows), ("col", cols)],
                        {"row": np.where(held, single // cols, 0), "col": np.where(held, single % cols, 0)},
                        defined=None if held.all() else held,
                        name=f"{fm.id} ({fm.evidence}, {', '.join(fm.archs)})")


# ---------------------------------------------------------------------------------------
# Text parsing

_BRACES = re.compile(r"\{([^}]*)\}")


def _regs_of(text: str) -> tuple[list[str] | None, str]:
    m = _BRACES.search(text)
    if not m:
        return None, text
    regs = [x.strip().lstrip("%") for x in m.group(1).split(",") if x.strip()]
    return regs, text[:m.start()] + " " + text[m.end():]


def _kv(tokens: list[str]) -> tuple[list[str], dict[str, str]]:
    pos, kv = [], {}
    for t in tokens:
        if re.fullmatch(r"[A-Za-z_]\w*=[^=].*", t):
            k, v = t.split("=", 1)
            kv[k.strip()] = v.strip()
        else:
            pos.append(t)
    return pos, kv


def parse_endpoint(text: str, lineno: int) -> dict:
    regs, rest = _regs_of(text)
    try:
        toks = shlex.split(rest)
    except ValueError as e:
        raise TransformError(f"line {lineno}: {e}") from None
    if not toks:
        raise TransformError(f"line {lineno}: missing endpoint")
    kind, toks = toks[0], toks[1:]
    where = f"line {lineno} ({kind})"
    if kind == "tile":
        # tile RxC bW offset "F" [base N]
        pos, kv = _kv(toks)
        if len(pos) < 4 or pos[2] != "offset":
            raise TransformError(f"{where}: expected `tile RxC bW offset \"F(row, col)\" [base N]`")
        rows, cols = _dims(pos[0], where)
        d = {"kind": "tile", "rows": rows, "cols": cols, "bits": _bits(pos[1]), "offset": pos[3]}
        rest_pos = pos[4:]
        if rest_pos[:1] == ["base"] and len(rest_pos) >= 2:
            d["base"] = int(rest_pos[1], 0)
        elif rest_pos:
            raise TransformError(f"{where}: unexpected {' '.join(rest_pos)!r}")
        if "base" in kv:
            d["base"] = int(kv["base"], 0)
        return d
    if kind == "fragment":
        pos, kv = _kv(toks)
        if len(pos) < 2:
            raise TransformError(f"{where}: expected `fragment OPCODE OPERAND {{regs}} [at row=R col=C]`")
        d = {"kind": "fragment", "opcode": pos[0], "operand": pos[1]}
        if regs is not None:
            d["regs"] = regs
        extra = [p for p in pos[2:] if p != "at"]
        if extra:
            raise TransformError(f"{where}: unexpected {' '.join(extra)!r}")
        if "row" in kv:
            d["row_offset"] = int(kv.pop("row"))
        if "col" in kv:
            d["col_offset"] = int(kv.pop("col"))
        if kv:
            d["params"] = {k: int(v) for k, v in kv.items()}
        return d
    if kind == "registers":
        pos, kv = _kv(toks)
        if regs is None:
            raise TransformError(f"{where}: needs a {{register list}}")
        d = {"kind": "registers", "regs": regs}
        i = 0
        while i < len(pos):
            t = pos[i]
            if re.fullmatch(r"\d+x\d+", t):
                d["rows"], d["cols"] = _dims(t, where)
            elif re.fullmatch(r"[bfu]\d+", t):
                d["bits"] = _bits(t)
            elif t in ("row", "col", "let", "where", "epr", "value", "shift") and i + 1 < len(pos):
                d[{"value": "value_bits"}.get(t, t)] = pos[i + 1]
                i += 1
            else:
                raise TransformError(f"{where}: unexpected {t!r}")
            i += 1
        if "let" in d:
            d["let"] = _lets(d["let"], where)
        for k in ("rows", "bits", "row", "col"):
            if k not in d:
                raise TransformError(f"{where}: needs {'RxC' if k == 'rows' else k}")
        return d
    if kind in ("triton", "cute"):
        pos, kv = _kv(toks)
        if regs is None or len(pos) < 3:
            raise TransformError(f"{where}: expected `{kind} {'FILE' if kind == 'triton' else 'LAYOUT'} RxC bW {{regs}}`")
        rows, cols = _dims(pos[1], where)
        d = {"kind": kind, "rows": rows, "cols": cols, "bits": _bits(pos[2]), "regs": regs}
        d["file" if kind == "triton" else "layout"] = pos[0]
        extra = pos[3:]
        if kind == "cute" and extra == ["nk"]:
            d["nk"] = True
        elif extra:
            raise TransformError(f"{where}: unexpected {' '.join(extra)!r}")
        return d
    raise TransformError(f"{where}: unknown endpoint kind (tile, fragment, registers, triton, cute)")


def _lets(s: str, where: str) -> dict[str, str]:
    out = {}
    for part in s.split(";"):
        if not part.strip():
            continue
        if "=" not in part:
            raise TransformError(f"{where}: let binding {part!r} needs `name = formula`")
        k, v = part.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def parse_text(text: str, name: str = "recipe", path: str = "", base_dir: str = ".") -> Recipe:
    sources, steps, values, regs = [], [], {}, {}
    target = None
    about, expect, hardware = [], {}, True
    wmaps: dict = {}
    rname = name
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        kw, _, rest = line.partition(" ")
        rest = rest.strip()
        if kw == "recipe":
            rname = rest
        elif kw == "about":
            about.append(rest)
        elif kw == "source":
            sources.append(parse_endpoint(rest, lineno))
        elif kw == "target":
            t = parse_endpoint(rest, lineno)
            target = t if target is None else (target if isinstance(target, list) else [target]) + [t]
        elif kw == "value":
            m = re.fullmatch(r"%?([A-Za-z_]\w*)\s*=\s*(.+)", rest)
            if not m:
                raise TransformError(f"line {lineno}: expected `value NAME = formula`")
            values[m.group(1)] = m.group(2).strip()
        elif kw == "reg":
            m = re.fullmatch(r"\.?[bfu](\d+)\s+(.+)", rest)
            if not m:
                raise TransformError(f"line {lineno}: expected `reg .bW a, b, ...`")
            for r in m.group(2).split(","):
                if r.strip():
                    regs[r.strip().lstrip("%")] = int(m.group(1))
        elif kw == "step":
            steps.append(rest)
        elif kw == "expect":
            toks = rest.split()
            if not toks or toks[0] not in ("proved", "refuted", "unknown"):
                raise TransformError(f"line {lineno}: expected `expect proved|refuted [key=value ...]`")
            expect = {"status": toks[0]}
            for t in toks[1:]:
                if "=" not in t:
                    raise TransformError(f"line {lineno}: witness expectation {t!r} needs key=value")
                k, v = t.split("=", 1)
                expect[k] = v
        elif kw == "wmma-map":
            toks = shlex.split(rest)
            if len(toks) == 3 and toks[1] == "observed":
                wmaps[toks[0]] = {"observed": toks[2]}
                continue
            if len(toks) < 5 or toks[1] != "row" or toks[3] != "col":
                raise TransformError(f"line {lineno}: expected `wmma-map OPCODE row \"F\" col \"F\" [let \"..\"]`")
            d = {"row": toks[2], "col": toks[4]}
            if len(toks) >= 7 and toks[5] == "let":
                d["let"] = _lets(toks[6], f"line {lineno}")
            wmaps[toks[0]] = d
        elif kw == "hardware":
            hardware = rest.lower() not in ("no", "false", "0")
        else:
            raise TransformError(f"line {lineno}: unknown directive {kw!r} "
                                 "(recipe, about, source, target, value, reg, step, expect, hardware)")
    if not sources:
        raise TransformError("recipe has no `source`")
    if target is None:
        raise TransformError("recipe has no `target`")
    return Recipe(rname, sources, steps, target, values, regs, " ".join(about), expect, hardware, wmaps, path,
                  base_dir)


def parse_json(obj: dict, name: str = "recipe", path: str = "", base_dir: str = ".") -> Recipe:
    if not isinstance(obj, dict):
        raise TransformError("a JSON recipe is an object")
    try:
        srcs = obj.get("sources") or ([obj["source"]] if "source" in obj else [])
        exp = obj.get("expect", {})
        if isinstance(exp, str):
            exp = {"status": exp}
        tgt = obj["targets"] if "targets" in obj else obj["target"]
        return Recipe(obj.get("recipe", name), list(srcs), list(obj.get("steps", [])), tgt,
                      dict(obj.get("values", {})), {k: int(v) for k, v in obj.get("regs", {}).items()},
                      obj.get("about", ""), dict(exp), bool(obj.get("hardware", True)),
                      dict(obj.get("wmma_maps", {})), path, base_dir)
    except KeyError as e:
        raise TransformError(f"JSON recipe is missing {e}") from None


def load(path: str | Path) -> Recipe:
    p = Path(path)
    if not p.exists():
        raise TransformError(f"no such recipe file: {p}")
    if p.is_dir():
        raise TransformError(f"{p} is a directory (give a recipe file)")
    try:
        text = p.read_bytes().decode("utf-8").replace("\r\n", "\n")
    except UnicodeDecodeError as e:
        raise TransformError(f"{p}: not UTF-8 text (byte at offset {e.start})") from None
    except OSError as e:
        raise TransformError(f"cannot read {p}: {e.strerror or e}") from None
    if p.suffix == ".json" or text.lstrip().startswith("{"):
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            raise TransformError(f"{p}: invalid JSON: {e.msg} at line {e.lineno}") from None
        except RecursionError:
            raise TransformError(f"{p}: JSON nested too deeply") from None
        if not isinstance(obj, dict):
            raise TransformError(f"{p}: a JSON recipe is an object, got {type(obj).__name__}")
        return parse_json(obj, p.stem, str(p), str(p.parent))
    return parse_text(text, p.stem, str(p), str(p.parent))


def library_dir() -> Path:
    """The recipe library: <repo>/recipes in a checkout, package data ``formal.recipes`` in a wheel."""
    from ..specdata import recipes_dir

    return recipes_dir()


def library() -> list[Recipe]:
    d = library_dir()
    files = sorted(list(d.glob("*.recipe")) + list(d.glob("*.json")))
    return [load(f) for f in files]
