"""Tests of the model registry: names, parameters, errors, float32 outputs under mixed precision."""

import subprocess
import sys

import numpy as np
import pytest

from tfaccel import models
from tfaccel.errors import UserInputError

# Its subprocesses check start-up itself (TensorFlow's import lines, what a call imports):
# real interpreters, not forks of the warm one (tests/warm_python.py).
pytestmark = pytest.mark.cold_python

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)

SMALL = ("mlp", "small_cnn", "resnet_small")
APPLICATIONS = ("mobilenet_v3_small", "efficientnet_b0", "resnet50")


def _images(n, shape, seed=0):
    return np.random.default_rng(seed).integers(0, 256, size=(n, *shape), dtype=np.uint8)


def test_registry_imports_without_tensorflow():
    code = (
        "import sys, tfaccel.models as m;"
        "m.model_params('small_cnn');"
        "assert 'tensorflow' not in sys.modules and 'keras' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_model_names_lists_every_builder():
    tokens = ("text_bag", "text_cnn", "text_transformer")  # tests/test_text_models.py
    sequences = ("forecast_mlp", "seq_cnn")  # tests/test_sequence_models.py
    assert models.model_names() == sorted(SMALL + APPLICATIONS + tokens + sequences)
    assert set(models.MODELS) == set(SMALL + APPLICATIONS + tokens + sequences)
    assert {name for name, spec in models.MODELS.items() if spec.inputs == "tokens"} == \
        set(tokens)


def test_model_params_returns_defaults_as_a_fresh_dict():
    params = models.model_params("small_cnn")
    assert params == {"filters": (16, 32, 64), "dense_units": 64, "dropout": 0.0,
                      "normalization": "per_image", "batch_norm": False}
    params["filters"] = (1,)
    assert models.model_params("small_cnn")["filters"] == (16, 32, 64)
    assert models.model_params("mlp") == {"hidden_units": (256, 128), "dropout": 0.2,
                                          "normalization": "rescale", "l2": 0.0,
                                          "linear_path": False, "members": 1}
    assert models.model_params("resnet50") == {"image_size": None, "dropout": 0.0,
                                               "normalization": "per_image", "bn_momentum": 0.9}


def test_unknown_model_name_suggests_the_closest():
    expected = r"Unknown model name 'small_cn' \(did you mean 'small_cnn'\?\)\. Known models: "
    with pytest.raises(UserInputError, match=expected):
        models.model_params("small_cn")
    with pytest.raises(UserInputError, match=r"'resnet_50' \(did you mean 'resnet50'\?\)"):
        models.build_model("resnet_50", input_shape=(32, 32, 3), num_classes=4)


def test_unknown_param_names_it_and_suggests_the_closest():
    with pytest.raises(UserInputError, match=r"Unknown parameter 'filter' \(did you mean "
                                             r"'filters'\?\) for model 'small_cnn'\. "):
        models.build_model("small_cnn", input_shape=(32, 32, 3), num_classes=4, filter=[8])


@pytest.mark.parametrize(
    "name, params, message",
    [
        ("small_cnn", {"dropout": 1.5}, r"'dropout' must be a number in \[0, 1\), got 1.5"),
        ("small_cnn", {"filters": []}, r"'filters' must be a non-empty list of .*got \[\]"),
        ("mlp", {"hidden_units": [64, "x"]}, r"'hidden_units' must be .*got \[64, 'x'\]"),
        ("small_cnn", {"batch_norm": "yes"}, r"'batch_norm' must be true or false, got 'yes'"),
        ("small_cnn", {"normalization": "perimage"}, r"got 'perimage' \(did you mean 'per_image'\?\)\.$"),
        ("resnet_small", {"stages": 0}, r"'stages' must be an integer >= 1, got 0"),
        ("resnet50", {"image_size": 16}, r"'image_size' must be .*>= 32, got 16"),
        ("efficientnet_b0", {"bn_momentum": 1.0}, r"'bn_momentum' must be a number in "
                                                  r"\[0, 1\), got 1.0"),
        ("mobilenet_v3_small", {"normalization": "imagenet"}, r"'normalization' must be one of"),
    ],
)
def test_bad_param_values_are_rejected_with_the_value(name, params, message):
    with pytest.raises(UserInputError, match=message):
        models.build_model(name, input_shape=(32, 32, 3), num_classes=4, **params)


def test_bad_input_shape_and_class_count_are_rejected():
    with pytest.raises(UserInputError, match=r"input_shape must be .* got \(32, 32\)"):
        models.build_model("small_cnn", input_shape=(32, 32), num_classes=4)
    with pytest.raises(UserInputError, match=r"input_shape must be a shape .* got \(0,\)"):
        models.build_model("mlp", input_shape=(0,), num_classes=4)
    with pytest.raises(UserInputError, match=r"num_classes must be an integer >= 2, got 1"):
        models.build_model("mlp", input_shape=(32, 32, 3), num_classes=1)


@pytest.mark.parametrize("name", SMALL)
def test_small_models_output_float32_probabilities_under_mixed_bfloat16(name, policy):
    policy("mixed_bfloat16")
    model = models.build_model(name, input_shape=(32, 32, 3), num_classes=5)
    out = model(_images(3, (32, 32, 3)), training=False)
    assert tuple(out.shape) == (3, 5)
    assert out.dtype == "float32"
    np.testing.assert_allclose(np.asarray(out).sum(axis=1), 1.0, atol=1e-5)
    assert model.layers[-1].dtype_policy.compute_dtype == "float32"
    # The body really runs in bfloat16 (otherwise the policy would be a no-op here).
    assert any(layer.compute_dtype == "bfloat16" for layer in model.layers)


@pytest.mark.parametrize("name", SMALL)
def test_pixel_scaling_layer_keeps_its_name_whatever_was_built_before(name):
    """export.json names the preprocessing layers: the name must not depend on process history."""
    import keras

    keras.layers.Rescaling(2.0)  # takes Keras' automatic name "rescaling" in this process
    model = models.build_model(name, input_shape=(16, 16, 3), num_classes=4,
                               **({"normalization": "rescale"} if name == "mlp" else {}))
    assert "rescaling" in [layer.name for layer in model.layers]




def test_every_registered_builder_names_a_function_of_its_family_module():
    # The table names builders as module:function (so it stays TF-free): a misspelt one
    # would fail only when that model is first built.
    import importlib

    for name, spec in models.MODELS.items():
        module, function = spec.builder.split(":")
        assert module.startswith("tfaccel.models."), name
        assert callable(getattr(importlib.import_module(module), function)), name
