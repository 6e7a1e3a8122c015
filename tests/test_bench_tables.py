"""benchmarks/real_data/bench_tables.py: which logged metric is each task's figure, and the goal."""

import importlib.util
import sys
from pathlib import Path

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "benchmarks" / "real_data"
sys.path.insert(0, str(FOLDER))
try:
    _spec = importlib.util.spec_from_file_location("bench_tables", FOLDER / "bench_tables.py")
    bench = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(bench)
finally:
    sys.path.remove(str(FOLDER))


def test_the_figure_is_the_validation_metric_keras_logs_for_the_task():
    last = {"accuracy": 0.99, "val_accuracy": 0.9, "val_binary_accuracy": 0.8,
            "val_auc": 0.7, "val_mae": 3.0, "val_rmse": 4.0, "loss": 1.0}
    assert bench.logged("classification", "accuracy", last) == 0.9
    assert bench.logged("multi_label", "accuracy", last) == 0.8  # binary_accuracy first
    assert bench.logged("binary", "auc", last) == 0.7
    assert bench.logged("regression", "rmse", last) == 4.0
    assert bench.logged("regression", "mae", {"val_mean_absolute_error": 2.5}) == 2.5
    assert bench.logged("regression", "mae", {"mae": 1.0}) is None  # training, not test


def test_the_goal_is_at_or_above_the_bar_and_at_or_below_it_for_errors():
    assert bench.reaches("accuracy", 0.95, 0.95) and not bench.reaches("accuracy", 0.94, 0.95)
    assert bench.reaches("rmse", 50.0, 53.2) and not bench.reaches("mae", 44.0, 43.3)
