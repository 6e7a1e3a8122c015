"""benchmarks/real_data/table_baselines.py: the baselines read the recipe's own split, columns and task."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "benchmarks" / "real_data"


def _load(name):
    sys.path.insert(0, str(FOLDER))
    try:
        spec = importlib.util.spec_from_file_location(name, FOLDER / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(FOLDER))


baselines = _load("table_baselines")


def _recipe(tmp_path, data_yaml, train, test):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "train.csv").write_text(train)
    (tmp_path / "d" / "test.csv").write_text(test)
    recipe = tmp_path / "r.yaml"
    recipe.write_text("data:\n  source: csv\n  path: d/train.csv\n  validation_path: "
                      "d/test.csv\n  prepare: python make.py\n" + data_yaml)
    return recipe


def test_the_table_follows_the_recipe_columns_and_the_label_rule(tmp_path):
    pytest.importorskip("pandas")
    rows = "".join(f"{i},{i % 7 if i % 5 else 'NA'},{'xy'[i % 2] if i % 3 else ''},"
                   f"{'low' if i < 21 else 'high'}\n" for i in range(40))
    recipe = _recipe(tmp_path, "  label_key: size\n  table: {ignore: [id]}\n",
                     "id,w,kind,size\n" + rows, "id,w,kind,size\n1,2,x,low\n")
    table = baselines.Table(str(recipe))
    assert table.name == "r" and table.prepare == "python make.py"
    # Words are classes (the library's rule: auto); NA keeps w a number; id left out.
    assert table.task == "classification"
    assert (table.numeric, table.categorical, table.labels) == (["w"], ["kind"], ["size"])
    x, y = table.xy("train")
    assert list(x.columns) == ["w", "kind"] and x["w"].isna().sum() == 8
    assert x["kind"].isna().sum() == 14 and y.tolist()[:2] == ["low", "low"]
    assert baselines.floor(table) == {"accuracy": 1.0}  # 21 low, 19 high; the test row: low


def test_a_missing_file_names_the_preparation_command(tmp_path):
    pytest.importorskip("pandas")
    recipe = _recipe(tmp_path, "  label_key: y\n", "a,y\n1,0\n", "a,y\n1,0\n")
    (tmp_path / "d" / "test.csv").unlink()
    with pytest.raises(SystemExit) as stop:
        baselines.Table(str(recipe))
    assert "test.csv does not exist" in str(stop.value)
    assert str(stop.value).endswith("Prepare the data first: python make.py")


def test_several_label_columns_of_0_and_1_are_multi_label(tmp_path):
    pytest.importorskip("pandas")
    rows = "".join(f"{i},{i % 2},{int(i > 5)}\n" for i in range(12))
    recipe = _recipe(tmp_path, "  label_key: [p, q]\n", "a,p,q\n" + rows, "a,p,q\n1,1,0\n")
    table = baselines.Table(str(recipe))
    assert table.task == "multi_label" and table.labels == ["p", "q"]
    assert table.xy("train")[1].shape == (12, 2)


def test_scores_are_the_tasks_metrics():
    pytest.importorskip("sklearn")
    assert baselines.scores("regression", np.array([1.0, 3.0]), np.array([2.0, 0.0])) == \
        {"mae": 2.0, "rmse": pytest.approx(np.sqrt(5.0))}
    # binary: the second sorted class is the positive one, threshold 0.5.
    binary = baselines.scores("binary", np.array(["b", "m", "m", "b"]),
                              np.array([0.2, 0.9, 0.4, 0.6]))
    assert binary == {"accuracy": 0.5, "auc": 0.75}
    classes = baselines.scores("classification", np.array([3, 1, 2]),
                               np.array([[0.1, 0.2, 0.7], [0.5, 0.4, 0.1], [0.6, 0.3, 0.1]]))
    assert classes == {"accuracy": pytest.approx(2 / 3)}
    multi = baselines.scores("multi_label", np.array([[1, 0], [0, 1], [1, 1]]),
                             np.array([[0.9, 0.2], [0.3, 0.1], [0.8, 0.7]]))
    # per-label accuracy 5/6; AUC of label 0: 1.0; of label 1: 0.5 (positives 0.1 and 0.7,
    # the negative 0.2 between them)
    assert multi["accuracy"] == pytest.approx(5 / 6)
    assert multi["auc"] == pytest.approx((1.0 + 0.5) / 2)
