"""The image, text and audio folder loaders take the same Keras call: length, verbose, format."""

import dataclasses
import pathlib
import warnings

import audio_helpers
import keras
import numpy as np
import pytest
import tensorflow as tf
import yaml
from click.testing import CliRunner

from tfaccel import data
from tfaccel.cli.main import main
from tfaccel.config.recipe import DataConfig
from tfaccel.data.from_recipe import build_datasets
from tfaccel.errors import DataError, UserInputError


def _images(root):
    for label, name in enumerate(("cat", "dog")):
        for i in range(7 + label):  # 15 files: batches of 4 leave a partial last one
            array = np.random.RandomState(10 * label + i).randint(0, 256, (12, 10, 3),
                                                                   np.uint8)
            path = root / name / f"{i}.png"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(tf.io.encode_png(array).numpy())


def _texts(root):
    for label, name in enumerate(("neg", "pos")):
        for i in range(7 + label):
            path = root / name / f"{i}.txt"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"{name} review number {i}" + " word" * i)


def _waves(root):
    for label, name in enumerate(("no", "yes")):
        for i in range(7 + label):
            audio_helpers.write(root / name / f"{i}.wav", audio_helpers.wav(
                200 + 10 * i, channels=1, seed=10 * label + i))


# loader, Keras' function, folder maker, a small model's layers after the input, and the
# arguments both take.
LOADERS = {
    "image": (data.from_image_folder, keras.utils.image_dataset_from_directory, _images,
              dict(image_size=(6, 5))),
    "text": (data.from_text_folder, keras.utils.text_dataset_from_directory, _texts, {}),
    "audio": (data.from_audio_folder, keras.utils.audio_dataset_from_directory, _waves,
              dict(output_sequence_length=64)),
}


@pytest.fixture(params=sorted(LOADERS))
def loader(request, tmp_path):
    ours, theirs, make, kwargs = LOADERS[request.param]
    make(tmp_path / request.param)
    return request.param, str(tmp_path / request.param), ours, theirs, kwargs


@pytest.mark.parametrize("split, batches", [
    ({}, 4), (dict(validation_split=0.2, subset="training"), 3),  # 15 - int(0.2 * 15) = 12
    (dict(validation_split=0.2, subset="validation"), 1), (dict(shuffle=False), 4)])
def test_the_length_is_known_and_equals_keras(loader, split, batches):
    _, path, ours, theirs, kwargs = loader
    kw = dict(batch_size=4, seed=3, verbose=False, **kwargs, **split)
    mine, keras_ds = ours(path, **kw), theirs(path, **kw)
    assert len(mine) == len(keras_ds) == len(list(mine)) == batches


def test_the_length_of_an_unbatched_subset_pair_is_known(loader):
    _, path, ours, _, kwargs = loader
    train, val = ours(path, batch_size=None, seed=1, verbose=False, validation_split=0.2,
                      subset="both", **kwargs)
    assert (len(train), len(val)) == (12, 3) == (len(list(train)), len(list(val)))


def _model(kind: str, spec):
    if kind == "text":  # a string in, its length as the one feature
        inputs = keras.Input(shape=(), dtype="string")
        x = keras.layers.Lambda(
            lambda t: tf.cast(tf.strings.length(t), tf.float32)[:, None],
            output_shape=(1,))(inputs)
    else:
        inputs = keras.Input(shape=spec.shape[1:].as_list()[:-1] + [spec.shape[-1] or 1])
        x = keras.layers.Flatten()(inputs)
    model = keras.Model(inputs, keras.layers.Dense(2)(x))
    model.compile(optimizer="sgd",
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def test_fit_without_steps_per_epoch_runs_every_epoch_without_running_out(loader):
    kind, path, ours, _, kwargs = loader
    ds = ours(path, batch_size=4, seed=0, verbose=False, **kwargs)
    model = _model(kind, ds.element_spec[0])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        history = model.fit(ds, epochs=2, verbose=0)
    assert len(history.history["loss"]) == 2
    assert not [w for w in caught if "ran out of data" in str(w.message)]


def test_verbose_prints_keras_line_only_when_true(loader, capsys):
    _, path, ours, _, kwargs = loader
    ours(path, batch_size=4, verbose=True, **kwargs)
    assert capsys.readouterr().out == "tfaccel: Found 15 files belonging to 2 classes.\n"
    ours(path, batch_size=4, verbose=False, **kwargs)
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("split", [
    {}, dict(validation_split=0.2, subset="training"),
    dict(validation_split=0.2, subset="validation"), dict(validation_split=0.2, subset="both")])
def test_verbose_prints_the_lines_keras_prints_for_each_subset(loader, split, capsys):
    # Keras prints "Found ..." when verbose, then "Using N files for training." and/or
    # "... for validation." for the subsets it returns ("both": the two).
    _, path, ours, theirs, kwargs = loader
    theirs(path, batch_size=4, seed=3, verbose=True, **kwargs, **split)
    keras_lines = capsys.readouterr().out.splitlines()
    ours(path, batch_size=4, seed=3, verbose=True, **kwargs, **split)
    mine = [line.removeprefix("tfaccel: ") for line in capsys.readouterr().out.splitlines()]
    assert mine == keras_lines
    assert len(mine) == {None: 1, "training": 2, "validation": 2, "both": 3}[split.get("subset")]
    if split.get("subset") == "both":
        assert mine[1:] == ["Using 12 files for training.", "Using 3 files for validation."]
    ours(path, batch_size=4, seed=3, verbose=False, **kwargs, **split)
    assert capsys.readouterr().out == ""


def test_format_tf_is_taken_and_grain_refused_in_one_sentence(loader):
    _, path, ours, _, kwargs = loader
    assert len(ours(path, batch_size=4, format="tf", verbose=False, **kwargs)) == 4
    with pytest.raises(UserInputError) as raised:
        ours(path, batch_size=4, format="grain", verbose=False, **kwargs)
    assert str(raised.value) == (
        "format='grain' is not taken: tfaccel's folder loaders return a tf.data.Dataset "
        "(Keras' format=\"tf\"), not a Grain dataset.")


def _contents(dataset) -> list:
    """Each example's bytes (an image's pixels, a text, a waveform's first 200 samples)."""
    return [(x.numpy()[:200] if x.dtype == tf.float32 and x.shape.rank == 2 else
             x.numpy()).tobytes() if x.dtype != tf.string else x.numpy()
            for x, _ in dataset.unbatch()]


@pytest.mark.parametrize("source, make, extra", [
    ("image_folder", _images, dict(image_size=[6, 5])), ("text_folder", _texts, {}),
    ("audio_folder", _waves, {})])
def test_a_recipe_holds_out_keras_count_in_every_class_folder(tmp_path, source, make, extra):
    # 13 files at 0.2: int(2.6) = 2 held out by each loader (the image folder held out
    # round(2.6) = 3 while text and audio held out 2), and the two splits never share a
    # file (text and audio recipes held out the unpermuted tail while training on the head
    # of the permuted listing: both held-out files were trained on).
    make(tmp_path / "d")
    for extra_file in sorted((tmp_path / "d").glob("*/*"))[-2:]:
        extra_file.unlink()  # 15 -> 13 files
    config = dataclasses.replace(DataConfig(), source=source, path=str(tmp_path / "d"),
                                 validation_fraction=0.2, validation_split_name=None, cache=None,
                                 **extra)
    train, validation, _ = build_datasets(config, global_batch_size=4, num_replicas=1,
                                          seed=7, deterministic=True, raw=True)
    train, validation = _contents(train), _contents(validation)
    assert (len(train), len(validation)) == (11, 2)
    assert len(set(train)) == 11 and not set(train) & set(validation)


@pytest.mark.parametrize("fraction", ["validation_split", "validation_fraction"])
def test_a_library_call_holds_out_keras_count_in_every_class_folder(loader, fraction):
    # The library side of the recipe test above: 13 files at 0.2, examples counted as
    # delivered. validation_fraction is the image loader's own name (text and audio take
    # Keras' validation_split only).
    name, folder, ours, _, kwargs = loader
    if fraction == "validation_fraction" and name != "image":
        pytest.skip("text and audio folders take Keras' validation_split only")
    for extra_file in sorted(pathlib.Path(folder).glob("*/*"))[-2:]:
        extra_file.unlink()  # 15 -> 13 files
    split = {fraction: 0.2, "seed": 7, "batch_size": 4, "verbose": False, **kwargs}
    train = _contents(ours(folder, subset="training", **split))
    validation = _contents(ours(folder, subset="validation", **split))
    assert (len(train), len(validation)) == (11, 2)
    assert len(set(train)) == 11 and not set(train) & set(validation)


@pytest.mark.parametrize("source, make, extra", [
    ("image_folder", _images, dict(image_size=[6, 5])), ("text_folder", _texts, {}),
    ("audio_folder", _waves, {})])
def test_one_class_names_data_path_and_the_class_sub_folders(tmp_path, source, make, extra):
    make(tmp_path / "d")
    for file in sorted((tmp_path / "d").glob("*/*")):
        if file.parent.name in ("dog", "pos", "yes"):
            file.unlink()
    for folder in ("dog", "pos", "yes"):
        if (tmp_path / "d" / folder).exists():
            (tmp_path / "d" / folder).rmdir()
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump({
        "data": {"source": source, "path": str(tmp_path / "d"), "validation_fraction": 0.0,
                 "cache": None, **extra},
        "model": {"name": "small_cnn"},
        "training": {"epochs": 1, "global_batch_size": 4},
        "runtime": {"verbose": 0, "tensorboard": False, "runs_dir": str(tmp_path / "runs")}}))
    message = (f"data.path '{tmp_path / 'd'}' (data.source {source}) holds 1 class in its "
               "class sub-folders: a classifier needs at least 2 classes. Point data.path "
               "at data with at least 2 classes.")
    result = CliRunner().invoke(main, ["train", str(recipe)])
    assert result.exit_code == 2, result.output
    assert f"Error: {message}" in result.output and "Traceback" not in result.output
    config = dataclasses.replace(DataConfig(), source=source, path=str(tmp_path / "d"),
                                 validation_fraction=0.0, validation_split_name=None, cache=None,
                                 **extra)
    with pytest.raises(DataError) as raised:  # the library call of a recipe's data section
        build_datasets(config, global_batch_size=4, num_replicas=1, seed=0,
                       deterministic=True)
    assert str(raised.value) == message


@pytest.mark.parametrize("pipeline_id", [0, 1])
def test_the_length_is_the_true_count_of_a_worker_s_batches(loader, pipeline_id):
    # 15 files over 2 input pipelines (8 and 7), per-replica batches of 2 (global 4 over 2
    # replicas), the last partial batch dropped under a strategy: 4 and 3 batches.
    _, path, ours, _, kwargs = loader
    context = tf.distribute.InputContext(num_input_pipelines=2,
                                         input_pipeline_id=pipeline_id,
                                         num_replicas_in_sync=2)
    ds = ours(path, batch_size=4, seed=0, verbose=False, input_context=context, **kwargs)
    assert len(ds) == len(list(ds)) == (4, 3)[pipeline_id]
    kept = ours(path, batch_size=4, seed=0, verbose=False, input_context=context,
                drop_remainder=False, **kwargs)
    assert len(kept) == len(list(kept)) == 4


def test_a_loaders_own_defaults_hold_whether_the_tails_default_is_passed_or_not(loader):
    # Paths in memory shard by element (DATA) unless the caller chose a policy; a caller
    # passing the tail's default (None) by name, or a recipe's TailOptions that leave it
    # unset, choose nothing (`TailOptions.chosen`). Checked through the front door and the
    # typed function under it, which a recipe's source calls.
    from tfaccel.data.sources import audio_folder, image_folder, text_folder
    from tfaccel.data.tail import TailOptions

    name, path, ours, _, kwargs = loader
    internal = {"image": image_folder.image_folder_dataset,
                "text": text_folder.text_folder_dataset,
                "audio": audio_folder.audio_folder_dataset}[name]
    policy = tf.data.experimental.AutoShardPolicy

    def shard_policy(dataset):
        return policy(dataset.options().experimental_distribute.auto_shard_policy)

    kw = dict(batch_size=4, verbose=False, **kwargs)
    assert shard_policy(ours(path, **kw)) == policy.DATA
    assert shard_policy(ours(path, shard_policy=None, **kw)) == policy.DATA
    assert shard_policy(ours(path, shard_policy="off", **kw)) == policy.OFF
    assert shard_policy(internal(path, options=TailOptions(seed=1), **kw)) == policy.DATA
    assert shard_policy(internal(path, options=TailOptions(shard_policy="file"),
                                 **kw)) == policy.FILE
