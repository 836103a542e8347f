"""Hardware harness: run forms on a CUDA GPU (CuPy) and compare with the evaluator.

``kernels`` (PTX kernels, one form per warp), ``runner`` (CuPy device wrapper), ``check``
(hw-check: GPU vs evaluator, evidence records), ``capture`` (raw outputs for offline model
work), and the probe modules of the other areas (metadata, numerics, transforms, wmma).  Nothing here
needs a GPU until a ``GPU()`` is created.

A leaf (tests/test_layering.py): only ``formal.hw`` and ``formal.cli`` import it.  What is
not GPU code lives below it: random inputs in ``formal.vectors.regimes``, the SASS reader in
``formal.catalog.sass``, the wmma probe design in ``formal.wmma.probes``.
"""
