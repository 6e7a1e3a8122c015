"""Every task through `tfaccel train` on tiny arrays: classification (string and 1..K labels),
binary, multi-label and regression, each recorded in summary.json, then export, compare,
doctor and resume of a regression run."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from tfaccel.cli.main import main

HERE = Path(__file__).parent
RUNTIME = {"verbose": 0, "tensorboard": False, "precision": "float32"}


def _arrays(folder, y, *, n_test=64, seed=0):
    """x of 6 features whose first ones decide y (given as a function of x)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(256 + n_test, 6)).astype("float32")
    labels = y(x)
    np.savez(folder / "d.npz", x_train=x[:256], y_train=labels[:256], x_test=x[256:],
             y_test=labels[256:])
    return x[256:], labels[256:]


def _train(folder, *, epochs=4, data=None, runtime=None, extra=None):
    recipe = {"seed": 0,
              "data": {"source": "arrays", "path": str(folder / "d.npz"), "cache": None,
                       **(data or {})},
              "model": {"name": "mlp", "params": {"hidden_units": [32],
                                                  "normalization": "none"}},
              "optimizer": {"name": "adam", "learning_rate": 0.01},
              "training": {"epochs": epochs, "global_batch_size": 32, "checkpoints": False},
              "runtime": {**RUNTIME, **(runtime or {})}}
    for section, keys in (extra or {}).items():
        recipe[section] = {**recipe.get(section, {}), **keys}
    path = folder / "r.yaml"
    path.write_text(yaml.safe_dump(recipe))
    run = folder / f"run-{len(list(folder.glob('run-*')))}"
    result = CliRunner().invoke(main, ["train", str(path), "--run-dir", str(run)])
    assert result.exit_code == 0, result.output
    return run, json.loads((run / "summary.json").read_text()), result.output


def test_string_labels_train_and_their_values_are_the_class_names(tmp_path):
    names = np.array(["adelie", "chinstrap", "gentoo"])
    _, summary, output = _train_labels(tmp_path, lambda x: names[np.argmax(x[:, :3], axis=1)])
    assert summary["task"] == "classification"
    assert summary["class_names"] == ["adelie", "chinstrap", "gentoo"]
    assert summary["dataset"]["num_classes"] == 3
    assert summary["final_metrics"]["val_accuracy"] > 0.8  # the classes are learnable
    assert "Done: val_accuracy " in output


def _train_labels(folder, y, **kwargs):
    _arrays(folder, y)
    return _train(folder, **kwargs)


def test_labels_1_to_k_are_k_classes_named_by_their_values(tmp_path):
    run, summary, _ = _train_labels(tmp_path, lambda x: np.argmax(x[:, :3], axis=1) + 1)
    assert summary["class_names"] == ["1", "2", "3"]  # never an empty class 0
    assert summary["dataset"]["num_classes"] == 3
    import keras

    model = keras.saving.load_model(run / "model.keras", compile=False)
    assert model.output_shape == (None, 3)
    assert summary["final_metrics"]["val_accuracy"] > 0.8


def test_binary_minus_1_and_1_trains_one_sigmoid_with_accuracy_and_auc(tmp_path):
    run, summary, output = _train_labels(
        tmp_path, lambda x: np.where(x[:, 0] + x[:, 1] > 0, 1, -1), data={"task": "binary"})
    assert summary["task"] == "binary" and summary["class_names"] == ["-1", "1"]
    assert summary["metric_names"] == ["accuracy", "auc"]
    assert summary["final_metrics"]["val_accuracy"] > 0.85
    assert summary["final_metrics"]["val_auc"] > 0.9
    import keras

    model = keras.saving.load_model(run / "model.keras", compile=False)
    assert model.output_shape == (None, 1) and model.layers[-1].activation.__name__ == "sigmoid"
    assert "Done: val_accuracy " in output and "val_auc " in output


def test_multi_label_rows_of_0_1_train_a_sigmoid_per_label(tmp_path):
    run, summary, output = _train_labels(
        tmp_path, lambda x: (x[:, :3] > 0).astype("int64"))
    assert summary["task"] == "multi_label" and summary["dataset"]["num_outputs"] == 3
    assert summary["class_names"] == ["label_0", "label_1", "label_2"]
    assert summary["metric_names"] == ["binary_accuracy", "auc"]
    assert summary["final_metrics"]["val_binary_accuracy"] > 0.85
    assert "Done: val_binary_accuracy " in output and "accuracy" not in output.replace(
        "binary_accuracy", "")


def _linear(targets):
    weights = np.array([[1.5, -2.0, 0.5, 1.0, 0.0, -1.0], [0.5, 1.0, -1.5, 0.0, 2.0, 0.5]])
    return lambda x: (x @ weights[:targets].T + 3.0 if targets > 1
                      else x @ weights[0] + 3.0)


@pytest.fixture(scope="module")
def linear_runs(tmp_path_factory):
    """``runs(targets)``: an 8-epoch regression run on `_linear(targets)`, trained once.

    Returns ``(run, summary, output, y_test)``. Read, never written, by the learning test
    (both targets) and by the tools' tests below (2 targets, `regression_run`).
    """
    runs = {}

    def runs_for(targets):
        if targets not in runs:
            folder = tmp_path_factory.mktemp(f"linear-{targets}")
            _, y_test = _arrays(folder, _linear(targets))
            runs[targets] = (*_train(folder, epochs=8), y_test)
        return runs[targets]

    return runs_for


@pytest.mark.parametrize("targets", [1, 2])
def test_regression_learns_a_linear_target_well_below_the_mean(linear_runs, targets):
    run, summary, output, y_test = linear_runs(targets)
    assert summary["task"] == "regression" and summary["dataset"]["num_outputs"] == targets
    assert summary["metric_names"] == ["mae", "rmse"]
    final = summary["final_metrics"]
    # Predicting the mean of the targets: the baseline a model that learned nothing ties.
    baseline = float(np.mean(np.abs(y_test - y_test.mean(axis=0))))
    assert final["val_mae"] < 0.25 * baseline, (final, baseline)
    assert final["val_rmse"] == pytest.approx(np.sqrt(final["val_loss"]), rel=1e-3)
    assert "accuracy" not in output and "Done: val_mae " in output
    assert summary["keep"] == "best" and summary["monitor"] == "val_loss"


def test_regression_under_mixed_bfloat16_has_a_float32_head_and_learns(tmp_path):
    _, y_test = _arrays(tmp_path, _linear(1))
    run, summary, _ = _train(tmp_path, epochs=8, runtime={"precision": "mixed_bfloat16"})
    assert summary["precision"] == "mixed_bfloat16"
    import keras

    model = keras.saving.load_model(run / "model.keras", compile=False)
    assert model.layers[-1].dtype_policy.compute_dtype == "float32"
    baseline = float(np.mean(np.abs(y_test - y_test.mean())))
    assert summary["final_metrics"]["val_mae"] < 0.25 * baseline


def test_keep_best_and_early_stopping_judge_a_regression_by_val_mae(tmp_path):
    _arrays(tmp_path, _linear(1))
    _, summary, output = _train(tmp_path, epochs=3, extra={"training": {
        "monitor": "val_mae", "early_stopping_patience": 2}})
    assert summary["monitor"] == "val_mae"
    values = [json.loads(line)["val_mae"]
              for line in (tmp_path / "run-0" / "metrics.jsonl").read_text().splitlines()]
    assert summary["best_value"] == pytest.approx(min(values))  # lower is better
    assert summary["saved_model_epoch"] == int(np.argmin(values)) + 1


def test_a_float_target_declared_classification_exits_2_naming_the_file(tmp_path):
    _arrays(tmp_path, _linear(1))
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump({"data": {"source": "arrays", "path": str(tmp_path / "d.npz"),
                                               "task": "classification"},
                                      "runtime": RUNTIME}))
    result = CliRunner().invoke(main, ["train", str(recipe), "--run-dir", str(tmp_path / "r")])
    assert result.exit_code == 2 and "Traceback" not in result.output
    text = " ".join(result.output.split())
    assert f"Arrays file {str(tmp_path / 'd.npz')!r}: y_train holds float values" in text
    assert "set data.task: regression" in text


# --------------------------------------------------------------------------- the tools


@pytest.fixture(scope="module")
def regression_run(linear_runs):
    """The run directory of the 2-target regression (the learning test's own run)."""
    return linear_runs(2)[0]


def test_export_of_a_regression_is_checked_by_its_error_and_writes_labels(regression_run,
                                                                          tmp_path):
    import keras

    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["export", str(regression_run), "--format", "keras",
                                       "--quantize", "int8", "--out", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads((out / "export.json").read_text())
    assert report["task"] == "regression" and "accuracy" not in report
    assert "top1_agreement" not in report
    # The figures are what the two models give on the validation split.
    with np.load(regression_run.parent / "d.npz") as npz:
        x, y = npz["x_test"], npz["y_test"]
    exported = keras.saving.load_model(out / "model.keras", compile=False).predict(x, verbose=0)
    trained = keras.saving.load_model(regression_run / "model.keras",
                                      compile=False).predict(x, verbose=0)
    assert report["mae"] == pytest.approx(np.mean(np.abs(exported - y)), rel=1e-4)
    assert report["float_mae"] == pytest.approx(np.mean(np.abs(trained - y)), rel=1e-4)
    assert report["max_abs_diff"] == pytest.approx(np.max(np.abs(exported - trained)), rel=1e-4)
    assert report["target_scale"] == pytest.approx(np.std(y), rel=1e-5)
    assert report["relative_max_abs_diff"] < 0.1  # int8 weights: close, not equal
    assert "val MAE" in result.output and "of the targets' std" in result.output
    labels = json.loads((out / "labels.json").read_text())
    assert labels["task"] == "regression" and labels["num_outputs"] == 2
    assert labels["class_names"] == ["label_0", "label_1"]


def test_compare_shows_the_task_and_its_metrics(regression_run):
    result = CliRunner().invoke(main, ["compare", str(regression_run), "--no-plot"])
    assert result.exit_code == 0, result.output
    rows = {line.split("|")[1].strip(): line.split("|")[2].strip()
            for line in result.output.splitlines() if line.startswith("| ")}
    assert rows["task"] == "regression"
    summary = json.loads((regression_run / "summary.json").read_text())
    assert rows["final val_mae"] == f"{summary['final_metrics']['val_mae']:,.4f}"
    assert "final val_rmse" in rows and "final val_accuracy" not in rows


def test_doctor_runs_a_regression_recipe(regression_run):
    result = CliRunner().invoke(main, ["doctor", str(regression_run / "recipe.yaml"), "--json",
                                       "--steps", "4", "--repeats", "1"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output[result.output.index("{"):])
    assert report["model_examples_per_sec"] > 0


@pytest.mark.slow
def test_a_regression_run_resumes_exactly(tmp_path):
    _arrays(tmp_path, _linear(2))
    recipe = {"seed": 3,
              "data": {"source": "arrays", "path": str(tmp_path / "d.npz"), "cache": None,
                       "shuffle_buffer": 64},
              "model": {"name": "mlp", "params": {"hidden_units": [16],
                                                  "normalization": "none"}},
              # No periodic checkpoints: the one SIGTERM saves at the next step boundary is
              # what the resume starts from (a checkpoint every step wrote 24 more).
              "training": {"epochs": 3, "global_batch_size": 32, "steps_per_execution": 1},
              "runtime": {**RUNTIME, "deterministic": True, "runs_dir": str(tmp_path / "runs")}}
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(recipe))
    args = json.dumps({"workdir": str(tmp_path), "recipe": str(path), "overrides": [],
                       "stop_at": 11, "reference": None})
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run([sys.executable, str(HERE / "resume_driver.py"), args],
                          capture_output=True, text=True, timeout=600, env=env)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(lines[-1][len("RESULT "):])
    assert report["preempted"] and report["weights_max_diff"] == 0.0
    assert report["checkpoint"] == "step-0000012"  # SIGTERM after step 11: the next boundary
    for full, resumed in zip(report["epochs_full"], report["epochs_resumed"]):
        assert full["val_mae"] == resumed["val_mae"] and full["loss"] == resumed["loss"]
    assert len(report["epochs_resumed"]) == 3
