"""Tests of from_csv: make_csv_dataset's batches, bad rows named, DataFrames, FeatureSpace, guards."""

import gzip
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfaccel import data
from tfaccel.data import cache_files, order
from tfaccel.data.sources import csv_tables
from tfaccel.errors import DataError, UserInputError

HEADER = "age,city,score,label"
ROWS = ["31,Paris,0.5,1", "22,Rome,1.5,0", "45,Oslo,2.25,1", "19,Rome,-1,0",
        "50,Lima,3,1", "60,Kyiv,4e2,0", "38,Oslo,7.5,1"]


def _write(path, lines, header=HEADER):
    text = "\n".join(([header] if header is not None else []) + list(lines)) + "\n"
    path.write_text(text)
    return str(path)


def _parts(tmp_path, *, files=3, rows_per_file=8):
    """Files part-<f>.csv; row r of file f has id f * 100 + r (a unique key per row)."""
    paths = []
    for f in range(files):
        lines = [f"{f * 100 + r},{'abc'[(f + r) % 3]},{r / 4},{r % 2}"
                 for r in range(rows_per_file)]
        paths.append(_write(tmp_path / f"part-{f}.csv", lines, header="id,tag,x,label"))
    return paths


def _rows(dataset, key="age"):
    """Every example of `dataset` as a tuple of its values, label last, in order."""
    out = []
    for features, label in dataset.as_numpy_iterator():
        names = sorted(features)
        for i in range(len(label)):
            out.append(tuple(features[n][i] for n in names) + (label[i],))
    return out


def test_batches_equal_make_csv_dataset_unshuffled(tmp_path):
    _write(tmp_path / "a.csv", ROWS[:4])
    _write(tmp_path / "b.csv", ROWS[4:])
    pattern = str(tmp_path / "*.csv")
    # make_csv_dataset's positional (file_pattern, batch_size) call shape works as is.
    ours = data.from_csv(pattern, 3, label_name="label", shuffle_buffer=0)
    keras_side = tf.data.experimental.make_csv_dataset(
        pattern, 3, label_name="label", shuffle=False, num_epochs=1)
    assert ours.element_spec == (dict(keras_side.element_spec[0]), keras_side.element_spec[1])
    got, want = list(ours.as_numpy_iterator()), list(keras_side.as_numpy_iterator())
    assert len(got) == len(want) == 3
    for (x, y), (kx, ky) in zip(got, want):
        assert sorted(x) == sorted(kx)
        for name in x:
            np.testing.assert_array_equal(x[name], kx[name])
        np.testing.assert_array_equal(y, ky)
    assert ours.num_examples == 7 and ours.files == sorted(ours.files)
    # The rows were counted up front: Keras sees how many batches an epoch has.
    assert ours.cardinality() == 3
    assert ours.column_types == {"age": "int32", "city": "string", "score": "float32",
                                 "label": "int32"}


# make_csv_dataset's own inference warns on float32("1e40") (numpy's overflow warning).
@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
def test_type_inference_is_make_csv_datasets(tmp_path):
    # int32, int64 (past 2**31), float32, float64 (overflows float32), string, "inf" in a
    # text column (text), a column empty in the inference rows (string) and one whose
    # later rows need a wider type than the first ones. ("inf" among numbers is refused:
    # test_differences_from_make_csv_dataset_side_by_side.)
    path = _write(tmp_path / "t.csv", ["1,3000000000,0.5,1e40,a,inf,,7",
                                       "2,4,1.5,2,b,x,,8.5"],
                  header="i32,i64,f32,f64,s,infs,empty,late")
    ours = data.from_csv(path, batch_size=2, shuffle_buffer=0,
                         column_defaults={"empty": ""})
    keras_side = tf.data.experimental.make_csv_dataset(path, batch_size=2, shuffle=False,
                                                       num_epochs=1)
    assert ours.element_spec == dict(keras_side.element_spec)
    assert ours.column_types == {"i32": "int32", "i64": "int64", "f32": "float32",
                                 "f64": "float64", "s": "string", "infs": "string",
                                 "empty": "string", "late": "float32"}
    (x,), (kx,) = list(ours.as_numpy_iterator()), list(keras_side.as_numpy_iterator())
    for name in x:
        np.testing.assert_array_equal(x[name], kx[name])


def test_shuffled_reads_every_row_once_in_a_seeded_order(tmp_path):
    paths = _parts(tmp_path, files=3, rows_per_file=8)

    def build(seed):
        return data.from_csv(str(tmp_path / "part-*.csv"), batch_size=5, label_name="label",
                             shuffle_buffer=6, seed=seed)

    first = build(3)
    ids = [row[0] for row in _rows(first)]
    assert sorted(ids) == sorted(f * 100 + r for f in range(3) for r in range(8))
    assert ids != sorted(ids)
    # The file order is the one seeded permutation of the sorted listing (data.order).
    assert first.files == [paths[i] for i in order.permutation(3, 3)]
    # The same seed gives the same order (deterministic by default with a seed).
    assert [row[0] for row in _rows(build(3))] == ids
    assert first.num_examples == 24


def test_a_resumable_stream_rebuilds_a_pass_and_resumes_it(tmp_path):
    _parts(tmp_path, files=3, rows_per_file=8)

    def batches(stream):
        ds = data.from_csv(str(tmp_path / "part-*.csv"), batch_size=4, label_name="label",
                           shuffle_buffer=10, seed=5, stream=stream)
        return [list(x["id"]) for x, _ in ds.as_numpy_iterator()]

    full = batches(data.EpochStream(num_passes=2))
    assert len(full) == 12 and full[:6] != full[6:]
    for one_pass in (full[:6], full[6:]):
        assert sorted(i for b in one_pass for i in b) == sorted(
            f * 100 + r for f in range(3) for r in range(8))
    # Another process resuming at pass 1, batch 2 gets exactly the rest.
    assert batches(data.EpochStream(first_pass=1, skip_batches=2, num_passes=2)) == full[8:]


def test_default_shuffle_buffer_holds_every_row(tmp_path):
    _parts(tmp_path, files=1, rows_per_file=40)
    ds = data.from_csv(str(tmp_path / "part-0.csv"), batch_size=40, label_name="label",
                       seed=1)
    ((features, _),) = list(ds.as_numpy_iterator())
    # A 40-row buffer draws row 39 into the first batch positions as easily as row 0: the
    # last rows are not stuck at the end as a small buffer would leave them.
    assert sorted(features["id"]) == list(range(40))
    assert set(features["id"][:10]) & set(range(30, 40))


@pytest.mark.parametrize("lines, message", [
    (["1,Paris,0.5,1", "2,Rome,1.5,0,9"],
     "line 3 has 5 fields; every row needs 4 (age, city, score, label)"),
    (["1,Paris,0.5,1", "2,Rome"], "line 3 has 2 fields"),
    (["1,Paris,0.5,1", "", "2,Rome,1,0"], "line 3 is blank"),
    (["1,Paris,0.5,1", "2,Rome,,0"],
     "line 3, column 'score': the value is missing; fill it in, or name a default for the "
     "column: column_defaults={'score': ...}"),
])
def test_bad_rows_in_the_inference_rows_are_named(tmp_path, lines, message):
    path = _write(tmp_path / "bad.csv", lines)
    with pytest.raises(DataError) as info:
        data.from_csv(path, batch_size=2, label_name="label")
    assert str(info.value) == f"CSV file {path!r}, {message}." or \
        str(info.value).startswith(f"CSV file {path!r}, {message}")


@pytest.mark.parametrize("bad, message", [
    ("7,Oslo,2.5x,1", "line 5, column 'score': '2.5x' is not a float32, the column's type "
                      "(inferred from the first 2 rows); fix the value or pass "
                      "column_types={'score': 'string'}."),
    ("7,Oslo,2.5,1.5", "line 5, column 'label': '1.5' is not a int32, the column's type "
                       "(inferred from the first 2 rows); fix the value or pass "
                       "column_types={'label': 'float32'}."),
    ("7,,2.5,1", "line 5, column 'city': the value is missing"),
    ("7,Oslo,2.5", "line 5 has 3 fields; every row needs 4"),
])
def test_bad_rows_past_the_inference_rows_are_found_by_tensorflow_and_named(
        tmp_path, bad, message):
    # TensorFlow's own error names neither the file nor the row ("Field 2 in record is not
    # a valid float: 2.5x"); the up-front parse catches it and the Python scan names it.
    _write(tmp_path / "a.csv", ROWS[:3])
    path = _write(tmp_path / "b.csv", ROWS[3:6] + [bad])
    with pytest.raises(DataError) as info:
        data.from_csv(str(tmp_path / "*.csv"), batch_size=2, label_name="label",
                      num_rows_for_inference=2)
    assert str(info.value).startswith(f"CSV file {path!r}, {message}")


def test_without_verify_a_bad_row_stops_with_tensorflows_error(tmp_path):
    path = _write(tmp_path / "a.csv", ROWS[:3] + ["7,Oslo,x,1"])
    ds = data.from_csv(path, batch_size=2, label_name="label", verify=False,
                       num_rows_for_inference=2, shuffle_buffer=0)
    assert ds.num_examples is None
    with pytest.raises(tf.errors.InvalidArgumentError, match="not a valid float"):
        list(ds)


def test_named_defaults_fill_missing_values_and_na_value_means_missing(tmp_path):
    path = _write(tmp_path / "a.csv", ["1,Paris,0.5,1", "2,,NA,0", "3,Oslo,,1"])
    ds = data.from_csv(path, batch_size=3, label_name="label", shuffle_buffer=0,
                       na_value="NA", column_defaults={"city": "?", "score": -1.0})
    ((x, y),) = list(ds.as_numpy_iterator())
    assert list(x["city"]) == [b"Paris", b"?", b"Oslo"]
    np.testing.assert_array_equal(x["score"], np.array([0.5, -1.0, -1.0], np.float32))
    with pytest.raises(UserInputError, match=r"column_defaults\['score'\] is 'low', which "
                                             "is not a value of the column's type float32"):
        data.from_csv(path, batch_size=3, na_value="NA",
                      column_defaults={"city": "?", "score": "low"})


def test_missing_label_column_lists_the_columns(tmp_path):
    path = _write(tmp_path / "a.csv", ROWS)
    with pytest.raises(DataError) as info:
        data.from_csv(path, batch_size=2, label_name="target")
    assert str(info.value) == (f"label_name 'target' (did you mean 'age'?) is not a column of "
                               f"{path!r}; its columns are ['age', 'city', 'score', 'label'].")
    with pytest.raises(DataError, match=r"'lable' \(did you mean 'label'\?\)"):
        data.from_csv(path, batch_size=2, label_name="lable")


def test_files_that_cannot_make_a_table_are_named(tmp_path):
    with pytest.raises(DataError, match="CSV pattern .* matches no file"):
        data.from_csv(str(tmp_path / "*.csv"), batch_size=2)
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(DataError, match=f"CSV file {str(empty)!r} is empty"):
        data.from_csv(str(empty), batch_size=2)
    headers_only = _write(tmp_path / "h.csv", [])
    with pytest.raises(DataError, match="holds no rows, only headers"):
        data.from_csv(headers_only, batch_size=2)
    a = _write(tmp_path / "a.csv", ROWS[:2])
    b = _write(tmp_path / "b.csv", ["1,2,3"], header="age,town,score")
    with pytest.raises(DataError) as info:
        data.from_csv([a, b], batch_size=2)
    assert str(info.value) == (f"CSV file {b!r} has the header ['age', 'town', 'score'] but "
                               f"{a!r} has ['age', 'city', 'score', 'label']: every file "
                               "must have the same columns.")
    latin = tmp_path / "latin.csv"
    latin.write_bytes("name,label\ncaf\xe9,1\n".encode("latin-1"))
    with pytest.raises(DataError, match=r"latin\.csv' is not utf-8 text: line 2 holds "
                                        r"b'\\xe9' .* pass encoding="):
        data.from_csv(str(latin), batch_size=2, label_name="label")
    ds = data.from_csv(str(latin), batch_size=2, label_name="label", encoding="latin-1")
    assert ds.num_examples == 1


def test_column_types_select_columns_and_their_mistakes(tmp_path):
    path = _write(tmp_path / "a.csv", ROWS)
    ds = data.from_csv(path, batch_size=7, label_name="label", shuffle_buffer=0,
                       select_columns=["age", "city"], column_types={"age": "float64"})
    ((x, y),) = list(ds.as_numpy_iterator())
    # The label is read even though select_columns leaves it out.
    assert sorted(x) == ["age", "city"] and x["age"].dtype == np.float64
    np.testing.assert_array_equal(y, [1, 0, 1, 0, 1, 0, 1])
    with pytest.raises(UserInputError, match=r"column_types names the column 'agee' \(did "
                                             r"you mean 'age'\?\)"):
        data.from_csv(path, batch_size=2, column_types={"agee": "int64"})
    with pytest.raises(UserInputError, match=r"column_types\['age'\] must be one of"):
        data.from_csv(path, batch_size=2, column_types={"age": "decimal"})
    with pytest.raises(DataError, match=r"column_names has 2 names but the files have 4 "
                                        r"columns \(\['age', 'city', 'score', 'label'\]"):
        data.from_csv(path, batch_size=2, column_names=["a", "b"])
    with pytest.raises(UserInputError, match="header=False needs column_names"):
        data.from_csv(path, batch_size=2, header=False)
    with pytest.raises(UserInputError, match=r"make_csv_dataset's shuffle_seed=1: use seed="):
        data.from_csv(path, batch_size=2, shuffle_seed=1)


def test_a_byte_order_mark_is_not_part_of_the_first_column_name(tmp_path):
    path = tmp_path / "excel.csv"
    path.write_bytes("\ufeffage,label\n3,1\n4,0\n".encode("utf-8"))
    ds = data.from_csv(str(path), batch_size=2, label_name="label", shuffle_buffer=0)
    ((x, y),) = list(ds.as_numpy_iterator())
    assert list(x) == ["age"] and list(x["age"]) == [3, 4] and list(y) == [1, 0]


def test_no_header_gzip_and_another_delimiter(tmp_path):
    path = str(tmp_path / "a.csv.gz")
    with gzip.open(path, "wt") as handle:
        handle.write("1;x\n2;y\n3;z\n")
    ds = data.from_csv(path, batch_size=3, header=False, column_names=["n", "s"],
                       field_delim=";", compression_type="GZIP", label_name="n",
                       shuffle_buffer=0)
    ((x, y),) = list(ds.as_numpy_iterator())
    assert list(x["s"]) == [b"x", b"y", b"z"] and list(y) == [1, 2, 3]


class _Frame:
    """The least a DataFrame offers: ``.columns`` and a column by name (pandas is not a
    dependency; a pandas DataFrame is used the same way)."""

    def __init__(self, columns):
        self._columns = {name: np.asarray(values) for name, values in columns.items()}
        self.columns = list(columns)

    def __getitem__(self, name):
        return self._columns[name]


def _frame(**changes):
    columns = {"age": np.array([31, 22, 45, 19, 50], np.int64),
               "thal": np.array(["fixed", "normal", "reversible", "normal", "fixed"],
                                object),
               "chol": np.array([1.5, 2.0, 0.5, 3.0, 2.5]),
               "target": np.array([1, 0, 1, 0, 1], np.int64)}
    columns.update(changes)
    return _Frame(columns)


def test_a_data_frame_gives_what_keras_io_builds_from_it():
    frame = _frame()
    ours = data.from_csv(frame, batch_size=2, label_name="target", shuffle_buffer=0)
    # keras.io's structured-data examples: labels = df.pop("target");
    # tf.data.Dataset.from_tensor_slices((dict(df), labels)).batch(...)
    features = {name: frame[name] for name in frame.columns if name != "target"}
    keras_side = tf.data.Dataset.from_tensor_slices((features, frame["target"])).batch(2)
    assert ours.element_spec == keras_side.element_spec
    for (x, y), (kx, ky) in zip(ours.as_numpy_iterator(), keras_side.as_numpy_iterator()):
        for name in kx:
            np.testing.assert_array_equal(x[name], kx[name])
        np.testing.assert_array_equal(y, ky)
    assert ours.num_examples == 5 and ours.column_types["thal"] == "string"


def test_a_data_frame_with_missing_values_is_refused_or_filled():
    holes = _frame(chol=np.array([1.5, np.nan, 0.5, np.nan, 2.5]),
                   thal=np.array(["fixed", None, "normal", "x", "y"], object))
    with pytest.raises(DataError) as info:
        data.from_csv(holes, batch_size=5, label_name="target")
    assert str(info.value) == ("DataFrame column 'thal' is missing a value at row 1 "
                               "(position, 0-based; 1 missing in all); fill it in, or name a "
                               "default: column_defaults={'thal': ...}.")
    ds = data.from_csv(holes, batch_size=5, label_name="target", shuffle_buffer=0,
                       column_defaults={"chol": 0.0, "thal": "unknown"})
    ((x, _),) = list(ds.as_numpy_iterator())
    np.testing.assert_array_equal(x["chol"], [1.5, 0.0, 0.5, 0.0, 2.5])
    assert x["thal"][1] == b"unknown"
    with pytest.raises(DataError, match=r"label_name 'label' is not a column of the "
                                        r"DataFrame; its columns are \['age', 'thal', "
                                        r"'chol', 'target'\]"):
        data.from_csv(holes, batch_size=5, label_name="label")


def test_a_real_pandas_data_frame():
    pandas = pytest.importorskip("pandas")
    frame = pandas.DataFrame({"a": [1.0, 2.0, 3.0], "b": ["x", None, "z"], "y": [0, 1, 0],
                              7: [4, 5, 6]})
    ds = data.from_csv(frame, batch_size=3, label_name="y", shuffle_buffer=0,
                       column_defaults={"b": "?"})
    ((x, y),) = list(ds.as_numpy_iterator())
    assert list(x["b"]) == [b"x", b"?", b"z"] and list(y) == [0, 1, 0]
    assert list(x["7"]) == [4, 5, 6]  # a column named by a number is read by it


def test_feature_space_adapts_and_a_model_fits(tmp_path):
    lines = [f"{20 + i % 50},{'abc'[i % 3]},{(i % 3) % 2}" for i in range(64)]
    path = _write(tmp_path / "t.csv", lines, header="age,city,label")
    train = data.from_csv(path, batch_size=16, label_name="label", seed=0)
    space = keras.utils.FeatureSpace(
        features={"age": keras.utils.FeatureSpace.float_normalized(),
                  "city": keras.utils.FeatureSpace.string_categorical(num_oov_indices=0)},
        output_mode="concat")
    space.adapt(train.map(lambda x, _: x))
    assert space.get_encoded_features().shape[-1] == 1 + 3  # age + one-hot of 3 cities
    encoded = train.map(lambda x, y: (space(x), y))
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1, activation="sigmoid")])
    model.compile(optimizer=keras.optimizers.Adam(0.1), loss="binary_crossentropy")
    history = model.fit(encoded, epochs=3, verbose=0, shuffle=False)
    assert len(history.history["loss"]) == 3 and np.isfinite(history.history["loss"]).all()
    # The city decides the label exactly: the model learns it.
    assert history.history["loss"][-1] < history.history["loss"][0]


@pytest.fixture
def _fresh_caches():
    cache_files.forget_prepared()
    yield
    cache_files.forget_prepared()


def test_file_cache_is_fingerprinted_with_the_files(tmp_path, _fresh_caches, capsys):
    _parts(tmp_path, files=2, rows_per_file=4)
    cache = str(tmp_path / "cache" / "train")

    def ids():
        ds = data.from_csv(str(tmp_path / "part-*.csv"), batch_size=4, label_name="label",
                           cache=cache, seed=0)
        return sorted(int(i) for x, _ in ds.as_numpy_iterator() for i in x["id"])

    assert ids() == [0, 1, 2, 3, 100, 101, 102, 103]
    assert ids() == [0, 1, 2, 3, 100, 101, 102, 103]  # served from the cache
    assert "rebuilt" not in capsys.readouterr().out
    _write(tmp_path / "part-1.csv", ["900,a,0.5,1"], header="id,tag,x,label")
    os.utime(tmp_path / "part-1.csv", ns=(1, 1))
    cache_files.forget_prepared()
    assert ids() == [0, 1, 2, 3, 900]
    assert "(changed: source files)" in capsys.readouterr().out


def test_input_pipelines_read_disjoint_files_or_rows(tmp_path):
    _parts(tmp_path, files=4, rows_per_file=3)
    pattern = str(tmp_path / "part-*.csv")

    def ids(pipelines, index, source=pattern):
        ctx = tf.distribute.InputContext(num_input_pipelines=pipelines,
                                         input_pipeline_id=index, num_replicas_in_sync=2)
        ds = data.from_csv(source, batch_size=4, label_name="label", input_context=ctx,
                           shuffle_buffer=5, drop_remainder=False)
        return [int(i) for x, _ in ds.as_numpy_iterator() for i in x["id"]]

    every = sorted(f * 100 + r for f in range(4) for r in range(3))
    shares = [ids(2, 0), ids(2, 1)]
    # By file: each pipeline reads two whole files, and together they read every row once.
    assert sorted(shares[0] + shares[1]) == every
    assert len({i // 100 for i in shares[0]}) == 2
    assert not {i // 100 for i in shares[0]} & {i // 100 for i in shares[1]}
    # One file for two pipelines: by row position, still each row exactly once.
    one = str(tmp_path / "part-0.csv")
    halves = [ids(2, 0, one), ids(2, 1, one)]
    assert sorted(halves[0] + halves[1]) == [0, 1, 2] and len(halves[0]) in (1, 2)


def test_a_multi_worker_strategy_splits_the_rows_in_a_fixed_order(tmp_path):
    from tensorflow.python.data.experimental.ops import distribute as distribute_ops

    _parts(tmp_path, files=4, rows_per_file=3)
    ds = data.from_csv(str(tmp_path / "part-*.csv"), batch_size=None, label_name="label",
                       shuffle_buffer=0)
    # TensorFlow's FILE auto-sharding does not find CsvDataset readers, so the builder
    # says DATA: what a 2-worker strategy then does gives each worker every other row.
    policy = ds.options().experimental_distribute.auto_shard_policy
    assert policy == tf.data.experimental.AutoShardPolicy.DATA
    shares = [[int(x["id"]) for x, _ in distribute_ops._AutoShardDataset(ds, 2, w)
               .as_numpy_iterator()] for w in (0, 1)]
    assert sorted(shares[0] + shares[1]) == sorted(f * 100 + r for f in range(4)
                                                   for r in range(3))
    assert len(shares[0]) == len(shares[1]) == 6


def test_parses_as_and_widen_follow_csv_dataset():
    assert csv_tables.parses_as(" 12 ", "int32") and not csv_tables.parses_as("2.0", "int32")
    assert not csv_tables.parses_as("3000000000", "int32")
    assert csv_tables.parses_as("3000000000", "int64")
    assert csv_tables.widen("int32", "2.5") == "float32"
    assert csv_tables.widen("float32", "1e40") == "float64"
    assert csv_tables.widen(None, "nan") == "string"
    assert csv_tables.parses_as("nan", "float32", finite=False)


# Where from_csv differs from tf.data.experimental.make_csv_dataset on purpose: each
# difference, shown side by side by the test named, and listed in docs/data.md's table.
DIFFERENCES = {
    "a missing value": "test_differences_from_make_csv_dataset_side_by_side",
    "select_columns without the label": "test_differences_from_make_csv_dataset_side_by_side",
    "epochs": "test_differences_from_make_csv_dataset_side_by_side",
    "nan or inf among numbers": "test_differences_from_make_csv_dataset_side_by_side",
    "a bad row": "test_bad_rows_past_the_inference_rows_are_found_by_tensorflow_and_named",
}


def test_differences_from_make_csv_dataset_side_by_side(tmp_path):
    path = _write(tmp_path / "a.csv", ["1,Paris,0.5,1", "2,Rome,,0"])
    # A missing value: make_csv_dataset fills 0 silently; from_csv names it, or fills the
    # default it is given.
    theirs = tf.data.experimental.make_csv_dataset(path, batch_size=2, label_name="label",
                                                   shuffle=False, num_epochs=1)
    np.testing.assert_array_equal(next(iter(theirs))[0]["score"], [0.5, 0.0])
    with pytest.raises(DataError, match="line 3, column 'score': the value is missing"):
        data.from_csv(path, batch_size=2, label_name="label")
    # select_columns without the label: refused there, the label is read here.
    with pytest.raises(ValueError, match="must be one of the columns"):
        tf.data.experimental.make_csv_dataset(path, batch_size=2, label_name="label",
                                              select_columns=["age"])
    ours = data.from_csv(path, batch_size=2, label_name="label", select_columns=["age"])
    assert list(ours.element_spec[0]) == ["age"]
    # Epochs: one pass per iteration here (for fit's epochs), endless there by default.
    endless = tf.data.experimental.make_csv_dataset(path, batch_size=2, label_name="label")
    assert endless.cardinality() == tf.data.INFINITE_CARDINALITY
    assert sum(1 for _ in ours) == 1
    # "nan" among numbers: make_csv_dataset makes the column strings; from_csv names it.
    path = _write(tmp_path / "n.csv", ["1,Paris,nan,1", "2,Rome,0.5,0"])
    theirs = tf.data.experimental.make_csv_dataset(path, batch_size=2, label_name="label",
                                                   shuffle=False, num_epochs=1)
    assert theirs.element_spec[0]["score"].dtype == tf.string
    with pytest.raises(DataError, match=r"n\.csv', line 2, column 'score' holds 'nan'\. NaN "
                                        "and infinite features are refused"):
        data.from_csv(path, batch_size=2, label_name="label")


def test_the_docs_table_lists_the_differences():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "data.md").read_text()
    section = text[text.index("## CSV tables"):]
    for difference, test in DIFFERENCES.items():
        row = next((line for line in section.splitlines()
                    if line.startswith(f"| {difference} |")), None)
        assert row is not None, difference
        assert f"`{test}`" in row and test in globals()


@pytest.fixture
def csv_recipe_source():
    """A recipe's data section with `data.source: csv` (from_recipe.SOURCES registers it)."""
    from tfaccel.data import from_recipe

    assert from_recipe.SOURCES["csv"] is csv_tables.CsvSource

    def config(path, **keys):
        from tfaccel.config.recipe import DataConfig

        return DataConfig(**{"source": "csv", "path": path, "validation_split_name": None,
                             "shuffle_buffer": 16, **keys})

    return config


def test_the_recipe_source_holds_out_whole_files_and_counts_classes(tmp_path,
                                                                    csv_recipe_source):
    from tfaccel.data.from_recipe import build_datasets

    _parts(tmp_path, files=4, rows_per_file=6)
    config = csv_recipe_source(str(tmp_path / "part-*.csv"), validation_fraction=0.25)
    train, val, info = build_datasets(config, global_batch_size=4, num_replicas=1, seed=0,
                                      deterministic=True, raw=True)
    assert info.num_classes == 2  # labels 0 and 1
    assert info.train_examples == 18 and info.validation_examples == 6
    assert info.steps_per_epoch == 5
    train_files = {int(i) // 100 for x, _ in train.as_numpy_iterator() for i in x["id"]}
    val_files = {int(i) // 100 for x, _ in val.as_numpy_iterator() for i in x["id"]}
    assert len(train_files) == 3 and len(val_files) == 1 and not train_files & val_files
    assert val.element_spec == train.element_spec  # one set of column types
    with pytest.raises(DataError, match="holds label 1 but data.num_classes is 1"):
        build_datasets(csv_recipe_source(str(tmp_path / "part-*.csv"), num_classes=1),
                       global_batch_size=4, num_replicas=1, seed=0, deterministic=True)
    # Text labels are read as classes (the sorted values), never refused or counted.
    train, _, info = build_datasets(csv_recipe_source(str(tmp_path / "part-*.csv"),
                                                      label_key="tag"),
                                    global_batch_size=4, num_replicas=1, seed=0,
                                    deterministic=True, raw=True)
    assert info.class_names == ["a", "b", "c"] and info.num_classes == 3
    for x, y in train.as_numpy_iterator():
        ids = x["id"].astype(int)
        np.testing.assert_array_equal(y, (ids // 100 + ids % 100) % 3)


def test_the_recipe_source_divides_its_files_among_workers(tmp_path, csv_recipe_source):
    from tfaccel.data import EpochStream
    from tfaccel.data.from_recipe import build_datasets

    _parts(tmp_path, files=4, rows_per_file=6)
    config = csv_recipe_source(str(tmp_path / "part-*.csv"))
    passes = []
    for worker in (0, 1):
        ctx = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=worker,
                                         num_replicas_in_sync=2)
        train, _, info = build_datasets(config, global_batch_size=4, num_replicas=2, seed=0,
                                        deterministic=True, stream=EpochStream(num_passes=2),
                                        input_context=ctx, raw=True)
        assert info.worker_sharding == "file" and info.steps_per_epoch == 6
        batches = [[int(i) for i in x["id"]] for x, _ in train]
        assert len(batches) == 12 and {len(b) for b in batches} == {2}  # per replica
        assert len({i // 100 for b in batches for i in b}) == 2  # only its two files
        passes.append((sum(batches[:6], []), sum(batches[6:], [])))
    every = sorted(f * 100 + r for f in range(4) for r in range(6))
    for p in range(2):  # one pass: every row exactly once across the workers
        assert sorted(passes[0][p] + passes[1][p]) == every


def test_one_file_split_by_rows_imputes_with_the_training_rows_mean(tmp_path,
                                                                     csv_recipe_source):
    """A row split of one file: the plan's mean (what a missing number becomes, in both
    splits) comes from the training rows only, never the held-out ones; each split
    delivers exactly its own rows (the scan's row index and the tf.data mask agree, a
    blank line in the file included)."""
    from tfaccel.data import splits
    from tfaccel.data.from_recipe import build_datasets

    train_mask, val_mask = (m[0] for m in splits.held_out_rows([50], 0.2, 0, what="rows"))
    assert (train_mask.sum(), val_mask.sum()) == (40, 10)
    lines, present = ["id,x,label"], {True: [], False: []}
    for i in range(50):
        # Held-out rows hold far larger numbers: their mean would show in the imputation.
        x = None if i % 5 == 2 else float(i % 7 if train_mask[i] else 1000 + i)
        if x is not None:
            present[bool(train_mask[i])].append(x)
        lines.append(f"{i},{'NA' if x is None else x},{'ab'[i % 2]}")
        if i == 20:
            lines.append("")  # a blank line is no row, for the scan and for tf.data
    (tmp_path / "one.csv").write_text("\n".join(lines) + "\n")
    train_mean = np.mean(present[True])
    assert abs(train_mean - np.mean(present[True] + present[False])) > 100

    train, val, info = build_datasets(
        csv_recipe_source(str(tmp_path / "one.csv"), label_key="label",
                          validation_fraction=0.2),
        global_batch_size=8, num_replicas=1, seed=0, deterministic=True, raw=True)
    assert (info.train_examples, info.validation_examples) == (40, 10)
    for dataset, mask in ((train, train_mask), (val, val_mask)):
        rows = [(x["id"], x["x"], x["x_missing"]) for x, _ in dataset.as_numpy_iterator()]
        ids, values, missing = (np.concatenate(c) for c in zip(*rows))
        assert sorted(ids.astype(int).tolist()) == np.flatnonzero(mask).tolist()
        holes = ids.astype(int) % 5 == 2
        assert holes.any() and np.array_equal(missing == 1, holes)
        np.testing.assert_allclose(values[holes], train_mean, rtol=1e-6)


def test_a_row_split_of_two_files_is_divided_among_workers_by_file(tmp_path,
                                                                   csv_recipe_source):
    """Two files and validation_fraction 0.2 split rows (too few files for whole ones);
    two workers each read one file's training rows: together every training row once,
    none of the validation rows."""
    from tfaccel.data import EpochStream
    from tfaccel.data.from_recipe import build_datasets

    for f in range(2):
        (tmp_path / f"part-{f}.csv").write_text("id,x,label\n" + "".join(
            f"{f * 100 + r},{'NA' if r % 4 == 0 else r},{r % 2}\n" for r in range(20)))
    config = csv_recipe_source(str(tmp_path / "part-*.csv"), label_key="label",
                               validation_fraction=0.2)
    _, val, info = build_datasets(config, global_batch_size=4, num_replicas=1, seed=0,
                                  deterministic=True, raw=True)
    assert (info.train_examples, info.validation_examples) == (32, 8)
    held_out = {int(i) for x, _ in val for i in x["id"]}
    seen = []
    for worker in (0, 1):
        ctx = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=worker,
                                         num_replicas_in_sync=2)
        train, _, info = build_datasets(config, global_batch_size=4, num_replicas=2, seed=0,
                                        deterministic=True, stream=EpochStream(num_passes=1),
                                        input_context=ctx, raw=True)
        ids = [int(i) for x, _ in train for i in x["id"]]
        assert info.worker_sharding == "file" and len({i // 100 for i in ids}) == 1
        assert len(ids) == 16 and info.steps_per_epoch == 8
        seen += ids
    assert len(set(seen)) == 32 and not set(seen) & held_out


def test_a_missing_value_marker_among_numbers_is_refused_not_read_as_text(tmp_path):
    # make_csv_dataset reads a column of numbers with "NA" in its first 100 rows as
    # strings, silently (a model then one-hots the measurements). from_csv names the value.
    path = tmp_path / "t.csv"
    rows = ["a,b,label"] + [f"{i},{i % 7}.5,{i % 2}" for i in range(150)]
    rows[6] = "5,NA,1"
    path.write_text("\n".join(rows) + "\n")
    with pytest.raises(DataError, match=r"line 7, column 'b': 'NA' .*missing-value marker.*"
                                        r"na_value='NA'"):
        data.from_csv(str(path), batch_size=8, label_name="label", shuffle_buffer=0)
    # Declared missing (na_value) with a default: numbers, the marker filled.
    filled = data.from_csv(str(path), batch_size=150, label_name="label", shuffle_buffer=0,
                           na_value="NA", column_defaults={"b": -1.0})
    features, _ = next(iter(filled))
    assert features["b"].dtype == tf.float32 and float(features["b"][5]) == -1.0
    # A text column may hold such a word: it stays text.
    rows = ["a,word,label"] + [f"{i},{'NA' if i == 3 else 'w' + str(i)},{i % 2}"
                               for i in range(10)]
    path.write_text("\n".join(rows) + "\n")
    texts = data.from_csv(str(path), batch_size=10, label_name="label", shuffle_buffer=0)
    assert next(iter(texts))[0]["word"].dtype == tf.string
