"""NVIDIA's assembler as a second opinion on the catalog.

``formal.catalog`` decides legality from the PTX ISA *text*; this module asks
``ptxas`` the same question, so the two can be compared (``formal.catalog.sweep``).
Where they disagree the catalog keeps following the text and ``specs/errata.toml``
records the disagreement with its evidence.

Finding ptxas (first hit wins; :func:`installations` lists all of them)::

    $PTXAS  ->  the nvidia-cuda-nvcc wheel (nvidia/cu13/bin/ptxas)  ->  PATH  ->  /usr/local/cuda/bin

:func:`find` returns a :class:`Ptxas` with its CUDA release and the highest PTX ISA
version it accepts (probed by assembling an empty module with ``.version X``).

:func:`assemble` checks many forms for one target and PTX version at once::

    >>> vs = assemble(["mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"], "sm_80", "8.0")
    >>> vs[0].accepted, vs[0].messages
    (True, [])

How a batch is decided (a verdict is never inferred from silence):

1. every form is one instruction line of one kernel; ptxas's messages carry line
   numbers, so each ``error`` is attributed to its form -> *rejected*;
2. the forms without an error are assembled again, alone; only when that module
   assembles with exit status 0 are they *accepted*.  New errors (ptxas stops
   some checks after the first failing phase) send their forms to step 1 again;
   a failure without a line number is bisected until each half either
   assembles cleanly or is a single form, which is then rejected with the
   unattributed message.

Nothing is cached on disk; results of ``find`` are kept in memory only.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Sequence

from . import text as ptxtext
from . import Form, Operand, operands_of, parse_instruction, parse_target, split_instruction
from ..specdata import load_spec

# ----------------------------------------------------------------------------------
# locating ptxas


@dataclass(frozen=True)
class Ptxas:
    """One ptxas installation."""

    path: str
    release: str          # CUDA release, e.g. "13.0"
    version: str          # full version, e.g. "13.0.88"
    max_ptx: str          # highest PTX ISA version it assembles, e.g. "9.0"
    origin: str           # env | wheel | PATH | /usr/local/cuda

    def __str__(self) -> str:
        return f"ptxas {self.version} (CUDA {self.release}, PTX <= {self.max_ptx}, {self.origin}: {self.path})"

    def to_dict(self) -> dict:
        return asdict(self)


def _wheel_ptxas() -> str | None:
    """ptxas inside the ``nvidia-cuda-nvcc`` wheel (``nvidia/cu13/bin/ptxas``)."""
    try:
        import importlib.util

        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return None
    roots = list(spec.submodule_search_locations or []) if spec else []
    for root in roots:
        for sub in ("cu13", "cu12", "cuda_nvcc"):
            p = Path(root) / sub / "bin" / "ptxas"
            if p.is_file() and os.access(p, os.X_OK):
                return str(p)
    return None


def candidates() -> list[tuple[str, str]]:
    """(origin, path) of every ptxas found, in search order (duplicates removed)."""
    out: list[tuple[str, str]] = []
    env = os.environ.get("PTXAS")
    if env:
        out.append(("env", env))
    w = _wheel_ptxas()
    if w:
        out.append(("wheel", w))
    p = shutil.which("ptxas")
    if p:
        out.append(("PATH", p))
    cuda = "/usr/local/cuda/bin/ptxas"
    if os.path.isfile(cuda):
        out.append(("/usr/local/cuda", cuda))
    seen: set[str] = set()
    uniq = []
    for origin, path in out:
        real = os.path.realpath(path)
        if real in seen:
            continue
        seen.add(real)
        uniq.append((origin, path))
    return uniq


_VERSION_RE = re.compile(r"release (\d+\.\d+), V(\d+\.\d+\.\d+)")
_CURRENT_RE = re.compile(r"current version is '(\d+\.\d+)'")


@lru_cache(maxsize=None)
def probe(path: str, origin: str = "explicit") -> Ptxas:
    """Ask one ptxas binary for its version and the highest PTX ISA version it accepts."""
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise FileNotFoundError(f"ptxas not found or not executable: {path}")
    out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
    m = _VERSION_RE.search(out.stdout + out.stderr)
    if not m:
        raise RuntimeError(f"cannot read the version of {path}: {out.stdout.strip()!r}")
    release, version = m.group(1), m.group(2)
    # Probe `.version X` on an empty module, newest first; the first one accepted is the
    # maximum.  (ptxas also names its current version when it refuses one; we only use
    # that as a hint for versions the catalog does not know yet.)
    known = list(load_spec("targets")["ptx"]["versions"])
    hint = None
    rc, text = _run_module(path, _empty_module("99.9", "sm_80"), "sm_80")
    mm = _CURRENT_RE.search(text)
    if mm:
        hint = mm.group(1)
    order = sorted(set(known) | ({hint} if hint else set()), key=_pv, reverse=True)
    best = None
    for v in order:
        tgt = "sm_80" if _pv(v) >= (7, 0) else "sm_70"
        arch = "sm_80" if tgt == "sm_80" else "sm_75"
        rc, _ = _run_module(path, _empty_module(v, tgt), arch)
        if rc == 0:
            best = v
            break
    if best is None:
        raise RuntimeError(f"{path} accepts none of the PTX ISA versions {known[0]}..{known[-1]}")
    return Ptxas(path, release, version, best, origin)


def installations() -> list[Ptxas]:
    """Every distinct ptxas found (see :func:`candidates`), one per version."""
    out: list[Ptxas] = []
    for origin, path in candidates():
        try:
            p = probe(path, origin)
        except (OSError, RuntimeError, subprocess.SubprocessError):
            continue
        if all(q.version != p.version for q in out):
            out.append(p)
    return out


def find(which: str | None = None) -> Ptxas | None:
    """The ptxas to use: ``which`` = None (first found), a release ("13.0"), an origin
    ("wheel", "PATH", "env") or a path.  None when nothing suitable exists."""
    if which and os.sep in which:
        return probe(which)
    for p in installations():
        if which in (None, p.release, p.version, p.origin):
            return p
    return None


def _pv(v: str) -> tuple[int, int]:
    a, _, b = str(v).partition(".")
    return int(a), int(b or 0)


# ----------------------------------------------------------------------------------
# running ptxas on one module

_MSG_RE = re.compile(r"^ptxas (\S+), line (\d+); (error|warning|info|fatal)\s*: (.*)$")
_GLOBAL_RE = re.compile(r"^ptxas (error|warning|info|fatal)\s*: (.*)$")


def _empty_module(ptx: str, target: str) -> str:
    return ptxtext.header(target, ptx) + ".visible .entry k()\n{\n  ret;\n}\n"


def arch_for(target: str) -> str:
    """The -arch to assemble a ``.target`` for: itself, or sm_75 for sm_70/sm_72, which
    ptxas 13 no longer generates code for ("PTX for .target sm_XY can be compiled to
    all GPU targets sm_MN ... where MN >= XY")."""
    t = parse_target(target)
    if t.suffix == "" and t.number < 75:
        return "sm_75"
    return t.name


_SRC = "m.ptx"


def _run_module(path: str, text: str, arch: str, timeout: int = 600) -> tuple[int, str]:
    with tempfile.TemporaryDirectory(prefix="ptx-formal-") as d:
        src = os.path.join(d, _SRC)
        with open(src, "w") as f:
            f.write(text)
        try:
            r = subprocess.run([path, f"-arch={arch}", "-suppress-sparse-mma-advisory-info", src, "-o", os.devnull],
                               capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return 124, f"ptxas fatal : timed out after {timeout} s"
    return r.returncode, (r.stdout + r.stderr)


def _parse_messages(text: str, src: str = _SRC) -> tuple[dict[int, list[tuple[str, str]]], list[tuple[str, str]]]:
    """ptxas output -> ({line: [(severity, message)]}, [(severity, message) without a line]).

    Only lines of our own file count: ptxas also reports errors inside its internal
    helper code (file ``<builtin>``, e.g. the sub-byte mma emulation on sm_90+) with
    *that* file's line numbers; those are kept as unattributed messages."""
    per_line: dict[int, list[tuple[str, str]]] = {}
    other: list[tuple[str, str]] = []
    for raw in text.splitlines():
        s = raw.strip()
        if not s:
            continue
        m = _MSG_RE.match(s)
        if m:
            if os.path.basename(m.group(1)) == src:
                per_line.setdefault(int(m.group(2)), []).append((m.group(3), m.group(4).strip()))
            else:
                other.append((m.group(3), f"{m.group(1)}, line {m.group(2)}: {m.group(4).strip()}"))
            continue
        g = _GLOBAL_RE.match(s)
        if g:
            if g.group(2).startswith("Ptx assembly aborted due to errors"):
                continue            # the summary line, not a finding
            other.append((g.group(1), g.group(2).strip()))
        else:
            other.append(("fatal", s))
    return per_line, other


# ----------------------------------------------------------------------------------
# probes: one instruction to assemble


@dataclass(frozen=True)
class Probe:
    """A form plus the immediates its instruction line uses."""

    form: Form
    sel: int | None = None                      # mma.sp sparsity selector (default 0)
    scale_a: tuple[int, int] | None = None      # block-scale selectors (default {0, 0})
    scale_b: tuple[int, int] | None = None
    wg: tuple[tuple[str, int], ...] | None = None  # wgmma immediates (scale_d, imm_scale_a, ...), as items
    operands: tuple[Operand, ...] | None = None  # override (forms the catalog has no fragments for)
    spelling: str | None = None                 # the opcode as written, when not canonical

    @property
    def opcode(self) -> str:
        return self.spelling or self.form.opcode


def as_probe(x: Probe | Form | str) -> Probe:
    if isinstance(x, Probe):
        return x
    if isinstance(x, Form):
        return Probe(x)
    form, imm = parse_instruction(x, strict=False)
    op = split_instruction(x)[0]
    wg = tuple(sorted((k, v) for k, v in imm.items() if k not in ("sel", "scale_a", "scale_b")
                      and isinstance(v, int))) or None
    return Probe(form, sel=imm.get("sel"), scale_a=imm.get("scale_a"), scale_b=imm.get("scale_b"), wg=wg,
                 spelling=None if op == form.opcode else op)


def probe_operands(p: Probe) -> list[Operand]:
    """The register operands the probe's instruction line uses.

    Documented forms have them from the catalog; for a near-miss that the catalog
    gives no fragment for, ``Probe.operands`` must be set by the caller.
    """
    if p.operands is not None:
        return list(p.operands)
    return operands_of(p.form)


@dataclass
class Verdict:
    """ptxas's answer for one probe."""

    opcode: str
    instruction: str
    accepted: bool
    messages: list[str]           # "error: ..." / "warning: ..." / "info: ..."
    ptxas: str                    # ptxas version, e.g. "13.0.88"
    target: str
    ptx: str
    sel: int | None = None
    how: str = ""                 # "assembled alone with rc=0" | "error on its line" | ...

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def errors(self) -> list[str]:
        return [m for m in self.messages if m.startswith(("error", "fatal"))]


# a register pool large enough for any one instruction: 160 .b32 (wgmma m64n256: 128 for d, 4 for a, 1
# for sp-meta), 32 .f64
_POOL = {"b32": ("%r", 160), "f64": ("%fd", 32), "b64": ("%rl", 8)}


def _regs_for(ops: Sequence[Operand]) -> dict[str, list[str]]:
    nxt = {k: 0 for k in _POOL}
    out: dict[str, list[str]] = {}
    for op in ops:
        kind = ptxtext.reg_type(op)
        prefix, size = _POOL[kind]
        start = nxt[kind]
        n = max(1, op.count)
        if start + n > size:
            start = 0
        out[op.name] = [f"{prefix}{start + i}" for i in range(n)]
        nxt[kind] = start + n
    return out


def instruction_line(p: Probe) -> str:
    """The instruction text for a probe, using the shared register pool."""
    regs = _regs_for(probe_operands(p))
    imm = ptxtext.Immediates(sel=0 if p.sel is None else p.sel,
                             scale_a=p.scale_a or (0, 0), scale_b=p.scale_b or (0, 0),
                             wg=dict(p.wg) if p.wg else None)
    line = ptxtext.instruction(p.form, imm, regs=regs, address="%rl0", stride="%r63")
    if p.spelling:
        line = p.spelling + line[len(p.form.opcode):]
    return line


def module_text(lines: Sequence[str], target: str, ptx: str) -> tuple[str, int]:
    """A kernel with one instruction per line; returns (text, line number of lines[0])."""
    head = ptxtext.header(target, ptx) + ".visible .entry k()\n{\n"
    decl = "".join(f"  .reg .{k} {prefix}<{size}>;\n" for k, (prefix, size) in _POOL.items())
    first = head.count("\n") + decl.count("\n") + 1
    body = "".join(f"  {ln}\n" for ln in lines)
    return head + decl + body + "  ret;\n}\n", first


def _fmt(sev: str, msg: str) -> str:
    return f"{sev}: {msg}"


def _ptxas_or_raise(ptxas: Ptxas | str | None) -> Ptxas:
    px = ptxas if isinstance(ptxas, Ptxas) else find(ptxas)
    if px is None:
        raise FileNotFoundError("no ptxas found (set $PTXAS, install the nvidia-cuda-nvcc wheel, or put ptxas on PATH)")
    return px


def decide_lines(lines: Sequence[str], target: str, ptx: str, px: Ptxas,
                 batch: int = 2000) -> list[tuple[bool, list[str], str]]:
    """ptxas's verdict for each instruction line: (accepted, messages, how decided).

    Lines may use the register pool of :func:`module_text` (``%r0..63`` .b32,
    ``%fd0..31`` .f64, ``%rl0..7`` .b64)."""
    arch = arch_for(target)
    res: list[tuple[bool, list[str], str] | None] = [None] * len(lines)

    # A module that fails without any instruction is a target/version problem: every
    # line is rejected with that message (no bisection needed).
    rc, text = _run_module(px.path, _empty_module(ptx, target), arch)
    if rc != 0:
        per_line, other = _parse_messages(text)
        msgs = [_fmt(s, m) for ms in per_line.values() for s, m in ms] + [_fmt(s, m) for s, m in other]
        return [(False, list(msgs), "empty module rejected")] * len(lines)

    notes: dict[int, list[str]] = {}

    def settle(idx: list[int]) -> None:
        pending = list(idx)
        while pending:
            text_, first = module_text([lines[i] for i in pending], target, ptx)
            rc_, out = _run_module(px.path, text_, arch)
            per_line, other = _parse_messages(out)
            erred: set[int] = set()
            for k, i in enumerate(pending):
                ms = per_line.get(first + k, [])
                for s, m in ms:
                    f = _fmt(s, m)
                    if f not in notes.setdefault(i, []):
                        notes[i].append(f)
                if any(s in ("error", "fatal") for s, _ in ms):
                    erred.add(i)
            if erred:
                for i in erred:
                    res[i] = (False, notes.get(i, []), "error on its line")
                pending = [i for i in pending if i not in erred]
                continue                      # confirm the rest alone
            if rc_ == 0:
                for i in pending:
                    res[i] = (True, notes.get(i, []), "assembled with rc=0 without the rejected lines")
                return
            # failed without a line we can attribute: bisect
            unattributed = [_fmt(s, m) for s, m in other] + [
                _fmt(s, m) for ln, ms in per_line.items() if not (first <= ln < first + len(pending)) for s, m in ms]
            if len(pending) == 1:
                i = pending[0]
                res[i] = (False, notes.get(i, []) + unattributed, "assembled alone: rc != 0")
                return
            half = len(pending) // 2
            settle(pending[:half])
            settle(pending[half:])
            return

    for s in range(0, len(lines), batch):
        settle(list(range(s, min(len(lines), s + batch))))
    if any(r is None for r in res):  # pragma: no cover - settle() decides every line
        raise RuntimeError("internal error: some lines got no verdict")
    return res  # type: ignore[return-value]


def assemble(items: Iterable[Probe | Form | str], target: str, ptx: str | None = None,
             ptxas: Ptxas | str | None = None, batch: int = 2000) -> list[Verdict]:
    """Assemble each probe for ``target`` with PTX ISA ``ptx`` (default: the highest
    this ptxas accepts); one :class:`Verdict` per probe, in order.

    Raises ``FileNotFoundError`` when no ptxas is found.
    """
    px = _ptxas_or_raise(ptxas)
    ptx = ptx or px.max_ptx
    probes = [as_probe(x) for x in items]
    lines = [instruction_line(p) for p in probes]
    out = []
    for p, line, (ok, msgs, how) in zip(probes, lines, decide_lines(lines, target, ptx, px, batch)):
        out.append(Verdict(p.opcode, line, ok, msgs, px.version, target, ptx,
                           p.sel if p.form.is_sparse else None, how))
    return out


def assemble_lines(lines: Sequence[str], target: str, ptx: str | None = None,
                   ptxas: Ptxas | str | None = None) -> list[Verdict]:
    """Assemble raw instruction lines (registers from the pool of :func:`module_text`)."""
    px = _ptxas_or_raise(ptxas)
    ptx = ptx or px.max_ptx
    out = []
    for line, (ok, msgs, how) in zip(lines, decide_lines(lines, target, ptx, px)):
        out.append(Verdict(line.split(None, 1)[0] if line.strip() else "", line, ok, msgs, px.version,
                           target, ptx, None, how))
    return out


def assemble_one(x: Probe | Form | str, target: str, ptx: str | None = None,
                 ptxas: Ptxas | str | None = None) -> Verdict:
    return assemble([x], target, ptx, ptxas)[0]
