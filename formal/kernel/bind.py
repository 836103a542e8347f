"""A spec bound to a module's entry: is the launch the spec describes one the module accepts, and
the bytes of the parameter block.

Everything a spec says about the module is checked against it here, before any instruction runs
(each a :class:`SpecError`, exit 2, naming what is wrong and listing what exists): the entry, every
parameter a buffer or ``[params]`` names, a pointer inside a by-value struct (its offset must lie
inside the struct), a ``[params]`` value for a parameter that is a buffer's pointer, values that do
not fit their parameter, and the launch against ``.reqntid`` / ``.maxntid`` / ``.reqnctapercluster``
(clusters: formal.kernel.cluster).
"""

from __future__ import annotations

import difflib
import struct

from .parse import Function, Module, Unsupported, Var
from .spec import FIELD_TYPES, KernelSpec, SpecError

_POINTER_BYTES = 8


def entry(mod: Module, spec: KernelSpec) -> Function:
    """The entry the spec launches, its launch checked against its directives, and the module's
    variables checked for what the interpreter cannot allocate or initialise (before any memory)."""
    ents = [f.name for f in mod.functions.values() if f.entry]
    if spec.entry is None:
        if len(ents) != 1:
            raise SpecError(f"{spec.source}: the module has {len(ents)} entries ({_list(ents)}); name one with "
                            "entry = \"...\"")
        f = mod.functions[ents[0]]
    else:
        f = mod.functions.get(spec.entry)
        if f is None or not f.entry:
            close = difflib.get_close_matches(spec.entry, ents, n=1)
            raise SpecError(f"{spec.source}: entry {spec.entry!r} is no .entry of the module"
                            + (f" (did you mean {close[0]!r}?)" if close else "") + f"; entries: {_list(ents)}")
    check_launch(f, spec)
    check_module(mod, f)
    return f


def _list(names, n: int = 12) -> str:
    names = list(names)
    if not names:
        return "none"
    s = ", ".join(names[:n])
    return s + (f", ... ({len(names)} in all)" if len(names) > n else "")


def _describe_params(fn: Function) -> str:
    return _list(f"{p.name} ({_kind(p)})" for p in fn.params)


def _kind(p: Var) -> str:
    if p.size > 8 or (p.elem_bits == 8 and p.size > 1):
        return f"{p.size}-byte struct"
    return f"{p.elem_bits}-bit"


def _param(fn: Function, name: str, spec: KernelSpec, what: str) -> tuple[int, Var]:
    if name.startswith("#"):
        i = int(name[1:])
        if i >= len(fn.params):
            raise SpecError(f"{spec.source}: {what} names parameter {name}, but {fn.name} has {len(fn.params)} "
                            f"parameters: {_describe_params(fn)}")
        return i, fn.params[i]
    for i, p in enumerate(fn.params):
        if p.name == name:
            return i, p
    close = difflib.get_close_matches(name, [p.name for p in fn.params], n=1)
    raise SpecError(f"{spec.source}: {what} names the parameter {name!r}, which {fn.name} does not have"
                    + (f" (did you mean {close[0]!r}?)" if close else "") + f"; parameters: {_describe_params(fn)}")


def check_launch(fn: Function, spec: KernelSpec) -> None:
    """The spec's block and cluster against the entry's .reqntid / .maxntid / .reqnctapercluster."""
    d = fn.directives
    blk = spec.block
    if "reqntid" in d:
        want = (list(d["reqntid"]) + [1, 1, 1])[:3]
        if tuple(want) != tuple(blk):
            raise SpecError(f"{spec.source}: block = {list(blk)}, but {fn.name} declares .reqntid "
                            f"{', '.join(map(str, d['reqntid']))} (line {fn.line}): the launch must be {want}")
    if "maxntid" in d:
        want = (list(d["maxntid"]) + [1, 1, 1])[:3]
        lim = want[0] * want[1] * want[2]
        if blk[0] * blk[1] * blk[2] > lim:
            raise SpecError(f"{spec.source}: block = {list(blk)} has {blk[0] * blk[1] * blk[2]} threads, but {fn.name} "
                            f"declares .maxntid {', '.join(map(str, d['maxntid']))} (line {fn.line}): at most {lim}")
    mx = d.get("maxclusterrank")
    n = spec.cluster[0] * spec.cluster[1] * spec.cluster[2]
    if mx and n > mx[0]:
        raise SpecError(f"{spec.source}: cluster = {list(spec.cluster)} has {n} CTAs, but {fn.name} declares "
                        f".maxclusterrank {mx[0]} (line {fn.line}): at most {mx[0]}")
    cl = d.get("reqnctapercluster")
    if cl:
        want = (list(cl) + [1, 1, 1])[:3]
        if tuple(want) != tuple(spec.cluster):
            raise SpecError(f"{spec.source}: cluster = {list(spec.cluster)}, but {fn.name} declares .reqnctapercluster "
                            f"{', '.join(map(str, cl))} (line {fn.line}): the launch must be {want}")


def check_module(mod: Module, fn: Function) -> None:
    """Variables the interpreter would have to allocate or initialise but does not model."""
    used = {o.name for ins in fn.instrs for o in _syms(ins.ops)}
    for v in list(mod.vars) + fn.vars:
        if v.init_unmodelled and (v.name in used or v.space in ("global", "const") and v.size > (1 << 28)):
            raise Unsupported(v.line, f"{v.name}", v.init_unmodelled)


def _syms(ops):
    from .parse import Addr, Sym, Vec
    for o in ops:
        if isinstance(o, Sym):
            yield o
        elif isinstance(o, Addr) and isinstance(o.base, Sym):
            yield o.base
        elif isinstance(o, Vec):
            yield from _syms(o.items)


TENSORMAP_BYTES = 128


def param_block(mod: Module, fn: Function, spec: KernelSpec, pointers: dict) -> tuple[dict, bytes]:
    """(offset of each parameter in the block, the block's bytes) for a launch of ``fn``;
    ``pointers`` maps each (non-view) buffer name to its global address."""
    offs, off = {}, 0
    for p in fn.params:
        a = max(p.align, 1)
        off = (off + a - 1) // a * a
        offs[p.name] = off
        off += max(p.size, 1)
    blob = bytearray(off)
    given = {}                                  # param index -> list of (start, end, what)

    def put(i, p, start, data: bytes, what):
        if start < 0 or start + len(data) > max(p.size, 1):
            raise SpecError(f"{spec.source}: {what} writes bytes {start}..{start + len(data) - 1} of {p.name}, "
                            f"which has {p.size} bytes")
        for (s, e, w) in given.get(i, []):
            if start < e and s < start + len(data):
                raise SpecError(f"{spec.source}: {what} and {w} both set bytes of {p.name} "
                                f"({max(s, start)}..{min(e, start + len(data)) - 1})")
        given.setdefault(i, []).append((start, start + len(data), what))
        o = offs[p.name] + start
        blob[o:o + len(data)] = data

    for t in spec.tensormaps:
        i, p = _param(fn, t.param, spec, f"tensormap of {t.buffer}")
        if t.offset + TENSORMAP_BYTES > p.size:
            raise SpecError(f"{spec.source}: the tensor map of {t.buffer} at byte {t.offset} of {p.name} needs "
                            f"{TENSORMAP_BYTES} bytes; {p.name} has {p.size}")
        # the driver's encoding is opaque: the interpreter's own (formal.kernel.tma.FIELDS), which
        # tensormap.replace edits and the TMA decodes when a kernel copies the map
        from .tma import encode_map
        put(i, p, t.offset, encode_map(t, pointers[t.buffer]), f"the tensor map of {t.buffer}")
    for b in spec.buffers:
        if not b.param:                      # reached through a tensor map only
            continue
        i, p = _param(fn, b.param, spec, f"buffer {b.name}")
        if p.size < _POINTER_BYTES:
            raise SpecError(f"{spec.source}: buffer {b.name}: parameter {p.name} has {p.size} bytes, too small "
                            "for a 64-bit pointer")
        if p.size == _POINTER_BYTES and b.offset:
            raise SpecError(f"{spec.source}: buffer {b.name}: offset = {b.offset}, but {p.name} is a scalar "
                            "8-byte parameter (an offset is for a pointer inside a by-value struct)")
        if b.offset % _POINTER_BYTES:
            raise SpecError(f"{spec.source}: buffer {b.name}: offset = {b.offset} is not 8-byte aligned "
                            "(a pointer field of a struct is)")
        put(i, p, b.offset, pointers[b.name].to_bytes(8, "little"), f"the pointer of buffer {b.name}")
    for k, v in spec.params.items():
        i, p = _param(fn, k, spec, "[params]")
        for (s, e, w) in given.get(i, []):
            if w.startswith("the pointer of buffer") and not isinstance(v, dict):
                raise SpecError(f"{spec.source}: [params] {k} sets {p.name}, which holds {w}: a pointer "
                                "parameter is the buffer's, not a value")
        for start, data, what in _encode(v, p, f"[params] {k}", spec):
            put(i, p, start, data, what)
    missing = [p.name for i, p in enumerate(fn.params)
               if i not in given and not (p.elem_bits == 64 and p.size == _POINTER_BYTES)]
    if missing:
        raise SpecError(f"{spec.source}: no value for the parameter(s) {_list(missing, 6)} of {fn.name} "
                        "(give them in [params]; pointers no buffer names are null)")
    return offs, bytes(blob)


def _encode(v, p: Var, what: str, spec: KernelSpec) -> list:
    """[(byte offset in the parameter, bytes, description)] for one [params] value."""
    size = max(p.size, 1)
    if isinstance(v, bool):
        raise SpecError(f"{spec.source}: {what} is a boolean")
    if isinstance(v, int):
        if not -(1 << (8 * size - 1)) <= v < (1 << (8 * size)):
            raise SpecError(f"{spec.source}: {what} = {v} does not fit the {8 * size}-bit parameter {p.name}")
        return [(0, (v & ((1 << (8 * size)) - 1)).to_bytes(size, "little"), what)]
    if isinstance(v, float):
        fmt = {2: "<e", 4: "<f", 8: "<d"}.get(size)
        if fmt is None:
            raise SpecError(f"{spec.source}: {what} = {v}: a float for the {size}-byte parameter {p.name} "
                            "(floats fill 2-, 4- or 8-byte parameters; give a struct as fields)")
        return [(0, _pack(fmt, v, what, spec), what)]
    if isinstance(v, list):
        data = b"".join((w & 0xFFFFFFFF).to_bytes(4, "little") for w in v)
        if len(data) > size:
            raise SpecError(f"{spec.source}: {what}: {len(v)} words are {len(data)} bytes; {p.name} has {size}")
        return [(0, data, what)]
    if isinstance(v, str):
        h = v.replace("_", "")[2:]
        if (len(h) + 1) // 2 > size:
            raise SpecError(f"{spec.source}: {what}: {len(h)} hex digits do not fit the {size}-byte parameter {p.name}")
        return [(0, int(h, 16).to_bytes(size, "little"), what)]
    out = []
    for off, fld in v.items():
        (typ, val), = fld.items()
        w = FIELD_TYPES[typ]
        vals = val if isinstance(val, list) else [val]
        data = b""
        for x in vals:
            if typ[0] == "f" or typ == "bf16":
                if isinstance(x, int) and abs(x) > 1 << 53:
                    raise SpecError(f"{spec.source}: {what} field {off}: {x} is not exactly a {typ}")
                if typ == "bf16":
                    import numpy as np
                    from ..numerics.formats import from_float64, get_format
                    data += int(np.asarray(from_float64(np.array([float(x)]), get_format("bf16"))).ravel()[0]
                                ).to_bytes(2, "little")
                else:
                    data += _pack({"f16": "<e", "f32": "<f", "f64": "<d"}[typ], float(x), what, spec)
            else:
                if isinstance(x, float):
                    raise SpecError(f"{spec.source}: {what} field {off}: {x} is not an integer ({typ})")
                lo = -(1 << (8 * w - 1)) if typ[0] != "u" else 0
                if not lo <= x < (1 << (8 * w)):
                    raise SpecError(f"{spec.source}: {what} field {off}: {x} does not fit {typ}")
                data += (x & ((1 << (8 * w)) - 1)).to_bytes(w, "little")
        out.append((int(off), data, f"{what} field {off}"))
    return out


def _pack(fmt: str, x: float, what: str, spec: KernelSpec) -> bytes:
    try:
        return struct.pack(fmt, x)
    except (OverflowError, struct.error):
        raise SpecError(f"{spec.source}: {what}: {x} is out of range for a {fmt[1:]} float") from None
