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


ROOT = Path(__file__).resolve().parent.parent


def _param(cmd: str, expected: str):
    """A trailing shell comment may say `# exit N` (the expected code), `# slow` (only with -m slow),
    `# needs ptxas`, `# needs triton` or `# not run` (needs hardware: the command line is parsed, not run)."""
    note = cmd.split("  # ", 1)[1] if "  # " in cmd else ""
    marks = [pytest.mark.slow] if re.search(r"\bslow\b", note) else []
    return pytest.param(cmd, expected, marks=marks, id=cmd[:70])


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """Examples run in a scratch directory (their output files land there) that sees the repo's data."""
    for name in ("recipes", "specs", "proofs", "tests", "docs"):
        (tmp_path / name).symlink_to(ROOT / name, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("cmd,expected", [_param(c, e) for c, e in EXAMPLES])
def test_console_example(cmd, expected, workdir):
    note = cmd.split("  # ", 1)[1] if "  # " in cmd else ""
    argv = shlex.split(cmd, comments=True)
    assert argv[0] == "ptx-formal"
    if "not run" in note:
        from formal.cli import build_parser
        build_parser().parse_args(argv[1:])        # a real subcommand with valid options
        return
    if "needs ptxas" in note:
        from formal.catalog import ptxas
        if not ptxas.installations():
            pytest.skip("no ptxas found")
    if "needs triton" in note:
        import importlib.util
        if importlib.util.find_spec("triton") is None:
            pytest.skip("Triton is not installed")
    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = main(argv[1:])
    bad = re.search(r"\b(ILLEGAL|INVALID|UNDEFINED)\b", expected)
    m = re.search(r"\bexit (\d)", note)
    assert rc == (int(m.group(1)) if m else 1 if bad else 0), buf.getvalue()
    if expected.strip():
        assert buf.getvalue().rstrip("\n") == expected.rstrip("\n")


def test_every_subcommand_has_a_readme_example():
    import argparse

    from formal.cli import build_parser

    def leaves(p, prefix=()):
        subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            yield prefix
            return
        for name, sp in subs[0].choices.items():
            yield from leaves(sp, prefix + (name,))

    shown = {tuple(shlex.split(c, comments=True)[1:3]) for c, _ in EXAMPLES} | \
            {tuple(shlex.split(c, comments=True)[1:2]) for c, _ in EXAMPLES}
    missing = [" ".join(p) for p in leaves(build_parser()) if p not in shown]
    assert not missing, f"README has no example of: {missing}"


def test_readme_exit_codes_section_matches_the_cli():
    sec = README.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    for code, word in [(0, "legal"), (1, "illegal"), (2, "bad input"), (3, "GPU"), (4, "internal error")]:
        assert re.search(rf"\|\s*{code}\s*\|[^\n]*{word}", sec, re.I), (code, word)
    assert "--debug" in sec


def test_python_example():
    code = re.findall(r"```python\n(.*?)```", README, re.S)
    assert len(code) >= 2
    ns: dict = {}
    exec(compile(code[0], "README.md", "exec"), ns)
    assert ns["d"].shape == (1, 32, 4) and ns["D"].shape == (1, 16, 8)
    ns = {}
    exec(compile(code[1], "README.md", "exec"), ns)      # `import formal.vectors.strategies` and a property test
    assert callable(ns["test_my_mma"])


def _note(cmd: str) -> str:
    return cmd.split("  # ", 1)[1] if "  # " in cmd else ""


def test_examples_reading_checkout_files_say_so():
    """An example reading a file of the source tree outside the shipped data (tests/, proofs/,
    docs/) is marked `# checkout`; one naming shipped data (specs/, recipes/) is not."""
    for cmd, _ in EXAMPLES:
        argv = shlex.split(cmd, comments=True)
        local = [a for a in argv if re.match(r"(tests|proofs|docs)/", a) or re.search(r"[ =](tests|proofs|docs)/", a)]
        shipped = [a for a in argv if a.startswith(("specs/", "recipes/"))]
        if local and "not run" not in _note(cmd):
            assert "checkout" in _note(cmd), f"reads {local} of the checkout but is not marked `# checkout`: {cmd}"
        if shipped and not local:
            assert "checkout" not in _note(cmd), cmd


@pytest.mark.parametrize("cmd,expected", [(c, e) for c, e in EXAMPLES
                                          if any(a.startswith(("specs/", "recipes/")) for a in shlex.split(c, comments=True))
                                          and not re.search(r"checkout|not run|slow|needs", _note(c))],
                         ids=lambda x: x[:60] if isinstance(x, str) and x.startswith("ptx") else "")
def test_shipped_data_examples_run_from_an_empty_directory(cmd, expected, tmp_path, monkeypatch):
    """specs/... and recipes/... name the shipped data from any directory (formal.specdata.data_file)."""
    monkeypatch.chdir(tmp_path)          # no specs/ or recipes/ here
    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = main(shlex.split(cmd, comments=True)[1:])
    assert rc == 0, buf.getvalue()
    if expected.strip():
        assert buf.getvalue().rstrip("\n") == expected.rstrip("\n")
