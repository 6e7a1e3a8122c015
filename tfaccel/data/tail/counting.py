"""Batch counting of the tail: the drop rule, batches per pass, the batch of one pipeline."""

from __future__ import annotations

from typing import Optional

import tensorflow as tf

from tfaccel.errors import UserInputError


def num_replicas_in_scope() -> int:
    """Replicas of the strategy in scope (1 outside any strategy)."""
    return tf.distribute.get_strategy().num_replicas_in_sync


def drops_remainder(num_replicas: int) -> bool:
    """THE rule for the last partial training batch: dropped when more than one replica.

    Under a strategy every replica must get a batch of the same static shape, so the last
    partial batch is dropped; on one device it is kept (no example is lost). Every place
    that needs to know (the batch stage, steps per epoch, example counts) asks this.
    """
    return num_replicas > 1


def batches_per_pass(num_examples: int, batch_size: int, *, drop_remainder: bool) -> int:
    """Batches in one pass over `num_examples` examples (floor when dropping, else ceil)."""
    if drop_remainder:
        return num_examples // batch_size
    return -(-num_examples // batch_size)


def examples_in(batch) -> int:
    """THE count of one batch: the first dimension of its first tensor (1 for a scalar).

    A batch's every tensor shares its first dimension (Keras' own rule), so the first one in
    `tf.nest` order (features before labels, dict keys sorted) tells.
    """
    leaf = tf.nest.flatten(batch)[0]
    return int(leaf.shape[0]) if leaf.shape.rank else 1


def count_pass(dataset) -> tuple:
    """``(batches, examples)`` of one full pass over a dataset of batches."""
    batches = examples = 0
    for batch in dataset:
        batches += 1
        examples += examples_in(batch)
    return batches, examples


def resolve_batch(batch_size: int, *, drop_remainder: Optional[bool],
                  input_context: Optional[tf.distribute.InputContext]):
    """Turns the GLOBAL batch size into the batch this pipeline must produce.

    With an `input_context` (from `strategy.distribute_datasets_from_function`) each input
    pipeline yields per-replica batches; otherwise the pipeline yields global batches that
    `strategy.experimental_distribute_dataset` (or Keras' `fit`) splits among replicas.
    `drop_remainder=None` means: drop the last partial batch whenever there is more than one
    replica, so every replica always gets a batch of the same static shape.

    Returns:
        ``(batch_size, drop_remainder)`` to pass to `Dataset.batch`.
    """
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise UserInputError(f"batch_size must be a positive integer, got {batch_size!r}.")
    replicas = (input_context.num_replicas_in_sync if input_context is not None
                else num_replicas_in_scope())
    if input_context is not None:
        batch_size = input_context.get_per_replica_batch_size(batch_size)
    if drop_remainder is None:
        drop_remainder = drops_remainder(replicas)
    return batch_size, bool(drop_remainder)


class _BatchOnlyContext:
    """An input context whose input was already sharded by the source: batch size only."""

    def __init__(self, ctx: tf.distribute.InputContext):
        self.num_replicas_in_sync = ctx.num_replicas_in_sync
        self.num_input_pipelines = 1
        self.input_pipeline_id = 0
        self.get_per_replica_batch_size = ctx.get_per_replica_batch_size


def batch_only_context(ctx: Optional[tf.distribute.InputContext]):
    """Wraps `ctx` for `optimize` after a source (files, TFDS) already did the sharding."""
    return None if ctx is None else _BatchOnlyContext(ctx)

