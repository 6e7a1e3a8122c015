"""`fit` in parts: the rest of an interrupted epoch, `steps_per_execution: auto`'s measured
first epoch and its choice for the rest, each part on a new input stream."""

from __future__ import annotations

import dataclasses
import functools
import sys
import time
import warnings
from typing import Optional

from tfaccel.engine import keras_compat
from tfaccel.messages import say
from tfaccel.training.fit_callbacks.callbacks import StopAfterEpoch
from tfaccel.training.fit_callbacks.phase_marks import PhaseMarks
from tfaccel.training.model_setup import execution
from tfaccel.training.model_setup.inputs import TrainData
from tfaccel.training.run.context import Decisions, RunContext
from tfaccel.training.run.failures import record_failure
from tfaccel.training.run.micro_batch_retry import MicroBatchRetry
from tfaccel.training.run.outputs import Outputs
from tfaccel.training.run_dir import checkpoints as ckpt


def fit_in_parts(ctx: RunContext, *, decisions: Decisions, trained_model, data: TrainData,
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
    """One `fit` call of `fit_in_parts`' parts, on a new stream from `global_step` (a retry
    after running out of memory starts from the same examples); `marks`: the pair of
    `PhaseMarks` around the run's callbacks; `also`: callbacks before the stopper."""
    first_epoch, end_epoch = epochs
    # The data layer shards by the strategy in scope.
    with ctx.session.strategy.scope():
        stream = data.make_stream(global_step)
        # Off a strategy Keras creates these inside the first trace, which then runs twice.
        keras_compat.build_before_fit(trained_model, stream)
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
