"""`from_arrays` and `data.source: arrays`: non-finite features are refused by name."""

import numpy as np
import pytest
from click.testing import CliRunner

from tfaccel.cli.main import main
from tfaccel.data import from_arrays
from tfaccel.errors import DataError


def _features(n=64):
    rng = np.random.default_rng(0)
    return rng.normal(size=(n, 4)).astype("float32"), (np.arange(n) % 2).astype("int64")


def test_a_nan_feature_is_named_with_its_example():
    # TensorFlow 2.21's fused MatMul+BiasAdd+Relu turns a NaN input into 0 on some CPUs (an
    # AMD EPYC with avx512_bf16): a model then trains on zeros and its loss stays finite,
    # so nothing downstream would ever say so.
    x, y = _features()
    x[40, 2] = np.nan
    with pytest.raises(DataError) as raised:
        from_arrays(x, y, batch_size=16)
    message = str(raised.value)
    assert "x holds nan at example 40" in message and "numpy.nan_to_num" in message


def test_an_infinite_value_in_a_dict_feature_names_its_key():
    x, y = _features()
    features = {"dense": x, "extra": np.ones((64,), "float64")}
    features["extra"][7] = -np.inf
    with pytest.raises(DataError, match=r"x\['extra'\] holds -inf at example 7"):
        from_arrays(features, y, batch_size=16)


def test_integer_and_finite_arrays_pass_untouched():
    x, y = _features()
    batches = list(from_arrays(x, y, batch_size=16, shuffle_buffer=0).as_numpy_iterator())
    np.testing.assert_array_equal(np.concatenate([b[0] for b in batches]), x)


def test_a_recipe_with_nan_in_its_npz_exits_2_naming_the_file(tmp_path):
    x, y = _features()
    x[3, 0] = np.nan
    np.savez(tmp_path / "data.npz", x=x, y=y)
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        f"data: {{source: arrays, path: {tmp_path / 'data.npz'}, validation_split: null}}\n"
        "model: {name: mlp, params: {normalization: none}}\n"
        "training: {epochs: 1, global_batch_size: 16}\n"
        "runtime: {verbose: 0}\n")
    result = CliRunner().invoke(main, ["train", str(recipe), "--run-dir", str(tmp_path / "run")])
    assert result.exit_code == 2, result.output
    assert "data.npz" in result.output and "holds nan at example 3" in result.output
    assert "Traceback" not in result.output
