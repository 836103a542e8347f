"""PTX modules as compilers emit them -> :class:`Module` (functions, declarations, instructions).

The front end reads whole modules (``.version``, ``.target``, ``.address_size``, ``.entry`` /
``.func`` with parameters, ``.reg`` incl. ``%r<100>`` ranges, ``.shared`` / ``.local`` /
``.global`` / ``.const`` declarations incl. ``extern`` dynamic shared memory, labels,
predicates, performance directives, comments) and keeps the source line of every
instruction.  Debug sections (``.section .debug_*``), ``.loc`` and ``.file`` are skipped.

It knows the *syntax* only.  What an instruction does lives in ``specs/ptx_ops.toml`` and
``specs/movement.toml``; matrix instructions (``mma``, ``mma.sp``, ``wmma.*``) are parsed by
the catalog (:func:`formal.catalog.parse_instruction`), the project's one syntax source for
them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..transform.steps import split_top  # noqa: F401  (one operand-list splitter)


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

    @property
    def parts(self) -> list[str]:
        return self.opcode.split(".")

    @property
    def head(self) -> str:
        return self.opcode.split(".", 1)[0]


@dataclass
class Var:
    name: str
    space: str                      # shared | local | global | const | param
    size: int                       # bytes (0 for extern dynamic shared)
    align: int
    extern: bool = False
    elem_bits: int = 8
    init: bytes | None = None
    line: int = 0


@dataclass
class Function:
    name: str
    entry: bool
    params: list[Var]
    line: int
    regs: dict[str, int] = field(default_factory=dict)      # name -> bits (1 for .pred)
    reg_types: dict[str, str] = field(default_factory=dict)  # name -> declared type ("b32", "f16x2", ...)
    vars: list[Var] = field(default_factory=list)            # .shared / .local inside the body
    instrs: list[Instr] = field(default_factory=list)
    labels: dict[str, int] = field(default_factory=dict)     # label -> instruction index
    directives: dict[str, Any] = field(default_factory=dict)


@dataclass
class Module:
    version: str
    target: str
    targets: list[str]
    address_size: int
    functions: dict[str, Function]
    vars: list[Var]
    path: str | None = None

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


def _int_lit(t: str) -> int | None:
    t = t.strip()
    if not _INT.match(t):
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


def _const_expr(t: str) -> int | None:
    """Small constant expressions compilers write in offsets: 16+4, -8, 2*64."""
    t = t.replace(" ", "")
    if not re.fullmatch(r"[-+*0-9xXa-fA-F()]+", t):
        return None
    try:
        v = _int_lit(t)
        if v is not None:
            return v
        if re.fullmatch(r"[-+*0-9()]+", t):
            return int(eval(t, {"__builtins__": {}}, {}))  # noqa: S307 - digits and + - * only
    except Exception:
        return None
    return None


def parse_operand(tok: str, line: int, path=None):
    t = tok.strip()
    if not t:
        raise PTXSyntaxError(line, "empty operand", path)
    if t.startswith("{"):
        if not t.endswith("}"):
            raise PTXSyntaxError(line, f"unbalanced braces in {t!r}", path)
        items = []
        for x in split_top(t[1:-1]):
            if x == "_":
                items.append(None)
            else:
                items.append(parse_operand(x, line, path))
        return Vec(tuple(items))
    if t.startswith("["):
        if not t.endswith("]"):
            raise PTXSyntaxError(line, f"unbalanced brackets in {t!r}", path)
        inner = t[1:-1].strip()
        m = re.fullmatch(rf"({_IDENT})\s*(?:([+-])\s*(.+))?", inner)
        if m:
            off = 0
            if m.group(3) is not None:
                v = _const_expr(m.group(3))
                if v is None:
                    raise PTXSyntaxError(line, f"cannot read address offset in {t!r}", path)
                off = -v if m.group(2) == "-" else v
            nm = m.group(1)
            base = Reg(nm) if nm.startswith("%") else Sym(nm)
            return Addr(base, off)
        v = _const_expr(inner)
        if v is not None:
            return Addr(None, v)
        raise PTXSyntaxError(line, f"cannot read address operand {t!r}", path)
    m = re.fullmatch(r"0([fF])([0-9a-fA-F]{8})", t)
    if m:
        return Imm(int(m.group(2), 16), "f32")
    m = re.fullmatch(r"0([dD])([0-9a-fA-F]{16})", t)
    if m:
        return Imm(int(m.group(2), 16), "f64")
    v = _int_lit(t)
    if v is not None:
        return Imm(v)
    if re.fullmatch(r"-?[0-9]*\.[0-9]+([eE][-+]?[0-9]+)?|-?[0-9]+[eE][-+]?[0-9]+", t):
        import struct
        return Imm(struct.unpack("<Q", struct.pack("<d", float(t)))[0], "f64")
    if "|" in t:
        a, b = (x.strip() for x in t.split("|", 1))
        return Pair(parse_operand(a, line, path), parse_operand(b, line, path))
    neg = t.startswith("!")
    if neg:
        t = t[1:].strip()
    m = re.fullmatch(_IDENT, t)
    if m:
        if t.startswith("%"):
            return Reg(t, neg)
        if neg:
            raise PTXSyntaxError(line, f"'!' applies to predicate registers only: {tok!r}", path)
        return Sym(t)
    m = re.fullmatch(rf"({_IDENT})\s*\+\s*(.+)", t)       # symbol+offset as a value (mov %r, smem+16)
    if m and _const_expr(m.group(2)) is not None:
        return Addr(Sym(m.group(1)), _const_expr(m.group(2)))
    raise PTXSyntaxError(line, f"cannot read operand {tok!r}", path)


# ---------------------------------------------------------------------------------------
# Declarations

def _decl(stmt: str, line: int, path, space_hint=None) -> tuple[list[tuple[str, int]], Var | None, str]:
    """Parse a .reg / variable declaration; returns (registers, variable, space)."""
    toks = stmt.replace(",", " , ").split()
    quals = []
    i = 0
    while i < len(toks) and toks[i].startswith("."):
        quals.append(toks[i][1:])
        i += 1
        if quals[-1] == "align" and i < len(toks):
            quals.append("#" + toks[i])
            i += 1
    rest = " ".join(toks[i:])
    space = next((q for q in quals if q in ("reg", "shared", "local", "global", "const", "param", "sreg")), None)
    if space is None:
        raise PTXSyntaxError(line, f"declaration without a state space: {stmt[:60]}", path)
    extern = "extern" in quals
    typ = next((q for q in quals if q in _TYPE_BITS), None)
    vecn = next((int(q[1:]) for q in quals if re.fullmatch(r"v[248]", q)), 1)
    align = next((int(q[1:]) for q in quals if q.startswith("#")), 0)
    if typ is None:
        raise PTXSyntaxError(line, f"declaration without a type: {stmt[:60]}", path)
    bits = _TYPE_BITS[typ]
    if space == "reg":
        regs = []
        for item in split_top(rest):
            m = re.fullmatch(rf"({_IDENT})\s*<\s*(\d+)\s*>", item)
            if m:
                regs += [(f"{m.group(1)}{k}", bits) for k in range(int(m.group(2)))]
            elif re.fullmatch(_IDENT, item):
                regs.append((item, bits * vecn if vecn > 1 else bits))
            else:
                raise PTXSyntaxError(line, f"cannot read register declaration {item!r}", path)
        return regs, None, space
    init = None
    if "=" in rest:
        rest, init_txt = rest.split("=", 1)
        vals = [_int_lit(x) for x in split_top(init_txt.strip().strip("{}").strip())]
        if any(v is None for v in vals):
            init = None     # float / symbolic initializers: kept as zeros (not data the engine reads)
        else:
            eb = max(bits, 8) // 8
            init = b"".join(int(v & ((1 << (8 * eb)) - 1)).to_bytes(eb, "little") for v in vals)
    rest = rest.strip()
    m = re.fullmatch(rf"({_IDENT})\s*((?:\[\s*\d*\s*\]\s*)*)", rest)
    if not m:
        raise PTXSyntaxError(line, f"cannot read declaration {rest!r}", path)
    name = m.group(1)
    dims = re.findall(r"\[\s*(\d*)\s*\]", m.group(2))
    count = 1
    for d in dims:
        if d == "":
            count = 0
        else:
            count *= int(d)
    size = count * max(bits, 8) // 8 * vecn
    return [], Var(name, space, size, align or max(bits, 8) // 8, extern or (dims and dims[-1] == ""),
                   bits, init, line), space


def _params(text: str, line: int, path) -> list[Var]:
    out = []
    for item in split_top(text):
        if not item:
            continue
        _, v, _ = _decl(item, line, path)
        out.append(v)
    return out


# ---------------------------------------------------------------------------------------
# Module

_SKIP_DIRECTIVES = ("loc", "file", "pragma", "section", "weak", "alias", "callprototype", "noreturn")
_PERF = ("maxntid", "reqntid", "minnctapersm", "maxnreg", "maxnctapersm", "explicitcluster", "reqnctapercluster",
         "maxclusterrank", "blocksareclusters")


def parse_module(text: str, path: str | None = None) -> Module:
    """Parse a PTX module.  Raises :class:`PTXSyntaxError` with the line of the problem."""
    if not isinstance(text, str):
        raise PTXSyntaxError(1, "a PTX module is text", path)
    src = _strip_comments(text, path)
    # .loc / .file carry no ';' and no meaning for the engine: blank them (line numbers kept)
    src = re.sub(r"(?m)^[ \t]*\.(loc|file)\b[^\n]*$", "", src)
    version, target, targets, asize = "", "", [], 64
    # .version / .target / .address_size are line directives without ';'
    for m in re.finditer(r"(?m)^[ \t]*\.(version|target|address_size)\b([^\n;]*);?[ \t]*$", src):
        arg = m.group(2).strip()
        if m.group(1) == "version":
            version = arg
        elif m.group(1) == "target":
            targets = [x.strip() for x in arg.split(",") if x.strip()]
            target = next((x for x in targets if x.startswith("sm_")), targets[0] if targets else "")
        else:
            try:
                asize = int(arg)
            except ValueError:
                raise PTXSyntaxError(src.count("\n", 0, m.start()) + 1, f"bad .address_size {arg!r}", path) from None
    src = re.sub(r"(?m)^[ \t]*\.(version|target|address_size)\b[^\n]*$", "", src)
    functions: dict[str, Function] = {}
    mvars: list[Var] = []
    stack: list[str] = []           # 'func' / 'block' / 'skip'
    fn: Function | None = None
    pending: tuple | None = None    # a function header waiting for its '{'
    for line, kind, st in _statements(src, path):
        if stack and stack[0] == "skip":
            if kind == "open":
                stack.append("skip")
            elif kind == "close":
                stack.pop()
            continue
        if kind == "open":
            if fn is None and pending is None:
                head = st.split()
                if head and head[0] == ".section" or (head and head[0].startswith(".debug")):
                    stack.append("skip")
                    continue
                m = re.match(r"(.*?)\.(entry|func)\b", st)
                if m:
                    pending = _header(st, line, path)
                elif st == "":
                    stack.append("skip")
                    continue
                else:
                    raise PTXSyntaxError(line, f"unexpected block: {st[:60]}", path)
            if pending is not None and fn is None:
                tail = st if not re.search(r"\.(entry|func)\b", st) else ""
                if tail:
                    _perf(pending[0], tail, line, path)
                fn = pending[0]
                functions[fn.name] = fn
                pending = None
                stack.append("func")
            else:
                if st:
                    raise PTXSyntaxError(line, f"unexpected text before '{{': {st[:60]}", path)
                stack.append("block")
            continue
        if kind == "close":
            if not stack:
                raise PTXSyntaxError(line, "unbalanced '}'", path)
            if stack.pop() == "func":
                fn = None
            continue
        if kind == "label":
            if fn is None:
                raise PTXSyntaxError(line, f"label {st} outside a function", path)
            if st in fn.labels:
                raise PTXSyntaxError(line, f"label {st} defined twice", path)
            fn.labels[st] = len(fn.instrs)
            continue
        # statements
        if fn is None:
            if pending is not None:
                _perf(pending[0], st, line, path)       # .maxntid etc. between header and '{'
                continue
            d = st.split()
            if not d:
                continue
            if d[0] == ".version":
                version = d[1] if len(d) > 1 else ""
            elif d[0] == ".target":
                targets = [x.strip() for x in " ".join(d[1:]).split(",") if x.strip()]
                target = next((x for x in targets if x.startswith("sm_")), targets[0] if targets else "")
            elif d[0] == ".address_size":
                asize = int(d[1])
            elif re.search(r"\.(entry|func)\b", st):
                # a declaration (prototype) without a body
                if re.match(r"\s*(\.\w+\s+)*\.(entry|func)\b", st):
                    _header(st, line, path)
                    continue
            elif d[0].lstrip(".") in _SKIP_DIRECTIVES:
                continue
            elif any(q in ("." + s for s in ("shared", "global", "const", "local")) for q in d):
                _, v, _ = _decl(" ".join(x for x in d if x not in (".visible", ".extern", ".weak", ".common")),
                                line, path)
                if ".extern" in d:
                    v.extern = True
                mvars.append(v)
            else:
                raise PTXSyntaxError(line, f"unknown module directive: {st[:60]}", path)
            continue
        _body_statement(fn, st, line, path)
    if stack:
        raise PTXSyntaxError(text.count("\n") + 1, "unbalanced '{' at end of module", path)
    for f in functions.values():
        _registers_by_name(f)
    if not version:
        raise PTXSyntaxError(1, "missing .version", path)
    if not target:
        raise PTXSyntaxError(1, "missing .target", path)
    return Module(version, target, targets, asize, functions, mvars, path)


def _registers_by_name(fn: Function) -> None:
    """Registers may be declared without '%' (inline-asm blocks: `.reg .b32 __$1;`): operands
    naming a declared register become registers."""
    plain = {r for r in fn.regs if not r.startswith("%")}
    if not plain:
        return

    def fix(o):
        if isinstance(o, Sym) and o.name in plain:
            return Reg(o.name)
        if isinstance(o, Vec):
            return Vec(tuple(fix(x) for x in o.items))
        if isinstance(o, Addr) and isinstance(o.base, Sym) and o.base.name in plain:
            return Addr(Reg(o.base.name), o.offset)
        if isinstance(o, Pair):
            return Pair(fix(o.first), fix(o.second))
        return o
    for ins in fn.instrs:
        ins.ops = [fix(o) for o in ins.ops]
        if ins.pred in plain:
            pass


def _header(st: str, line: int, path):
    m = re.match(r"\s*((?:\.\w+\s+)*)\.(entry|func)\s*(?:\(([^)]*)\)\s*)?([%$\w]+)\s*(?:\((.*?)\))?(.*)$", st, re.S)
    if not m:
        raise PTXSyntaxError(line, f"cannot read function header: {st[:60]}", path)
    kind, name, params, tail = m.group(2), m.group(4), m.group(5) or "", m.group(6).strip()
    fn = Function(name, kind == "entry", _params(params, line, path), line)
    if tail:
        _perf(fn, tail, line, path)
    return fn, tail


def _perf(fn: Function, tail: str, line: int, path) -> None:
    for m in re.finditer(r"\.(\w+)\s*([0-9,\s]*)", tail):
        d = m.group(1)
        if d in _PERF:
            fn.directives[d] = [int(x) for x in m.group(2).replace(",", " ").split()]
        elif d in ("noreturn",):
            pass
        else:
            raise PTXSyntaxError(line, f"unknown function directive .{d}", path)


_MATRIX = ("mma", "wmma")


def _body_statement(fn: Function, st: str, line: int, path) -> None:
    if st.startswith("."):
        d = st.split()[0][1:]
        if d in ("reg", "shared", "local", "global", "const", "param") or d in ("align",) or \
                st.split()[0] in (".extern",) or any(x in st.split() for x in (".reg", ".shared", ".local")):
            regs, var, space = _decl(" ".join(x for x in st.split() if x != ".extern"), line, path)
            typ = next((q[1:] for q in st.replace(",", " ").split() if q[1:] in _TYPE_BITS), None)
            for r, b in regs:
                fn.regs[r] = b
                fn.reg_types[r] = typ
            if var is not None:
                if ".extern" in st:
                    var.extern = True
                fn.vars.append(var)
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
        ops = []                # call's (ret), func, (params) list: the engine does not execute calls
    else:
        ops = [parse_operand(x, line, path) for x in split_top(rest)] if rest else []
    ins = Instr(line, opcode, ops, st + ";", pred, neg)
    if opcode.split(".")[0] in _MATRIX:
        from .. import catalog
        try:
            ins.form, ins.imm = catalog.parse_instruction(st)
        except (catalog.MalformedOpcode, catalog.BadArgument) as e:
            raise PTXSyntaxError(line, f"{opcode}: {e}", path) from None
    fn.instrs.append(ins)
