"""The one standard tf.data tail: parallel map, cache, shuffle, augment, batch, prefetch, options."""

from __future__ import annotations

import os
from typing import Callable, Optional, Sequence, Union

import tensorflow as tf

from tfaccel.data import augment as augment_lib
from tfaccel.errors import UserInputError

AUTOTUNE = tf.data.AUTOTUNE

_SHARD_POLICIES = {
    None: None,
    "auto": tf.data.experimental.AutoShardPolicy.AUTO,
    "data": tf.data.experimental.AutoShardPolicy.DATA,
    "file": tf.data.experimental.AutoShardPolicy.FILE,
    "off": tf.data.experimental.AutoShardPolicy.OFF,
}

AugmentArg = Union[None, str, Sequence[str], Callable]


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


def make_options(*, deterministic: bool = False, private_threads: Optional[int] = None,
                 ram_budget_bytes: Optional[int] = None,
                 shard_policy: Optional[str] = None) -> tf.data.Options:
    """The tf.data options of the standard tail.

    Args:
        deterministic: Keep element order fixed. Off by default: letting parallel stages hand
            out whichever element is ready first is measurably faster; turn it on (with a
            `seed`) for runs that must be reproducible.
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


def _cache(dataset: tf.data.Dataset, cache) -> tf.data.Dataset:
    if cache in (None, False, ""):
        return dataset
    if cache in ("memory", True):
        return dataset.cache()
    path = os.fspath(cache)
    if os.path.isdir(path) or path.endswith(os.sep):
        # tf.data takes a file *prefix*; a directory alone would write files next to it.
        os.makedirs(path, exist_ok=True)
        path = os.path.join(path, "tfdata_cache")
    else:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    return dataset.cache(path)


def _split(element):
    """Returns (features, label, has_label) for an element that is a pair or features only."""
    if isinstance(element, tuple) and len(element) == 2:
        return element[0], element[1], True
    return element, None, False


def _join(features, label, has_label):
    return (features, label) if has_label else features


def _map_images(features, fn):
    """Applies `fn` to the image tensor in `features` (a tensor, or the dict key "image")."""
    if isinstance(features, dict):
        if "image" not in features:
            raise UserInputError(
                f"augment needs an 'image' feature; the features are {sorted(features)}.")
        return {**features, "image": fn(features["image"])}
    return fn(features)


def _to_float(features, image_dtype):
    # Images travel as uint8 through decode, cache and shuffle (4x less memory than float32)
    # and become float in [0, 255] only here, like Keras' own image loaders produce them.
    def cast(x):
        if x.dtype == tf.uint8 and image_dtype:
            return tf.cast(x, image_dtype)
        return x

    if isinstance(features, dict):
        return {k: cast(v) for k, v in features.items()}
    return cast(features)


def _has_unknown_dims(spec) -> bool:
    return any(isinstance(s, tf.TensorSpec) and not s.shape.is_fully_defined()
               for s in tf.nest.flatten(spec))


def _has_uint8(spec) -> bool:
    return any(getattr(s, "dtype", None) == tf.uint8 for s in tf.nest.flatten(spec))


def optimize(dataset: tf.data.Dataset, *, batch_size: int,
             map_fn: Optional[Callable] = None,
             cache=None,
             shuffle_buffer: int = 0,
             augment: AugmentArg = None,
             augment_on: str = "batch",
             seed: Optional[int] = None,
             drop_remainder: Optional[bool] = None,
             deterministic: bool = False,
             num_parallel_calls: int = AUTOTUNE,
             private_threads: Optional[int] = None,
             ram_budget_bytes: Optional[int] = None,
             shard_policy: Optional[str] = None,
             image_dtype: Optional[str] = "float32",
             input_context: Optional[tf.distribute.InputContext] = None,
             source_shuffle: int = 0,
             ignore_decode_errors: bool = False,
             sequential: bool = False) -> tf.data.Dataset:
    """Applies the standard tail to a dataset of examples and returns batches for `fit`.

    The order is fixed because each step only stays correct and fast in this place:

    1. ``map_fn`` (read/decode/resize) as a parallel map: the expensive, deterministic work,
       spread over all cores.
    2. ``cache``: right after the deterministic work, so later epochs skip it, and *before*
       anything random, so random choices are not frozen into the cache.
    3. ``shuffle`` (seeded, reshuffled each epoch): after the cache, or every epoch would read
       the cached first-epoch order.
    4. random augmentation: after cache and shuffle so it differs every epoch; named
       augmentations run vectorised on whole batches (one op per batch, not per image),
       a callable runs per example in a parallel map (``augment_on="example"``) or per batch.
       Its seeds come from ``Dataset.random(rerandomize_each_iteration=True)``: reproducible
       for a given `seed`, yet different in each epoch.
    5. ``batch`` (drop_remainder under a strategy, so every replica gets the same shape).
    6. ``prefetch(AUTOTUNE)`` last, so the next batch is prepared while the model trains.

    Args:
        dataset: A dataset of examples: ``(features, label)`` pairs or features alone.
        batch_size: The GLOBAL batch size (all replicas together).
        map_fn: Per-example decode/resize function, run as a parallel map before the cache.
        cache: None, ``"memory"``, or a file path (or directory) for an on-disk cache.
        shuffle_buffer: Shuffle buffer size in examples; 0 turns shuffling off.
        augment: A list of names from ``augment.AUGMENTATIONS`` ("flip", "flip_vertical",
            "crop", "brightness", "contrast"), or a callable
            ``fn(features, label, seed) -> (features, label)`` where `seed` is a shape-[2]
            int64 tensor for ``tf.random.stateless_*``/``tf.image.stateless_random_*`` ops.
        augment_on: ``"batch"`` or ``"example"``: where a callable `augment` runs.
        seed: Seed for shuffling and augmentation; None means different every run.
        drop_remainder: None means True when more than one replica is in sync.
        deterministic: Fix the element order (see `make_options`).
        num_parallel_calls: Parallelism of the maps (default AUTOTUNE).
        private_threads: See `make_options`.
        ram_budget_bytes: See `make_options`.
        shard_policy: See `make_options`.
        image_dtype: uint8 features are cast to this dtype after caching ("float32");
            None keeps them uint8.
        input_context: From ``strategy.distribute_datasets_from_function``: shard this
            pipeline's input and produce per-replica batches.
        source_shuffle: Shuffle buffer applied before `map_fn`, for sources whose elements
            are cheap references (paths, indices): a global shuffle for a few bytes each.
        ignore_decode_errors: Skip examples whose `map_fn` fails (used by the image folder
            source after its up-front file check, as a last safety net).

    Returns:
        A `tf.data.Dataset` of batches.

    Raises:
        UserInputError: An argument has a bad value.
    """
    batch, drop = resolve_batch(batch_size, drop_remainder=drop_remainder,
                                input_context=input_context)
    if augment_on not in ("batch", "example"):
        raise UserInputError(f"augment_on must be 'batch' or 'example', got {augment_on!r}.")
    if not isinstance(shuffle_buffer, int) or shuffle_buffer < 0:
        raise UserInputError(f"shuffle_buffer must be an integer >= 0, got {shuffle_buffer!r}.")
    names, custom = (), None
    if callable(augment):
        custom = augment
    elif augment:
        names = augment_lib.check_names(augment)
    options = make_options(deterministic=deterministic, private_threads=private_threads,
                           ram_budget_bytes=ram_budget_bytes, shard_policy=shard_policy)

    if sequential:
        num_parallel_calls = None
        options = options.merge(sequential_options())

    # Per-op determinism only means something for parallel ops (TF warns otherwise).
    det = (deterministic or None) if num_parallel_calls is not None else None

    if input_context is not None and input_context.num_input_pipelines > 1:
        # Each input pipeline (worker) keeps a disjoint share, decided before any decoding.
        dataset = dataset.shard(input_context.num_input_pipelines,
                                input_context.input_pipeline_id)
    if source_shuffle:
        dataset = dataset.shuffle(source_shuffle, seed=seed, reshuffle_each_iteration=True)
    if map_fn is not None:
        dataset = dataset.map(map_fn, num_parallel_calls=num_parallel_calls,
                              deterministic=det)
        if ignore_decode_errors:
            # Logged by tf.data (one line each): these slipped past the up-front file check.
            dataset = dataset.ignore_errors(log_warning=True)
            if not sequential:
                # ignore_errors is a serial stage that also blocks map+batch fusion; a
                # prefetch behind it keeps the parallel decode busy (measured: JPEG folder
                # 2,900 -> 4,560 img/s on 2 cores, the same as with no ignore_errors).
                dataset = dataset.prefetch(AUTOTUNE)
    dataset = _cache(dataset, cache)
    if shuffle_buffer:
        dataset = dataset.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)

    if custom is not None and augment_on == "example":
        seeds = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True)

        def per_example(element, rnd):
            features, label, has_label = _split(element)
            features = _to_float(features, image_dtype)
            seed_pair = tf.stack([rnd, tf.constant(0, tf.int64)])
            features, label = custom(features, label, seed_pair)
            return _join(features, label, has_label)

        dataset = tf.data.Dataset.zip((dataset, seeds)).map(
            per_example, num_parallel_calls=num_parallel_calls,
            deterministic=det)

    if _has_unknown_dims(dataset.element_spec):
        # Variable-length features (e.g. TFRecord `kind: var`) batch as RaggedTensors.
        dataset = dataset.ragged_batch(batch, drop_remainder=drop)
    else:
        dataset = dataset.batch(batch, drop_remainder=drop,
                                num_parallel_calls=num_parallel_calls,
                                deterministic=det)

    if names or (custom is not None and augment_on == "batch"):
        seeds = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True)

        def per_batch(element, rnd):
            features, label, has_label = _split(element)
            seed_pair = tf.stack([rnd, tf.constant(1, tf.int64)])
            if names:
                # Geometric augmentations run on the uint8 batch, before the cast to float.
                features = _map_images(features, lambda x: augment_lib.apply_to_batch(
                    x, names, seed_pair,
                    dtype=tf.as_dtype(image_dtype) if image_dtype else x.dtype))
                features = _to_float(features, image_dtype)
            else:
                features = _to_float(features, image_dtype)
                features, label = custom(features, label, seed_pair)
            return _join(features, label, has_label)

        dataset = tf.data.Dataset.zip((dataset, seeds)).map(
            per_batch, num_parallel_calls=num_parallel_calls,
            deterministic=det)
    elif image_dtype and custom is None and _has_uint8(dataset.element_spec):

        def cast_only(*element):
            features, label, has_label = _split(element if len(element) > 1 else element[0])
            return _join(_to_float(features, image_dtype), label, has_label)

        dataset = dataset.map(cast_only, num_parallel_calls=num_parallel_calls,
                              deterministic=det)

    if not sequential:
        dataset = dataset.prefetch(AUTOTUNE)
    return dataset.with_options(options)
