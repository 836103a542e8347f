"""The README's examples are tests: every `$ ptx-formal ...` line of a ```console block exits
as the text implies (1 when the shown output says ILLEGAL/INVALID, else 0) and prints exactly
the lines shown, when lines are shown; the ```python block runs."""

from __future__ import annotations

import io
import re
import shlex
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from formal.cli import main

from doc_examples import console_examples

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


EXAMPLES = console_examples(README)


def test_readme_has_the_two_setup_commands():
    blocks = re.findall(r"```sh\n(.*?)```", README, re.S)
    setup = [b.strip() for b in blocks if "pip install" in b]
    assert setup[:2] == ['python3 -m pip install -e . && ptx-formal prove --all',
                         'python3 -m pip install -e ".[test]" && python3 -m pytest -n auto']
    ci = (Path(__file__).resolve().parent.parent / ".ci" / "run").read_text()
    assert setup[1] in ci


@pytest.mark.parametrize("cmd,expected", EXAMPLES, ids=[c[:70] for c, _ in EXAMPLES])
def test_console_example(cmd, expected):
    argv = shlex.split(cmd)
    assert argv[0] == "ptx-formal"
    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = main(argv[1:])
    bad = re.search(r"\b(ILLEGAL|INVALID)\b", expected)
    assert rc == (1 if bad else 0), buf.getvalue()
    if expected.strip():
        assert buf.getvalue().rstrip("\n") == expected.rstrip("\n")


def test_python_example():
    code = re.findall(r"```python\n(.*?)```", README, re.S)
    assert code
    ns: dict = {}
    exec(compile(code[0], "README.md", "exec"), ns)
    assert ns["d"].shape == (1, 32, 4) and ns["D"].shape == (1, 16, 8)
