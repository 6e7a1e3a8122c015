"""`tfaccel train` on one file split by rows, and on a validation file (data.validation_path), per file source."""

import json

import pytest
import tensorflow as tf
from guard_helpers import assert_refused, lines, run, table

FEATURES = {"x": {"dtype": "float32", "shape": [1]}, "label": {"dtype": "int64"}}


def _records(path, labels):
    with tf.io.TFRecordWriter(str(path)) as writer:
        for i, label in enumerate(labels):
            writer.write(tf.train.Example(features=tf.train.Features(feature={
                "x": tf.train.Feature(float_list=tf.train.FloatList(value=[i % 7])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
            })).SerializeToString())


def _write(tmp_path, source, n, *, name="one"):
    """One file of `n` examples of `source`; returns its path and the source's own keys."""
    if source == "csv":
        path = tmp_path / f"{name}.csv"
        path.write_text(table(n))
        return path, {"label_key": "label"}
    if source == "text_lines":
        path = tmp_path / f"{name}.tsv"
        path.write_text(lines(n))
        return path, {}
    path = tmp_path / f"{name}.tfrecord"
    _records(path, [1 + i % 3 for i in range(n)])  # labels 1..3: three classes
    return path, {"features": FEATURES, "image_key": "x"}


def _dataset(tmp_path):
    return json.loads((tmp_path / "run" / "summary.json").read_text())["dataset"]


@pytest.mark.parametrize("source", ["csv", "tfrecords", "text_lines"])
def test_one_file_trains_with_a_fraction_of_its_rows_held_out(tmp_path, source):
    path, keys = _write(tmp_path, source, 50)
    result = run(tmp_path, source=source, path=str(path), validation_fraction=0.2, **keys)
    assert result.exit_code == 0, result.output
    assert "val_accuracy" in result.output
    dataset = _dataset(tmp_path)
    assert (dataset["train_examples"], dataset["validation_examples"]) == (40, 10)
    if source == "tfrecords":  # labels 1..3: three classes, not four
        assert (dataset["num_classes"], dataset["num_outputs"]) == (3, 3)
    # Too few rows for the fraction: exit 2, the key and the count named, no traceback.
    path, keys = _write(tmp_path, source, 1, name="tiny")
    (tmp_path / "again").mkdir()
    result = run(tmp_path / "again", source=source, path=str(path), validation_fraction=0.2, **keys)
    assert_refused(result, "data.validation_fraction=0.2 of 1 ", "leaves nothing for training")


@pytest.mark.parametrize("source", ["csv", "tfrecords"])
def test_validation_path_validates_on_its_file_whole(tmp_path, source):
    path, keys = _write(tmp_path, source, 30)
    val, _ = _write(tmp_path, source, 9, name="val")
    result = run(tmp_path, source=source, path=str(path), validation_path=str(val), **keys)
    assert result.exit_code == 0, result.output
    dataset = _dataset(tmp_path)
    assert (dataset["train_examples"], dataset["validation_examples"]) == (30, 9)
    (tmp_path / "again").mkdir()
    result = run(tmp_path / "again", source=source, path=str(path), validation_path=str(val),
                 validation_fraction=0.2, **keys)
    assert_refused(result, "data.validation_path and data.validation_fraction both name the "
                           "validation split: set one of them.")
