"""PTX modules as compilers emit them -> :class:`Module` (functions, declarations, instructions).

The front end reads whole modules (``.version``, ``.target``, ``.address_size``, ``.entry`` /
``.func`` with parameters, ``.reg`` incl. ``%r<100>`` ranges, ``.shared`` / ``.local`` /
``.global`` / ``.const`` declarations incl. ``extern`` dynamic shared memory and initialisers,
labels, predicates, performance directives, comments) and keeps the source line of every
instruction.  Debug sections (``.section .debug_*``), ``.loc``, ``.file`` and ``.pragma`` are
skipped.

PTX scoping is honoured: registers, variables and labels declared inside a ``{ }`` block (inline
asm, call sequences) are local to it; a name declared in several blocks is renamed per block
(``LAB_WAIT~b3``) so that each reference reaches its own declaration.  Calls of ``.func``
definitions are inlined at their call sites (the PTX ABI: ``st.param`` into the caller's
``.param`` variables, ``ld.param`` of the callee's formals, ``ret`` a jump to the call's end);
a call that cannot be inlined (no body in the module, recursion, an indirect target,
``.reg`` parameters) stays a ``call`` that is unsupported when executed, with the reason.

It knows the *syntax* only.  What an instruction does lives in ``specs/ptx_ops.toml`` and
``specs/movement.toml``; matrix instructions (``mma``, ``mma.sp``, ``wmma.*``) are parsed by
the catalog (:func:`formal.catalog.parse_instruction`), the project's one syntax source for
them.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from ..transform.steps import split_top  # noqa: F401  (one operand-list splitter)

MAX_MODULE_CHARS = 64 << 20     # a bigger module is refused (exit 2) before any work
MAX_INLINE_DEPTH = 16           # call nesting inlined; deeper (or recursive) calls are unsupported
MAX_INLINED_INSTRS = 1 << 21    # instructions of one function after inlining
MAX_STATIC_SHARED = 232448      # 227 KiB: ptxas rejects more static shared memory per CTA
MAX_LOCAL_BYTES = 512 << 10     # per thread (ptxas: 512 KiB of local memory)
MAX_VAR_BYTES = 1 << 28         # a .global / .const variable the interpreter allocates


class PTXSyntaxError(ValueError):
    """A module the front end cannot read; ``line`` is its 1-based source line."""

    def __init__(self, line: int, message: str, path: str | None = None):
        self.line, self.path = int(line), path
        super().__init__(f"{path or '<ptx>'}:{line}: {message}")


class Unsupported(Exception):
    """A construct the engine does not model: reported with its line, never guessed."""

    def __init__(self, line: int, instruction: str, why: str = ""):
        self.line, self.instruction, self.why = int(line), instruction, why
        super().__init__(f"line {line}: unsupported: {instruction}" + (f" ({why})" if why else ""))


# ---------------------------------------------------------------------------------------
# Operands

@dataclass(frozen=True)
class Reg:
    name: str                       # with its '%' (or a plain identifier for user registers)
    neg: bool = False               # !%p (predicate operands)


@dataclass(frozen=True)
class Imm:
    value: int                      # integer value or the raw bits of a float immediate
    kind: str = "int"               # int | f32 | f64


@dataclass(frozen=True)
class Sym:
    name: str                       # a label or a variable (address of a declared array)


@dataclass(frozen=True)
class Addr:
    base: Any                       # Reg, Sym or None (absolute)
    offset: int = 0


@dataclass(frozen=True)
class Vec:
    items: tuple                    # Reg / Imm / None (the sink '_')


@dataclass(frozen=True)
class Pair:
    """``d|p`` destinations (setp, shfl)."""
    first: Reg
    second: Reg


@dataclass(frozen=True)
class TensorAddr:
    """``[tensormap, {c0, c1, ...}]``: a TMA tensor address (cp.async.bulk.tensor, prefetch.tensor)."""
    base: Any
    coords: Vec


@dataclass
class Instr:
    line: int
    opcode: str                     # e.g. 'ld.global.v4.b32'
    ops: list
    text: str
    pred: str | None = None         # guard predicate register
    pred_neg: bool = False
    form: Any = None                # catalog Form for mma / wmma
    imm: dict = field(default_factory=dict)
    unsupported: str | None = None  # set by the front end: executing this is unsupported, for this reason
    scope: tuple = (0,)             # the { } blocks the instruction sits in (0 = the function body)

    @property
    def parts(self) -> list[str]:
        return self.opcode.split(".")

    @property
    def head(self) -> str:
        return self.opcode.split(".", 1)[0]


@dataclass
class Var:
    name: str
    space: str                      # shared | local | global | const | param | reg (a .reg formal)
    size: int                       # bytes (0 for extern dynamic shared)
    align: int
    extern: bool = False
    elem_bits: int = 8
    init: bytes | None = None
    line: int = 0
    init_unmodelled: str = ""       # an initialiser the engine does not model (addresses of symbols)
    from_param: bool = False        # a .param variable of a function body (call ABI), kept as .local


class RegFile(dict):
    """Declared registers, name -> value.  ``%r<N>`` ranges are kept as ranges (ptxas accepts
    ``%r<99999999>``); a name is looked up in the explicit entries, then in the ranges."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.ranges: dict[str, list] = {}          # prefix -> [(count, value)]

    def add_range(self, prefix: str, count: int, value) -> None:
        self.ranges.setdefault(prefix, []).append((count, value))

    def _ranged(self, name: str):
        if not self.ranges or not isinstance(name, str):
            return None
        k = len(name)
        while k > 0 and name[k - 1].isdigit():
            k -= 1
            digits = name[k:]
            if digits != str(int(digits)):
                continue
            for count, value in reversed(self.ranges.get(name[:k], ())):
                if int(digits) < count:
                    return (value,)
        return None

    def get(self, name, default=None):
        if dict.__contains__(self, name):
            return dict.__getitem__(self, name)
        r = self._ranged(name)
        return default if r is None else r[0]

    def __contains__(self, name) -> bool:
        return dict.__contains__(self, name) or self._ranged(name) is not None

    def __getitem__(self, name):
        if dict.__contains__(self, name):
            return dict.__getitem__(self, name)
        r = self._ranged(name)
        if r is None:
            raise KeyError(name)
        return r[0]

    def merge(self, other: "RegFile") -> None:
        self.update(other)
        for p, rs in other.ranges.items():
            self.ranges.setdefault(p, []).extend(rs)


@dataclass
class Function:
    name: str
    entry: bool
    params: list[Var]
    line: int
    regs: RegFile = field(default_factory=RegFile)           # name -> bits (1 for .pred)
    reg_types: RegFile = field(default_factory=RegFile)      # name -> declared type ("b32", "f16x2", ...)
    vars: list[Var] = field(default_factory=list)            # .shared / .local inside the body
    instrs: list[Instr] = field(default_factory=list)
    labels: dict[str, int] = field(default_factory=dict)     # label -> instruction index
    directives: dict[str, Any] = field(default_factory=dict)
    rets: list[Var] = field(default_factory=list)            # .func return parameters
    body: bool = True                                        # False: a declaration (prototype, .extern)


@dataclass
class Module:
    version: str
    target: str
    targets: list[str]
    address_size: int
    functions: dict[str, Function]
    vars: list[Var]
    path: str | None = None
    declarations: dict[str, Function] = field(default_factory=dict)   # .func / .entry without a body
    aliases: dict[str, str] = field(default_factory=dict)             # .alias name -> target

    def entry(self, name: str | None = None) -> Function:
        ents = [f for f in self.functions.values() if f.entry]
        if name is not None:
            f = self.functions.get(name)
            if f is None or not f.entry:
                raise KeyError(f"no .entry named {name!r} (entries: {', '.join(e.name for e in ents) or 'none'})")
            return f
        if len(ents) != 1:
            raise KeyError(f"the module has {len(ents)} entries ({', '.join(e.name for e in ents)}); name one")
        return ents[0]

    def instructions(self):
        for f in self.functions.values():
            yield from f.instrs


# ---------------------------------------------------------------------------------------
# Scanner: comments out (line numbers kept), statements with their first line

_TYPE_BITS = {"pred": 1, "b8": 8, "u8": 8, "s8": 8, "b16": 16, "u16": 16, "s16": 16, "f16": 16, "bf16": 16,
              "b32": 32, "u32": 32, "s32": 32, "f32": 32, "f16x2": 32, "bf16x2": 32, "tf32": 32,
              "b64": 64, "u64": 64, "s64": 64, "f64": 64, "b128": 128, "e4m3x2": 16, "e5m2x2": 16}


_STRING_OR_COMMENT = re.compile(r'"|//|/\*')


def _strip_comments(text: str, path) -> str:
    # jumps from one quote or comment opener to the next (the text between is kept as is)
    out, i, n = [], 0, len(text)
    while i < n:
        m = _STRING_OR_COMMENT.search(text, i)
        if m is None:
            out.append(text[i:])
            break
        k = m.start()
        out.append(text[i:k])
        if m.group() == '"':
            j = text.find('"', k + 1)
            j = n - 1 if j < 0 else j
            out.append(text[k:j + 1])
            i = j + 1
        elif m.group() == "//":
            j = text.find("\n", k)
            i = n if j < 0 else j
        else:
            j = text.find("*/", k + 2)
            if j < 0:
                raise PTXSyntaxError(text.count("\n", 0, k) + 1, "unterminated /* comment", path)
            out.append(re.sub(r"[^\n]", " ", text[k:j + 2]))
            i = j + 2
    return "".join(out)


_LABEL = re.compile(r"\s*([$%A-Za-z_][\w$]*)\s*$")
_SPECIAL = frozenset('\n";{}:')
_ORDINARY = re.compile(r'[^\n";{}:]+')


def _statements(text: str, path):
    """Yield (line, kind, text): kind 'stmt' (ended by ';'), 'open' (text before '{'),
    'close', 'label'."""
    cur, line0, line, depth_init = [], None, 1, 0
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            cur.append(" ")
            i += 1
            continue
        if c == '"':
            j = text.find('"', i + 1)
            j = n - 1 if j < 0 else j
            if line0 is None:
                line0 = line
            cur.append(text[i:j + 1])
            line += text.count("\n", i, j + 1)
            i = j + 1
            continue
        if c not in _SPECIAL:
            # a run of ordinary characters: kept as they are (one append, not one per character)
            j = _ORDINARY.match(text, i).end()
            if line0 is None and not text[i:j].isspace():
                line0 = line
            cur.append(text[i:j])
            i = j
            continue
        if line0 is None and not c.isspace():
            line0 = line
        s = "".join(cur)
        if c == ";":
            if depth_init:
                cur.append(c)
            else:
                yield line0 or line, "stmt", s.strip()
                cur, line0 = [], None
        elif c == "{":
            st = s.strip()
            if depth_init or st.endswith("="):
                depth_init += 1                 # an initializer
                cur.append(c)
            elif st and (st.startswith("@") or re.match(r"[A-Za-z]", st)):
                j = text.find("}", i + 1)       # a vector operand: copy through its '}'
                if j < 0:
                    raise PTXSyntaxError(line, "unbalanced '{'", path)
                line += text.count("\n", i, j)
                cur.append(text[i:j + 1].replace("\n", " "))
                i = j + 1
                continue
            else:
                yield line0 or line, "open", st
                cur, line0 = [], None
        elif c == "}":
            if depth_init:
                depth_init -= 1
                cur.append(c)
            else:
                if s.strip():
                    yield line0 or line, "stmt", s.strip()   # e.g. a last statement without ';'
                yield line, "close", ""
                cur, line0 = [], None
        elif c == ":" and _LABEL.fullmatch(s) and not text.startswith("::", i) and not s.rstrip().endswith(":"):
            yield line0 or line, "label", s.strip()
            cur, line0 = [], None
        else:
            cur.append(c)
        i += 1
    if "".join(cur).strip():
        raise PTXSyntaxError(line0 or line, f"statement not ended by ';': {''.join(cur).strip()[:60]}", path)



# ---------------------------------------------------------------------------------------
# Operands

_INT = re.compile(r"-?(0[xX][0-9a-fA-F]+|0[bB][01]+|0[0-7]+|[0-9]+)[uU]?$")
_IDENT = r"[%$A-Za-z_][\w$.]*"
_IDENT_RE = re.compile(_IDENT)
_ADDR_RE = re.compile(rf"({_IDENT})\s*(?:([+-])\s*(.+))?", re.S)
_F32_RE = re.compile(r"0([fF])([0-9a-fA-F]{8})")
_F64_RE = re.compile(r"0([dD])([0-9a-fA-F]{16})")
_DEC_FLOAT = re.compile(r"-?[0-9]*\.[0-9]+([eE][-+]?[0-9]+)?|-?[0-9]+[eE][-+]?[0-9]+")
_SYM_PLUS = re.compile(rf"({_IDENT})\s*\+\s*(.+)")
MAX_EXPR_CHARS = 200            # an address offset / initialiser expression longer than this is refused
_LIMIT = 1 << 64                # every intermediate value of a constant expression stays within +-2^64


def _int_lit(t: str) -> int | None:
    t = t.strip()
    if len(t) > 70 or not _INT.match(t):
        return None
    neg = t.startswith("-")
    body = t.lstrip("-").rstrip("uU")
    if body.lower().startswith("0x"):
        v = int(body, 16)
    elif body.lower().startswith("0b"):
        v = int(body[2:], 2)
    elif len(body) > 1 and body.startswith("0"):
        v = int(body, 8)
    else:
        v = int(body)
    return -v if neg else v


_EXPR_TOKEN = re.compile(r"\s*(0[xX][0-9a-fA-F]+|0[bB][01]+|[0-9]+[uU]?|[-+*()])")


def _const_expr(t: str) -> int | None:
    """Integer constant expressions compilers write in offsets (16+4, -8, 2*64, (8+8)*2): +, -, *,
    parentheses and integer literals, parsed without eval, bounded in length, depth and value
    (None if it is not such an expression)."""
    if len(t) > MAX_EXPR_CHARS:
        return None
    toks, i = [], 0
    t = t.strip()
    while i < len(t):
        m = _EXPR_TOKEN.match(t, i)
        if not m:
            return None
        toks.append(m.group(1))
        i = m.end()
    if not toks:
        return None
    pos = [0]

    def peek():
        return toks[pos[0]] if pos[0] < len(toks) else None

    def take():
        pos[0] += 1
        return toks[pos[0] - 1]

    def atom(depth):
        if depth > 32:
            raise ValueError
        tk = peek()
        if tk in ("-", "+"):
            take()
            v = atom(depth + 1)
            return -v if tk == "-" else v
        if tk == "(":
            take()
            v = expr(depth + 1)
            if take() != ")":
                raise ValueError
            return v
        if tk is None or tk in ")*":
            raise ValueError
        v = _int_lit(take())
        if v is None:
            raise ValueError
        return v

    def term(depth):
        v = atom(depth)
        while peek() == "*":
            take()
            v *= atom(depth)
            if abs(v) > _LIMIT:
                raise OverflowError
        return v

    def expr(depth):
        v = term(depth)
        while peek() in ("+", "-"):
            v = v + term(depth) if take() == "+" else v - term(depth)
            if abs(v) > _LIMIT:
                raise OverflowError
        return v

    try:
        v = expr(0)
        if pos[0] != len(toks) or abs(v) > _LIMIT:
            return None
        return v
    except (ValueError, OverflowError, IndexError):
        return None


class _OperandError(Exception):
    pass


def parse_operand(tok: str, line: int, path=None):
    try:
        return _operand(tok.strip())
    except _OperandError as e:
        raise PTXSyntaxError(line, str(e), path) from None


def _show(t: str) -> str:
    return repr(t if len(t) <= 80 else t[:60] + "...")


@lru_cache(maxsize=1 << 16)
def _operand(t: str):
    """One operand (cached: operands are immutable and repeat through a module)."""
    if not t:
        raise _OperandError("empty operand")
    if t.startswith("{"):
        if not t.endswith("}"):
            raise _OperandError(f"unbalanced braces in {_show(t)}")
        items = []
        for x in split_top(t[1:-1]):
            items.append(None if x == "_" else _operand(x.strip()))
        return Vec(tuple(items))
    if t.startswith("["):
        if not t.endswith("]"):
            raise _OperandError(f"unbalanced brackets in {_show(t)}")
        inner = t[1:-1].strip()
        parts = split_top(inner)
        if len(parts) == 2 and parts[1].startswith("{"):          # [tensormap, {c0, c1, ...}]
            base = _operand(parts[0])
            coords = _operand(parts[1])
            if not isinstance(base, (Reg, Sym)) or not isinstance(coords, Vec):
                raise _OperandError(f"cannot read tensor address operand {_show(t)}")
            return TensorAddr(base, coords)
        m = _ADDR_RE.fullmatch(inner)
        if m:
            off = 0
            if m.group(3) is not None:
                v = _const_expr(m.group(3))
                if v is None:
                    raise _OperandError(f"cannot read address offset in {_show(t)} (an integer constant "
                                        f"expression within 64 bits)")
                off = -v if m.group(2) == "-" else v
            nm = m.group(1)
            base = Reg(nm) if nm.startswith("%") else Sym(nm)
            return Addr(base, off)
        v = _const_expr(inner)
        if v is not None:
            return Addr(None, v)
        raise _OperandError(f"cannot read address operand {_show(t)}")
    m = _F32_RE.fullmatch(t)
    if m:
        return Imm(int(m.group(2), 16), "f32")
    m = _F64_RE.fullmatch(t)
    if m:
        return Imm(int(m.group(2), 16), "f64")
    v = _int_lit(t)
    if v is not None:
        if not -(1 << 64) < v < (1 << 64):
            raise _OperandError(f"integer immediate {_show(t)} does not fit 64 bits")
        return Imm(v)
    if len(t) < 80 and _DEC_FLOAT.fullmatch(t):
        import struct
        return Imm(struct.unpack("<Q", struct.pack("<d", float(t)))[0], "f64")
    if "|" in t:
        a, b = (x.strip() for x in t.split("|", 1))
        return Pair(_operand(a), _operand(b))
    neg = t.startswith("!")
    if neg:
        t = t[1:].strip()
    if _IDENT_RE.fullmatch(t):
        if t.startswith("%"):
            return Reg(t, neg)
        if neg:
            raise _OperandError(f"'!' applies to predicate registers only: {_show(t)}")
        return Sym(t)
    m = _SYM_PLUS.fullmatch(t)       # symbol+offset as a value (mov %r, smem+16)
    if m:
        v = _const_expr(m.group(2))
        if v is not None:
            return Addr(Sym(m.group(1)), v)
    raise _OperandError(f"cannot read operand {_show(t)}")


# ---------------------------------------------------------------------------------------
# Declarations

_STATE_SPACES = ("reg", "shared", "local", "global", "const", "param", "sreg")
_QUALS = re.compile(r"^((?:\s*\.\w+)+)")


def _split_quals(stmt: str) -> str:
    """``.reg.b16 hl`` -> ``.reg .b16 hl`` (qualifiers written without spaces; ptxas accepts them)."""
    m = _QUALS.match(stmt)
    if not m:
        return stmt
    q = m.group(1)
    return re.sub(r"(?<=\w)\.", " .", q) + stmt[m.end():]


def _decl(stmt: str, line: int, path, space_hint=None) -> tuple[list, Var | None, str]:
    """Parse a .reg / variable declaration; returns (registers, variable, space).  Registers
    are (name, bits) or (prefix, bits, count) for a ``%r<N>`` range."""
    stmt = _split_quals(stmt)
    head, eq, init_txt = stmt.partition("=")
    toks = head.replace(",", " , ").split()
    quals = []
    i = 0
    while i < len(toks) and toks[i].startswith("."):
        quals.append(toks[i][1:])
        i += 1
        if quals[-1] == "align" and i < len(toks):
            quals.append("#" + toks[i])
            i += 1
    rest = " ".join(toks[i:])
    space = next((q for q in quals if q in _STATE_SPACES), None)
    if space is None:
        raise PTXSyntaxError(line, f"declaration without a state space: {stmt[:60]}", path)
    extern = "extern" in quals
    typ = next((q for q in quals if q in _TYPE_BITS), None)
    vecn = next((int(q[1:]) for q in quals if re.fullmatch(r"v[248]", q)), 1)
    align_q = next((q[1:] for q in quals if q.startswith("#")), None)
    align = 0
    if align_q is not None:
        align = _int_lit(align_q) or 0
        if align <= 0 or align & (align - 1) or align > 1 << 16:
            raise PTXSyntaxError(line, f".align {align_q}: a power of two is required", path)
    if typ is None:
        raise PTXSyntaxError(line, f"declaration without a type: {stmt[:60]}", path)
    bits = _TYPE_BITS[typ]
    if space == "reg":
        regs = []
        for item in split_top(rest):
            m = re.fullmatch(rf"({_IDENT})\s*<\s*(\d+)\s*>", item)
            if m:
                if len(m.group(2)) > 12:
                    raise PTXSyntaxError(line, f"register range {item[:40]!r} is too large", path)
                regs.append((m.group(1), bits, int(m.group(2))))
            elif _IDENT_RE.fullmatch(item):
                regs.append((item, bits * vecn if vecn > 1 else bits))
            else:
                raise PTXSyntaxError(line, f"cannot read register declaration {item[:60]!r}", path)
        return regs, None, space
    rest = rest.strip()
    m = re.fullmatch(rf"({_IDENT})\s*((?:\[\s*\w*\s*\]\s*)*)", rest)
    if not m:
        raise PTXSyntaxError(line, f"cannot read declaration {rest[:60]!r}", path)
    name = m.group(1)
    dims = re.findall(r"\[\s*(\w*)\s*\]", m.group(2))
    count, open_dim = 1, False
    for d in dims:
        if d == "":
            count, open_dim = 0, True
        else:
            v = _int_lit(d)
            if v is None or v < 0:
                raise PTXSyntaxError(line, f"array dimension [{d[:20]}] of {name} is not a non-negative integer", path)
            count *= v
    eb = max(bits, 8) // 8
    size = count * eb * vecn
    init, unmodelled = None, ""
    if eq:
        init, unmodelled = _initialiser(init_txt.strip(), typ, eb * vecn, line, path)
        if open_dim and init is not None:                 # .b32 t[] = {1, 2, 3}: sized by its initialiser
            size = len(init)
    if "ptr" in quals:          # .param .u64 .ptr .global .align N: N is the pointee's alignment
        align = 0
    var = Var(name, space, size, align or eb, extern or (bool(dims) and dims[-1] == ""), bits, init, line,
              unmodelled)
    return [], var, space


def _initialiser(txt: str, typ: str, eb: int, line: int, path) -> tuple[bytes | None, str]:
    """``= {1, 2, 0f3F800000, 1.5}`` -> bytes; addresses of symbols (``generic(x)``, ``x+8``) are
    not modelled: (None, why)."""
    import struct
    flat = txt.replace("{", " ").replace("}", " ")
    items = [x.strip() for x in flat.split(",") if x.strip()]
    if len(items) > (MAX_VAR_BYTES // max(eb, 1)):
        raise PTXSyntaxError(line, "initialiser larger than the variable limit", path)
    out = bytearray()
    isfloat = typ in ("f32", "f64", "f16", "bf16")
    for it in items:
        v = None
        if not isfloat and it.isdigit() and (len(it) == 1 or it[0] != "0"):     # the common case, fast
            out += int(int(it) & ((1 << (8 * eb)) - 1)).to_bytes(eb, "little")
            continue
        m = _F32_RE.fullmatch(it) or _F64_RE.fullmatch(it)
        if m:
            v = int(m.group(2), 16)
            if m.group(1) in "fF" and typ == "f64":
                v = struct.unpack("<Q", struct.pack("<d", struct.unpack("<f", struct.pack("<I", v))[0]))[0]
            elif m.group(1) in "dD" and typ == "f32":
                v = struct.unpack("<I", struct.pack("<f", struct.unpack("<d", struct.pack("<Q", v))[0]))[0]
        elif _DEC_FLOAT.fullmatch(it) or (isfloat and _int_lit(it) is not None):
            f = float(it) if _int_lit(it) is None else float(_int_lit(it))
            if typ == "f64":
                v = struct.unpack("<Q", struct.pack("<d", f))[0]
            elif typ == "f32":
                try:
                    v = struct.unpack("<I", struct.pack("<f", f))[0]
                except OverflowError:
                    v = 0x7F800000 if f > 0 else 0xFF800000
            else:
                return None, f"a {typ} initialiser written as a decimal number"
        else:
            v = _int_lit(it)
            if v is None:
                v = _const_expr(it)
        if v is None:
            return None, f"initialiser {it[:40]!r} (an address or expression the engine does not evaluate)"
        out += int(v & ((1 << (8 * eb)) - 1)).to_bytes(eb, "little")
    return bytes(out), ""


def _params(text: str, line: int, path) -> list[Var]:
    out = []
    for item in split_top(text):
        if not item:
            continue
        regs, v, space = _decl(item, line, path)
        if v is None:                                       # a .reg formal (non-ABI .func)
            name, bits = regs[0][0], regs[0][1]
            v = Var(name, "reg", max(bits, 8) // 8, max(bits, 8) // 8, elem_bits=bits, line=line)
        out.append(v)
    return out


# ---------------------------------------------------------------------------------------
# Module

_SKIP_DIRECTIVES = ("loc", "file", "pragma", "section", "weak", "alias", "callprototype", "noreturn",
                    "branchtargets", "calltargets")
_PERF = ("maxntid", "reqntid", "minnctapersm", "maxnreg", "maxnctapersm", "explicitcluster", "reqnctapercluster",
         "maxclusterrank", "blocksareclusters", "abi_preserve", "abi_preserve_control")
_OPAQUE_TYPES = ("texref", "samplerref", "surfref")
# targets the PTX ISA defines before the catalog's first (no matrix instructions there)
_OLD_TARGETS = {f"sm_{n}" for n in (10, 11, 12, 13, 20, 21, 30, 32, 35, 37, 50, 52, 53, 60, 61, 62)}
_TARGET_OPTIONS = {"texmode_unified", "texmode_independent", "debug", "map_f64_to_f32"}


def parse_module(text: str, path: str | None = None) -> Module:
    """Parse a PTX module.  Raises :class:`PTXSyntaxError` with the line of the problem."""
    if not isinstance(text, str):
        raise PTXSyntaxError(1, "a PTX module is text", path)
    if len(text) > MAX_MODULE_CHARS:
        raise PTXSyntaxError(1, f"the module has {len(text):,} characters, more than the limit of "
                                f"{MAX_MODULE_CHARS:,} (formal.kernel.parse.MAX_MODULE_CHARS)", path)
    src = _strip_comments(text, path)
    # .loc / .file carry no ';' and no meaning for the engine: blank them (line numbers kept)
    src = re.sub(r"(?m)^[ \t]*\.(loc|file)\b[^\n]*$", "", src)
    version, target, targets, asize = "", "", [], 64
    vline = tline = 1
    # .version / .target / .address_size are line directives without ';'
    for m in re.finditer(r"(?m)^[ \t]*\.(version|target|address_size)\b([^\n;]*);?[ \t]*$", src):
        arg = m.group(2).strip()
        ln = src.count("\n", 0, m.start()) + 1
        if m.group(1) == "version":
            version, vline = arg, ln
        elif m.group(1) == "target":
            targets = [x.strip() for x in arg.split(",") if x.strip()]
            target = next((x for x in targets if x.startswith("sm_")), targets[0] if targets else "")
            tline = ln
        else:
            if arg not in ("32", "64"):
                raise PTXSyntaxError(ln, f"bad .address_size {arg[:20]!r} (32 or 64)", path)
            asize = int(arg)
    src = re.sub(r"(?m)^[ \t]*\.(version|target|address_size)\b[^\n]*$", "", src)
    functions: dict[str, Function] = {}
    declarations: dict[str, Function] = {}
    aliases: dict[str, str] = {}
    mvars: list[Var] = []
    skip = 0                        # depth inside a skipped block (debug sections)
    body: _Body | None = None
    pending: Function | None = None  # a function header waiting for its '{'
    for line, kind, st in _statements(src, path):
        if skip:
            if kind == "open":
                skip += 1
            elif kind == "close":
                skip -= 1
            continue
        if kind == "open":
            if body is None and pending is None:
                head = st.split()
                if head and (head[0] == ".section" or head[0].startswith(".debug")):
                    skip = 1
                    continue
                if re.search(r"\.(entry|func)\b", st):
                    pending = _header(st, line, path)
                elif st == "":
                    skip = 1
                    continue
                else:
                    raise PTXSyntaxError(line, f"unexpected block: {st[:60]}", path)
            if pending is not None and body is None:
                if st and not re.search(r"\.(entry|func)\b", st):
                    _perf(pending, st, line, path)
                if pending.name in functions:
                    raise PTXSyntaxError(line, f"function {pending.name} defined twice", path)
                body = _Body(pending, path)
                functions[pending.name] = pending
                pending = None
            else:
                if st:
                    raise PTXSyntaxError(line, f"unexpected text before '{{': {st[:60]}", path)
                body.open()
            continue
        if kind == "close":
            if body is None:
                raise PTXSyntaxError(line, "unbalanced '}'", path)
            if body.close():
                body.finish()
                body = None
            continue
        if kind == "label":
            if body is None:
                raise PTXSyntaxError(line, f"label {st} outside a function", path)
            body.label(st, line)
            continue
        # statements
        if body is None:
            if pending is not None:
                _perf(pending, st, line, path)       # .maxntid etc. between header and '{'
                continue
            d = st.split()
            if not d:
                continue
            if d[0] == ".version":
                version, vline = (d[1] if len(d) > 1 else ""), line
            elif d[0] == ".target":
                targets = [x.strip() for x in " ".join(d[1:]).split(",") if x.strip()]
                target = next((x for x in targets if x.startswith("sm_")), targets[0] if targets else "")
                tline = line
            elif d[0] == ".address_size":
                if len(d) < 2 or d[1] not in ("32", "64"):
                    raise PTXSyntaxError(line, f"bad .address_size {st[:30]!r} (32 or 64)", path)
                asize = int(d[1])
            elif d[0] == ".alias":
                names = [x.strip() for x in " ".join(d[1:]).split(",")]
                if len(names) != 2 or not all(_IDENT_RE.fullmatch(x) for x in names):
                    raise PTXSyntaxError(line, f"cannot read {st[:60]!r} (.alias NAME, TARGET;)", path)
                aliases[names[0]] = names[1]
            elif re.match(r"\s*(\.\w+\s+)*\.(entry|func)\b", st):
                f = _header(st, line, path)                 # a declaration (prototype) without a body
                f.body = False
                declarations.setdefault(f.name, f)
            elif any(q in (".shared", ".global", ".const", ".local") for q in _split_quals(st).split()):
                mvars.append(_module_var(st, line, path))     # also .weak / .common / .extern ones
            elif d[0].lstrip(".") in _SKIP_DIRECTIVES:
                continue
            else:
                raise PTXSyntaxError(line, f"unknown module directive: {st[:60]}", path)
            continue
        body.statement(st, line)
    if body is not None or pending is not None or skip:
        raise PTXSyntaxError(text.count("\n") + 1, "unbalanced '{' at end of module", path)
    if not version:
        raise PTXSyntaxError(1, "missing .version", path)
    if not target:
        raise PTXSyntaxError(1, "missing .target", path)
    _check_version_target(version, targets, vline, tline, path)
    mod = Module(version, target, targets, asize, functions, mvars, path, declarations, aliases)
    _inline_calls(mod)
    return mod


def _module_var(st: str, line: int, path) -> Var:
    st = _split_quals(st)
    d = st.split()
    if any(q.lstrip(".") in _OPAQUE_TYPES for q in d):
        name = re.sub(r"\W.*$", "", d[-1].rstrip(";"))
        return Var(name, "global", 8, 8, line=line, init_unmodelled="a texture / sampler / surface reference")
    _, v, _ = _decl(" ".join(x for x in d if x not in (".visible", ".extern", ".weak", ".common")), line, path)
    if ".extern" in d:
        v.extern = True
    if v.space == "shared" and v.size > MAX_STATIC_SHARED:
        raise PTXSyntaxError(line, f".shared {v.name} has {v.size:,} bytes, more than the {MAX_STATIC_SHARED:,} "
                                   "a CTA can have (ptxas rejects it)", path)
    if v.space in ("global", "const") and v.size > MAX_VAR_BYTES:
        v.init_unmodelled = f"a {v.size:,}-byte variable, more than the {MAX_VAR_BYTES:,} the interpreter allocates"
    return v


def _check_version_target(version: str, targets: list[str], vline: int, tline: int, path) -> None:
    """What ptxas rejects is bad input: a .version newer than any known, an unknown .target, a
    target newer than the .version supports."""
    from .. import catalog
    from ..specdata import load_spec
    m = re.fullmatch(r"(\d{1,3})\.(\d{1,3})", version)
    if not m:
        raise PTXSyntaxError(vline, f"cannot read .version {version[:20]!r} (MAJOR.MINOR)", path)
    ver = (int(m.group(1)), int(m.group(2)))
    known = load_spec("targets")["ptx"]["versions"]
    latest = max(tuple(int(x) for x in v.split(".")) for v in known)
    if ver > latest or ver < (1, 0):
        raise PTXSyntaxError(vline, f"PTX ISA .version {version} is not one ptxas knows (latest "
                                    f"{latest[0]}.{latest[1]})", path)
    if not targets:
        raise PTXSyntaxError(tline, "empty .target", path)
    for t in targets:
        if t in _TARGET_OPTIONS or t in _OLD_TARGETS:
            continue
        try:
            tgt = catalog.parse_target(t)
        except catalog.BadArgument as e:
            raise PTXSyntaxError(tline, f".target {t[:30]}: {e}", path) from None
        need = tuple(int(x) for x in tgt.ptx.split("."))
        if ver < need:
            raise PTXSyntaxError(tline, f".target {t} needs .version {tgt.ptx} or later (the module says "
                                        f"{version}; ptxas rejects it)", path)


def _header(st: str, line: int, path) -> Function:
    m = re.match(r"\s*((?:\.\w+\s+)*)\.(entry|func)\s*(?:\(([^)]*)\)\s*)?([%$\w]+)\s*(?:\((.*?)\))?(.*)$", st, re.S)
    if not m:
        raise PTXSyntaxError(line, f"cannot read function header: {st[:60]}", path)
    kind, name, params, tail = m.group(2), m.group(4), m.group(5) or "", m.group(6).strip()
    fn = Function(name, kind == "entry", _params(params, line, path), line)
    if m.group(3):
        fn.rets = _params(m.group(3), line, path)
    if tail:
        _perf(fn, tail, line, path)
    return fn


def _perf(fn: Function, tail: str, line: int, path) -> None:
    for m in re.finditer(r"\.(\w+)\s*([0-9,\s]*)", tail):
        d = m.group(1)
        if d in _PERF:
            nums = m.group(2).replace(",", " ").split()
            if len(nums) > 3 or any(len(x) > 10 for x in nums):
                raise PTXSyntaxError(line, f".{d} takes at most three numbers", path)
            fn.directives[d] = [int(x) for x in nums]
        elif d in ("noreturn", "pragma"):
            pass
        else:
            raise PTXSyntaxError(line, f"unknown function directive .{d}", path)


_MATRIX = ("mma", "wmma", "wgmma")


class _Body:
    """A function body while it is read: its statements in order and, per ``{ }`` block, the
    registers, variables and labels declared there (PTX scopes them to the block)."""

    def __init__(self, fn: Function, path):
        self.fn, self.path = fn, path
        self.items: list = []                       # Instr or ('label', name, scope)
        self.chain = [0]
        self.nblocks = 1
        self.regs: dict[int, RegFile] = {0: RegFile()}
        self.types: dict[int, RegFile] = {0: RegFile()}
        self.vars: dict[int, dict] = {0: {}}
        self.labels: dict[int, dict] = {0: {}}

    def open(self):
        b = self.nblocks
        self.nblocks += 1
        self.chain.append(b)
        self.regs[b], self.types[b], self.vars[b], self.labels[b] = RegFile(), RegFile(), {}, {}

    def close(self) -> bool:
        self.chain.pop()
        return not self.chain

    def label(self, name: str, line: int):
        s = self.chain[-1]
        if name in self.labels[s]:
            raise PTXSyntaxError(line, f"label {name} defined twice", self.path)
        self.labels[s][name] = line
        self.items.append(("label", name, tuple(self.chain)))

    def statement(self, st: str, line: int):
        fn, path = self.fn, self.path
        s = self.chain[-1]
        if st.startswith("."):
            words = _split_quals(st).split()
            d = words[0][1:]
            if d in _STATE_SPACES or d in ("align", "extern") or any(x in words for x in (".reg", ".shared", ".local",
                                                                                          ".param", ".global", ".const")):
                regs, var, space = _decl(" ".join(x for x in words if x != ".extern"), line, path)
                typ = next((q[1:] for q in " ".join(words).replace(",", " ").split() if q[1:] in _TYPE_BITS), None)
                for r in regs:
                    if len(r) == 3:
                        self.regs[s].add_range(r[0], r[2], r[1])
                        self.types[s].add_range(r[0], r[2], typ)
                    else:
                        self.regs[s][r[0]] = r[1]
                        self.types[s][r[0]] = typ
                if var is not None:
                    if ".extern" in words:
                        var.extern = True
                    if var.space == "param":                # a call sequence's argument: per thread
                        var = replace(var, space="local", from_param=True)
                    if var.space == "shared" and var.size > MAX_STATIC_SHARED:
                        raise PTXSyntaxError(line, f".shared {var.name} has {var.size:,} bytes, more than the "
                                                   f"{MAX_STATIC_SHARED:,} a CTA can have (ptxas rejects it)", path)
                    if var.space == "local" and var.size > MAX_LOCAL_BYTES:
                        raise PTXSyntaxError(line, f".local {var.name} has {var.size:,} bytes, more than the "
                                                   f"{MAX_LOCAL_BYTES:,} a thread can have", path)
                    if var.space in ("global", "const") and var.size > MAX_VAR_BYTES:
                        var.init_unmodelled = f"a {var.size:,}-byte variable"
                    self.vars[s][var.name] = var
                return
            if d in _SKIP_DIRECTIVES:
                return
            if d in _PERF:
                _perf(fn, st, line, path)
                return
            raise PTXSyntaxError(line, f"unknown directive .{d} in a function body", path)
        pred, neg = None, False
        m = re.match(r"@\s*(!?)\s*(%?[\w$]+)\s+(.*)$", st, re.S)
        if m:
            neg, pred, st = m.group(1) == "!", m.group(2), m.group(3).strip()
        m = re.match(r"([A-Za-z][\w.:]*)\s*(.*)$", st, re.S)
        if not m:
            raise PTXSyntaxError(line, f"cannot read instruction {st[:60]!r}", path)
        opcode, rest = m.group(1), m.group(2).strip()
        if opcode.split(".")[0] == "call":
            ops = _call_operands(rest, line, path)
        else:
            ops = [parse_operand(x, line, path) for x in split_top(rest)] if rest else []
        ins = Instr(line, opcode, ops, st + ";", pred, neg, scope=tuple(self.chain))
        if opcode.split(".")[0] in _MATRIX:
            from .. import catalog
            try:
                ins.form, ins.imm = catalog.parse_instruction(st)
            except (catalog.MalformedOpcode, catalog.BadArgument) as e:
                raise PTXSyntaxError(line, f"{opcode}: {e}", path) from None
        self.items.append(ins)

    # ----------------------------------------------------------------- scoping
    def finish(self):
        """Resolve every name to its declaration's block; names declared in several blocks get
        a per-block suffix.  The items stay in ``fn._items`` until calls are inlined."""
        fn = self.fn
        explicit = Counter(n for b in self.regs.values() for n in dict.keys(b))
        prefixes = Counter(p for b in self.regs.values() for p in b.ranges)
        varc = Counter(n for b in self.vars.values() for n in b)
        labc = Counter(n for b in self.labels.values() for n in b)
        renamed_reg: dict[int, set] = {}
        renamed_rng: dict[int, set] = {}
        for b in range(1, self.nblocks):
            rf = self.regs[b]
            others = [self.regs[o] for o in self.regs if o != b] if (rf or rf.ranges) else []
            rr = {n for n in dict.keys(rf) if explicit[n] > 1 or any(n in o for o in others if o.ranges)}
            rg = {p for p in rf.ranges if prefixes[p] > 1 or any(_matches_prefix(n, p) for o in others
                                                                  for n in dict.keys(o))}
            if rr:
                renamed_reg[b] = rr
            if rg:
                renamed_rng[b] = rg
        renamed_var = {b: {n for n in self.vars[b] if varc[n] > 1} for b in range(1, self.nblocks)}
        renamed_lab = {b: {n for n in self.labels[b] if labc[n] > 1} for b in range(1, self.nblocks)}
        any_rename = renamed_reg or renamed_rng or any(renamed_var.values()) or any(renamed_lab.values())
        # the function's declarations: every block's, renamed where they clash
        for b in range(self.nblocks):
            rf, tf = self.regs[b], self.types[b]
            for n in dict.keys(rf):
                nn = f"{n}~b{b}" if n in renamed_reg.get(b, ()) else n
                fn.regs[nn], fn.reg_types[nn] = rf[n], tf[n]
            for p, rs in rf.ranges.items():
                np_ = f"{p}~b{b}_" if p in renamed_rng.get(b, ()) else p
                for (cnt, val), (_, typ) in zip(rs, tf.ranges[p]):
                    fn.regs.add_range(np_, cnt, val)
                    fn.reg_types.add_range(np_, cnt, typ)
            for n, v in self.vars[b].items():
                fn.vars.append(replace(v, name=f"{n}~b{b}") if n in renamed_var.get(b, ()) else v)
        if not any_rename:
            fn._items = self.items
            return

        def resolve(name, chain):
            for b in reversed(chain):
                if b == 0:
                    return name
                if name in self.labels[b]:
                    return f"{name}~b{b}" if name in renamed_lab[b] else name
                if name in self.vars[b]:
                    return f"{name}~b{b}" if name in renamed_var[b] else name
                rf = self.regs[b]
                if dict.__contains__(rf, name):
                    return f"{name}~b{b}" if name in renamed_reg.get(b, ()) else name
                for p in renamed_rng.get(b, ()):
                    if _matches_prefix(name, p) and name in rf:
                        return f"{p}~b{b}_{name[len(p):]}"
                if name in rf:
                    return name
            return name

        items = []
        for it in self.items:
            if isinstance(it, tuple):
                items.append(("label", resolve(it[1], it[2]), it[2]))
            elif len(it.scope) > 1:
                ch = it.scope
                items.append(replace(it, ops=_map_ops(it.ops, lambda n: resolve(n, ch)),
                                     pred=resolve(it.pred, ch) if it.pred else None))
            else:
                items.append(it)
        fn._items = items


def _matches_prefix(name: str, prefix: str) -> bool:
    if not name.startswith(prefix):
        return False
    d = name[len(prefix):]
    return d.isdigit() and d == str(int(d))


def _map_ops(ops, f):
    """Operands with every register / symbol name passed through ``f``."""
    def m(o):
        if isinstance(o, Reg):
            n = f(o.name)
            return o if n == o.name else Reg(n, o.neg)
        if isinstance(o, Sym):
            n = f(o.name)
            return o if n == o.name else Sym(n)
        if isinstance(o, Vec):
            return Vec(tuple(m(x) for x in o.items))
        if isinstance(o, Addr):
            return o if o.base is None else Addr(m(o.base), o.offset)
        if isinstance(o, Pair):
            return Pair(m(o.first), m(o.second))
        if isinstance(o, TensorAddr):
            return TensorAddr(m(o.base), m(o.coords))
        return o
    return [m(o) for o in ops]


def _call_operands(rest: str, line: int, path) -> list:
    """``call (ret), f, (a, b)`` / ``call f, (a)`` / ``call f`` / ``call (ret), %rd, (a), proto``
    -> [Vec(rets), target, Vec(args), *rest]."""
    parts = split_top(rest)

    def lst(p):
        if not (p.startswith("(") and p.endswith(")")):
            raise PTXSyntaxError(line, f"cannot read call operand list {p[:60]!r}", path)
        return Vec(tuple(parse_operand(x, line, path) for x in split_top(p[1:-1])))
    if not parts:
        raise PTXSyntaxError(line, "call without a target", path)
    rets = Vec(())
    if parts[0].startswith("("):
        rets = lst(parts.pop(0))
    if not parts:
        raise PTXSyntaxError(line, "call without a target", path)
    target = parse_operand(parts.pop(0), line, path)
    args = lst(parts.pop(0)) if parts and parts[0].startswith("(") else Vec(())
    extra = [parse_operand(p, line, path) if not p.startswith("(") else lst(p) for p in parts]
    return [rets, target, args] + extra


# ---------------------------------------------------------------------------------------
# Calls: inlined at their call sites

class _NoInline(Exception):
    pass


@dataclass
class _Expanded:
    items: list
    regs: RegFile
    types: RegFile
    vars: list


def _inline_calls(mod: Module) -> None:
    done: dict[str, _Expanded] = {}
    counter = [0]
    for fn in mod.functions.values():
        ex = _expand(mod, fn, (fn.name,), done, counter)
        fn.regs, fn.reg_types, fn.vars = ex.regs, ex.types, ex.vars
        instrs, labels = [], {}
        for it in ex.items:
            if isinstance(it, tuple):
                labels[it[1]] = len(instrs)
            else:
                instrs.append(it)
        fn.instrs, fn.labels = instrs, labels
        _finalise(fn)
        if hasattr(fn, "_items"):
            del fn._items


def _expand(mod: Module, fn: Function, stack: tuple, done: dict, counter: list) -> _Expanded:
    if fn.name in done:
        return done[fn.name]
    regs, types = RegFile(), RegFile()
    regs.merge(fn.regs)
    types.merge(fn.reg_types)
    vars_ = list(fn.vars)
    items = []
    for it in fn._items:
        if isinstance(it, Instr) and it.head == "call" and it.unsupported is None:
            try:
                body = _inline_one(mod, fn, it, stack, done, counter, regs, types, vars_)
            except _NoInline as e:
                it = replace(it, unsupported=str(e))
                body = [it]
            items += body
            if len(items) > MAX_INLINED_INSTRS:
                raise PTXSyntaxError(it.line, f"{fn.name} has more than {MAX_INLINED_INSTRS:,} instructions once "
                                              "its calls are inlined", mod.path)
        else:
            items.append(it)
    ex = _Expanded(items, regs, types, vars_)
    done[fn.name] = ex
    return ex


def _inline_one(mod, fn, call: Instr, stack, done, counter, regs, types, vars_) -> list:
    rets, target, args = call.ops[0], call.ops[1], call.ops[2]
    if not isinstance(target, Sym):
        raise _NoInline("an indirect call (through a register)")
    name = target.name
    seen = set()
    while name in mod.aliases and name not in seen:
        seen.add(name)
        name = mod.aliases[name]
    callee = mod.functions.get(name)
    if callee is None:
        if name in mod.declarations:
            raise _NoInline(f"calls {name}, which has no body in this module (an external function)")
        raise _NoInline(f"calls {name}, which the module does not declare")
    if callee.entry:
        raise _NoInline(f"calls the .entry {name}")
    if name in stack:
        raise _NoInline(f"a recursive call of {name}")
    if len(stack) > MAX_INLINE_DEPTH:
        raise _NoInline(f"calls nested more than {MAX_INLINE_DEPTH} deep")
    formals, frets = callee.params, callee.rets
    if any(v.space != "param" for v in formals + frets):
        raise _NoInline(f"{name} takes .reg parameters (not the PTX ABI's .param passing)")
    if len(args.items) != len(formals) or len(rets.items) > len(frets):
        raise _NoInline(f"{name} takes {len(formals)} parameters and returns {len(frets)}; the call passes "
                        f"{len(args.items)} and receives {len(rets.items)}")
    if not all(isinstance(a, Sym) for a in args.items + rets.items):
        raise _NoInline("arguments that are not .param variables")
    ex = _expand(mod, callee, stack + (name,), done, counter)
    counter[0] += 1
    sfx = f"~c{counter[0]}"
    end = f"$ret{sfx}"
    actual = {f.name: a.name for f, a in zip(formals, args.items)}
    actual.update({f.name: r.name for f, r in zip(frets, rets.items)})
    unreturned = {f.name for f in frets[len(rets.items):]}
    labels = {it[1] for it in ex.items if isinstance(it, tuple)}
    local = {v.name for v in ex.vars if v.space != "shared"}

    def ren(n):
        if n in actual:
            return actual[n]
        if n in labels or n in local:
            return n + sfx
        if dict.__contains__(ex.regs, n):
            return n + sfx
        for p in ex.regs.ranges:
            if _matches_prefix(n, p):
                return f"{p}{sfx}_{n[len(p):]}"
        return n
    for n in dict.keys(ex.regs):
        regs[n + sfx], types[n + sfx] = ex.regs[n], ex.types[n]
    for p, rs in ex.regs.ranges.items():
        for (cnt, val), (_, typ) in zip(rs, ex.types.ranges[p]):
            regs.add_range(f"{p}{sfx}_", cnt, val)
            types.add_range(f"{p}{sfx}_", cnt, typ)
    for v in ex.vars:
        if v.space == "shared":
            if all(w.name != v.name for w in vars_):
                vars_.append(v)
        else:
            vars_.append(replace(v, name=v.name + sfx))
    for f in unreturned:                             # a return value the caller does not take: a scratch slot
        fv = next(x for x in frets if x.name == f)
        actual[f] = f + sfx
        vars_.append(replace(fv, name=f + sfx, space="local", from_param=True))
    out = []
    if call.pred is not None:
        out.append(Instr(call.line, "bra.uni", [Sym(end)], call.text, call.pred, not call.pred_neg, scope=call.scope))
    for it in ex.items:
        if isinstance(it, tuple):
            out.append(("label", ren(it[1]), it[2]))
            continue
        ni = replace(it, ops=_map_ops(it.ops, ren), pred=ren(it.pred) if it.pred else None)
        if it.head == "ret":
            ni = replace(ni, opcode="bra.uni", ops=[Sym(end)])
        out.append(ni)
    out.append(("label", end, call.scope))
    return out


def _finalise(fn: Function) -> None:
    """Plain-named registers (inline asm: ``.reg .b32 __$1;``) become registers; the ld/st.param
    of a body's .param variables (call sequences, kept per thread as .local) become ld/st.local."""
    local_params = {v.name for v in fn.vars if v.from_param}
    plain = fn.regs

    def fix(o):
        if isinstance(o, Sym) and not o.name.startswith("%") and o.name in plain:
            return Reg(o.name)
        if isinstance(o, Vec):
            return Vec(tuple(fix(x) for x in o.items))
        if isinstance(o, Addr) and isinstance(o.base, Sym) and o.base.name in plain:
            return Addr(Reg(o.base.name), o.offset)
        if isinstance(o, Pair):
            return Pair(fix(o.first), fix(o.second))
        return o
    check_plain = any(not n.startswith("%") for n in dict.keys(fn.regs)) or \
        any(not p.startswith("%") for p in fn.regs.ranges)
    for k, ins in enumerate(fn.instrs):
        if check_plain and any(type(o) is not Reg and type(o) is not Imm for o in ins.ops):
            ins.ops = [fix(o) for o in ins.ops]
        if local_params and ins.head != "call":
            addr = [o for o in ins.ops if isinstance(o, Addr) and isinstance(o.base, Sym)
                    and o.base.name in local_params]
            named = [o for o in ins.ops if isinstance(o, Sym) and o.name in local_params]
            parts = ins.parts
            if addr and ins.head in ("ld", "st") and "param" in parts:
                fn.instrs[k] = replace(ins, opcode=".".join("local" if p == "param" else p for p in parts))
            elif addr or named:
                fn.instrs[k] = replace(ins, unsupported="takes the address of a .param variable of a call sequence")
