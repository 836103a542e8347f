"""Triton kernels without a spec: the compiler front end.

A ``@triton.jit`` function and a launch written as Triton users write it::

    mm[(2, 2)](A, B, C, 64, 64, 32, A.stride(0), A.stride(1), ..., BLOCK_M=32, num_warps=4)

are compiled with the installed Triton for a target (``GPUTarget("cuda", 80, 32)``: no GPU
needed), and the launch gives everything a kernel spec says: the entry (Triton's kernel name),
the grid (the launch's grid; x ``num_ctas``), the block (``.reqntid`` or ``32 * num_warps``),
the dynamic shared memory (Triton's ``metadata.shared``), and, parameter by parameter, the PTX
parameter each runtime argument becomes.  Which arguments are runtime parameters is Triton's
own decision, taken the way its launcher takes it (``JITFunction`` binder and ``_pack_args``):
``tl.constexpr`` parameters, integers equal to 1 (unless ``do_not_specialize``) and ``None``
are compiled in; a pointer (a :class:`Tensor`) is assumed 16-byte aligned, as CUDA allocations
and this interpreter's buffers are; integers divisible by 16 are marked so.  After the
arguments, Triton appends two pointers (global and profile scratch): null unless the kernel
asks for global scratch, which then is a buffer ``global_scratch`` of the size Triton's launcher
allocates.

The result is a :class:`TritonLaunch`: the PTX text, the parsed module and a
:class:`~formal.kernel.spec.KernelSpec` built by :func:`~formal.kernel.spec.load_spec` from the
same dict a TOML spec is (so every check a spec gets, this one gets), on which
:func:`formal.kernel.check` and :func:`formal.kernel.run` work unchanged.

Tensors are declared, never allocated: ``Tensor("B", "f16", (64, 32)).T`` is the transpose
(shape ``(32, 64)``, strides ``(1, 32)``) of a row-major 64x32 f16 buffer; ``.stride(i)`` and
``.shape[i]`` give what torch gives.  The launch text is read with :mod:`ast`, never evaluated:
literals, tensor names, ``X.stride(i)``, ``X.shape[i]``, ``X.size(i)``, ``X.numel()``,
``triton.cdiv(a, b)``, ``tl.float32``-style dtypes, and integer arithmetic.

Errors: :class:`TritonInputError` (a bad launch, tensor, contract, or a kernel Triton does not
compile: exit 2), :class:`TritonUnavailable` (Triton not installed, or a launch feature this
front end does not model: exit 3).
"""

from __future__ import annotations

import ast
import contextlib
import importlib.machinery
import importlib.util
import re
import shutil
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


# PTX element type (as the spec names it) -> triton.language dtype attribute
_TL = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64", "e4m3": "float8e4nv",
       "e5m2": "float8e5", "s8": "int8", "u8": "uint8", "s16": "int16", "u16": "uint16", "s32": "int32",
       "u32": "uint32", "s64": "int64", "u64": "uint64"}
# Triton's short names (signature strings) -> PTX names
_ALIASES = {"fp16": "f16", "fp32": "f32", "fp64": "f64", "fp8e4nv": "e4m3", "fp8e5": "e5m2", "i8": "s8",
            "i16": "s16", "i32": "s32", "i64": "s64"}
_TARGETS = {"sm_80": 80, "sm_86": 86, "sm_87": 87, "sm_89": 89, "sm_90": 90, "sm_90a": 90}
_SCRATCH = ("global_scratch", "profile_scratch")
MAX_INT = 1 << 64               # integer arithmetic in a launch stays within 64 bits


class TritonInputError(ValueError):
    """A launch, tensor or contract that cannot be used, or a kernel Triton does not compile (exit 2)."""


class TritonUnavailable(Exception):
    """Triton is not installed, or the launch uses what this front end does not model (exit 3)."""


# ----------------------------------------------------------------------------- tensors ----------

@dataclass(frozen=True)
class Tensor:
    """A tensor argument: a named buffer of ``type`` elements with torch-like ``shape`` / ``stride``."""

    name: str
    type: str
    shape: tuple
    strides: tuple = ()

    def __post_init__(self):
        if not isinstance(self.name, str) or not re.fullmatch(r"[A-Za-z_]\w*", self.name):
            raise TritonInputError(f"tensor name {self.name!r} is not an identifier")
        t = _ALIASES.get(self.type, self.type)
        if t not in _TL:
            raise TritonInputError(f"tensor {self.name}: element type {self.type!r} is not one Triton passes "
                                   f"by pointer; known: {', '.join(_TL)}")
        object.__setattr__(self, "type", t)
        shape = tuple(self.shape)
        if not 1 <= len(shape) <= 4 or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1
                                                for d in shape):
            raise TritonInputError(f"tensor {self.name}: shape {list(shape)} must be 1 to 4 positive integers")
        object.__setattr__(self, "shape", shape)
        st = tuple(self.strides) if self.strides else tuple(_rowmajor(shape))
        if len(st) != len(shape) or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in st):
            raise TritonInputError(f"tensor {self.name}: strides {list(st)} must be {len(shape)} integers >= 0")
        object.__setattr__(self, "strides", st)

    def stride(self, dim: int | None = None):
        return self.strides if dim is None else self.strides[dim]

    def size(self, dim: int | None = None):
        return self.shape if dim is None else self.shape[dim]

    def dim(self) -> int:
        return len(self.shape)

    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def T(self) -> "Tensor":
        """The transpose of a matrix (rank 2), as torch's ``.T``."""
        if len(self.shape) != 2:
            raise TritonInputError(f"tensor {self.name}: .T of a rank-{len(self.shape)} tensor; use .mT "
                                   "(the last two dimensions)")
        return self.mT

    @property
    def mT(self) -> "Tensor":
        """The last two dimensions swapped, as torch's ``.mT``."""
        if len(self.shape) < 2:
            raise TritonInputError(f"tensor {self.name}: .mT needs rank 2 or more")
        sh, st = list(self.shape), list(self.strides)
        sh[-2:], st[-2:] = sh[:-3:-1], st[:-3:-1]
        return Tensor(self.name, self.type, tuple(sh), tuple(st))

    # what Triton's launcher reads from a tensor argument
    @property
    def dtype(self):
        import triton.language as tl
        return getattr(tl, _TL[self.type])

    def data_ptr(self) -> int:
        return 0        # 16-byte aligned: the interpreter's buffers are (256 bytes), as cudaMalloc's are

    def __repr__(self) -> str:
        return f"{self.name}: {self.type}{list(self.shape)} strides {list(self.strides)}"


def _rowmajor(shape) -> list:
    st, acc = [], 1
    for d in reversed(shape):
        st.insert(0, acc)
        acc *= d
    return st


_TENSOR = re.compile(r"\s*([A-Za-z_]\w*)\s*=\s*([A-Za-z_]\w*)\s*\[([^\]]*)\]\s*(\.m?T)?\s*"
                     r"(?:strides\s*=\s*\(?([^)]*)\)?)?\s*$")


def parse_tensor(text: str) -> Tensor:
    """``A=f16[64,32]``, ``B=f16[64,32].T`` (the transpose of a row-major 64x32 buffer),
    ``X=f32[4,64,64].mT``, ``C=f32[64,64] strides=(1,64)``."""
    m = _TENSOR.match(text)
    if not m:
        raise TritonInputError(f"--tensor {text!r}: write NAME=TYPE[d0,d1,...] (optionally .T, .mT or "
                               "strides=(s0,s1,...)), e.g. A=f16[64,32] or B=f16[64,32].T")
    name, typ, shape, t, strides = m.groups()
    try:
        dims = [int(x) for x in shape.split(",") if x.strip()]
        st = [int(x) for x in strides.split(",") if x.strip()] if strides is not None else []
    except ValueError:
        raise TritonInputError(f"--tensor {text!r}: shape and strides are integers") from None
    if t and strides is not None:
        raise TritonInputError(f"--tensor {text!r}: give .T/.mT or strides, not both")
    x = Tensor(name, typ, tuple(dims), tuple(st))
    return x.T if t == ".T" else x.mT if t == ".mT" else x


# ----------------------------------------------------------------------------- the launch text --

@dataclass
class Call:
    """A launch ``kernel[grid](*args, **kwargs)`` read from text: values, tensors by name."""

    kernel: str
    grid: tuple
    args: list
    kwargs: dict


def parse_call(text: str, tensors: dict[str, Tensor]) -> Call:
    """Read ``kernel[grid](args..., name=value, ...)`` with :mod:`ast` (nothing is evaluated)."""
    where = "--call"
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as e:
        raise TritonInputError(f"{where} {_short(text)}: not a launch kernel[grid](...): {e.msg}") from None
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript)
            and isinstance(node.func.value, ast.Name)):
        raise TritonInputError(f"{where} {_short(text)}: write it as Triton launches a kernel: "
                               "kernel[(gx, gy)](arg, ..., NAME=value)")
    ev = _Evaluator(tensors, where)
    g = node.func.slice
    grid = tuple(ev.int(e, "grid") for e in (g.elts if isinstance(g, ast.Tuple) else [g]))
    if not 1 <= len(grid) <= 3 or any(x < 1 for x in grid):
        raise TritonInputError(f"{where}: the grid {list(grid)} must be 1 to 3 positive integers")
    args = []
    for a in node.args:
        if isinstance(a, ast.Starred):
            raise TritonInputError(f"{where}: *args is not a value; write the arguments out")
        args.append(ev.value(a))
    kwargs = {}
    for k in node.keywords:
        if k.arg is None:
            raise TritonInputError(f"{where}: **kwargs is not a value; write NAME=value")
        kwargs[k.arg] = ev.value(k.value)
    return Call(node.func.value.id, grid, args, kwargs)


def _short(s: str, n: int = 60) -> str:
    s = " ".join(str(s).split())
    return repr(s if len(s) <= n else s[:n - 3] + "...")


class _Evaluator:
    """Values of launch arguments: literals, tensors, their strides and shapes, integer arithmetic."""

    OPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
           ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b,
           ast.LShift: lambda a, b: a << b, ast.RShift: lambda a, b: a >> b}

    def __init__(self, tensors: dict, where: str):
        self.tensors, self.where = tensors, where

    def fail(self, node, why: str):
        raise TritonInputError(f"{self.where}: {_short(ast.unparse(node))}: {why}")

    def int(self, node, what: str) -> int:
        v = self.value(node)
        if not isinstance(v, int) or isinstance(v, bool):
            self.fail(node, f"the {what} must be an integer")
        return v

    def tensor(self, node) -> Tensor:
        v = self.value(node)
        if not isinstance(v, Tensor):
            self.fail(node, "not a tensor")
        return v

    def value(self, node):
        if isinstance(node, ast.Constant):
            if isinstance(node.value, (bool, int, float, str)) or node.value is None:
                return node.value
            self.fail(node, "only numbers, strings, True/False/None are literals here")
        if isinstance(node, ast.Name):
            if node.id in self.tensors:
                return self.tensors[node.id]
            self.fail(node, f"no tensor of that name (tensors: {', '.join(self.tensors) or 'none'}; declare it "
                            "with --tensor NAME=TYPE[SHAPE])")
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = self.value(node.operand)
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                self.fail(node, "a sign applies to a number")
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.BinOp) and type(node.op) in self.OPS:
            a, b = self.int(node.left, "operand"), self.int(node.right, "operand")
            if isinstance(node.op, (ast.FloorDiv, ast.Mod)) and b == 0:
                self.fail(node, "division by zero")
            if isinstance(node.op, (ast.LShift, ast.RShift)) and not 0 <= b < 64:
                self.fail(node, "a shift by 0 to 63")
            v = self.OPS[type(node.op)](a, b)
            if abs(v) >= MAX_INT:
                self.fail(node, "beyond 64 bits")
            return v
        if isinstance(node, ast.Subscript):             # X.shape[i]
            base = node.value
            if isinstance(base, ast.Attribute) and base.attr == "shape":
                t = self.tensor(base.value)
                return _index(t.shape, self.int(node.slice, "index"), node, self)
            self.fail(node, "only X.shape[i] is subscripted")
        if isinstance(node, ast.Attribute):
            dt = _dtype(node)
            if dt is not None:
                return dt
            if node.attr in ("T", "mT") and isinstance(node.value, ast.Name) and node.value.id in self.tensors:
                self.fail(node, f"declare the view with --tensor ({node.value.id}=TYPE[SHAPE]{'.' + node.attr}) "
                                "and pass the tensor by name")
            self.fail(node, "not a value (dtypes are tl.float16, tl.float32, ...)")
        if isinstance(node, ast.Call) and not node.keywords:
            f = node.func
            name = ast.unparse(f)
            if name in ("triton.cdiv", "cdiv") and len(node.args) == 2:
                a, b = (self.int(x, "operand") for x in node.args)
                if b == 0:
                    self.fail(node, "division by zero")
                return -(-a // b)
            if isinstance(f, ast.Attribute) and f.attr in ("stride", "size", "numel", "dim"):
                t = self.tensor(f.value)
                if f.attr in ("numel", "dim") and not node.args:
                    return t.numel() if f.attr == "numel" else t.dim()
                if f.attr in ("stride", "size") and len(node.args) == 1:
                    seq = t.strides if f.attr == "stride" else t.shape
                    return _index(seq, self.int(node.args[0], "dimension"), node, self)
            self.fail(node, "calls allowed: X.stride(i), X.size(i), X.numel(), X.dim(), triton.cdiv(a, b)")
        self.fail(node, "not a value here (literals, tensor names, X.stride(i), X.shape[i], integer arithmetic)")


def _index(seq, i, node, ev):
    if not -len(seq) <= i < len(seq):
        ev.fail(node, f"dimension {i} of a rank-{len(seq)} tensor")
    return seq[i]


def _dtype(node):
    """``tl.float32`` / ``triton.language.float32`` -> that dtype (looked up, not evaluated)."""
    mod = ast.unparse(node.value)
    if mod not in ("tl", "triton.language"):
        return None
    import triton.language as tl
    v = getattr(tl, node.attr, None)
    return v if isinstance(v, tl.dtype) else None


# ----------------------------------------------------------------------------- Triton -----------

def _triton():
    try:
        import triton  # noqa: F401
        from triton.backends.compiler import GPUTarget  # noqa: F401
    except ImportError as e:
        raise TritonUnavailable(f"Triton is not installed ({e}); pip install triton") from None
    return sys.modules["triton"]


def load_kernel(ref: str):
    """``FILE.py:KERNEL`` (or ``FILE.py``: the one @triton.jit function of the file) -> the
    JITFunction; an autotuned / heuristics-wrapped kernel is unwrapped (give its configs' values
    in the launch)."""
    _triton()
    path, _, name = ref.rpartition(":") if ":" in ref and not ref.endswith(".py") else (ref, "", "")
    p = Path(path)
    if not p.is_file():
        raise TritonInputError(f"--triton {ref}: no such file {path!r}" + ("" if name or path.endswith(".py") else
                                                                           " (write FILE.py:KERNEL)"))
    modname = "ptx_formal_triton_src_" + re.sub(r"\W", "_", str(p.resolve()))
    mod = sys.modules.get(modname)
    if mod is None:
        loader = importlib.machinery.SourceFileLoader(modname, str(p))       # any file name, as --python FILE:FUNC
        spec = importlib.util.spec_from_loader(modname, loader)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[modname] = mod
        folder = str(p.resolve().parent)
        sys.path.insert(0, folder)                  # its own imports of modules beside it
        try:
            spec.loader.exec_module(mod)
        except Exception as e:  # noqa: BLE001 - the user's file: its first error line, exit 2
            del sys.modules[modname]
            raise TritonInputError(f"--triton {ref}: importing {path} failed: {type(e).__name__}: "
                                   f"{_first_line(e)}") from None
        finally:
            sys.path.remove(folder)

    unwrap = _jit
    kernels = {k: unwrap(v) for k, v in vars(mod).items() if unwrap(v) is not None
               and getattr(unwrap(v), "__module__", None) == modname}
    if not name:
        if len(kernels) != 1:
            raise TritonInputError(f"--triton {ref}: name the kernel (FILE.py:KERNEL); the file has "
                                   f"{', '.join(kernels) or 'no @triton.jit function'}")
        name = next(iter(kernels))
    fn = unwrap(getattr(mod, name, None))
    if fn is None:
        raise TritonInputError(f"--triton {ref}: {path} has no @triton.jit function {name!r}; it has "
                               f"{', '.join(kernels) or 'none'}")
    return fn


def _jit(obj):
    """The JITFunction of a @triton.jit function, also under @triton.autotune / @triton.heuristics; else None."""
    from triton.runtime.jit import JITFunction
    while not isinstance(obj, JITFunction) and hasattr(obj, "fn"):
        obj = obj.fn
    return obj if isinstance(obj, JITFunction) else None


def _first_line(e: BaseException) -> str:
    s = str(e).strip()
    return s.splitlines()[0] if s else type(e).__name__


def _target(target) -> int:
    if isinstance(target, int):
        return target
    t = str(target).strip()
    if t in _TARGETS:
        return _TARGETS[t]
    raise TritonInputError(f"target {t!r}: one of {', '.join(_TARGETS)}")


def _ptx_version(v) -> int | None:
    """``"9.0"`` / ``90`` -> 90 (Triton's ptx_version); None: Triton's default."""
    if v is None:
        return None
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    m = re.fullmatch(r"\s*(\d+)\.(\d)\s*", str(v))
    if not m:
        raise TritonInputError(f"PTX version {v!r}: write it as 8.7, 9.0, ...")
    return int(m.group(1)) * 10 + int(m.group(2))


@contextlib.contextmanager
def _ptxas_for(ptx_version: int | None, cc: int):
    """Triton assembles what it emits; a PTX ISA newer than its ptxas reads (Triton's bundled
    ptxas of CUDA 12.9 reads 8.8; the H100's CUDA 13.0 driver JITs up to 9.0) is assembled by
    the ``ptxas`` on PATH when that one reads it, as tools/make_kernel_corpus.py does."""
    from triton import knobs
    from triton.backends.nvidia.compiler import get_ptxas, ptx_get_version
    from triton.knobs import NvidiaTool
    cur = get_ptxas(cc)
    if ptx_version is None or ptx_get_version(cur.version) >= ptx_version:
        yield cur.path
        return
    found = shutil.which("ptxas")
    tool = NvidiaTool.from_path(found) if found else None
    if tool is None or ptx_get_version(tool.version) < ptx_version:
        raise TritonInputError(f"PTX ISA {ptx_version // 10}.{ptx_version % 10} needs a newer ptxas than "
                               f"Triton's ({cur.path}, CUDA {cur.version})"
                               + (f" or the one on PATH ({tool.path}, CUDA {tool.version})" if tool else "")
                               + "; set TRITON_PTXAS_PATH to one that reads it")
    with knobs.nvidia.scope():
        knobs.nvidia.ptxas = tool.path
        knobs.nvidia.ptxas_blackwell = tool.path
        yield tool.path


_COMPILED: dict = {}        # in-process cache: (kernel, target, signature, constexprs, attrs, options) -> (ptx, md)


@dataclass
class TritonLaunch:
    """A compiled Triton launch: the PTX, its parsed module, the spec derived from the launch,
    and how it was compiled (``info``: Triton version, target, options, the argument of each
    PTX parameter)."""

    ptx: str
    module: Any
    spec: Any
    spec_data: dict
    info: dict = field(default_factory=dict)
    _loc: tuple | None = field(default=None, init=False, repr=False, compare=False)

    def source(self, ptx_line: int) -> tuple[str, int] | None:
        """The Triton source line (file, line) the PTX line was compiled from (its ``.loc``)."""
        if self._loc is None:
            files, cur, locs = {}, None, [None]
            for t in self.ptx.splitlines():
                m = re.match(r'\s*\.file\s+(\d+)\s+"([^"]*)"', t)
                if m:
                    files[int(m.group(1))] = m.group(2)
            for t in self.ptx.splitlines():
                m = re.match(r"\s*\.loc\s+(\d+)\s+(\d+)", t)
                if m:
                    cur = (int(m.group(1)), int(m.group(2)))
                elif t.strip().startswith("}"):
                    cur = None
                locs.append(cur)
            self._loc = (files, locs)
        files, locs = self._loc
        loc = locs[ptx_line] if 0 < ptx_line < len(locs) else None
        if loc is None or loc[0] not in files or loc[1] == 0:
            return None
        return files[loc[0]], loc[1]

    def explain(self, witness) -> list[str]:
        """Lines that place a witness in the Triton source: its line (with the code) and the source
        lines of its path."""
        import linecache
        out = []
        at = self.source(witness.line)
        if at:
            code = linecache.getline(at[0], at[1]).strip()
            out.append(f"  Triton source: {Path(at[0]).name}:{at[1]}" + (f": {code}" if code else ""))
        path = []
        for ln, _ in witness.path:
            a = self.source(ln)
            if a and (not path or path[-1] != a):
                path.append(a)
        if path:
            out.append("  Triton path: " + ", ".join(f"{Path(f).name}:{n}" for f, n in path))
        return out

    def describe(self) -> str:
        """One line: what was compiled and how its arguments became parameters."""
        i = self.info
        sp = self.spec
        o = i["options"]
        fixed = i["specialised"]
        return (f"triton {i['triton']}: {i['kernel']} for {i['target']} ({o['num_warps']} warps, {o['num_stages']} "
                f"stages, fp fusion {'on' if o['enable_fp_fusion'] else 'off'}): grid {list(sp.grid)} x {sp.block[0]} "
                f"threads, {sp.shared_bytes} shared bytes; "
                + ", ".join(f"{a} = {v}" for a, v in i["arguments"].items())
                + (f"; compiled in: {', '.join(f'{n} = {v}' for n, v in fixed.items())}" if fixed else ""))


def _launch_kwargs(fn, kwargs: dict) -> dict:
    """What Triton's ``JITFunction.run`` adds before binding (3.9: debug and two instrumentation knobs)."""
    from triton import knobs
    kw = dict(kwargs)
    kw["debug"] = kw.get("debug", fn.debug) or knobs.runtime.debug
    for k, knob in (("instrumentation_mode", "instrumentation_mode"),
                    ("fpsan_homomorphic_casts", "fpsan_homomorphic_casts")):
        if hasattr(knobs.compilation, knob):
            kw.setdefault(k, getattr(knobs.compilation, knob))
    return kw


def _quiet() -> None:
    """Triton 3.9 announces default changes (fp fusion, ...) as UserWarnings from its knobs: the
    options it used are in ``info`` and on the first output line instead."""
    warnings.filterwarnings("ignore", category=UserWarning, module=r"triton\.")


def _bind(fn, backend, binder, args, kw, where):
    """Triton's launcher, up to the compile: bind the arguments, specialise, pack."""
    names = [p.name for p in fn.params]
    try:
        bound, specialization, opts = binder(*args, **kw)
    except TypeError as e:
        raise TritonInputError(f"{where}: {_first_line(e).replace('dynamic_func()', fn.__name__ + '()')}; "
                               f"{fn.__name__} takes {', '.join(names)}") from None
    try:
        options, signature, constexprs, attrs = fn._pack_args(backend, kw, bound, specialization, opts)
    except KeyError as e:
        raise TritonInputError(f"{where}: {e.args[0] if e.args else e}; {fn.__name__} takes {', '.join(names)} "
                               f"and launch options (num_warps, num_stages, ...)") from None
    except (ValueError, AssertionError) as e:         # Triton's option checks (num_warps a power of 2, ...)
        raise TritonInputError(f"{where}: {_first_line(e)}") from None
    return bound, specialization, options, signature, constexprs, attrs


def compile_launch(fn, grid, args, kwargs: dict | None = None, *, target, contracts=(), ptx_version=None,
                   source: str | None = None) -> TritonLaunch:
    """Compile ``fn[grid](*args, **kwargs)`` for ``target`` ("sm_80", "sm_89", "sm_90") and derive its
    spec.  ``contracts``: ``"C = A @ B"`` strings (or (out, expression) pairs), in order."""
    triton = _triton()
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    try:
        from triton.runtime.jit import create_function_from_signature
    except ImportError:
        create_function_from_signature = None
    jfn = _jit(fn)
    if jfn is None:
        raise TritonInputError(f"{fn!r} is not a @triton.jit function")
    fn = jfn
    if create_function_from_signature is None or not hasattr(fn, "_pack_args"):
        raise TritonUnavailable(f"Triton {triton.__version__}: this front end binds arguments with Triton 3.9's "
                                "launcher (create_function_from_signature, JITFunction._pack_args), which it lacks")

    from .parse import parse_module
    from .spec import load_spec

    cc = _target(target)
    kwargs = dict(kwargs or {})
    pv = _ptx_version(kwargs.pop("ptx_version", None) if ptx_version is None else ptx_version)
    if "ptx_version" in kwargs and _ptx_version(kwargs.pop("ptx_version")) != pv:
        raise TritonInputError("ptx_version given twice with different values")
    where = source or f"the launch of {fn.__name__}"
    names = [p.name for p in fn.params]
    for a in args:
        if isinstance(a, (tuple, list)):
            raise TritonUnavailable(f"{where}: tuple arguments are not modelled; pass their elements")
    seen = {}
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, Tensor):
            if a.name in seen:
                raise TritonInputError(f"{where}: tensor {a.name} is passed twice (one buffer per pointer)")
            seen[a.name] = a
    gpu = GPUTarget("cuda", cc, 32)
    backend = make_backend(gpu)
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    kw = _launch_kwargs(fn, kwargs)
    if pv is not None:
        kw["ptx_version"] = pv
    with warnings.catch_warnings():
        _quiet()
        bound, specialization, options, signature, constexprs, attrs = _bind(fn, backend, binder, args, kw, where)
    for n, ty in signature.items():
        if isinstance(ty, str) and ty.startswith("tensordesc"):
            raise TritonUnavailable(f"{where}: argument {n} is a tensor descriptor (host TMA): not modelled yet")
    for n, v in bound.items():
        if isinstance(v, Tensor) and signature[n] == "constexpr":
            raise TritonInputError(f"{where}: tensor {v.name} is passed as the constexpr {n}")
        if signature[n] != "constexpr" and signature[n].startswith("*") and not isinstance(v, Tensor):
            raise TritonInputError(f"{where}: {n} is a pointer; pass a tensor")
    if callable(grid):
        grid = grid(dict(bound))
    grid = tuple(grid) if isinstance(grid, (tuple, list)) else (grid,)
    if not 1 <= len(grid) <= 3 or not all(isinstance(g, int) and not isinstance(g, bool) and g >= 1 for g in grid):
        raise TritonInputError(f"{where}: the grid {grid!r} must be 1 to 3 positive integers")

    src_cls = ASTSource
    if getattr(fn, "is_gluon", lambda: False)():
        from triton.experimental.gluon._runtime import GluonASTSource as src_cls
    key = (fn.cache_key, cc, tuple(signature.items()), repr(sorted(constexprs.items())), repr(sorted(attrs.items())),
           repr(sorted(options.__dict__.items())))
    if key not in _COMPILED:
        try:
            with _ptxas_for(options.ptx_version, cc) as ptxas, warnings.catch_warnings():
                _quiet()
                comp = triton.compile(src_cls(fn, signature, constexprs, attrs), target=gpu, options=options.__dict__)
        except TritonInputError:
            raise
        except Exception as e:  # noqa: BLE001 - Triton's compile errors: their message's first line, exit 2
            raise TritonInputError(f"triton could not compile {fn.__name__} for sm_{cc}: {_compile_message(fn, e)}") \
                from None
        _COMPILED[key] = (comp.asm["ptx"], comp.metadata, ptxas)
    ptx, md, ptxas = _COMPILED[key]

    mod = parse_module(ptx, path=f"<triton {fn.__name__} sm_{cc}>")
    entry = md.name
    pf = mod.functions[entry]
    runtime = [n for n in names if signature[n] != "constexpr"]
    n_extra = len(pf.params) - len(runtime)
    if not 0 <= n_extra <= len(_SCRATCH):
        raise RuntimeError(f"{entry}: {len(pf.params)} PTX parameters for {len(runtime)} runtime arguments "
                           f"({', '.join(runtime)}) and at most {len(_SCRATCH)} scratch pointers")
    ncta = int(getattr(md, "num_ctas", 1) or 1)
    g3 = list(grid) + [1] * (3 - len(grid))
    g3[0] *= ncta                 # Triton launches grid x num_ctas CTAs, in clusters of num_ctas
    req = pf.directives.get("reqntid")
    threads = int(req[0]) * (int(req[1]) if len(req) > 1 else 1) * (int(req[2]) if len(req) > 2 else 1) if req \
        else 32 * int(md.num_warps)
    params, buffers, arguments = {}, [], {}
    for n, p in zip(runtime, pf.params):
        v = bound[n]
        if isinstance(v, Tensor):
            if p.size != 8:
                raise RuntimeError(f"{entry}: pointer argument {n} became the {p.size}-byte parameter {p.name}")
            buffers.append({"name": v.name, "param": p.name, "type": v.type, "shape": list(v.shape),
                            "strides": list(v.strides)})
            arguments[n] = v.name
        else:
            params[p.name] = int(v) if isinstance(v, bool) else v
            arguments[n] = repr(v)
    for (what, p) in zip(_SCRATCH, pf.params[len(runtime):]):
        size = int(getattr(md, f"{what}_size", 0) or 0)
        if size and what == "global_scratch":
            if "global_scratch" in seen:
                raise TritonInputError(f"{where}: the tensor name global_scratch is Triton's scratch buffer's")
            buffers.append({"name": "global_scratch", "param": p.name, "type": "u8",
                            "shape": [size * g3[0] * g3[1] * g3[2]]})
            arguments[what] = f"{size} bytes per program"
        elif size:
            raise TritonUnavailable(f"{where}: the kernel needs {size} bytes of {what.replace('_', ' ')} per program "
                                    "(profiling): not modelled")
    # runtime parameters Triton compiled in (an integer 1, None), as its launcher does
    specialised = {n: repr(bound[n]) for n, p in zip(names, fn.params)
                   if signature[n] == "constexpr" and not p.is_constexpr}
    contract = {}
    for c in contracts:
        out, expr = c if isinstance(c, tuple) else _split_contract(c)
        if out in contract:
            raise TritonInputError(f"contract {c!r}: {out} already has a contract")
        contract[out] = expr
    data = {"entry": entry, "grid": g3, "block": [threads, 1, 1], "shared_bytes": int(md.shared),
            "params": params, "buffer": buffers, "contract": contract}
    spec = load_spec(data, source=where)
    info = {"triton": triton.__version__, "kernel": fn.__name__, "target": f"sm_{cc}{'a' if cc >= 90 else ''}",
            "ptx_version": mod.version, "ptxas": ptxas,
            "options": {k: v for k, v in options.__dict__.items() if k in ("num_warps", "num_stages", "num_ctas",
                                                                           "enable_fp_fusion", "maxnreg")},
            "constexprs": {names[k[0]]: (str(v) if not isinstance(v, (int, float, str)) or isinstance(v, bool)
                                         else v) for k, v in constexprs.items()},
            "specialised": specialised,
            "arguments": arguments, "grid": list(grid)}
    return TritonLaunch(ptx, mod, spec, data, info)


def _split_contract(text: str) -> tuple[str, str]:
    out, eq, expr = str(text).partition("=")
    if not eq or not re.fullmatch(r"\s*[A-Za-z_]\w*\s*", out):
        raise TritonInputError(f"--contract {_short(text)}: write OUT = X @ Y (or X.T @ Y, X @ Y + Z), e.g. C = A @ B")
    return out.strip(), expr.strip()


def _compile_message(fn, e: BaseException) -> str:
    """Triton's message, one line: a CompilationError's position (as a line of the kernel's file)
    and its error; anything else its first line."""
    from triton.compiler.errors import CompilationError
    if isinstance(e, CompilationError):
        node = getattr(e, "node", None)
        msg = e.error_message or (_first_line(e.__cause__) if e.__cause__ else "")
        text = msg.strip().splitlines()[0] if msg and msg.strip() else type(e).__name__
        if node is not None and hasattr(node, "lineno"):
            if e.src is not None and e.src == fn.src:          # the kernel's own source: a line of its file
                line = fn.def_file_line_number + node.lineno - 1
                return f"{Path(fn.fn.__code__.co_filename).name}:{line}: {text}"
            return f"line {node.lineno} of a function it calls: {text}"
        return text
    return f"{type(e).__name__}: {_first_line(e)}"


# ----------------------------------------------------------------------------- public calls -----

def _kwargs(constexprs, options) -> dict:
    kw = dict(constexprs or {})
    for k, v in options.items():
        if k in kw and kw[k] != v:
            raise TritonInputError(f"{k} given twice ({kw[k]!r} and {v!r})")
        kw[k] = v
    return kw


def triton_launch(fn, grid, args, constexprs: dict | None = None, *, target, contract=None, ptx_version=None,
                  **launch_options) -> TritonLaunch:
    """Compile ``fn[grid](*args, **constexprs, **launch_options)`` (launch options as Triton's:
    ``num_warps``, ``num_stages``, ``enable_fp_fusion``, ...) for ``target`` and derive the spec.
    ``args`` hold :class:`Tensor` for pointers; ``contract``: ``"C = A @ B"`` or a list of them."""
    contracts = [contract] if isinstance(contract, str) else list(contract or [])
    return compile_launch(fn, grid, list(args), _kwargs(constexprs, launch_options), target=target,
                          contracts=contracts, ptx_version=ptx_version)


def launch_from_text(kernel_ref: str, call: str, tensors: list[str], *, target, contracts=(), ptx_version=None,
                     options: dict | None = None) -> TritonLaunch:
    """The CLI's form: ``--triton FILE.py:KERNEL --call TEXT --tensor ... --contract ...``."""
    ts = {}
    for t in tensors:
        x = parse_tensor(t)
        if x.name in ts:
            raise TritonInputError(f"--tensor {x.name} is declared twice")
        ts[x.name] = x
    _triton()
    c = parse_call(call, ts)
    fn = load_kernel(kernel_ref if ":" in kernel_ref and not kernel_ref.endswith(".py") else
                     f"{kernel_ref}:{c.kernel}")
    if c.kernel != fn.__name__:
        raise TritonInputError(f"--call launches {c.kernel}, but --triton names {fn.__name__}")
    kw = dict(c.kwargs)
    for k, v in (options or {}).items():
        if v is None:
            continue
        if k in kw and kw[k] != v:
            raise TritonInputError(f"--{k.replace('_', '-')} {v} and {k}={kw[k]!r} in --call disagree")
        kw[k] = v
    passed = {a.name for a in list(c.args) + list(kw.values()) if isinstance(a, Tensor)}
    unused = [t for t in ts if t not in passed]
    if unused:
        raise TritonInputError(f"--tensor {', '.join(unused)}: declared but not passed in --call")
    return compile_launch(fn, c.grid, c.args, kw, target=target, contracts=list(contracts), ptx_version=ptx_version)
