"""`training.micro_batch_size: auto`: a first step out of device memory, retried with half
the micro-batch and twice the accumulation steps (same global batch, same result)."""

from __future__ import annotations

import dataclasses
from typing import Callable

import keras
import tensorflow as tf

from tfaccel.config.batching import BatchPlan, smaller_micro_batch
from tfaccel.errors import TrainingError, UserInputError
from tfaccel.messages import say
from tfaccel.training.run.context import Decisions


class MicroBatchRetry(keras.callbacks.Callback):
    """Runs `fit` calls; with `auto`, retries one that ran out of memory before any step
    ended. Also a Keras callback of those calls: it notes the first step that ended.

    A retry is exact because nothing of the failed attempt is kept: the model's and the
    optimizer's variables (weights, BatchNorm statistics, random-generator states, slots,
    the iteration count) are put back to their values before the first attempt (inside a
    compiled call some of them may have moved before the error: an op waits only for the
    ops it depends on), the train function is traced again with the wrapper's new steps
    (`AccumulatingModel.steps`), and the caller's `fit` makes a new input stream from the
    same position, so no example is skipped or seen twice. Once a step has ended (a
    callback saw it: a checkpoint or a log line may hold it), running out of memory is
    not retried: it goes on as any failure does.
    """

    def __init__(self, *, auto: bool, plan: BatchPlan, trained_model, strategy,
                 workers: int = 1):
        super().__init__()
        if auto and workers > 1:  # runtime.strategy auto found a cluster in TF_CONFIG
            raise UserInputError(
                f"training.micro_batch_size auto cannot be used by a run of {workers} "
                "workers (runtime.strategy auto found them in TF_CONFIG): one worker that "
                "changed its step alone would leave the others waiting in its collectives. "
                "Set training.micro_batch_size to a number.")
        self.auto = auto
        self.plan = plan
        self.retries = []
        self._trained = trained_model
        self._stepped = False
        self._saved = None
        if auto:
            self._saved = _snapshot(trained_model, strategy=strategy)

    def on_train_batch_end(self, batch, logs=None):
        self._stepped = True

    def fit(self, attempt: Callable[[], object]):
        """Calls `attempt()` (one `fit`, with this callback in its list) and returns what it
        returns; calls it again with a smaller micro-batch while it runs out of memory
        before its first step ended.

        Raises:
            TrainingError: Out of memory at micro-batch 1 (nothing smaller to try).
            tf.errors.ResourceExhaustedError: Without `auto`, or after a step ended.
        """
        while True:
            try:
                return attempt()
            except tf.errors.ResourceExhaustedError as error:
                if not self.auto or self._stepped or not self._restore():
                    raise
                self._shrink(error)

    def decided(self, decisions: Decisions) -> Decisions:
        """`decisions` with the plan in force and the retries made (for summary.json)."""
        if not self.retries:
            return decisions
        return dataclasses.replace(decisions, plan=self.plan,
                                   micro_batch_retries=tuple(self.retries))

    def _shrink(self, error: tf.errors.ResourceExhaustedError) -> None:
        plan = self.plan
        smaller = smaller_micro_batch(plan)
        if smaller is None:
            tried = ", ".join(str(r["micro_batch_size"]) for r in self.retries)
            raise TrainingError(
                "out of device memory at micro-batch 1 (training.micro_batch_size auto"
                + (f" tried {tried} and 1" if tried else "")
                + f"; global batch {plan.global_batch_size}): even one example per "
                "replica does not fit. Use a smaller model or inputs, runtime.precision "
                "mixed_float16 or mixed_bfloat16, or more devices.") from error
        say(f"out of memory at micro-batch {plan.micro_batch_size}: retrying with "
            f"{smaller.micro_batch_size} (accumulating {smaller.accumulation_steps} steps), "
            f"global batch {plan.global_batch_size} unchanged.")
        self.retries.append({"micro_batch_size": plan.micro_batch_size,
                             "retried_with": smaller.micro_batch_size,
                             "accumulation_steps": smaller.accumulation_steps,
                             "error": type(error).__name__})
        model = self._trained
        model.steps = smaller.accumulation_steps  # read when the step is traced again
        model.train_function = model.test_function = model.predict_function = None
        self.plan = smaller

    def _restore(self) -> bool:
        """The variables back to their values before the first attempt; False if it cannot
        (the failed attempt created variables: a model built on its first call)."""
        variables = _variables(self._trained)
        if len(variables) != len(self._saved):
            return False
        for variable, value in zip(variables, self._saved):
            variable.assign(value)
        return True


def _variables(trained_model) -> list:
    return list(trained_model.variables) + list(trained_model.optimizer.variables)


def _snapshot(trained_model, *, strategy) -> list:
    """Host copies of the model's and the optimizer's variables.

    The optimizer is built first (as `fit` would build it), so that its slots exist and
    are copied too.
    """
    optimizer = trained_model.optimizer
    if not optimizer.built and trained_model.built and trained_model.trainable_variables:
        with strategy.scope():
            optimizer.build(trained_model.trainable_variables)
    return [v.numpy() for v in _variables(trained_model)]
