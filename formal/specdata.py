"""Where the PTX content lives: the TOML files under ``specs/``.

The engine knows no PTX facts of its own; every table it uses is loaded from here.
In a source checkout the files are ``<repo>/specs/*.toml`` (and the recipes
``<repo>/recipes``); in an installed wheel they ship as the packages ``formal.specs``
and ``formal.recipes``, i.e. the directories ``formal/specs`` and ``formal/recipes``
beside this file.  ``tests/test_packaging.py`` installs a wheel and checks both.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

_PKG = Path(__file__).resolve().parent


def _package_dir(package: str, marker: str) -> Path | None:
    """The directory of the data package ``package`` holding ``marker``, or None.

    ``importlib.resources.files`` returns a Traversable: a ``Path`` for a regular
    directory, a ``MultiplexedPath`` for a namespace package (``specs/`` has no
    ``__init__.py``).  Joining the marker file gives a real path in both cases;
    its parent is the directory (``str()`` of a MultiplexedPath is not a path).
    """
    try:
        from importlib.resources import files

        f = files(package) / marker
    except (ModuleNotFoundError, TypeError, ValueError):
        return None
    if isinstance(f, Path) and f.is_file():
        return f.parent
    return None                       # e.g. a zip import: not supported, say so below


def data_dir(name: str, marker: str) -> Path:
    """``<repo>/<name>`` in a checkout, ``formal/<name>`` (package ``formal.<name>``) when installed."""
    for d in (_PKG / name, _PKG.parent / name):     # wheel layout, then checkout layout
        if (d / marker).is_file():
            return d
    d = _package_dir(f"formal.{name}", marker)
    if d is not None:
        return d
    raise FileNotFoundError(f"cannot find the ptx-formal data files ({name}/{marker}); "
                            f"reinstall ptx-formal (pip install .) or run from a source checkout")


def spec_dir() -> Path:
    """The directory holding the spec files (a real directory on disk)."""
    return data_dir("specs", "mma.toml")


def recipes_dir() -> Path:
    """The recipe library directory."""
    return data_dir("recipes", "README.md")


def proofs_dir() -> Path | None:
    """``<repo>/proofs`` in a source checkout; None in an installed copy (reports are not shipped)."""
    d = _PKG.parent / "proofs"
    return d if d.is_dir() and (_PKG.parent / "specs" / "mma.toml").is_file() else None


def data_file(path: str | Path) -> Path:
    """A file argument of the CLI: ``path`` itself when it exists, else the shipped data file
    it names as spelled in the source tree (``specs/observed/X.json``, ``recipes/X.recipe``),
    so that examples naming shipped data work from any directory and from an installed
    wheel.  Anything else comes back unchanged (the caller reports it missing)."""
    p = Path(path)
    if p.exists() or p.is_absolute() or len(p.parts) < 2 or p.parts[0] not in ("specs", "recipes"):
        return p
    try:
        d = spec_dir() if p.parts[0] == "specs" else recipes_dir()
    except FileNotFoundError:
        return p
    q = d.joinpath(*p.parts[1:])
    return q if q.exists() else p


@lru_cache(maxsize=None)
def load_spec(name: str) -> dict[str, Any]:
    """Load ``specs/<name>.toml`` (or ``.json``) as a dict; cached."""
    d = spec_dir()
    toml_path = d / f"{name}.toml"
    if toml_path.exists():
        with open(toml_path, "rb") as f:
            return tomllib.load(f)
    json_path = d / f"{name}.json"
    if json_path.exists():
        return json.loads(json_path.read_text())
    raise FileNotFoundError(f"no spec file named {name!r} in {d}")


def spec_path(name: str) -> Path:
    return spec_dir() / name
