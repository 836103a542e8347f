"""Which register declaration types does ptxas accept for each matrix-instruction operand?

For one representative form per (family, operand, operand type, element type, register
count), assembles a one-instruction kernel whose operand registers are declared with
each candidate type in turn (the others keep the form's own type) and records what
ptxas accepts.  Output: the tables of ``specs/operand_registers.toml`` (printed as TOML;
review, then paste).  The generated PTX is throwaway test input.

    python3 tools/sweep_operand_registers.py [--ptxas PATH] [--out FILE]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from formal import catalog  # noqa: E402

# every register type a .reg may declare at these widths (.bf16x2 registers are a ptxas syntax error)
CANDIDATES = ("b16", "u16", "s16", "f16", "bf16", "b32", "u32", "s32", "f32", "f16x2", "b64", "u64", "s64", "f64")
TARGETS = (("sm_90a", "8.7"), ("sm_120a", "8.8"), ("sm_100a", "8.8"), ("sm_80", "8.0"), ("sm_70", "7.0"))
FAMILIES = ("mma", "mma.sp", "wmma.mma", "wmma.load", "wmma.store")
WGMMA_TARGET = ("sm_90a", "8.7")


def _wgmma_kernel(form, target, ptx, types: dict) -> str:
    """One wgmma.mma_async of ``form`` (its A source set); types: operand name (d, a) -> .reg type.
    scale-d is a predicate, the other immediates take their first legal value (1 / 0)."""
    ops = form.operands
    decl = [".reg .b64 %da, %db;", ".reg .pred %sd;", ".reg .b32 %meta;"]
    args = []
    for name in catalog.wgmma_operand_names(form):
        if name in ("d", "a"):
            op = ops[name]
            decl.append(f".reg .{types[name]} %{name}_<{op.count}>;")
            args.append("{" + ", ".join(f"%{name}_{k}" for k in range(op.count)) + "}")
        elif name == "a-desc":
            args.append("%da")
        elif name == "b-desc":
            args.append("%db")
        elif name == "sp-meta":
            args.append("%meta")
        elif name == "scale-d":
            args.append("%sd")
        else:                          # sp-sel, imm-scale-a/b (1), imm-trans-a/b (0)
            args.append("1" if "scale" in name else "0")
    body = "\n  ".join(decl)
    return (f".version {ptx}\n.target {target}\n.address_size 64\n.visible .entry k()\n{{\n  {body}\n"
            f"  mov.u64 %da, 0;\n  mov.u64 %db, 0;\n  setp.ne.u64 %sd, %da, 0;\n  mov.u32 %meta, 0;\n"
            f"  wgmma.fence.sync.aligned;\n  {form.opcode} {', '.join(args)};\n"
            f"  wgmma.commit_group.sync.aligned;\n  wgmma.wait_group.sync.aligned 0;\n  ret;\n}}\n")


def wgmma_representatives():
    """{("wgmma", operand, element type): [(form, operand name), ...]}: per (sparsity, dtype,
    atype, btype, A source) the form with the smallest N (register types do not depend on N)."""
    target, ptx = WGMMA_TARGET
    best: dict = {}
    for form in catalog.forms(target, ptx, family="wgmma"):
        if form.family != "wgmma":           # fence / commit_group / wait_group: no registers
            continue
        for src in ("desc", "reg"):
            f = form.with_asource(src)
            try:
                f.operands
            except (KeyError, ValueError):
                continue
            key = (f.sparsity, f.dtype, f.atype, f.btype, src, f.satfinite)
            if key not in best or f.mnk[1] < best[key].mnk[1]:
                best[key] = f
    out: dict = defaultdict(list)
    for f in best.values():
        for name, op in f.operands.items():
            if name in ("d", "a"):
                out[("wgmma", name, op.etype)].append((f, name))
    return dict(out)


def sweep_wgmma(ptxas: str, log=print) -> dict:
    """{"wgmma": {operand: {element type: [accepted .reg types]}}} (d and register A)."""
    target, ptx = WGMMA_TARGET
    out: dict = defaultdict(lambda: defaultdict(dict))
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        for (fam, opk, et), reps in sorted(wgmma_representatives().items(), key=str):
            union: set = set()
            for form, name in reps:
                natural = {n: op.ptx_type for n, op in form.operands.items()}
                ok, msg = _accepts(ptxas, _wgmma_kernel(form, target, ptx, natural), target, tmp)
                if not ok:
                    log(f"# skipped, ptxas rejects the form's own register types: {form.opcode} ({form.asource}): {msg}")
                    continue
                acc = [c for c in CANDIDATES
                       if _accepts(ptxas, _wgmma_kernel(form, target, ptx, {**natural, name: c}), target, tmp)[0]]
                log(f"# {fam} {opk} .{et}: {form.opcode} (A {form.asource}): {acc}")
                union |= set(acc)
            if union:
                out[fam][opk][et] = [c for c in CANDIDATES if c in union]
    return out


def _kernel(form, target, ptx, types: dict) -> str:
    """A kernel with one instruction of ``form``; types: operand name -> .reg type."""
    ops = form.operands
    decl = [".reg .b64 %ptr;", ".reg .b32 %meta;", ".reg .b32 %scale;"]
    vec = {}
    for name, op in ops.items():
        if name in ("a", "b", "c", "d", "r"):
            decl.append(f".reg .{types[name]} %{name}_<{op.count}>;")
            vec[name] = "{" + ", ".join(f"%{name}_{k}" for k in range(op.count)) + "}"
    if form.family in ("mma", "mma.sp", "wmma.mma"):
        args = [vec["d"], vec["a"], vec["b"], vec["c"]]
        if form.is_sparse:
            args += ["%meta", "0"]
        if form.block_scale:
            args += ["%scale", "{0, 0}", "%scale", "{0, 0}"]
    elif form.family == "wmma.load":
        args = [vec["r"], "[%ptr]", "64"]
    else:
        args = ["[%ptr]", vec["r"], "64"]
    body = "\n  ".join(decl)
    return (f".version {ptx}\n.target {target}\n.address_size 64\n.visible .entry k()\n{{\n  {body}\n"
            f"  mov.u64 %ptr, 0;\n  {form.opcode} {', '.join(args)};\n  ret;\n}}\n")


def _accepts(ptxas: str, src: str, arch: str, tmp: Path) -> tuple[bool, str]:
    f = tmp / "k.ptx"
    f.write_text(src)
    r = subprocess.run([ptxas, f"-arch={arch}", str(f), "-o", str(tmp / "k.cubin")], capture_output=True, text=True)
    return r.returncode == 0, (r.stderr.strip().splitlines() or [""])[0]


def operand_key(form, name: str) -> str:
    """The operand as the table names it: a/b/c/d; a wmma.load's fragment by its matrix."""
    if form.family == "wmma.load":
        return form.matrix
    if form.family == "wmma.store":
        return "d"
    return name


def _variant(form) -> tuple:
    """What may change ptxas's operand typing within one (family, operand, element type):
    the shape, .kind, block scaling, the sparse spelling, the other operands' types."""
    return (form.shape, form.kind, bool(form.block_scale), form.opcode.split(".")[0],
            form.atype, form.btype, form.ctype, form.dtype)


def representatives():
    """{(family, operand, element type): [(form, target, ptx, operand name), ...]}: one legal
    form per variant (:func:`_variant`) of each key."""
    seen: dict = defaultdict(dict)
    for fam in FAMILIES:
        for target, ptx in TARGETS:
            for form in catalog.forms(target, ptx, family=fam):
                try:
                    ops = form.operands
                except (KeyError, ValueError):
                    continue
                for name, op in ops.items():
                    if name in ("a", "b", "c", "d", "r"):
                        seen[(form.family, operand_key(form, name), op.etype)].setdefault(
                            _variant(form), (form, target, ptx, name))
    return {k: list(v.values()) for k, v in seen.items()}


def sweep(ptxas: str, log=print) -> dict:
    """{family: {operand: {element type: [accepted .reg types]}}}"""
    out: dict = defaultdict(lambda: defaultdict(dict))
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        for (fam, opk, et), reps in sorted(representatives().items(), key=str):
            union: set = set()
            for form, target, ptx, name in reps:
                natural = {n: op.ptx_type for n, op in form.operands.items()}
                ok, msg = _accepts(ptxas, _kernel(form, target, ptx, natural), target, tmp)
                if not ok:
                    log(f"# skipped, ptxas rejects the form's own register types: {form.opcode} on {target}: {msg}")
                    continue
                acc = [c for c in CANDIDATES
                       if _accepts(ptxas, _kernel(form, target, ptx, {**natural, name: c}), target, tmp)[0]]
                log(f"# {fam} {opk} .{et}: {form.opcode} on {target}: {acc}")
                union |= set(acc)
            if union:   # accepted by ptxas for at least one form of the key: never flagged
                out[fam][opk][et] = [c for c in CANDIDATES if c in union]
    return out


def to_toml(table: dict, version: str) -> str:
    lines = [f'ptxas = "{version}"', ""]
    for fam in sorted(table):
        for opk in sorted(table[fam]):
            lines.append(f'[accepted."{fam}".{opk}]')
            for et, acc in sorted(table[fam][opk].items()):
                lines.append(f"{et} = [{', '.join(repr(a).replace(chr(39), chr(34)) for a in acc)}]")
            lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ptxas", default="ptxas")
    ap.add_argument("--wgmma-only", action="store_true", help="only the [accepted.\"wgmma\"] tables")
    args = ap.parse_args(argv)
    v = subprocess.run([args.ptxas, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]
    log = lambda m: print(m, file=sys.stderr)  # noqa: E731
    table = {} if args.wgmma_only else dict(sweep(args.ptxas, log=log))
    table.update(sweep_wgmma(args.ptxas, log=log))
    print(to_toml(table, v))
    return 0


if __name__ == "__main__":
    sys.exit(main())
