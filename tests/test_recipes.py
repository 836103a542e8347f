"""The recipe library (recipes/): every recipe is a test.  Proved recipes must be proved
and must stop being proved when perturbed (no vacuous proofs); broken recipes must be
refuted with the witness written in the recipe (derived by hand in its comments)."""

import json

import pytest

from formal.transform import library, load, parse_json, parse_text
from formal.transform.recipe import library_dir

RECIPES = library()
BY_NAME = {r.name: r for r in RECIPES}


def test_library_is_not_empty_and_names_are_unique():
    assert len(RECIPES) >= 25
    assert len(BY_NAME) == len(RECIPES)


@pytest.mark.parametrize("recipe", RECIPES, ids=[r.name for r in RECIPES])
def test_recipe_meets_expectation(recipe):
    res = recipe.prove()
    ok, why = recipe.expectation_met(res)
    assert ok, f"{recipe.name}: {why}\n{res.text()}"
    assert res.enumeration in ("agrees",) or res.status == "refuted" and res.reason != "wrong element"


REQUIRED = ["ldmatrix_x4_a_m16n8k16", "ldmatrix_x2_trans_b_m16n8k16", "accumulator_to_a_f16",
            "movmatrix_transpose_8x8", "sparse_a_m16n8k32_is_dense_a_m16n8k16",
            "broken_ldmatrix_b_missing_trans", "broken_shfl_wrong_xor_mask", "broken_pack_swapped_halves"]


@pytest.mark.parametrize("name", REQUIRED)
def test_required_recipes_present(name):
    r = BY_NAME[name]
    assert r.expect["status"] == ("refuted" if name.startswith("broken") else "proved")


def test_broken_missing_trans_witness_and_path():
    res = BY_NAME["broken_ldmatrix_b_missing_trans"].prove()
    assert res.witness == {"lane": 0, "register": "b0", "element": 1, "bit": 0}
    assert res.expected == {"row": 1, "col": 0, "bit": 0}                     # B[k=1][n=0]
    assert (res.got["row"], res.got["col"]) == (0, 1)                         # tile[0][1]
    # path: shared byte 2 (tile row 0, col 1) -> lane 0, b0, bits 16.. after step 1
    assert res.path[0]["location"] == {"space": "shared", "byte": 2, "bit": 0}
    assert res.path[-1]["location"] == {"space": "register", "lane": 0, "register": "b0", "bit": 16}
    assert res.path[-1]["instruction"].startswith("ldmatrix")
    # where B[1][0] went instead: lane 4 (row 1 of the untransposed load), element 0
    assert {"lane": 4, "register": "b0", "element": 0} in [{k: d[k] for k in ("lane", "register", "element")}
                                                           for d in res.expected_found_at]


def test_broken_shfl_witness_and_path():
    res = BY_NAME["broken_shfl_wrong_xor_mask"].prove()
    assert res.witness == {"lane": 0, "register": "y0", "element": 0, "bit": 0}
    assert res.expected["row"] == 1 and (res.got["row"], res.got["col"]) == (2, 0)
    # the value came from lane 8 (0 ^ 8), register a0
    assert res.path[0]["location"] == {"space": "register", "lane": 8, "register": "a0", "bit": 0}


def test_broken_pack_witness_and_path():
    res = BY_NAME["broken_pack_swapped_halves"].prove()
    assert res.witness == {"lane": 0, "register": "a0", "element": 0, "bit": 0}
    assert res.expected == {"row": 0, "col": 0, "bit": 0}
    assert (res.got["row"], res.got["col"]) == (0, 1)
    assert res.path[0]["location"]["register"] == "c1"
    assert res.expected_found_at[0]["register"] == "a0" and res.expected_found_at[0]["element"] == 1


def _perturbations(r):
    """Variants of a proved recipe that must not be proved."""
    tl = r.target if isinstance(r.target, list) else [r.target]
    out = []
    t0 = dict(tl[0])
    if "regs" in t0 and len(t0["regs"]) > 1:
        t0["regs"] = list(reversed(t0["regs"]))
        out.append(("target registers reversed", [t0] + tl[1:], r.steps, r.values))
    if r.values:
        k = sorted(r.values)[0]
        out.append((f"value {k} perturbed", tl, r.steps, {**r.values, k: f"({r.values[k]}) ^ 16"}))
    if r.steps:
        out.append(("last step dropped", tl, r.steps[:-1], r.values))
    return out


@pytest.mark.parametrize("recipe", [r for r in RECIPES if r.expect.get("status") == "proved"],
                         ids=[r.name for r in RECIPES if r.expect.get("status") == "proved"])
def test_proved_recipes_are_not_vacuous(recipe):
    """At least one perturbation must break the proof (a perturbed address that moves a
    store and its reload together may legitimately stay proved)."""
    import copy

    from formal.transform import TransformError

    outcomes = []
    for why, tgt, steps, values in _perturbations(recipe):
        r2 = copy.deepcopy(recipe)
        r2.target, r2.steps, r2.values = tgt if len(tgt) > 1 else tgt[0], steps, values
        try:
            outcomes.append((why, r2.prove().status))
        except TransformError as e:          # e.g. a dropped step leaves a value unused
            outcomes.append((why, f"error: {e}"))
    assert outcomes, recipe.name
    assert any(s == "refuted" for _, s in outcomes), f"{recipe.name}: no perturbation refutes it: {outcomes}"


def test_json_round_trip(tmp_path):
    r = BY_NAME["accumulator_to_a_f16"]
    obj = r.to_json()
    p = tmp_path / "r.json"
    p.write_text(json.dumps(obj))
    r2 = load(p)
    assert r2.prove().status == "proved"
    assert parse_json(obj).steps == r.steps


def test_readme_example_is_a_proved_recipe():
    text = (library_dir() / "README.md").read_text()
    block = text.split("```recipe", 1)[1].split("```", 1)[0]
    r = parse_text(block, "readme")
    assert r.prove().status == "proved"


@pytest.mark.parametrize("bad, msg", [
    ("source tile 16x16 b16 offset \"row*16+col\"\n", "no `target`"),
    ("target tile 16x16 b16 offset \"row*16+col\"\n", "no `source`"),
    ("source tile 16 b16 offset \"x\"\ntarget tile 16x16 b16 offset \"row\"\n", "ROWSxCOLS"),
    ("source tile 16x16 b16 offset \"row*16+col\"\nfrobnicate\ntarget tile 16x16 b16 offset \"row*16+col\"\n",
     "unknown directive"),
    ("source tile 16x16 b16 offset \"row*16+col\"\nvalue p = row\nstep mov.b32 a, b;\n"
     "target tile 16x16 b16 offset \"row*16+col\"\n", "only `lane`"),
    ("source tile 16x16 b16 offset \"row*16+col\"\nstep ldmatrix.sync.aligned.m8n8.x1.shared.b16 {a}, [q];\n"
     "target tile 16x16 b16 offset \"row*16+col\"\n", "not a defined value"),
    ("source tile 16x16 b16 offset \"row*8+col\"\ntarget tile 16x16 b16 offset \"row*16+col\"\n", "not invertible"),
])
def test_bad_recipes_are_one_line_errors(bad, msg):
    from formal.transform import TransformError
    with pytest.raises(TransformError) as e:
        parse_text(bad).prove()
    assert msg in str(e.value)
