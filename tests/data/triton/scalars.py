"""A Triton kernel with scalar parameters of every kind a launch passes: f32, i32, i64, bool."""

import triton
import triton.language as tl


@triton.jit
def axpy(x_ptr, y_ptr, out_ptr, alpha, n, big, flag, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    r = alpha * tl.load(x_ptr + i, mask=m) + tl.load(y_ptr + i, mask=m)
    if flag:
        r = r + ((big >> 31) * 2 + (big & 7)).to(tl.float32)
    tl.store(out_ptr + i, r, mask=m)
