"""`tfaccel.data.files_stage`: the listing, order and worker split the file-glob sources share, the same for tfrecords, csv and text lines."""

import re

import numpy as np
import pytest
import tensorflow as tf

from tfaccel import data
from tfaccel.data import files_stage
from tfaccel.errors import DataError, UserInputError


def _tfrecords(root, files, per_file):
    for f in range(files):
        with tf.io.TFRecordWriter(str(root / f"part-{f}.tfrecord")) as writer:
            for k in range(per_file):
                writer.write(tf.train.Example(features=tf.train.Features(feature={
                    "id": tf.train.Feature(int64_list=tf.train.Int64List(
                        value=[f * 100 + k]))})).SerializeToString())
    return str(root / "part-*.tfrecord")


def _csv(root, files, per_file):
    for f in range(files):
        (root / f"part-{f}.csv").write_text(
            "id,label\n" + "".join(f"{f * 100 + k},{k % 2}\n" for k in range(per_file)))
    return str(root / "part-*.csv")


def _lines(root, files, per_file):
    for f in range(files):
        (root / f"part-{f}.tsv").write_text(
            "".join(f"{('neg', 'pos')[k % 2]}\t{f * 100 + k}\n" for k in range(per_file)))
    return str(root / "part-*.tsv")


def _ids(source, pattern, ctx):
    """The example ids one input pipeline reads (shuffled, seeded)."""
    common = dict(batch_size=2, seed=5, input_context=ctx, drop_remainder=False)
    if source == "tfrecords":
        ds = data.from_tfrecords(pattern, features={"id": {"dtype": "int64"}},
                                 label_key=None, shuffle_buffer=4, **common)
        return [int(i) for batch in ds.as_numpy_iterator() for i in batch]
    if source == "csv":
        ds = data.from_csv(pattern, label_name="label", shuffle_buffer=4, **common)
        return [int(i) for x, _ in ds.as_numpy_iterator() for i in x["id"]]
    ds = data.from_text_lines(pattern, labels="first_field", shuffle_buffer=4, **common)
    return [int(t) for texts, _ in ds.as_numpy_iterator() for t in texts]


MAKERS = {"tfrecords": _tfrecords, "csv": _csv, "text_lines": _lines}


@pytest.mark.parametrize("source", sorted(MAKERS))
@pytest.mark.parametrize("files", [1, 3])
def test_every_example_is_read_by_exactly_one_of_two_pipelines(tmp_path, source, files):
    # One rule for all three: >= 2 files are split by file; fewer files than pipelines (1
    # for 2) by example in one fixed order. tfrecords and text lines refused 1 file before.
    pattern = MAKERS[source](tmp_path, files, 5)
    shares = [_ids(source, pattern, tf.distribute.InputContext(
        num_input_pipelines=2, input_pipeline_id=i, num_replicas_in_sync=2)) for i in (0, 1)]
    assert sorted(shares[0] + shares[1]) == sorted(f * 100 + k for f in range(files)
                                                   for k in range(5))
    if files > 1:  # by file: no file is read by both pipelines
        assert not {i // 100 for i in shares[0]} & {i // 100 for i in shares[1]}
    else:  # by example: every other example of the one order
        assert sorted(len(share) for share in shares) == [2, 3]


def test_list_files_names_the_pattern_a_folder_and_an_empty_list(tmp_path):
    (tmp_path / "a.csv").write_text("x\n1\n")
    (tmp_path / "sub.csv").mkdir()
    assert files_stage.list_files([str(tmp_path / "a.csv")], what="CSV") == [
        str(tmp_path / "a.csv")]
    missing = str(tmp_path / "none-*.csv")
    with pytest.raises(DataError, match="^" + re.escape(f"CSV pattern {missing!r} matches no file")):
        files_stage.list_files(missing, what="CSV")
    with pytest.raises(DataError, match=re.escape(f"CSV path {str(tmp_path / 'sub.csv')!r} is a folder")):
        files_stage.list_files(str(tmp_path / "*.csv"), what="CSV")
    with pytest.raises(UserInputError, match="must name at least one file, got"):
        files_stage.list_files([], what="TFRecord")


def test_read_order_permutes_every_column_alike_and_is_seeded():
    files = [f"f{i}" for i in range(6)]
    labels = list(range(6))
    a = files_stage.read_order(files, labels, None, shuffled=True, seed=1)
    assert a == files_stage.read_order(files, labels, None, shuffled=True, seed=1)
    assert [int(f[1:]) for f in a[0]] == a[1] and a[2] is None
    assert sorted(a[0]) == files and a[0] != files
    assert files_stage.read_order(files, labels, shuffled=False, seed=1) == (files, labels)


def test_label_range_over_batches_and_no_label_named():
    batches = [np.array([3, 1]), np.array([], np.int64), np.array([7])]
    assert files_stage.label_range(iter(batches), where="'x.csv'") == (1, 7)
    with pytest.raises(DataError, match="^No labels found in 'x.csv'"):
        files_stage.label_range(iter([np.array([], np.int64)]), where="'x.csv'")
