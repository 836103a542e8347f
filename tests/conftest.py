"""The CI slice of long parametrized families.

Each family below runs one case in ``every`` (by collection order, so always the same ones) in
the default run and the others under ``-m slow``; ``pytest -m "slow or not slow"`` runs them all.
The families are the ones whose cases differ by data, not by code path (every arch, every form,
every mutant, every wrong model): the sample still goes through each path.
"""

from __future__ import annotations

import pytest

SAMPLED = {
    "test_audit_mechanisms.py::test_wrong_model_caught_by_its_point": 3,
    "test_audit_mechanisms.py::test_independent_model_labelled_exactly": 2,
    "test_audit_cli.py::test_identify_each_evaluator_model_as_itself": 2,
    "test_audit_symbolic.py::test_reference_matches_evaluator": 2,
    "test_ptxas.py::test_sample_agrees_with_catalog_modulo_errata": 3,
    "test_fuzz_audit.py::test_fuzz": 2,
    "test_fuzz_kernel.py::test_malformed_modules": 2,
    "test_kernel_corpus.py::test_check_proved": 3,
    "test_kernel_corpus.py::test_mutant_refuted_at_its_line": 2,
    "test_kernel_corpus.py::test_run_matches_h100_bit_for_bit": 2,
    "test_kernel_hopper_check.py::test_proved": 2,
    "test_kernel_hopper_mutants.py::test_mutant_is_judged": 2,
    "test_kernel_hopper_run.py::test_run_equals_h100": 3,
    "test_kernel_mutants_types.py::test_sample_verdicts_reproduce": 2,
    "test_kernel_sem_types.py::test_type_change_refuted_with_both_types": 2,
    "test_layout_cute_atoms.py::test_scale_factor_layouts_hold_for_every_selector": 2,
    "test_layout_wgmma.py::test_cute_gmma_layouts_are_the_spec": 3,
    "test_layout_wgmma.py::test_triton_v3_layouts_are_the_spec": 2,
    "test_layout_whole.py::test_whole_cta_mma_v2_layouts_are_proved_tile_by_tile": 2,
    "test_metadata.py::test_obligations_proved": 2,
    "test_metadata.py::test_all_witnesses_run": 2,
    "test_mutation.py::test_mutation_is_refuted_with_a_real_witness": 2,
    "test_numerics_models.py::test_vectorised_equals_scalar_float": 4,
    "test_numerics_models.py::test_vectorised_equals_scalar_near_zero": 3,
    "test_numerics_zero_sign.py::test_block_fma_ieee_zero_sign": 3,
    "test_recipes.py::test_proved_recipes_are_not_vacuous": 2,
    "test_recipes.py::test_recipe_meets_expectation": 2,
    "test_vectors_gpu.py::test_cuda_harness_compiles_for_sm90": 4,
    "test_wgmma_vectors_audit.py::test_wrong_models_are_refuted_with_the_mechanism": 2,
}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    seen: dict[str, int] = {}
    for item in items:
        fam = item.nodeid.split("/")[-1].split("[")[0]
        every = SAMPLED.get(fam)
        if every is None or "[" not in item.nodeid or item.get_closest_marker("slow"):
            continue
        i = seen.get(fam, 0)
        seen[fam] = i + 1
        if i % every:
            item.add_marker(pytest.mark.slow)
