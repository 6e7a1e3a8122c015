"""The held-out counts: tfaccel's one seeded rule, and Keras' own rules where a loader is its drop-in."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

import tfaccel.data as tfd
from tfaccel.config.recipe import DataConfig
from tfaccel.data import order, splits
from tfaccel.data.from_recipe import build_datasets
from tfaccel.errors import DataError

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


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
                                 validation_fraction=0.3, validation_split_name=None, cache=None)
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
                                  validation_fraction=0.4, validation_split_name=None,
                                  num_classes=2,  # one label per file: declared
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


# --- one file is split by rows (the file-glob sources), many files by whole files ---------


@pytest.mark.parametrize("files, fraction, whole", [
    (1, 0.2, False), (2, 0.2, False), (2, 0.5, True), (3, 0.2, True), (5, 0.4, True),
    (4, 0.9, False)])
def test_whole_files_only_when_the_fraction_rounds_to_a_file_on_each_side(files, fraction,
                                                                          whole):
    from tfaccel.reading import split_rule

    assert split_rule.whole_files(files, fraction) is whole


def test_held_out_rows_are_exact_disjoint_complete_and_seeded():
    train, val = splits.held_out_rows([30, 0, 20], 0.2, seed=5)
    assert [len(m) for m in train] == [30, 0, 20] == [len(m) for m in val]
    assert sum(int(m.sum()) for m in val) == 10 and sum(int(m.sum()) for m in train) == 40
    for t, v in zip(train, val):
        assert not (t & v).any() and (t | v).all()
    again = splits.held_out_rows([30, 0, 20], 0.2, seed=5)[1]
    other = splits.held_out_rows([30, 0, 20], 0.2, seed=6)[1]
    assert all((a == b).all() for a, b in zip(val, again))
    assert not all((a == b).all() for a, b in zip(val, other))
    with pytest.raises(DataError, match="validation_fraction=0.5 of 1 CSV rows leaves "
                                        "nothing for training"):
        splits.held_out_rows([1], 0.5, seed=0, what="CSV rows")


def _raw(config, *, seed=7, num_replicas=1, input_context=None):
    """The recipe's splits with a table's columns and texts as they are (raw)."""
    return build_datasets(config, global_batch_size=4, num_replicas=num_replicas, seed=seed,
                          deterministic=True, input_context=input_context, raw=True)


def _write_one_file(tmp_path, source, n=50):
    """One file of `n` examples whose only feature x is the example's number 0..n-1."""
    if source == "csv":
        path = tmp_path / "one.csv"
        path.write_text("x,label\n" + "".join(f"{i},{i % 2}\n" for i in range(n)))
        return dataclasses.replace(DataConfig(), source="csv", path=str(path))
    if source == "text_lines":
        path = tmp_path / "one.tsv"
        # Empty lines are not examples: the split counts the others.
        path.write_text("".join(f"{'ab'[i % 2]}\t{i}\n" + ("\n" if i % 7 == 0 else "")
                                for i in range(n)))
        return dataclasses.replace(DataConfig(), source="text_lines", path=str(path))
    path = tmp_path / "one.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as writer:
        for i in range(n):
            writer.write(tf.train.Example(features=tf.train.Features(feature={
                "x": tf.train.Feature(float_list=tf.train.FloatList(value=[i])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 2])),
            })).SerializeToString())
    return dataclasses.replace(DataConfig(), source="tfrecords", path=str(path), image_key="x",
                               features={"x": {"dtype": "float32"},
                                         "label": {"dtype": "int64"}})


def _numbers(dataset):
    """The example numbers (x) of a split's batches, sorted."""
    found = []
    for x, _ in dataset:
        if isinstance(x, dict):
            x = x["x"]
        found.extend(int(v.decode() if isinstance(v, bytes) else v)
                     for v in x.numpy().ravel())
    return sorted(found)


@pytest.mark.parametrize("source", ["csv", "tfrecords", "text_lines"])
def test_one_file_is_split_by_rows_exactly_disjoint_and_seeded(tmp_path, source):
    config = dataclasses.replace(_write_one_file(tmp_path, source), validation_fraction=0.2,
                                 validation_split_name=None, cache=None)
    train, val, info = _raw(config)
    held, trained = _numbers(val), _numbers(train)
    assert (info.train_examples, info.validation_examples) == (40, 10)
    assert (len(trained), len(held)) == (40, 10)
    assert sorted(trained + held) == list(range(50))  # every example once
    # The seeded rule: the last 10 of the seed's permutation of the 50 examples.
    assert held == splits.split_indices(50, 0.2, 7)[1].tolist()
    other = _raw(config, seed=8)[1]
    assert _numbers(other) == splits.split_indices(50, 0.2, 8)[1].tolist() != held


@pytest.mark.parametrize("source", ["csv", "tfrecords"])
def test_a_row_split_is_shared_by_input_pipelines_each_example_once(tmp_path, source):
    from tfaccel.data import files_stage

    config = _write_one_file(tmp_path, source)
    rows = files_stage.RowSplit(0.2, 7, "training")
    training = splits.split_indices(50, 0.2, 7)[0].tolist()
    shares = []
    for i in range(2):  # one file, two input pipelines: each keeps every 2nd kept example
        context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=i,
                                             num_replicas_in_sync=2)
        if source == "csv":
            train = tfd.from_csv(config.path, 4, label_name="label", shuffle_buffer=8,
                                 seed=3, rows=rows, input_context=context)
        else:
            train = tfd.from_tfrecords(config.path, features=config.features, batch_size=4,
                                       input_key="x", shuffle_buffer=8, seed=3, rows=rows,
                                       input_context=context)
        assert train.num_examples == 40
        shares.append(_numbers(train))
    # Examples split first, then shared: the two pipelines read the training rows once.
    assert sorted(shares[0] + shares[1]) == training
    assert len(shares[0]) == len(shares[1]) == 20


def test_two_workers_read_their_own_file_of_a_row_split(tmp_path):
    # 2 files at 0.2 hold out rows (a whole file would be half the data); each of 2
    # workers then reads one file's training rows (the recipe's file shares).
    for f in range(2):
        (tmp_path / f"p{f}.csv").write_text("x,label\n" + "".join(
            f"{f * 25 + i},{i % 2}\n" for i in range(25)))
    config = dataclasses.replace(DataConfig(), source="csv", path=str(tmp_path / "p*.csv"),
                                 validation_fraction=0.2, validation_split_name=None, cache=None,
                                 shuffle_buffer=8)
    train, val, info = _raw(config)
    whole, held = _numbers(train), _numbers(val)
    assert held == splits.split_indices(50, 0.2, 7)[1].tolist() and len(whole) == 40
    shares = []
    for i in range(2):
        context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=i,
                                             num_replicas_in_sync=2)
        shares.append(set(_numbers(_raw(config, num_replicas=2, input_context=context)[0])))
    # Each worker's batches come from its own file's training rows (lock-step: a worker
    # may stop a few rows short of its file, never read another's or a held-out row).
    assert not shares[0] & shares[1]
    assert shares[0] | shares[1] <= set(whole)
    assert {n // 25 for n in shares[0]} != {n // 25 for n in shares[1]}


def test_many_files_are_still_held_out_whole(tmp_path):
    for f in range(5):
        (tmp_path / f"p{f}.csv").write_text("x,label\n" + "".join(
            f"{f * 10 + i},{i % 2}\n" for i in range(10)))
    config = dataclasses.replace(DataConfig(), source="csv", path=str(tmp_path / "p*.csv"),
                                 validation_fraction=0.2, validation_split_name=None, cache=None)
    train, val, info = _raw(config)
    held = _numbers(val)
    (file,) = splits.split_indices(5, 0.2, 7)[1].tolist()  # round(0.2 * 5) = 1 file
    assert held == list(range(file * 10, file * 10 + 10))
    assert info.train_examples == 40 and len(_numbers(train)) == 40
