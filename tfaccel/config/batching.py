"""The batch plan: global batch = micro-batch x accumulation steps x replicas, derived once."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Optional

from tfaccel.errors import UserInputError


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
                 micro_batch_size: Optional[int] = None) -> BatchPlan:
    """Derives and checks the batch plan.

    Args:
        global_batch_size: Examples per optimizer step over all replicas.
        replicas: Number of replicas in sync (devices times workers).
        accumulation_steps: Micro-batches per optimizer step on each replica; default 1.
        micro_batch_size: Per-replica micro-batch; derives `accumulation_steps` instead.

    Returns:
        The `BatchPlan`.

    Raises:
        UserInputError: The numbers do not divide evenly, or both derivations are given.
    """
    if global_batch_size < 1:
        raise UserInputError(f"global_batch_size must be >= 1, got {global_batch_size!r}.")
    if replicas < 1:
        raise UserInputError(f"replicas must be >= 1, got {replicas!r}.")
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
