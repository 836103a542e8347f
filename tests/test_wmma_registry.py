"""The wmma obligations in formal.prove's registry."""

from __future__ import annotations

from formal import catalog as cat
from formal import prove as P


def test_wmma_registers_on_import_and_everything_proves():
    import formal.wmma  # noqa: F401
    assert "wmma" in P.registered()
    obs = P.collect(family="wmma")
    fams = {o.family for o in obs}
    assert {"wmma.theorem.pipeline", "wmma.theorem.accumulator_f16_to_f32_undefined", "wmma.memory.align_readings_agree",
            "wmma.map.covers"} <= fams
    mem = [o for o in obs if o.family == "wmma.memory.align_readings_agree"]
    assert len(mem) == len({o.subject for o in mem}) == 114          # spaces and .aligned merged
    quick = [o for o in obs if not o.family.startswith("wmma.memory")]
    res = P.run(quick)
    assert all(r.status == "proved" for r in res), [r.to_dict() for r in res if r.status != "proved"]
    ex = next(r for r in res if r.obligation.family == "wmma.theorem.accumulator_f16_to_f32_undefined")
    assert "example" in ex.note and "f32_map" in ex.note


def test_one_form_selects_its_memory_obligations():
    f = cat.parse("wmma.store.d.sync.aligned.col.m8n8k4.shared.f64")
    obs = [o for o in P.collect([f], family="wmma") if o.family.startswith("wmma.memory")]
    assert len(obs) == 3 and all(o.subject == "wmma.store.d.sync.aligned.col.m8n8k4.f64" for o in obs)
    assert all(r.status == "proved" for r in P.run(obs))
    assert all((f.opcode, "memory") in o.cover for o in obs)
