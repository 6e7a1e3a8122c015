"""Derive and check batch numbers: global batch = micro-batch x accumulation steps x replicas."""

from tfaccel.errors import UserInputError


def derive_batch_sizes(*, global_batch, replicas=1, steps=None, micro_batch=None):
    """Compute the batch numbers once, from the global batch and either steps or micro-batch.

    The dataset is batched at `global_batch`; the strategy gives each replica
    `per_replica_batch`; accumulation cuts that into `steps` micro-batches of
    `micro_batch` examples. Pure Python, no TensorFlow.

    Args:
        global_batch: Examples per optimizer step, over all replicas.
        replicas: Replicas in sync (`strategy.num_replicas_in_sync`).
        steps: Accumulation steps; give this or `micro_batch` (neither means 1).
        micro_batch: Examples per replica per forward/backward pass.

    Returns:
        {"global_batch", "replicas", "per_replica_batch", "accumulation_steps", "micro_batch"}.

    Raises:
        UserInputError: a value that is not a positive integer, or numbers that do not
            divide evenly (the message shows the arithmetic).
    """
    for name, value in (("global_batch", global_batch), ("replicas", replicas)):
        _positive(name, value)
    if steps is not None:
        _positive("accumulation steps", steps)
    if micro_batch is not None:
        _positive("micro_batch", micro_batch)
    if global_batch % replicas:
        raise UserInputError(
            f"global batch {global_batch} is not divisible by the {replicas} replicas; "
            f"use a multiple of {replicas}"
        )
    per_replica = global_batch // replicas
    if steps is None and micro_batch is None:
        steps = 1
    if steps is None:
        if per_replica % micro_batch:
            raise UserInputError(
                f"micro_batch {micro_batch} does not divide the per-replica batch {per_replica} "
                f"(global batch {global_batch} / {replicas} replicas)"
            )
        steps = per_replica // micro_batch
    elif per_replica % steps:
        raise UserInputError(
            f"per-replica batch {per_replica} (global batch {global_batch} / {replicas} replicas) "
            f"is not divisible by {steps} accumulation steps; use a global batch that is a "
            f"multiple of {steps * replicas}"
        )
    derived_micro = per_replica // steps
    if micro_batch is not None and micro_batch != derived_micro:
        raise UserInputError(
            f"micro_batch {micro_batch} x {steps} accumulation steps x {replicas} replicas "
            f"= {micro_batch * steps * replicas}, not the global batch {global_batch}"
        )
    return {
        "global_batch": global_batch,
        "replicas": replicas,
        "per_replica_batch": per_replica,
        "accumulation_steps": steps,
        "micro_batch": derived_micro,
    }


def _positive(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UserInputError(f"{name} must be an integer >= 1; got {value!r}")
