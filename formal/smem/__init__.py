"""wgmma operands in shared memory: the matrix descriptor, swizzles, canonical layouts.

Everything is built from ``specs/wgmma_smem.toml`` (PTX ISA 9.1 §9.7.15.5.1.2):

* :mod:`.codec`   -- the 64-bit descriptor as a bit-field codec (decode / encode / make, Z3 terms);
* :mod:`.address` -- operand element (mn, k) -> shared-memory bit address, as one formula
  (numpy: :func:`addresses`, :func:`gather`, :func:`read_operand`; Z3: :func:`z3_address`),
  with the open questions as explicit :class:`Model` choices (default: what the silicon settled);
* :mod:`.peers`   -- CuTe GMMA atoms and Triton ``#ttg.nvmma_shared`` layouts as printed, and
  the audit of a user's layout against the spec;
* :mod:`.proofs`  -- the ``smem.*`` obligations of ``ptx-formal prove --all``.

The evaluator's entry point::

    read_operand(image, desc, "b", "f16", n=64, major="K")   # -> B as [..., K, N] codes
"""

from __future__ import annotations

from . import codec, spec
from .address import (SILICON, Model, Operand, addresses, address_formula, element_address, gather, operand,
                      packed, read_operand, swizzle, z3_address)
from .codec import Descriptor, DescriptorError, decode, encode, make
from .spec import SmemError

__all__ = ["SILICON", "Model", "Operand", "Descriptor", "DescriptorError", "SmemError", "addresses",
           "address_formula", "codec", "decode", "element_address", "encode", "gather", "make", "operand", "packed",
           "read_operand", "spec", "swizzle", "z3_address"]


def _register() -> None:
    from . import proofs
    proofs.register()


_register()
