"""Tests of the feature-vector model mlp (models/feature_models.py)."""

import numpy as np

from tfaccel import models

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
