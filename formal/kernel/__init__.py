"""Kernels as compilers emit them: PTX modules in, data-path proofs and bit-exact runs out.

Public API (``formal.kernel``), usable from a compiler's test suite::

    mod  = parse_module(text, path=None)          # PTX module -> Module; PTXSyntaxError(line, msg)
    lint(mod) -> list[Finding]                    # matrix instructions legal on .target/.version
    spec = load_spec("gemm.toml")                 # KernelSpec (formal.kernel.spec)
    res  = check(mod, spec, ctas=None)            # CheckResult: verdict proved/refuted/unknown + witnesses
    out  = run(mod, spec, inputs, arch="sm_90")   # RunResult: {buffer name: raw encodings}, bit-exact,
                                                  #   plus .witnesses (UB / OOB seen) and .steps

A ``@triton.jit`` function, compiled with the installed Triton, without a spec (``triton_front``)::

    A, B, C = Tensor("A", "f16", (64, 32)), Tensor("B", "f16", (64, 32)).T, Tensor("C", "f32", (64, 64))
    res = triton_check(matmul_kernel, (2, 2), (A, B, C, 64, 64, 32, *A.stride(), *B.stride(), *C.stride()),
                       dict(BLOCK_M=32, BLOCK_N=32, BLOCK_K=32), contract="C = A @ B", target="sm_80",
                       num_warps=4)                # the same CheckResult; triton_run -> RunResult;
                                                  # triton_launch -> TritonLaunch (.ptx, .module, .spec)

Errors: :class:`PTXSyntaxError` (bad module, has ``.line``), :class:`Unsupported` (a construct
the engine does not model, with ``.line`` and ``.instruction``), :class:`SpecError` (bad spec).
The kernel spec (launch, buffers, contract) lives in :mod:`formal.kernel.spec`; the
interpreter in :mod:`formal.kernel.machine` (see docs/kernel.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .legality import Finding
from .machine import DEFAULT_MAX_STEPS, StepLimit, Witness
from .parse import Module, PTXSyntaxError, Unsupported, parse_module
from .spec import Buffer, Contract, KernelSpec, SpecError, check_inputs, load_spec, make_inputs, raw_dtype  # noqa: F401
from .triton_front import Tensor, TritonInputError, TritonLaunch, TritonUnavailable, triton_launch  # noqa: F401

__all__ = ["parse_module", "lint", "check", "run", "Module", "Finding", "CheckResult", "RunResult", "Witness", "PTXSyntaxError",
           "Unsupported", "StepLimit", "DEFAULT_MAX_STEPS", "SpecError", "load_spec", "make_inputs", "raw_dtype",
           "KernelSpec", "Tensor", "TritonLaunch", "TritonInputError", "TritonUnavailable", "triton_launch",
           "triton_check", "triton_run"]


@dataclass
class CheckResult:
    verdict: str
    witnesses: list
    permutations: int = 0
    summary: str = ""
    stats: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"verdict": self.verdict, "summary": self.summary, "permutations": self.permutations,
                "stats": self.stats, "witnesses": [w.to_json() for w in self.witnesses]}


def _module(mod) -> Module:
    if isinstance(mod, Module):
        return mod
    if isinstance(mod, str):
        return parse_module(mod)
    raise TypeError("pass a Module (kernel.parse_module) or PTX text")


def _spec(spec) -> KernelSpec:
    return spec if isinstance(spec, KernelSpec) else load_spec(spec)


def lint(mod) -> list[Finding]:
    """Every mma / mma.sp / wmma / ldmatrix / stmatrix / movmatrix: legal on the module's
    ``.target`` at its ``.version``?  (Catalog legality for the matrix instructions, the
    movement spec's target notes for the movement ones.)"""
    from .legality import lint_module
    return lint_module(_module(mod))


@dataclass(eq=False)      # compared as a Mapping, buffer by buffer
class RunResult(Mapping):
    """What :func:`run` returns: every buffer after the run (a read-only mapping, name ->
    raw encodings in the buffer's shape), the undefined behaviour / out-of-bounds accesses
    seen during the run (``witnesses``) and the instruction steps executed (``steps``)."""

    buffers: dict
    witnesses: list = field(default_factory=list)
    steps: int = 0

    def __getitem__(self, name):
        return self.buffers[name]

    def __iter__(self):
        return iter(self.buffers)

    def __len__(self) -> int:
        return len(self.buffers)


def run(mod, spec, inputs: dict | None = None, arch: str = "sm_90", max_steps: int | None = None) -> RunResult:
    """Execute the launch with bit-exact values; returns every buffer after the run
    (raw encodings in the buffer's shape) with the run's witnesses (:class:`RunResult`).
    Buffers missing from ``inputs`` start at zero.  ``max_steps``: stop with
    :class:`StepLimit` (an :class:`Unsupported`, exit 3) after that many instruction steps
    (default ``DEFAULT_MAX_STEPS``)."""
    from .machine import Machine
    from .spec import check_inputs
    sp = _spec(spec)
    m = Machine(_module(mod), sp, check_inputs(sp, inputs or {}), arch=arch, check=False)
    m.run(max_steps)
    m.undefined_outputs()
    return RunResult({b.name: m.read_buffer(b.name) for b in m.spec.buffers + m.spec.views}, list(m.witnesses),
                     m.executed)


def check(mod, spec, ctas=None, seed: int = 0, lanes: bool = True, max_steps: int | None = None) -> CheckResult:
    """The data-path proof of the launch (or of the CTAs named in ``ctas``).  ``lanes``: also
    prove each ldmatrix/stmatrix addressing over a symbolic lane with Z3 (formal.kernel.symbolic).
    ``max_steps`` as for :func:`run`."""
    from .machine import Machine
    from .spec import make_inputs as _mk
    sp = _spec(spec)
    m = Machine(_module(mod), sp, _mk(sp, seed=seed), check=True, ctas=ctas, mma_bits=False)
    if not sp.contracts:
        raise SpecError(f"{sp.source}: check needs a [contract]")
    m.prov.lanes = lanes
    m.run(max_steps)
    m.undefined_outputs()
    fin = m.prov.finish(sampled=ctas is not None)
    pv = m.prov
    n_all = sp.grid[0] * sp.grid[1] * sp.grid[2]
    stats = {"ctas": len(m.ctas), "ctas_in_grid": n_all, "threads": int(m.valid.sum()), "steps": m.executed,
             "mma": pv.mmas, "products": pv.products, "outputs_checked": fin["checked"],
             "outputs_complete": fin["complete"], "outputs_through_arithmetic": fin["through_arithmetic"],
             "formations": {n: int(c) for n, c in zip(["A*B", "A*B_residual", "A_residual*B", "A_residual*B_residual"],
                                                       pv.formations) if c},
             "operand_derivations": {k: {n: int(c) for n, c in zip(["element", "converted", "residual", "arithmetic"], v)
                                         if c} for k, v in pv.derivs.items()}}
    stats["wmma_maps"] = sorted(pv.wmma_maps)
    stats["lane_proofs"] = pv.lane_proofs
    wit = m.witnesses
    if wit:
        verdict = "refuted"
    elif pv.mmas == 0 or fin["checked"] == 0:
        verdict = "unknown"
    else:
        verdict = "proved"
    counts = ", ".join(f"{k}: {v}" for k, v in sorted(m.counts.items()))
    if verdict == "proved":
        forms = " + ".join(f"{n} ({c})" for n, c in stats["formations"].items())
        summ = (f"proved: {fin['complete']} output elements of {', '.join(fin.get('outputs', []))} each "
                f"accumulate all K products"
                + (f" (after the chain steps {', '.join(fin['chain_steps'])}, in place)" if fin.get("chain_steps") else "")
                + (f" (through {', '.join(fin['in_registers'])}, held in registers: complete where it feeds the "
                   "next product)" if fin.get("in_registers") else "")
                + f", stored at their addresses; {pv.mmas} mma executions, "
                f"{pv.products} products formed as {forms}; operands: "
                + "; ".join(f"{k} " + ", ".join(f"{n} {c}" for n, c in v.items())
                            for k, v in stats["operand_derivations"].items())
                + (f"; {pv.permuted} products use a k order other than the mma's (a permutation shared by both operands)"
                   if pv.permuted else "")
                + (f"; CTAs checked: {len(m.ctas)} of {n_all}" if ctas is not None else "")
                + (f"; {fin['through_arithmetic']} outputs pass through arithmetic after their last mma (a scalar "
                   "epilogue: its values are not part of this proof)" if fin["through_arithmetic"] else "")
                + (f"; for the wmma fragment maps {', '.join(sorted(pv.wmma_maps))} (PTX leaves them unspecified)"
                   if pv.wmma_maps else "")
                + _lane_summary(pv.lane_proofs))
    elif verdict == "refuted":
        summ = f"refuted: {counts}" + _lane_summary(pv.lane_proofs)
    else:
        summ = "unknown: " + ("no mma executed" if pv.mmas == 0 else "no output element was stored")
    return CheckResult(verdict, wit, pv.permuted, summ, stats)


def _lane_summary(recs) -> str:
    if not recs:
        return ""
    ok = sum(r["status"] == "proved" for r in recs)
    bad = [r for r in recs if r["status"] == "refuted"]
    unk = len(recs) - ok - len(bad)
    agree = all(r.get("agrees_with_enumeration", True) for r in recs)
    s = (f"; Z3 over a symbolic lane: {ok} of {len(recs)} ldmatrix/stmatrix addressings proved aligned and distinct"
         + (", agreeing with the 32-lane enumeration" if agree else ", DISAGREEING with the enumeration"))
    if bad:
        s += "; refuted at line " + ", ".join(str(r["line"]) for r in bad)
    if unk:
        s += f"; {unk} unknown"
    return s


def triton_check(fn, grid, args, constexprs: dict | None = None, *, contract, target, ptx_version=None,
                 ctas=None, lanes: bool = True, max_steps: int | None = None, **launch_options) -> CheckResult:
    """:func:`check` of the Triton launch ``fn[grid](*args, **constexprs, **launch_options)`` compiled for
    ``target`` (:func:`triton_launch`): the same :class:`CheckResult`."""
    la = triton_launch(fn, grid, args, constexprs, target=target, contract=contract, ptx_version=ptx_version,
                       **launch_options)
    return check(la.module, la.spec, ctas=ctas, lanes=lanes, max_steps=max_steps)


def triton_run(fn, grid, args, constexprs: dict | None = None, *, inputs=None, target, ptx_version=None,
               arch: str = "sm_90", max_steps: int | None = None, **launch_options) -> RunResult:
    """:func:`run` of a Triton launch (``inputs`` by tensor name): the same :class:`RunResult`."""
    la = triton_launch(fn, grid, args, constexprs, target=target, ptx_version=ptx_version, **launch_options)
    return run(la.module, la.spec, inputs, arch=arch, max_steps=max_steps)
