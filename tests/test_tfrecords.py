"""Tests of from_tfrecords: feature specs, compression, interleave, truncated and missing files."""

import numpy as np
import pytest
import tensorflow as tf

from tfaccel import data
from tfaccel.data.sources.tfrecords import check_record_file
from tfaccel.errors import DataError, UserInputError

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


def _example(i):
    image = tf.io.encode_png(np.full((5, 5, 3), i, np.uint8)).numpy()
    return tf.train.Example(features=tf.train.Features(feature={
        "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[image])),
        "x": tf.train.Feature(float_list=tf.train.FloatList(value=[i, -i])),
        "tokens": tf.train.Feature(int64_list=tf.train.Int64List(value=list(range(i % 3)))),
        "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i])),
    })).SerializeToString()


def _write_files(tmp_path, *, files=3, per_file=4, compression=None):
    paths = []
    for f in range(files):
        path = str(tmp_path / f"part-{f}.tfrecord")
        with tf.io.TFRecordWriter(path, options=compression) as w:
            for k in range(per_file):
                w.write(_example(f * per_file + k))
        paths.append(path)
    return paths


YAML_SPEC = {"image": {"dtype": "string", "decode": "image"},
             "x": {"dtype": "float32", "shape": [2]},
             "tokens": {"dtype": "int64", "kind": "var"},
             "label": {"dtype": "int64"}}


@pytest.mark.parametrize("compression", [None, "GZIP", "ZLIB"])
def test_reads_all_records_with_yaml_spec(tmp_path, compression):
    _write_files(tmp_path, compression=compression)
    ds = data.from_tfrecords(str(tmp_path / "part-*.tfrecord"), features=YAML_SPEC,
                             compression=compression, batch_size=5, shuffle_buffer=12, seed=0,
                             image_size=(5, 5))
    assert len(ds.files) == 3
    labels = []
    for features, label in ds:
        assert features["image"].shape[1:] == (5, 5, 3)
        assert features["image"].dtype == tf.float32
        np.testing.assert_allclose(features["image"].numpy()[:, 0, 0, 0], label.numpy())
        np.testing.assert_allclose(features["x"].numpy()[:, 1], -label.numpy())
        assert features["tokens"].row_lengths().numpy().tolist() == (label.numpy() % 3).tolist()
        labels += label.numpy().tolist()
    assert sorted(labels) == list(range(12))


def test_python_spec_and_single_feature_is_a_tensor(tmp_path):
    _write_files(tmp_path, files=1)
    spec = {"x": tf.io.FixedLenFeature([2], tf.float32),
            "label": tf.io.FixedLenFeature([], tf.int64)}
    # deterministic: the default (off, for speed) lets parallel parsing reorder records.
    ds = data.from_tfrecords(str(tmp_path / "*.tfrecord"), features=spec, batch_size=4,
                             deterministic=True)
    x, y = next(iter(ds))
    assert x.shape == (4, 2) and y.numpy().tolist() == [0, 1, 2, 3]


def test_glob_matching_nothing(tmp_path):
    with pytest.raises(DataError, match="matches no file"):
        data.from_tfrecords(str(tmp_path / "none-*.tfrecord"), features=YAML_SPEC,
                            batch_size=2, image_size=(5, 5))


@pytest.mark.parametrize("compression", [None, "GZIP", "ZLIB"])
def test_truncated_file_is_named_before_training(tmp_path, compression):
    paths = _write_files(tmp_path, compression=compression)
    blob = open(paths[1], "rb").read()
    open(paths[1], "wb").write(blob[:-30])
    assert check_record_file(paths[0], compression) == 4
    with pytest.raises(DataError, match="part-1.tfrecord"):
        data.from_tfrecords(str(tmp_path / "*.tfrecord"), features=YAML_SPEC,
                            compression=compression, batch_size=2, image_size=(5, 5))


@pytest.mark.parametrize("spec, message", [
    ({"a": {"dtype": "complex"}}, "dtype"),
    ({"a": {"dtype": "int64", "kind": "sparse"}}, "kind"),
    ({"a": {"dtype": "int64", "colour": 1}}, "unknown key"),
    ({"a": {"dtype": "int64", "decode": "image"}}, "decode: image"),
    ({}, "non-empty"),
])
def test_bad_feature_specs(spec, message):
    with pytest.raises(UserInputError, match=message):
        data.parse_feature_spec(spec)


def test_bad_label_key_and_compression(tmp_path):
    _write_files(tmp_path, files=1)
    with pytest.raises(UserInputError, match="label_key"):
        data.from_tfrecords(str(tmp_path / "*"), features=YAML_SPEC, label_key="y",
                            batch_size=2, image_size=(5, 5))
    with pytest.raises(UserInputError, match="image_size"):
        data.from_tfrecords(str(tmp_path / "*"), features=YAML_SPEC, batch_size=2)
    with pytest.raises(UserInputError, match="compression"):
        data.from_tfrecords(str(tmp_path / "*"), features=YAML_SPEC, compression="BZ2",
                            batch_size=2)


def test_recipe_kind_image_shorthand():
    spec, image_keys = data.parse_feature_spec({"img": {"kind": "image"},
                                                "label": {"dtype": "int64"}})
    assert image_keys == ("img",) and spec["img"].dtype == tf.string


@pytest.mark.parametrize("compression", [None, "GZIP"])
def test_an_unchecked_truncated_file_is_named_when_training_stops_on_it(tmp_path, compression):
    # verify_records false: nothing is read up front, tf.data stops mid-epoch with a
    # DataLossError that names an offset; the run names the file instead (exit 2).
    from guard_helpers import assert_refused, run

    for f in range(2):
        with tf.io.TFRecordWriter(str(tmp_path / f"ids-{f}.tfrecord"),
                                  options=compression) as writer:
            for i in range(40):
                writer.write(tf.train.Example(features=tf.train.Features(feature={
                    "x": tf.train.Feature(float_list=tf.train.FloatList(value=[i, -i])),
                    "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 2]))}))
                    .SerializeToString())
    damaged = tmp_path / "ids-1.tfrecord"
    damaged.write_bytes(damaged.read_bytes()[:-30])
    result = run(tmp_path, source="tfrecords", path=str(tmp_path / "ids-*.tfrecord"),
                 features={"x": {"dtype": "float32", "shape": [2]},
                           "label": {"dtype": "int64"}},
                 image_key="x", label_key="label", num_classes=2, verify_records=False,
                 compression=compression, validation_split_name=None)
    # Met while counting the unknown-size source's one pass, before training.
    assert_refused(result, f"TFRecord file {str(damaged)!r}", "truncated")


# --- a recipe's labels: read by the one label rule (tfaccel.reading.labels), never counted ---


def _recipe_records(tmp_path, labels, *, dtype="int64", name="r", **keys):
    """One TFRecord file of examples x=i with `labels`, and a recipe's data section on it."""
    import dataclasses

    from tfaccel.config.recipe import DataConfig

    path = tmp_path / f"{name}.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as writer:
        for i, label in enumerate(labels):
            if dtype == "int64":
                value = tf.train.Feature(int64_list=tf.train.Int64List(value=[label]))
            elif dtype == "float32":
                value = tf.train.Feature(float_list=tf.train.FloatList(value=[label]))
            else:
                value = tf.train.Feature(bytes_list=tf.train.BytesList(value=[label.encode()]))
            writer.write(tf.train.Example(features=tf.train.Features(feature={
                "x": tf.train.Feature(float_list=tf.train.FloatList(value=[i])),
                "label": value})).SerializeToString())
    return dataclasses.replace(
        DataConfig(), source="tfrecords", path=str(path), image_key="x",
        validation_split_name=None, cache=None, shuffle_buffer=0,
        features={"x": {"dtype": "float32"}, "label": {"dtype": dtype}}, **keys)


def _built(config):
    from tfaccel.data.from_recipe import build_datasets

    return build_datasets(config, global_batch_size=4, num_replicas=1, seed=0,
                          deterministic=True)


def _pairs(dataset):
    return sorted((int(x), y.item() if np.ndim(y) == 0 else tuple(y))
                  for xs, ys in dataset for x, y in zip(xs.numpy(), ys.numpy()))


def test_labels_1_to_k_are_k_classes_not_k_plus_1(tmp_path):
    # The silent case of issue 35: labels 1..3 gave 4 classes (an empty class 0) and
    # trained on the raw values. Now 3 classes named 1, 2, 3, targets 0, 1, 2.
    train, _, info = _built(_recipe_records(tmp_path, [1 + i % 3 for i in range(12)]))
    assert (info.task, info.num_classes, info.num_outputs) == ("classification", 3, 3)
    assert info.class_names == ["1", "2", "3"]
    assert _pairs(train) == [(i, i % 3) for i in range(12)]


def test_text_labels_are_the_sorted_classes(tmp_path):
    labels = ["dog", "cat", "emu", "cat"] * 3
    train, _, info = _built(_recipe_records(tmp_path, labels, dtype="string"))
    assert info.class_names == ["cat", "dog", "emu"] and info.num_classes == 3
    assert _pairs(train) == [(i, ["cat", "dog", "emu"].index(v)) for i, v in enumerate(labels)]


def test_float_targets_are_regression_under_auto_and_refused_as_classes(tmp_path):
    targets = [0.5 * i + 0.25 for i in range(12)]
    train, _, info = _built(_recipe_records(tmp_path, targets, dtype="float32"))
    assert (info.task, info.num_outputs, info.num_classes) == ("regression", 1, None)
    # Regression targets reach the model as (batch, 1) float32, the linear head's shape.
    got = sorted(float(y) for _, ys in train for y in ys.numpy().reshape(-1))
    assert got == pytest.approx(targets)
    with pytest.raises(DataError, match=r"data.label_key 'label' of data.path '.*r.tfrecord' "
                                        r"holds float values \(0.25, 0.75, 1.25, 1.75, ...\), "
                                        "not class labels; data.task classification"):
        _built(_recipe_records(tmp_path, targets, dtype="float32", task="classification"))


def test_a_validation_label_outside_the_training_classes_is_named(tmp_path):
    config = _recipe_records(tmp_path, [0, 1] * 6)
    _recipe_records(tmp_path, [0, 1, 7], name="val")
    import dataclasses

    config = dataclasses.replace(config, validation_path=str(tmp_path / "val.tfrecord"))
    with pytest.raises(DataError, match=r"data.validation_path '.*val.tfrecord' holds label 7, which is not one of "
                                        r"the classes of the training split \(0, 1\)"):
        _built(config)


def test_declared_num_classes_keeps_the_ids(tmp_path):
    # data.num_classes set: labels are ids 0..n-1 as before (a class may be absent here).
    train, _, info = _built(_recipe_records(tmp_path, [1, 2] * 6, num_classes=4))
    assert info.num_classes == 4 and info.class_names == ["0", "1", "2", "3"]
    assert _pairs(train) == [(i, 1 + i % 2) for i in range(12)]
    with pytest.raises(DataError, match="holds label 4 but data.num_classes is 4"):
        _built(_recipe_records(tmp_path, [1, 4] * 6, num_classes=4))


def test_validation_path_holds_out_its_file_whole(tmp_path):
    import dataclasses

    config = _recipe_records(tmp_path, [0, 1] * 10)
    _recipe_records(tmp_path, [1, 0, 1], name="val")
    train, val, info = _built(dataclasses.replace(
        config, validation_path=str(tmp_path / "val.tfrecord")))
    assert (info.train_examples, info.validation_examples) == (20, 3)
    assert _pairs(val) == [(0, 1), (1, 0), (2, 1)]
    assert len(_pairs(train)) == 20
    with pytest.raises(DataError, match="matches both data.path and data.validation_path"):
        _built(dataclasses.replace(config, validation_path=config.path))


def test_a_list_of_labels_per_example_is_multi_label(tmp_path):
    import dataclasses

    from tfaccel.config.recipe import DataConfig

    path = tmp_path / "tags.tfrecord"
    tags = [[3], [5, 9], [], [9, 3, 3]] * 3
    with tf.io.TFRecordWriter(str(path)) as writer:
        for i, listed in enumerate(tags):
            writer.write(tf.train.Example(features=tf.train.Features(feature={
                "x": tf.train.Feature(float_list=tf.train.FloatList(value=[i])),
                "tags": tf.train.Feature(int64_list=tf.train.Int64List(value=listed)),
            })).SerializeToString())
    config = dataclasses.replace(
        DataConfig(), source="tfrecords", path=str(path), image_key="x", label_key="tags",
        validation_split_name=None, cache=None, shuffle_buffer=0,
        features={"x": {"dtype": "float32"}, "tags": {"dtype": "int64", "kind": "var"}})
    train, _, info = _built(config)
    assert (info.task, info.num_outputs, info.class_names) == ("multi_label", 3,
                                                               ["3", "5", "9"])
    # Multi-hot over the sorted distinct labels; an empty list is all 0, a repeat counts once.
    assert [y for _, y in _pairs(train)] == [(1, 0, 0), (0, 1, 1), (0, 0, 0), (1, 0, 1)] * 3
    with pytest.raises(DataError, match="is a list of labels per example .kind: var.: "
                                        "data.task multi_label .or auto., not regression"):
        _built(dataclasses.replace(config, task="regression"))
