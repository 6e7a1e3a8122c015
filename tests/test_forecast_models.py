"""Tests of the forecasting model forecast_mlp (models/forecast_models.py): the last value plus
the change, its statistics and anchor checked."""

import numpy as np
import pytest

from tfaccel import models
from tfaccel.errors import UserInputError

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


def _forecaster(**params):
    return models.build_model("forecast_mlp", input_shape=(6, 2), task="regression",
                              num_outputs=4, **params)


def test_forecast_mlp_with_a_zero_head_forecasts_the_last_value_plus_the_mean_change():
    stats = {"input_mean": [10.0, -3.0], "input_std": [2.0, 0.5],
             "target_mean": [0.5, 1.0, 1.5, 2.0], "target_std": [1.0, 1.0, 2.0, 2.0]}
    model = _forecaster(anchor=[1, 0], **stats)
    head = model.get_layer("predictions")
    assert head.activation.__name__ == "linear" and head.dtype == "float32"
    head.set_weights([np.zeros_like(w) for w in head.get_weights()])
    x = np.random.default_rng(0).normal(size=(3, 6, 2)).astype("float32") * [2, 0.5] + [10, -3]
    # Outputs step-major: step 1 (channel 1, channel 0), step 2 (channel 1, channel 0).
    expected = np.tile(x[:, -1, [1, 0]], 2) + np.array(stats["target_mean"])
    np.testing.assert_allclose(model.predict(x, verbose=0), expected, rtol=1e-5, atol=1e-5)
    # Without an anchor, a zero head gives the targets' mean.
    plain = _forecaster(**stats)
    plain.get_layer("predictions").set_weights(
        [np.zeros_like(w) for w in plain.get_layer("predictions").get_weights()])
    np.testing.assert_allclose(plain.predict(x, verbose=0),
                               np.tile(stats["target_mean"], (3, 1)), atol=1e-5)


@pytest.mark.parametrize("params, message", [
    ({"input_mean": [1.0], "input_std": [1.0]}, "'input_mean' needs 2 values (one per channel)"),
    ({"input_std": [1.0, 0.0], "input_mean": [0, 0]}, "non-empty list of positive numbers"),
    ({"anchor": [2]}, "one input channel (0 to 1) per target column"),
    ({"anchor": [0, 1, 1]}, "4 outputs a whole number of steps"),
    ({"anchor": [-1]}, "input channel indices (integers >= 0)"),
])
def test_forecast_mlp_bad_statistics_or_anchor_are_named(params, message):
    with pytest.raises(UserInputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _forecaster(**params)


def test_forecast_mlp_needs_a_fixed_length():
    with pytest.raises(UserInputError, match="needs windows of a fixed length"):
        models.build_model("forecast_mlp", input_shape=(None, 1), task="regression",
                           num_outputs=2)
