"""Element (DATA) sharding among workers needs a fixed order: the one check for it."""

from __future__ import annotations

import tensorflow as tf


def multi_worker_in_scope() -> bool:
    """Whether the strategy in scope is a MultiWorkerMirroredStrategy."""
    return (tf.distribute.has_strategy()
            and isinstance(tf.distribute.get_strategy(),
                           tf.distribute.MultiWorkerMirroredStrategy))


def fix_order_for_data_sharding(options: dict) -> dict:
    """Forces ``deterministic=True`` when a multi-worker strategy will shard by element.

    `experimental_distribute_dataset` under MultiWorkerMirroredStrategy gives each worker every
    k-th element of its own copy of the pipeline (DATA sharding); TensorFlow documents that
    as unsafe with a non-deterministic order (workers may overlap or miss examples). With an
    `input_context` the pipeline shards by index before any shuffle or parallel stage, so
    the caller's choice holds there.

    Args:
        options: The keyword options a builder passes to `pipeline.optimize` (changed in
            place and returned).
    """
    if options.get("input_context") is None and multi_worker_in_scope():
        options["deterministic"] = True
    return options
