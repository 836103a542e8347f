"""Kernel specs from a corpus manifest (``tests/data/kernels_hopper/manifest.json``).

The Hopper corpus records the launch facts of each module as the GPU harness runs them
(``tools/run_hopper_kernels.py``): grid, block, dynamic shared memory, cluster, every ``.param``
with its role (pointer to a buffer, scalar value, CUtensorMap by value with the
``cuTensorMapEncodeTiled`` arguments, Triton's scratch pointers) and the contract.
:func:`spec_dict` turns one record into the mapping :func:`formal.kernel.spec.load_spec` reads (the
same keys as a spec TOML, so one validation path); :func:`to_toml` writes it as a spec file.
"""

from __future__ import annotations

from typing import Any

from .spec import KernelSpec, load_spec, parse_contract, SpecError

_CU_TYPES = {"UINT8": "u8", "UINT16": "u16", "UINT32": "u32", "INT32": "s32", "UINT64": "u64", "INT64": "s64",
             "FLOAT16": "f16", "FLOAT32": "f32", "FLOAT64": "f64", "BFLOAT16": "bf16", "FLOAT32_FTZ": "f32_ftz",
             "TFLOAT32": "tf32", "TFLOAT32_FTZ": "tf32_ftz"}


def _cu(name: str, prefix: str) -> str:
    if not name.startswith(prefix):
        raise SpecError(f"manifest: {name!r} is not a {prefix}* value")
    return name[len(prefix):]


def tensormap_entry(p: dict) -> dict:
    """A manifest ``tensormap`` parameter -> a [[tensormap]] table."""
    tm = p["tensormap"]
    e = tm["encode"]
    if e.get("function") != "cuTensorMapEncodeTiled":
        raise SpecError(f"manifest: {p['name']}: only cuTensorMapEncodeTiled maps are described")
    sw = _cu(e["swizzle"], "CU_TENSOR_MAP_SWIZZLE_")
    il = _cu(e["interleave"], "CU_TENSOR_MAP_INTERLEAVE_")
    l2 = _cu(e["l2Promotion"], "CU_TENSOR_MAP_L2_PROMOTION_")
    oob = _cu(e["oobFill"], "CU_TENSOR_MAP_FLOAT_OOB_FILL_")
    return {"param": p["name"], "offset": int(tm.get("tensormap_offset", 0)), "buffer": tm["buffer"],
            "type": _CU_TYPES[_cu(e["tensorDataType"], "CU_TENSOR_MAP_DATA_TYPE_")],
            "dims": list(e["globalDim"]), "strides": list(e["globalStrides_bytes"]), "box": list(e["boxDim"]),
            "element_strides": list(e["elementStrides"]), "interleave": il.lower() if il == "NONE" else il,
            "swizzle": sw.lower() if sw == "NONE" else sw,
            "oob_fill": "zero" if oob == "NONE" else "nan",
            "l2_promotion": l2.lower() if l2 == "NONE" else l2.replace("L2_", "")}


def spec_dict(meta: dict) -> dict[str, Any]:
    """The spec mapping of one manifest record (``meta["launch"]``)."""
    L = meta["launch"]
    d: dict[str, Any] = {"entry": L["entry"], "grid": list(L["grid"]), "block": list(L["block"]),
                         "shared_bytes": int(L["shared_bytes"])}
    if list(L.get("cluster", [1, 1, 1])) != [1, 1, 1]:
        d["cluster"] = list(L["cluster"])
    params: dict[str, Any] = {}
    buffers: dict[str, dict] = {}
    tmaps = []
    for p in L["params"]:
        role = p["role"]
        if role == "pointer":
            b = {"name": p["buffer"], "param": p["name"], "type": p["dtype"], "shape": list(p["shape"]),
                 "strides": list(p["strides"])}
            if p["buffer"] in buffers and buffers[p["buffer"]].get("param"):
                raise SpecError(f"manifest: buffer {p['buffer']} has two pointer parameters")
            buffers[p["buffer"]] = b
        elif role == "scalar":
            params[p["name"]] = p["value"]
        elif role == "tensormap":
            tm = p["tensormap"]
            buffers.setdefault(tm["buffer"], {"name": tm["buffer"], "type": tm["dtype"], "shape": list(tm["shape"]),
                                              "strides": list(tm["strides"])})
            tmaps.append(tensormap_entry(p))
        elif role == "scratch":
            n = int(p.get("bytes_per_program", 0))
            if n:                       # bytes_per_program x programs, zeroed (the launcher's allocation)
                progs = 1
                for x in L.get("program_grid", L["grid"]):
                    progs *= int(x)
                name = p.get("what", "scratch")
                buffers[name] = {"name": name, "param": p["name"], "type": "u8", "shape": [n * progs]}
            # else a null pointer: no buffer names it
        else:
            raise SpecError(f"manifest: parameter {p['name']} has the unknown role {role!r}")
    d["params"] = params
    d["buffer"] = list(buffers.values())
    if tmaps:
        d["tensormap"] = tmaps
    contract, notes = {}, []
    for out, text in L.get("contract", {}).items():
        try:
            parse_contract(out, text)
            contract[out] = text
        except SpecError:
            notes.append(f"{out} = {text}")
    # a contract whose result no parameter reaches but another contract reads (attention: S = Q @ K.T,
    # converted in registers, O = S @ V) is a chained output held in registers: a buffer with no param,
    # of the type of the operand it meets and the shape of its product
    names = {b["name"] for b in d["buffer"]}
    chained = []
    parsed = {k: parse_contract(k, v) for k, v in contract.items()}
    for k, c in parsed.items():
        use = [u for u in parsed.values() if k in (u.lhs, u.rhs)]
        if k in names or not use or not all(x in names for x in (c.lhs, c.rhs)):
            continue
        u = use[0]
        other = buffers[u.rhs if u.lhs == k else u.lhs]
        ls, rs = buffers[c.lhs]["shape"], buffers[c.rhs]["shape"]
        rows = ls[-1] if c.lhs_t else ls[-2]
        cols = rs[-2] if c.rhs_t else rs[-1]
        d["buffer"].append({"name": k, "type": other["type"], "shape": [rows, cols], "strides": [cols, 1]})
        names.add(k)
        chained.append(k)
    kept = {k: v for k, v in contract.items() if k in names}
    notes += [f"{k} = {v}" for k, v in contract.items() if k not in names]
    if kept and all(_operands_known(v, names) for v in kept.values()):
        d["contract"] = kept
        if chained:
            d["chained"] = chained
    else:
        notes += [f"{k} = {v}" for k, v in kept.items()]
    if notes:
        d["note"] = ("not in the spec grammar (a description): " if "contract" in d else
                     "contract not in the spec grammar (run only): ") + "; ".join(notes)
    return d


def _operands_known(text: str, names: set) -> bool:
    import re
    return all(x in names for x in re.findall(r"[A-Za-z_]\w*", text) if x != "T")


def load(meta: dict) -> KernelSpec:
    return load_spec(spec_dict(meta))


def to_toml(d: dict) -> str:
    """A spec mapping as TOML (the subset spec files use)."""
    def val(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, str):
            return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
        if isinstance(v, list):
            return "[" + ", ".join(val(x) for x in v) + "]"
        return repr(v)
    out = []
    for k in ("entry", "grid", "block", "shared_bytes", "cluster", "chained", "note"):
        if k in d:
            out.append(f"{k} = {val(d[k])}")
    if d.get("params"):
        out += ["", "[params]"] + [f"{k} = {val(v)}" for k, v in d["params"].items()]
    for b in d.get("buffer", []):
        out += ["", "[[buffer]]"] + [f"{k} = {val(v)}" for k, v in b.items()]
    for t in d.get("tensormap", []):
        out += ["", "[[tensormap]]"] + [f"{k} = {val(v)}" for k, v in t.items()]
    if d.get("contract"):
        out += ["", "[contract]"] + [f"{k} = {val(v)}" for k, v in d["contract"].items()]
    return "\n".join(out) + "\n"
