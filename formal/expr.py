"""A tiny formula language: Python expression syntax, compiled three ways.

The PTX ISA writes fragment layouts as small integer formulas
(``row = groupID + 8``, ``groupID = %laneid >> 2``).  ``specs/`` keeps them in
that form, and this module turns one formula into

* a Python/numpy evaluator (``Formula.eval(env)``; works on ints and on numpy
  arrays, so one call enumerates a whole fragment),
* a Z3 bit-vector term (``Formula.z3(env)``; unsigned semantics throughout:
  ``//`` is UDiv, ``%`` is URem, ``>>`` is LShR, comparisons are unsigned),
* a sympy expression for printing (``Formula.sympy()``).

Predicates over instruction qualifiers (strings) use the same syntax
(``shape == 'm16n8k16' and atype in ['f16', 'bf16']``) and are evaluated by
``Formula.eval`` on plain Python values.

Allowed syntax: integer and string constants, names, ``+ - * // % << >> & | ^``,
unary ``- ~ not``, comparisons (also ``in`` / ``not in`` with a literal list),
``and`` / ``or``, ``a if c else b``, lists/tuples of constants, and the
functions ``min``/``max``.  Anything else is rejected at parse time with a
:class:`FormulaError` naming the construct.

Example::

    >>> f = Formula("groupID + 8 * ((i >> 1) & 1)", let={"groupID": "lane >> 2"})
    >>> f.eval({"lane": 5, "i": 2})
    9
"""

from __future__ import annotations

import ast
import operator
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any, Mapping

import numpy as np


class FormulaError(ValueError):
    """A formula that does not parse or uses a construct outside the language."""


_BINOPS = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%",
    ast.LShift: "<<", ast.RShift: ">>", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^",
}
_CMPOPS = {
    ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
    ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not",
}
_FUNCS = {"min", "max"}


def _check(node: ast.AST, src: str) -> None:
    """Reject every node outside the language, before anything is evaluated."""
    for n in ast.walk(node):
        ok = isinstance(n, (
            ast.Expression, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp,
            ast.Name, ast.Constant, ast.List, ast.Tuple, ast.Load, ast.Call,
            ast.And, ast.Or, ast.Not, ast.USub, ast.UAdd, ast.Invert,
        )) or type(n) in _BINOPS or type(n) in _CMPOPS
        if not ok:
            raise FormulaError(f"{type(n).__name__} is not allowed in a formula: {src}")
        if isinstance(n, ast.Call):
            if not (isinstance(n.func, ast.Name) and n.func.id in _FUNCS) or n.keywords:
                raise FormulaError(f"only min(...)/max(...) may be called in a formula: {src}")
        if isinstance(n, ast.Constant) and not isinstance(n.value, (int, str, type(None))):
            raise FormulaError(f"constant {n.value!r} is not an int or string: {src}")


MAX_CONSTANT = 1 << 64     # formulas describe 32/64-bit values; a longer literal is a typo, not a layout
MAX_DEPTH = 100           # nesting bound: evaluation recurses once per level
MAX_LENGTH = 10_000


def _show(src: str) -> str:
    """The formula for an error message (a huge input is cut, not echoed)."""
    return repr(src) if len(src) <= 120 else repr(src[:100]) + f" ... ({len(src)} characters)"


def _depth(tree: ast.AST) -> int:
    deepest, todo = 0, [(tree, 1)]
    while todo:
        n, d = todo.pop()
        deepest = max(deepest, d)
        todo.extend((c, d + 1) for c in ast.iter_child_nodes(n))
    return deepest


def _const_zero(node: ast.AST) -> bool:
    """Is ``node`` a constant expression (no names) equal to 0?"""
    if any(isinstance(n, (ast.Name, ast.Call)) for n in ast.walk(node)):
        return False
    try:
        return _eval(node, {}) == 0
    except Exception:
        return False


def _parse(src: str) -> ast.Expression:
    return _parse_str(src if isinstance(src, str) else str(src))


@lru_cache(maxsize=4096)
def _parse_str(src: str) -> ast.Expression:
    # cached: engines build the same formulas again and again (one Formula per step); the tree
    # is only read (walked, evaluated, compiled), never changed
    if len(src) > MAX_LENGTH:
        raise FormulaError(f"formula too long ({len(src)} characters, at most {MAX_LENGTH}): {_show(src)}")
    try:
        tree = ast.parse(src.strip(), mode="eval")
    except SyntaxError as e:
        raise FormulaError(f"cannot parse formula {_show(src)}: {e.msg}") from None
    except (RecursionError, MemoryError):
        raise FormulaError(f"formula nested too deeply: {_show(src)}") from None
    if _depth(tree) > MAX_DEPTH:
        raise FormulaError(f"formula nested too deeply (more than {MAX_DEPTH} levels): {_show(src)}")
    _check(tree, _show(src))
    for n in ast.walk(tree):
        if isinstance(n, ast.Constant) and isinstance(n.value, int) and not isinstance(n.value, bool) \
                and abs(n.value) > MAX_CONSTANT:
            raise FormulaError(f"integer constant {str(n.value)[:30]}{'...' if len(str(n.value)) > 30 else ''} is "
                               f"too large (at most 2^64) in formula {_show(src)}")
        if isinstance(n, ast.BinOp) and type(n.op) in (ast.FloorDiv, ast.Mod) and _const_zero(n.right):
            raise FormulaError(f"division by zero ('{_BINOPS[type(n.op)]} 0') is not allowed in a formula: {_show(src)}")
    return tree


@lru_cache(maxsize=4096)
def _compile_str(src: str, label: str):
    return compile(_parse_str(src), label, "eval")


def _compile(src, label: str):
    return _compile_str(src if isinstance(src, str) else str(src), label)


def _is_array(x: Any) -> bool:
    return isinstance(x, np.ndarray)


def _has_array(scope: Mapping[str, Any]) -> bool:
    """Is any value a numpy array (or subclass)?  Over the distinct value types: formulas run
    hundreds of thousands of times on environments of a dozen plain ints."""
    types = set(map(type, scope.values()))
    return not types <= _PLAIN_TYPES and any(issubclass(t, np.ndarray) for t in types)


_PLAIN_TYPES = frozenset({int, bool, str, float, type(None)})


@dataclass
class Formula:
    """One formula with optional ``let`` bindings (evaluated in order, each may use earlier ones)."""

    src: str
    let: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.src = str(self.src)
        self._tree = _parse(self.src)
        self._lets = [(k, _parse(v)) for k, v in dict(self.let).items()]

    # -- introspection ---------------------------------------------------------------
    @cached_property
    def names(self) -> set[str]:
        """Free variables: names used but not bound by ``let``."""
        bound: set[str] = set()
        free: set[str] = set()
        for k, tree in self._lets:
            free |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - bound - _FUNCS
            bound.add(k)
        free |= {n.id for n in ast.walk(self._tree) if isinstance(n, ast.Name)} - bound - _FUNCS
        return free - {"None", "True", "False"}

    def __str__(self) -> str:
        if not self.let:
            return self.src
        lets = ", ".join(f"{k} = {v}" for k, v in self.let.items())
        return f"{self.src}  where {lets}"

    # -- Python / numpy ----------------------------------------------------------------
    def eval(self, env: Mapping[str, Any]) -> Any:
        """Evaluate with Python semantics on ints/strings, elementwise on numpy arrays."""
        scope = dict(env)
        if self._code is not None and not _has_array(scope):
            # plain values: the formula is Python syntax with Python semantics, so it runs as
            # compiled Python code (the checked tree, once per formula); arrays need the
            # interpreter below (and/or/not/in/if become elementwise numpy operations)
            try:
                for k, code in self._code[0]:
                    scope[k] = eval(code, _PY_GLOBALS, scope)  # noqa: S307 - a checked formula tree
                out = eval(self._code[1], _PY_GLOBALS, scope)  # noqa: S307
            except NameError as e:
                raise FormulaError(f"unbound name {e.name!r}") from None
            except ZeroDivisionError:
                raise FormulaError(f"division by zero (by a value that is 0) in formula {_show(str(self))}") from None
            return out
        try:
            for k, tree in self._lets:
                scope[k] = _eval(tree.body, scope)
            return _eval(self._tree.body, scope)
        except OverflowError:
            raise FormulaError(f"a value of formula {_show(str(self))} does not fit in 64 bits") from None

    @cached_property
    def _code(self):
        """Compiled Python for plain values, or None where Python's semantics would differ
        from the checked interpreter (shifts: unbounded on Python ints)."""
        trees = [t for _, t in self._lets] + [self._tree]
        if any(isinstance(n, ast.LShift) for t in trees for n in ast.walk(t)):
            return None
        lets = [(k, _compile(v, f"<formula {k}>")) for k, v in dict(self.let).items()]
        return lets, _compile(self.src, "<formula>")

    # -- Z3 ----------------------------------------------------------------------------
    def z3(self, env: Mapping[str, Any], width: int | None = None):
        """A Z3 term; ``env`` maps free names to Z3 bit-vectors (or Python ints)."""
        import z3

        if width is None:
            width = next((v.size() for v in env.values() if isinstance(v, z3.BitVecRef)), 32)
        scope = dict(env)
        for k, tree in self._lets:
            scope[k] = _z3(tree.body, scope, width)
        return _z3(self._tree.body, scope, width)

    # -- sympy -------------------------------------------------------------------------
    def sympy(self, inline_lets: bool = False):
        """A sympy expression for printing; bit operations become named functions."""
        import sympy

        scope: dict[str, Any] = {}
        for k, tree in self._lets:
            scope[k] = _sym(tree.body, scope) if inline_lets else sympy.Symbol(k, integer=True, nonnegative=True)
        return _sym(self._tree.body, scope)


# ---------------------------------------------------------------------------------------
# Python / numpy evaluation

_PY_BIN = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv,
    "%": operator.mod, "<<": operator.lshift, ">>": operator.rshift, "&": operator.and_,
    "|": operator.or_, "^": operator.xor,
}
_PY_GLOBALS = {"__builtins__": {}, "min": min, "max": max, "None": None, "True": True, "False": False}

_PY_CMP = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
    ">": operator.gt, ">=": operator.ge,
}


def _eval(node: ast.AST, env: Mapping[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in ("None", "True", "False"):
            return {"None": None, "True": True, "False": False}[node.id]
        try:
            return env[node.id]
        except KeyError:
            raise FormulaError(f"unbound name {node.id!r}") from None
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_eval(e, env) for e in node.elts]
    if isinstance(node, ast.BinOp):
        op = _BINOPS[type(node.op)]
        a, b = _eval(node.left, env), _eval(node.right, env)
        if op in ("//", "%") and np.any(np.asarray(b) == 0):
            raise FormulaError(f"division by zero ('{op}' by a value that is 0) in formula {ast.unparse(node)[:120]!r}")
        if op == "<<" and np.any(np.asarray(b) > 64):
            raise FormulaError(f"shift by more than 64 bits in formula {ast.unparse(node)[:120]!r}")
        return _PY_BIN[op](a, b)
    if isinstance(node, ast.UnaryOp):
        v = _eval(node.operand, env)
        if isinstance(node.op, ast.Not):
            return np.logical_not(v) if _is_array(v) else (not v)
        if isinstance(node.op, ast.USub):
            return -v
        if isinstance(node.op, ast.UAdd):
            return v
        return ~v
    if isinstance(node, ast.BoolOp):
        vals = [_eval(v, env) for v in node.values]
        if any(_is_array(v) for v in vals):
            f = np.logical_and if isinstance(node.op, ast.And) else np.logical_or
            out = vals[0]
            for v in vals[1:]:
                out = f(out, v)
            return out
        if isinstance(node.op, ast.And):
            out = True
            for v in vals:
                out = out and v
            return out
        out = False
        for v in vals:
            out = out or v
        return out
    if isinstance(node, ast.Compare):
        left = _eval(node.left, env)
        result: Any = True
        for op, right_node in zip(node.ops, node.comparators):
            right = _eval(right_node, env)
            name = _CMPOPS[type(op)]
            if name in ("in", "not in"):
                if _is_array(left):
                    r = np.isin(left, right)
                else:
                    r = left in right
                if name == "not in":
                    r = np.logical_not(r) if _is_array(r) else (not r)
            elif name == "is":
                r = left is right
            elif name == "is not":
                r = left is not right
            else:
                r = _PY_CMP[name](left, right)
            result = np.logical_and(result, r) if (_is_array(r) or _is_array(result)) else (result and r)
            left = right
        return result
    if isinstance(node, ast.IfExp):
        cond = _eval(node.test, env)
        if _is_array(cond):
            return np.where(cond, _eval(node.body, env), _eval(node.orelse, env))
        return _eval(node.body, env) if cond else _eval(node.orelse, env)
    if isinstance(node, ast.Call):
        args = [_eval(a, env) for a in node.args]
        if any(_is_array(a) for a in args):
            f = np.minimum if node.func.id == "min" else np.maximum
            out = args[0]
            for a in args[1:]:
                out = f(out, a)
            return out
        return (min if node.func.id == "min" else max)(*args)
    raise FormulaError(f"cannot evaluate {ast.dump(node)}")


# ---------------------------------------------------------------------------------------
# Z3 (unsigned bit-vectors)

def _z3(node: ast.AST, env: Mapping[str, Any], width: int):
    import z3

    def bv(x):
        if isinstance(x, z3.BitVecRef):
            return x
        if isinstance(x, bool) or isinstance(x, z3.BoolRef):
            return z3.If(x, z3.BitVecVal(1, width), z3.BitVecVal(0, width))
        return z3.BitVecVal(int(x), width)

    def boolean(x):
        if isinstance(x, z3.BoolRef):
            return x
        if isinstance(x, bool):
            return z3.BoolVal(x)
        return bv(x) != 0

    if isinstance(node, ast.Constant):
        if isinstance(node.value, str) or node.value is None:
            raise FormulaError("strings cannot appear in a Z3 formula")
        return z3.BitVecVal(int(node.value), width)
    if isinstance(node, ast.Name):
        try:
            v = env[node.id]
        except KeyError:
            raise FormulaError(f"unbound name {node.id!r}") from None
        return v if isinstance(v, (z3.BitVecRef, z3.BoolRef)) else bv(v)
    if isinstance(node, ast.BinOp):
        a, b = bv(_z3(node.left, env, width)), bv(_z3(node.right, env, width))
        op = _BINOPS[type(node.op)]
        return {
            "+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
            "//": lambda: z3.UDiv(a, b), "%": lambda: z3.URem(a, b),
            "<<": lambda: a << b, ">>": lambda: z3.LShR(a, b),
            "&": lambda: a & b, "|": lambda: a | b, "^": lambda: a ^ b,
        }[op]()
    if isinstance(node, ast.UnaryOp):
        v = _z3(node.operand, env, width)
        if isinstance(node.op, ast.Not):
            return z3.Not(boolean(v))
        if isinstance(node.op, ast.USub):
            return -bv(v)
        if isinstance(node.op, ast.UAdd):
            return bv(v)
        return ~bv(v)
    if isinstance(node, ast.BoolOp):
        vals = [boolean(_z3(v, env, width)) for v in node.values]
        return z3.And(*vals) if isinstance(node.op, ast.And) else z3.Or(*vals)
    if isinstance(node, ast.Compare):
        left = _z3(node.left, env, width)
        parts = []
        for op, rn in zip(node.ops, node.comparators):
            name = _CMPOPS[type(op)]
            if name in ("in", "not in"):
                if not isinstance(rn, (ast.List, ast.Tuple)):
                    raise FormulaError("'in' needs a literal list in a Z3 formula")
                opts = [bv(_z3(e, env, width)) for e in rn.elts]
                r = z3.Or(*[bv(left) == o for o in opts]) if opts else z3.BoolVal(False)
                parts.append(r if name == "in" else z3.Not(r))
                continue
            right = _z3(rn, env, width)
            a, b = bv(left), bv(right)
            parts.append({
                "==": lambda: a == b, "!=": lambda: a != b, "<": lambda: z3.ULT(a, b),
                "<=": lambda: z3.ULE(a, b), ">": lambda: z3.UGT(a, b), ">=": lambda: z3.UGE(a, b),
            }[name]())
            left = right
        return z3.And(*parts) if len(parts) > 1 else parts[0]
    if isinstance(node, ast.IfExp):
        c = boolean(_z3(node.test, env, width))
        a, b = _z3(node.body, env, width), _z3(node.orelse, env, width)
        if isinstance(a, z3.BoolRef) and isinstance(b, z3.BoolRef):
            return z3.If(c, a, b)
        return z3.If(c, bv(a), bv(b))
    if isinstance(node, ast.Call):
        args = [bv(_z3(a, env, width)) for a in node.args]
        out = args[0]
        for a in args[1:]:
            out = z3.If(z3.ULT(a, out), a, out) if node.func.id == "min" else z3.If(z3.UGT(a, out), a, out)
        return out
    raise FormulaError(f"cannot compile {ast.dump(node)} to Z3")


# ---------------------------------------------------------------------------------------
# sympy (printing)

def _sym_funcs():
    import sympy

    class _BitOp(sympy.Function):
        _sym = "?"
        is_integer = True

        def _sympystr(self, printer):
            a, b = self.args
            return f"({printer._print(a)} {self._sym} {printer._print(b)})"

        def _latex(self, printer):
            a, b = self.args
            return rf"\left({printer._print(a)} \mathbin{{\texttt{{{self._tex}}}}} {printer._print(b)}\right)"

    def mk(name, sym, tex):
        return type(name, (_BitOp,), {"_sym": sym, "_tex": tex})

    return {
        "&": mk("BitAnd", "&", r"\&"), "|": mk("BitOr", "|", "|"), "^": mk("BitXor", "^", r"\^{}"),
        ">>": mk("RShift", ">>", ">>"), "<<": mk("LShift", "<<", "<<"),
    }


_SYMF: dict | None = None


def _sym(node: ast.AST, env: Mapping[str, Any]):
    import sympy

    global _SYMF
    if _SYMF is None:
        _SYMF = _sym_funcs()
    if isinstance(node, ast.Constant):
        return sympy.Integer(node.value) if isinstance(node.value, int) else sympy.Symbol(repr(node.value))
    if isinstance(node, ast.Name):
        return env.get(node.id, sympy.Symbol(node.id, integer=True, nonnegative=True))
    if isinstance(node, ast.BinOp):
        a, b = _sym(node.left, env), _sym(node.right, env)
        op = _BINOPS[type(node.op)]
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        if op == "//":
            return sympy.floor(a / b)
        if op == "%":
            return sympy.Mod(a, b)
        return _SYMF[op](a, b)
    if isinstance(node, ast.UnaryOp):
        v = _sym(node.operand, env)
        if isinstance(node.op, ast.USub):
            return -v
        if isinstance(node.op, ast.Not):
            return sympy.Not(v)
        return v
    if isinstance(node, ast.IfExp):
        return sympy.Piecewise((_sym(node.body, env), _sym_bool(node.test, env)),
                               (_sym(node.orelse, env), True))
    if isinstance(node, ast.Call):
        args = [_sym(a, env) for a in node.args]
        return (sympy.Min if node.func.id == "min" else sympy.Max)(*args)
    return _sym_bool(node, env)


def _sym_bool(node: ast.AST, env: Mapping[str, Any]):
    import sympy

    if isinstance(node, ast.Compare):
        left = _sym(node.left, env)
        parts = []
        for op, rn in zip(node.ops, node.comparators):
            name = _CMPOPS[type(op)]
            if name in ("in", "not in"):
                opts = [_sym(e, env) for e in rn.elts]
                r = sympy.Or(*[sympy.Eq(left, o) for o in opts])
                parts.append(r if name == "in" else sympy.Not(r))
                continue
            right = _sym(rn, env)
            parts.append({"==": sympy.Eq, "!=": sympy.Ne, "<": sympy.Lt, "<=": sympy.Le,
                          ">": sympy.Gt, ">=": sympy.Ge}[name](left, right))
            left = right
        return sympy.And(*parts)
    if isinstance(node, ast.BoolOp):
        vals = [_sym_bool(v, env) for v in node.values]
        return sympy.And(*vals) if isinstance(node.op, ast.And) else sympy.Or(*vals)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return sympy.Not(_sym_bool(node.operand, env))
    return sympy.Ne(_sym(node, env), 0)


def predicate(src: str | None) -> Formula | None:
    """Compile an optional predicate; ``None`` or empty means 'always'."""
    if src is None or str(src).strip() == "":
        return None
    return Formula(src)


def holds(pred: Formula | None, env: Mapping[str, Any]) -> bool:
    return True if pred is None else bool(pred.eval(env))
