"""Kernels as compilers emit them: PTX modules in, data-path proofs and bit-exact runs out.

Planned public API (``formal.kernel``), usable from a compiler's test suite::

    mod  = parse_module(text, path=None)          # PTX module -> Module; PTXSyntaxError(line, msg)
    lint(mod) -> list[Finding]                    # matrix instructions legal on .target/.version
    spec = load_spec("gemm.toml")                 # KernelSpec (formal.kernel.spec)
    res  = check(mod, spec, ctas=None)            # CheckResult: verdict proved/refuted/unknown + witnesses
    out  = run(mod, spec, inputs, arch="sm_90")   # {buffer name: raw encodings}, bit-exact

The kernel spec (launch, buffers, contract) lives in :mod:`formal.kernel.spec`.
"""

from .spec import Buffer, Contract, KernelSpec, SpecError, load_spec, make_inputs  # noqa: F401
