"""The examples in docs/catalog.md (the README's "Catalog" section) are tests: every
``$ ptx-formal ...`` line produces exactly the output shown, and every ``>>>`` example runs."""

from __future__ import annotations

import doctest
import io
import os
import shlex
from contextlib import redirect_stdout

import pytest

from formal.cli import main

from doc_examples import console_examples

DOC = os.path.join(os.path.dirname(__file__), "..", "docs", "catalog.md")


with open(DOC) as _f:
    TEXT = _f.read()
CONSOLE = console_examples(TEXT)


def test_doc_has_examples():
    assert len(CONSOLE) >= 4


@pytest.mark.parametrize("cmd,expected", CONSOLE, ids=[c[:60] for c, _ in CONSOLE])
def test_console_example(cmd, expected):
    argv = shlex.split(cmd)
    assert argv[0] == "ptx-formal"
    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = main(argv[1:])
    assert rc == (1 if "ILLEGAL" in expected else 0)
    assert buf.getvalue().rstrip("\n") == expected.rstrip("\n")


def test_python_examples():
    parser = doctest.DocTestParser()
    test = parser.get_doctest(TEXT, {}, "docs/catalog.md", DOC, 0)
    assert test.examples
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    assert runner.failures == 0
