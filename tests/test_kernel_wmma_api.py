"""The CUDA wmma API kernels of tools/kernel_sources/wmma_api_kernels.cu (nvcc 13.0 -ptx, sm_80 and
sm_90): C read row-major and D stored column-major through the same pointer, and chains of two or
three products through one pointer, f16 / bf16 / tf32 / s8 / u8 / f64 — every one proved with
views and chained contracts, and `kernel run` equal to evaluate_matrices applied step by step."""
from __future__ import annotations

from pathlib import Path

import pytest

from formal import kernel

DATA = Path(__file__).resolve().parent / "data" / "kernels_wmma_api"
SPECS = sorted(DATA.glob("*.toml"))


@pytest.fixture(scope="module", params=["wmma_api_sm80.ptx", "wmma_api_sm90.ptx"])
def module(request):
    return kernel.parse_module((DATA / request.param).read_text())


def test_there_are_twelve():
    assert len(SPECS) == 12 and sum("f64" in s.name for s in SPECS) == 3


@pytest.mark.parametrize("spec", SPECS, ids=[s.stem for s in SPECS])
def test_proved(module, spec):
    res = kernel.check(module, kernel.load_spec(spec))
    assert res.verdict == "proved", res.summary if hasattr(res, "summary") else res
