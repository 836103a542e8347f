"""Hardware harness: run forms on a CUDA GPU (CuPy) and compare with the evaluator.

``inputs`` (random register-level inputs in named regimes), ``kernels`` (PTX kernels,
one form per warp), ``runner`` (CuPy device wrapper), ``check`` (hw-check: GPU vs
evaluator, evidence records), ``capture`` (raw outputs for offline model work), and the
probe modules of the other areas (metadata, numerics, transforms, wmma).  Nothing here
needs a GPU until a ``GPU()`` is created.
"""
