"""docs/kernel.md is a test: every `$ ptx-formal kernel ...` example prints exactly what is shown
(exit 0 for proved/legal, 1 for refuted), and the Python example runs."""

from __future__ import annotations

import doctest
import io
import os
import shlex
from contextlib import redirect_stderr, redirect_stdout

import pytest

from formal.cli import main

from doc_examples import console_examples

ROOT = os.path.join(os.path.dirname(__file__), "..")
DOC = os.path.join(ROOT, "docs", "kernel.md")
with open(DOC) as _f:
    TEXT = _f.read()
CONSOLE = console_examples(TEXT)


def test_doc_has_examples():
    assert len(CONSOLE) >= 3


@pytest.mark.parametrize("cmd,expected", CONSOLE, ids=[c[:70] for c, _ in CONSOLE])
def test_console_example(cmd, expected, monkeypatch):
    """Each example prints exactly what is shown: stdout, or stderr for one marked `# exit N`."""
    monkeypatch.chdir(ROOT)
    cmd, _, mark = cmd.partition("  # exit ")
    argv = shlex.split(cmd)
    assert argv[:2] == ["ptx-formal", "kernel"]
    buf, err = io.StringIO(), io.StringIO()
    with redirect_stdout(buf), redirect_stderr(err):
        rc = main(argv[1:])
    if mark:
        assert rc == int(mark.split()[0]) and buf.getvalue() == ""
        assert err.getvalue().rstrip("\n") == expected.rstrip("\n")
        return
    assert rc == (1 if expected.startswith("refuted") or "ILLEGAL" in expected else 0)
    assert buf.getvalue().rstrip("\n") == expected.rstrip("\n")


def test_python_examples(monkeypatch):
    monkeypatch.chdir(ROOT)
    test = doctest.DocTestParser().get_doctest(TEXT, {}, "docs/kernel.md", DOC, 0)
    assert test.examples
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    assert runner.failures == 0


def test_the_spec_shown_is_the_checked_in_spec():
    with open(os.path.join(ROOT, "tests", "data", "kernels_small", "tiny_mma.toml")) as f:
        body = "".join(l for l in f if not l.startswith("#")).strip()
    assert body in TEXT


@pytest.mark.parametrize("path", ["tests/data/kernels_inplace/chain2_f16.toml", "tests/data/kernels_frontend/calls.toml"])
def test_the_specs_shown_are_the_checked_in_specs(path):
    with open(os.path.join(ROOT, path)) as f:
        body = "".join(l for l in f if not l.startswith("#")).strip()
    assert "```toml\n" + body + "\n```" in TEXT
