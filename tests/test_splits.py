"""The held-out counts: tfaccel's one seeded rule, and Keras' own rules where a loader is its drop-in."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from tfaccel.config.recipe import DataConfig
from tfaccel.data import order, splits
from tfaccel.data.from_recipe import build_datasets
from tfaccel.errors import DataError


def test_split_indices_is_disjoint_complete_seeded_and_exact():
    train, val = splits.split_indices(40, 0.125, seed=3)
    assert len(val) == 5 and len(train) == 35
    assert sorted(np.concatenate([train, val]).tolist()) == list(range(40))
    again = splits.split_indices(40, 0.125, seed=3)
    assert val.tolist() == again[1].tolist()
    assert val.tolist() != splits.split_indices(40, 0.125, seed=4)[1].tolist()


@pytest.mark.parametrize("n, fraction, message", [
    (1, 0.5, "leaves nothing for training"),
    (3, 0.9, "leaves nothing for training"),
])
def test_split_that_leaves_a_side_empty_is_a_data_error(n, fraction, message):
    with pytest.raises(DataError, match=message):
        splits.split_indices(n, fraction, seed=0)
    assert splits.held_out_count(10, 0.01) == 1  # a fraction > 0 always holds one out


# --- the rule per family: tfaccel's round(f*n), Keras' int(f*n) in Keras' drop-ins ----------


def test_the_two_rules_differ_where_the_issue_met_them():
    # 13 files at 0.2: tfaccel's rule holds out 3, Keras' loaders 2 (issue #28).
    assert splits.held_out_count(13, 0.2) == 3
    assert splits.keras_held_out_count(13, 0.2) == 2
    assert splits.keras_held_out_count(13, 0.0) == 0


@pytest.mark.parametrize("n", [2, 3, 7, 10, 13, 29, 100, 1001])
@pytest.mark.parametrize("fraction", [0.1, 0.2, 0.25, 0.3, 0.5, 0.7])
def test_keras_count_is_keras_own_split(n, fraction):
    # The judge: Keras' own get_training_or_validation_split on n samples.
    from keras.src.utils import dataset_utils

    samples = list(range(n))
    expected = int(fraction * n)
    if not 0 < expected < n:
        with pytest.raises(DataError, match=f"validation_split={fraction} of {n} files "
                                            f"holds out {expected}, leaving no"):
            splits.keras_held_out_count(n, fraction)
        return
    val, _ = dataset_utils.get_training_or_validation_split(samples, None, fraction,
                                                             "validation")
    assert splits.keras_held_out_count(n, fraction) == len(val)


@pytest.mark.parametrize("n", [3, 10, 13, 29, 1001])
@pytest.mark.parametrize("fraction", [0.1, 0.2, 0.3, 0.7])
def test_fit_split_is_keras_fit_split(n, fraction):
    from keras.src.trainers.data_adapters import array_slicing

    split_at = splits.fit_split_at(n, fraction)
    if split_at in (0, n):  # Keras refuses it; from_arrays refuses it in Keras' words
        with pytest.raises(ValueError, match="not sufficient to split"):
            array_slicing.train_validation_split((np.arange(n),), fraction)
        return
    (train_x,), _ = array_slicing.train_validation_split((np.arange(n),), fraction)
    assert split_at == len(train_x)



def _build(config):
    return build_datasets(config, global_batch_size=4, num_replicas=1, seed=7,
                          deterministic=True)


def test_image_folder_and_tfrecords_hold_out_what_the_rule_says(tmp_path):
    for i in range(10):
        folder = tmp_path / "img" / f"c{i % 2}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{i:02d}.png").write_bytes(
            tf.io.encode_png(np.full((2, 2, 3), i, np.uint8)).numpy())
    config = dataclasses.replace(DataConfig(), source="image_folder",
                                 path=str(tmp_path / "img"), image_size=[2, 2],
                                 validation_fraction=0.3, validation_split=None, cache=None)
    _, val, _ = _build(config)
    held = sorted(int(v) for x, _ in val for v in x.numpy()[:, 0, 0, 0])
    files = sorted(range(10), key=lambda i: (i % 2, i))  # c0/..., then c1/...
    # Class folders count Keras' way, int(0.3 * 10) = 3 (class_folder.keras_held_out_count),
    # the last of the seeded permutation (data.order).
    expected = sorted(files[j] for j in order.permutation(10, 7)[10 - 3:])
    assert held == expected

    for f in range(5):
        with tf.io.TFRecordWriter(str(tmp_path / f"p{f}.tfrecord")) as writer:
            writer.write(tf.train.Example(features=tf.train.Features(feature={
                "x": tf.train.Feature(float_list=tf.train.FloatList(value=[f])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[f % 2])),
            })).SerializeToString())
    records = dataclasses.replace(DataConfig(), source="tfrecords",
                                  path=str(tmp_path / "*.tfrecord"), image_key="x",
                                  validation_fraction=0.4, validation_split=None,
                                  features={"x": {"dtype": "float32"},
                                            "label": {"dtype": "int64"}})
    _, val, _ = _build(records)
    held = sorted(int(v) for x, _ in val for v in x.numpy().ravel())
    assert held == sorted(splits.split_indices(5, 0.4, 7)[1].tolist())  # seeded, by file


def test_tfds_holds_out_exactly_the_rule_s_count(shapes_data_dir):
    config = dataclasses.replace(DataConfig(), data_dir=shapes_data_dir,
                                 validation_fraction=0.125, cache=None)
    _, _, info = _build(config)
    # 12,000 * 0.125 = 1,500 exactly (whole-percent slicing held out 13%: 1,560).
    assert info.validation_examples == 1500 and info.train_examples == 10500
