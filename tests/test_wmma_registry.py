"""The wmma obligations in formal.prove's registry."""

from __future__ import annotations

from formal import catalog as cat
from formal import prove as P


# the registration test and "everything proves" live in tests/test_prove.py, on the catalog run
# that `prove --all` does (one run of every wmma obligation instead of two)


def test_one_form_selects_its_memory_obligations():
    f = cat.parse("wmma.store.d.sync.aligned.col.m8n8k4.shared.f64")
    obs = [o for o in P.collect([f], family="wmma") if o.family.startswith("wmma.memory")]
    assert len(obs) == 3 and all(o.subject == "wmma.store.d.sync.aligned.col.m8n8k4.f64" for o in obs)
    assert all(r.status == "proved" for r in P.run(obs))
    assert all((f.opcode, "memory") in o.cover for o in obs)
