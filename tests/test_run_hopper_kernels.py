"""tools/run_hopper_kernels.py without a GPU: the dry run on three modules (CuTe atoms, Triton TMA
with PDL, a 2-CTA cluster), the checks that must refuse a wrong manifest, the ctypes structures
and cuda.h values against a C program built on the real header, and the real (non-dry) path
end to end against a fake libcuda.so.1 + fake cupy (tests/fake_cuda/) that log what the driver
would receive, including a hang, a sticky error, a refused cluster attribute and the import."""

from __future__ import annotations

import copy
import ctypes
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "run_hopper_kernels.py"
CORPUS = ROOT / "tests" / "data" / "kernels_hopper"
CUDA_H = Path("/usr/local/cuda/include/cuda.h")
THREE = ["cute_tma_mcast_f16", "tri_tma_pdl_f16_w4", "tri_tma_cta2_f16_w8"]


def _tool():
    spec = importlib.util.spec_from_file_location("run_hopper_kernels", TOOL)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod          # dataclasses look their module up by name
    spec.loader.exec_module(mod)
    return mod


rh = _tool()
MANIFEST = json.loads((CORPUS / "manifest.json").read_text())
needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None or not CUDA_H.exists(), reason="needs gcc and cuda.h")


def test_dry_run_three_modules(tmp_path):
    out = tmp_path / "dry"
    # parts of at most 300 kB raw: the three modules' outputs (2 x 512 KiB, 2 x 128 KiB, 2 x 128 KiB) need 3
    assert rh.main(["--dry-run", "--only", *THREE, "--out", str(out), "--part-bytes", "300000"]) == 0
    rec = json.loads((out / rh.RECORD).read_text())
    assert rec["dry_run"] and rec["summary"]["ok"] == rec["summary"]["contract_ok"] == 3
    files = sorted(f.name for f in out.iterdir())     # what the device machine hands back: few, flat files
    assert files == [rh.RECORD] + [f"{rh.PART_PREFIX}{i}.npz" for i in range(3)], files
    for name in THREE:
        k = rec["kernels"][name]
        assert k["status"] == "ok" and [x["seed"] for x in k["launches"]] == [0, 1]
        for x in k["launches"]:
            assert x["inputs_unchanged"] and x["guards_intact"]
            assert x["tensormaps"] == sum(p["role"] == "tensormap" for p in MANIFEST[name]["launch"]["params"])
        arrs = np.load(out / k["npz"])
        assert sorted(arrs.files) == [f"{name}/0_C", f"{name}/1_C"]
        assert rh.sha(arrs[f"{name}/1_C"]) == k["launches"][1]["outputs_sha256"]["C"]
    pdl = rec["kernels"]["tri_tma_pdl_f16_w4"]["launches"][0]["launch_attributes"]
    assert pdl == ["CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION"]
    assert rec["kernels"]["tri_tma_cta2_f16_w8"]["launches"][0]["launch_attributes"] == \
        ["CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION"]
    # a dry run is not evidence; forced, the import reads every part
    ev, outs = tmp_path / "e.json", tmp_path / "o"
    assert rh.main(["--import", str(out), "--evidence", str(ev), "--outputs-dir", str(outs)]) == 2
    assert not ev.exists()
    assert rh.main(["--import", str(out), "--evidence", str(ev), "--outputs-dir", str(outs), "--allow-dry-run"]) == 0
    assert sorted(f.stem for f in outs.glob("*.npz")) == sorted(THREE)
    assert all(x["inputs_regenerate_here"] for x in json.loads(ev.read_text())["kernels"].values())


def test_inputs_are_the_documented_generator():
    """Buffer i (order of first parameter) draws from default_rng([seed, i]); outputs are zero."""
    from formal.numerics.formats import from_float64, get_format
    meta = MANIFEST["tri_up_e4m3_f16_w4"]                  # A e4m3, B f16, C f32
    got = rh.hopper_inputs(meta, 1)
    assert list(got) == ["A", "B", "C"] and not got["C"].any() and got["C"].dtype == np.uint32
    rng = np.random.default_rng([1, 1])
    n = 256 * 128
    vals = rng.choice([-1.0, 1.0], n) * rng.uniform(0.125, 2.0, n)
    want = np.asarray(from_float64(vals, get_format("f16"))).astype(np.uint16).reshape(256, 128)
    assert np.array_equal(got["B"], want)
    assert got["A"].dtype == np.uint8 and not np.array_equal(rh.hopper_inputs(meta, 0)["A"], got["A"])


def test_params_bytes_and_tensormap_placement():
    meta = MANIFEST["cute_tma_mcast_f16"]
    info = rh.validate("cute_tma_mcast_f16", meta, (CORPUS / meta["ptx"]).read_text())
    seen = []

    def encode(args):
        seen.append(args)
        return bytes(range(128))
    ptrs = {"A": 0x10000, "B": 0x20000, "C": 0x30000}
    prep = rh.pack_params(meta, info, ptrs, {}, encode)
    assert [len(b) for b in prep.params] == [256, 256, 8, 4, 4, 4]
    assert prep.params[0][:128] == bytes(range(128)) and prep.params[0][128:] == bytes(128)
    assert prep.params[2] == (0x30000).to_bytes(8, "little")
    assert [int.from_bytes(b, "little") for b in prep.params[3:]] == [512, 256, 512]
    assert [a.address for a in seen] == [0x10000, 0x20000]
    assert list(seen[1].box_dim) == [64, 64] and list(seen[1].global_strides)[:1] == [1024]
    kp, keep = rh.kernel_params(prep.params)
    assert all(ctypes.string_at(kp[i], len(b)) == b for i, b in enumerate(prep.params))


def _broken(name, edit):
    meta = copy.deepcopy(MANIFEST[name])
    edit(meta)
    with pytest.raises(rh.ManifestError) as e:
        rh.validate(name, meta, (CORPUS / meta["ptx"]).read_text())
    return str(e.value)


def _tm(meta, i=0):
    return [p for p in meta["launch"]["params"] if p["role"] == "tensormap"][i]["tensormap"]


def test_validation_refuses_wrong_manifests():
    def strides(m):
        _tm(m)["encode"]["globalStrides_bytes"] = [256]
    assert "globalStrides_bytes" in _broken("tri_tma_f16_w4", strides)

    def box(m):
        _tm(m)["encode"]["boxDim"] = [128, 64]
    assert "swizzle span" in _broken("tri_tma_f16_w4", box)

    def dtype(m):
        _tm(m)["encode"]["tensorDataType"] = "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16"
    assert "for f16 elements" in _broken("tri_tma_f16_w4", dtype)

    def m_value(m):
        next(p for p in m["launch"]["params"] if p.get("meaning") == "M")["value"] = 64
    assert "M = 64" in _broken("tri_ptr_f16_w4", m_value)

    def desc_shape(m):
        next(p for p in m["launch"]["params"] if p.get("meaning") == "b_desc.shape[0]")["value"] = 128
    assert "b_desc.shape[0]" in _broken("tri_tma_f16_w4", desc_shape)

    def cluster(m):
        m["launch"]["cluster"] = [1, 1, 1]
    assert ".reqnctapercluster" in _broken("cute_tma_mcast_f16", cluster)

    def block(m):
        m["launch"]["block"] = [256, 1, 1]
    assert ".reqntid" in _broken("tri_tma_f16_w4", block)

    def drop(m):
        m["launch"]["params"].pop()
    assert "parameters" in _broken("tri_tma_f16_w4", drop)

    def atom(m):
        _tm(m)["tensormap_offset"] = 192
    assert "CUtensorMap at offset 192" in _broken("cute_tma_fp8", atom)

    def smem(m):
        m["launch"]["shared_bytes"] = 240000
    assert "shared_bytes" in _broken("tri_ptr_f16_w4", smem)


def test_contract_check_notices_a_wrong_output():
    meta = MANIFEST["tri_attn_softmax_w4"]
    inputs = rh.hopper_inputs(meta, 0)
    good = rh.simulated_outputs(meta, inputs)
    assert rh.contract_errors(meta, inputs, good)["O"] < 1e-6
    assert rh.contract_errors(meta, inputs, {"O": np.zeros_like(good["O"])})["O"] > 0.1
    bad = good["O"].copy()
    bad[3, 5] ^= 0x4000_0000                     # one f32 element's exponent
    assert rh.contract_errors(meta, inputs, {"O": bad})["O"] > rh.contract_tolerance(meta, "O")
    s8 = MANIFEST["tri_ptr_s8_w4"]
    ins = rh.hopper_inputs(s8, 0)
    out = rh.simulated_outputs(s8, ins)
    assert rh.contract_errors(s8, ins, out)["C"] == 0.0 and rh.contract_tolerance(s8, "C") == 0.0
    out["C"][0, 0] += 1
    assert rh.contract_errors(s8, ins, out)["C"] > 0


@needs_gcc
def test_ctypes_layout_and_enums_match_cuda_h(tmp_path):
    enums = {**rh.TENSOR_MAP_DATA_TYPE, **rh.TENSOR_MAP_INTERLEAVE, **rh.TENSOR_MAP_SWIZZLE,
             **rh.TENSOR_MAP_L2_PROMOTION, **rh.TENSOR_MAP_FLOAT_OOB_FILL, **rh.CU_FUNC_ATTRIBUTE,
             "CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION": rh.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
             "CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION":
                 rh.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
             "CU_JIT_INFO_LOG_BUFFER": rh.CU_JIT_INFO_LOG_BUFFER,
             "CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES": rh.CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
             "CU_JIT_LOG_VERBOSE": rh.CU_JIT_LOG_VERBOSE,
             "CU_JIT_ERROR_LOG_BUFFER": rh.CU_JIT_ERROR_LOG_BUFFER,
             "CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES": rh.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
             "CUDA_SUCCESS": rh.CUDA_SUCCESS, "CUDA_ERROR_NOT_READY": rh.CUDA_ERROR_NOT_READY,
             "CU_TENSOR_MAP_NUM_QWORDS": rh.CU_TENSOR_MAP_NUM_QWORDS}
    fields = {"CUlaunchConfig": rh.CUlaunchConfig, "CUlaunchAttribute": rh.CUlaunchAttribute}
    lines = ["#include <cuda.h>", "#include <stdio.h>", "#include <stddef.h>", "int main(void) {"]
    lines += [f'printf("{n} %lld\\n", (long long)({n}));' for n in enums]
    for cname, cls in fields.items():
        lines.append(f'printf("sizeof {cname} %zu\\n", sizeof({cname}));')
        lines.append(f'printf("alignof {cname} %zu\\n", _Alignof({cname}));')
        lines += [f'printf("offsetof {cname}.{f} %zu\\n", offsetof({cname}, {f}));' for f, _ in cls._fields_]
    lines += ['printf("sizeof CUlaunchAttributeValue %zu\\n", sizeof(CUlaunchAttributeValue));',
              'printf("offsetof CUlaunchAttributeValue.clusterDim %zu\\n",'
              ' offsetof(CUlaunchAttributeValue, clusterDim));',
              'printf("sizeof CUtensorMap %zu\\n", sizeof(CUtensorMap));',
              'printf("alignof CUtensorMap %zu\\n", _Alignof(CUtensorMap));', "return 0; }"]
    src = tmp_path / "layout.c"
    src.write_text("\n".join(lines) + "\n")
    subprocess.run(["gcc", "-std=c11", f"-I{CUDA_H.parent}", str(src), "-o", str(tmp_path / "layout")], check=True)
    run = subprocess.run([str(tmp_path / "layout")], capture_output=True, text=True, check=True)
    got = dict(line.rsplit(" ", 1) for line in run.stdout.splitlines())
    for n, v in enums.items():
        assert int(got[n]) == v, n
    for cname, cls in fields.items():
        assert int(got[f"sizeof {cname}"]) == ctypes.sizeof(cls), cname
        assert int(got[f"alignof {cname}"]) == ctypes.alignment(cls), cname
        for f, _ in cls._fields_:
            assert int(got[f"offsetof {cname}.{f}"]) == getattr(cls, f).offset, (cname, f)
    assert int(got["sizeof CUlaunchAttributeValue"]) == ctypes.sizeof(rh.CUlaunchAttributeValue) == 64
    assert int(got["sizeof CUtensorMap"]) == 128 and int(got["alignof CUtensorMap"]) <= 128
    # the element sizes the checks use, against the header's comments ("// 2 bytes")
    text = CUDA_H.read_text()
    for n, v in rh.TENSOR_MAP_DATA_TYPE.items():
        m = re.search(rf"{n}(?:\s*=\s*\d+)?,?\s*// (\d+) bytes?", text)
        assert m and int(m.group(1)) == rh.TENSOR_MAP_ELEMENT_BYTES[v], n


def _params_of(line):
    return [bytes.fromhex(h) for h in line.split(" params ", 1)[1].split()] if " params " in line else []


@needs_gcc
def test_gpu_path_against_a_fake_driver(tmp_path):
    lib = tmp_path / "lib"
    lib.mkdir()
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", f"-I{CUDA_H.parent}", "-o", str(lib / "libcuda.so.1"),
                    str(ROOT / "tests" / "fake_cuda" / "libcuda_fake.c")], check=True)
    log, out = tmp_path / "log", tmp_path / "out"
    names = ["cute_gmma_rs_f16", "cute_gmma_ss_f16", "cute_tma_mcast_f16", "tri_devtma_f16_w4", "tri_tma_f16_w4",
             "tri_tma_pdl_f16_w4"]
    env = dict(os.environ, LD_LIBRARY_PATH=str(lib), PYTHONPATH=str(ROOT / "tests" / "fake_cuda"),
               FAKE_CUDA_LOG=str(log), FAKE_CUDA_BLOCK="cute_gmma_rs_f16", FAKE_CUDA_HANG="tri_tma_f16_w4",
               FAKE_CUDA_FAIL="tri_devtma_f16_w4", FAKE_CUDA_REFUSE_CLUSTER="1")
    r = subprocess.run([sys.executable, str(TOOL), "--out", str(out), "--only", *names, "--gpu-timeout", "0.5"],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stderr[-3000:]               # zero outputs: the contract check fails
    rec = json.loads((out / rh.RECORD).read_text())
    k = rec["kernels"]
    assert rec["gpu"] == "Fake H100" and rec["summary"]["workers"] == 4
    assert k["cute_gmma_rs_f16"]["status"] == "timeout" and "killed" in k["cute_gmma_rs_f16"]["error"]
    assert k["tri_tma_f16_w4"]["status"] == "timeout" and "no completion" in k["tri_tma_f16_w4"]["error"]
    assert k["tri_devtma_f16_w4"]["status"] == "error"
    assert "CUDA_ERROR_ILLEGAL_ADDRESS" in k["tri_devtma_f16_w4"]["error"]
    for n in ("cute_gmma_ss_f16", "cute_tma_mcast_f16", "tri_tma_pdl_f16_w4"):
        assert k[n]["status"] == "ok" and not k[n]["contract_ok"] and len(k[n]["launches"]) == 2, n
        assert k[n]["function"]["num_regs"] == 1004 and k[n]["jit_info_log"] == "fake JIT info log"
    mc = k["cute_tma_mcast_f16"]["launches"]
    assert mc[0]["cluster_attribute_refused"] == "CUDA_ERROR_INVALID_VALUE" and mc[1]["launch_attributes"] == []

    launches = {}
    for line in log.read_text().splitlines():
        if line.startswith("launch "):
            launches.setdefault(line.split()[1], []).append(line)
    assert sorted(launches) == sorted(names)
    assert "setattr tri_tma_pdl_f16_w4 8 73752" in log.read_text()
    for name, lines in launches.items():
        L = MANIFEST[name]["launch"]
        head = lines[0].split(" params")[0].split()
        assert head[3:6] == [str(v) for v in L["grid"]] and head[7:10] == [str(v) for v in L["block"]], name
        assert head[11] == str(L["shared_bytes"]) and head[13] == "1" and head[15] == "0", name   # stream, no extra
        params = _params_of(lines[0])
        assert len(params) == len(L["params"]), name
        for raw, p in zip(params, L["params"]):
            assert len(raw) == p["bytes"], (name, p["name"])
            v = int.from_bytes(raw[:8], "little")
            if p["role"] == "scalar":
                assert int.from_bytes(raw, "little") == p["value"], (name, p["name"])
            elif p["role"] == "pointer":
                assert v and v % 256 == 0, (name, p["name"])
            elif p["role"] == "scratch":
                assert (v != 0) == (p["bytes_per_program"] > 0) and v % max(p.get("align", 1), 1) == 0, (name, p)
            else:                                   # the fake map: address, enums, dims, strides, box
                tm, off = p["tensormap"], p["tensormap"].get("tensormap_offset", 0)
                q = np.frombuffer(raw[off:off + 128], np.uint64).tolist()
                e = tm["encode"]
                assert q[0] and q[0] % 256 == 0
                assert q[1] == (rh.TENSOR_MAP_DATA_TYPE[e["tensorDataType"]] | e["tensorRank"] << 8 |
                                rh.TENSOR_MAP_SWIZZLE[e["swizzle"]] << 24 |
                                rh.TENSOR_MAP_L2_PROMOTION[e["l2Promotion"]] << 32), (name, p["name"])
                assert q[2:4] == e["globalDim"] and q[7:8] == e["globalStrides_bytes"], (name, p["name"])
                assert q[11:13] == [b | s << 32 for b, s in zip(e["boxDim"], e["elementStrides"])]
                assert raw[:off] == bytes(off) and raw[off + 128:] == bytes(len(raw) - off - 128)
    assert " pdl=1 " in launches["tri_tma_pdl_f16_w4"][0] and " attrs 0 " in launches["cute_tma_mcast_f16"][0]

    # import: arrays that fit the budget, the rest by sha256; the inputs regenerate here
    ev, outs = tmp_path / "ev.json", tmp_path / "outs"
    assert rh.main(["--import", str(out), "--evidence", str(ev), "--outputs-dir", str(outs),
                    "--max-array-bytes", "1300"]) == 0
    e = json.loads(ev.read_text())
    kept = sorted(p.stem for p in outs.glob("*.npz"))
    assert kept and set(kept) < {"cute_gmma_ss_f16", "cute_tma_mcast_f16", "tri_tma_pdl_f16_w4"}
    assert any(x.get("arrays_omitted") for x in e["kernels"].values())
    assert all(e["kernels"][n]["inputs_regenerate_here"] for n in names if n != "cute_gmma_rs_f16")
    assert e["import"]["problems"] == []
    # a tampered npz is noticed
    bad = out / k["cute_gmma_ss_f16"]["npz"]
    arrs = dict(np.load(bad))
    arrs["cute_gmma_ss_f16/0_C"] = arrs["cute_gmma_ss_f16/0_C"] + 1
    np.savez_compressed(bad, **arrs)
    assert rh.main(["--import", str(out), "--evidence", str(ev), "--outputs-dir", str(outs)]) == 1
