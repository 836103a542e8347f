"""Build tests/data/kernels_inplace/: the in-place / layout-changing wmma API kernels of
tools/kernel_sources/wmma_inplace.cu compiled with ``nvcc -ptx`` for sm_80 and sm_90 (each module
assembled by ptxas), and one kernel spec per entry (buffers, [[view]]s, chained contracts).

    python3 tools/make_wmma_inplace.py [OUT_DIR]
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "tools" / "kernel_sources" / "wmma_inplace.cu"
ARCHS = ("sm_80", "sm_90")

# entry -> (element type, accumulator type, K, operand buffers per step, steps)
KERNELS = {
    "inplace_f16": ("f16", "f32", 16, 1),
    "inplace_bf16": ("bf16", "f32", 16, 1),
    "inplace_s8": ("s8", "s32", 16, 1),
    "inplace_tf32": ("f32", "f32", 8, 1),
    "chain2_f16": ("f16", "f32", 16, 2),
    "chain2_bf16": ("bf16", "f32", 16, 2),
    "chain2_s8": ("s8", "s32", 16, 2),
    "chain3_f16": ("f16", "f32", 16, 3),
}


SPECIAL = {
    # both steps' operands stacked in one buffer each: views select the slices
    "stacked_f16": """entry = "stacked_f16"
grid = [1, 1, 1]
block = [32, 1, 1]

[[buffer]]
name = "A"
param = "stacked_f16_param_0"
type = "f16"
shape = [2, 16, 16]

[[buffer]]
name = "B"
param = "stacked_f16_param_1"
type = "f16"
shape = [2, 16, 16]

[[buffer]]
name = "C"
param = "stacked_f16_param_2"
type = "f32"
shape = [16, 16]

[[view]]
name = "A0"
buffer = "A"
shape = [16, 16]

[[view]]
name = "A1"
buffer = "A"
shape = [16, 16]
offset = 256

[[view]]
name = "B0"
buffer = "B"
shape = [16, 16]

[[view]]
name = "B1"
buffer = "B"
shape = [16, 16]
offset = 256

[[view]]
name = "C1"
buffer = "C"

[[view]]
name = "D"
buffer = "C"
layout = "col"

[contract]
C1 = "A0 @ B0 + C"
D = "A1 @ B1 + C1"
""",
    # a result read back as the next product's A operand through the same pointer
    "operand_chain_f16": """entry = "operand_chain_f16"
grid = [1, 1, 1]
block = [32, 1, 1]

[[buffer]]
name = "A"
param = "operand_chain_f16_param_0"
type = "f16"
shape = [16, 16]

[[buffer]]
name = "B"
param = "operand_chain_f16_param_1"
type = "f16"
shape = [16, 16]

[[buffer]]
name = "B2"
param = "operand_chain_f16_param_2"
type = "f16"
shape = [16, 16]

[[buffer]]
name = "T"
param = "operand_chain_f16_param_3"
type = "f16"
shape = [16, 16]

[[view]]
name = "T1"
buffer = "T"

[[view]]
name = "D"
buffer = "T"
layout = "col"

[contract]
T1 = "A @ B"
D = "T1 @ B2"
""",
}


def spec_text(entry: str) -> str:
    if entry in SPECIAL:
        return f"# {entry} (tools/kernel_sources/wmma_inplace.cu)\n" + SPECIAL[entry]
    t, acc, k, steps = KERNELS[entry]
    out = [f'# {entry} (tools/kernel_sources/wmma_inplace.cu): C read row-major, D written column-major over it',
           f'entry = "{entry}"', "grid = [1, 1, 1]", "block = [32, 1, 1]", ""]
    names = [("A", "B")] if steps != 2 else [("A0", "B0"), ("A1", "B1")]
    p = 0
    for a, b in names:
        for n, shape in ((a, [16, k]), (b, [k, 16])):
            out += ["[[buffer]]", f'name = "{n}"', f'param = "{entry}_param_{p}"', f'type = "{t}"', f"shape = {shape}", ""]
            p += 1
    out += ["[[buffer]]", 'name = "C"', f'param = "{entry}_param_{p}"', f'type = "{acc}"', "shape = [16, 16]", ""]
    steps_out = [f"C{i}" for i in range(1, steps)] + ["D"]
    for v in steps_out:
        out += ["[[view]]", f'name = "{v}"', 'buffer = "C"', f'layout = "{"col" if v == "D" else "row"}"', ""]
    out.append("[contract]")
    prev = "C"
    for i, v in enumerate(steps_out):
        a, b = names[min(i, len(names) - 1)]
        out.append(f'{v} = "{a} @ {b} + {prev}"')
        prev = v
    return "\n".join(out) + "\n"


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for arch in ARCHS:
        dst = out / f"wmma_inplace_{arch.replace('_', '')}.ptx"
        subprocess.run(["nvcc", "-ptx", f"-arch={arch}", "-std=c++17", "-O3", str(SRC), "-o", str(dst)], check=True)
        subprocess.run(["ptxas", f"-arch={arch}", str(dst), "-o", "/dev/null"], check=True)
    for entry in list(KERNELS) + list(SPECIAL):
        (out / f"{entry}.toml").write_text(spec_text(entry))


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "tests" / "data" / "kernels_inplace")
