"""The `tf.data.Options` of the tail: order, threads, memory, sharding, and the sequential baseline."""

from __future__ import annotations

from typing import Optional

import tensorflow as tf

from tfaccel.errors import UserInputError

_SHARD_POLICIES = {
    None: None,
    "auto": tf.data.experimental.AutoShardPolicy.AUTO,
    "data": tf.data.experimental.AutoShardPolicy.DATA,
    "file": tf.data.experimental.AutoShardPolicy.FILE,
    "off": tf.data.experimental.AutoShardPolicy.OFF,
}


def make_options(*, deterministic: bool = False, private_threads: Optional[int] = None,
                 ram_budget_bytes: Optional[int] = None,
                 shard_policy: Optional[str] = None) -> tf.data.Options:
    """The tf.data options of the standard tail.

    Args:
        deterministic: Keep element order fixed. Off by default: letting the parallel
            per-example stages (decode, per-example augmentation) hand out whichever example
            is ready first is measurably faster; turn it on (with a `seed`) for runs that
            must be reproducible. Batches keep their order either way (`optimize`).
        private_threads: Size of a thread pool private to this pipeline (None or 0: share
            TF's inter-op pool). Useful when the model's ops and the pipeline compete.
        ram_budget_bytes: Upper bound on the memory tf.data's autotuner may use for buffers.
        shard_policy: ``"auto"``, ``"data"``, ``"file"`` or ``"off"``: how a multi-worker
            strategy splits this dataset. None leaves TF's default (AUTO).

    Returns:
        A `tf.data.Options`.
    """
    if shard_policy not in _SHARD_POLICIES:
        raise UserInputError(f"shard_policy must be one of {list(_SHARD_POLICIES)}, got "
                             f"{shard_policy!r}.")
    if private_threads is not None and (not isinstance(private_threads, int)
                                        or private_threads < 0):
        raise UserInputError(f"private_threads must be an integer >= 0, got "
                             f"{private_threads!r}.")
    options = tf.data.Options()
    options.deterministic = bool(deterministic)
    if private_threads:
        options.threading.private_threadpool_size = private_threads
    if ram_budget_bytes:
        options.autotune.ram_budget = int(ram_budget_bytes)
    if _SHARD_POLICIES[shard_policy] is not None:
        options.experimental_distribute.auto_shard_policy = _SHARD_POLICIES[shard_policy]
    return options


def sequential_options() -> tf.data.Options:
    """Options that make a pipeline truly sequential: the baseline that benchmarks name.

    tf.data's static optimisations parallelise a stateless map and inject a prefetch on their
    own, so a pipeline written without `num_parallel_calls` is not sequential unless these
    are switched off.
    """
    options = tf.data.Options()
    options.autotune.enabled = False
    options.experimental_optimization.map_parallelization = False
    options.experimental_optimization.inject_prefetch = False
    options.experimental_optimization.parallel_batch = False
    return options

