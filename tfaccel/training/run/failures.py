"""A run that did not complete: its status written, a TensorFlow error as one clear user error."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Optional, Tuple

import tensorflow as tf

from tfaccel.config.batching import BatchPlan
from tfaccel.data.from_recipe import damaged_file
from tfaccel.errors import DataError, Preempted, TrainingError
from tfaccel.training.distributed.lost_peer import cluster_of, lost_peer_message
from tfaccel.training.model_setup.inputs import TrainData
from tfaccel.training.run.context import Decisions, RunContext
from tfaccel.training.run.outputs import Outputs
from tfaccel.training.run.summary import run_summary, write_summary


def record_failure(ctx: RunContext, error: BaseException, *, decisions: Decisions,
                   outputs: Outputs, plan: BatchPlan, data: TrainData,
                   fit_seconds: float) -> None:
    """Writes summary.json with the status of a run that did not complete."""
    failure = failure_of(error)
    if failure is None:
        return
    status, details = failure
    summary = run_summary(ctx, decisions=decisions, epochs=outputs.logger.records, plan=plan,
                          data=data, fit_seconds=fit_seconds, best=outputs.best)
    write_summary(ctx.directory, dataclasses.replace(summary, status=status, **details))


def failure_of(error: BaseException) -> Optional[Tuple[str, dict]]:
    """A run's status after `error`, and the summary fields that say what stopped it.

    Returns:
        ``(status, fields)`` (``preempted`` with its checkpoint, ``interrupted``,
        ``failed`` with ``failure``: the error's type and message), or None for an error
        that leaves no summary (a mistake of the caller's, raised before any result).
    """
    if isinstance(error, Preempted):
        return "preempted", {"checkpoint": error.checkpoint}
    if isinstance(error, KeyboardInterrupt):
        return "interrupted", {}
    if isinstance(error, tf.errors.OpError):
        return "failed", {"failure": {"error": type(error).__name__,
                                      "message": describe_op_error(error)}}
    if isinstance(error, TrainingError):
        return "failed", {"failure": {"error": type(error).__name__, "message": str(error)}}
    return None


def as_training_error(error: BaseException, *, outputs: Outputs,
                      directory: Optional[Path], strategy=None, peer_timeout=None,
                      data_config=None):
    """A TensorFlow runtime failure as one clear TrainingError; anything else unchanged."""
    if not isinstance(error, tf.errors.OpError):
        return error
    # A failure inside the compiled step or the input pipeline (a data worker that raised
    # or died, an undecodable record): keep what was written, say what failed.
    where = f" in {directory}" if directory is not None else " by the chief (worker 0)"
    bad_data = data_error_in(error, data_config=data_config)
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


def non_finite_loss_error(failure: dict, *, directory: Path) -> TrainingError:
    """The error of a run whose loss became NaN or inf (`NonFiniteLossGuard.failure`)."""
    return TrainingError(
        f"the training loss became {failure['loss']} at epoch {failure['epoch']}, batch "
        f"{failure['batch']}; training stopped there. Metrics of the finished epochs and "
        f"their checkpoints are kept in {directory}. Lower optimizer.learning_rate, "
        "set optimizer.clipnorm, or check the data for NaN values.")


def data_error_in(error: BaseException, *, data_config=None) -> Optional[str]:
    """The text of a `DataError` behind a tf.data failure, or None.

    A Python source's `DataError` raised inside tf.data: an OpError whose message holds
    ``DataError: <text>``. A `DataLossError` (a damaged file; TensorFlow names an offset,
    not the file): with the recipe's `data_config`, the source's own check of its files
    (`tfaccel.data.from_recipe.damaged_file`).
    """
    if not isinstance(error, tf.errors.OpError):
        return None
    if data_config is not None and isinstance(error, tf.errors.DataLossError):
        named = damaged_file(data_config)
        if named is not None:
            return named
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
