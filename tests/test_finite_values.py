"""THE finite-values rule and THE class-count guard in every numeric and labelled source:
named (file, line, column, key), exit 2 from `tfaccel train`, nothing silent."""

import numpy as np
import pytest
from guard_helpers import assert_refused, lines, run, table

import tfaccel.data as data
from tfaccel.data import finite_values
from tfaccel.errors import DataError

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)

REFUSED = "NaN and infinite features are refused"


def test_first_non_finite_and_the_message_shape():
    assert finite_values.first_non_finite(np.array([1, 2])) is None
    assert finite_values.first_non_finite(np.array([[1.0, np.inf], [np.nan, 0]])) == (
        (0, 1), np.inf, 2)
    assert finite_values.is_non_finite_number(" NaN ")
    assert finite_values.is_non_finite_number("-Infinity")
    assert not finite_values.is_non_finite_number("1e40")  # a float64; float32 is checked
    assert not finite_values.is_non_finite_number("nancy")
    with pytest.raises(DataError, match=r"^x\['a'\] holds nan at timestep 2 \(position "
                                        r"\(1,\)\); 1 value\(s\) are not finite\. NaN and"):
        finite_values.check_array({"a": np.array([[0, 0], [0, 0], [0, np.nan]])}, name="x",
                                  unit="timestep")


# --- CSV: "nan" in the inference rows made the column a string (a category in a recipe);
# past them it passed into the features -------------------------------------------------------


@pytest.mark.parametrize("row, text", [(5, "nan"), (250, "inf"), (150, "1e40")])
def test_csv_names_a_non_finite_number(tmp_path, row, text):
    path = tmp_path / "t.csv"
    path.write_text(table(300, bad=(row, text)))
    message = f"CSV file {str(path)!r}, line {row + 2}, column 'x' holds {text!r}. {REFUSED}"
    with pytest.raises(DataError, match="^" + message.replace(".", r"\.")):
        data.from_csv(str(path), batch_size=8, label_name="label")
    # A recipe reads "nan" as a missing value (imputed, with an indicator: the column plan
    # of tfaccel.reading.table_plan); "inf" and a number beyond float32 are refused there.
    result = run(tmp_path, source="csv", path=str(path), label_key="label")
    if text == "nan":
        assert result.exit_code == 0 and "1 imputed" in result.output, result.output
    else:
        assert_refused(result, f"line {row + 2}, column 'x': {text!r} is not a finite number")


def test_csv_text_columns_keep_their_nan_words(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("name,label\nnan,0\nNancy,1\n")
    ds = data.from_csv(str(path), batch_size=2, label_name="label", shuffle_buffer=0)
    assert ds.column_types["name"] == "string"
    np.testing.assert_array_equal(next(iter(ds))[0]["name"], [b"nan", b"Nancy"])


# --- time series ---------------------------------------------------------------------------


def test_a_time_series_csv_names_nan_by_line_and_column(tmp_path):
    path = tmp_path / "s.csv"
    # A blank line before it: numpy skips it, the line number must not.
    path.write_text(table(40, bad=(20, "nan")).replace("\n5.0,10,0\n", "\n5.0,10,0\n\n"))
    message = f"Time series CSV file {str(path)!r}, line 23, column 'x' holds 'nan'; 1 value(s)"
    with pytest.raises(DataError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        data.from_timeseries_csv(str(path), sequence_length=3, targets="label")
    assert_refused(run(tmp_path, source="timeseries", path=str(path),
                       timeseries={"sequence_length": 3}), message, REFUSED)


def test_from_timeseries_refuses_nan_data_and_infinite_targets():
    series = np.arange(50, dtype="float32")
    series[7] = np.nan
    with pytest.raises(DataError, match=r"^data holds nan at timestep 7; 1 value"):
        data.from_timeseries(series, None, 3)
    targets = np.zeros(50)
    targets[9] = -np.inf
    with pytest.raises(DataError, match=r"^targets holds -inf at timestep 9"):
        data.from_timeseries(np.arange(50.0), targets, 3)


# --- fewer than 2 classes: the model's "num_classes must be an integer >= 2, got 1" named
# neither the data nor the key ---------------------------------------------------------------


def _one_class_csv(tmp_path):
    (tmp_path / "t.csv").write_text(table(20, classes=1))
    return {"source": "csv", "path": str(tmp_path / "t.csv"), "label_key": "label"}


def _one_class_series(tmp_path):
    (tmp_path / "s.csv").write_text(table(20, classes=1))
    return {"source": "timeseries", "path": str(tmp_path / "s.csv"), "label_key": "label",
            "timeseries": {"sequence_length": 3}}


def _one_class_lines(tmp_path):
    (tmp_path / "l.tsv").write_text(lines(20, labels=("one",)))
    return {"source": "text_lines", "path": str(tmp_path / "l.tsv")}


def _one_class_folder(tmp_path):
    (tmp_path / "texts" / "only").mkdir(parents=True)
    for i in range(6):
        (tmp_path / "texts" / "only" / f"{i}.txt").write_text(f"text {i}")
    return {"source": "text_folder", "path": str(tmp_path / "texts")}


@pytest.mark.parametrize("make, origin", [
    (_one_class_csv, "its label column data.label_key 'label'"),
    (_one_class_series, "its label column data.label_key 'label'"),
    (_one_class_lines, "the label field of its lines"),
    (_one_class_folder, "its class sub-folders"),
])
def test_one_class_is_named_with_the_data_and_the_key(tmp_path, make, origin):
    from tfaccel.config.recipe import recipe_from_dict
    from tfaccel.data.from_recipe import build_datasets

    keys = make(tmp_path)
    message = (f"data.path {keys['path']!r} (data.source {keys['source']}) holds 1 class in "
               f"{origin}")
    # Where the label rule (tfaccel.reading.labels) reads the labels, it says it first.
    if keys["source"] == "csv":
        message = f"data.label_key 'label' of data.path {keys['path']!r} holds one class (0)"
    if keys["source"] == "text_lines":
        message = f"the label field of data.path {keys['path']!r} holds one class (one)"
    with pytest.raises(DataError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        build_datasets(recipe_from_dict({"data": keys}).data, global_batch_size=4, num_replicas=1, seed=0,
                       deterministic=True)
    assert_refused(run(tmp_path, **keys), message, "a classifier needs at least 2 classes")
