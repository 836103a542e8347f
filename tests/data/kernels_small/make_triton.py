"""Regenerate the Triton PTX in this folder (no GPU needed): python3 make_triton.py

Triton 3.9, target GPUTarget("cuda", 80, 32); the kernel is a plain tiled matmul
(BM = BN = BK = 32, 4 warps); the spec triton_mm_f16.toml launches it on 64 x 64 x 64.
"""
import os
import sys

os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource


@triton.jit
def mm(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
       BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * sam + (k + rk)[None, :] * sak)
        b = tl.load(b_ptr + (k + rk)[:, None] * sbk + rn[None, :] * sbn)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc)


def main(cc=80, out=None):
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32",
           "sam": "i32", "sak": "i32", "sbk": "i32", "sbn": "i32", "scm": "i32", "scn": "i32",
           "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"}
    src = ASTSource(mm, sig, constexprs={"BM": 32, "BN": 32, "BK": 32})
    k = triton.compile(src, target=GPUTarget("cuda", cc, 32))
    out = out or os.path.join(os.path.dirname(os.path.abspath(__file__)), f"triton_mm_f16_sm{cc}.ptx")
    with open(out, "w") as f:
        f.write(k.asm["ptx"])
    return out


if __name__ == "__main__":
    print(main(int(sys.argv[1]) if len(sys.argv) > 1 else 80))
