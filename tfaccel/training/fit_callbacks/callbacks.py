"""Keras callbacks of the runner: per-epoch metrics, a NaN guard, resumable checkpoints."""

from __future__ import annotations

import math
import shutil
import signal
import tempfile
import threading
import time
from pathlib import Path
from typing import Optional

import keras
import tensorflow as tf

from tfaccel.errors import Preempted
from tfaccel.training.fit_callbacks.best_epoch import BestEpoch
from tfaccel.training.run_dir import checkpoints as ckpt
from tfaccel.training.run_dir.run_files import append_jsonl
from tfaccel.training.run_dir.training_state import add_metric_state, global_step, write_state_files


class NonFiniteLossGuard(keras.callbacks.Callback):
    """Stops training at the first batch whose loss is NaN or infinite and remembers where.

    Keras' TerminateOnNaN stops too, but says nothing a user can act on and lets the epoch's
    checkpoint save the broken weights; the runner reads `failure` to do better.
    """

    def __init__(self):
        super().__init__()
        self.failure: Optional[dict] = None
        self._epoch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is None or self.failure is not None:
            return
        loss = float(loss)
        if not math.isfinite(loss):
            self.failure = {"epoch": self._epoch + 1, "batch": batch + 1, "loss": loss}
            self.model.stop_training = True


class StopAfterEpoch(keras.callbacks.Callback):
    """Ends a `fit` call after epoch `last` (counted from 0), as if it had asked for no more.

    The runner trains in parts (the rest of a resumed epoch, `steps_per_execution: auto`'s
    measured first epoch) but asks each part for the run's last epoch, so Keras' progress
    says "Epoch 2/8", not "Epoch 1/1". Placed last among the callbacks, it can tell its own
    stop from an earlier callback's (early stopping, the NaN guard).
    """

    def __init__(self, last: int):
        super().__init__()
        self.last = last
        self.stopped = False  # this part reached its last epoch
        self.stopped_by_others = False

    def on_epoch_end(self, epoch, logs=None):
        if epoch < self.last:
            return
        self.stopped = True
        self.stopped_by_others = bool(self.model.stop_training)
        self.model.stop_training = True


class EpochMetricsLogger(keras.callbacks.Callback):
    """Appends one JSON object per epoch to metrics.jsonl: losses, metrics and throughput.

    Throughput counts training time only (epoch start to the start of validation), so a
    large validation split does not make training look slow. Under dynamic loss scaling
    (`mixed_float16`) the steps whose gradients overflowed, and were therefore skipped, are
    counted as `loss_scale_skipped_steps`.
    """

    def __init__(self, path: Path, *, examples_per_epoch: Optional[int], batch_size: int,
                 guard: Optional[NonFiniteLossGuard] = None,
                 steps_per_epoch: Optional[int] = None):
        super().__init__()
        self.path = Path(path)
        # None when the dataset's size is unknown: count the batches.
        self.examples_per_epoch = examples_per_epoch
        self.batch_size = batch_size
        self.steps_per_epoch = steps_per_epoch
        self.guard = guard
        self.records: list[dict] = []
        self._epoch_start = 0.0
        self._train_end: Optional[float] = None
        self._batches = 0
        self._applied_at_start: Optional[int] = None

    def _applied_steps(self) -> Optional[int]:
        # Keras' LossScaleOptimizer applies a step to its inner optimizer only when the
        # gradients are finite: the inner optimizer's iterations count the applied steps.
        inner = getattr(self.model.optimizer, "inner_optimizer", None)
        return None if inner is None else int(inner.iterations.numpy())

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_start = time.perf_counter()
        self._train_end = None
        self._batches = 0
        self._applied_at_start = self._applied_steps()

    def on_train_batch_end(self, batch, logs=None):
        # With steps_per_execution > 1 Keras reports the last step index of each execution.
        self._batches = max(self._batches, batch + 1)

    def on_test_begin(self, logs=None):
        if self._train_end is None:
            self._train_end = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        now = time.perf_counter()
        train_seconds = (self._train_end or now) - self._epoch_start
        record = {"epoch": epoch + 1}
        for key, value in (logs or {}).items():
            try:
                record[key] = float(value)
            except (TypeError, ValueError):
                continue
        examples = self.examples_per_epoch or self._batches * self.batch_size
        # A resumed epoch trains only its rest in this process: its speed counts that part.
        whole = self.steps_per_epoch is None or self._batches >= self.steps_per_epoch
        trained = examples if whole else self._batches * self.batch_size
        record["examples"] = examples
        record["examples_per_sec"] = trained / max(train_seconds, 1e-9)
        record["train_seconds"] = train_seconds
        record["epoch_seconds"] = now - self._epoch_start
        applied = self._applied_steps()
        if applied is not None and self._applied_at_start is not None:
            record["loss_scale_skipped_steps"] = self._batches - (applied -
                                                                  self._applied_at_start)
        if self.guard is not None and self.guard.failure is not None:
            record["non_finite_loss"] = True
        self.records.append(record)
        append_jsonl(self.path, record)


class PreemptionSignals:
    """Turns SIGTERM and SIGINT into a request to checkpoint at the next step boundary.

    A second signal while the first is being handled falls back to Python's default
    behaviour (SIGINT: KeyboardInterrupt), so a stuck job can still be stopped at once.
    Installed only in the main thread (Python's rule for signal handlers).
    """

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self):
        self.received: Optional[int] = None
        self._previous = {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for signum in self.SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc):
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous = {}
        return False

    def at_step(self, save, *, where: str) -> None:
        """At a step boundary: after a signal, `save()` a checkpoint and raise `Preempted`."""
        if self.received is not None:
            path = save()
            raise Preempted(f"stopped by signal {signal.Signals(self.received).name} at "
                            f"{where}; checkpoint {path.name} saved.",
                            signum=self.received, checkpoint=str(path))

    def _handle(self, signum, frame):
        if self.received is not None:
            previous = self._previous.get(signum)
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            if callable(previous):
                previous(signum, frame)
            return
        self.received = signum


class CoordinatedPreemption:
    """SIGTERM under MultiWorkerMirroredStrategy: every worker saves at the same step.

    Wraps TensorFlow's `tf.distribute.experimental.PreemptionCheckpointHandler`: the worker
    that gets SIGTERM (`tfaccel launch` passes it to all) publishes "checkpoint after step
    N + 1" through the cluster's coordination service and waits until every worker has
    acknowledged it; each worker then saves at that step (the chief into the run
    directory, the others into their scratch folders) and stops with `Preempted`. The
    checkpoint is tfaccel's own (the handler's `save_fn`); the handler's
    `tf.train.Checkpoint` is an empty placeholder in a temporary folder. SIGINT keeps
    Python's default (KeyboardInterrupt) here: it cannot be agreed on.
    """

    def __init__(self, strategy):
        self.strategy = strategy
        self.received: Optional[int] = None  # epoch-end saves are not coordinated
        self._handler = None
        self._folder: Optional[str] = None
        self._save = None
        self._saved: Optional[Path] = None
        self._previous = None

    def __enter__(self):
        _quiet_peer_watcher()
        _quiet_deprecation(tf.get_logger())
        self._folder = tempfile.mkdtemp(prefix="tfaccel-preemption-")
        manager = tf.train.CheckpointManager(tf.train.Checkpoint(), self._folder,
                                             max_to_keep=1)
        config = tf.distribute.experimental.TerminationConfig(
            save_fn=self._save_now, exit_fn=self._exit, grace_period=0)
        self._previous = signal.getsignal(signal.SIGTERM)
        # Installs its SIGTERM handler (main thread) and starts the thread watching peers.
        self._handler = tf.distribute.experimental.PreemptionCheckpointHandler(
            self.strategy.cluster_resolver, manager, termination_config=config)
        return self

    def __exit__(self, *exc):
        self._handler = None
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._previous or signal.SIG_DFL)
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
        return False

    def at_step(self, save, *, where: str) -> None:
        """Called by every worker at every step boundary, the same number of times."""
        self._save, self._where = save, where
        # Checks for an agreed step, saves through `save_fn` and calls `exit_fn` when this
        # is that step (the handler's `run` would wrap the step function, which Keras'
        # fit owns; this is its form for loops that run the step themselves).
        self._handler.save_checkpoint_if_preempted()

    def _save_now(self, *args, **kwargs):
        self._saved = self._save()

    def _exit(self):
        raise Preempted(
            f"stopped by SIGTERM at {self._where}, at the same step on every worker; "
            f"checkpoint {self._saved.name} saved.", signum=int(signal.SIGTERM),
            checkpoint=str(self._saved))


class _DropHandlerDeprecation:
    """A logging filter: the handler calls its own deprecated `total_run_calls` when it
    saves, and TensorFlow then warns the user about code that is not theirs."""

    def filter(self, record) -> bool:
        return "total_run_calls" not in str(record.getMessage())


def _quiet_deprecation(logger) -> None:
    if not any(isinstance(f, _DropHandlerDeprecation) for f in logger.filters):
        logger.addFilter(_DropHandlerDeprecation())


def _quiet_peer_watcher() -> None:
    """Keeps the handler's watcher thread from printing a traceback when a peer dies.

    Its blocking read of the coordination service fails with UnavailableError when another
    worker is gone; the main thread reports that failure itself, as one clear message.
    """
    previous = threading.excepthook
    if getattr(previous, "_tfaccel_quiet", False):
        return

    def hook(args):
        if (args.thread is not None and args.thread.name.startswith("PeerTerminationWatcher")
                and type(args.exc_value).__module__.startswith("tensorflow")):
            return
        previous(args)

    hook._tfaccel_quiet = True
    threading.excepthook = hook


class ResumableCheckpoints(keras.callbacks.Callback):
    """Saves resumable checkpoints at epoch ends, every N steps or minutes, and on a signal.

    A checkpoint (see `tfaccel.training.run_dir.checkpoints`) holds the weights and optimizer
    state, the RNG states Keras' weights file leaves out, the epoch and the step within it, the
    metric sums of an unfinished epoch, the finished epochs' metrics and the best epoch's progress
    (`BestEpoch`: its value, epoch and weights, early stopping's patience). The
    input position is the step count itself: the input pipeline is a pure function of
    (seed, pass), so the runner rebuilds it at any step. Nothing is saved once the loss went
    NaN, so the last checkpoint is always finite.
    """

    def __init__(self, directory: Path, *, steps_per_epoch: int, epoch_checkpoints: bool,
                 every_steps: Optional[int], every_minutes: Optional[float], keep: int,
                 metrics_logger: "EpochMetricsLogger", guard: NonFiniteLossGuard,
                 signals: Optional[PreemptionSignals] = None,
                 best: Optional[BestEpoch] = None,
                 restore_metrics: Optional[list] = None):
        super().__init__()
        self.directory = Path(directory)
        self.steps_per_epoch = steps_per_epoch
        self.epoch_checkpoints = epoch_checkpoints
        self.every_steps = every_steps
        self.every_seconds = every_minutes * 60 if every_minutes else None
        self.keep = keep
        self.metrics_logger = metrics_logger
        self.guard = guard
        self.signals = signals
        self.best = best
        self._restore_metrics = restore_metrics
        self._last_save = time.monotonic()
        self.saved: list = []

    def on_train_batch_end(self, batch, logs=None):
        if self._restore_metrics is not None:
            # The interrupted epoch's sums join those of its first resumed step.
            add_metric_state(self.model, self._restore_metrics)
            self._restore_metrics = None
        if self.guard.failure is not None:
            return
        step = global_step(self.model)
        epoch, step_in_epoch = divmod(step, self.steps_per_epoch)
        if step_in_epoch == 0:
            return  # the epoch-end checkpoint follows, after validation
        if self.signals is not None:
            self.signals.at_step(
                lambda: self._save("step", global_step=step),
                where=f"epoch {epoch + 1}, step {step_in_epoch} of {self.steps_per_epoch}")
        due = (self.every_steps and step % self.every_steps == 0) or (
            self.every_seconds and time.monotonic() - self._last_save >= self.every_seconds)
        if due:
            self._save("step", global_step=step)

    def on_epoch_end(self, epoch, logs=None):
        if self.guard.failure is not None:
            return
        if self.epoch_checkpoints:
            self._save("epoch", global_step=global_step(self.model))
        elif self.every_steps or self.every_seconds or (
                self.signals is not None and self.signals.received is not None):
            self._save("step", global_step=global_step(self.model))

    def _save(self, kind: str, *, global_step: int) -> Path:
        epoch, step_in_epoch = divmod(global_step, self.steps_per_epoch)
        name = ckpt.checkpoint_name(kind=kind, epoch=epoch, global_step=global_step)
        mid_epoch = step_in_epoch > 0
        best = self.best
        state = {
            "kind": kind,
            "global_step": global_step,
            "epoch": epoch,
            "step_in_epoch": step_in_epoch,
            "steps_per_epoch": self.steps_per_epoch,
            "records": list(self.metrics_logger.records),
            # The best epoch's progress (early stopping's patience too); its weights are in
            # extra.npz. Checkpoints written before training.keep named this early_stopping.
            "best": best.state() if best is not None else None,
            "saved_at": time.time(),
        }
        best_weights = best.best_weights if best is not None else None
        path = ckpt.write_checkpoint(
            self.directory, name=name, state=state,
            write_files=lambda folder: write_state_files(self.model, folder,
                                                         with_metrics=mid_epoch,
                                                         best_weights=best_weights))
        self._last_save = time.monotonic()
        self.saved.append(path.name)
        ckpt.prune_step_checkpoints(self.directory, keep=self.keep)
        return path
