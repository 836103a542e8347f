"""A stand-in simulator for docs/wgmma.md's audit examples: the independent wgmma models of
tests/wgmma_models.py: right, with a 14-bit fp8 window, and with A rows 0 and 8 exchanged."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests"))
from wgmma_models import wgmma_model  # noqa: E402

right = wgmma_model("right")
window14 = wgmma_model("window14", F=14)
rows_0_8 = wgmma_model("rows_0_8", swap_rows=(0, 8))
