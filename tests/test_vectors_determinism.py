"""Vectors are a pure function of (form, arch, seed, count, coverage, tool version):
the same digest in a fresh process, after other forms, and in another order."""

import json
import os
import subprocess
import sys

import pytest

from formal.vectors import coverage as cov
from formal.vectors import generate, read, write
from formal.vectors.build import digest

F16 = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
BF16 = "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: the models whose cases a solver or a search builds (the ones history could change), and random
COV = ["subnormal", "alignment", "cancellation", "overflow", "mechanisms", "random"]

SCRIPT = f"""
import json, sys
COV = {COV!r}
from formal.vectors import coverage as cov
from formal.vectors import generate
out = {{}}
for op in sys.argv[1:]:
    cov._SOLUTIONS.clear()
    out[op] = generate(op, seed=0, count=12, coverage=COV).digest
print(json.dumps(out))
"""


def _fresh(*opcodes):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", SCRIPT, *opcodes], capture_output=True, text=True, env=env,
                       cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.slow          # a second interpreter solving two forms again (~12 s): slow; the in-process order tests stay in CI
def test_same_vectors_in_a_fresh_process_after_other_forms_and_in_another_order():
    fresh = _fresh(BF16, F16)                  # bf16 first in a fresh process, then f16
    here = {}
    for op in (F16, BF16):                     # here: f16 first (the order that changed bf16 before)
        cov._SOLUTIONS.clear()                 # solve again, do not replay the cache
        here[op] = generate(op, seed=0, count=12, coverage=COV)
    assert here[BF16].digest == fresh[BF16]
    assert here[F16].digest == fresh[F16]
    # the solver-built cases are there (the ones that used to depend on history)
    assert any(c.why.startswith("solver") for c in here[BF16].cases)
    # a replay from the cache gives the same vectors too
    assert generate(BF16, seed=0, count=12, coverage=COV).digest == fresh[BF16]
    # and the digest is not blind: another seed gives other vectors (the random model is what the
    # seed drives; solving the other models again for seed 1 would cost seconds and add nothing)
    assert generate(BF16, seed=1, count=12, coverage=["random"]).digest != \
        generate(BF16, seed=0, count=12, coverage=["random"]).digest


@pytest.mark.parametrize("fmt", ["jsonl", "hex", "npz"])
def test_digest_survives_every_file_format_and_catches_edits(tmp_path, fmt):
    vs = generate(F16, seed=2, count=3, coverage=["specials", "random"])
    assert vs.header["digest"] == digest(vs) and vs.digest.startswith("sha256:")
    p = str(tmp_path / f"v.{fmt}")
    write(vs, p)
    back = read(p)
    assert back.digest == vs.digest
    if fmt == "jsonl":
        lines = open(p).read().splitlines()
        rec = json.loads(lines[1])
        rec["d"][0][0] = "%08x" % (int(rec["d"][0][0], 16) ^ 1)      # one expected bit changed
        lines[1] = json.dumps(rec)
        open(p, "w").write("\n".join(lines) + "\n")
        with pytest.raises(Exception, match="digest"):
            read(p)
