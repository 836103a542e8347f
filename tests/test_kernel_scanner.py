"""The PTX scanner (formal.kernel.parse._strip_comments / _statements) against a reference that
reads one character at a time (the scanner's earlier form, kept here): the same output, errors
included, on every module of the corpus and on random texts made of the characters that matter."""

from __future__ import annotations

import random
import re
from pathlib import Path

from formal.kernel import parse as P
from formal.kernel.parse import PTXSyntaxError

_LABEL = P._LABEL
ROOT = Path(__file__).resolve().parent.parent


def _ref_strip_comments(text: str, path) -> str:
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = text.find('"', i + 1)
            j = n - 1 if j < 0 else j
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                raise PTXSyntaxError(text.count("\n", 0, i) + 1, "unterminated /* comment", path)
            out.append(re.sub(r"[^\n]", " ", text[i:j + 2]))
            i = j + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _ref_statements(text: str, path):
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


def _both(f, g, *args):
    out = []
    for fn in (f, g):
        try:
            r = fn(*args)
            out.append(list(r) if not isinstance(r, str) else r)
        except PTXSyntaxError as e:
            out.append(("error", str(e)))
    return out


def test_scanner_matches_the_reference_on_the_corpus():
    paths = sorted((ROOT / "tests" / "data").rglob("*.ptx"))
    assert len(paths) > 20
    for path in paths:
        text = path.read_text()
        a, b = _both(P._strip_comments, _ref_strip_comments, text, path.name)
        assert a == b, path.name
        a, b = _both(P._statements, _ref_statements, a, path.name)
        assert a == b and len(a) > 3, path.name


def test_scanner_matches_the_reference_on_random_texts():
    rng = random.Random(7)
    pieces = ['"', "/", "*", "//", "/*", "*/", "\n", ";", "{", "}", ":", "::", " ", "\t", "a", "b:", "=", "@p",
              "mov", "%r1", ".reg", "\r"]
    for _ in range(5000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 16)))
        a, b = _both(P._strip_comments, _ref_strip_comments, text, "x")
        assert a == b, repr(text)
        a, b = _both(P._statements, _ref_statements, text, "x")
        assert a == b, repr(text)
