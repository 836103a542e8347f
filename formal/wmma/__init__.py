"""wmma: memory semantics with proofs, observed fragment maps, and theorems over every map.

* :mod:`formal.wmma.memory` -- ``specs/wmma_memory.toml`` compiled to Z3 and enumeration:
  :func:`check_access`, :func:`legal_strides`, :func:`memory_view`.
* :mod:`formal.wmma.maps` -- per-architecture fragment maps as observations with provenance
  (``specs/observed/``) and their proved properties.
* :mod:`formal.wmma.theorems` -- the seed's prose claims proved over every fragment map the
  rules allow.
* :mod:`formal.wmma.registry` -- the obligations in ``formal.prove``'s registry (registered
  here, at import, as ``prove --all`` expects).
* :mod:`formal.wmma.pipeline` -- :func:`check_pipeline_data`: the silicon load -> mma -> store
  results against ``formal.evaluate_matrices``, bit for bit.
* :mod:`formal.wmma.alignment` -- what the hardware needs for alignment (ptxas SASS survey,
  silicon alignment runs) against the text's rule; the silicon errata's status.
* :mod:`formal.wmma.evidence` -- the hardware evidence record ``proofs/evidence/wmma_h100.json``,
  rebuilt from a run's directories.
* :mod:`formal.wmma.cuda_worker` -- the child process of the fault-isolated GPU executor
  (:func:`formal.hw.wmma_probe.run_isolated`); standalone, run by path.
"""

from .memory import (  # noqa: F401
    READINGS,
    AccessResult,
    MemoryView,
    StrideSet,
    Violation,
    check_access,
    legal_strides,
    memory_forms,
    memory_view,
)
from .pipeline import PipelineReport, check_pipeline_data  # noqa: F401
from .results import PROVED, REFUTED, UNKNOWN, Result  # noqa: F401

from . import registry as _registry  # noqa: E402

_registry.register()
