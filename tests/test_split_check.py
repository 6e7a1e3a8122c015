"""`tfaccel validate` refuses a validation_fraction that leaves a split empty (config/split_check.py), without TensorFlow."""

import gzip

import pytest
import tensorflow as tf
from guard_helpers import assert_refused, lines, run, table

from tfaccel.reading import split_rule

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


def _records(path, n, *, compression=None):
    with tf.io.TFRecordWriter(str(path), options=compression) as writer:
        for i in range(n):
            writer.write(tf.train.Example(features=tf.train.Features(feature={
                "x": tf.train.Feature(float_list=tf.train.FloatList(value=[i])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 2])),
            })).SerializeToString())


def test_counts_without_tensorflow_equal_the_readers(tmp_path):
    csv_path = tmp_path / "t.csv"
    csv_path.write_text('x,label\n1,0\n"a\nquoted newline",1\n\n3,0\n')
    assert split_rule.count_csv_rows(str(csv_path)) == 3  # blank line not a row
    text = tmp_path / "t.tsv"
    text.write_bytes(b"a\tx\r\n\r\n\nb\ty\n")
    assert split_rule.count_lines(str(text)) == 2
    zipped = tmp_path / "t.tsv.gz"
    zipped.write_bytes(gzip.compress(b"a\tx\nb\ty\nc\tz"))
    assert split_rule.count_lines(str(zipped)) == 3
    _records(tmp_path / "r.tfrecord", 7)
    assert split_rule.count_records(str(tmp_path / "r.tfrecord")) == 7
    _records(tmp_path / "z.tfrecord", 7, compression="GZIP")
    assert split_rule.count_records(str(tmp_path / "z.tfrecord"), compression="GZIP") is None


def test_csv_rows_are_counted_by_the_reader_the_run_uses(tmp_path):
    # Blank lines of spaces (and a tab), a byte-order mark and CRLF: the count validate
    # splits is the number of rows the csv source reads (the shared reader,
    # tfaccel.reading.csv_files), not Python's csv module's records (5 here).
    from tfaccel.reading import table_plan

    path = tmp_path / "t.csv"
    path.write_bytes("\ufeffx;label\r\n1;0\r\n   \r\n2;1\r\n\t\r\n\r\n3;0\r\n  \n"
                     .encode("utf-8"))
    assert table_plan.scan_files([str(path)]).row_counts == [3]
    assert split_rule.count_csv_rows(str(path)) == 3
    # A quoted newline stays inside its row (the plan then refuses it, naming the lines).
    quoted = tmp_path / "q.csv"
    quoted.write_text('x,label\n"a\nb",1\n  \n2,0\n')
    assert split_rule.count_csv_rows(str(quoted)) == 2


FEATURES = {"x": {"dtype": "float32"}, "label": {"dtype": "int64"}}


@pytest.mark.parametrize("source, name, write, what", [
    ("csv", "one.csv", lambda p: p.write_text(table(1)), "rows"),
    ("text_lines", "one.tsv", lambda p: p.write_text(lines(1)), "non-empty lines"),
    ("tfrecords", "one.tfrecord", lambda p: _records(p, 1), "records"),
])
def test_validate_refuses_a_fraction_that_leaves_no_training_example(tmp_path, source, name,
                                                                     write, what):
    write(tmp_path / name)
    extra = {"features": FEATURES, "image_key": "x"} if source == "tfrecords" else {}
    result = run(tmp_path, command="validate", source=source, path=str(tmp_path / name),
                 validation_fraction=0.2, **extra)
    assert_refused(result, f"data.validation_fraction 0.2 of data.path '{tmp_path / name}' "
                   f"(1 file(s), too few to hold out whole ones, so their {what} are split: "
                   "1 in all) holds out 1 and leaves 0 for training",
                   "Lower data.validation_fraction, add examples to data.path, or name the "
                   "validation examples with data.validation_path")


def test_validate_accepts_a_row_split_with_both_sides_and_says_what_it_cannot_count(
        tmp_path):
    (tmp_path / "one.csv").write_text(table(5))
    result = run(tmp_path, command="validate", source="csv", path=str(tmp_path / "one.csv"),
                 validation_fraction=0.2)
    assert result.exit_code == 0 and ": OK (csv data" in result.output, result.output
    assert "Not checked" not in result.output
    _records(tmp_path / "z.tfrecord", 1, compression="GZIP")
    result = run(tmp_path, command="validate", source="tfrecords",
                 path=str(tmp_path / "z.tfrecord"), compression="GZIP", features=FEATURES,
                 image_key="x", validation_fraction=0.2)
    assert result.exit_code == 0, result.output
    assert "Not checked: the examples of" in result.output
    assert "(compressed): the split is checked when the run reads it." in result.output
    # ... and the run refuses it, in the same words as the library's rule.
    result = run(tmp_path, source="tfrecords", path=str(tmp_path / "z.tfrecord"),
                 compression="GZIP", features=FEATURES, image_key="x",
                 validation_fraction=0.2)
    assert_refused(result, "data.validation_fraction=0.2 of 1 TFRecord records leaves "
                           "nothing for training")


def test_the_split_check_imports_no_tensorflow(tmp_path):
    from tf_free import heavy_modules_after

    (tmp_path / "one.csv").write_text(table(1))
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"data: {{source: csv, path: {tmp_path / 'one.csv'}, "
                      "validation_fraction: 0.2}\n")
    body = (f"r = CliRunner().invoke(main, ['validate', {str(recipe)!r}])\n"
            "assert r.exit_code == 2 and 'leaves 0 for training' in r.output, r.output\n")
    assert heavy_modules_after(body) == []
