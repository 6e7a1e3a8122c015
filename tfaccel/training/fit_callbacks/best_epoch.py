"""The run's one judge of its best epoch (`training.monitor`): early stopping and `keep: best`."""

from __future__ import annotations

import math
from typing import Optional, Sequence

import keras

from tfaccel.errors import UserInputError


def can_judge(monitor: str, *, has_validation: bool) -> bool:
    """THE rule of whether a run can judge its best epoch: a ``val_`` monitor needs a
    validation split; a training metric is always logged."""
    return has_validation or not monitor.startswith("val_")


def keep_plan(*, keep: str, monitor: str, has_validation: bool) -> tuple:
    """What model.keras will hold, decided before training: ``(mode, note)``.

    Args:
        keep: The recipe's `training.keep`, ``best`` or ``last``.
        monitor: The recipe's `training.monitor`.
        has_validation: Whether the run has a validation split.

    Returns:
        ``("best" | "last", note)``: `note` says why `best` became `last` (a ``val_``
        monitor without a validation split has nothing to judge by), else None.
    """
    if keep not in ("best", "last"):
        raise UserInputError(f"training.keep must be 'best' or 'last', got {keep!r}.")
    if keep == "best" and not can_judge(monitor, has_validation=has_validation):
        # The training loss is no judge: it is averaged over an epoch whose weights kept
        # changing, and it falls almost every epoch; the last epoch is what fit leaves.
        return "last", f"no validation split to judge training.monitor {monitor} by"
    return keep, None


class BestEpoch(keras.callbacks.EarlyStopping):
    """Keras' EarlyStopping as the one tracker of the best epoch by `training.monitor`.

    One Keras rule (``mode="auto"``: lower is better for a loss, the metric's own
    direction otherwise; a strict improvement, so the first of equal epochs wins, as
    `ModelCheckpoint(save_best_only=True)` decides) serves both early stopping (when
    `patience` is set) and the weights `keep: best` saves, so the two never name
    different epochs. Its progress (patience used, best value, epoch and weights) survives
    a resume: Keras resets it in `on_train_begin`, this puts the carried state back. Unlike
    Keras' EarlyStopping it never restores weights at the end of a `fit` call (the runner
    trains in several calls); `restore_best` does, once, before model.keras is saved.
    """

    _FIELDS = ("wait", "best", "best_epoch", "stopped_epoch")

    def __init__(self, *, monitor: str, patience: Optional[int], keep_weights: bool,
                 logged: Sequence[str] = (), carried: Optional[dict] = None):
        """Creates the tracker.

        Args:
            monitor: The logged metric that judges (`training.monitor`).
            patience: Epochs without improvement before stopping; None never stops.
            keep_weights: Keep a copy of the best epoch's weights (`keep: best`).
            logged: The names the run will log (Keras names a compiled metric by the
                string it was given), known before training: a monitor not among them is
                refused here, before any step, rather than after the first epoch.
            carried: `state()` of the checkpoint resumed from, with ``best_weights``.

        Raises:
            UserInputError: `monitor` is not among `logged`.
        """
        super().__init__(monitor=monitor, patience=math.inf if patience is None else patience,
                         restore_best_weights=keep_weights)
        self.logged = list(logged)
        self._carried = carried
        if self.logged and monitor not in self.logged:
            raise UserInputError(self._unknown())

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        # Under an explicit tf.distribute strategy fit has built the compiled metrics by
        # now (under the default one, at the first step): Keras' own direction rule can
        # then judge the monitor before any step.
        if self.monitor_op is None and all(getattr(m, "built", True)
                                           for m in self.model.metrics):
            self._judge_monitor()
        if self._carried:
            for name in self._FIELDS:
                if name in self._carried:
                    setattr(self, name, self._carried[name])
            if self._carried.get("best_weights") is not None:
                self.best_weights = self._carried["best_weights"]

    def on_epoch_end(self, epoch, logs=None):
        if self.monitor_op is None:
            self._judge_monitor()
        if self.monitor not in (logs or {}):
            raise UserInputError(self._unknown(logs))
        super().on_epoch_end(epoch, logs)

    def on_train_end(self, logs=None):
        # Several fit calls (a resumed partial epoch, then the rest) share one state; the
        # weights are put back once, by `restore_best`, not after each call.
        self._carried = {**self.state(), "best_weights": self.best_weights}

    def restore_best(self) -> Optional[int]:
        """Sets the model to the best epoch's weights when they are kept.

        Returns:
            The restored epoch (1-based), or None when nothing was restored.
        """
        if not self.restore_best_weights or self.best_weights is None:
            return None
        self.model.set_weights(self.best_weights)
        return self.best_epoch + 1

    def state(self) -> dict:
        """The JSON-able part of the state (best weights travel in the checkpoint's arrays)."""
        best = self.best
        return {"wait": self.wait, "best_epoch": self.best_epoch,
                "stopped_epoch": self.stopped_epoch,
                "best": None if best is None else float(best)}

    def _judge_monitor(self) -> None:
        try:
            self._set_monitor_op()  # Keras' mode="auto" rule, as ModelCheckpoint uses it
        except ValueError:
            raise UserInputError(self._unknown()) from None

    def _unknown(self, logs=None) -> str:
        names = self.logged or sorted(logs or {})
        return (f"training.monitor {self.monitor!r} is not a metric this run logs with a "
                f"known direction (lower or higher is better); it logs: "
                f"{', '.join(names)}. Set training.monitor to one of them.")
