"""Silicon probes for what the 2026-11-28 wgmma run left open about shared-memory descriptors.

    python3 tools/wgmma_smem_probe.py build DIR      # ptxas only (sm_90a): kernels + inputs
    python3 -m formal.hw.wgmma_probe run DIR         # on the H100/H200 (the same harness)
    python3 tools/wgmma_smem_probe.py decide DIR     # compare each readout with formal.smem's models

Each probe is a readout in the manner of formal.hw.wgmma_probe.readout_probes (B through the
descriptor under test, every shared-memory slot holding its own index, A one-hot from
registers, so D names the byte each B element came from), for f16 B, K- and MN-major, N = 64:

* ``reserved``  one undescribed descriptor bit set (14, 15, 30, 31, 46-48, 52-61), every swizzle:
                does the hardware ignore it (H: the map of the descriptor without that bit)?
* ``bo_none``   base offset 1..7 with no swizzle: ignored (the text: "valid for all swizzling
                modes except the no-swizzle mode")?
* ``zero``      LBO = 0 or SBO = 0 (K-major and MN-major, no swizzle and 128B): 0 bytes, or
                something else?

``decide`` prints, per probe, which of formal.smem's predictions the silicon matched (the
default model, with the undescribed bits cleared) and the first element that differs otherwise.
Not covered here, still open: the sparse B with a 32-byte swizzle (64 bytes of K in 32-byte
rows, erratum E-WGMMA-SMEM-K32B-TF32-EXAMPLE): it needs sparse readouts (wgmma.mma_async.sp
with A one-hot through the metadata, B through the descriptor with LBO = 0, 16, and the
distance to a second atom placed 4096 bytes away); the 'lbo_k_swizzled = used' model predicts
the second atom is read at LBO, 'ignored' (the text) that row r's bytes 32..63 are read from row
r + 1's first 32 bytes.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

from formal.hw import wgmma_probe as wp  # noqa: E402
from formal.smem import address as A  # noqa: E402
from formal.smem import codec  # noqa: E402
from formal.smem import spec as S  # noqa: E402

N, K, AT = 64, 16, "f16"
REGION = 16384


def configs() -> list[dict]:
    out = []
    for major in ("K", "MN"):
        for sw in (0, 32, 64, 128):
            lbo, sbo = wp._canonical(major, sw, N, K, 16)
            base = codec.make(0, lbo, sbo, sw or "none")
            for lo, w in S.reserved():
                for b in range(lo, lo + w):
                    out.append({"kind": "reserved", "major": major, "sw": sw, "bit": b, "desc": base | (1 << b),
                                "predict": base})
            if sw == 0:
                for bo in range(1, 8):
                    out.append({"kind": "bo_none", "major": major, "sw": 0, "bo": bo,
                                "desc": codec.make(0, lbo, sbo, "none", bo), "predict": base})
            if sw in (0, 128):
                out.append({"kind": "zero", "major": major, "sw": sw, "which": "lbo",
                            "desc": codec.make(0, 0, sbo, sw or "none"), "predict": codec.make(0, 0, sbo, sw or "none")})
                out.append({"kind": "zero", "major": major, "sw": sw, "which": "sbo",
                            "desc": codec.make(0, lbo, 0, sw or "none"), "predict": codec.make(0, lbo, 0, sw or "none")})
    return out


def probes() -> list:
    out = []
    bits, base = 16, wp.DIGIT_BASE[AT]
    nd = wp._ndigits(REGION * 8 // bits, base)
    imgs = None
    for major in ("K", "MN"):
        k = wp.WgKernel(wp._kname("so", major), f"m64n{N}k{K}", "f32", AT, AT, asrc="reg", trans_b=int(major == "MN"),
                        img=32768)
        if imgs is None:
            imgs = np.concatenate([wp._slot_image(k, 1, bits, j, base, REGION, AT) for j in range(nd)])
        Am = np.zeros((nd, 64, K), np.int64)
        Am[:, np.arange(64), np.arange(64) % K] = 1
        areg = wp.pack_a(AT, wp.int_codes(AT, Am).reshape(Am.shape))
        for i, c in enumerate(x for x in configs() if x["major"] == major):
            inp = wp.pack_inputs(k, imgs, [(0, c["desc"])] * nd, a=areg, flags=np.zeros(nd))
            info = {"kind": "readout", "operand": "B", "atype": AT, "major": major, "n": N, "K": K, "bits": bits,
                    "base": base, "digits": nd, "desc": f"{c['desc']:#018x}",
                    "probe": {k2: v for k2, v in c.items() if k2 != "desc"}}
            out.append(wp.Probe("smemx", f"sx.{major}.{i}", k, inp, info))
    return out


def decide(d: str) -> int:
    z = np.load(os.path.join(d, "out_smemx.npz"))
    bad = 0
    for p in probes():
        if p.key not in z:
            print(f"{p.key}: no output")
            continue
        got = wp.observed_readout(p, z[p.key])                       # [K, N] bytes
        c = p.info["probe"]
        op = A.operand("b", AT, N, p.info["major"])
        pred = A.addresses(c["predict"], op)[0].T
        inside = pred + 2 <= REGION
        same = np.array_equal(got[inside], pred[inside])
        where = ""
        if not same:
            kk, nn = (int(x[0]) for x in np.nonzero((got != pred) & inside))
            where = f"; first difference B[k={kk}][n={nn}]: read byte {int(got[kk, nn])}, predicted {int(pred[kk, nn])}"
        bad += not same
        print(f"{p.key} {json.dumps(c['kind'])} {p.info['major']}-major sw{c['sw']} {p.info['desc']}: "
              f"{'as predicted' if same else 'DIFFERS'}{where}")
    print(f"{bad} probe(s) differ from formal.smem's prediction")
    return 1 if bad else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["build", "decide", "list"])
    ap.add_argument("dir", nargs="?")
    a = ap.parse_args(argv)
    if a.what == "list":
        for c in configs():
            print(c)
        return 0
    if not a.dir:
        ap.error("give DIR")
    if a.what == "build":
        meta = wp.build(a.dir, probes())
        print(f"{len(probes())} probes, {len(meta['kernels'])} kernels in {len(meta['cubins'])} cubins: {a.dir}")
        return 0
    return decide(a.dir)


if __name__ == "__main__":
    raise SystemExit(main())
