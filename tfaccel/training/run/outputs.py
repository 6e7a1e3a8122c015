"""The callbacks that write a run's outputs (metrics, checkpoints, best epoch, preemption)."""

from __future__ import annotations

import dataclasses
from typing import Optional

import keras

from tfaccel.config.batching import BatchPlan
from tfaccel.errors import UserInputError
from tfaccel.messages import say
from tfaccel.training.fit_callbacks.best_epoch import BestEpoch, can_judge
from tfaccel.training.fit_callbacks.callbacks import (
    CoordinatedPreemption,
    EpochMetricsLogger,
    NonFiniteLossGuard,
    PreemptionSignals,
    ResumableCheckpoints,
)
from tfaccel.training.fit_callbacks.throughput import ProfileSteps, SpeedLine, ThroughputMonitor
from tfaccel.training.keras_objects.losses import logged_metric_names
from tfaccel.training.model_setup.execution import initial_steps
from tfaccel.training.model_setup.inputs import TrainData
from tfaccel.training.run.context import RunContext
from tfaccel.training.run_dir import checkpoints as ckpt
from tfaccel.training.run_dir import run_files


@dataclasses.dataclass
class Outputs:
    """The callbacks that write the run's outputs, and the list passed to `fit`."""

    guard: object
    monitor: object
    logger: object
    checkpoints: object
    best: object  # BestEpoch, or None when nothing can judge the monitor
    signals: object
    all: list


def make_callbacks(ctx: RunContext, *, keep: str, data: TrainData, plan: BatchPlan,
                   checkpoint: Optional[ckpt.Checkpoint], restored: dict) -> Outputs:
    """tfaccel's callbacks for `fit`, carried over from `checkpoint` when resuming, then
    the caller's; `keep` is what model.keras holds (`Decisions.keep`)."""
    training = ctx.recipe.training
    metrics_path = ctx.directory / run_files.METRICS_FILE
    records = list(checkpoint.state["records"]) if checkpoint is not None else []
    if checkpoint is not None:
        # metrics.jsonl is rewritten to what the checkpoint knew: an epoch that ended after
        # it (and so will be trained again) is not listed twice.
        run_files.write_jsonl(metrics_path, records)
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
        info = data.info
        logged = ["loss", *logged_metric_names(
            training, task=info.task, num_outputs=info.num_outputs or info.num_classes)]
        if data.validation is not None:
            logged += [f"val_{name}" for name in logged]
        best = BestEpoch(monitor=training.monitor, patience=training.early_stopping_patience,
                         keep_weights=keep == "best", logged=logged, carried=carried)
    elif training.early_stopping_patience:
        say(f"training.early_stopping_patience is set but the run has no validation split "
            f"to judge training.monitor {training.monitor}: it trains all "
            f"{training.epochs} epochs.")
    if ctx.role.multi_worker:
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
    callbacks += list(ctx.extra_callbacks)
    # Last: every callback above sees the throughput figures, Keras' epoch line does not.
    callbacks.append(SpeedLine(show=ctx.recipe.runtime.verbose != 0,
                               global_batch_size=plan.global_batch_size))
    return Outputs(guard=guard, monitor=monitor, logger=logger, checkpoints=checkpoints,
                    best=best, signals=signals, all=callbacks)
