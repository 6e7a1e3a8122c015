"""`train(recipe)`: the one place that wires data, model, strategy, precision and outputs."""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Optional, Sequence, Union

from tfaccel.training import checkpoints as ckpt
from tfaccel.training import model_source
from tfaccel.training import run_dir as run_files
from tfaccel._version import __version__
from tfaccel.config.batching import BatchPlan
from tfaccel.errors import DataError, Preempted, TrainingError, UserInputError
from tfaccel.messages import say
from tfaccel.config.cluster import WorkerRole, worker_role
from tfaccel.config.recipe import Recipe, dump_recipe, load_recipe, recipe_from_dict
from tfaccel.training.inputs import TrainData, build_data, input_order_is_fixed  # noqa: F401 (tools use them from here)
from tfaccel.training.resume import LOCK_FILE, RunLock, plan_resume
from tfaccel.training.best_epoch import can_judge, keep_plan
from tfaccel.training.execution import Choice, initial_steps
from tfaccel.training.lost_peer import cluster_of, lost_peer_message
from tfaccel.training.session import Session, open_session


@dataclasses.dataclass(frozen=True)
class RunResult:
    """What a finished run leaves: its directory, its summary and per-epoch metrics."""

    run_dir: Optional[Path]
    summary: dict
    epochs: list
    # False on the other workers of a multi-worker run: the chief wrote the run directory.
    chief: bool = True

    def summary_text(self) -> str:
        """A short human summary: the kept epoch's metrics, which epoch model.keras holds
        and why, the last epoch's metrics when it is another, examples/s, wall time."""
        summary = self.summary
        kept = summary.get("saved_model_metrics") or summary.get("final_metrics", {})
        parts = [_metrics_text(kept) + " (" + _kept_text(summary) + ")"]
        last = summary.get("epochs_completed")
        if summary.get("saved_model_epoch") not in (None, last):
            parts.append(f"last epoch {last}: "
                         + _metrics_text(summary.get("final_metrics", {})))
        parts.append(f"{summary['examples_per_sec']:.0f} examples/s, "
                     f"wall {summary['wall_seconds']:.1f} s")
        text = "Done: " + "; ".join(parts)
        if not self.chief:
            where = f": {self.run_dir}" if self.run_dir is not None else ""
            return text + f"\nThe chief (worker 0) wrote the run directory{where}."
        return text + f"\nRun directory: {self.run_dir}"


def _metrics_text(metrics: dict) -> str:
    return ", ".join(f"{key} {metrics[key]:.4f}"
                     for key in ("val_accuracy", "accuracy", "val_loss", "loss")
                     if key in metrics)


def _kept_text(summary: dict) -> str:
    """Which epoch model.keras holds, and the best epoch by the monitor when it is another."""
    saved, last = summary.get("saved_model_epoch"), summary.get("epochs_completed")
    monitor, best = summary.get("monitor", "val_loss"), summary.get("best_epoch")
    if summary.get("keep") == "best":
        if saved == last:
            return (f"epoch {saved} of {last}, the best by {monitor} and the last, kept in "
                    "model.keras")
        return f"best by {monitor}: epoch {saved} of {last}, kept in model.keras"
    text = f"last epoch {saved} of {last}, kept in model.keras"
    if summary.get("keep_note"):
        return f"{text}: {summary['keep_note']}"
    if best is not None and best != saved:
        text += (f"; best by {monitor}: epoch {best}, {monitor} "
                 f"{summary['best_value']:.4f}")
    return text


def train(recipe_or_path: Union[Recipe, str, os.PathLike, dict, None] = None,
          overrides: Sequence[str] = (), *, run_dir: Optional[str] = None,
          callbacks: Sequence = (), resume: Union[str, os.PathLike, None] = None,
          profile: Optional[tuple] = None, model=None) -> RunResult:
    """Runs a whole training job and leaves a run directory.

    Args:
        recipe_or_path: A `Recipe`, a path to a YAML recipe, or a recipe mapping. With
            `resume` it may be omitted (the run's own recipe.yaml is used).
        overrides: `key.path=value` overrides applied before validation.
        run_dir: Explicit run directory (must not exist or be empty); by default a new
            folder under `runtime.runs_dir`.
        callbacks: Extra Keras callbacks, run after tfaccel's own.
        resume: A run directory to continue in place from its newest good checkpoint.
            Only `training.epochs` may differ from the run's recipe (to extend it).
        profile: ``(start, end)``: write a TensorBoard profiler trace of optimizer steps
            start..end (counted from 1 over the whole run, inclusive) into the run
            directory's tensorboard/ folder.
        model: Your own model instead of the recipe's model section: a builder callable
            ``builder(*, input_shape, num_classes, **model.params)`` returning an uncompiled
            keras.Model (built in the strategy's scope, under the precision policy), or a
            built keras.Model (cloned into the strategy's scope with its weights; it keeps
            the dtype policy it was built with). The run directory records which
            (model_source.json); a resume must give the same one again.

    Returns:
        The `RunResult`.

    Raises:
        UserInputError: The recipe, the data or the run directory is wrong, or the run
            cannot be resumed (changed recipe, already finished, in use).
        TrainingError: Training failed (for example the loss became NaN).
        Preempted: SIGTERM/SIGINT stopped training after saving a checkpoint.
    """
    started = time.perf_counter()
    opened = _open_run(recipe_or_path, overrides, run_dir=run_dir, resume=resume, model=model)
    recipe, role, directory, shown = opened.recipe, opened.role, opened.directory, opened.shown
    lock, scratch = opened.lock, opened.scratch
    try:
        # A resumed run keeps the precision `auto` chose when it started.
        recorded = run_files.recorded_precision(directory) if resume is not None else None
        with open_session(recipe, precision=recorded) as session:
            context = _RunContext(recipe=recipe, directory=directory, session=session,
                                  started=started, extra_callbacks=list(callbacks),
                                  resume_from=Path(resume) if resume is not None else None,
                                  role=role, shown_dir=shown, profile=profile,
                                  given_model=model, model_source=opened.model_source)
            return _train_with(context)
    except UserInputError:
        # A mistake found before training (missing data, a bad batch plan): do not leave a
        # run directory that holds nothing but the recipe.
        if resume is None and lock is not None and _holds_only_the_recipe(directory):
            lock.release()
            shutil.rmtree(directory)
        raise
    finally:
        if lock is not None:
            lock.release()
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


@dataclasses.dataclass
class _OpenedRun:
    """The first step of `train`: the recipe, this worker's role and where it writes."""

    recipe: Recipe
    role: WorkerRole
    directory: Path  # where this process writes: the run directory or a worker's scratch
    shown: Optional[Path]  # the run directory as the user knows it (the chief's)
    lock: Optional[RunLock]
    scratch: Optional[Path]  # a non-chief worker's scratch folder, removed at the end
    model_source: dict  # what model the run trains (model_source.describe)


def _open_run(recipe_or_path, overrides: Sequence[str], *, run_dir: Optional[str],
              resume, model=None) -> _OpenedRun:
    """Resolves the recipe (new or resumed), takes the run directory's lock, writes recipe.yaml."""
    # In a multi-worker run only the chief writes the run directory; every other worker
    # runs the same code (saving is a collective there) into a scratch folder removed at
    # the end, and reads checkpoints from the run directory when resuming.
    lock = scratch = None
    run_files.check_resume_target(run_dir=run_dir, resume=resume)
    if resume is not None:
        model_source.prepare_resume(resume)
        requested = None if recipe_or_path is None else _as_recipe(
            recipe_or_path, overrides, own_model=model is not None)
        request = plan_resume(resume, requested=requested,
                              overrides=overrides if requested is None else (),
                              own_model=model is not None)
        recipe, directory = request.recipe, request.directory
        source = model_source.describe(recipe, given=model)
        model_source.check_same(directory, source)
        role = _checked_role(recipe)
        shown = directory
        if role.chief:
            lock = RunLock(directory).acquire()
            if request.extended_from is not None:
                run_files.write_text(directory / run_files.RECIPE_FILE, dump_recipe(recipe))
        else:
            directory = scratch = _scratch_dir(role)
    else:
        if recipe_or_path is None:
            raise UserInputError("train needs a recipe (a path, a mapping or a Recipe).")
        recipe = _as_recipe(recipe_or_path, overrides, own_model=model is not None)
        source = model_source.describe(recipe, given=model)
        role = _checked_role(recipe)
        if role.chief:
            directory = shown = _new_run_dir(recipe, run_dir)
            lock = RunLock(directory).acquire()
        else:
            directory = scratch = _scratch_dir(role)
            shown = Path(run_dir) if run_dir is not None else None
        run_files.write_text(directory / run_files.RECIPE_FILE, dump_recipe(recipe))
        model_source.record(directory, source)

    return _OpenedRun(recipe=recipe, role=role, directory=directory, shown=shown, lock=lock,
                      scratch=scratch, model_source=source)


@dataclasses.dataclass
class _RunContext:
    """What every step of a run reads: decided once in `train`."""

    recipe: Recipe
    directory: Path
    session: Session  # strategy, precision, threads and batch plan, set for the run
    started: float
    extra_callbacks: list
    resume_from: Optional[Path]  # the run directory whose checkpoint is continued
    role: WorkerRole
    shown_dir: Optional[Path]  # the run directory as the user knows it (the chief's)
    profile: Optional[tuple] = None
    # Steps per call into the train function: the recipe's, or `auto`'s choice once made.
    steps_per_execution: int = 1
    execution_choice: Optional[Choice] = None
    # What model.keras holds (`best_epoch.keep_plan`) and why best became last, if it did.
    keep: str = "last"
    keep_note: Optional[str] = None
    given_model: object = None  # train(model=...): a builder or a keras.Model
    model_source: Optional[dict] = None  # what model the run trains, for the summary

    @property
    def resuming(self) -> bool:
        """Whether this run continues an earlier one's checkpoint."""
        return self.resume_from is not None


def _train_with(ctx: _RunContext) -> RunResult:
    recipe, plan = ctx.recipe, ctx.session.plan
    say(f"{ctx.session.strategy_info['strategy']} on {ctx.session.strategy_info['replicas']} "
        f"replica(s), precision {ctx.session.precision}, {plan.describe()}.")
    _record_precision(ctx)
    _check_data_service(recipe, strategy=ctx.session.strategy_info["strategy"])
    _check_compile_arguments(recipe)
    try:
        data = ctx.session.build_data()
    except Exception as error:  # noqa: BLE001 - only a source's DataError is converted
        bad_data = data_error_in(error)
        if bad_data is None:
            raise
        raise DataError(bad_data) from None
    _check_steps_per_execution(recipe, data)
    ctx.steps_per_execution = initial_steps(recipe.training.steps_per_execution)
    _keep_vocabulary(ctx, data)
    _keep_feature_space(ctx, data)
    _measure_padding(data)
    ctx.keep, ctx.keep_note = keep_plan(keep=recipe.training.keep,
                                        monitor=recipe.training.monitor,
                                        has_validation=data.validation is not None)
    if ctx.keep_note is not None:
        say(f"training.keep is best but there is {ctx.keep_note}: model.keras will hold "
            "the last epoch.")
    checkpoint = _find_checkpoint(ctx) if ctx.resuming else None
    trained_model, model = build_model(recipe, strategy=ctx.session.strategy, plan=plan,
                                       data=data, given=ctx.given_model)
    restored = {"metrics": [], "best_weights": None}
    if checkpoint is not None:
        from tfaccel.training.training_state import restore_state

        with ctx.session.strategy.scope():  # optimizer variables are created here when missing
            restored = restore_state(trained_model, checkpoint)
        say(f"resuming from checkpoint {checkpoint.path.name}: epoch "
            f"{checkpoint.epoch + 1}, step {checkpoint.step_in_epoch} of "
            f"{data.steps_per_epoch}.")
        if recipe.data.service.dispatcher:
            say("the input comes from a tf.data service, which hands out batches in the "
                "order its workers finish them: weights, optimizer and step count resume "
                "exactly, the data position only approximately (see docs/distributed.md, "
                "tf.data service).")
    outputs = _make_callbacks(ctx, data=data, plan=plan, checkpoint=checkpoint,
                              restored=restored)
    outputs.monitor.attach(trained_model, strategy=ctx.session.strategy)
    fit_started = time.perf_counter()
    try:
        _fit(ctx, trained_model=trained_model, data=data, outputs=outputs,
             checkpoint=checkpoint)
    except BaseException as error:
        _record_failure(ctx, error, outputs=outputs, plan=plan, data=data,
                        fit_seconds=time.perf_counter() - fit_started)
        if isinstance(error, Preempted) and error.run_dir is None and ctx.shown_dir:
            error.run_dir = str(ctx.shown_dir)  # the callbacks raise it without knowing it
        converted = _as_training_error(error, outputs=outputs, directory=ctx.shown_dir,
                                       strategy=ctx.session.strategy,
                                       peer_timeout=ctx.recipe.runtime.peer_timeout)
        if converted is error:
            raise
        raise converted from error
    summary = _summary(ctx, epochs=outputs.logger.records, plan=plan, data=data,
                       fit_seconds=time.perf_counter() - fit_started, best=outputs.best)
    guard = outputs.guard
    if guard.failure is not None:
        summary["status"] = "failed"
        summary["failure"] = guard.failure
        run_files.write_json(ctx.directory / run_files.SUMMARY_FILE, summary)
        failure = guard.failure
        raise TrainingError(
            f"the training loss became {failure['loss']} at epoch {failure['epoch']}, batch "
            f"{failure['batch']}; training stopped there. Metrics of the finished epochs and "
            f"their checkpoints are kept in {ctx.directory}. Lower optimizer.learning_rate, "
            "set optimizer.clipnorm, or check the data for NaN values.")
    if outputs.best is not None:
        # keep: best: model.keras is saved from the best epoch's weights (every worker
        # sets them: the save below is a collective under multi-worker).
        outputs.best.restore_best()
    model.save(ctx.directory / run_files.MODEL_FILE)
    run_files.write_json(ctx.directory / run_files.SUMMARY_FILE, summary)
    return RunResult(run_dir=ctx.shown_dir, summary=summary, epochs=outputs.logger.records,
                     chief=ctx.role.chief)


def _record_precision(ctx: _RunContext) -> None:
    """`runtime.precision: auto`'s choice: said, and kept in the run directory for a resume."""
    choice = ctx.session.precision_choice
    if choice is None:
        return
    say(f"precision auto: {choice['policy']} ({choice['reason']}).")
    if not ctx.resuming:
        run_files.write_json(ctx.directory / run_files.PRECISION_FILE, choice)


def _check_steps_per_execution(recipe: Recipe, data: TrainData) -> None:
    """The recipe's steps per call against the epoch's steps, now that they are known."""
    from tfaccel.config.batching import check_steps_per_execution

    training = recipe.training
    if training.steps_per_execution != "auto":
        check_steps_per_execution(training.steps_per_execution,
                                  steps_per_epoch=data.steps_per_epoch,
                                  every_steps=training.checkpoint_every_steps)


def _choose_steps_per_execution(ctx: _RunContext, *, trained_model, data: TrainData,
                                outputs: _Outputs) -> None:
    """`steps_per_execution: auto`: the first `fit` measured; the rest runs with the choice.

    Changing the steps per call retraces the train and test functions (Keras bakes the
    count into them); the steps, their batches and their order are unchanged.
    """
    from tfaccel.training import execution

    choice = execution.choose_from_cost(
        outputs.monitor.per_call_cost(), steps_per_epoch=data.steps_per_epoch,
        every_steps=ctx.recipe.training.checkpoint_every_steps,
        unmeasured=outputs.monitor.unavailable_reason or "too few steps in the first epoch")
    ctx.execution_choice = choice
    say(f"steps_per_execution auto: {choice.steps} ({choice.reason}).")
    if choice.steps == ctx.steps_per_execution:
        return
    ctx.steps_per_execution = choice.steps
    trained_model.steps_per_execution = choice.steps
    trained_model.train_function = trained_model.test_function = None
    outputs.monitor.steps_per_execution = choice.steps
    for callback in outputs.all:
        if hasattr(callback, "per_call"):  # ProfileSteps counts the steps of each call
            callback.per_call = choice.steps


def _keep_vocabulary(ctx: _RunContext, data: TrainData) -> None:
    """A text run's vocabulary in the run directory (one token per line, in id order).

    It is what turns texts into the ids the saved model takes:
    `data.text_vectors.with_vectorizer` puts it in front of the model.
    """
    layer = data.info.get("_vectorizer")
    if layer is None:
        return
    from tfaccel.data import text_vectors

    path = text_vectors.save_vocabulary(layer, ctx.directory)
    say(f"text: {data.info['text']['vocabulary_size']} tokens in {Path(path).name}.")


def _keep_feature_space(ctx: _RunContext, data: TrainData) -> None:
    """A table run's FeatureSpace in the run directory: how its columns became features."""
    space = data.info.get("_feature_space")
    if space is None:
        return
    from tfaccel.data import table_features

    path = table_features.save_feature_space(space, ctx.directory)
    table = data.info["table"]
    say(f"table: {len(table['numeric'])} numeric and {len(table['categorical'])} "
        f"categorical column(s) as {table['features']} features ({Path(path).name}).")


def _measure_padding(data: TrainData) -> None:
    """The padding of sequences of open length (token ids, waveforms) in the summary's data.

    Measured on the validation batches (a fixed pass): the share of their steps that are
    the zeros a batch appends, what batches by length (data.text.batch_by_length) keep low.
    """
    from tfaccel.data.length_batches import has_open_length, padding_fraction

    if data.validation is None or not has_open_length(data.info.get("input_shape")):
        return

    fraction = padding_fraction(data.validation)
    data.info["validation_padding_fraction"] = round(fraction, 4)
    say(f"{fraction:.1%} of the validation batches' steps are padding.")


def _check_data_service(recipe: Recipe, *, strategy: str) -> None:
    # Recipe validation refuses `strategy: multi_worker` itself; `auto` only resolves to it
    # here (TF_CONFIG), so the same refusal is repeated once the strategy is known.
    if recipe.data.service.dispatcher and strategy == "multi_worker":
        raise UserInputError(
            "data.service with a multi_worker strategy (runtime.strategy "
            f"{recipe.runtime.strategy!r} resolved to multi_worker from TF_CONFIG) is not "
            "supported yet; use one trainer, or leave data.service.dispatcher empty.")


def _find_checkpoint(ctx: _RunContext) -> Optional[ckpt.Checkpoint]:
    checkpoint, skipped = ckpt.latest_checkpoint(ctx.resume_from / run_files.CHECKPOINTS_DIR)
    for message in skipped:
        say(f"{message}.")
    if checkpoint is None:
        say(f"{ctx.directory} has no usable checkpoint yet; the run starts over "
            "from the beginning in the same directory.")
        for name in (run_files.METRICS_FILE, run_files.SUMMARY_FILE):
            (ctx.directory / name).unlink(missing_ok=True)
    elif skipped:
        say(f"using the previous good checkpoint {checkpoint.path.name}.")
    return checkpoint


def _check_compile_arguments(recipe: Recipe) -> None:
    """The optimizer's, schedule's, loss's and metrics' arguments against their signatures:
    before the data is built, so a misspelt argument costs no pipeline build."""
    from tfaccel.training.losses import check_loss_and_metrics
    from tfaccel.training.optimizers import check_optimizer

    check_optimizer(recipe.optimizer)
    check_loss_and_metrics(recipe.training)


def build_model(recipe: Recipe, *, strategy, plan: BatchPlan, data: TrainData, given=None):
    """The recipe's Keras model and its accumulation wrapper, compiled in `strategy`'s scope.

    What `train` fits, built the same way for other tools (`tfaccel doctor`). The model is
    a registered one, the recipe's own builder (model.name ``module:callable``), a saved
    model (model.path) or `given` (`train(model=...)`), always compiled with the recipe's
    optimizer, loss and metrics.

    Returns:
        ``(trained_model, model)``: the model `fit` runs (the accumulation wrapper when
        accumulating) and the plain Keras model inside it.
    """
    from tfaccel.engine.keras_compat import patch_for_multi_worker
    from tfaccel.training.losses import make_loss, make_metrics
    from tfaccel.training.optimizers import make_optimizer

    training = recipe.training
    with strategy.scope():
        model = _make_model(recipe, data=data, given=given)
        optimizer = make_optimizer(recipe.optimizer,
                                   total_steps=data.steps_per_epoch * training.epochs,
                                   steps_per_epoch=data.steps_per_epoch)
        trained_model = model
        if plan.accumulation_steps > 1:
            from tfaccel.engine.accumulation import accumulate

            trained_model = accumulate(model, plan.accumulation_steps)
        trained_model.compile(optimizer=optimizer, loss=make_loss(training),
                              metrics=make_metrics(training),
                              jit_compile=training.jit_compile,
                              steps_per_execution=initial_steps(training.steps_per_execution))
        # A no-op except under multi-worker MultiWorkerMirroredStrategy (keras#20585).
        patch_for_multi_worker(trained_model)
    return trained_model, model


def _make_model(recipe: Recipe, *, data: TrainData, given):
    """The uncompiled model, made in the caller's strategy scope and precision policy."""
    from tfaccel import models, python_refs
    from tfaccel.training import own_models

    shape, classes = data.info["input_shape"], data.info["num_classes"]
    name = recipe.model.name
    if given is not None:
        return own_models.from_given(given, input_shape=shape, num_classes=classes,
                                     params=dict(recipe.model.params))
    if recipe.model.path is not None:
        return own_models.load_saved(recipe.model.path, input_shape=shape, num_classes=classes)
    if python_refs.is_reference(name):
        builder = python_refs.load(name, key="model.name")
        return own_models.call_builder(builder, where=f"model.name {name!r}",
                                       input_shape=shape, num_classes=classes,
                                       params=dict(recipe.model.params))
    return models.build_model(name, input_shape=shape, num_classes=classes,
                              **_model_params(recipe, data.info))


def _model_params(recipe: Recipe, info: dict) -> dict:
    """`model.params`, with a token model's `vocab_size` taken from the adapted vocabulary
    and its `max_length` (positions, text_transformer) from data.text.max_length when set."""
    from tfaccel import models

    params = dict(recipe.model.params)
    text = info.get("text")
    defaults = models.model_params(recipe.model.name)
    if info.get("table") is not None and "normalization" in defaults:
        # FeatureSpace already normalised the numbers and one-hot encoded the categories:
        # a pixel rescaling (mlp's default) would shrink them 255-fold.
        params.setdefault("normalization", "none")
    if text is None or "vocab_size" not in defaults:
        return params
    cut = text["max_length"]
    if "max_length" in defaults and cut is not None:
        if params.setdefault("max_length", cut) < cut:
            raise UserInputError(
                f"model.params.max_length is {params['max_length']} but data.text.max_length "
                f"keeps {cut} tokens of each text; the model would read only the first "
                f"{params['max_length']}. Leave model.params.max_length unset to follow "
                "data.text.max_length, or lower data.text.max_length.")
    vocabulary = text["vocabulary_size"]
    if params.setdefault("vocab_size", vocabulary) < vocabulary:
        raise UserInputError(
            f"model.params.vocab_size is {params['vocab_size']} but the vocabulary adapted "
            f"on the training texts has {vocabulary} tokens (data.text.max_tokens "
            f"{recipe.data.text.max_tokens}); leave vocab_size empty to follow it, or lower "
            "data.text.max_tokens.")
    return params


@dataclasses.dataclass
class _Outputs:
    """The callbacks that write the run's outputs, and the list passed to `fit`."""

    guard: object
    monitor: object
    logger: object
    checkpoints: object
    best: object  # BestEpoch, or None when nothing can judge the monitor
    signals: object
    all: list


def _make_callbacks(ctx: _RunContext, *, data: TrainData, plan: BatchPlan,
                    checkpoint: Optional[ckpt.Checkpoint], restored: dict) -> _Outputs:
    import keras

    from tfaccel.training.best_epoch import BestEpoch
    from tfaccel.training.callbacks import (EpochMetricsLogger, NonFiniteLossGuard, PreemptionSignals,
                                   ResumableCheckpoints)

    training = ctx.recipe.training
    metrics_path = ctx.directory / run_files.METRICS_FILE
    records = list(checkpoint.state["records"]) if checkpoint is not None else []
    if checkpoint is not None:
        # metrics.jsonl is rewritten to what the checkpoint knew: an epoch that ended after
        # it (and so will be trained again) is not listed twice.
        run_files.write_text(metrics_path, "".join(json.dumps(r, default=float) + "\n"
                                          for r in records))
    from tfaccel.training.throughput import ThroughputMonitor

    guard = NonFiniteLossGuard()
    # Before the logger and TensorBoard: its figures join the epoch's logs they write.
    monitor = ThroughputMonitor(
        steps_per_execution=initial_steps(training.steps_per_execution))
    logger = EpochMetricsLogger(metrics_path, examples_per_epoch=data.examples_per_epoch,
                                batch_size=plan.global_batch_size, guard=guard,
                                steps_per_epoch=data.steps_per_epoch)
    logger.records.extend(records)
    callbacks = [guard, monitor, logger]
    best = None
    if can_judge(training.monitor, has_validation=data.validation is not None):
        carried = None
        # Checkpoints written before training.keep held this state as early_stopping.
        saved = (checkpoint.state.get("best") or checkpoint.state.get("early_stopping")) \
            if checkpoint is not None else None
        if saved:
            carried = {**saved, "best_weights": restored.get("best_weights")}
        # What Keras logs: the loss and each compiled metric by the name it was given.
        from tfaccel.training.losses import logged_metric_names

        logged = ["loss", *logged_metric_names(training)]
        if data.validation is not None:
            logged += [f"val_{name}" for name in logged]
        best = BestEpoch(monitor=training.monitor, patience=training.early_stopping_patience,
                         keep_weights=ctx.keep == "best", logged=logged, carried=carried)
    elif training.early_stopping_patience:
        say(f"training.early_stopping_patience is set but the run has no validation split "
            f"to judge training.monitor {training.monitor}: it trains all "
            f"{training.epochs} epochs.")
    if ctx.role.multi_worker:
        from tfaccel.training.callbacks import CoordinatedPreemption

        # Every worker must save at the same step (a checkpoint reads the metrics' sums
        # across workers, a collective): TensorFlow's PreemptionCheckpointHandler agrees
        # on that step through the cluster's coordination service.
        signals = CoordinatedPreemption(ctx.session.strategy)
    else:
        signals = PreemptionSignals()
    checkpoints = ResumableCheckpoints(
        ctx.directory / run_files.CHECKPOINTS_DIR, steps_per_epoch=data.steps_per_epoch,
        epoch_checkpoints=training.checkpoints, every_steps=training.checkpoint_every_steps,
        every_minutes=training.checkpoint_every_minutes, keep=training.keep_checkpoints,
        metrics_logger=logger, guard=guard, signals=signals, best=best,
        restore_metrics=restored["metrics"] if checkpoint is not None
        and checkpoint.step_in_epoch else None)
    if best is not None:
        # Before the checkpoints, so an epoch-end checkpoint holds this epoch's best.
        callbacks.append(best)
    callbacks.append(checkpoints)
    if ctx.recipe.runtime.tensorboard:
        callbacks.append(keras.callbacks.TensorBoard(
            log_dir=str(ctx.directory / run_files.TENSORBOARD_DIR), write_graph=False,
            profile_batch=0))
    if ctx.profile is not None:
        from tfaccel.training.throughput import ProfileSteps

        start, end = ctx.profile
        last = data.steps_per_epoch * training.epochs
        first = checkpoint.global_step if checkpoint is not None else 0
        if start > last or end <= first:
            raise UserInputError(
                f"--profile {start}:{end} lies outside the steps this run trains "
                f"({first + 1} to {last}: {training.epochs} epoch(s) of "
                f"{data.steps_per_epoch} steps); choose steps inside that range.")
        callbacks.append(ProfileSteps(start, end,
                                      logdir=ctx.directory / run_files.TENSORBOARD_DIR,
                                      steps_per_execution=initial_steps(
                                          training.steps_per_execution),
                                      first_step=first))
    callbacks += ctx.extra_callbacks
    return _Outputs(guard=guard, monitor=monitor, logger=logger, checkpoints=checkpoints,
                    best=best, signals=signals, all=callbacks)


def _fit(ctx: _RunContext, *, trained_model, data: TrainData, outputs: _Outputs,
         checkpoint: Optional[ckpt.Checkpoint]) -> None:
    """Runs `fit` once, or in parts: the rest of an interrupted epoch, `auto`'s first epoch.

    Keras' `fit` has one `steps_per_epoch` for all epochs, so the rest of an interrupted
    epoch is its own `fit` call; the metric sums of its first part are put back by the
    checkpoint callback, so the epoch reports the same numbers as an uninterrupted one.
    `steps_per_execution: auto` runs the first epoch as its own call too (one step per call,
    measured), then the rest with its choice. Every part is asked for the run's last epoch
    and stopped after its own, so Keras numbers the epochs of the whole run.
    """
    from tfaccel.training.callbacks import StopAfterEpoch

    training = ctx.recipe.training
    steps = data.steps_per_epoch
    start = checkpoint.global_step if checkpoint else 0
    epoch, step = divmod(start, steps)
    segments = []
    if step:
        segments.append((epoch, epoch + 1, steps - step, start))
        epoch += 1
    if epoch < training.epochs:
        segments.append((epoch, training.epochs, steps, epoch * steps))
    auto = training.steps_per_execution == "auto"
    if auto and outputs.monitor.unavailable_reason is not None:
        # Nothing to measure with (jit_compile, op determinism, several workers): one step
        # per call, said once, and no second `fit`.
        _choose_steps_per_execution(ctx, trained_model=trained_model, data=data,
                                    outputs=outputs)
        auto = False
    if auto and len(segments) == 1 and training.epochs - epoch > 1:
        # `auto` measures one step per call in the first epoch, then picks for the rest.
        segments = [(epoch, epoch + 1, steps, epoch * steps),
                    (epoch + 1, training.epochs, steps, (epoch + 1) * steps)]
    with outputs.signals, warnings.catch_warnings():
        # Keras warns "Your input ran out of data; interrupting training" whenever an
        # evaluation of unknown length (an image folder's, whose decode stage may skip a
        # bad file) reaches its end. Training reads an endless stream here, so the
        # warning can only ever be about that normal end of validation.
        warnings.filterwarnings("ignore", message="Your input ran out of data")
        for index, (first_epoch, end_epoch, steps_in_epoch, global_step) in \
                enumerate(segments):
            if index and auto:
                _choose_steps_per_execution(ctx, trained_model=trained_model, data=data,
                                            outputs=outputs)
            with ctx.session.strategy.scope():  # the data layer shards by the strategy in scope
                stream = data.make_stream(global_step)
            # Last in the list: it sees whether another callback stopped the run first.
            stopper = StopAfterEpoch(end_epoch - 1)
            trained_model.fit(
                stream, validation_data=data.validation,
                initial_epoch=first_epoch, epochs=training.epochs,
                steps_per_epoch=steps_in_epoch, validation_steps=training.validation_steps,
                callbacks=outputs.all + [stopper],
                verbose=fit_verbosity(ctx.recipe.runtime.verbose),
                shuffle=False)  # the tf.data pipeline shuffles; Keras would only warn
            if outputs.guard.failure is not None or stopper.stopped_by_others \
                    or not stopper.stopped:
                break


def fit_verbosity(verbose: Optional[int], *, stream=None) -> int:
    """Keras' `verbose` for `fit`: the recipe's, or by where the output goes when unset.

    Keras' progress bar redraws one line with carriage returns: on a terminal that is one
    line, in a log file or a scheduler's output hundreds of ANSI redraws per epoch. So
    unset (None) means a bar on a terminal and one line per epoch anywhere else.
    """
    if verbose is not None:
        return int(verbose)
    stream = sys.stdout if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    return 1 if isatty is not None and isatty() else 2


def _record_failure(ctx: _RunContext, error: BaseException, *, outputs: _Outputs,
                    plan: BatchPlan, data: TrainData, fit_seconds: float) -> None:
    """Writes summary.json with the status of a run that did not complete."""
    import tensorflow as tf

    summary = _summary(ctx, epochs=outputs.logger.records, plan=plan, data=data,
                       fit_seconds=fit_seconds, best=outputs.best)
    if isinstance(error, Preempted):
        summary["status"] = "preempted"
        summary["checkpoint"] = error.checkpoint
    elif isinstance(error, KeyboardInterrupt):
        summary["status"] = "interrupted"
    elif isinstance(error, tf.errors.OpError):
        summary["status"] = "failed"
        summary["failure"] = {"error": type(error).__name__,
                              "message": describe_op_error(error)}
    elif isinstance(error, TrainingError):
        summary["status"] = "failed"
        summary["failure"] = {"error": type(error).__name__, "message": str(error)}
    else:
        return
    run_files.write_json(ctx.directory / run_files.SUMMARY_FILE, summary)


def _as_training_error(error: BaseException, *, outputs: _Outputs,
                       directory: Optional[Path], strategy=None, peer_timeout=None):
    """A TensorFlow runtime failure as one clear TrainingError; anything else unchanged."""
    import tensorflow as tf

    if not isinstance(error, tf.errors.OpError):
        return error
    # A failure inside the compiled step or the input pipeline (a data worker that raised
    # or died, an undecodable record): keep what was written, say what failed.
    where = f" in {directory}" if directory is not None else " by the chief (worker 0)"
    bad_data = data_error_in(error)
    if bad_data is not None:  # the data's fault, named by the source: exit 2
        return DataError(f"{bad_data} Metrics and checkpoints of the "
                         f"{len(outputs.logger.records)} finished epoch(s) are kept{where}.")
    lost = lost_peer_message(getattr(error, "message", None) or str(error),
                             cluster=cluster_of(strategy),
                             finished_epochs=len(outputs.logger.records), kept=where,
                             timeout=peer_timeout)
    if lost is not None:  # a peer unreachable: name its HOST:PORT, say how to resume
        return TrainingError(lost)
    return TrainingError(
        f"training failed after {len(outputs.logger.records)} finished epoch(s): "
        f"{describe_op_error(error)}\nMetrics and checkpoints of the finished epochs are "
        f"kept{where}.")


def data_error_in(error: BaseException) -> Optional[str]:
    """The text of a `DataError` a Python source raised inside tf.data, or None.

    tf.data carries it as an OpError whose message holds ``DataError: <text>``.
    """
    import tensorflow as tf

    if not isinstance(error, tf.errors.OpError):
        return None
    message = getattr(error, "message", None) or str(error)
    marker = message.rfind("DataError: ")
    if marker == -1:
        return None
    text = message[marker + len("DataError: "):].split("\n\t [[", 1)[0].strip()
    if message[:marker].endswith("assertion failed: [") and text.endswith("]"):
        text = text[:-1]  # a check in the graph (tf.debugging.Assert) brackets its text
    return text


_NOISE = ("Graph execution error", "Detected at node", "<stack traces unavailable>", "[[",
          "File \"", "Traceback (most recent call last)", "Stack trace for op definition")


def describe_op_error(error) -> str:
    """The TensorFlow error's own message, without stack frames and graph noise.

    A data worker's exception is reported with the worker's own traceback text.
    """
    message = getattr(error, "message", None) or str(error)
    marker = message.rfind("WorkerError: ")
    if marker != -1:
        text = message[marker:].split("\n\t [[", 1)[0]
        return "\n".join(line for line in text.splitlines() if line.strip())
    # TF 2.x prefixes the message with where the failing op was defined: a block of
    # "File ..., line N, in f" frames, each followed by its indented source line.
    kept, in_frame = [], False
    for raw in message.splitlines():
        line = raw.strip()
        if not line:
            in_frame = False
            continue
        if line.startswith(_NOISE):
            in_frame = line.startswith(("File \"", "Detected at node", "Traceback"))
            continue
        if in_frame and raw[:1] in (" ", "\t"):
            continue  # the source line under a frame
        in_frame = False
        kept.append(line.split("\t [[", 1)[0].split(" [[", 1)[0].strip())
    kept = [k for k in kept if k]
    return " ".join(kept[:3]) or type(error).__name__


def _summary(ctx: _RunContext, *, epochs: list, plan: BatchPlan, data: TrainData,
             fit_seconds: float, best=None) -> dict:
    import keras
    import tensorflow as tf

    from tfaccel.training.throughput import THROUGHPUT_KEYS, available_cores

    def metrics_of(record: dict) -> dict:
        return {k: v for k, v in record.items()
                if k not in ("epoch", "examples", "examples_per_sec", "train_seconds",
                             "epoch_seconds", "non_finite_loss",
                             "loss_scale_skipped_steps") + THROUGHPUT_KEYS}

    final_metrics = metrics_of(epochs[-1]) if epochs else {}
    saved_epoch = len(epochs) or None
    kept_best = best is not None and best.restore_best_weights and best.best_weights is not None
    if kept_best:
        saved_epoch = best.best_epoch + 1  # Keras' epochs count from 0
    judged = best is not None and best.best is not None
    saved_metrics = next((metrics_of(e) for e in epochs if e["epoch"] == saved_epoch), {})
    # The first epoch includes tracing and compilation; report steady state when there is one.
    steady = epochs[1:] if len(epochs) > 1 else epochs
    train_seconds = sum(e["train_seconds"] for e in steady)
    examples = sum(e["examples"] for e in steady)
    recipe = ctx.recipe
    return {
        "status": "completed",
        "name": recipe.name,
        "epochs_completed": len(epochs),
        "final_metrics": final_metrics,
        # model.keras: the best epoch's weights by training.monitor (keep: best) or the
        # last epoch's; both are reported, named.
        "saved_model_epoch": saved_epoch,
        "saved_model_metrics": saved_metrics,
        "keep": "best" if kept_best else "last",
        **({"keep_note": ctx.keep_note} if ctx.keep_note is not None else {}),
        "monitor": recipe.training.monitor,
        "best_epoch": best.best_epoch + 1 if judged else None,
        "best_value": float(best.best) if judged else None,
        "examples_per_sec": examples / train_seconds if train_seconds else 0.0,
        "first_epoch_examples_per_sec": epochs[0]["examples_per_sec"] if epochs else 0.0,
        **_throughput_summary(steady, epochs),
        "cpu_cores_available": available_cores(),
        "wall_seconds": time.perf_counter() - ctx.started,
        "fit_seconds": fit_seconds,
        "devices": ctx.session.strategy_info.get("devices", []),
        "strategy": ctx.session.strategy_info.get("strategy"),
        "workers": ctx.role.count,
        "precision": ctx.session.precision,
        **({"precision_choice": ctx.session.precision_choice}
           if ctx.session.precision_choice is not None else {}),
        **plan.as_dict(),  # replicas, accumulation steps, global/per-replica/micro batch
        "steps_per_epoch": data.steps_per_epoch,
        "jit_compile": recipe.training.jit_compile,
        # The steps per call in force at the end (`auto`'s choice, and why, beside it).
        "steps_per_execution": ctx.steps_per_execution,
        **({"steps_per_execution_choice": ctx.execution_choice.as_dict()}
           if ctx.execution_choice is not None else {}),
        "threads": ctx.session.threads,
        # "_"-keys hold objects for the run itself (the text vectorizer), not numbers.
        "dataset": {k: v for k, v in data.info.items()
                    if k != "class_names" and not k.startswith("_")},
        "class_names": list(data.info.get("class_names") or []),
        # Where the model came from (model_source.json holds the same).
        "model": ctx.model_source,
        "versions": {"tfaccel": __version__, "tensorflow": tf.__version__,
                     "keras": keras.__version__, "python": platform.python_version()},
    }


def _checked_role(recipe: Recipe) -> WorkerRole:
    """This process's role in the job, and what a multi-worker run cannot do (TF-free)."""
    role = worker_role(recipe.runtime.strategy)
    minutes = recipe.training.checkpoint_every_minutes
    if role.multi_worker and minutes:
        raise UserInputError(
            f"training.checkpoint_every_minutes ({minutes}) cannot be used by a multi-worker "
            f"run ({role.count} workers): each worker's clock would pick another step, and "
            "all of them must save together. Use training.checkpoint_every_steps.")
    return role


def _scratch_dir(role: WorkerRole) -> Path:
    """Where a non-chief worker writes what Keras and TensorFlow need written somewhere."""
    return Path(tempfile.mkdtemp(prefix=f"tfaccel-worker{role.index}-"))


def _throughput_summary(steady: list, epochs: list) -> dict:
    """Steady-state throughput figures: means over the epochs after the first, peaks over all."""
    from tfaccel.training.throughput import THROUGHPUT_KEYS

    out = {}
    for key in THROUGHPUT_KEYS:
        if key.startswith("peak_"):
            values = [e[key] for e in epochs if e.get(key) is not None]
            if values:
                out[key] = max(values)
            continue
        values = [e[key] for e in steady if e.get(key) is not None]
        if key == "input_wait_fraction" or values:
            out[key] = sum(values) / len(values) if values else None
    return out


def _new_run_dir(recipe: Recipe, run_dir: Optional[str]) -> Path:
    try:
        return run_files.create_run_dir(name=recipe.name, runs_dir=recipe.runtime.runs_dir,
                                        run_dir=run_dir)
    except PermissionError as error:
        raise UserInputError(
            f"cannot create the run directory: {error.strerror} ({error.filename!r}); "
            "choose a writable runtime.runs_dir or --run-dir.") from None
    except OSError as error:
        raise UserInputError(
            f"cannot create the run directory under runtime.runs_dir "
            f"{recipe.runtime.runs_dir!r}: {error.strerror or error}.") from None


def _holds_only_the_recipe(directory: Path) -> bool:
    names = {p.name for p in directory.iterdir()} - {LOCK_FILE}
    return names <= {run_files.RECIPE_FILE, model_source.SOURCE_FILE, model_source.COPY_DIR,
                     run_files.PRECISION_FILE}


def _as_recipe(recipe_or_path, overrides: Sequence[str], *, own_model: bool = False) -> Recipe:
    if isinstance(recipe_or_path, Recipe):
        if overrides:
            from tfaccel.config.recipe import recipe_to_dict

            return recipe_from_dict(recipe_to_dict(recipe_or_path), overrides=overrides,
                                    own_model=own_model)
        return recipe_or_path
    if isinstance(recipe_or_path, dict):
        return recipe_from_dict(recipe_or_path, overrides=overrides, own_model=own_model)
    return load_recipe(recipe_or_path, overrides, own_model=own_model)
