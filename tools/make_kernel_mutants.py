"""Mutants of the real corpus PTX: one wrong line each, for `kernel check` to refute.

    python3 tools/make_kernel_mutants.py        # -> tests/data/kernels/mutants/

Each mutant is a whole module equal to its corpus module but for ONE line (same line count:
a removed instruction becomes a comment), so the witness can be matched to that line.
``manifest.json`` gives, per mutant: the kernel (its spec applies), the mutated line, the
original and mutated text, why the result is wrong, and ``accept``: the lines a witness may
name -- the mutated line and, for address arithmetic, the instructions its value reaches up
to the first memory access (a wrong address is seen where it is used); for a removed
barrier, the shared-memory reads it used to order.  Semantically equivalent mutations are
not kept (see DROPPED).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "data" / "kernels"
OUT = CORPUS / "mutants"

# name: (kernel, literal text of the line to mutate (first match in the kernel's entry), replacement, kind, why)
MUTANTS = {
    "swizzle_xor_tri": ("tri_f16_f32acc_sm80_w4", "xor.b32 \t%r75, %r74, 64;", "xor.b32 \t%r75, %r74, 32;",
        "swizzle",
        "the XOR constant of the second B ldmatrix address (the swizzled 64-byte half) flips bit 5 instead of 6; "
        "bit 5 of %r74 varies with the lane (%r70 = (tid & 16) << 1), so lanes read 16-byte rows of B that belong "
        "to other (k, n) positions: B elements reach the wrong mma lanes"),
    "swizzle_mask_cute": ("cute_gemm_f16_tn_sm80", "and.b32  \t%r64, %r63, 24;", "and.b32  \t%r64, %r63, 16;",
        "swizzle",
        "Swizzle<2,3,3> XORs two row bits into the 16-byte chunk index; masking with 16 instead of 24 drops one "
        "of them on the ldmatrix (read) side only, while cp.async still writes swizzled: lanes whose row has that "
        "bit set read another chunk of the row (other k columns)"),
    "drop_trans_tri": ("tri_f16_f32acc_sm80_w4", "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16",
        "ldmatrix.sync.aligned.m8n8.x4.shared.b16", "ldmatrix-trans",
        "B is stored k-major in shared memory ([k][n] rows); without .trans each 8x8 block arrives transposed, so "
        "lane (g, t) gets B[g][2t..] (k = g, n = 2t) where the mma needs B[k = 2t..][n = g]"),
    "drop_trans_attn": ("attn_chain_sm80", "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16",
        "ldmatrix.sync.aligned.m8n8.x2.shared.b16", "ldmatrix-trans",
        "V is row-major [key][d]; the B operand of O = S V needs V[k][n] with k along the lane pairs, which only "
        ".trans delivers; without it lanes get V[n][k]-positioned elements (rows and columns of each 8x8 block swap)"),
    "swap_mma_a_tri": ("tri_f16_f32acc_sm80_w4", "{ %r83, %r84, %r85, %r86 }, { %r87, %r88 }",
        "{ %r84, %r83, %r85, %r86 }, { %r87, %r88 }", "operand-swap",
        "A registers a0 and a1 hold rows g and g+8 (same k columns): swapped, row g+8 of A is multiplied into "
        "row g of C and vice versa (the rows differ for random inputs)"),
    "swap_mma_b_cute": ("cute_gemm_f16_tn_sm80", "{%r92,  %r93}", "{%r93,  %r92}", "operand-swap",
        "B registers b0 (k = 2t, 2t+1) and b1 (k = 2t+8, 2t+9) swapped: every product pairs A[m][k] with "
        "B[k +- 8][n], so k is not matched between the operands (not a shared permutation of k)"),
    "swap_mma_sp_a": ("mma_sp_f16_sm80", "{%r53,%r54,%r55,%r56}", "{%r54,%r53,%r55,%r56}", "operand-swap",
        "compressed A registers of rows g and g+8 swapped while the metadata still describes row g in bits 15:0: "
        "row g+8's stored values are placed (and multiplied) in row g"),
    "k_offset_tri": ("tri_f16_f32acc_sm90_w4", "add.s64 \t%rd7, %rd4, 64;", "add.s64 \t%rd7, %rd4, 128;",
        "k-offset",
        "the prologue prefetch of the second k tile of A advances 128 bytes (two 32-element tiles) instead of 64: "
        "A[:, 64:96] is multiplied with B[32:64, :] (K = 128, so the address stays in bounds)"),
    "k_offset_wmma": ("wmma_f16acc_m32n8k16_sm80", "add.s32 \t%r88, %r196, 16;", "add.s32 \t%r88, %r196, 32;",
        "k-offset",
        "in the unrolled k loop the second A fragment is loaded at k0 + 32 instead of k0 + 16 while B is loaded at "
        "k0 + 16: A[:, k0+32..] multiplies B[k0+16.., :]"),
    "barrier_tri": ("tri_f16_f32acc_sm80_w4", "bar.sync \t0;", "// bar.sync 0; (removed by the mutant)",
        "barrier",
        "cp.async.wait_group 0 only completes the thread's own copies; the following ldmatrix reads 16-byte rows "
        "that other warps copied, unordered without the barrier: a data race (undefined; the GPU may or may not "
        "show stale data)"),
    "barrier_wmma": ("wmma_f16_smem_sm80", "bar.sync \t0;", "// bar.sync 0; (removed by the mutant)", "barrier",
        "warps 0-1 stage the A tiles and warps 2-3 the B tiles; without the barrier every warp's wmma.load.*.shared "
        "reads a tile another warp writes, unordered: a data race"),
    "barrier_attn": ("attn_chain_sm80", "bar.sync \t0;", "// bar.sync 0; (removed by the mutant)", "barrier",
        "Q and V are staged into shared memory by all 128 threads; without the barrier the ldmatrix of warp w "
        "reads rows other warps store: a data race"),
    "cvt_pack_attn": ("attn_chain_sm80", "cvt.rn.f16x2.f32 %r132, %f66, %f65;", "cvt.rn.f16x2.f32 %r132, %f65, %f66;",
        "cvt-pack",
        "cvt.rn.f16x2.f32 d, a, b puts a in the upper half: swapped, S[g][2t] and S[g][2t+1] trade places both in "
        "the stored S and in the A operand of O = S V"),
    "cvt_pack_tri": ("tri_bf16_f32acc_sm90_w1", "cvt.rn.bf16x2.f32 \t%r132, %r122, %r121;",
        "cvt.rn.bf16x2.f32 \t%r132, %r121, %r122;", "cvt-pack",
        "the epilogue packs two adjacent accumulator columns into one bf16x2 word; reversed, the two columns of C "
        "are stored swapped"),
}

# Mutations found equivalent, hence not kept (a mutant must really be wrong):
DROPPED = {
    "mma.sp sparsity selector 0 -> 1 in mma_sp_f16":
        "the kernel computes e from t & 1, so lanes t = 2, 3 (selector 1) hold the same metadata as lanes t = 0, 1",
}

_MEM = re.compile(r"^\s*(?:@!?%\w+\s+)?(ld|st|ldmatrix|stmatrix|cp\.async|wmma|mma|atom|red)\b")
_REG = re.compile(r"%[a-z]+\d+")


def entry_span(lines: list[str], entry: str) -> tuple[int, int]:
    start = next(i for i, l in enumerate(lines) if re.search(r"\.entry\s+" + re.escape(entry) + r"\s*\(", l))
    end = next((i for i in range(start + 1, len(lines)) if ".entry " in lines[i]), len(lines))
    return start, end


def _dest_src(text: str) -> tuple[set, set]:
    body = re.sub(r"^\s*(?:@!?%\w+\s+)?\S+\s*", "", text.split("//")[0]).strip().rstrip(";")
    if not body:
        return set(), set()
    if _MEM.match(text) and re.match(r"^\s*(?:@!?%\w+\s+)?(st|cp\.async|stmatrix|red)\b", text):
        return set(), set(_REG.findall(body))
    depth, cut = 0, len(body)
    for i, ch in enumerate(body):
        depth += ch in "{["
        depth -= ch in "}]"
        if ch == "," and depth == 0:
            cut = i
            break
    return set(_REG.findall(body[:cut])), set(_REG.findall(body[cut:]))


def accept_lines(lines: list[str], at: int, end: int, kind: str) -> list[int]:
    """1-based lines a witness may name for a mutation at index ``at``."""
    if kind == "barrier":
        out = [at + 1]
        for i in range(at + 1, end):
            if "bar.sync" in lines[i] or "barrier" in lines[i]:
                break
            if re.search(r"\b(ld\.shared|ldmatrix|wmma\.load\.\w\.sync\.aligned\.\w+\.\w+\.shared)", lines[i]):
                out.append(i + 1)
        return out
    out = [at + 1]
    tainted, _ = _dest_src(lines[at])
    if _MEM.match(lines[at]):
        return out                                  # the mutated instruction itself produces the wrong data
    for i in range(at + 1, end):
        d, s = _dest_src(lines[i])
        if s & tainted:
            out.append(i + 1)
            if _MEM.match(lines[i]):
                continue                            # seen where the wrong address is used
            tainted |= d                            # (never untainted: text order is not control flow)
    return out


def main() -> int:
    manifest = json.loads((CORPUS / "manifest.json").read_text())
    OUT.mkdir(parents=True, exist_ok=True)
    man = {}
    for name, (kernel, old, new, kind, why) in MUTANTS.items():
        meta = manifest[kernel]
        entry = re.search(r'^entry = "([^"]+)"', (CORPUS / meta["spec"]).read_text(), re.M).group(1)
        lines = (CORPUS / meta["ptx"]).read_text().split("\n")
        s, e = entry_span(lines, entry)
        at = next((i for i in range(s, e) if old in lines[i]), None)
        if at is None:
            print(f"FAILED {name}: {old!r} not in {entry}", file=sys.stderr)
            return 1
        original = lines[at]
        mutated = (re.match(r"\s*", original).group(0) + new) if new.startswith("//") else original.replace(old, new, 1)
        out = lines[:at] + [mutated] + lines[at + 1:]
        (OUT / f"{name}.ptx").write_text("\n".join(out))
        man[name] = {"kernel": kernel, "ptx": f"{name}.ptx", "entry": entry, "line": at + 1, "kind": kind,
                     "original": original.strip(), "mutated": mutated.strip(), "why": why,
                     "accept": accept_lines(lines, at, e, kind)}
        print(f"{name}: line {at + 1}: {original.strip()[:60]} -> {mutated.strip()[:60]}  accept {man[name]['accept']}")
    (OUT / "manifest.json").write_text(json.dumps({"mutants": man, "dropped": DROPPED}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
