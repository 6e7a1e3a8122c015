"""`from_arrays` and `data.source: arrays`: non-finite features are refused by name."""

import numpy as np
import pytest
from click.testing import CliRunner

from tfaccel.cli.main import main
from tfaccel.data import from_arrays
from tfaccel.errors import DataError

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


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
        f"data: {{source: arrays, path: {tmp_path / 'data.npz'}, validation_split_name: null}}\n"
        "model: {name: mlp, params: {normalization: none}}\n"
        "training: {epochs: 1, global_batch_size: 16}\n"
        "runtime: {verbose: 0}\n")
    result = CliRunner().invoke(main, ["train", str(recipe), "--run-dir", str(tmp_path / "run")])
    assert result.exit_code == 2, result.output
    assert "data.npz" in result.output and "holds nan at example 3" in result.output
    assert "Traceback" not in result.output


# --- Keras' signature and meanings: from_arrays(x, y, batch_size, validation_split=) ---

def _images(n=20):
    # Distinct images (image i is all i), so a batch's values tell which examples it holds.
    return np.repeat(np.arange(n, dtype=np.uint8), 16).reshape(n, 4, 4, 1), np.arange(n) % 3


def _stacked(dataset):
    batches = list(dataset.as_numpy_iterator())
    return (np.concatenate([b[0] for b in batches]), np.concatenate([b[1] for b in batches]))


def test_batch_size_is_positional_as_in_keras_fit():
    x, y = _features(40)
    positional = from_arrays(x, y, 16, shuffle_buffer=0)
    assert [len(b[0]) for b in positional.as_numpy_iterator()] == [16, 16, 8]
    np.testing.assert_array_equal(_stacked(positional)[0], x)
    # batch_size= keeps working; everything after it stays keyword-only.
    assert len(list(from_arrays(x, y, batch_size=16))) == 3
    with pytest.raises(TypeError):
        from_arrays(x, y, 16, 0)


@pytest.mark.parametrize("n, fraction", [(10, 0.3), (100, 0.29), (7, 0.5), (1000, 0.1),
                                         (33, 0.15), (57, 0.07)])
def test_validation_split_holds_out_exactly_keras_fit_tail(n, fraction):
    from keras.src.trainers.data_adapters.array_slicing import train_validation_split

    x, y = _features(n)
    (keras_x, keras_y), (keras_vx, keras_vy) = train_validation_split((x, y), fraction)
    train, val = from_arrays(x, y, 8, validation_split=fraction, seed=0)
    vx, vy = _stacked(val)  # never shuffled: the tail in order
    np.testing.assert_array_equal(vx, keras_vx)
    np.testing.assert_array_equal(vy, keras_vy)
    tx, ty = _stacked(train)  # shuffled, but exactly Keras' training examples
    order = np.argsort(tx[:, 0])
    np.testing.assert_array_equal(tx[order], keras_x[np.argsort(keras_x[:, 0])])
    assert len(ty) == len(keras_y) == n - len(keras_vy)


def test_validation_split_is_taken_before_shuffling_and_is_not_augmented():
    x, y = _images(20)
    train, val = from_arrays(x, y, 4, validation_split=0.25, augment=["flip", "crop"],
                             seed=3)
    vx, vy = _stacked(val)
    np.testing.assert_array_equal(vx, x[15:].astype("float32"))  # exactly, unflipped
    np.testing.assert_array_equal(vy, y[15:])
    tx, _ = _stacked(train)
    assert sorted(tx[:, 0, 0, 0].astype(int)) == list(range(15))


def test_validation_split_too_small_is_refused_as_keras_does():
    x, y = _features(10)
    with pytest.raises(ValueError, match=r"10 samples.*validation_split=0\.99"):
        from_arrays(x, y, 4, validation_split=0.99)
    with pytest.raises(ValueError, match=r"validation_split must be a number between 0 and 1"):
        from_arrays(x, y, 4, validation_split=1.5)


def test_validation_split_keeps_a_file_cache_per_split(tmp_path):
    x, y = _images(20)
    cache = str(tmp_path / "cache" / "arrays")
    for _ in range(2):  # built, then read back
        train, val = from_arrays(x, y, 4, validation_split=0.25, cache=cache, seed=0)
        assert len(_stacked(val)[0]) == 5 and len(_stacked(train)[0]) == 15


# --- Unknown keywords: the nearest public one, and only public ones listed ---

INTERNAL = ("cache_fingerprint", "random_decode", "ignore_decode_errors", "map_fn",
            "source_shuffle", "padded_batch")  # a builder's own decisions


def _builders():
    import tensorflow as tf

    from tfaccel import data

    return {
        "from_arrays": lambda **kw: data.from_arrays(np.zeros((2, 1)), None, 1, **kw),
        "from_image_folder": lambda **kw: data.from_image_folder("missing", **kw),
        "from_text_folder": lambda **kw: data.from_text_folder("missing", **kw),
        "from_text_lines": lambda **kw: data.from_text_lines("missing", batch_size=1, **kw),
        "from_audio_folder": lambda **kw: data.from_audio_folder("missing", **kw),
        "from_csv": lambda **kw: data.from_csv("missing", batch_size=1, **kw),
        "from_timeseries": lambda **kw: data.from_timeseries(np.zeros((9, 1)), None, 2, **kw),
        "from_timeseries_csv": lambda **kw: data.from_timeseries_csv(
            "missing", sequence_length=2, **kw),
        "from_tfrecords": lambda **kw: data.from_tfrecords("missing", features={},
                                                           batch_size=1, **kw),
        "from_tfds": lambda **kw: data.from_tfds("missing", split="train", batch_size=1, **kw),
        "from_python": lambda **kw: data.from_python([1, 2], batch_size=1, **kw),
        "optimize": lambda **kw: data.optimize(tf.data.Dataset.range(2), batch_size=1, **kw),
    }


@pytest.mark.parametrize("builder", list(_builders()))
def test_an_unknown_keyword_names_the_nearest_public_one(builder):
    from tfaccel.errors import UserInputError

    call = _builders()[builder]
    with pytest.raises(UserInputError) as raised:
        call(shufle_buffer=1)
    message = str(raised.value)
    assert message.startswith(f"{builder}() got an unknown argument 'shufle_buffer' "
                              "(did you mean 'shuffle_buffer'?)"), message
    assert "deterministic" in message and "seed" in message
    for name in INTERNAL:
        if builder == "optimize" and name not in ("random_decode", "ignore_decode_errors"):
            continue  # optimize's own (a decode map_fn, source_shuffle, ... of your dataset)
        if name == "cache_fingerprint" and builder == "from_python":
            continue  # documented: what a cache of data it cannot look into depends on
        assert name not in message, (name, message)


@pytest.mark.parametrize("builder", list(_builders()))
@pytest.mark.parametrize("internal", ["random_decode", "ignore_decode_errors"])
def test_internal_options_are_refused_from_users(builder, internal):
    from tfaccel.errors import UserInputError

    with pytest.raises(UserInputError, match=f"unknown argument '{internal}'"):
        _builders()[builder](**{internal: None})


# --- data.source: arrays reads Keras' dataset layout (keras.datasets.*.load_data()) ---

def _keras_npz(path, *, n_train=24, n_test=10, size=12, dtype="uint8"):
    """A tiny MNIST: what ``np.savez(path, x_train=..., ...)`` writes of ``load_data()``."""
    rng = np.random.default_rng(1)
    arrays = {"x_train": rng.integers(0, 256, (n_train, size, size)).astype(dtype),
              "y_train": np.arange(n_train) % 3,
              "x_test": rng.integers(0, 256, (n_test, size, size)).astype(dtype),
              "y_test": np.arange(n_test) % 3}
    np.savez(path, **arrays)
    return arrays


def _build_arrays(path, **data):
    from tfaccel.config.recipe import DataConfig
    from tfaccel.data.from_recipe import build_datasets

    config = DataConfig(source="arrays", path=str(path), cache=None, **data)
    return build_datasets(config, global_batch_size=4, num_replicas=1, seed=0,
                          deterministic=True)


def test_keras_layout_validates_on_exactly_the_test_arrays_with_a_channel_axis(tmp_path):
    arrays = _keras_npz(tmp_path / "mnist.npz")
    train, val, info = _build_arrays(tmp_path / "mnist.npz")  # validation_split_name: test
    assert info.input_shape == (12, 12, 1)  # (N, H, W) uint8 got its channel axis
    assert info.train_examples == 24 and info.validation_examples == 10
    vx, vy = _stacked(val)
    # The pixel rule: float32 values 0-255, unscaled (registered models rescale themselves),
    # as image folders and TFDS deliver them.
    assert vx.dtype == np.float32 and vx.shape == (10, 12, 12, 1)
    np.testing.assert_array_equal(vx, arrays["x_test"][..., None].astype("float32"))
    np.testing.assert_array_equal(vy, arrays["y_test"])
    tx, _ = _stacked(train)
    assert tx.shape == (24, 12, 12, 1)


def test_train_split_names_the_arrays_trained_on(tmp_path):
    _keras_npz(tmp_path / "d.npz")
    _, val, info = _build_arrays(tmp_path / "d.npz", train_split="test",
                                 validation_split_name=None)
    assert info.train_examples == 10 and val is None


def test_validation_fraction_holds_out_of_the_train_arrays_as_for_tfds(tmp_path):
    _keras_npz(tmp_path / "d.npz")
    _, val, info = _build_arrays(tmp_path / "d.npz", validation_fraction=0.25)
    assert info.train_examples == 18 and info.validation_examples == 6
    assert len(_stacked(val)[0]) == 6


def test_integer_pixels_of_any_integer_dtype_arrive_as_float_0_to_255(tmp_path):
    arrays = _keras_npz(tmp_path / "d.npz", dtype="int64")
    _, val, info = _build_arrays(tmp_path / "d.npz")
    vx, _ = _stacked(val)
    assert info.input_shape == (12, 12, 1) and vx.dtype == np.float32
    np.testing.assert_array_equal(vx, arrays["x_test"][..., None].astype("float32"))


def test_x_and_y_without_a_test_split_say_there_is_no_validation(tmp_path, capsys):
    x, y = _features(12)
    np.savez(tmp_path / "d.npz", x=x, y=y)
    _, val, info = _build_arrays(tmp_path / "d.npz")  # validation_split_name left at test
    assert val is None and info.validation_examples is None
    out = capsys.readouterr().out
    assert "no validation" in out and "x_test" in out and "data.validation_fraction" in out
    assert "data.validation_split_name: null" in out
    _build_arrays(tmp_path / "d.npz", validation_split_name=None)  # asked for none: no note
    assert "no validation" not in capsys.readouterr().out


def test_a_split_the_file_does_not_hold_is_named_with_what_it_holds(tmp_path):
    _keras_npz(tmp_path / "d.npz")
    with pytest.raises(DataError) as raised:
        _build_arrays(tmp_path / "d.npz", validation_split_name="val")
    message = str(raised.value)
    assert "data.validation_split_name 'val'" in message and "x_val and y_val" in message
    assert "train, test" in message


@pytest.mark.parametrize("names, unexpected", [
    (("images", "labels"), "['images', 'labels']"),
    (("x_train", "y_train", "x_tset", "y_test"), "['x_tset', 'y_test']"),
    (("x", "y", "x_train", "y_train"), "both"),
    (("x_train", "y_train", "x_test"), "without their x or y: ['x_test']"),
    (("x",), "without their x or y: ['x']"),
])
def test_arrays_of_other_names_are_named_with_the_layouts_expected(tmp_path, names,
                                                                   unexpected):
    np.savez(tmp_path / "d.npz", **{name: np.zeros((4, 2)) for name in names})
    with pytest.raises(DataError) as raised:
        _build_arrays(tmp_path / "d.npz")
    message = str(raised.value)
    assert unexpected in message, message
    assert "x and y" in message and "x_train, y_train, x_test, y_test" in message


def _recipe(tmp_path, data: str) -> str:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        f"data: {{source: arrays, path: {tmp_path / 'mnist.npz'}, cache: null{data}}}\n"
        "model: {name: small_cnn, params: {filters: [4], dense_units: 8}}\n"
        "training: {epochs: 1, global_batch_size: 8, checkpoints: false}\n"
        "runtime: {verbose: 0, tensorboard: false}\n")
    return str(recipe)


def test_a_keras_npz_recipe_trains_and_validates_on_the_test_arrays(tmp_path):
    import json

    _keras_npz(tmp_path / "mnist.npz")
    result = CliRunner().invoke(main, ["train", _recipe(tmp_path, ""), "--run-dir",
                                       str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["dataset"]["train_examples"] == 24
    assert summary["dataset"]["validation_examples"] == 10
    assert summary["dataset"]["input_shape"] == [12, 12, 1]
    assert "val_accuracy" in summary["final_metrics"]


@pytest.mark.parametrize("where", ["file", "--set"])
def test_a_fraction_given_to_validation_split_name_points_to_validation_fraction(tmp_path,
                                                                                where):
    _keras_npz(tmp_path / "mnist.npz")
    args = ["train", _recipe(tmp_path, ", validation_split_name: 0.1" if where == "file"
                             else "")]
    if where == "--set":
        args += ["--set", "data.validation_split_name=0.1"]
    result = CliRunner().invoke(main, args + ["--run-dir", str(tmp_path / "run")])
    assert result.exit_code == 2, result.output
    assert ("data.validation_split_name names a split (e.g. test); for a held-out fraction "
            "use data.validation_fraction: 0.1") in " ".join(result.output.split())
    assert "Traceback" not in result.output



def test_float_grey_images_without_a_channel_axis_are_told_the_fix(tmp_path):
    # Float (N, H, W) may be sequences (N, timesteps, channels): left as they are, so an
    # image model says what to do instead of only "got (12, 12)".
    arrays = _keras_npz(tmp_path / "mnist.npz")
    np.savez(tmp_path / "mnist.npz", **{k: (v / 255.0).astype("float32") if k[0] == "x" else v
                                        for k, v in arrays.items()})
    result = CliRunner().invoke(main, ["train", _recipe(tmp_path, ""), "--run-dir",
                                       str(tmp_path / "run")])
    assert result.exit_code == 2, result.output
    output = " ".join(result.output.split())
    assert "got (12, 12): grey-scale images need a channel axis, (12, 12, 1)" in output
    assert "x[..., None]" in output and "Traceback" not in output


# --------------------------------------------------------------------------- labels and tasks
# data.source arrays reads its labels through THE label rule (tfaccel.reading.labels).


def _build_npz(tmp_path, *, task="auto", num_classes=None, **arrays):
    from tfaccel.config.recipe import DataConfig
    from tfaccel.data.from_recipe import build_datasets

    np.savez(tmp_path / "d.npz", **arrays)
    config = DataConfig(source="arrays", path=str(tmp_path / "d.npz"), cache=None, task=task,
                        num_classes=num_classes, shuffle_buffer=0)
    return build_datasets(config, global_batch_size=64, num_replicas=1, seed=0,
                          deterministic=True)


def _targets(dataset):
    return np.concatenate([y.numpy() for _, y in dataset])


def test_labels_1_to_k_are_k_classes_not_k_plus_1(tmp_path):
    # Was: K + 1 classes, class 0 empty, silently.
    x = np.zeros((12, 2), np.float32)
    y = np.arange(12) % 3 + 1
    train, val, info = _build_npz(tmp_path, x_train=x, y_train=y, x_test=x[:6], y_test=y[:6])
    assert (info.task, info.num_classes, info.num_outputs) == ("classification", 3, 3)
    assert info.class_names == ["1", "2", "3"]
    np.testing.assert_array_equal(_targets(train), y - 1)
    np.testing.assert_array_equal(_targets(val), y[:6] - 1)  # the training plan's ids


def test_string_labels_are_classes_in_sorted_order(tmp_path):
    x = np.zeros((6, 2), np.float32)
    y = np.array(["cat", "dog", "bird", "dog", "cat", "bird"])
    train, _, info = _build_npz(tmp_path, x=x, y=y)
    assert info.class_names == ["bird", "cat", "dog"] and info.num_classes == 3
    np.testing.assert_array_equal(_targets(train), [1, 2, 0, 2, 1, 0])


def test_a_held_out_label_the_training_labels_lack_is_named(tmp_path):
    x = np.zeros((6, 2), np.float32)
    with pytest.raises(DataError, match=r"label 9 is not one of the classes seen in the "
                                        r"training split \(1, 2\)"):
        _build_npz(tmp_path, x_train=x, y_train=np.array([1, 2] * 3), x_test=x[:2],
                   y_test=np.array([1, 9]))


def test_float_targets_are_regression_not_76_classes(tmp_path):
    # Was: 76 "classes" at accuracy 0.004, silently.
    rng = np.random.default_rng(0)
    x = rng.normal(size=(80, 3)).astype(np.float32)
    y = (x @ np.array([1.0, -2.0, 0.5]) + 0.25).astype(np.float64)
    train, _, info = _build_npz(tmp_path, x=x, y=y)
    assert (info.task, info.num_outputs, info.num_classes) == ("regression", 1, None)
    targets = _targets(train)
    assert targets.shape == (80, 1) and targets.dtype == np.float32  # the head's shape
    np.testing.assert_allclose(targets[:, 0], y, rtol=1e-6)


def test_float_targets_under_classification_are_refused_naming_the_file_and_key(tmp_path):
    x = np.zeros((4, 2), np.float32)
    with pytest.raises(DataError) as error:
        _build_npz(tmp_path, task="classification", x=x, y=np.array([0.5, 1.25, 2.0, 3.5]))
    message = str(error.value)
    assert f"Arrays file {str(tmp_path / 'd.npz')!r}: y holds float values" in message
    assert "data.task: regression" in message


def test_two_float_targets_are_a_regression_of_width_2(tmp_path):
    x = np.zeros((10, 2), np.float32)
    y = np.linspace(0, 1, 20).reshape(10, 2)
    train, _, info = _build_npz(tmp_path, x=x, y=y)
    assert (info.task, info.num_outputs) == ("regression", 2)
    assert _targets(train).shape == (10, 2)


def test_rows_of_0_1_are_multi_label(tmp_path):
    x = np.zeros((8, 2), np.float32)
    y = np.array([[1, 0, 1], [0, 1, 0]] * 4)
    train, _, info = _build_npz(tmp_path, x=x, y=y)
    assert (info.task, info.num_outputs, info.class_names) == (
        "multi_label", 3, ["label_0", "label_1", "label_2"])
    targets = _targets(train)
    assert targets.dtype == np.float32
    np.testing.assert_array_equal(targets, y)


def test_minus_1_and_1_declared_binary_are_one_float_target_0_or_1(tmp_path):
    x = np.zeros((6, 2), np.float32)
    y = np.array([-1, 1, 1, -1, 1, -1])
    train, _, info = _build_npz(tmp_path, task="binary", x=x, y=y)
    assert (info.task, info.num_outputs, info.num_classes, info.class_names) == (
        "binary", 1, 2, ["-1", "1"])
    targets = _targets(train)
    assert targets.shape == (6, 1) and targets.dtype == np.float32
    np.testing.assert_array_equal(targets[:, 0], (y + 1) // 2)


def test_one_value_as_a_regression_target_is_not_a_one_class_error(tmp_path):
    # refuse_one_class is for classifiers: a constant regression target trains.
    x = np.zeros((4, 2), np.float32)
    _, _, info = _build_npz(tmp_path, task="regression", x=x, y=np.ones(4))
    assert info.task == "regression"


def test_task_applies_the_label_rule_as_the_recipe_path_does():
    x = np.arange(12, dtype="float32").reshape(6, 2)
    # Labels 1..3: three classes with ids 0..2 (fit would need 4 outputs, one never used).
    ds = from_arrays(x, np.array([1, 2, 3, 1, 2, 3]), 6, shuffle_buffer=0,
                     task="auto")
    assert next(iter(ds))[1].numpy().tolist() == [0, 1, 2, 0, 1, 2]
    assert ds.class_names == ["1", "2", "3"] and ds.task == "classification"
    # Strings: ids by sorted name; the held-out part is encoded with the training plan.
    train, val = from_arrays(x, np.array(["b", "a", "b", "a", "b", "a"]), 6,
                             shuffle_buffer=0, task="auto", validation_split=0.5)
    assert next(iter(train))[1].numpy().tolist() == [1, 0, 1]
    assert next(iter(val))[1].numpy().tolist() == [0, 1, 0]
    assert val.class_names == ["a", "b"]
    with pytest.raises(DataError, match="holds float values .* not class labels"):
        from_arrays(x, np.linspace(0, 1, 6), 6, task="classification")
    # Without task, the labels are fit's: as given.
    plain = from_arrays(x, np.array([1, 2, 3, 1, 2, 3]), 6, shuffle_buffer=0)
    assert next(iter(plain))[1].numpy().tolist() == [1, 2, 3, 1, 2, 3]
