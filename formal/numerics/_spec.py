"""Private loader for ``specs/*.toml`` (used until/unless ``formal.specdata`` exists).

The numerics engine knows no PTX facts of its own: format parameters come from
``specs/formats.toml``.  We prefer the lead's ``formal.specdata.load_spec`` when it
exists, then the installed ``formal.specs`` package data, then the repository copy.
"""
from __future__ import annotations

import functools
from pathlib import Path

try:  # Python >= 3.11
    import tomllib
except ModuleNotFoundError:  # pragma: no cover
    import tomli as tomllib  # type: ignore


@functools.lru_cache(maxsize=None)
def load_spec(name: str) -> dict:
    try:
        from formal.specdata import load_spec as _lead_loader  # type: ignore
    except Exception:  # pragma: no cover - module may not exist yet
        _lead_loader = None
    if _lead_loader is not None:
        try:
            return _lead_loader(name)
        except Exception:
            pass
    try:
        from importlib.resources import files

        res = files("formal.specs") / f"{name}.toml"
        if res.is_file():
            return tomllib.loads(res.read_text(encoding="utf-8"))
    except Exception:
        pass
    repo = Path(__file__).resolve().parent.parent.parent / "specs" / f"{name}.toml"
    with open(repo, "rb") as fh:
        return tomllib.load(fh)
