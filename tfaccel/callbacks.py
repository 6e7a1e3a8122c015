"""Keras callbacks of the runner: per-epoch metrics with throughput, a NaN guard, safe checkpoints."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Optional

import keras

from tfaccel.run_dir import append_jsonl


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


class EpochMetricsLogger(keras.callbacks.Callback):
    """Appends one JSON object per epoch to metrics.jsonl: losses, metrics and throughput.

    Throughput counts training time only (epoch start to the start of validation), so a
    large validation split does not make training look slow.
    """

    def __init__(self, path: Path, *, examples_per_epoch: Optional[int], batch_size: int,
                 guard: Optional[NonFiniteLossGuard] = None):
        super().__init__()
        self.path = Path(path)
        # None when the dataset's size is unknown (a generator source): count the batches.
        self.examples_per_epoch = examples_per_epoch
        self.batch_size = batch_size
        self.guard = guard
        self.records: list[dict] = []
        self._epoch_start = 0.0
        self._train_end: Optional[float] = None
        self._batches = 0

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_start = time.perf_counter()
        self._train_end = None
        self._batches = 0

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
        record["examples"] = examples
        record["examples_per_sec"] = examples / max(train_seconds, 1e-9)
        record["train_seconds"] = train_seconds
        record["epoch_seconds"] = now - self._epoch_start
        if self.guard is not None and self.guard.failure is not None:
            record["non_finite_loss"] = True
        self.records.append(record)
        append_jsonl(self.path, record)


class FiniteModelCheckpoint(keras.callbacks.ModelCheckpoint):
    """Keras' ModelCheckpoint that never saves weights from an epoch whose loss went NaN."""

    def __init__(self, filepath, *, guard: NonFiniteLossGuard, **kwargs):
        super().__init__(filepath, **kwargs)
        self.guard = guard

    def on_epoch_end(self, epoch, logs=None):
        if self.guard.failure is not None:
            return
        super().on_epoch_end(epoch, logs)
