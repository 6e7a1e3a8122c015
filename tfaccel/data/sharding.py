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


def workers_in_scope() -> int:
    """Workers of the multi-worker strategy in scope (1 without one)."""
    if not multi_worker_in_scope():
        return 1
    resolver = tf.distribute.get_strategy().cluster_resolver
    spec = resolver.cluster_spec().as_dict() if resolver is not None else {}
    return max(1, sum(len(spec.get(job, ())) for job in ("chief", "worker")))


def choose_file_policy(options: dict, *, num_files: int) -> dict:
    """FILE sharding when every worker gets a file, else DATA (with a fixed order).

    TensorFlow's AUTO policy does not fall back by itself: with fewer files than workers
    it fails ("Could not apply FILE based sharding: the dataset only has 1 file(s)"), as
    the built-in dataset's one file per split does on 2 workers. FILE sharding needs as
    many examples in each worker's files for the workers' epochs to stay aligned; files of
    equal size (TFDS's shards, `tfaccel` export) are the usual case.

    Args:
        options: The keyword options a file source passes to `pipeline.optimize`
            (changed in place and returned); an explicit ``shard_policy`` is kept.
        num_files: Files the source reads.
    """
    if "shard_policy" in options or options.get("input_context") is not None:
        return options
    workers = workers_in_scope()
    if workers > 1 and num_files < workers:
        options["shard_policy"] = "data"
        fix_order_for_data_sharding(options)
    else:
        options["shard_policy"] = "auto"  # FILE: a reader dataset is there to split
    return options
