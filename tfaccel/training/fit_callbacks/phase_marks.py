"""`fit`'s phases on a `PhaseTimes`: each epoch's first calls, training, validation, epoch end."""

from __future__ import annotations

import keras

from tfaccel.training.fit_callbacks.timings import PhaseTimes


class PhaseMarks(keras.callbacks.Callback):
    """Marks `fit`'s phases on a `PhaseTimes` (`tfaccel train --timings`, summary.json).

    Two instances bracket the runner's callback list (``edge="first"`` at its start,
    ``"last"`` at its end), so the epoch-end phase holds every callback between them
    (checkpoints, metrics.jsonl, the best epoch); Keras' own progress bar and History come
    after the list and count in the next phase. The first call of a train or test function
    Keras has just made (the first `fit`, a retrace after steps_per_execution changed) is a
    phase of its own: that call traces and compiles the function.

    Args:
        timings: Where the phases are marked.
        edge: ``"first"`` or ``"last"``: where in the callback list this instance is.
    """

    def __init__(self, timings: PhaseTimes, *, edge: str):
        super().__init__()
        if edge not in ("first", "last"):
            raise ValueError(f"edge must be 'first' or 'last', got {edge!r}")
        self.timings = timings
        self.first = edge == "first"
        self._epoch = 0
        self._built: set = set()  # ids of the Keras functions whose first call was marked
        # Seconds of the first call of each function Keras made ("train_function",
        # "test_function"), the latest one's: they traced and compiled it.
        self.first_call_seconds: dict = {}
        self._first_train_call = self._first_test_call = self._validated = False

    def _just_made(self, name: str) -> bool:
        """Whether the model's function `name` is one this run has not called yet."""
        function = getattr(self.model, name, None)
        if function is None or id(function) in self._built:
            return False
        self._built.add(id(function))
        return True

    def on_train_begin(self, logs=None):
        if self.first:
            self.timings.mark("fit: Keras' start (input iterator, callbacks)")

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch + 1
        self._first_train_call = self.first
        self._validated = False

    def on_train_batch_end(self, batch, logs=None):
        if self._first_train_call:
            self._first_train_call = False
            if self._just_made("train_function"):
                self.first_call_seconds["train_function"] = self.timings.mark(
                    f"epoch {self._epoch}: first train call (traces and compiles the train "
                    "function)")

    def on_test_begin(self, logs=None):
        if self.first:
            self.timings.mark(f"epoch {self._epoch}: training")
            self._first_test_call = self._validated = True

    def on_test_batch_end(self, batch, logs=None):
        if self._first_test_call:
            self._first_test_call = False
            if self._just_made("test_function"):
                self.first_call_seconds["test_function"] = self.timings.mark(
                    f"epoch {self._epoch}: first validation call (traces and compiles the "
                    "test function)")

    def on_epoch_end(self, epoch, logs=None):
        if self.first:
            self.timings.mark(f"epoch {self._epoch}: "
                              + ("validation" if self._validated else "training"))
        else:
            self.timings.mark(f"epoch {self._epoch}: epoch-end callbacks (checkpoint, "
                              "metrics.jsonl, best epoch)")
