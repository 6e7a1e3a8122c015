"""training.keep: model.keras holds the best epoch by training.monitor (or the last), said so."""

import json
import shutil

import keras
import numpy as np
import pytest
from click.testing import CliRunner

from tfaccel.cli.main import main

# 4 steps per epoch, 4 epochs, float32 and op determinism: the same numbers every run.
BASE = ["data.train_split=train[:128]", "data.validation_split_name=test[:64]",
        "data.shuffle_buffer=128", "data.augment=[]", "training.epochs=4",
        "training.global_batch_size=32", "runtime.precision=float32",
        "runtime.deterministic=true", "runtime.verbose=0", "runtime.tensorboard=false"]
# Measured with BASE: val_loss 1.399, 1.416, 1.429, 1.421 (best epoch 1, not the last).
WORSENING = ["optimizer.learning_rate=2e-2"]
# Measured with BASE: val_loss 1.409, 1.414, 1.417, 1.405 (best the last) and val_accuracy
# 0.250, 0.250, 0.188, 0.156 (best epoch 1: the first of a tie, as Keras picks).
IMPROVING = ["optimizer.learning_rate=2e-3"]
METRICS = ("epoch", "loss", "accuracy", "val_loss", "val_accuracy")


class _EpochWeights(keras.callbacks.Callback):
    """Keeps a copy of the weights at each epoch's end (after tfaccel's own callbacks)."""

    def __init__(self):
        super().__init__()
        self.weights = {}

    def on_epoch_end(self, epoch, logs=None):
        self.weights[epoch + 1] = [np.array(w) for w in self.model.get_weights()]


def _train(tmp_path, shapes_data_dir, extra, *, name="run", callbacks=()):
    from tfaccel.training.run import runner

    return runner.train("recipes/default.yaml",
                        [f"data.data_dir={shapes_data_dir}", *BASE, *extra],
                        run_dir=str(tmp_path / name), callbacks=list(callbacks))


def _train_keeping_epochs(tmp_path, shapes_data_dir, extra):
    """Trains with `_EpochWeights`: (result, metrics.jsonl's lines, weights by epoch)."""
    per_epoch = _EpochWeights()
    result = _train(tmp_path, shapes_data_dir, extra, callbacks=[per_epoch])
    return result, _lines(result.run_dir), per_epoch.weights


def _lines(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def _saved_weights(run_dir):
    return keras.saving.load_model(run_dir / "model.keras", compile=False).get_weights()


def _same(a, b):
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch, request):
    monkeypatch.chdir(request.config.rootpath)


def test_keep_best_saves_the_epoch_with_the_lowest_val_loss(checkpointed_run):
    # The module's WORSENING run (with step checkpoints too, which the resumes below read;
    # the keep rule does not).
    result, lines, weights = checkpointed_run
    best = 1 + int(np.argmin([e["val_loss"] for e in lines]))
    assert best != len(lines), "the recipe no longer makes validation worse after a best"
    summary = result.summary
    assert summary["saved_model_epoch"] == best
    assert summary["saved_model_metrics"]["val_loss"] == lines[best - 1]["val_loss"]
    assert summary["final_metrics"]["val_loss"] == lines[-1]["val_loss"]  # still the last
    assert summary["keep"] == "best" and summary["monitor"] == "val_loss"
    assert summary["best_epoch"] == best
    assert summary["best_value"] == pytest.approx(lines[best - 1]["val_loss"])
    saved = _saved_weights(result.run_dir)
    assert _same(saved, weights[best])
    assert not _same(saved, weights[len(lines)])
    text = result.summary_text()
    assert text.startswith("Done: ")
    assert f"best by val_loss: epoch {best} of {len(lines)}, kept in model.keras" in text
    assert f"last epoch {len(lines)}: val_accuracy" in text


def test_keep_last_saves_the_last_epoch_and_names_the_best(tmp_path, shapes_data_dir):
    result, lines, weights = _train_keeping_epochs(tmp_path, shapes_data_dir,
                                                    WORSENING + ["training.keep=last"])
    best = 1 + int(np.argmin([e["val_loss"] for e in lines]))
    assert result.summary["saved_model_epoch"] == len(lines)
    assert result.summary["keep"] == "last" and result.summary["best_epoch"] == best
    assert _same(_saved_weights(result.run_dir), weights[len(lines)])
    text = result.summary_text()
    assert f"last epoch {len(lines)} of {len(lines)}, kept in model.keras" in text
    assert f"best by val_loss: epoch {best}" in text


def test_monitor_val_accuracy_keeps_the_highest(tmp_path, shapes_data_dir):
    result, lines, weights = _train_keeping_epochs(
        tmp_path, shapes_data_dir, IMPROVING + ["training.monitor=val_accuracy"])
    accuracy = [e["val_accuracy"] for e in lines]
    best = 1 + int(np.argmax(accuracy))  # the first of a tie, as Keras' strict improvement
    # Keras' mode auto for accuracy is max: the lowest accuracy is another epoch.
    assert best != 1 + int(np.argmin(accuracy))
    assert result.summary["saved_model_epoch"] == best
    assert result.summary["best_value"] == pytest.approx(max(accuracy))
    assert _same(_saved_weights(result.run_dir), weights[best])


def test_best_is_the_last_epoch_when_validation_keeps_improving(tmp_path, shapes_data_dir):
    result, lines, weights = _train_keeping_epochs(tmp_path, shapes_data_dir, IMPROVING)
    assert int(np.argmin([e["val_loss"] for e in lines])) == len(lines) - 1
    assert result.summary["saved_model_epoch"] == len(lines)
    assert _same(_saved_weights(result.run_dir), weights[len(lines)])
    assert "the best by val_loss and the last, kept in model.keras" in result.summary_text()


@pytest.mark.parametrize("keep", ["best", "last"])
def test_early_stopping_stops_and_keep_chooses(tmp_path, shapes_data_dir, keep):
    """One judge: early stopping's best epoch is keep's; keep alone decides what is saved."""
    result, _, weights = _train_keeping_epochs(
        tmp_path, shapes_data_dir,
        WORSENING + ["training.early_stopping_patience=1", f"training.keep={keep}"])
    assert result.summary["epochs_completed"] == 2  # epoch 2 did not beat epoch 1
    assert result.summary["best_epoch"] == 1
    kept = 1 if keep == "best" else 2
    assert result.summary["saved_model_epoch"] == kept
    assert _same(_saved_weights(result.run_dir), weights[kept])


def test_without_validation_best_falls_back_to_the_last_epoch(tmp_path, shapes_data_dir,
                                                              capsys):
    result = _train(tmp_path, shapes_data_dir, WORSENING + ["data.validation_split_name=null",
                                                            "training.epochs=2"])
    assert result.summary["saved_model_epoch"] == 2
    assert result.summary["keep"] == "last"
    assert "no validation split" in result.summary["keep_note"]
    assert "training.keep is best but there is no validation split" in capsys.readouterr().out


def test_an_unlogged_monitor_exits_2_naming_the_key_and_the_logged_names(tmp_path,
                                                                        shapes_data_dir):
    args = ["train", "recipes/default.yaml", "--run-dir", str(tmp_path / "bad")]
    for override in [f"data.data_dir={shapes_data_dir}", *BASE, "training.epochs=1",
                     "training.monitor=val_acuracy"]:
        args += ["--set", override]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert "training.monitor 'val_acuracy'" in result.output
    assert "val_accuracy" in result.output and "val_loss" in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "bad").exists()  # refused before training: nothing left behind


@pytest.fixture(scope="module")
def checkpointed_run(tmp_path_factory, shapes_data_dir, request):
    """The WORSENING run uninterrupted, a checkpoint every 2 steps, all kept, as
    `_train_keeping_epochs` gives it: (result, metrics.jsonl's lines, weights by epoch).
    Read by the keep-best test and, through `checkpointed_run_dir`, by the resumes."""
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.chdir(request.config.rootpath)
    try:
        trained = _train_keeping_epochs(tmp_path_factory.mktemp("keep-full"),
                                        shapes_data_dir,
                                        WORSENING + ["training.checkpoint_every_steps=2",
                                                     "training.keep_checkpoints=100"])
    finally:
        monkeypatch.undo()
    return trained


@pytest.fixture
def checkpointed_run_dir(checkpointed_run):
    """The checkpointed WORSENING run's directory (read only: a resume works on a copy)."""
    result = checkpointed_run[0]
    assert result.summary["saved_model_epoch"] == 1
    return result.run_dir


@pytest.mark.parametrize("position", [2, 4, 6], ids=["mid-epoch-1-before-the-best",
                                                      "end-of-the-best-epoch",
                                                      "mid-epoch-2-after-the-best"])
def test_resumed_run_keeps_the_same_best_epoch(tmp_path, checkpointed_run_dir, position):
    """A kill right after the checkpoint at global step `position`, then --resume."""
    from tfaccel.training.run import runner
    from tfaccel.training.run_dir import checkpoints as ckpt

    cut = tmp_path / "cut"
    shutil.copytree(checkpointed_run_dir, cut)
    for name in ("model.keras", "summary.json"):
        (cut / name).unlink()
    for path in ckpt.list_checkpoints(cut / "checkpoints"):
        state = json.loads((path / ckpt.STATE_FILE).read_text())
        if state["global_step"] > position:
            shutil.rmtree(path)
    resumed = runner.train(resume=cut)
    assert resumed.summary["saved_model_epoch"] == 1
    assert resumed.summary["best_value"] == pytest.approx(
        json.loads((checkpointed_run_dir / "summary.json").read_text())["best_value"], abs=0)
    for a, b in zip(_lines(cut), _lines(checkpointed_run_dir), strict=True):
        assert {k: a[k] for k in METRICS} == {k: b[k] for k in METRICS}
    assert _same(_saved_weights(cut), _saved_weights(checkpointed_run_dir))


def test_monitor_names_a_metric_given_with_params_or_as_a_callable(tmp_path, shapes_data_dir,
                                                                   monkeypatch):
    # A metric given as {name, params} or module:callable is logged by its object's name
    # (params' `name`, or the function's __name__), not by the recipe's entry: the monitor
    # check must know those names, not the entries' text.
    module = tmp_path / "my_metrics.py"
    module.write_text("import keras\n\n\ndef hits(y_true, y_pred):\n"
                      "    return keras.metrics.sparse_categorical_accuracy(y_true, y_pred)\n")
    metrics = ('training.metrics=[accuracy, {name: sparse_top_k_categorical_accuracy, '
               f'params: {{k: 2, name: top2}}}}, "{module}:hits"]')
    result, lines, weights = _train_keeping_epochs(
        tmp_path, shapes_data_dir, [*IMPROVING, metrics, "training.monitor=val_top2",
                                    "training.epochs=2"])
    assert {"top2", "val_top2", "hits", "val_hits"} <= set(lines[0])
    best = 1 + int(np.argmax([e["val_top2"] for e in lines]))
    assert result.summary["monitor"] == "val_top2" and result.summary["best_epoch"] == best
    assert _same(_saved_weights(result.run_dir), weights[best])
    refused = CliRunner().invoke(main, [
        "train", "recipes/default.yaml", "--run-dir", str(tmp_path / "refused"),
        "--set", f"data.data_dir={shapes_data_dir}", *[a for s in BASE for a in ("--set", s)],
        "--set", metrics, "--set", "training.monitor=val_top3"])
    assert refused.exit_code == 2, refused.output
    assert "training.monitor 'val_top3'" in refused.output
    assert "val_top2" in refused.output and "val_hits" in refused.output
