"""Where the PTX content lives: the TOML files under ``specs/``.

The engine knows no PTX facts of its own; every table it uses is loaded from here.
In a source checkout the files are ``<repo>/specs/*.toml``; in an installed wheel
they ship as the package ``formal.specs``.
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


def spec_dir() -> Path:
    """The directory holding the spec files."""
    repo = Path(__file__).resolve().parent.parent / "specs"
    if (repo / "mma.toml").exists():
        return repo
    try:
        from importlib.resources import files

        p = Path(str(files("formal.specs")))
        if (p / "mma.toml").exists():
            return p
    except (ModuleNotFoundError, TypeError):  # pragma: no cover
        pass
    raise FileNotFoundError("cannot find the ptx-formal spec files (specs/*.toml)")


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
