"""The input generators moved to :mod:`formal.inputs` (not GPU code: ``formal.hw`` is a leaf, and
the coverage models and vector drafts use them).  These names stay importable here for harness
scripts and benchmarks written against ``formal.hw.inputs``."""

from ..inputs import REGIMES, random_elements, random_inputs, random_metadata, random_operand  # noqa: F401
