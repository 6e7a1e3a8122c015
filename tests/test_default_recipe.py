"""The README's default recipe reaches >= 90% validation accuracy for every seed tried."""

from pathlib import Path

import pytest

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)

DEFAULT_RECIPE = Path(__file__).resolve().parents[1] / "recipes" / "default.yaml"


def _train_default(tmp_path, data_dir, *overrides):
    from tfaccel.training.run import runner

    result = runner.train(str(DEFAULT_RECIPE),
                          [f"data.data_dir={data_dir}", "runtime.verbose=0", *overrides],
                          run_dir=str(tmp_path / "run"))
    # The majority-class guess on this balanced 4-class problem is 25%.
    assert result.summary["dataset"]["validation_examples"] == 2000
    return result.summary


@pytest.mark.slow
@pytest.mark.heavy
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_default_recipe_reaches_90_percent_for_every_seed(seed, tmp_path, shapes_data_dir):
    # Measured: 0.992, 0.974, 0.975 (seeds 0-2), about 60-90 s each on 2 CPU cores.
    summary = _train_default(tmp_path, shapes_data_dir, f"seed={seed}")
    assert summary["epochs_completed"] == 6
    assert summary["final_metrics"]["val_accuracy"] >= 0.90, (seed, summary["final_metrics"])


@pytest.mark.slow
def test_default_recipe_clears_85_percent_in_two_thirds_of_its_epochs(tmp_path,
                                                                      shapes_data_dir):
    """The CI share of the check above (the suite's time budget): the first 4 of 6 epochs.

    The recipe's learning rate is constant, so these are exactly the full run's first epochs.
    Epoch 3 sits on the steep part of the climb (0.826-0.920 measured; 0.8395 once in a
    loaded full-suite run, 0.871 with runtime.deterministic), too close to the bound for a
    check that must not flake; after epoch 4: 0.942 and 0.966 (seed 0, default
    non-deterministic order), 0.982 deterministic.
    """
    summary = _train_default(tmp_path, shapes_data_dir, "seed=0", "training.epochs=4")
    assert summary["epochs_completed"] == 4
    assert summary["final_metrics"]["val_accuracy"] >= 0.85, summary["final_metrics"]


def test_default_recipe_uses_the_builtin_dataset_without_network():
    from tfaccel.config.recipe import load_recipe

    recipe = load_recipe(DEFAULT_RECIPE)
    assert recipe.data.source == "builtin" and recipe.data.download is False
    assert recipe.runtime.precision == "auto" and recipe.model.name == "small_cnn"
