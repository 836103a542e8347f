"""ptx-formal: a formal specification of PTX warp-level matrix instructions.

Entry points (see README.md):

* :func:`parse` / :func:`legality` / :func:`forms` -- the instruction catalog
  (``formal.catalog``), with every rule loaded from ``specs/``.
"""

from .catalog import (  # noqa: F401
    BadArgument,
    Form,
    Legality,
    MalformedOpcode,
    Operand,
    Reason,
    forms,
    legality,
    parse,
    parse_instruction,
)

__version__ = "0.1.0"
