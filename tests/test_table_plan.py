"""The column plan of a table (tfaccel/reading/table_plan.py), and hostile tables through
the library (the plan, then the csv source's batches) and through `tfaccel train`."""

import datetime
import json

import numpy as np
import pytest
from click.testing import CliRunner

from tfaccel.cli.main import main
from tfaccel.errors import DataError
from tfaccel.reading import table_plan

# A tiny table: x decides the label (y is noise, color text); 24 rows.
ROWS = 24


def _lines(*, header="x,y,color,label", row=None, rows=ROWS):
    row = row or (lambda i: f"{(i % 6) - 2.5},{(i * 7) % 5},{'rgb'[i % 3]},"
                            f"{'yes' if i % 6 >= 3 else 'no'}")
    return [header] + [row(i) for i in range(rows)]


def _write(tmp_path, lines, *, name="t.csv", newline="\n", end="\n", bom=False):
    path = tmp_path / name
    path.write_bytes((("\ufeff" if bom else "") + newline.join(lines) + end).encode())
    return path


def _plan(path, **keys):
    label = keys.pop("label", ["label"])
    scan = table_plan.scan_files([str(path)], label=label,
                                 na_values=keys.get("na_values", ()))
    return scan, table_plan.plan_table(scan, label=label, **keys)


def _build(path, **data):
    from tfaccel.config.recipe import recipe_from_dict
    from tfaccel.data.from_recipe import build_datasets

    recipe = recipe_from_dict({"data": {"source": "csv", "path": str(path), "label_key": "label",
                                        "validation_fraction": 0.0, "shuffle_buffer": 0,
                                        **data}})
    return build_datasets(recipe.data, global_batch_size=8, num_replicas=1, seed=0,
                          deterministic=True, raw=True)


def _features(dataset):
    batches = list(dataset.as_numpy_iterator())
    return ({k: np.concatenate([b[0][k] for b in batches]) for k in batches[0][0]},
            np.concatenate([b[1] for b in batches]))


def _train(tmp_path, path, *, keys="", label="label"):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        f"data: {{source: csv, path: {path}, label_key: {label}, validation_fraction: 0.0"
        f"{keys}}}\nmodel: {{name: mlp, params: {{hidden_units: [8]}}}}\n"
        "training: {epochs: 1, global_batch_size: 8}\n"
        f"runtime: {{runs_dir: {tmp_path / 'runs'}, verbose: 0}}\n")
    result = CliRunner().invoke(main, ["train", str(recipe), "--run-dir",
                                       str(tmp_path / "run")])
    summary = tmp_path / "run" / "summary.json"
    return result, json.loads(summary.read_text()) if summary.exists() else None


def _refused(result, *words):
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    message = result.output[result.output.index("Error: "):].strip()
    for word in words:
        assert word in message, (word, message)
    return message


# --- the plan, TF-free ---------------------------------------------------------------------

def test_the_plan_sorts_columns_and_reads_text_labels_as_sorted_classes(tmp_path):
    scan, plan = _plan(_write(tmp_path, _lines()))
    assert scan.rows == ROWS and scan.delimiter == ","
    assert plan.named("numeric") == ["x", "y"] and plan.named("categorical") == ["color"]
    assert plan.labels.task == "classification"
    assert plan.labels.class_names == ("no", "yes") and plan.label_keys == {"no": 0, "yes": 1}
    assert plan.features == 2 + 3 + 1  # two numbers, three colours + one unknown slot
    assert plan.line() == "table: 2 numeric, 1 categorical column(s) as 6 features."


def test_a_split_of_the_rows_is_scanned_alone(tmp_path):
    path = _write(tmp_path, _lines())
    scan = table_plan.scan_files([str(path)], label=["label"],
                                 keep=lambda _, index: index % 4 != 0)
    assert scan.rows == 18 and scan.scans["color"].present == 18
    assert scan.scans["x"].total == pytest.approx(sum((i % 6) - 2.5 for i in range(ROWS)
                                                      if i % 4))


def test_na_anywhere_keeps_a_numeric_column_numeric_imputed_with_the_mean(tmp_path):
    # The silent 410-feature case: NA within the first 100 rows made a numeric column
    # categorical (one-hot per value); now every marker is missing, the column stays numeric.
    values = [f"{v}" for v in range(1, 121)]
    for row, marker in ((3, "NA"), (40, "N/A"), (60, "?"), (99, ""), (110, "null")):
        values[row] = marker
    path = _write(tmp_path, ["size,label"] + [f"{v},{i % 2}" for i, v in enumerate(values)])
    _, plan = _plan(path)
    assert plan.named("numeric") == ["size"] and plan.named("categorical") == []
    present = [float(v) for v in values if v not in ("NA", "N/A", "?", "", "null")]
    assert plan.summary()["imputed"] == {"size": pytest.approx(np.mean(present), abs=1e-5)}
    assert plan.features == 2  # the value and its missing indicator
    assert "imputed" in plan.line()


def test_declared_na_values_and_types(tmp_path):
    path = _write(tmp_path, ["zip,score,label", "01234,-,0", "02345,7,1", "01234,8,0"])
    with pytest.raises(DataError, match=r"line 2, column 'score': '-' is not a finite number"):
        _plan(path)
    _, plan = _plan(path, na_values=["-"], types={"zip": "string"})
    assert plan.named("categorical") == ["zip"] and plan.named("numeric") == ["score"]
    _, plan = _plan(path, na_values=["-"], types={"zip": "ignore"})
    assert plan.named("ignored") == ["zip"]
    with pytest.raises(DataError, match=r"data.table.types\['zip'\] must be one of"):
        _plan(path, na_values=["-"], types={"zip": "text"})
    with pytest.raises(DataError, match="data.table.types names 'zipp'.*did you mean 'zip'"):
        _plan(path, na_values=["-"], types={"zipp": "string"})


def test_a_numeric_column_with_one_stray_word_is_refused_naming_column_line_value(tmp_path):
    lines = _lines()
    lines[7] = "oops,1,r,no"
    with pytest.raises(DataError) as refused:
        _plan(_write(tmp_path, lines))
    message = str(refused.value)
    for words in ("line 8, column 'x': 'oops' is not a finite number", "23 of its 24 present values",
                  "data.table.na_values: ['oops']", "data.table.types: {x: string}"):
        assert words in message, message
    # Declared text on purpose, it is a category.
    _, plan = _plan(_write(tmp_path, lines), types={"x": "string"})
    assert "x" in plan.named("categorical")


def test_a_date_column_becomes_calendar_features_never_one_hot_per_day(tmp_path):
    start = datetime.date(2020, 12, 25)
    lines = ["date,t,label"] + [f"{start + datetime.timedelta(days=i)},{i % 5},{i % 2}"
                                for i in range(400)]
    _, plan = _plan(_write(tmp_path, lines))
    assert plan.named("date") == ["date"] and plan.named("categorical") == []
    assert plan.features == 1 + 1 + 6  # t, the year, sin/cos of month, weekday, day of year
    assert any("date column 'date' (YYYY-MM-DD)" in note for note in plan.notes)
    _, plan = _plan(_write(tmp_path, lines), types={"date": "ignore"})
    assert plan.named("ignored") == ["date"] and plan.features == 1


@pytest.mark.parametrize("texts, fmt", [
    (["03/15/2021", "12/01/2021"], "MM/DD/YYYY"), (["15/03/2021", "01/12/2021"], "DD/MM/YYYY"),
    (["2021-03-15T10:30:00", "2021-12-01 23:59"], "YYYY-MM-DD"),
    (["15.03.2021", "1.12.2021"], "DD.MM.YYYY")])
def test_date_formats(texts, fmt):
    scan = table_plan.ColumnScan("d")
    for text in texts:
        scan.add(text, missing=False, where=("f", 1))
    assert scan.date_format == fmt


def test_an_id_like_text_column_is_ignored_and_said(tmp_path):
    lines = ["name,x,label"] + [f"n{i},{i % 7},{i % 2}" for i in range(60)]
    _, plan = _plan(_write(tmp_path, lines))
    assert plan.named("ignored") == ["name"] and plan.features == 1
    assert any("'name' looks like an id (60 distinct values in 60 rows)" in n and
               "data.table.types: {name: string}" in n for n in plan.notes)
    _, plan = _plan(_write(tmp_path, lines), types={"name": "string"})
    assert plan.named("categorical") == ["name"] and plan.features == 1 + 61
    # An integer id is a number unless named a category, and then refused.
    lines = ["id,x,label"] + [f"{1000 + i},{i % 7},{i % 2}" for i in range(60)]
    _, plan = _plan(_write(tmp_path, lines, name="ids.csv"))
    assert plan.named("numeric") == ["id", "x"]
    with pytest.raises(DataError, match=r"categorical names 'id', which looks like an id "
                       r"\(60 distinct values in 60 rows\)"):
        _plan(_write(tmp_path, lines, name="ids.csv"), categorical=["id"])


@pytest.mark.parametrize("labels, task, names, outputs", [
    (["1", "2", "3"], "classification", ("1", "2", "3"), 3),  # 1..K: K classes, none empty
    (["-1", "1", "-1"], "classification", ("-1", "1"), 2),
    (["0.5", "1.25", "3.0"], "regression", None, 1)])
def test_labels_through_the_label_rule(tmp_path, labels, task, names, outputs):
    lines = ["x,label"] + [f"{i},{labels[i % 3]}" for i in range(9)]
    _, plan = _plan(_write(tmp_path, lines))
    assert (plan.labels.task, plan.labels.class_names, plan.labels.num_outputs) == \
        (task, names, outputs)


def test_a_float_target_under_classification_is_named(tmp_path):
    lines = ["x,price"] + [f"{i},{i * 1.5 + 0.25}" for i in range(9)]
    with pytest.raises(DataError, match="data.label_key 'price'.*holds float values"):
        _plan(_write(tmp_path, lines), label=["price"], task="classification")


def test_several_label_columns_are_multi_label_or_regression(tmp_path):
    lines = ["x,a,b"] + [f"{i},{i % 2},{(i // 2) % 2}" for i in range(8)]
    _, plan = _plan(_write(tmp_path, lines), label=["a", "b"])
    assert plan.labels.task == "multi_label" and plan.labels.class_names == ("a", "b")
    lines = ["x,a,b"] + [f"{i},{i * 0.5},{i * 1.5}" for i in range(8)]
    _, plan = _plan(_write(tmp_path, lines, name="r.csv"), label=["a", "b"])
    assert plan.labels.task == "regression" and plan.labels.num_outputs == 2


def test_a_missing_label_is_refused_naming_the_line(tmp_path):
    lines = _lines()
    lines[5] = "NA,NA,NA,NA"  # an all-NA row
    with pytest.raises(DataError, match=r"line 6: the label column 'label' is missing there "
                       r"\(1 row\(s\) in all"):
        _plan(_write(tmp_path, lines))


# --- hostile tables through the csv source (library) ---------------------------------------

def test_hostile_formats_read_the_same_values(tmp_path):
    plain = _features(_build(_write(tmp_path, _lines(), name="plain.csv"))[0])
    variants = {
        "bom_crlf": dict(newline="\r\n", bom=True),
        "semicolons": dict(lines=[line.replace(",", ";") for line in _lines()]),
        "trailing_blank": dict(end="\n\n\n"),
        "header_spaces": dict(lines=[" x , y ,color ,  label "] + _lines()[1:]),
    }
    for name, how in variants.items():
        lines = how.pop("lines", _lines())
        got = _features(_build(_write(tmp_path, lines, name=f"{name}.csv", **how))[0])
        assert sorted(got[0]) == sorted(plain[0]), name
        for key in plain[0]:
            np.testing.assert_array_equal(got[0][key], plain[0][key], err_msg=name)
        np.testing.assert_array_equal(got[1], plain[1], err_msg=name)


def test_quoted_commas_stay_in_their_value(tmp_path):
    lines = ["x,place,label"] + [f'{i},"{"Dream, north" if i % 2 else "Biscoe"}",{i % 2}'
                                 for i in range(8)]
    (features, labels), _ = _features(_build(_write(tmp_path, lines))[0]), None
    assert set(features["place"]) == {b"Dream, north", b"Biscoe"}
    np.testing.assert_array_equal(features["place"] == b"Dream, north", labels == 1)


def test_missing_numbers_are_imputed_with_an_indicator_and_text_gets_its_category(tmp_path):
    lines = ["a,c,label", "1,x,0", "NA,,1", "3,y,0", "?,null,1"]
    features, labels = _features(_build(_write(tmp_path, lines))[0])
    np.testing.assert_allclose(features["a"], [1, 2, 3, 2])  # the mean of 1 and 3
    np.testing.assert_array_equal(features["a_missing"], [0, 1, 0, 1])
    assert list(features["c"]) == [b"x", b"[missing]", b"y", b"[missing]"]
    np.testing.assert_array_equal(labels, [0, 1, 0, 1])


def test_calendar_features_match_python_s_calendar(tmp_path):
    days = [datetime.date(1969, 12, 31), datetime.date(2000, 2, 29), datetime.date(2024, 1, 1),
            datetime.date(2024, 12, 31), datetime.date(1900, 3, 1)]
    lines = ["d,label"] + [f"{d:%d/%m/%Y},{i % 2}" for i, d in enumerate(days)] + ["NA,0"]
    _, _, info = _build(_write(tmp_path, lines))
    features, _ = _features(_build(_write(tmp_path, lines))[0])
    weekday = np.array([(d.isoweekday() % 7) for d in days])  # 0: Sunday
    yearday = np.array([d.timetuple().tm_yday - 1 for d in days])
    np.testing.assert_allclose(features["d_year"][:5], [d.year for d in days])
    np.testing.assert_allclose(features["d_weekday_sin"][:5], np.sin(weekday * 2 * np.pi / 7),
                               atol=1e-5)
    np.testing.assert_allclose(features["d_yearday_cos"][:5],
                               np.cos(yearday * 2 * np.pi / 366), atol=1e-5)
    np.testing.assert_allclose(features["d_month_sin"][:5],
                               np.sin((np.array([d.month for d in days]) - 1) * np.pi / 6),
                               atol=1e-5)
    # The missing date: the mean year, zeros on the circles, and its indicator.
    assert features["d_year"][5] == pytest.approx(np.mean([d.year for d in days]), abs=1e-3)
    assert features["d_month_sin"][5] == 0 and features["d_missing"][5] == 1


def test_the_feature_count_of_the_plan_is_the_feature_space_s(tmp_path):
    from tfaccel.config.recipe import recipe_from_dict
    from tfaccel.data.from_recipe import build_datasets

    start = datetime.date(2021, 1, 1)
    lines = ["d,a,c,label"] + [f"{start + datetime.timedelta(days=3 * i)},"
                               f"{'NA' if i % 5 == 0 else i},{'pqr'[i % 3]},{i % 3 + 1}"
                               for i in range(30)]
    path = _write(tmp_path, lines)
    _, plan = _plan(path)
    recipe = recipe_from_dict({"data": {"source": "csv", "path": str(path), "label_key": "label",
                                        "validation_fraction": 0.0}})
    train, _, info = build_datasets(recipe.data, global_batch_size=8, num_replicas=1, seed=0,
                                    deterministic=True)
    assert info.table.features == plan.features == 7 + 2 + 4
    assert info.class_names == ["1", "2", "3"] and info.num_classes == 3  # labels 1..3
    assert info.task == "classification" and info.num_outputs == 3
    labels = np.concatenate([y for _, y in train.as_numpy_iterator()])
    assert sorted(set(labels.tolist())) == [0, 1, 2]


# --- hostile tables through `tfaccel train` ------------------------------------------------

@pytest.mark.parametrize("case", ["quoted_commas", "bom", "crlf", "semicolons",
                                  "trailing_blank", "header_spaces"])
def test_train_reads_hostile_formats(tmp_path, case):
    lines = _lines()
    how = {}
    if case == "quoted_commas":
        lines = [lines[0]] + [line.replace(",r,", ',"r, dark",') for line in lines[1:]]
    elif case == "semicolons":
        lines = [line.replace(",", ";") for line in lines]
    elif case == "header_spaces":
        lines = [" x , y , color , label "] + lines[1:]
    how = {"bom": dict(bom=True), "crlf": dict(newline="\r\n", end="\r\n"),
           "trailing_blank": dict(end="\n\n")}.get(case, {})
    result, summary = _train(tmp_path, _write(tmp_path, lines, **how))
    assert result.exit_code == 0, result.output
    table = summary["dataset"]["table"]
    assert (table["numeric"], table["categorical"]) == (["x", "y"], ["color"])
    assert table["features"] == 6 and summary["dataset"]["train_examples"] == ROWS
    assert "table: 2 numeric, 1 categorical column(s) as 6 features" in result.output


def test_train_with_na_in_the_first_rows_keeps_numbers_numeric(tmp_path):
    lines = _lines(rows=120)
    lines[2] = "NA,NA,NA,yes"
    result, summary = _train(tmp_path, _write(tmp_path, lines))
    assert result.exit_code == 0, result.output
    table = summary["dataset"]["table"]
    # x, y, their indicators, 3 colours + the missing one + the unknown slot
    assert table["numeric"] == ["x", "y"] and table["features"] == 2 + 2 + 5
    assert set(table["imputed"]) == {"x", "y"}
    assert "2 numeric (2 imputed, with missing indicators), 1 categorical" in result.output


def test_train_turns_a_date_column_into_calendar_features(tmp_path):
    start = datetime.date(2022, 1, 1)
    lines = ["date,x,label"] + [f"{start + datetime.timedelta(days=i)},{i % 4},{i % 2}"
                                for i in range(80)]
    result, summary = _train(tmp_path, _write(tmp_path, lines))
    assert result.exit_code == 0, result.output
    table = summary["dataset"]["table"]
    assert table["date"] == ["date"] and table["features"] == 1 + 7
    assert "date column 'date' (YYYY-MM-DD) as calendar features" in result.output


def test_train_refuses_a_stray_word_naming_column_line_and_value(tmp_path):
    lines = _lines()
    lines[9] = "n/a?,1,g,no"
    result, _ = _train(tmp_path, _write(tmp_path, lines))
    _refused(result, "line 10, column 'x': 'n/a?' is not a finite number",
             "data.table.na_values: ['n/a?']")
    # Declared as a marker, it trains.
    result, summary = _train(tmp_path, _write(tmp_path, lines),
                             keys=", table: {na_values: ['n/a?']}")
    assert result.exit_code == 0, result.output
    assert summary["dataset"]["table"]["imputed"].keys() == {"x"}


def test_train_refuses_an_all_na_row_for_its_missing_label(tmp_path):
    lines = _lines()
    lines[4] = "NA,NA,NA,NA"
    result, _ = _train(tmp_path, _write(tmp_path, lines))
    _refused(result, "line 5: the label column 'label' is missing there")


def test_train_refuses_a_label_column_with_one_value(tmp_path):
    lines = _lines(row=lambda i: f"{i},{i % 3},r,same")
    result, _ = _train(tmp_path, _write(tmp_path, lines))
    _refused(result, "data.label_key 'label'", "holds one class (same)")


def test_train_names_the_delimiter_when_the_header_says_another(tmp_path):
    lines = [line.replace(",", ";") for line in _lines()]
    result, _ = _train(tmp_path, _write(tmp_path, lines), keys=", table: {delimiter: comma}")
    _refused(result, "reads as one column 'x;y;color;label'", "data.table.delimiter: semicolon")


def test_validate_show_prints_the_plan_without_tensorflow(tmp_path):
    from tf_free import heavy_modules_after

    lines = _lines()
    lines[3] = "NA,1,b,yes"
    path = _write(tmp_path, lines)
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"data: {{source: csv, path: {path}, label_key: label}}\n"
                      "model: {name: mlp}\n")
    result = CliRunner().invoke(main, ["validate", str(recipe), "--show"])
    assert result.exit_code == 0, result.output
    assert ("# table: 2 numeric (1 imputed, with missing indicators), 1 categorical column(s) "
            "as 7 features. (24 rows, comma-separated)") in result.output
    assert "#   label label: classification, 2 output(s): no, yes" in result.output
    body = (f"r = CliRunner().invoke(main, ['validate', {str(recipe)!r}, '--show'])\n"
            "assert r.exit_code == 0 and '# table:' in r.output, r.output\n")
    assert heavy_modules_after(body) == []


def test_validate_show_plans_over_the_training_rows_of_a_row_split(tmp_path):
    # One file, validation_fraction 0.25: the run plans on its 18 training rows (their
    # means, categories and labels); --show must show that plan, not all 24 rows'.
    from tfaccel.config.recipe import recipe_from_dict
    from tfaccel.data.sources.csv_tables import CsvSource

    lines = _lines(row=lambda i: f"{i * i},{i % 5},{'rgb'[i % 3]},{'yes' if i % 2 else 'no'}")
    path = _write(tmp_path, lines)
    data = {"source": "csv", "path": str(path), "label_key": "label",
            "validation_fraction": 0.25}
    recipe = tmp_path / "r.yaml"
    recipe.write_text(json.dumps({"seed": 3, "data": data, "model": {"name": "mlp"}}))
    run = recipe_from_dict({"seed": 3, "data": data, "model": {"name": "mlp"}})
    _, _, scan, _, plan = CsvSource(run.data, seed=3).plan()
    assert scan.rows == 18
    mean = next(c.mean for c in plan.columns if c.name == "x")
    assert abs(mean - np.mean([i * i for i in range(24)])) > 0.1  # the split moved it
    result = CliRunner().invoke(main, ["validate", str(recipe), "--show"])
    assert result.exit_code == 0, result.output
    assert "as 6 features. (18 rows, comma-separated)" in result.output
    assert f"mean {mean:.6g}" in result.output
