"""Edge-case test vectors for mma / mma.sp / wmma.mma, with expected results and coverage.

Python API::

    from formal.vectors import generate, write, read, verify
    vs = generate("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", arch="sm_90", count=64, seed=1)
    write(vs, "v.hex")                    # or .jsonl / .npz
    report = verify("v.hex", "dut_results.hex")
    print(report.table()); report.ok

* :func:`generate` -- every applicable coverage model (:mod:`formal.vectors.coverage`) plus
  ``count`` random warps; each case carries its coverage points and why it exists.
  Expected results come from :func:`formal.evaluate` for ``arch`` (never hand-written).
* :func:`write` / :func:`read` -- jsonl, hex (one case per line, TestFloat style) and npz;
  the grammar is in :mod:`formal.vectors.fileio` and ``ptx-formal vectors --help``.
* :func:`verify` -- a device's outputs against the expected ones, per coverage point.
* every vector set has a ``digest`` (sha256 of its cases, :func:`formal.vectors.build.digest`);
  ``generate(..., level="matrix")`` gives matrices for mma forms too (no fragment layouts).
* :mod:`formal.vectors.distinguish` -- inputs on which two arithmetic models differ
  (structured search, delta-debugging reduction); :mod:`formal.vectors.witness` --
  element-level witnesses and root causes of a failing run.
* the same vectors through the hardware harness: ``formal.hw.vectors``
  (:func:`vectors_as_inputs`, :func:`run_vectors_on_gpu`, :func:`prepare`; GPU side, so
  not imported here: ``formal.hw`` is a leaf).
* :func:`cuda_harness` -- a standalone CUDA program for a form (``formal/hw/template``)
  that reads a hex vector file and writes a result file, without this package.

Register-level forms (``mma``, ``mma.sp``) have vectors of registers: ``a, b, c``
``[32, nregs]`` per case (uint32, uint64 for f64), ``e`` ``[32]`` and ``sel`` for sparse
forms, and the expected ``d``.  ``wmma.mma`` (whose fragments PTX leaves unspecified)
and block-scaled forms have matrix-level vectors: ``A, B, C`` (+ ``scale_a, scale_b``)
and the expected ``D``.
"""

from .fileio import read, read_results, write, write_results  # noqa: F401
from .build import Case, VectorError, VectorSet, generate  # noqa: F401
from .verify import Mismatch, VerifyReport, compare, verify  # noqa: F401


def cuda_harness(opcode, path: str | None = None) -> str:
    """Source of the standalone CUDA harness for ``opcode`` (written to ``path`` if given)."""
    from .cuda import render

    src = render(opcode)
    if path:
        with open(path, "w") as fh:
            fh.write(src)
    return src


__all__ = ["generate", "write", "read", "read_results", "write_results", "verify", "compare", "VectorSet",
           "Case", "VerifyReport", "Mismatch", "VectorError", "cuda_harness"]
