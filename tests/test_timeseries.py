"""from_timeseries as a drop-in for keras.utils.timeseries_dataset_from_array, side by side, and from_timeseries_csv."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfaccel.data import EpochStream, from_timeseries, from_timeseries_csv
from tfaccel.errors import DataError, UserInputError

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)

SERIES = np.arange(300, dtype=np.float32).reshape(150, 2) * [1, -1]  # [150 steps, 2]
TARGETS = np.arange(150, dtype=np.int64) * 10


def _elements(dataset):
    """Every batch (or unbatched element) as numpy, pairs as tuples."""
    return [tuple(np.asarray(part) for part in element) if isinstance(element, tuple)
            else (np.asarray(element),) for element in dataset]


def assert_same_as_keras(ours, theirs, *, epochs=1):
    for _ in range(epochs):  # later epochs reshuffle: they must still agree
        mine, keras_ = _elements(ours), _elements(theirs)
        assert len(mine) == len(keras_) > 0
        for a, b in zip(mine, keras_):
            assert len(a) == len(b)
            for x, y in zip(a, b):
                assert x.dtype == y.dtype and x.shape == y.shape
                np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("kwargs", [
    dict(sequence_length=10),
    dict(sequence_length=7, sequence_stride=3, sampling_rate=2, batch_size=16),
    dict(sequence_length=5, start_index=11, end_index=120, batch_size=8),
    dict(sequence_length=4, batch_size=None, sequence_stride=5),
    dict(sequence_length=6, batch_size=32, shuffle=True, seed=7),
    dict(sequence_length=6, sampling_rate=3, batch_size=5, shuffle=True, seed=123,
         start_index=3),
    dict(sequence_length=3, batch_size=None, shuffle=True, seed=1),
], ids=["defaults", "stride-rate", "start-end", "unbatched", "shuffled", "shuffled-start",
        "shuffled-unbatched"])
@pytest.mark.parametrize("with_targets", [True, False], ids=["targets", "no-targets"])
def test_same_windows_targets_and_order_as_keras(kwargs, with_targets):
    targets = TARGETS if with_targets else None
    theirs = keras.utils.timeseries_dataset_from_array(SERIES, targets, **kwargs)
    ours = from_timeseries(SERIES, targets, **kwargs)
    # Shuffled: Keras' seeded permutation and buffer, so both epochs match Keras' too.
    assert_same_as_keras(ours, theirs, epochs=2 if kwargs.get("shuffle") else 1)


def test_targets_longer_than_data_and_keras_example_two():
    # Keras' docstring example 2: predict the step after each 10-step window.
    data = np.sin(np.arange(60, dtype=np.float64))
    theirs = keras.utils.timeseries_dataset_from_array(data[:-10], data[10:], 10,
                                                       batch_size=8)
    ours = from_timeseries(data[:-10], data[10:], 10, batch_size=8)
    assert_same_as_keras(ours, theirs)
    x, y = next(iter(ours))
    np.testing.assert_array_equal(x[0], data[:10])
    assert y[0] == data[10]
    # Targets longer than the data: only the data's windows.
    ours = from_timeseries(data[:30], data, 10, batch_size=None)
    assert len(list(ours)) == 21


def test_the_window_length_is_static_and_the_dtype_kept():
    ours = from_timeseries(SERIES.astype(np.float16), TARGETS.astype(np.int32), 9,
                           batch_size=4)
    theirs = keras.utils.timeseries_dataset_from_array(
        SERIES.astype(np.float16), TARGETS.astype(np.int32), 9, batch_size=4)
    assert ours.element_spec[0] == tf.TensorSpec([None, 9, 2], tf.float16)
    assert theirs.element_spec[0] == tf.TensorSpec([None, None, 2], tf.float16)
    assert ours.element_spec[1] == theirs.element_spec[1]
    # A tensor works as well as an array.
    assert_same_as_keras(from_timeseries(tf.constant(SERIES), None, 9, batch_size=4),
                         keras.utils.timeseries_dataset_from_array(SERIES, None, 9,
                                                                   batch_size=4))


def test_no_seed_draws_one_each_call_like_keras():
    first = _elements(from_timeseries(SERIES, None, 3, batch_size=None, shuffle=True))
    second = _elements(from_timeseries(SERIES, None, 3, batch_size=None, shuffle=True))
    assert len(first) == len(second) == 148
    assert any(not np.array_equal(a[0], b[0]) for a, b in zip(first, second))
    starts = sorted(int(e[0][0, 0]) // 2 for e in first)
    assert starts == list(range(148))  # every window once


def test_too_short_is_a_data_error_naming_the_lengths():
    # Keras yields an empty dataset (fit then stops with no step run).
    assert len(list(keras.utils.timeseries_dataset_from_array(np.arange(8), None, 10))) == 0
    with pytest.raises(DataError, match=r"data is too short for one window: it has 8 "
                       r"timesteps.*\(10 - 1\) \* 1 \+ 1 = 10"):
        from_timeseries(np.arange(8), None, 10)
    with pytest.raises(DataError, match=r"it has 20 timesteps, of which 10 are used "
                       r"\(start_index=5, end_index=15\).*\(6 - 1\) \* 2 \+ 1 = 11"):
        from_timeseries(np.arange(20), None, 6, sampling_rate=2, start_index=5,
                        end_index=15)


def test_targets_that_end_before_start_index_are_named_not_an_index_error():
    # Keras counts every target but reads targets[start_index + i]: it fails mid-epoch.
    theirs = keras.utils.timeseries_dataset_from_array(np.arange(100), np.arange(30), 5,
                                                       start_index=20, batch_size=None)
    with pytest.raises(tf.errors.InvalidArgumentError):
        list(theirs)
    ours = _elements(from_timeseries(np.arange(100), np.arange(30), 5, start_index=20,
                                     batch_size=None))
    assert [int(t) for _, t in ours] == list(range(20, 30))  # the windows with a target
    assert [int(x[0]) for x, _ in ours] == list(range(20, 30))
    with pytest.raises(DataError, match=r"No window of data has a target: there are 30 "
                       r"targets and the first window's is targets\[40\]"):
        from_timeseries(np.arange(100), np.arange(30), 5, start_index=40)


@pytest.mark.parametrize("kwargs, message", [
    (dict(sequence_length=0), r"`sequence_length` must be 1 or greater. Received: "
                              r"sequence_length=0"),
    (dict(sequence_length=3, sampling_rate=1.5), r"`sampling_rate` must be an integer. "
                                                 r"Received: sampling_rate=1.5"),
    (dict(sequence_length=3, cache="memory"), r"does not take cache='memory': the windows "
                                              r"are gathered from the array in memory"),
    (dict(sequence_length=3, augment=["flip"]), r"augmentations are for images"),
    (dict(sequence_length=3, shuffle_buffer=10), r"shuffle_buffer=10 needs shuffle=True"),
    (dict(sequence_length=3, shufle=True), r"unknown argument 'shufle' \(did you mean "
                                           r"'shuffle'\?\)"),
])
def test_bad_arguments_are_named(kwargs, message):
    with pytest.raises(UserInputError, match=message):
        from_timeseries(np.arange(20), None, **kwargs)


def test_shuffle_buffer_and_deterministic_are_taken():
    ours = _elements(from_timeseries(SERIES, TARGETS, 4, batch_size=None, shuffle=True,
                                     seed=3, shuffle_buffer=500, deterministic=False))
    assert sorted(int(t) for _, t in ours) == list(range(0, 1470, 10))
    for x, t in ours:  # each window still with its own target
        assert x[0, 0] * 5 == t  # SERIES row i starts at 2i, its target is 10i


def test_input_context_splits_the_windows_between_pipelines():
    def share(pipeline_id, **kwargs):
        context = tf.distribute.InputContext(num_input_pipelines=2,
                                             input_pipeline_id=pipeline_id,
                                             num_replicas_in_sync=2)
        batches = _elements(from_timeseries(SERIES, TARGETS, 5, batch_size=8, shuffle=True,
                                            input_context=context, **kwargs))
        assert all(len(t) == 4 for _, t in batches[:-1])  # per-replica batches
        return [int(v) for _, t in batches for v in t]

    # 146 windows, 73 per pipeline: seed None means 0 with several pipelines (the same
    # permutation in each), so the two shares are disjoint and cover every window.
    first, second = share(0, drop_remainder=False), share(1, drop_remainder=False)
    assert len(first) == len(second) == 73
    assert sorted(first + second) == list(range(0, 1460, 10))
    # By default the last partial batch is dropped with several replicas (same shapes).
    assert len(share(0)) == 72


def test_a_stream_resumes_at_a_batch():
    def stream(skip):
        return _elements(from_timeseries(SERIES, TARGETS, 5, batch_size=8, shuffle=True,
                                         seed=0, stream=EpochStream(num_passes=2,
                                                                    skip_batches=skip)))

    whole, resumed = stream(0), stream(3)
    assert len(whole) == 2 * 19 and len(resumed) == len(whole) - 3
    for a, b in zip(whole[3:], resumed):
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_array_equal(a[1], b[1])


# --- from_timeseries_csv ---------------------------------------------------------------

def _write(path, text):
    path.write_text(text)
    return str(path)


@pytest.fixture
def weather(tmp_path):
    rows = ["time,temp,pressure,rain"]
    rows += [f"{i},{20 + i * 0.5},{1000 - i},{i % 3}" for i in range(40)]
    return _write(tmp_path / "weather.csv", "\n".join(rows) + "\n")


def test_csv_columns_windowed_as_from_timeseries(weather):
    table = np.loadtxt(weather, delimiter=",", skiprows=1, dtype=np.float32)
    ours = from_timeseries_csv(weather, columns=["temp", "pressure"], targets="rain",
                               sequence_length=6, sequence_stride=2, batch_size=4,
                               shuffle=True, seed=5)
    theirs = keras.utils.timeseries_dataset_from_array(
        table[:, 1:3], table[:, 3], 6, sequence_stride=2, batch_size=4, shuffle=True, seed=5)
    assert_same_as_keras(ours, theirs, epochs=2)


def test_csv_one_column_is_1d_and_none_means_every_column_but_the_targets(weather):
    x, y = next(iter(from_timeseries_csv(weather, columns="temp", targets=["rain", "time"],
                                         sequence_length=3, batch_size=2)))
    assert x.shape == (2, 3) and y.shape == (2, 2)
    np.testing.assert_array_equal(x[1], [20.5, 21.0, 21.5])
    np.testing.assert_array_equal(y[1], [1, 1])
    x, y = next(iter(from_timeseries_csv(weather, targets="rain", sequence_length=3,
                                         batch_size=2)))
    assert x.shape == (2, 3, 3)  # time, temp, pressure
    np.testing.assert_array_equal(x[0, 0], [0, 20, 1000])
    windows = next(iter(from_timeseries_csv(weather, sequence_length=3, batch_size=2,
                                            dtype="float64")))
    assert windows.shape == (2, 3, 4) and windows.dtype == tf.float64


def test_csv_target_offset_points_past_the_window(weather):
    batches = _elements(from_timeseries_csv(weather, columns="temp", targets="temp",
                                            target_offset=5, sequence_length=5,
                                            batch_size=None))
    assert len(batches) == 35  # the last window's next row is row 39
    for x, y in batches:
        assert y == x[-1] + 0.5  # the row right after the window
    with pytest.raises(UserInputError, match=r"`target_offset` must be 0 or greater"):
        from_timeseries_csv(weather, targets="temp", target_offset=-1, sequence_length=5)


def test_csv_header_with_spaces_quotes_and_blank_lines(tmp_path):
    path = _write(tmp_path / "q.csv", '"a", b\n1,"2"\n\n3,4\n5,6\n')
    x = next(iter(from_timeseries_csv(path, columns=["b", "a"], sequence_length=3)))
    np.testing.assert_array_equal(x[0], [[2, 1], [4, 3], [6, 5]])


def test_csv_missing_column_names_the_columns_that_exist(weather):
    with pytest.raises(DataError, match=r"targets='rian' names column 'rian' \(did you mean "
                       r"'rain'\?\), which is not in .*weather.csv'; its columns are "
                       r"\['time', 'temp', 'pressure', 'rain'\]"):
        from_timeseries_csv(weather, targets="rian", sequence_length=3)
    with pytest.raises(DataError, match=r"columns=\['temp', 'wind'\] names column 'wind'"):
        from_timeseries_csv(weather, columns=["temp", "wind"], sequence_length=3)


@pytest.mark.parametrize("line, message", [
    ("7,abc,3", r"line 4, column 'b': 'abc' is not a number \(float32\)"),
    ("7,,3", r"line 4, column 'b': '' is not a number"),
    ("7,8", r"line 4: 2 fields where the header has 3 \(\['a', 'b', 'c'\]\)"),
    ("7,8,9,10", r"line 4: 4 fields where the header has 3"),
])
def test_csv_bad_value_or_row_names_file_and_line(tmp_path, line, message):
    path = _write(tmp_path / "bad.csv", f"a,b,c\n1,2,3\n4,5,6\n{line}\n8,9,10\n")
    with pytest.raises(DataError, match=r"'.*bad.csv', " + message):
        from_timeseries_csv(path, columns=["a", "b"], sequence_length=2)


def test_csv_bad_value_in_a_column_not_read_is_ignored(tmp_path):
    path = _write(tmp_path / "dates.csv", "date,v\n2024-01-01,1\n2024-01-02,2\n"
                  "2024-01-03,3\n")
    x = next(iter(from_timeseries_csv(path, columns="v", sequence_length=2)))
    np.testing.assert_array_equal(x, [[1, 2], [2, 3]])


def test_csv_too_short_missing_or_empty_file_is_a_data_error(tmp_path, weather):
    with pytest.raises(DataError, match=r"Time series CSV file '.*weather.csv' is too "
                       r"short for one window: it has 40 timesteps.* = 50"):
        from_timeseries_csv(weather, targets="rain", sequence_length=50)
    header_only = _write(tmp_path / "h.csv", "a,b\n")
    with pytest.raises(DataError, match=r"'.*h.csv' is too short for one window: it has 0 "
                       r"timesteps"):
        from_timeseries_csv(header_only, sequence_length=1)
    with pytest.raises(DataError, match=r"'.*empty.csv' is empty: it needs a header line"):
        from_timeseries_csv(_write(tmp_path / "empty.csv", ""), sequence_length=1)
    with pytest.raises(DataError, match=r"'.*nope.csv' does not exist\."):
        from_timeseries_csv(str(tmp_path / "nope.csv"), sequence_length=1)
    with pytest.raises(DataError, match=r"No window of Time series CSV file .* has a "
                       r"target: there are 0 targets"):
        from_timeseries_csv(weather, targets="rain", target_offset=40, sequence_length=2)


def test_under_a_mirrored_strategy_each_replica_gets_half_of_each_window_batch(logical_cpus):
    strategy = tf.distribute.MirroredStrategy(logical_cpus)
    with strategy.scope():
        ds = from_timeseries(SERIES, TARGETS, 5, batch_size=8)  # 146 windows
    assert ds.element_spec[0].shape.as_list() == [8, 5, 2]  # the remainder dropped
    seen = []
    for windows, targets in strategy.experimental_distribute_dataset(ds):
        parts = zip(strategy.experimental_local_results(windows),
                    strategy.experimental_local_results(targets))
        for x, t in parts:
            assert x.shape == (4, 5, 2)
            np.testing.assert_array_equal(x[:, 0, 0].numpy() * 5, t.numpy())
            seen += t.numpy().tolist()
    assert seen == list(range(0, 1440, 10))  # chronological, 18 whole batches of 8


def test_the_sequential_baseline_and_fit_take_the_same_windows():
    baseline = from_timeseries(SERIES, TARGETS, 5, batch_size=16, sequential=True)
    assert_same_as_keras(baseline, keras.utils.timeseries_dataset_from_array(
        SERIES, TARGETS, 5, batch_size=16))
    model = keras.Sequential([keras.Input((5, 2)), keras.layers.Flatten(),
                              keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    history = model.fit(from_timeseries(SERIES / 300, TARGETS / 1500, 5, batch_size=16),
                        epochs=1, verbose=0, shuffle=False)
    assert len(history.history["loss"]) == 1 and np.isfinite(history.history["loss"][0])


# ------------------------------------------------------- the recipe source: targets and splits


def test_window_targets_are_the_next_rows_after_the_window():
    from tfaccel.data.sources.timeseries import window_targets

    rows = np.arange(10.0)
    # Windows of 3 rows every row (last step 2): the target of the window at row i is
    # rows i+3, i+4; the last window with a whole target starts at row 5.
    np.testing.assert_array_equal(window_targets(rows, horizon=2, target_offset=0,
                                                 last_step=2),
                                  [[3, 4], [4, 5], [5, 6], [6, 7], [7, 8], [8, 9]])
    two = np.stack([rows, -rows], axis=1)
    got = window_targets(two, horizon=2, target_offset=0, last_step=2)
    assert got.shape == (6, 2, 2)  # [windows, steps, columns]: step-major once flattened
    np.testing.assert_array_equal(got[0].reshape(-1), [3, -3, 4, -4])
    np.testing.assert_array_equal(window_targets(rows, horizon=None, target_offset=4,
                                                 last_step=2), rows[4:])
    assert window_targets(rows[:4], horizon=2, target_offset=0, last_step=2).shape == (0, 2)


def test_series_statistics_come_from_the_training_rows_and_changes_from_the_anchor():
    from tfaccel.data.sources.timeseries import series_statistics

    data = np.array([[1.0, 5.0], [3.0, 5.0], [5.0, 5.0], [7.0, 5.0]])
    targets = np.array([[4.0], [8.0]])  # windows of 2 rows (last step 1) at rows 0 and 1
    stats = series_statistics(data, targets, anchor=None, last_step=1)
    assert stats["input_mean"] == [4.0, 5.0] and stats["input_std"][1] == 1.0  # flat: 1
    np.testing.assert_allclose(stats["input_std"][0], np.std([1, 3, 5, 7]))
    assert stats["target_mean"] == [6.0] and stats["target_std"] == [2.0]
    # Anchored at column 0: changes 4 - 3 and 8 - 5 from each window's last row.
    anchored = series_statistics(data, targets, anchor=[0], last_step=1)
    assert anchored["target_mean"] == [2.0] and anchored["target_std"] == [1.0]


def _step_csv(path, rows):
    """A series whose value is its row number (and 1000 + row in a second column)."""
    path.write_text("step,y\n" + "".join(f"{i},{1000 + i}\n" for i in range(rows)))
    return path


@pytest.mark.parametrize("stride, shuffle", [(1, 0), (3, 0), (2, 500)])
def test_forecast_windows_and_targets_stay_on_their_side_of_the_last_span(tmp_path, stride,
                                                                          shuffle):
    from tfaccel.config.recipe import recipe_from_dict
    from tfaccel.data.from_recipe import build_datasets

    rows, length, horizon = 200, 10, 4
    path = _step_csv(tmp_path / "steps.csv", rows)
    recipe = recipe_from_dict({"data": {
        "source": "timeseries", "path": str(path), "label_key": "y",
        "validation_fraction": 0.25, "shuffle_buffer": shuffle,
        "timeseries": {"sequence_length": length, "sequence_stride": stride,
                       "horizon": horizon}}})
    train, val, info = build_datasets(recipe.data, global_batch_size=16, num_replicas=1,
                                      seed=3, deterministic=True)
    assert info.task == "regression" and info.num_outputs == horizon
    assert info.series.horizon == horizon and info.series.columns == ["step", "y"]
    assert info.series.anchor == [1]
    boundary = 150  # the last int(0.25 * 200) = 50 rows held out
    # Training starts 0, stride, ... up to 150 - 10 - 4 = 136; validation from row 150 to 186.
    expected = {"train": np.arange(0, boundary - length - horizon + 1, stride),
                "val": boundary + np.arange(0, rows - boundary - length - horizon + 1,
                                            stride)}
    for name, dataset in (("train", train), ("val", val)):
        windows, targets = zip(*[(w.numpy(), y.numpy()) for w, y in dataset])
        windows, targets = np.concatenate(windows), np.concatenate(targets)
        starts = windows[:, 0, 0].astype(int)
        if name == "train" and shuffle:
            assert not np.array_equal(starts, expected["train"])  # shuffled...
            starts = np.sort(starts)                             # ...among themselves only
            order = np.argsort(windows[:, 0, 0])
            windows, targets = windows[order], targets[order]
        np.testing.assert_array_equal(starts, expected[name])
        np.testing.assert_array_equal(windows[:, :, 0], starts[:, None] + np.arange(length))
        # The target: column y of the next `horizon` rows after the window's last row.
        np.testing.assert_array_equal(targets, 1000 + starts[:, None] + length
                                      + np.arange(horizon))
        if name == "train":  # no training window reads a validation row, nor its target
            assert windows[:, :, 0].max() < boundary and (targets - 1000).max() < boundary
    assert (info.train_examples, info.validation_examples) == (len(expected["train"]),
                                                                len(expected["val"]))


@pytest.mark.parametrize("delimiter", ["auto", "semicolon"])
def test_the_recipe_reads_a_semicolon_series_and_text_labels_by_the_one_reader(tmp_path,
                                                                               delimiter):
    """data.table.delimiter reaches source timeseries (auto: detected, as for csv), and the
    label column is read by the same reader: text labels, spaces and a blank line."""
    from tfaccel.config.recipe import recipe_from_dict
    from tfaccel.data.from_recipe import build_datasets

    lines = ["step ; kind"] + [f"{i};{' low' if i % 3 else 'high '}" for i in range(60)]
    lines.insert(30, "")
    path = tmp_path / "semi.csv"
    path.write_text("\n".join(lines) + "\n")
    recipe = recipe_from_dict({"data": {
        "source": "timeseries", "path": str(path), "label_key": "kind",
        "validation_fraction": 0.25, "shuffle_buffer": 0,
        "table": {"delimiter": delimiter}, "timeseries": {"sequence_length": 5}}})
    train, _, info = build_datasets(recipe.data, global_batch_size=8, num_replicas=1, seed=0,
                                    deterministic=True)
    assert info.class_names == ["high", "low"] and info.series.columns == ["step"]
    windows, labels = (np.concatenate(c) for c in zip(*[(w.numpy(), y.numpy())
                                                         for w, y in train]))
    starts = windows[:, 0, 0].astype(int)
    np.testing.assert_array_equal(starts, np.arange(len(starts)))  # 60 rows, blank skipped
    # The window starting at row i is labelled by row i (target_offset 0): "high" (class 0)
    # on every third row, its spaces stripped.
    np.testing.assert_array_equal(labels.reshape(-1), np.where(starts % 3 == 0, 0, 1))
