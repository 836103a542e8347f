"""The metadata obligations as ``formal.prove`` obligations (``ptx-formal prove``).

One obligation per (metadata class, claim[, selector]): forms with the same metadata
semantics (:attr:`FormMeta.key`) share it, and its ``cover`` lists every form it
certifies.  Each is decided by Z3 (:mod:`.proofs`) and, where the domain is small, by
enumeration too; a verdict stands only when the engines agree.  ``word-valid`` and
``word-count`` range over 2^32 words: their enumeration is the scan of
:mod:`.scan` (``pytest -m slow``, ``benchmarks/bench_metadata.py``), and a proof run
checks every 16-bit half exhaustively instead (noted on the result).
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Callable

from .. import prove as P
from .spec import FormMeta, meta

if TYPE_CHECKING:
    from . import proofs


def _proofs():
    """The Z3 proofs module, loaded when an obligation runs (z3 is not needed to evaluate)."""
    from . import proofs

    return proofs

SECTION = "9.7.14.6"

CLAIMS = {
    "rules-text": "the nibble rules' formulas define exactly the ISA's lists of (in)valid index values",
    "codec": "every chunk that fits the granularity has a legal nibble; the encoder picks one and decoding gives the chunk back",
    "a-chunks": "(lane, i) -> (row, chunk, slot) of the stored A elements is a bijection",
    "word-valid": "for all 2^32 words and all lanes: per-chunk rules at the layout's bits == ISA lists == closed form",
    "word-count": "the legal words of a contributing lane number exactly the spec's combinatorics^8",
    "cover": "(lane, nibble) -> (row, chunk) is a bijection onto the chunks, each group holding its own rows",
    "round-trip": "compress then decompress is the identity on a group's rows, symbolically",
}

_ENUM: dict[str, Callable] = {
    "rules-text": lambda fm, sel: _proofs().enum_rules_text(fm),
    "codec": lambda fm, sel: _proofs().enum_codec(fm),
    "cover": lambda fm, sel: _proofs().enum_cover(fm, sel),
    "word-valid": lambda fm, sel: _proofs().enum_word_halves(fm, sel),
}
_PARTIAL_ENUM = {"word-valid": "enumeration: every 16-bit half (the 2^32 scan is the slow test)",
                 "word-count": "enumeration: the 2^32 scan (slow test / benchmark)",
                 "round-trip": "enumeration: property tests (tests/test_metadata.py)"}


def _z3_result(claim: str, fm: FormMeta, sel: int | None) -> "proofs.Result":
    if claim == "rules-text":
        return _proofs().prove_rules_text(fm)
    if claim == "codec":
        return _proofs().prove_codec(fm)
    if claim == "a-chunks":
        return _proofs().prove_a_chunks(fm)
    if claim == "word-valid":
        return _proofs().prove_word_valid(fm, sel)
    if claim == "word-count":
        return _proofs().count_words(fm, sel)
    if claim == "cover":
        return _proofs().prove_cover(fm, sel)
    if claim == "round-trip":
        return _proofs().prove_round_trip(fm, sel)
    raise KeyError(claim)


def _runner(ob: P.Obligation, claim: str, fm: FormMeta, sel: int | None):
    def run(opts: P.Options) -> P.Result:
        _proofs().TIMEOUT_MS = int(opts.timeout_ms)
        enum = _ENUM.get(claim)
        if claim == "a-chunks":          # its prover already combines Z3 and enumeration
            enum = None
        e = enum(fm, sel) if (enum and opts.enum) else None
        if not opts.z3:
            if enum is None:
                return P.Unknown(ob, f"no fast enumeration engine for {claim} ({_PARTIAL_ENUM.get(claim, '')})", "enum")
            return P.Proved(ob, "enum") if e is None else P.Refuted(ob, e, "enum")
        z = _z3_result(claim, fm, sel)
        solver = "z3+enum" if ((enum and opts.enum) or claim == "a-chunks") else "z3"
        note = z.detail + (f"; {_PARTIAL_ENUM[claim]}" if claim in _PARTIAL_ENUM else "")
        if z.status == "unknown":
            return P.Unknown(ob, z.detail, solver, z.seconds)
        if enum and opts.enum and (z.status == "proved") != (e is None):
            return P.Unknown(ob, f"the engines disagree: z3 {z.status}, enumeration "
                                 f"{'proved' if e is None else 'refuted ' + str(e)}", solver, z.seconds)
        if z.status == "proved":
            return P.Proved(ob, solver, z.seconds, z.smt2 if opts.certificates else None, note=note)
        return P.Refuted(ob, z.witness or {}, solver, z.seconds, note=note)

    return run


def obligations_for(forms) -> list[P.Obligation]:
    """The metadata obligations covering the sparse forms among ``forms``."""
    classes: dict[tuple, list] = {}
    for f in forms:
        if f.is_sparse and f.family == "mma.sp":     # wgmma's metadata map is a layout (specs/fragments_wgmma.toml)
            classes.setdefault(meta(f).key, []).append(f)
    out: list[P.Obligation] = []
    for key, members in classes.items():
        fm = meta(members[0])
        cover = [(f.opcode, "e") for f in members]
        items = [(c, None) for c in ("rules-text", "codec", "a-chunks")]
        items += [(c, s) for s in fm.selectors for c in ("word-valid", "word-count", "cover", "round-trip")]
        for claim, sel in items:
            subject = f"{members[0].opcode}" + (f" sel={sel}" if sel is not None else "") + \
                      (f" (+{len(members) - 1} forms)" if len(members) > 1 else "")
            ob = P.Obligation(f"metadata.{claim}", subject, CLAIMS[claim],
                              key=hashlib.sha1(repr((claim, key, sel)).encode()).hexdigest()[:16],
                              cover=list(cover), section=fm.layout.section if sel is not None else SECTION)
            ob.run = _runner(ob, claim, fm, sel)
            out.append(ob)
    return out


def register() -> None:
    P.register_obligations("metadata", obligations_for)
