"""The installed package works: build the wheel, install it into a fresh venv, run the CLI
from outside the repository (specs, recipes and observed data must come from the wheel).

Also: the package list in pyproject.toml names every package under formal/.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
OP = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_package_list_matches_formal_subpackages():
    st = _pyproject()["tool"]["setuptools"]
    listed = set(st["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "formal").rglob("__init__.py")
             if "__pycache__" not in p.parts}
    data = {k for k in st["package-dir"]}            # formal.specs, formal.recipes: data packages
    assert found - listed == set(), f"packages missing from pyproject.toml: {sorted(found - listed)}"
    assert listed - found - data == set(), f"pyproject.toml lists packages that do not exist: {sorted(listed - found - data)}"
    for pkg, d in st["package-dir"].items():
        assert (ROOT / d).is_dir(), f"{pkg} -> {d} does not exist"
        assert pkg in st["package-data"], f"{pkg} ships no files"


def _run(cmd, cwd, **kw):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, **kw)


def _venv(tmp):
    """A venv with the wheel built from this checkout installed (deps from the system site-packages)."""
    src = tmp / "src"
    src.mkdir()
    # build from a copy so that the build leaves nothing in the checkout (tests run in parallel)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for name in ("formal", "specs", "recipes"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    dist = tmp / "dist"
    r = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(src)], cwd=tmp)
    if r.returncode != 0:      # offline: build with the system's setuptools instead of an isolated one
        r = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist),
                  str(src)], cwd=tmp)
    assert r.returncode == 0, f"pip wheel failed:\n{r.stdout}\n{r.stderr}"
    (whl,) = dist.glob("ptx_formal-*.whl")
    env_dir = tmp / "venv"
    # no pip inside the venv (ensurepip costs seconds): this pip installs into it (pip >= 22.3 --python)
    r = _run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(env_dir)], cwd=tmp)
    assert r.returncode == 0, r.stderr
    bindir = env_dir / ("Scripts" if os.name == "nt" else "bin")
    py = bindir / "python"
    if sys.prefix != sys.base_prefix:
        # this interpreter is itself a venv (the README's fresh-machine path): --system-site-packages
        # reaches the base interpreter's packages, not ours, so the new venv sees our site-packages
        # directories too (a .pth line adds a directory; the editable install's finder in it is not
        # run, so the checkout stays out of reach)
        import site
        r = _run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=tmp)
        Path(r.stdout.strip()).joinpath("outer_env.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    r = _run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "-q", str(whl)], cwd=tmp)
    assert r.returncode == 0, f"pip install failed:\n{r.stdout}\n{r.stderr}"
    work = tmp / "elsewhere"      # a cwd outside the repo with no specs/ or recipes/ to find by accident
    work.mkdir()
    return {"py": py, "exe": bindir / "ptx-formal", "cwd": work, "venv": env_dir}


def _wheel_installs_the_package_not_the_checkout(venv):
    r = _run([str(venv["py"]), "-c", "import formal, formal.specdata as s; print(formal.__file__); "
                                     "print(s.spec_dir()); print(s.recipes_dir()); print(s.proofs_dir())"],
             cwd=venv["cwd"])
    assert r.returncode == 0, r.stderr
    mod, specs, recipes, proofs = r.stdout.split("\n")[:4]
    site = str(venv["venv"])
    assert mod.startswith(site), f"imported {mod}, not the installed wheel (the system's editable install?)"
    assert specs.startswith(site) and Path(specs, "mma.toml").is_file()
    assert recipes.startswith(site) and Path(recipes, "README.md").is_file()
    assert proofs == "None"


def _wheel_check(venv):
    r = _run([str(venv["exe"]), "check", OP, "--target", "sm_90"], cwd=venv["cwd"])
    assert r.returncode == 0, r.stderr
    assert "LEGAL on sm_90" in r.stdout
    r = _run([str(venv["exe"]), "check", "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f32"], cwd=venv["cwd"])
    assert r.returncode == 1 and "ILLEGAL" in r.stdout


def _wheel_prove_slice(venv):
    r = _run([str(venv["exe"]), "prove", OP, "-q"], cwd=venv["cwd"])
    assert r.returncode == 0, r.stderr
    assert "all proved" in r.stderr and "PROVED" in r.stdout
    # no checked-in report in an installed copy: --check-report says so (bad input), not "stale"
    r = _run([str(venv["exe"]), "prove", "--all", "--check-report", "--family", "layout.bijective"], cwd=venv["cwd"])
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr


def _wheel_transform_library(venv):
    n = len(list((ROOT / "recipes").glob("*.recipe"))) + len(list((ROOT / "recipes").glob("*.json")))
    assert n > 0
    r = _run([str(venv["exe"]), "transform", "--library"], cwd=venv["cwd"])
    assert r.returncode == 0, r.stderr
    assert f"# {n}/{n} recipes as expected" in r.stderr


def _wheel_observed_data(venv):
    # specs/observed/*.json and the .npz slice come from the wheel
    r = _run([str(venv["exe"]), "wmma", "maps", "--arch", "sm_90"], cwd=venv["cwd"])
    assert r.returncode == 0, r.stderr
    assert "silicon" in r.stdout
    r = _run([str(venv["py"]), "-c", "from formal.specdata import spec_dir; "
                                     "print(spec_dir() / 'observed' / 'wmma_pipeline_slice_sm90.json')"], cwd=venv["cwd"])
    r = _run([str(venv["exe"]), "wmma", "pipeline-check", r.stdout.strip()], cwd=venv["cwd"])
    assert r.returncode == 0, r.stderr
    assert "match" in r.stdout


def _readme_anywhere_examples():
    """README console examples that name shipped data (``specs/...``, ``recipes/...``) and no
    file of the checkout: they claim to work from anywhere (``formal.specdata.data_file``)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from doc_examples import console_examples

    out = []
    for cmd, expected in console_examples((ROOT / "README.md").read_text()):
        note = cmd.split("  # ", 1)[1] if "  # " in cmd else ""
        if any(w in note for w in ("checkout", "not run", "slow", "needs")):
            continue
        argv = shlex.split(cmd, comments=True)
        if any(a.startswith(("specs/", "recipes/")) for a in argv):
            out.append((argv, expected))
    return out


def _wheel_readme_examples(venv):
    ex = _readme_anywhere_examples()
    assert {a[1] for a, _ in ex} >= {"transform", "wmma"}, ex       # the recipe and pipeline-check examples
    for argv, expected in ex:
        r = _run([str(venv["exe"]), *argv[1:]], cwd=venv["cwd"])
        assert r.returncode == 0, (argv, r.stdout, r.stderr)
        if expected.strip():
            assert r.stdout.rstrip("\n") == expected.rstrip("\n")
    # a name that is neither a file nor shipped data stays a one-line bad-input error
    r = _run([str(venv["exe"]), "transform", "recipes/no_such.recipe"], cwd=venv["cwd"])
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr


@pytest.mark.slow          # a wheel built and installed into a fresh venv (~11 s): slow; CI installs the checkout itself (.ci/run)
def test_wheel_works_from_outside_the_repo(tmp_path):
    """One test (one wheel build, also under xdist): build, install into a fresh venv, run from elsewhere."""
    venv = _venv(tmp_path)
    _wheel_installs_the_package_not_the_checkout(venv)
    _wheel_check(venv)
    _wheel_prove_slice(venv)
    _wheel_transform_library(venv)
    _wheel_observed_data(venv)
    _wheel_readme_examples(venv)
