"""`tfaccel train` end to end on the built-in dataset: the run directory and its contents."""

import json
import math

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from tfaccel.cli.main import main
from tfaccel.errors import TrainingError, UserInputError

TINY = [
    "data.train_split=train[:3072]",
    "data.validation_split_name=test[:512]",
    "data.shuffle_buffer=3072",
    "optimizer.learning_rate=3e-3",
    "training.epochs=3",
    "training.global_batch_size=32",
    "runtime.verbose=0",
]
# For tests that check a path or a flag, not learning: a few dozen examples, one epoch
# (appended after TINY, so these win).
FEW = ["data.train_split=train[:64]", "data.validation_split_name=test[:64]",
       "data.shuffle_buffer=64", "training.epochs=1"]


@pytest.fixture
def tfds_dir(shapes_data_dir):
    return shapes_data_dir


def tiny_recipe(tmp_path, tfds_dir, extra=""):
    recipe = tmp_path / "tiny.yaml"
    recipe.write_text(
        "name: tiny\n"
        "data: {source: builtin}\n"
        "model: {name: small_cnn}\n"
        "optimizer: {name: adam, learning_rate: 2e-3}\n"
        f"runtime: {{runs_dir: {tmp_path / 'runs'}}}\n" + extra)
    return recipe, [f"data.data_dir={tfds_dir}"] + TINY


def test_train_writes_a_complete_run_directory(tmp_path, tfds_dir):
    import keras

    recipe, overrides = tiny_recipe(tmp_path, tfds_dir)
    run_dir = tmp_path / "run-1"
    args = ["train", str(recipe), "--run-dir", str(run_dir)]
    for override in overrides:
        args += ["--set", override]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert f"Run directory: {run_dir}" in result.output
    assert "val_accuracy" in result.output and "examples/s" in result.output

    resolved = yaml.safe_load((run_dir / "recipe.yaml").read_text())
    assert resolved["training"]["epochs"] == 3
    assert resolved["data"]["data_dir"] == tfds_dir

    epochs = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [e["epoch"] for e in epochs] == [1, 2, 3]
    for record in epochs:
        for key in ("loss", "accuracy", "val_loss", "val_accuracy", "examples_per_sec",
                    "epoch_seconds", "train_seconds"):
            assert math.isfinite(record[key]), (key, record)
        assert record["examples_per_sec"] > 0
        assert record["examples"] == 3072  # one whole pass, last partial batch included
        # ThroughputMonitor's figures (tests/test_throughput.py checks what they mean).
        assert 0.0 <= record["input_wait_fraction"] <= 1.0
        assert record["steps_per_sec"] > 0 and record["step_time_ms"] > 0
        assert 0.0 < record["cpu_utilisation"] <= 1.05 and record["peak_rss_mb"] > 100
        assert record["steps_per_sec"] * record["step_time_ms"] == pytest.approx(1000.0)
    # Accuracy rose and beats the 4-class majority guess (0.25); the >= 90% claim of the
    # full default recipe is the slow test in test_default_recipe.py.
    assert epochs[-1]["accuracy"] > epochs[0]["accuracy"]
    assert epochs[-1]["val_loss"] < epochs[0]["val_loss"]
    assert epochs[-1]["val_accuracy"] > 0.3

    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed"
    assert summary["epochs_completed"] == 3
    assert summary["final_metrics"]["val_accuracy"] == pytest.approx(epochs[-1]["val_accuracy"])
    assert summary["global_batch_size"] == 32
    assert summary["replicas"] == 1 and summary["accumulation_steps"] == 1
    assert summary["per_replica_batch_size"] == 32
    assert summary["dataset"]["train_examples"] == 3072
    assert summary["class_names"] == ["circle", "square", "triangle", "cross"]
    assert summary["precision"] in ("float32", "mixed_bfloat16", "mixed_float16")
    assert set(summary["versions"]) >= {"tfaccel", "tensorflow", "keras"}
    assert summary["wall_seconds"] > 0 and summary["examples_per_sec"] > 0
    # Steady state: the mean over the epochs after the first; throughput is not a metric.
    assert summary["input_wait_fraction"] == pytest.approx(
        (epochs[1]["input_wait_fraction"] + epochs[2]["input_wait_fraction"]) / 2)
    assert summary["peak_rss_mb"] == max(e["peak_rss_mb"] for e in epochs)
    assert "input_wait_fraction" not in summary["final_metrics"]

    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == [
        "epoch-001", "epoch-002", "epoch-003"]
    assert sorted(p.name for p in (run_dir / "checkpoints" / "epoch-003").iterdir()) == [
        "extra.npz", "model.weights.h5", "state.json"]
    events = list((run_dir / "tensorboard").rglob("events.out.tfevents.*"))
    assert events, "no TensorBoard event files"
    import tensorflow as tf

    tags = {value.tag for path in events for event in tf.compat.v1.train.summary_iterator(
        str(path)) for value in event.summary.value}
    assert {"epoch_input_wait_fraction", "epoch_steps_per_sec", "epoch_peak_rss_mb"} <= tags

    model = keras.saving.load_model(run_dir / "model.keras")
    assert model.output_shape == (None, 4)
    probabilities = model.predict(np.zeros((2, 32, 32, 3), "uint8"), verbose=0)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-3)


def test_existing_run_directory_is_never_clobbered(tmp_path, tfds_dir):
    recipe, overrides = tiny_recipe(tmp_path, tfds_dir)
    run_dir = tmp_path / "taken"
    run_dir.mkdir()
    (run_dir / "keep.txt").write_text("precious")
    args = ["train", str(recipe), "--run-dir", str(run_dir)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    assert "already exists and is not an empty folder" in result.output
    assert "Traceback" not in result.output
    assert (run_dir / "keep.txt").read_text() == "precious"
    assert sorted(p.name for p in run_dir.iterdir()) == ["keep.txt"]


def test_generated_run_directories_are_new_each_time(tmp_path):
    from tfaccel.training.run_dir.run_files import create_run_dir

    first = create_run_dir(name="a b", runs_dir=str(tmp_path))
    second = create_run_dir(name="a b", runs_dir=str(tmp_path))
    assert first != second and first.name.startswith("a-b-")


def test_nan_loss_stops_with_a_clear_error_and_keeps_what_was_written(tmp_path, tfds_dir):
    from tfaccel.training.run import runner

    recipe, overrides = tiny_recipe(
        tmp_path, tfds_dir, extra="")
    overrides = overrides + ["optimizer.name=sgd", "optimizer.learning_rate=1e12",
                             "training.epochs=2", "runtime.precision=float32",
                             # 8 batches an epoch: the guard stops at the first bad one
                             "data.train_split=train[:256]", "data.shuffle_buffer=256",
                             "data.validation_split_name=test[:64]"]
    run_dir = tmp_path / "nan-run"
    with pytest.raises(TrainingError) as caught:
        runner.train(str(recipe), overrides, run_dir=str(run_dir))
    message = str(caught.value)
    assert "the training loss became nan" in message or "became inf" in message
    assert "Lower optimizer.learning_rate" in message
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "failed"
    assert summary["failure"]["epoch"] == 1
    assert (run_dir / "recipe.yaml").exists()
    # The broken epoch's weights are not saved as a checkpoint.
    assert not (run_dir / "checkpoints").exists() or not any((run_dir / "checkpoints").iterdir())


def test_cli_nan_loss_exits_1_without_traceback(tmp_path, tfds_dir):
    recipe, overrides = tiny_recipe(tmp_path, tfds_dir)
    args = ["train", str(recipe), "--run-dir", str(tmp_path / "r")]
    for override in overrides + ["optimizer.name=sgd", "optimizer.learning_rate=1e12",
                                 "training.epochs=1", "data.train_split=train[:256]",
                                 "data.shuffle_buffer=256", "data.validation_split_name=test[:64]"]:
        args += ["--set", override]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1, result.output
    assert "\nError: the training loss became" in result.output
    assert "Traceback" not in result.output


def test_train_from_python_with_a_mapping(tmp_path, tfds_dir):
    import tfaccel

    result = tfaccel.train({"name": "py", "data": {"data_dir": tfds_dir},
                            "runtime": {"runs_dir": str(tmp_path / "runs"), "verbose": 0}},
                           overrides=TINY + FEW)
    assert result.run_dir.parent == tmp_path / "runs"
    assert result.summary["epochs_completed"] == 1


def test_batch_plan_mistake_is_a_user_error_before_training(tmp_path, tfds_dir):
    from tfaccel.training.run import runner

    recipe, overrides = tiny_recipe(tmp_path, tfds_dir)
    with pytest.raises(UserInputError, match="not divisible by the 2 replicas"):
        runner.train(str(recipe), overrides + ["runtime.strategy=mirrored",
                                               "runtime.devices=[/cpu:0, /cpu:1]",
                                               "training.global_batch_size=33"],
                     run_dir=str(tmp_path / "plan"))
    assert not (tmp_path / "plan").exists()  # nothing but the recipe was written: removed


def test_missing_image_folder_exits_2_and_leaves_no_run_directory(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("data: {source: image_folder, path: no_such_folder, image_size: [8, 8]}\n"
                      f"runtime: {{runs_dir: {tmp_path / 'runs'}}}\n")
    result = CliRunner().invoke(main, ["train", str(recipe)])
    assert result.exit_code == 2, result.output
    assert str(tmp_path / "no_such_folder") in result.output
    assert "does not exist" in result.output and "Traceback" not in result.output
    # Checked before anything is created: no run directory, not even runs_dir.
    assert not (tmp_path / "runs").exists() or list((tmp_path / "runs").iterdir()) == []


def test_mirrored_two_replicas_with_accumulation_through_the_runner(tmp_path, tfds_dir,
                                                                    logical_cpus):
    import keras

    from tfaccel.training.run import runner

    recipe, overrides = tiny_recipe(tmp_path, tfds_dir)
    result = runner.train(str(recipe), overrides + [
        "runtime.strategy=mirrored", f"runtime.devices=[{', '.join(logical_cpus)}]",
        "training.accumulation_steps=2", "training.epochs=1", "runtime.precision=float32",
        "training.steps_per_execution=2", "data.train_split=train[:640]",
        "data.shuffle_buffer=640", "data.validation_split_name=test[:64]"],
        run_dir=str(tmp_path / "mirrored"))
    summary = result.summary
    assert summary["strategy"] == "mirrored" and summary["replicas"] == 2
    assert (summary["global_batch_size"], summary["per_replica_batch_size"],
            summary["micro_batch_size"], summary["accumulation_steps"]) == (32, 16, 8, 2)
    assert summary["precision"] == "float32" and summary["steps_per_execution"] == 2
    assert len(summary["devices"]) == 2
    assert math.isfinite(summary["final_metrics"]["loss"])
    # The input-wait timer is per replica (averaged on read) and works with accumulation
    # and steps_per_execution > 1 under the strategy.
    assert 0.0 <= result.epochs[0]["input_wait_fraction"] <= 1.0
    # The saved model is the plain inner model, loadable without tfaccel.
    model = keras.saving.load_model(result.run_dir / "model.keras")
    assert type(model).__name__ != "AccumulatingModel"
    # The process-wide precision policy is restored after the run.
    assert keras.mixed_precision.global_policy().name == "float32"


def test_interrupt_keeps_metrics_and_marks_the_summary(tmp_path, tfds_dir):
    import keras

    from tfaccel.training.run import runner

    class CtrlCAtSecondEpoch(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            if epoch == 1:
                raise KeyboardInterrupt

    recipe, overrides = tiny_recipe(tmp_path, tfds_dir)
    run_dir = tmp_path / "interrupted"
    with pytest.raises(KeyboardInterrupt):
        runner.train(str(recipe), overrides + ["data.train_split=train[:256]",
                                               "data.shuffle_buffer=256",
                                               "data.validation_split_name=test[:64]"],
                     run_dir=str(run_dir), callbacks=[CtrlCAtSecondEpoch()])
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["epochs_completed"] == 1
    assert len((run_dir / "metrics.jsonl").read_text().splitlines()) == 1
    assert [p.name for p in (run_dir / "checkpoints").iterdir()] == ["epoch-001"]


def test_steps_per_epoch_longer_than_the_data_repeats_it(tmp_path, tfds_dir):
    import keras

    from tfaccel.training.run import runner

    class CountBatches(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.labels = []

        def on_train_batch_begin(self, batch, logs=None):
            self.labels.append(batch)

    counter = CountBatches()
    recipe, overrides = tiny_recipe(tmp_path, tfds_dir)
    result = runner.train(str(recipe), overrides + [
        "data.train_split=train[:64]", "data.shuffle_buffer=64",
        "data.validation_split_name=test[:64]", "training.steps_per_epoch=5", "training.epochs=2",
        "runtime.tensorboard=false", "training.checkpoints=false",
        # Keras calls the batch hooks once per call into the train function.
        "training.steps_per_execution=1"],
        run_dir=str(tmp_path / "steps"), callbacks=[counter])
    # 64 examples are 2 batches of 32; 2 epochs of 5 steps ran 10 steps on the repeated
    # data, and the optimizer really took 10 steps.
    assert counter.labels == [0, 1, 2, 3, 4] * 2
    model = keras.saving.load_model(result.run_dir / "model.keras")
    assert int(model.optimizer.iterations.numpy()) == 10
    assert result.summary["steps_per_epoch"] == 5
    assert [e["examples"] for e in result.epochs] == [5 * 32, 5 * 32]
    assert not (result.run_dir / "tensorboard").exists()
    assert not (result.run_dir / "checkpoints").exists()


def test_a_failing_data_worker_is_reported_with_its_traceback(tmp_path):
    (tmp_path / "bad_source.py").write_text(
        "import numpy as np\n"
        "class Bad:\n"
        "    num_classes = 2\n"
        "    def __len__(self):\n"
        "        return 64\n"
        "    def __getitem__(self, i):\n"
        "        if i == 40:\n"
        "            raise ValueError(f'cannot read example {i}: corrupt row')\n"
        "        return np.float32([i, i]), np.int64(i % 2)\n"
        "source = Bad()\n")
    recipe = tmp_path / "bad.yaml"
    recipe.write_text(
        "data: {source: python, path: bad_source.py:source, validation_split_name: null,\n"
        "       shuffle_buffer: 0, cache: null, workers: 1}\n"
        "model: {name: mlp, params: {normalization: none}}\n"
        "training: {epochs: 1, global_batch_size: 16}\n"
        "runtime: {verbose: 0, tensorboard: false}\n")
    run_dir = tmp_path / "run"
    result = CliRunner().invoke(main, ["train", str(recipe), "--run-dir", str(run_dir)])
    assert result.exit_code == 1, result.output
    assert "Error: training failed after 0 finished epoch(s): WorkerError" in result.output
    assert "ValueError: cannot read example 40: corrupt row" in result.output
    assert "bad_source.py" in result.output  # the worker's own traceback
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "failed"
    assert "cannot read example 40" in summary["failure"]["message"]


def test_a_deterministic_run_leaves_op_determinism_as_it_found_it(tmp_path, tfds_dir):
    # A library user's process is shared: a run with runtime.deterministic must not leave
    # deterministic kernels (slower, other error messages) switched on after it.
    from tfaccel.engine.determinism import op_determinism_enabled
    from tfaccel.training.run.runner import train

    recipe, overrides = tiny_recipe(tmp_path, tfds_dir)
    assert not op_determinism_enabled()
    train(recipe, overrides + FEW + ["runtime.deterministic=true"],
          run_dir=str(tmp_path / "run"))
    assert not op_determinism_enabled()


def test_describe_op_error_shows_tensorflow_s_own_message_not_stack_frames():
    import keras
    import tensorflow as tf

    from tfaccel.training.run.failures import describe_op_error

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    with pytest.raises(tf.errors.OpError) as caught:
        model.fit(np.zeros((4, 3), "float32"), np.array([0, 1, 7, 1]), verbose=0)
    assert "File " in caught.value.message  # TF prefixes the frames of the op's definition
    text = describe_op_error(caught.value)
    assert text.startswith("Received a label value of 7 which is outside the valid range"), text
    assert "File " not in text and "[[" not in text and "line " not in text


def test_fewer_examples_than_one_global_batch_is_a_user_error(tmp_path, tfds_dir, logical_cpus):
    recipe, overrides = tiny_recipe(tmp_path, tfds_dir)
    args = ["train", str(recipe), "--run-dir", str(tmp_path / "small")]
    for override in overrides + ["data.train_split=train[:16]", "runtime.strategy=mirrored",
                                 f"runtime.devices=[{', '.join(logical_cpus)}]"]:
        args += ["--set", override]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert ("the training split has 16 examples, fewer than one global batch of 32 (with 2 "
            "replicas the last partial batch is dropped)") in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "small").exists()  # nothing left behind


def test_early_stopping_reports_the_last_and_the_saved_epoch(tmp_path, tfds_dir):
    from tfaccel.training.run import runner

    recipe, overrides = tiny_recipe(tmp_path, tfds_dir)
    # A learning rate too small to change float32 weights: validation loss never improves
    # after epoch 1, so patience 1 stops after epoch 2 and restores epoch 1's weights.
    result = runner.train(str(recipe), overrides + [
        "data.train_split=train[:128]", "data.shuffle_buffer=128",
        "data.validation_split_name=test[:64]", "optimizer.name=sgd", "optimizer.learning_rate=1e-30",
        "training.epochs=5", "training.early_stopping_patience=1", "runtime.precision=float32"],
        run_dir=str(tmp_path / "early"))
    summary = result.summary
    assert summary["epochs_completed"] == 2
    assert summary["saved_model_epoch"] == 1
    assert summary["final_metrics"]["val_loss"] == result.epochs[1]["val_loss"]
    assert summary["saved_model_metrics"]["val_loss"] == result.epochs[0]["val_loss"]
    assert "(best by val_loss: epoch 1 of 2, kept in model.keras)" in result.summary_text()


def test_unknown_size_source_counts_its_steps_for_the_schedule(tmp_path):
    (tmp_path / "gen_source.py").write_text(
        "import numpy as np\n"
        "num_classes = 2\n"
        "def source(worker, workers):\n"
        "    for i in range(worker, 100, workers):\n"
        "        yield np.float32([i % 2, 1 - i % 2]), np.int64(i % 2)\n")
    recipe = tmp_path / "gen.yaml"
    recipe.write_text(
        "data: {source: python, path: gen_source.py:source, validation_split_name: null,\n"
        "       shuffle_buffer: 0, cache: null, workers: 1, num_classes: 2}\n"
        "model: {name: mlp, params: {normalization: none}}\n"
        "optimizer: {name: sgd, learning_rate: 0.1, schedule: cosine, warmup_epochs: 1}\n"
        "training: {epochs: 2, global_batch_size: 16}\n"
        "runtime: {verbose: 0, tensorboard: false}\n")
    from tfaccel.training.run import runner

    result = runner.train(str(recipe), run_dir=str(tmp_path / "run"))
    # 100 examples / 16 = 7 batches (the last one partial): counted, not assumed (1000).
    assert result.summary["steps_per_epoch"] == 7
    assert [e["examples"] for e in result.epochs] == [100, 100]


@pytest.mark.filterwarnings("ignore:precision 'mixed_float16' on a machine without a GPU")
def test_mixed_float16_counts_the_steps_skipped_by_loss_scaling(tmp_path):
    import keras

    from tfaccel.training.run import runner

    rng = np.random.default_rng(0)
    # Inputs of magnitude ~3000: the first gradients, scaled by Keras' initial loss scale
    # (2**15), overflow float16, so those steps are skipped and the scale halves.
    x = (rng.normal(size=(256, 8)) * 3000).astype("float32")
    y = (x[:, 0] > 0).astype("int64")
    np.savez(tmp_path / "big.npz", x=x, y=y)
    recipe = tmp_path / "fp16.yaml"
    recipe.write_text(
        "data: {source: arrays, path: big.npz, validation_split_name: null, cache: null}\n"
        "model: {name: mlp, params: {normalization: none}}\n"
        "optimizer: {name: sgd, learning_rate: 1e-6}\n"
        "training: {epochs: 2, global_batch_size: 32}\n"
        "runtime: {verbose: 0, tensorboard: false, precision: mixed_float16}\n")
    class AppliedSteps(keras.callbacks.Callback):
        def on_train_end(self, logs=None):
            self.applied = int(self.model.optimizer.inner_optimizer.iterations.numpy())

    applied = AppliedSteps()
    result = runner.train(str(recipe), run_dir=str(tmp_path / "run"), callbacks=[applied])
    skipped = [e["loss_scale_skipped_steps"] for e in result.epochs]
    assert skipped[0] >= 1, skipped
    assert applied.applied == 2 * 8 - sum(skipped)  # 8 steps per epoch, each one either way


def test_multi_worker_runs_keep_a_fixed_input_order(logical_cpus, monkeypatch):
    # DATA sharding keeps every k-th element on each worker: with a non-deterministic order
    # two workers could train on the same example and skip another. The runner asks the
    # data layer's one rule (data.sharding.order_must_be_fixed) with the run's strategy.
    import tensorflow as tf

    from tfaccel.config import cluster
    from tfaccel.training.model_setup.inputs import input_order_is_fixed

    strategy = tf.distribute.MirroredStrategy(logical_cpus)
    default = tf.distribute.get_strategy()
    assert not input_order_is_fixed(deterministic=False, strategy=default)
    assert not input_order_is_fixed(deterministic=False, strategy=strategy)  # 2 replicas
    assert input_order_is_fixed(deterministic=True, strategy=default)
    # Two workers in the strategy's cluster (a real 2-process job: test_keras_compat_multiworker.py).
    monkeypatch.setattr(cluster, "strategy_role",
                        lambda s: cluster.WorkerRole(index=0, count=2) if s is strategy
                        else cluster.WorkerRole())
    assert input_order_is_fixed(deterministic=False, strategy=strategy)
    assert not input_order_is_fixed(deterministic=False, strategy=default)


def test_fit_shows_a_bar_on_a_terminal_and_one_line_per_epoch_in_a_log():
    # Keras' bar redraws with carriage returns: fine on a terminal, hundreds of ANSI
    # redraws per epoch in a log file or a scheduler's output.
    import io

    from tfaccel.training.run.fit_parts import fit_verbosity

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    assert fit_verbosity(None, stream=Terminal()) == 1
    assert fit_verbosity(None, stream=io.StringIO()) == 2
    assert [fit_verbosity(v, stream=Terminal()) for v in (0, 1, 2)] == [0, 1, 2]


def test_a_cli_run_into_a_pipe_prints_one_line_per_epoch(tmp_path, tfds_dir):
    import subprocess
    import sys

    recipe, overrides = tiny_recipe(tmp_path, tfds_dir)
    overrides = [o for o in overrides + FEW if not o.startswith("runtime.verbose")]
    result = subprocess.run(
        [sys.executable, "-m", "tfaccel.cli", "train", str(recipe), "--run-dir",
         str(tmp_path / "run"), *[a for o in overrides for a in ("--set", o)],
         "--set", "training.epochs=2"],
        capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "\r" not in result.stdout and "\x1b[" not in result.stdout
    epoch_lines = [line for line in result.stdout.splitlines() if " - val_accuracy: " in line]
    assert len(epoch_lines) == 2, result.stdout[-3000:]
