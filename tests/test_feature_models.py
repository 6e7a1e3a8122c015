"""Tests of the feature-vector model mlp (models/feature_models.py)."""

import numpy as np
import pytest

from tfaccel import models
from tfaccel.errors import UserInputError

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


def test_mlp_hidden_units(policy):
    policy("float32")
    model = models.build_model("mlp", input_shape=(8, 8, 1), num_classes=3,
                               hidden_units=[7, 5], dropout=0.0)
    dense = [layer.units for layer in model.layers if layer.__class__.__name__ == "Dense"]
    assert dense == [7, 5, 3]


def test_mlp_takes_plain_feature_vectors_without_rescaling():
    model = models.build_model("mlp", input_shape=(2,), num_classes=2, hidden_units=[3],
                               dropout=0.0, normalization="none")
    assert model.input_shape == (None, 2)
    dense = [layer for layer in model.layers if layer.__class__.__name__ == "Dense"][0]
    features = np.array([[1.5, -2.0]], "float32")
    kernel, bias = dense.get_weights()
    # With normalization none the first Dense layer sees the features unchanged.
    import keras

    hidden = keras.Model(model.input, dense.output)(features).numpy()
    np.testing.assert_allclose(hidden, np.maximum(features @ kernel + bias, 0), rtol=1e-5)


def test_mlp_linear_path_adds_the_inputs_linear_map_and_l2_penalises_every_kernel():
    import keras

    model = models.build_model("mlp", input_shape=(3,), num_classes=1, task="binary",
                               hidden_units=[4], dropout=0.0, normalization="none",
                               linear_path=True, l2=0.01)
    deep, wide = model.get_layer("deep"), model.get_layer("wide")
    deep.set_weights([np.zeros_like(w) for w in deep.get_weights()])
    kernel = np.array([[0.5], [-1.0], [2.0]], "float32")
    wide.set_weights([kernel, np.array([0.25], "float32")])
    x = np.array([[1.0, 2.0, -0.5], [0.0, 0.0, 0.0]], "float32")
    # With the deep part at zero the model is a logistic regression on its inputs.
    np.testing.assert_allclose(np.asarray(model(x))[:, 0],
                               1 / (1 + np.exp(-(x @ kernel[:, 0] + 0.25))), rtol=1e-5)
    dense = [layer for layer in model.layers if isinstance(layer, keras.layers.Dense)]
    assert len(dense) == 3 and len(model.losses) == 3
    with pytest.raises(UserInputError, match="parameter 'l2' must be a number >= 0, got -1"):
        models.check_params("mlp", {"l2": -1})


def test_mlp_members_average_several_hidden_stacks_beside_the_linear_path():
    import keras

    keras.utils.set_random_seed(0)
    model = models.build_model("mlp", input_shape=(3,), num_classes=1, task="regression",
                               hidden_units=[4, 2], dropout=0.1, normalization="none",
                               linear_path=True, members=3)
    stacks = [model.get_layer(f"deep_{m}") for m in range(3)]
    dense = [layer for layer in model.layers if isinstance(layer, keras.layers.Dense)]
    # Three stacks of 4-2 units, each with its own output unit, and the wide unit.
    assert sorted(layer.units for layer in dense) == [1, 1, 1, 1, 2, 2, 2, 4, 4, 4]
    assert model.count_params() == 3 * (3 * 4 + 4 + 4 * 2 + 2 + 2 + 1) + (3 + 1)
    x = np.array([[1.0, 2.0, -0.5], [0.3, -1.0, 0.0]], "float32")
    stack_outputs = [np.asarray(keras.Model(model.input, s.output)(x)) for s in stacks]
    assert not np.allclose(stack_outputs[0], stack_outputs[1])  # their own random starts
    wide = np.asarray(keras.Model(model.input, model.get_layer("wide").output)(x))
    # The prediction: the inputs' linear map plus the stacks' mean (a linear head).
    np.testing.assert_allclose(np.asarray(model(x)), wide + np.mean(stack_outputs, axis=0),
                               rtol=1e-5, atol=1e-6)
    with pytest.raises(UserInputError, match="parameter 'members' must be an integer >= 1, "
                                             "got 0"):
        models.check_params("mlp", {"members": 0})


def test_a_table_run_gives_the_mlp_a_linear_path_and_five_members_when_classifying():
    from dataclasses import replace

    from tfaccel.config.recipe import recipe_from_dict
    from tfaccel.data.dataset_info import DatasetInfo, TableInfo
    from tfaccel.training.model_setup.model_build import _model_params

    table = DatasetInfo(table=TableInfo(numeric=["a"], categorical=[], ignored=[],
                                        features=1))

    def params(info, **given):
        return _model_params(recipe_from_dict({"model": {"name": "mlp", "params": given}}),
                             info)

    assert params(table) == {"normalization": "none", "linear_path": True, "members": 5}
    assert params(table, linear_path=False)["linear_path"] is False
    assert params(table, members=1)["members"] == 1
    for task, members in (("binary", 5), ("multi_label", 5), ("regression", 1)):
        assert params(replace(table, task=task))["members"] == members, task
    # The model a table run builds: five stacks of the recipe's units and the wide path.
    model = models.build_model("mlp", input_shape=(6,), num_classes=1, task="binary",
                               **params(table, hidden_units=[3], dropout=0.0))
    assert [layer.name for layer in model.layers if layer.name.startswith(("deep", "wide"))] \
        == [f"deep_{m}" for m in range(5)] + ["deep", "wide", "wide_and_deep"]
    assert model.count_params() == 5 * (6 * 3 + 3 + 3 + 1) + 6 + 1
    assert params(DatasetInfo()) == {}  # not a table: mlp's own defaults
