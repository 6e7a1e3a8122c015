"""The one standard tf.data tail: parallel map, cache, shuffle, augment, batch, prefetch, options."""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Callable, Mapping, Optional, Sequence, Union

import numpy as np
import tensorflow as tf

from tfaccel.data import augment as augment_lib
from tfaccel.data import cache_files
from tfaccel.data.tail_options import TailOptions
from tfaccel.errors import UserInputError

logger = logging.getLogger(__name__)

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


# File caches this process has said it cannot fingerprint (said once each).
_UNFINGERPRINTED: set = set()


def _prepare_file_cache(cache, fingerprint: Optional[dict]) -> str:
    """Fingerprints and locks a file cache before anything reads it (`cache_files`).

    The builders pass what their examples depend on; a plain dataset handed to `optimize`
    cannot be looked into, so without a `cache_fingerprint` it is said once that a change of
    its input is not detected (the cache is still locked and repaired after a kill).
    """
    prefix = cache_files.cache_prefix(cache)
    if fingerprint is None:
        if prefix not in _UNFINGERPRINTED:
            _UNFINGERPRINTED.add(prefix)
            logger.warning(
                "tfaccel.data.optimize(cache=%r) cannot know when its input dataset "
                "changes, so a cache built earlier is reused as it is: pass "
                "cache_fingerprint={...} (whatever the examples depend on: file names and "
                "times, settings before the cache) to have it rebuilt when that changes, or "
                "use a tfaccel.data.from_* builder, which does so itself.", prefix)
        fingerprint = {}
    return cache_files.prepare_file_cache(prefix, fingerprint=fingerprint, key="cache")


def _cache(dataset: tf.data.Dataset, cache) -> tf.data.Dataset:
    if cache in (None, False, ""):
        return dataset
    if cache in ("memory", True):
        return dataset.cache()
    # tf.data takes a file *prefix*; a directory alone would write files next to it.
    path = cache_files.cache_prefix(cache)
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


def _only_scalars(spec) -> bool:
    return all(isinstance(s, tf.TensorSpec) and s.shape.rank == 0
               for s in tf.nest.flatten(spec))


def _has_uint8(spec) -> bool:
    return any(getattr(s, "dtype", None) == tf.uint8 for s in tf.nest.flatten(spec))


@dataclasses.dataclass(frozen=True)
class EpochStream:
    """Asks `optimize` for a stream of whole passes whose order depends only on (seed, pass).

    Each pass p (0-based) shuffles with a seed derived from (`seed`, p) and seeds its
    augmentations from (`seed`, p, batch index), so pass p is the same in every process that
    builds the pipeline: a run resumed at (pass, batch) continues exactly where it stopped,
    without replaying or skipping an example. Keras' `fit` then reads the stream with a
    fixed `steps_per_epoch`.

    Attributes:
        first_pass: The pass the stream starts in.
        skip_batches: Batches of `first_pass` already trained on (skipped before decoding
            where the order allows, otherwise read and dropped without being trained on).
        num_passes: Passes in the stream counted from pass 0 (None: endless).
        batches_per_pass: Batches each pass yields (None: every full batch). The batches
            after it are still made and dropped, so a cache before the stream is always
            read to its end. Workers that split the files among them each make this many
            batches per pass, so they stay in step across passes.
    """

    first_pass: int = 0
    skip_batches: int = 0
    num_passes: Optional[int] = None
    batches_per_pass: Optional[int] = None

    def __post_init__(self):
        for name in ("first_pass", "skip_batches"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise UserInputError(f"EpochStream.{name} must be an integer >= 0, got "
                                     f"{value!r}.")
        limit = self.batches_per_pass
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)
                                  or limit <= self.skip_batches):
            raise UserInputError(f"EpochStream.batches_per_pass must be an integer above "
                                 f"skip_batches ({self.skip_batches}), got {limit!r}.")
        if self.num_passes is not None and self.num_passes <= self.first_pass:
            raise UserInputError(f"EpochStream.num_passes ({self.num_passes}) must be more "
                                 f"than first_pass ({self.first_pass}).")


_STREAM_GRAPH_SEED = 20_241_122


def _pass_seed(seed: int, pass_index, salt: int):
    """A per-pass int64 seed: a pure function of (seed, pass, salt), different for each."""
    pass_index = tf.cast(pass_index, tf.int64)
    mixed = tf.random.experimental.stateless_split(
        tf.stack([tf.cast(seed, tf.int64), pass_index * 4 + salt]), num=1)[0]
    # Shuffle seeds must be non-negative; keep 62 bits.
    return tf.bitwise.bitwise_and(mixed[0] ^ mixed[1], tf.constant(2**62 - 1, tf.int64))


def _per_op_determinism(deterministic: bool, *, parallel, stream: bool) -> Optional[bool]:
    # Per-op determinism only means something for parallel ops (TF warns otherwise). In a
    # stream the pipeline-wide option is True (for the stages before the resume point), so
    # the stages after it say False explicitly when order does not matter.
    if parallel is None:
        return None
    if stream:
        return bool(deterministic)
    return deterministic or None


@dataclasses.dataclass(frozen=True)
class _Plan:
    """Everything `optimize` decided from its arguments, so each stage reads only this."""

    batch: Optional[int]  # None: no batch stage
    drop: bool
    names: tuple
    custom: Optional[Callable]
    augment_on: str
    seed: Optional[int]
    parallel: Optional[int]
    det: Optional[bool]
    image_dtype: Optional[str]
    sequential: bool
    random_decode: Optional[Callable] = None
    pad: bool = False
    by_length: bool = False
    culprit: str = "the dataset's images"  # what made the examples, for messages

    @property
    def batch_det(self) -> Optional[bool]:
        """Per-op determinism of the batch stage and the maps after it: in order whenever
        they run in parallel, whatever `deterministic` says. Out of order, the last partial
        batch could come before a full one (Keras' loaders and users' code read the first
        batch as full) and a batch met the augmentation seed of another position. Batches
        cost about the same, so keeping their order costs little (docs/performance.md);
        `deterministic` still frees the per-example stages before the batch."""
        if self.parallel is None or self.batch is None:
            return self.det
        return True


def _decode(dataset, plan: _Plan, *, map_fn, ignore_decode_errors: bool, det=None):
    """Stage 1: the expensive, deterministic per-example work as a parallel map."""
    if map_fn is None:
        return dataset
    dataset = dataset.map(map_fn, num_parallel_calls=plan.parallel,
                          deterministic=plan.det if det is None else det)
    if ignore_decode_errors:
        # Logged by tf.data (one line each): these slipped past the up-front file check.
        dataset = dataset.ignore_errors(log_warning=True)
        if not plan.sequential:
            # ignore_errors is a serial stage that also blocks map+batch fusion; a
            # prefetch behind it keeps the parallel decode busy (measured: JPEG folder
            # 2,900 -> 4,560 img/s on 2 cores, the same as with no ignore_errors).
            dataset = dataset.prefetch(AUTOTUNE)
    return dataset


def _augment_examples(dataset, plan: _Plan, seeds):
    """Stage 4a: a callable augmentation per example, seeded by the `seeds` dataset."""

    def per_example(element, rnd):
        features, label, has_label = _split(element)
        features = _to_float(features, plan.image_dtype)
        seed_pair = tf.stack([rnd, tf.constant(0, tf.int64)])
        features, label = plan.custom(features, label, seed_pair)
        return _join(features, label, has_label)

    return tf.data.Dataset.zip((dataset, seeds)).map(
        per_example, num_parallel_calls=plan.parallel, deterministic=plan.det)


def _batches_by_length(spec, plan: _Plan) -> bool:
    """Whether `batch_by_length` applies to examples of `spec`: texts (a string scalar), and
    sequences (a first dimension of unknown length) that are batched padded
    (`padded_batch`); ragged batches (e.g. TFRecord `kind: var` features) stay as they are."""
    if not plan.by_length:
        return False
    features = spec[0] if isinstance(spec, tuple) and len(spec) == 2 else spec
    first = tf.nest.flatten(features)[0]
    if not isinstance(first, tf.TensorSpec):
        return False
    if first.dtype == tf.string and first.shape.rank == 0:
        return True
    return plan.pad and first.shape.rank is not None and first.shape.rank >= 1 \
        and first.shape[0] is None


def _image_spec(spec):
    """The spec of the image in an example's spec (features, or features["image"]), or None."""
    features = spec[0] if isinstance(spec, tuple) and len(spec) == 2 else spec
    if isinstance(features, dict):
        features = features.get("image")
    return features if isinstance(features, tf.TensorSpec) else None


def _refuse_images_of_unknown_size(spec, plan: _Plan) -> None:
    """Refuses images ``[H, W, C]`` whose height or width is unknown before the batch stage.

    Such images (a decode without a resize: photos of different sizes) were batched as
    ragged tensors without a word, which no image model takes, and the named augmentations
    failed on them deep inside TensorFlow ("Index 1 is not uniform"), issue #29.
    `padded_batch=True` is the one way asked for explicitly.
    """
    image = _image_spec(spec)
    if plan.pad or image is None or image.shape.rank != 3 or \
            image.shape[:2].is_fully_defined():
        return
    shape = tuple(image.shape.as_list())
    raise UserInputError(
        f"{plan.culprit} have shape {shape}: their height and width are known only image by "
        "image (e.g. photos of different sizes), so they cannot be stacked into batches of "
        f"{plan.batch}{' nor augmented' if plan.names else ''}; resize them to one size in "
        "map_fn (e.g. tf.image.resize(image, (224, 224)), or tf.ensure_shape(image, "
        "(224, 224, 3)) when they all have that size), or pass padded_batch=True to pad "
        "each batch with zeros to its largest image.")


def _batch(dataset, plan: _Plan, seeds=None):
    """Stage 5: batch (drop_remainder under a strategy: equal shapes on every replica)."""
    if plan.batch is None:  # batch_size=None: examples one by one
        return dataset
    if seeds is not None and _batches_by_length(dataset.element_spec, plan):
        from tfaccel.data import length_batches

        return length_batches.sorted_window_batches(
            dataset, batch_size=plan.batch, drop_remainder=plan.drop, seeds=seeds,
            deterministic=plan.det)
    _refuse_images_of_unknown_size(dataset.element_spec, plan)
    if _has_unknown_dims(dataset.element_spec):
        if plan.pad:
            # Zero-padded to the longest example of each batch (Keras' audio loader).
            return dataset.padded_batch(plan.batch, drop_remainder=plan.drop)
        # Variable-length features (e.g. TFRecord `kind: var`) batch as RaggedTensors.
        return dataset.ragged_batch(plan.batch, drop_remainder=plan.drop)
    if _only_scalars(dataset.element_spec):
        # Examples of scalars (a text and its label, a table row) are cheap to stack: a
        # parallel batch only adds its overhead (measured: 15,300 -> 17,500 texts/s on 2
        # cores, benchmarks/bench_data_text.py's files).
        return dataset.batch(plan.batch, drop_remainder=plan.drop)
    return dataset.batch(plan.batch, drop_remainder=plan.drop,
                         num_parallel_calls=plan.parallel, deterministic=plan.batch_det)


def _finish_batches(dataset, plan: _Plan, seeds):
    """Stage 4b: named (vectorised) or per-batch augmentations, then the cast to float."""
    if plan.names or (plan.custom is not None and plan.augment_on == "batch"):

        def per_batch(element, rnd):
            features, label, has_label = _split(element)
            seed_pair = tf.stack([rnd, tf.constant(1, tf.int64)])
            if plan.names:
                # Geometric augmentations run on the uint8 batch, before the cast to float.
                features = _map_images(features, lambda x: augment_lib.apply_to_batch(
                    x, plan.names, seed_pair,
                    dtype=tf.as_dtype(plan.image_dtype) if plan.image_dtype else x.dtype))
                features = _to_float(features, plan.image_dtype)
            else:
                features = _to_float(features, plan.image_dtype)
                features, label = plan.custom(features, label, seed_pair)
            return _join(features, label, has_label)

        return tf.data.Dataset.zip((dataset, seeds)).map(
            per_batch, num_parallel_calls=plan.parallel, deterministic=plan.batch_det)
    if plan.image_dtype and plan.custom is None:
        return _cast_images(dataset, plan)
    return dataset


def _cast_images(dataset, plan: _Plan):
    """The cast of uint8 images to `plan.image_dtype`, alone in a map (if there are any)."""
    if not _has_uint8(dataset.element_spec):
        return dataset

    def cast_only(*element):
        features, label, has_label = _split(element if len(element) > 1 else element[0])
        return _join(_to_float(features, plan.image_dtype), label, has_label)

    return dataset.map(cast_only, num_parallel_calls=plan.parallel,
                       deterministic=plan.batch_det)


def _uint8_on_the_wire(plan: _Plan) -> bool:
    """Whether batches can cross the tf.data service as uint8 and be cast on arrival.

    Exactly the same values as casting on the service's workers when the augmentations only
    move pixels (they run on uint8 in-process too, `augment.apply_to_batch`); photometric
    ones and callables compute in float, so their batches travel as they are.
    """
    geometric_only = all(n in augment_lib.PIXEL_MOVING for n in plan.names)
    return bool(plan.image_dtype) and plan.custom is None and geometric_only


def _decode_at_random(dataset, plan: _Plan, seeds):
    """Stage 3b: the per-example random decode (e.g. a random crop of cached file bytes)."""

    def per_example(element, rnd):
        features, label, has_label = _split(element)
        features = plan.random_decode(features, tf.stack([rnd, tf.constant(2, tf.int64)]))
        return _join(features, label, has_label)

    return tf.data.Dataset.zip((dataset, seeds)).map(
        per_example, num_parallel_calls=plan.parallel, deterministic=plan.det)


def _tail(dataset, plan: _Plan, *, example_seeds, batch_seeds):
    """Stages 3b-5: random decode, augment (per example or per batch) and batch."""
    if plan.random_decode is not None:
        dataset = _decode_at_random(dataset, plan, example_seeds)
    if plan.custom is not None and plan.augment_on == "example":
        dataset = _augment_examples(dataset, plan, example_seeds)
    return _finish_batches(_batch(dataset, plan, batch_seeds), plan, batch_seeds)


# optimize's arguments each builder decides for itself (its decode, its shuffle of cheap
# references, its padding, the fingerprint of its cache): a builder takes one of these from
# its caller only where its own signature names it (from_python's cache_fingerprint).
SET_BY_BUILDERS = frozenset({"map_fn", "source_shuffle", "padded_batch",
                             "cache_fingerprint"})


# optimize's arguments that belong to training batches only: random augmentation, the
# resumable stream, the tf.data service and the dropped last batch. A validation subset
# built beside a training one (a builder's subset="both", fit's validation_split) leaves
# them out, as a recipe's validation split does: validation measures the same images
# every epoch, every one of them.
TRAINING_ONLY = frozenset({"augment", "augment_on", "stream", "service", "drop_remainder"})


def validation_options(options: Mapping) -> Mapping:
    """THE options of a validation subset built beside a training one: `options` without
    `TRAINING_ONLY`, and the last partial batch kept (Keras evaluates uneven batches).

    A `TailOptions` gives a `TailOptions` (those fields unset), a builder's keywords a dict.
    """
    if isinstance(options, TailOptions):
        return dataclasses.replace(options.without(TRAINING_ONLY), drop_remainder=False)
    return {**{k: v for k, v in options.items() if k not in TRAINING_ONLY},
            "drop_remainder": False}


def _parameters(function: Callable) -> list:
    """`function`'s named parameters, in order (no ``*args``/``**kwargs``)."""
    import inspect

    return [name for name, p in inspect.signature(function).parameters.items()
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def public_options(builder: Callable, *, refused: Mapping[str, str] = {}) -> list:
    """THE keywords a user may give `builder`: its own, then `optimize`'s that apply.

    Internals stay hidden: `optimize`'s private-prefixed arguments (``_random_decode``,
    ``_ignore_decode_errors``: what a builder decodes at random or skips) never, and
    `SET_BY_BUILDERS` only for `optimize` itself or a builder that names one; `refused`
    are the builder's own "means nothing here" options.
    """
    own = _parameters(builder)
    tail = [] if builder is optimize else sorted(
        set(_parameters(optimize)) - {"dataset"} - SET_BY_BUILDERS - set(own) - set(refused))
    return [name for name in own + tail if not name.startswith("_")]


def check_builder_options(options: Mapping, *, builder: Callable,
                          refused: Mapping[str, str] = {}) -> None:
    """Refuses a keyword `builder` does not take from users, naming the nearest public one.

    `options` are the keywords `builder` (a `from_*` builder, or `optimize`) received
    beyond its own named ones: each must be a public `optimize` option (`public_options`),
    else the message names the builder, the argument, the nearest public keyword and the
    public keywords only. Without it, an argument a builder does not know reaches
    `optimize` and fails there, naming the wrong function; an internal one would be used.

    Args:
        options: The keywords to check.
        builder: The function that received them.
        refused: ``{option: why}``: `optimize` options that mean nothing to `builder`.

    Raises:
        UserInputError: An unknown or internal keyword, or a refused one with its reason;
            an argument of the Keras/tf.data function `builder` replaces with what tfaccel
            does instead (`tfaccel.config.keras_names.KERAS_ARGUMENT_HINTS`).
    """
    from tfaccel.config.keras_names import KERAS_ARGUMENT_HINTS
    from tfaccel.errors import did_you_mean

    public = public_options(builder, refused=refused)
    replaced, hints = KERAS_ARGUMENT_HINTS.get(builder.__name__, ("", {}))
    for name in options:
        if name in hints:  # the replaced function's own name: what tfaccel does instead
            raise UserInputError(f"{builder.__name__}() does not take {replaced}'s {name}="
                                 f"{options[name]!r}: {hints[name]}.")
        if name in refused:
            raise UserInputError(f"{builder.__name__}() does not take {name}="
                                 f"{options[name]!r}: {refused[name]}.")
        if name not in public or name in _parameters(builder):
            raise UserInputError(
                f"{builder.__name__}() got an unknown argument {name!r}"
                f"{did_you_mean(name, public)}; it takes {', '.join(public)}.")


def optimize(dataset: tf.data.Dataset, *, batch_size: Optional[int],
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
             _ignore_decode_errors: bool = False,
             sequential: bool = False,
             stream: Optional[EpochStream] = None,
             service=None,
             cache_fingerprint: Optional[dict] = None,
             _random_decode: Optional[Callable] = None,
             padded_batch: bool = False,
             batch_by_length: bool = False, **unknown) -> tf.data.Dataset:
    """Applies the standard tail to a dataset of examples and returns batches for `fit`.

    The order is fixed because each step only stays correct and fast in this place:

    1. ``map_fn`` (read/decode/resize) as a parallel map: the expensive, deterministic work,
       spread over all cores.
    2. ``cache``: right after the deterministic work, so later epochs skip it, and *before*
       anything random, so random choices are not frozen into the cache.
    3. ``shuffle`` (seeded, reshuffled each epoch): after the cache, or every epoch would read
       the cached first-epoch order.
    4. random augmentation (after a `_random_decode`, if any: a random crop decoded from the
       cached file bytes): after cache and shuffle so it differs every epoch; named
       augmentations run vectorised on whole batches (one op per batch, not per image),
       a callable runs per example in a parallel map (``augment_on="example"``) or per batch.
       Its seeds come from ``Dataset.random(rerandomize_each_iteration=True)``: reproducible
       for a given `seed`, yet different in each epoch.
    5. ``batch`` (drop_remainder under a strategy, so every replica gets the same shape).
    6. ``prefetch(AUTOTUNE)`` last, so the next batch is prepared while the model trains.

    With `service` (a `tfaccel.data.service.ServiceTarget`) stages 1-5 run on the tf.data
    service's workers (the expensive decode and augmentation, and the batching, so whole
    batches travel) and only the prefetch runs here.

    With `stream` (an `EpochStream`) the result is instead a stream of whole passes in
    which pass p's shuffle and augmentation seeds are pure functions of (`seed`, p), and
    every stage up to the last shuffle keeps a fixed order, so that a pass can be rebuilt
    in another process and resumed at any batch (see `EpochStream`).

    Args:
        dataset: A dataset of examples: ``(features, label)`` pairs or features alone. With
            `stream` it must yield the same order on every iteration (no reshuffling of
            its own).
        batch_size: The GLOBAL batch size (all replicas together). None: no batch stage,
            the dataset yields single examples (still cast and prefetched), as Keras'
            loaders do with ``batch_size=None``; `augment` then takes only a callable
            with ``augment_on="example"``.
        map_fn: Per-example decode/resize function, run as a parallel map before the cache.
            Images it makes (the features, or their "image") must have a known height and
            width (one size: resize them) unless `padded_batch`; else a `UserInputError`
            names `map_fn` and the shape.
        cache: None, ``"memory"``, or a file path (or directory) for an on-disk cache. A
            file cache is fingerprinted and locked (`tfaccel.data.cache_files`): rebuilt,
            with a message, when `cache_fingerprint` differs from the one it was built with
            or a killed run left it half written; refused while another live process
            writes it.
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
        _ignore_decode_errors: Internal: skip examples whose `map_fn` fails (the image
            folder source after its up-front file check, as a last safety net).
        sequential: Build the truly sequential pipeline (the benchmarks' baseline).
        stream: An `EpochStream`: build a resumable stream of passes (see above).
        service: A `tfaccel.data.service.ServiceTarget`: run stages 1-5 on a tf.data
            service (see above). In ``parallel_epochs`` mode a stream's seeds are salted
            per worker, so workers make different passes instead of the same batches; the
            order in which batches arrive is never fixed.
        cache_fingerprint: A JSON-able dict of everything the cached examples depend on
            (the builders pass their files and decode settings). None: the input cannot
            be looked into; said once per cache, and the cache is reused as it is.
        _random_decode: Internal: ``fn(features, seed) -> features``, per-example work
            that is random and so must come after the cache and the shuffle, before
            augmentation (a random crop decoded from the cached bytes of an image file,
            `data.crops`); run in a parallel map, seeded like the augmentations (a
            shape-[2] int64 seed).
        padded_batch: Batch examples whose shapes are not fully known with
            `Dataset.padded_batch` (zeros up to the longest example of each batch, as
            Keras' audio loader) instead of as RaggedTensors.
        batch_by_length: For texts (string features) and sequences (a first dimension of
            unknown length): batch examples of similar length together, each batch padded
            to its own longest (`tfaccel.data.length_batches`: length-sorted windows after
            the shuffle, as many batches per pass as plain batching, seeded). Other
            examples are batched as usual.
        **unknown: Refused, naming the nearest keyword (`check_builder_options`).

    Returns:
        A `tf.data.Dataset` of batches.

    Raises:
        UserInputError: An argument has a bad value, or is not one of these.
    """
    check_builder_options(unknown, builder=optimize)
    if batch_size is None:
        _check_unbatched(augment=augment, augment_on=augment_on, stream=stream,
                         input_context=input_context)
        batch, drop = None, False
    else:
        batch, drop = resolve_batch(batch_size, drop_remainder=drop_remainder,
                                    input_context=input_context)
    if augment_on not in ("batch", "example"):
        raise UserInputError(f"augment_on must be 'batch' or 'example', got {augment_on!r}.")
    if not isinstance(shuffle_buffer, int) or shuffle_buffer < 0:
        raise UserInputError(f"shuffle_buffer must be an integer >= 0, got {shuffle_buffer!r}.")
    if stream is not None and not isinstance(stream, EpochStream):
        raise UserInputError(f"stream must be a tfaccel.data.EpochStream, got {stream!r}.")
    if stream is not None and source_shuffle and cache:
        # A cache inside a pass would be rebuilt every pass; the source's own reference
        # shuffle is the one that cannot sit before a cache.
        raise UserInputError("source_shuffle and cache cannot be combined in a stream; "
                             "shuffle after the cache with shuffle_buffer instead.")
    if sequential and stream is not None:
        raise UserInputError("sequential=True (the benchmark baseline) takes no stream.")
    if cache_files.is_file_cache(cache):
        # Before anything reads it: a stale or half-written cache is rebuilt.
        cache = _prepare_file_cache(cache, cache_fingerprint)
    if service is not None:
        _check_service(service, sequential=sequential, stream=stream, seed=seed,
                       shuffle_buffer=shuffle_buffer, augment=augment)
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
    plan = _Plan(batch=batch, drop=drop, names=names, custom=custom, augment_on=augment_on,
                 seed=seed, parallel=num_parallel_calls,
                 det=_per_op_determinism(deterministic, parallel=num_parallel_calls,
                                         stream=stream is not None),
                 image_dtype=image_dtype, sequential=sequential, random_decode=_random_decode,
                 pad=padded_batch, by_length=batch_by_length,
                 **({} if map_fn is None else
                    {"culprit": f"the images of optimize(map_fn="
                                f"{getattr(map_fn, '__name__', repr(map_fn))})"}))

    cast_on_arrival = None
    if service is not None and _uint8_on_the_wire(plan):
        # Images cross the network as uint8, as they cross the in-process pipeline, and
        # are cast here, on arrival (float32 batches are 4x the bytes to serialise).
        cast_on_arrival = plan
        plan = dataclasses.replace(plan, image_dtype=None)
    if input_context is not None and input_context.num_input_pipelines > 1:
        # Each input pipeline (worker) keeps a disjoint share, decided before any decoding.
        dataset = dataset.shard(input_context.num_input_pipelines,
                                input_context.input_pipeline_id)
    if stream is not None:
        dataset = _stream_of_passes(dataset, plan, stream=stream, map_fn=map_fn, cache=cache,
                                    shuffle_buffer=shuffle_buffer,
                                    source_shuffle=source_shuffle,
                                    ignore_decode_errors=_ignore_decode_errors,
                                    salt_per_worker=service is not None
                                    and service.salts_per_worker)
        # Everything up to the last shuffle keeps its order (set per op above and here for
        # stages inside a source, e.g. TFDS's decode): the resume point depends on it.
        options.deterministic = True
    else:
        if source_shuffle:
            dataset = dataset.shuffle(source_shuffle, seed=seed, reshuffle_each_iteration=True)
        dataset = _cache(_decode(dataset, plan, map_fn=map_fn,
                                 ignore_decode_errors=_ignore_decode_errors), cache)
        if shuffle_buffer:
            dataset = dataset.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
        seeds = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True)
        dataset = _tail(dataset, plan, example_seeds=seeds, batch_seeds=seeds)
    if service is not None:
        from tfaccel.data import service as service_lib

        # The options travel with the graph, so the workers run with them; the batches
        # then arrive here in the order the workers finish them.
        dataset = service_lib.distribute(dataset.with_options(options), service)
        options = tf.data.Options()
        if cast_on_arrival is not None:
            dataset = _cast_images(dataset, cast_on_arrival)
    if not sequential:
        dataset = dataset.prefetch(AUTOTUNE)
    return dataset.with_options(options)


def _check_unbatched(*, augment, augment_on: str, stream, input_context) -> None:
    """Refuses what needs batches when ``batch_size=None`` (the stages that count them)."""
    if augment and not (callable(augment) and augment_on == "example"):
        # Named augmentations draw one set of random numbers per batch (vectorised).
        raise UserInputError(
            f"batch_size=None (no batches) cannot run augment={augment!r} with "
            f"augment_on={augment_on!r}, which works on whole batches; pass a callable with "
            "augment_on='example', or a batch_size.")
    if stream is not None:
        raise UserInputError(f"batch_size=None cannot make a stream ({stream!r}): a "
                             "stream resumes at a batch; pass a batch_size.")
    if input_context is not None:
        raise UserInputError("batch_size=None cannot split a global batch among replicas "
                             f"(input_context={input_context!r}); pass a batch_size.")


def _check_service(service, *, sequential: bool, stream, seed, shuffle_buffer, augment):
    from tfaccel.data.service import ServiceTarget

    if not isinstance(service, ServiceTarget):
        raise UserInputError(f"service must be a tfaccel.data.ServiceTarget, got {service!r}.")
    if sequential:
        raise UserInputError("sequential=True (the benchmark baseline) takes no service.")
    if (service.processing_mode == "parallel_epochs" and stream is None and seed is not None
            and (shuffle_buffer or augment)):
        # Every worker runs the same graph: with one fixed seed they all make the same
        # batches, and the reader gets each of them once per worker.
        raise UserInputError(
            f"processing_mode 'parallel_epochs' with seed={seed!r} would make every service "
            "worker produce the same shuffled/augmented batches; pass seed=None (each "
            "worker draws its own), use a stream (EpochStream: salted per worker), or use "
            "'distributed_epoch'.")


def _in_order_before_the_skip(plan: _Plan) -> _Plan:
    """The plan of a stream whose resumed pass is rebuilt whole and its first batches
    skipped (batches by length): every stage before the skip keeps its order. A decode
    handing out whichever example was ready first changed which examples met in a length
    window (ties in length go by arrival), and the resumed pass repeated some examples and
    missed others."""
    return plan if plan.parallel is None else dataclasses.replace(plan, det=True)


def _stream_of_passes(dataset, plan: _Plan, *, stream: EpochStream, map_fn, cache,
                      shuffle_buffer: int, source_shuffle: int, ignore_decode_errors: bool,
                      salt_per_worker: bool = False):
    """The resumable stream: a fixed-order base, then per pass: shuffle, skip, tail."""
    seed = plan.seed
    if seed is None:
        # No seed asked for: still one fixed seed for this pipeline's passes.
        seed = int(np.random.SeedSequence().generate_state(1)[0])
    skip_examples = stream.skip_batches * plan.batch
    base_seed = seed
    # A resume point is skipped before the tail (whole examples) unless batches are formed
    # by length, decided on the decoded examples (the cached bytes of a random crop look
    # like texts here: skipping after batching is exact either way, only slower).
    decoded = dataset if map_fn is None or not plan.by_length else dataset.map(map_fn)
    after_batching = _batches_by_length(decoded.element_spec, plan)
    if after_batching:
        plan = _in_order_before_the_skip(plan)
    if not source_shuffle:
        # Decode and cache once, in a fixed order: the order every pass shuffles from.
        dataset = _cache(_decode(dataset, plan, map_fn=map_fn,
                                 ignore_decode_errors=ignore_decode_errors, det=True), cache)

    @tf.autograph.experimental.do_not_convert
    def one_pass(pass_index):
        # Plain TensorFlow: autograph's conversion of this function and of every pipeline
        # function it calls cost about 0.5 s of CPU at each start (measured on the PNG
        # folder of benchmarks/bench_end_to_end.py). The maps made inside it are converted
        # as usual (a user's augmentation may branch on tensors in Python).
        from tensorflow.python.autograph.core import ag_ctx

        with ag_ctx.ControlStatusCtx(status=ag_ctx.Status.UNSPECIFIED):
            return _one_pass(pass_index)

    def _one_pass(pass_index):
        # The shuffle seeds below are tensors (they depend on the pass). TF combines an op
        # seed with the graph-level seed and fails on a tensor op seed when the graph seed
        # is 0 (`tf.random.set_seed(0)`, the default recipe seed); this sets the seed of this
        # function's own graph only (we are tracing), so the user's global seed is untouched.
        tf.compat.v1.set_random_seed(_STREAM_GRAPH_SEED)
        seed = base_seed
        if salt_per_worker:
            # tf.data service, parallel_epochs: every worker runs this graph; a salt drawn
            # there, when the pass starts, gives each worker passes of its own instead of
            # the same batches (such passes are not reproducible).
            from tfaccel.data import service as service_lib

            seed = tf.bitwise.bitwise_xor(tf.constant(base_seed, tf.int64),
                                          service_lib.worker_salt())
        skip = tf.where(tf.equal(pass_index, stream.first_pass),
                        tf.constant(skip_examples, tf.int64), tf.constant(0, tf.int64))
        skip_batches = skip // plan.batch
        if after_batching:
            # Batches by length are not consecutive runs of the shuffled examples: the pass
            # is rebuilt whole and its first batches skipped (exact, at the cost of making
            # them again).
            skip = tf.constant(0, tf.int64)
        examples = dataset
        if source_shuffle:
            # Shuffle cheap references, skip what was trained on, then decode the rest.
            examples = examples.shuffle(source_shuffle, seed=_pass_seed(seed, pass_index, 0),
                                        reshuffle_each_iteration=False).skip(skip)
            examples = _decode(examples, plan, map_fn=map_fn,
                               ignore_decode_errors=ignore_decode_errors)
            if shuffle_buffer:
                examples = examples.shuffle(shuffle_buffer,
                                            seed=_pass_seed(seed, pass_index, 1),
                                            reshuffle_each_iteration=False)
        else:
            if shuffle_buffer:
                examples = examples.shuffle(shuffle_buffer,
                                            seed=_pass_seed(seed, pass_index, 1),
                                            reshuffle_each_iteration=False)
            examples = examples.skip(skip)
        # Augmentation seeds: (pass seed, position in the pass), the same after a resume.
        salt = _pass_seed(seed, pass_index, 2)
        example_seeds = tf.data.Dataset.range(skip, 2**62).map(lambda i: salt ^ i)
        batch_seeds = tf.data.Dataset.range(skip // plan.batch, 2**62).map(
            lambda i: salt ^ (i + 2**40))
        batches = _tail(examples, plan, example_seeds=example_seeds, batch_seeds=batch_seeds)
        if after_batching:
            batches = batches.skip(skip_batches)
        if stream.batches_per_pass is not None:
            # A filter, not take(): the pass is still read to its end, so a cache before
            # the stream is completed (a cache left unfinished is discarded and refilled).
            limit = tf.constant(stream.batches_per_pass, tf.int64)
            batches = batches.enumerate(start=skip_batches).filter(
                lambda index, _: index < limit).map(lambda _, batch: batch)
        return batches

    passes = tf.data.Dataset.range(stream.first_pass,
                                   stream.num_passes if stream.num_passes is not None
                                   else 2**62)
    return passes.flat_map(one_pass)
