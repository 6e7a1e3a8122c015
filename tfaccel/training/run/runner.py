"""`train(recipe)`: the one place that wires data, model, strategy, precision and outputs.

The run's order lives here; the model it fits is built by `training.model_build`, its
callbacks by `outputs`, a failure is translated by `failures`, and what it leaves at the end
is `summary`'s (all of `tfaccel.training.run`).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Optional, Sequence, Union

from tfaccel.config.batching import check_steps_per_execution
from tfaccel.config.cluster import (
    WorkerRole,
    check_strategy_for_cluster,
    cluster_task,
    worker_role,
)
from tfaccel.config.recipe import (
    Recipe,
    dump_recipe,
    load_recipe,
    recipe_from_dict,
    recipe_to_dict,
)
from tfaccel.data import table_features, text_vectors
from tfaccel.data.length_batches import has_open_length, padding_fraction
from tfaccel.errors import DataError, Preempted, Stopped, UserInputError
from tfaccel.messages import say
from tfaccel.training.distributed.chief_run_dir import chief_run_dir
from tfaccel.training.distributed.stuck_signals import signals_end_the_wait
from tfaccel.training.fit_callbacks.best_epoch import keep_plan
from tfaccel.training.fit_callbacks.callbacks import StopAfterEpoch
from tfaccel.training.fit_callbacks.phase_marks import PhaseMarks
from tfaccel.training.fit_callbacks.timings import PhaseTimes
from tfaccel.training.keras_objects.losses import check_loss_and_metrics
from tfaccel.training.keras_objects.optimizers import check_optimizer
from tfaccel.training.model_setup import execution
from tfaccel.training.model_setup.execution import initial_steps
from tfaccel.training.model_setup.inputs import TrainData
from tfaccel.training.model_setup.model_build import build_model
from tfaccel.training.run.context import Decisions, RunContext
from tfaccel.training.run.coordinator_loop import train_on_cluster
from tfaccel.training.run.failures import (
    as_training_error,
    data_error_in,
    non_finite_loss_error,
    record_failure,
)
from tfaccel.training.run.micro_batch_retry import MicroBatchRetry
from tfaccel.training.run.outputs import Outputs, make_callbacks
from tfaccel.training.run.platform_tasks import run_other_task
from tfaccel.training.run.session import open_session
from tfaccel.training.run.summary import RunResult, run_summary, write_summary
from tfaccel.training.run_dir import checkpoints as ckpt
from tfaccel.training.run_dir import data_source, model_source, run_files
from tfaccel.training.run_dir.resume import LOCK_FILE, RunLock, checkpoint_to_resume, plan_resume
from tfaccel.training.run_dir.training_state import restore_state


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
            keras.Model, also given ``task=`` and ``num_outputs=`` (the output width) when
            its signature names them (`tfaccel.models.build_own_model`) (built in the strategy's scope, under the precision policy), or a
            built keras.Model (cloned into the strategy's scope with its weights; it keeps
            the dtype policy it was built with). The run directory records which
            (model_source.json); a resume must give the same one again.

    Returns:
        The `RunResult`; in TF_CONFIG's evaluator task a
        `tfaccel.training.run.sidecar_evaluator.EvaluationResult` (it evaluates the chief's
        checkpoints in `run_dir` instead of training; a parameter-server cluster's ps and
        worker tasks serve the chief and end the process: `training.platform_tasks`).

    Raises:
        UserInputError: The recipe, the data or the run directory is wrong, or the run
            cannot be resumed (changed recipe, already finished, in use).
        TrainingError: Training failed (for example the loss became NaN).
        Preempted: SIGTERM/SIGINT stopped training after saving a checkpoint.
    """
    started = time.perf_counter()
    # A TF_CONFIG task that does not train (a ps cluster's servers, an evaluator) does its own.
    other = run_other_task(recipe_or_path, overrides, run_dir=run_dir, resume=resume,
                           model=model)
    if other is not None:
        return other
    timings = PhaseTimes(origin=started)
    opened = _open_run(recipe_or_path, overrides, run_dir=run_dir, resume=resume, model=model)
    timings.mark("open the run (recipe, run directory, lock)")
    recipe, role, directory, shown = opened.recipe, opened.role, opened.directory, opened.shown
    lock, scratch = opened.lock, opened.scratch
    try:
        # A resumed run keeps the precision `auto` chose when it started.
        recorded = run_files.recorded_precision(directory) if resume is not None else None
        with open_session(recipe, precision=recorded,
                          around_strategy=lambda: _answer_signals_while_joining(
                              opened, resume=resume)) as session:
            # Every worker's closing line and resume hint name the chief's real directory.
            shown = chief_run_dir(session.strategy, role=role, own=shown)
            timings.mark("session (threads, seed, strategy, precision)")
            context = RunContext(recipe=recipe, directory=directory, session=session,
                                  started=started, extra_callbacks=tuple(callbacks),
                                  resume_from=Path(resume) if resume is not None else None,
                                  role=role, shown_dir=shown, profile=profile,
                                  given_model=model, model_source=opened.model_source,
                                  timings=timings)
            return _train_with(context)
    except Stopped as error:  # a signal while the workers waited for each other
        if _remove_unstarted(opened, resume=resume):
            raise Stopped(f"{error} The run directory {opened.shown or opened.directory} "
                          "held nothing yet and was removed.", signum=error.signum) from None
        raise
    except (UserInputError, KeyboardInterrupt, SystemExit):
        # A mistake found before training (missing data, a bad batch plan), or a signal
        # before it started: do not leave a run directory that holds nothing but the recipe.
        _remove_unstarted(opened, resume=resume)
        raise
    finally:
        if lock is not None:
            lock.release()
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def _answer_signals_while_joining(opened: "_OpenedRun", *, resume):
    """Around the strategy's creation: a cluster's workers wait there for each other."""
    import contextlib

    from tfaccel.config.cluster import tf_config_tasks, training_addresses
    from tfaccel.engine.cluster_join import ClusterJoin

    strategy = opened.recipe.runtime.strategy
    if strategy not in ("auto", "multi_worker", "parameter_server") or tf_config_tasks() < 2:
        return contextlib.nullcontext()
    # MultiWorkerMirroredStrategy's workers meet in Python first (engine.cluster_join);
    # a parameter-server chief's tasks run no tfaccel code of their own to meet it.
    join = None if strategy == "parameter_server" else ClusterJoin(
        training_addresses(), opened.role.index)
    return signals_end_the_wait(
        what="waiting for the other workers of TF_CONFIG's cluster to join",
        directory=opened.directory if resume is None and opened.lock is not None else None,
        allowed=_UNSTARTED_FILES, join=join)


def _remove_unstarted(opened: "_OpenedRun", *, resume) -> bool:
    """Removes a new run directory that holds nothing but the recipe; True if it did."""
    directory, lock = opened.directory, opened.lock
    if resume is None and lock is not None and directory.is_dir() \
            and _holds_only_the_recipe(directory):
        lock.release()
        shutil.rmtree(directory, ignore_errors=True)
        return True
    return False


@dataclasses.dataclass(frozen=True)
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
        data_source.record(directory, recipe.data)

    return _OpenedRun(recipe=recipe, role=role, directory=directory, shown=shown, lock=lock,
                      scratch=scratch, model_source=source)


def _train_with(ctx: RunContext) -> RunResult:
    recipe, plan = ctx.recipe, ctx.session.plan
    say(f"{ctx.session.strategy_info['strategy']} on {ctx.session.strategy_info['replicas']} "
        f"replica(s), precision {ctx.session.precision}, {plan.describe()}.")
    _record_precision(ctx)
    if ctx.session.strategy_info["strategy"] == "parameter_server":  # Keras' fit cannot drive it
        return train_on_cluster(ctx)
    _check_data_service(recipe, strategy=ctx.session.strategy_info["strategy"])
    _check_compile_arguments(recipe)
    try:
        data = ctx.session.build_data()
    except Exception as error:  # only a source's DataError (or damaged file) is converted
        bad_data = data_error_in(error, data_config=recipe.data)
        if bad_data is None:
            raise
        raise DataError(bad_data) from None
    ctx.timings.mark("build the data (listing, pipeline)")
    _check_steps_per_execution(recipe, data)
    _keep_vocabulary(ctx, data)
    _keep_feature_space(ctx, data)
    _measure_padding(data)
    keep, keep_note = keep_plan(keep=recipe.training.keep, monitor=recipe.training.monitor,
                                has_validation=data.validation is not None)
    if keep_note is not None:
        say(f"training.keep is best but there is {keep_note}: model.keras will hold "
            "the last epoch.")
    checkpoint = checkpoint_to_resume(ctx.resume_from, directory=ctx.directory) \
        if ctx.resuming else None
    ctx.timings.mark("look at the data (vocabulary, padding, checkpoint)")
    trained_model, model = build_model(recipe, strategy=ctx.session.strategy, plan=plan,
                                       data=data, given=ctx.given_model)
    pipeline = None
    if hasattr(trained_model, "stages"):  # runtime.strategy pipeline: say where stages run
        pipeline = trained_model.describe()
        say(trained_model.summary_text())
    decisions = Decisions(keep=keep, keep_note=keep_note, pipeline=pipeline,
                          steps_per_execution=initial_steps(
                              recipe.training.steps_per_execution))
    ctx.timings.mark("build and compile the model")
    restored = {"metrics": [], "best_weights": None}
    if checkpoint is not None:
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
    outputs = make_callbacks(ctx, keep=decisions.keep, data=data, plan=plan,
                             checkpoint=checkpoint, restored=restored)
    outputs.monitor.attach(trained_model, strategy=ctx.session.strategy)
    ctx.timings.mark("callbacks" + (" and the checkpoint's state" if checkpoint else ""))
    fit_started = time.perf_counter()
    try:
        decisions = _fit(ctx, decisions=decisions, trained_model=trained_model, data=data,
                         outputs=outputs, checkpoint=checkpoint, fit_started=fit_started)
    except BaseException as error:  # its summary is written: say it, or convert it
        if isinstance(error, Preempted) and error.run_dir is None and ctx.shown_dir:
            error.run_dir = str(ctx.shown_dir)  # the callbacks raise it without knowing it
        converted = as_training_error(error, outputs=outputs, directory=ctx.shown_dir,
                                      strategy=ctx.session.strategy,
                                      peer_timeout=ctx.recipe.runtime.peer_timeout,
                                      data_config=ctx.recipe.data)
        if converted is error:
            raise
        raise converted from error
    summary = run_summary(ctx, decisions=decisions, epochs=outputs.logger.records, plan=plan,
                          data=data, fit_seconds=time.perf_counter() - fit_started,
                          best=outputs.best)
    guard = outputs.guard
    if guard.failure is not None:
        write_summary(ctx.directory, dataclasses.replace(summary, status="failed",
                                                         failure=guard.failure))
        raise non_finite_loss_error(guard.failure, directory=ctx.directory)
    if outputs.best is not None:
        # keep: best: model.keras is saved from the best epoch's weights (every worker
        # sets them: the save below is a collective under multi-worker).
        outputs.best.restore_best()
    ctx.timings.mark("summary figures (and the best epoch's weights)")
    model.save(ctx.directory / run_files.MODEL_FILE)
    ctx.timings.mark("final save (model.keras)")
    summary = dataclasses.replace(summary, timings=ctx.timings.as_dict())
    return RunResult(run_dir=ctx.shown_dir, summary=write_summary(ctx.directory, summary),
                     epochs=outputs.logger.records, chief=ctx.role.chief)


def _record_precision(ctx: RunContext) -> None:
    """`runtime.precision: auto`'s choice: said, and kept in the run directory for a resume."""
    choice = ctx.session.precision_choice
    if choice is None:
        return
    say(f"precision auto: {choice['policy']} ({choice['reason']}).")
    if not ctx.resuming:
        run_files.write_json(ctx.directory / run_files.PRECISION_FILE, choice)


def _check_steps_per_execution(recipe: Recipe, data: TrainData) -> None:
    """The recipe's steps per call against the epoch's steps, now that they are known."""
    training = recipe.training
    if training.steps_per_execution != "auto":
        check_steps_per_execution(training.steps_per_execution,
                                  steps_per_epoch=data.steps_per_epoch,
                                  every_steps=training.checkpoint_every_steps)


def _choose_steps_per_execution(ctx: RunContext, *, decisions: Decisions, trained_model,
                                data: TrainData, outputs: Outputs,
                                remaining_steps: Optional[int] = None,
                                first_calls: Optional[dict] = None) -> Decisions:
    """`steps_per_execution: auto`: the first `fit` measured; the rest runs with the choice.

    Changing the steps per call retraces the train and test functions (Keras bakes the
    count into them); the steps, their batches and their order are unchanged. So the
    choice changes only when the `remaining_steps` repay that retrace, estimated by what
    the first calls spent tracing and compiling: the train call's time beyond its step and
    input wait (the monitor's in-graph timer), and the first validation call
    (`first_calls`: `PhaseMarks.first_call_seconds`).

    Returns:
        `decisions` with the choice and the steps per call now in force.
    """
    monitor = outputs.monitor
    retrace = None
    if remaining_steps is not None and monitor.trace_seconds > 0:
        retrace = monitor.trace_seconds + (first_calls or {}).get("test_function", 0.0)
    choice = execution.choose_from_cost(
        monitor.per_call_cost(), steps_per_epoch=data.steps_per_epoch,
        every_steps=ctx.recipe.training.checkpoint_every_steps,
        unmeasured=monitor.unavailable_reason or "too few steps in the first epoch",
        remaining_steps=remaining_steps, retrace_seconds=retrace)
    say(f"steps_per_execution auto: {choice.steps} ({choice.reason}).")
    decided = dataclasses.replace(decisions, execution_choice=choice,
                                  steps_per_execution=choice.steps)
    if choice.steps == decisions.steps_per_execution:
        return decided
    trained_model.steps_per_execution = choice.steps
    trained_model.train_function = trained_model.test_function = None
    outputs.monitor.steps_per_execution = choice.steps
    for callback in outputs.all:
        if hasattr(callback, "per_call"):  # ProfileSteps counts the steps of each call
            callback.per_call = choice.steps
    return decided


def _keep_vocabulary(ctx: RunContext, data: TrainData) -> None:
    """A text run's vocabulary in the run directory (one token per line, in id order).

    It is what turns texts into the ids the saved model takes:
    `data.text_vectors.with_vectorizer` puts it in front of the model.
    """
    layer = data.info.vectorizer
    if layer is None:
        return
    path = text_vectors.save_vocabulary(layer, ctx.directory)
    say(f"text: {data.info.text.vocabulary_size} tokens in {Path(path).name}.")


def _keep_feature_space(ctx: RunContext, data: TrainData) -> None:
    """A table run's FeatureSpace in the run directory: how its columns became features."""
    space = data.info.feature_space
    if space is None:
        return
    path = table_features.save_feature_space(space, ctx.directory)
    table = data.info.table
    for note in table.notes:
        say(note)
    say(f"{table.line[:-1]} ({Path(path).name}).")


def _measure_padding(data: TrainData) -> None:
    """The padding of sequences of open length (token ids, waveforms) in the summary's data.

    Measured on the validation batches (a fixed pass): the share of their steps that are
    the zeros a batch appends, what batches by length (data.text.batch_by_length) keep low.
    """
    if data.validation is None or not has_open_length(data.info.input_shape):
        return

    fraction = padding_fraction(data.validation)
    data.info = dataclasses.replace(data.info,
                                    validation_padding_fraction=round(fraction, 4))
    say(f"{fraction:.1%} of the validation batches' steps are padding.")


def _check_data_service(recipe: Recipe, *, strategy: str) -> None:
    # Recipe validation refuses `strategy: multi_worker` itself; `auto` only resolves to it
    # here (TF_CONFIG), so the same refusal is repeated once the strategy is known.
    if recipe.data.service.dispatcher and strategy == "multi_worker":
        raise UserInputError(
            "data.service with a multi_worker strategy (runtime.strategy "
            f"{recipe.runtime.strategy!r} resolved to multi_worker from TF_CONFIG) is not "
            "supported yet; use one trainer, or leave data.service.dispatcher empty.")


def _check_compile_arguments(recipe: Recipe) -> None:
    """The optimizer's, schedule's, loss's and metrics' arguments against their signatures:
    before the data is built, so a misspelt argument costs no pipeline build."""
    check_optimizer(recipe.optimizer)
    check_loss_and_metrics(recipe.training)


def _fit(ctx: RunContext, *, decisions: Decisions, trained_model, data: TrainData,
         outputs: Outputs, checkpoint: Optional[ckpt.Checkpoint],
         fit_started: float) -> Decisions:
    """Runs `fit` once, or in parts: the rest of an interrupted epoch, `auto`'s first epoch.

    Keras' `fit` has one `steps_per_epoch` for all epochs, so the rest of an interrupted
    epoch is its own `fit` call; the metric sums of its first part are put back by the
    checkpoint callback, so the epoch reports the same numbers as an uninterrupted one.
    `steps_per_execution: auto` runs the first epoch as its own call too (one step per call,
    measured), then the rest with its choice. Every part is asked for the run's last epoch
    and stopped after its own, so Keras numbers the epochs of the whole run.

    Returns:
        `decisions` with `auto`'s steps per call, once chosen. A run that does not
        complete has its summary written here, with the decisions made so far, before
        the error goes on.
    """
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
        decisions = _choose_steps_per_execution(ctx, decisions=decisions,
                                                trained_model=trained_model, data=data,
                                                outputs=outputs)
        auto = False
    if auto and len(segments) == 1 and training.epochs - epoch > 1:
        # `auto` measures one step per call in the first epoch, then picks for the rest.
        segments = [(epoch, epoch + 1, steps, epoch * steps),
                    (epoch + 1, training.epochs, steps, (epoch + 1) * steps)]
    # Around the run's callbacks (the epoch-end phase is theirs), one pair for all parts
    # (they tell a new train function from one an earlier part called).
    marks = [PhaseMarks(ctx.timings, edge="first"), PhaseMarks(ctx.timings, edge="last")]
    # micro_batch_size auto: a first step out of memory is retried with a smaller micro-batch.
    retry = MicroBatchRetry(auto=training.micro_batch_size == "auto", plan=ctx.session.plan,
                            trained_model=trained_model, strategy=ctx.session.strategy,
                            workers=ctx.role.count)
    try:
        with outputs.signals, warnings.catch_warnings():
            # Keras warns "Your input ran out of data; interrupting training" whenever an
            # evaluation of unknown length (an image folder's, whose decode stage may skip a
            # bad file) reaches its end. Training reads an endless stream here, so the
            # warning can only ever be about that normal end of validation.
            warnings.filterwarnings("ignore", message="Your input ran out of data")
            for index, (first_epoch, end_epoch, steps_in_epoch, global_step) in \
                    enumerate(segments):
                if index and auto:
                    decisions = _choose_steps_per_execution(
                        ctx, decisions=decisions, trained_model=trained_model, data=data,
                        outputs=outputs,
                        remaining_steps=steps_in_epoch * (end_epoch - first_epoch),
                        first_calls=marks[0].first_call_seconds)
                stopper = retry.fit(functools.partial(
                    _fit_part, ctx, trained_model=trained_model, data=data, outputs=outputs,
                    epochs=(first_epoch, end_epoch), steps_in_epoch=steps_in_epoch,
                    global_step=global_step, marks=marks, also=(retry,),
                    after_choice=bool(index and auto)))
                if outputs.guard.failure is not None or stopper.stopped_by_others \
                        or not stopper.stopped:
                    break
    except BaseException as error:
        record_failure(ctx, error, decisions=retry.decided(decisions), outputs=outputs,
                       plan=ctx.session.plan, data=data,
                       fit_seconds=time.perf_counter() - fit_started)
        raise
    return retry.decided(decisions)


def _fit_part(ctx: RunContext, *, trained_model, data: TrainData, outputs: Outputs,
              epochs: tuple, steps_in_epoch: int, global_step: int, marks: list,
              also: tuple = (), after_choice: bool = False) -> StopAfterEpoch:
    """One `fit` call of `_fit`'s parts, on a new stream from `global_step` (a retry after
    running out of memory starts from the same examples); `marks`: the pair of
    `PhaseMarks` around the run's callbacks; `also`: callbacks before the stopper."""
    first_epoch, end_epoch = epochs
    # The data layer shards by the strategy in scope.
    with ctx.session.strategy.scope():
        stream = data.make_stream(global_step)
    ctx.timings.mark("steps_per_execution auto: the choice and the input stream"
                     if after_choice else "the input stream")
    # Last in the list: it sees whether another callback stopped the run first.
    stopper = StopAfterEpoch(end_epoch - 1)
    trained_model.fit(
        stream, validation_data=data.validation,
        initial_epoch=first_epoch, epochs=ctx.recipe.training.epochs,
        steps_per_epoch=steps_in_epoch,
        validation_steps=ctx.recipe.training.validation_steps,
        callbacks=[*marks[:1], *outputs.all, *marks[1:], *also, stopper],
        verbose=fit_verbosity(ctx.recipe.runtime.verbose),
        shuffle=False)  # the tf.data pipeline shuffles; Keras would only warn
    ctx.timings.mark("fit: Keras' end (progress bar, History)")
    return stopper


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


def _checked_role(recipe: Recipe) -> WorkerRole:
    """This process's role in the job, and what a multi-worker run cannot do (TF-free)."""
    check_strategy_for_cluster(cluster_task(), recipe.runtime.strategy)
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


# What a run directory holds before training starts (with the lock).
_UNSTARTED_FILES = (run_files.RECIPE_FILE, model_source.SOURCE_FILE, model_source.COPY_DIR,
                    data_source.SOURCE_FILE, run_files.PRECISION_FILE, LOCK_FILE)


def _holds_only_the_recipe(directory: Path) -> bool:
    return {p.name for p in directory.iterdir()} <= set(_UNSTARTED_FILES)


def _as_recipe(recipe_or_path, overrides: Sequence[str], *, own_model: bool = False) -> Recipe:
    if isinstance(recipe_or_path, Recipe):
        if overrides:
            return recipe_from_dict(recipe_to_dict(recipe_or_path), overrides=overrides,
                                    own_model=own_model)
        return recipe_or_path
    if isinstance(recipe_or_path, dict):
        return recipe_from_dict(recipe_or_path, overrides=overrides, own_model=own_model)
    return load_recipe(recipe_or_path, overrides, own_model=own_model)
