"""`train(recipe)`: the one place that wires data, model, strategy, precision and outputs."""

from __future__ import annotations

import dataclasses
import math
import os
import platform
import shutil
import time
from pathlib import Path
from typing import Optional, Sequence, Union

from tfaccel import run_dir as run_files
from tfaccel._version import __version__
from tfaccel.batching import plan_batches
from tfaccel.errors import TrainingError, UserInputError
from tfaccel.recipe import Recipe, dump_recipe, load_recipe, recipe_from_dict


@dataclasses.dataclass(frozen=True)
class RunResult:
    """What a finished run leaves: its directory, its summary and per-epoch metrics."""

    run_dir: Path
    summary: dict
    epochs: list

    def summary_text(self) -> str:
        """A short human summary: validation accuracy, examples/s, wall time, run directory."""
        final = self.summary.get("final_metrics", {})
        parts = []
        for key in ("val_accuracy", "accuracy", "val_loss", "loss"):
            if key in final:
                parts.append(f"{key} {final[key]:.4f}")
        parts.append(f"{self.summary['examples_per_sec']:.0f} examples/s")
        parts.append(f"wall {self.summary['wall_seconds']:.1f} s")
        return ("Done: " + ", ".join(parts) + f"\nRun directory: {self.run_dir}")


def train(recipe_or_path: Union[Recipe, str, os.PathLike, dict],
          overrides: Sequence[str] = (), *, run_dir: Optional[str] = None,
          callbacks: Sequence = ()) -> RunResult:
    """Runs a whole training job and leaves a run directory.

    Args:
        recipe_or_path: A `Recipe`, a path to a YAML recipe, or a recipe mapping.
        overrides: `key.path=value` overrides applied before validation.
        run_dir: Explicit run directory (must not exist or be empty); by default a new
            folder under `runtime.runs_dir`.
        callbacks: Extra Keras callbacks, run after tfaccel's own.

    Returns:
        The `RunResult`.

    Raises:
        UserInputError: The recipe, the data or the run directory is wrong.
        TrainingError: Training failed (for example the loss became NaN).
    """
    started = time.perf_counter()
    recipe = _as_recipe(recipe_or_path, overrides)
    runtime = recipe.runtime
    directory = run_files.create_run_dir(name=recipe.name, runs_dir=runtime.runs_dir,
                                         run_dir=run_dir)
    (directory / run_files.RECIPE_FILE).write_text(dump_recipe(recipe), encoding="utf-8")

    # Thread pools must be set before anything initialises TensorFlow's devices.
    from tfaccel.engine.threads import configure_threads

    threads = configure_threads(intra_op=runtime.intra_op_threads,
                                inter_op=runtime.inter_op_threads)

    import keras
    import tensorflow as tf

    from tfaccel.engine.precision import set_precision
    from tfaccel.engine.strategy import describe_strategy, make_strategy

    keras.utils.set_random_seed(recipe.seed)
    if runtime.deterministic:
        tf.config.experimental.enable_op_determinism()
    strategy = make_strategy(runtime.strategy, devices=runtime.devices)
    strategy_info = describe_strategy(strategy)
    previous_policy = keras.mixed_precision.global_policy().name
    precision = set_precision(runtime.precision)
    try:
        return _train_with(recipe, directory=directory, strategy=strategy,
                           strategy_info=strategy_info, precision=precision, threads=threads,
                           started=started, extra_callbacks=list(callbacks))
    except UserInputError:
        # A mistake found before training (missing data, a bad batch plan): do not leave a
        # run directory that holds nothing but the recipe.
        if [p.name for p in directory.iterdir()] == [run_files.RECIPE_FILE]:
            shutil.rmtree(directory)
        raise
    finally:
        # The policy is process-global; leave it as we found it for library users.
        keras.mixed_precision.set_global_policy(previous_policy)


def _train_with(recipe: Recipe, *, directory: Path, strategy, strategy_info: dict,
                precision: str, threads: dict, started: float,
                extra_callbacks: list) -> RunResult:
    import keras
    import tensorflow as tf

    from tfaccel import models
    from tfaccel.callbacks import EpochMetricsLogger, FiniteModelCheckpoint, NonFiniteLossGuard
    from tfaccel.data.config import build_datasets
    from tfaccel.optimizers import make_optimizer

    training = recipe.training
    plan = plan_batches(global_batch_size=training.global_batch_size,
                        replicas=strategy.num_replicas_in_sync,
                        accumulation_steps=training.accumulation_steps,
                        micro_batch_size=training.micro_batch_size)
    print(f"tfaccel: {strategy_info['strategy']} on {strategy_info['replicas']} replica(s), "
          f"precision {precision}, {plan.describe()}.", flush=True)

    train_ds, val_ds, data_info = build_datasets(
        recipe.data, global_batch_size=plan.global_batch_size, num_replicas=plan.replicas,
        seed=recipe.seed, deterministic=recipe.runtime.deterministic)

    train_examples = data_info.get("train_examples")
    if training.steps_per_epoch:
        steps_per_epoch = training.steps_per_epoch
        examples_per_epoch = steps_per_epoch * plan.global_batch_size
    elif train_examples:
        drop = plan.replicas > 1
        steps_per_epoch = (train_examples // plan.global_batch_size if drop
                           else math.ceil(train_examples / plan.global_batch_size))
        examples_per_epoch = (steps_per_epoch * plan.global_batch_size if drop
                              else train_examples)
    else:
        steps_per_epoch, examples_per_epoch = None, None
    if steps_per_epoch == 0:
        raise TrainingError(
            f"the training split has {train_examples} examples, fewer than one global batch "
            f"of {plan.global_batch_size}; lower training.global_batch_size.")

    with strategy.scope():
        model = models.build_model(recipe.model.name, input_shape=data_info["input_shape"],
                                   num_classes=data_info["num_classes"],
                                   **recipe.model.params)
        optimizer = make_optimizer(recipe.optimizer,
                                   total_steps=(steps_per_epoch or 1000) * training.epochs,
                                   steps_per_epoch=steps_per_epoch or 1000)
        trained_model = model
        if plan.accumulation_steps > 1:
            from tfaccel.engine.accumulation import accumulate

            trained_model = accumulate(model, plan.accumulation_steps)
        trained_model.compile(optimizer=optimizer, loss=training.loss,
                              metrics=list(training.metrics),
                              jit_compile=training.jit_compile,
                              steps_per_execution=training.steps_per_execution)
        # A no-op except under multi-worker MultiWorkerMirroredStrategy (keras#20585).
        from tfaccel.engine.keras_compat import patch_for_multi_worker

        patch_for_multi_worker(trained_model)

    guard = NonFiniteLossGuard()
    metrics_logger = EpochMetricsLogger(directory / run_files.METRICS_FILE,
                                        examples_per_epoch=examples_per_epoch,
                                        batch_size=plan.global_batch_size, guard=guard)
    callbacks = [guard, metrics_logger]
    if training.checkpoints:
        checkpoints = directory / run_files.CHECKPOINTS_DIR
        checkpoints.mkdir()
        callbacks.append(FiniteModelCheckpoint(
            str(checkpoints / "epoch-{epoch:03d}.weights.h5"), guard=guard,
            save_weights_only=True))
    if recipe.runtime.tensorboard:
        callbacks.append(keras.callbacks.TensorBoard(
            log_dir=str(directory / run_files.TENSORBOARD_DIR), write_graph=False,
            profile_batch=0))
    if training.early_stopping_patience and val_ds is not None:
        callbacks.append(keras.callbacks.EarlyStopping(
            monitor="val_loss", patience=training.early_stopping_patience,
            restore_best_weights=True))

    callbacks += extra_callbacks
    if training.steps_per_epoch:
        # Epochs of a fixed number of steps: never let a finite pipeline run dry mid-epoch.
        train_ds = train_ds.repeat()

    def summarise(fit_seconds: float) -> dict:
        return _summary(recipe, epochs=metrics_logger.records, plan=plan, precision=precision,
                        strategy_info=strategy_info, threads=threads, data_info=data_info,
                        started=started, fit_seconds=fit_seconds, tf_version=tf.__version__,
                        keras_version=keras.__version__)

    fit_started = time.perf_counter()
    try:
        trained_model.fit(
            train_ds, validation_data=val_ds, epochs=training.epochs,
            steps_per_epoch=training.steps_per_epoch,
            validation_steps=training.validation_steps, callbacks=callbacks,
            verbose=recipe.runtime.verbose,
            shuffle=False)  # the tf.data pipeline shuffles; Keras would only warn
    except KeyboardInterrupt:
        summary = summarise(time.perf_counter() - fit_started)
        summary["status"] = "interrupted"
        run_files.write_json(directory / run_files.SUMMARY_FILE, summary)
        raise
    except tf.errors.OpError as error:
        # A failure inside the compiled step or the input pipeline (a data worker that
        # raised or died, an undecodable record): keep what was written, say what failed.
        reason = describe_op_error(error)
        summary = summarise(time.perf_counter() - fit_started)
        summary["status"] = "failed"
        summary["failure"] = {"error": type(error).__name__, "message": reason}
        run_files.write_json(directory / run_files.SUMMARY_FILE, summary)
        raise TrainingError(
            f"training failed after {len(metrics_logger.records)} finished epoch(s): "
            f"{reason}\nMetrics and checkpoints of the finished epochs are kept in "
            f"{directory}.") from error
    fit_seconds = time.perf_counter() - fit_started

    epochs = metrics_logger.records
    summary = summarise(fit_seconds)
    if guard.failure is not None:
        summary["status"] = "failed"
        summary["failure"] = guard.failure
        run_files.write_json(directory / run_files.SUMMARY_FILE, summary)
        failure = guard.failure
        raise TrainingError(
            f"the training loss became {failure['loss']} at epoch {failure['epoch']}, batch "
            f"{failure['batch']}; training stopped there. Metrics of the finished epochs and "
            f"their checkpoints are kept in {directory}. Lower optimizer.learning_rate, set "
            "optimizer.clipnorm, or check the data for NaN values.")

    model.save(directory / run_files.MODEL_FILE)
    run_files.write_json(directory / run_files.SUMMARY_FILE, summary)
    return RunResult(run_dir=directory, summary=summary, epochs=epochs)


def describe_op_error(error) -> str:
    """The useful part of a TensorFlow runtime error's message, without graph noise.

    A data worker's exception is reported with the worker's own traceback text.
    """
    message = getattr(error, "message", None) or str(error)
    marker = message.rfind("WorkerError: ")
    if marker != -1:
        text = message[marker:].split("\n\t [[", 1)[0]
        return "\n".join(line for line in text.splitlines() if line.strip())
    noise = ("Graph execution error", "Detected at node", "<stack traces unavailable>", "[[")
    lines = [line.strip() for line in message.splitlines()
             if line.strip() and not line.strip().startswith(noise)]
    return " ".join(lines[:3]) or type(error).__name__


def _summary(recipe: Recipe, *, epochs: list, plan, precision: str, strategy_info: dict,
             threads: dict, data_info: dict, started: float, fit_seconds: float,
             tf_version: str, keras_version: str) -> dict:
    final_metrics = {k: v for k, v in (epochs[-1] if epochs else {}).items()
                     if k not in ("epoch", "examples", "examples_per_sec", "train_seconds",
                                  "epoch_seconds", "non_finite_loss")}
    # The first epoch includes tracing and compilation; report steady state when there is one.
    steady = epochs[1:] if len(epochs) > 1 else epochs
    train_seconds = sum(e["train_seconds"] for e in steady)
    examples = sum(e["examples"] for e in steady)
    return {
        "status": "completed",
        "name": recipe.name,
        "epochs_completed": len(epochs),
        "final_metrics": final_metrics,
        "examples_per_sec": examples / train_seconds if train_seconds else 0.0,
        "first_epoch_examples_per_sec": epochs[0]["examples_per_sec"] if epochs else 0.0,
        "wall_seconds": time.perf_counter() - started,
        "fit_seconds": fit_seconds,
        "devices": strategy_info.get("devices", []),
        "strategy": strategy_info.get("strategy"),
        "precision": precision,
        **plan.as_dict(),  # replicas, accumulation steps, global/per-replica/micro batch
        "jit_compile": recipe.training.jit_compile,
        "steps_per_execution": recipe.training.steps_per_execution,
        "threads": threads,
        "dataset": {k: v for k, v in data_info.items() if k != "class_names"},
        "class_names": list(data_info.get("class_names") or []),
        "versions": {"tfaccel": __version__, "tensorflow": tf_version, "keras": keras_version,
                     "python": platform.python_version()},
    }


def _as_recipe(recipe_or_path, overrides: Sequence[str]) -> Recipe:
    if isinstance(recipe_or_path, Recipe):
        if overrides:
            from tfaccel.recipe import recipe_to_dict

            return recipe_from_dict(recipe_to_dict(recipe_or_path), overrides=overrides)
        return recipe_or_path
    if isinstance(recipe_or_path, dict):
        return recipe_from_dict(recipe_or_path, overrides=overrides)
    return load_recipe(recipe_or_path, overrides)
