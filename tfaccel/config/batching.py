"""The batch plan: global batch = micro-batch x accumulation steps x replicas, derived once."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import asdict, dataclass
from typing import Optional, Union

from tfaccel.errors import UserInputError

# The most steps per call `steps_per_execution: auto` picks (and the divisors a refusal lists
# go up to 4 times that).
MAX_STEPS_PER_EXECUTION = 32


@dataclass(frozen=True)
class BatchPlan:
    """How one optimizer step's examples are divided among replicas and micro-batches."""

    global_batch_size: int
    replicas: int
    accumulation_steps: int
    per_replica_batch_size: int
    micro_batch_size: int

    def as_dict(self) -> dict:
        """The plan as plain data for summary.json and logs."""
        return asdict(self)

    def describe(self) -> str:
        """One line for the log, e.g. `global batch 128 = 2 replicas x 4 steps x 16`."""
        return (f"global batch {self.global_batch_size} = {self.replicas} replica(s) x "
                f"{self.accumulation_steps} accumulation step(s) x micro-batch "
                f"{self.micro_batch_size}")


def plan_batches(*, global_batch_size: int, replicas: int,
                 accumulation_steps: Optional[int] = None,
                 micro_batch_size: Union[int, str, None] = None) -> BatchPlan:
    """Derives and checks the batch plan.

    Args:
        global_batch_size: Examples per optimizer step over all replicas.
        replicas: Number of replicas in sync (devices times workers).
        accumulation_steps: Micro-batches per optimizer step on each replica; default 1.
        micro_batch_size: Per-replica micro-batch; derives `accumulation_steps` instead.
            ``"auto"``: the plan it starts from, `accumulation_steps`' (`smaller_micro_batch`
            gives the next one when a step runs out of memory).

    Returns:
        The `BatchPlan`.

    Raises:
        UserInputError: The numbers do not divide evenly, or both derivations are given.
    """
    if global_batch_size < 1:
        raise UserInputError(f"global_batch_size must be >= 1, got {global_batch_size!r}.")
    if replicas < 1:
        raise UserInputError(f"replicas must be >= 1, got {replicas!r}.")
    if micro_batch_size == "auto":
        micro_batch_size = None
    if accumulation_steps is not None and micro_batch_size is not None:
        raise UserInputError(f"set accumulation_steps ({accumulation_steps}) or "
                             f"micro_batch_size ({micro_batch_size}), not both.")
    if global_batch_size % replicas:
        raise UserInputError(
            f"global_batch_size {global_batch_size} is not divisible by the {replicas} "
            f"replicas; use a multiple of {replicas}.")
    per_replica = global_batch_size // replicas
    if micro_batch_size is not None:
        if micro_batch_size < 1 or per_replica % micro_batch_size:
            raise UserInputError(
                f"micro_batch_size {micro_batch_size} does not divide the per-replica batch "
                f"{per_replica} (global batch {global_batch_size} / {replicas} replicas).")
        accumulation_steps = per_replica // micro_batch_size
    steps = 1 if accumulation_steps is None else accumulation_steps
    if steps < 1:
        raise UserInputError(f"accumulation_steps must be >= 1, got {steps!r}.")
    if per_replica % steps:
        raise UserInputError(
            f"the per-replica batch {per_replica} (global batch {global_batch_size} / "
            f"{replicas} replicas) is not divisible by accumulation_steps {steps}; use a "
            f"global batch that is a multiple of {replicas * steps}.")
    return BatchPlan(global_batch_size=global_batch_size, replicas=replicas,
                     accumulation_steps=steps, per_replica_batch_size=per_replica,
                     micro_batch_size=per_replica // steps)


def smaller_micro_batch(plan: BatchPlan) -> Optional[BatchPlan]:
    """The plan with the micro-batch halved (`micro_batch_size: auto` after out of memory).

    The global and per-replica batches stay; the accumulation steps grow to the fewest that
    divide the per-replica batch into micro-batches of at most half the current one (64 to
    32 with twice the steps; an odd 3 to 1).

    Returns:
        The smaller plan, or None when the micro-batch is already 1.
    """
    if plan.micro_batch_size <= 1:
        return None
    per_replica, target = plan.per_replica_batch_size, plan.micro_batch_size // 2
    steps = next(s for s in range(plan.accumulation_steps + 1, per_replica + 1)
                 if per_replica % s == 0 and per_replica // s <= target)
    return dataclasses.replace(plan, accumulation_steps=steps,
                               micro_batch_size=per_replica // steps)


# Keras runs `steps_per_execution` steps per call of its train function and calls the
# callbacks once per call. Keras 3.15 counts an epoch in whole calls
# (`range(0, steps_per_epoch, k)`) and each call runs k steps of an endless stream, so k must
# divide the steps of an epoch: 2 per call over a 5-step epoch trained 6 steps per epoch, and
# every epoch boundary, example count and resume point after it was off, silently. And
# callbacks see only the last step of each call, so a checkpoint every N steps needs N to be
# a multiple of k, or it is skipped.


def divisors(n: int) -> list:
    """The divisors of `n`, ascending."""
    return [d for d in range(1, n + 1) if n % d == 0]


def _spoken(numbers: list) -> str:
    text = [str(n) for n in numbers]
    return text[0] if len(text) == 1 else ", ".join(text[:-1]) + " or " + text[-1]


def check_steps_per_execution(steps: int, *, steps_per_epoch: int,
                              every_steps: Optional[int] = None) -> None:
    """Refuses a steps-per-call value that would silently train other steps than asked.

    Args:
        steps: `training.steps_per_execution` (a number).
        steps_per_epoch: Optimizer steps of one epoch.
        every_steps: `training.checkpoint_every_steps`, or None.

    Raises:
        UserInputError: `steps` does not divide `steps_per_epoch`, or `every_steps` is not
            a multiple of it; the message names both numbers and the values that fit.
    """
    if steps_per_epoch % steps:
        shown = [d for d in divisors(steps_per_epoch) if d <= MAX_STEPS_PER_EXECUTION * 4]
        raise UserInputError(
            f"training.steps_per_execution {steps} does not divide the {steps_per_epoch} "
            f"steps of an epoch: Keras runs whole calls of {steps} steps, so each epoch would "
            f"train {math.ceil(steps_per_epoch / steps) * steps} steps and every epoch "
            "boundary, example count and resume point after the first would be off. Use a "
            f"divisor of {steps_per_epoch} ({_spoken(shown)}), set training.steps_per_epoch "
            f"to a multiple of {steps}, or steps_per_execution: auto (it picks a divisor).")
    if every_steps and every_steps % steps:
        raise UserInputError(
            f"training.checkpoint_every_steps {every_steps} is not a multiple of "
            f"training.steps_per_execution {steps}: callbacks see only the last step of "
            f"each call of {steps}, so those checkpoints would be skipped. Make one a "
            "multiple of the other, or use steps_per_execution: auto.")
