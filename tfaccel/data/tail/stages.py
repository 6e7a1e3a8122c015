"""The tail's stages, each a function of the dataset and the `Plan`: decode, cache, random decode, augment, batch."""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Callable, Optional

import tensorflow as tf

from tfaccel.data import augment as augment_lib
from tfaccel.data import cache_files, length_batches
from tfaccel.data.tail.spec import SourceStages
from tfaccel.errors import UserInputError

logger = logging.getLogger(__name__)

AUTOTUNE = tf.data.AUTOTUNE


_UNFINGERPRINTED: set = set()


def prepare_file_cache(cache, fingerprint: Optional[dict]) -> str:
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


def cache_examples(dataset: tf.data.Dataset, cache) -> tf.data.Dataset:
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



def per_op_determinism(deterministic: bool, *, parallel, stream: bool) -> Optional[bool]:
    # Per-op determinism only means something for parallel ops (TF warns otherwise). In a
    # stream the pipeline-wide option is True (for the stages before the resume point), so
    # the stages after it say False explicitly when order does not matter.
    if parallel is None:
        return None
    if stream:
        return bool(deterministic)
    return deterministic or None



@dataclasses.dataclass(frozen=True)
class Plan:
    """Everything the tail decided from its two inputs (`TailOptions`, `SourceStages`), so
    each stage reads only this."""

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
    batch_map: Optional[Callable] = None  # SourceStages.batch_map_fn

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



def decode(dataset, plan: Plan, source: SourceStages, *, det=None):
    """Stage 1: the expensive, deterministic per-example work as a parallel map."""
    if source.map_fn is None:
        return dataset
    dataset = dataset.map(source.map_fn, num_parallel_calls=plan.parallel,
                          deterministic=plan.det if det is None else det)
    if source.ignore_decode_errors:
        # Logged by tf.data (one line each): these slipped past the up-front file check.
        dataset = dataset.ignore_errors(log_warning=True)
        if not plan.sequential:
            # ignore_errors is a serial stage that also blocks map+batch fusion; a
            # prefetch behind it keeps the parallel decode busy (measured: JPEG folder
            # 2,900 -> 4,560 img/s on 2 cores, the same as with no ignore_errors).
            dataset = dataset.prefetch(AUTOTUNE)
    return dataset


def _augment_examples(dataset, plan: Plan, seeds):
    """Stage 4a: a callable augmentation per example, seeded by the `seeds` dataset."""

    def per_example(element, rnd):
        features, label, has_label = _split(element)
        features = _to_float(features, plan.image_dtype)
        seed_pair = tf.stack([rnd, tf.constant(0, tf.int64)])
        features, label = plan.custom(features, label, seed_pair)
        return _join(features, label, has_label)

    return tf.data.Dataset.zip((dataset, seeds)).map(
        per_example, num_parallel_calls=plan.parallel, deterministic=plan.det)


def batches_by_length(spec, plan: Plan) -> bool:
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


def _refuse_images_of_unknown_size(spec, plan: Plan) -> None:
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


def _batch(dataset, plan: Plan, seeds=None):
    """Stage 5: batch (drop_remainder under a strategy: equal shapes on every replica)."""
    if plan.batch is None:  # batch_size=None: examples one by one
        return dataset
    if seeds is not None and batches_by_length(dataset.element_spec, plan):
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
    if plan.batch_map is not None:
        # The source's decode map comes right before (`SourceStages.batch_map_fn`): a plain
        # batch lets tf.data fuse the two (map_and_batch_fusion) into one parallel stage
        # that decodes into the batch, as in Keras' loader; with the batch resize, 1.04x-
        # 1.07x less CPU than Keras on 256 -> 160 px JPEGs (a parallel batch: 0.98x).
        return dataset.batch(plan.batch, drop_remainder=plan.drop)
    if _only_scalars(dataset.element_spec):
        # Examples of scalars (a text and its label, a table row) are cheap to stack: a
        # parallel batch only adds its overhead (measured: 15,300 -> 17,500 texts/s on 2
        # cores, benchmarks/bench_data_text.py's files).
        return dataset.batch(plan.batch, drop_remainder=plan.drop)
    return dataset.batch(plan.batch, drop_remainder=plan.drop,
                         num_parallel_calls=plan.parallel, deterministic=plan.batch_det)


def _finish_batches(dataset, plan: Plan, seeds):
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
        return cast_images(dataset, plan)
    return dataset


def cast_images(dataset, plan: Plan):
    """The cast of uint8 images to `plan.image_dtype`, alone in a map (if there are any)."""
    if not _has_uint8(dataset.element_spec):
        return dataset

    def cast_only(*element):
        features, label, has_label = _split(element if len(element) > 1 else element[0])
        return _join(_to_float(features, plan.image_dtype), label, has_label)

    return dataset.map(cast_only, num_parallel_calls=plan.parallel,
                       deterministic=plan.batch_det)


def uint8_on_the_wire(plan: Plan) -> bool:
    """Whether batches can cross the tf.data service as uint8 and be cast on arrival.

    Exactly the same values as casting on the service's workers when the augmentations only
    move pixels (they run on uint8 in-process too, `augment.apply_to_batch`); photometric
    ones and callables compute in float, so their batches travel as they are.
    """
    geometric_only = all(n in augment_lib.PIXEL_MOVING for n in plan.names)
    return bool(plan.image_dtype) and plan.custom is None and geometric_only


def _decode_at_random(dataset, plan: Plan, seeds):
    """Stage 3b: the per-example random decode (e.g. a random crop of cached file bytes)."""

    def per_example(element, rnd):
        features, label, has_label = _split(element)
        features = plan.random_decode(features, tf.stack([rnd, tf.constant(2, tf.int64)]))
        return _join(features, label, has_label)

    return tf.data.Dataset.zip((dataset, seeds)).map(
        per_example, num_parallel_calls=plan.parallel, deterministic=plan.det)


def after_shuffle(dataset, plan: Plan, *, example_seeds, batch_seeds):
    """Stages 3b-5: random decode, augment (per example or per batch) and batch."""
    if plan.random_decode is not None:
        dataset = _decode_at_random(dataset, plan, example_seeds)
    if plan.custom is not None and plan.augment_on == "example":
        dataset = _augment_examples(dataset, plan, example_seeds)
    return _finish_batches(_map_batches(_batch(dataset, plan, batch_seeds), plan), plan,
                           batch_seeds)


def _map_batches(dataset, plan: Plan):
    """Stage 5b: the source's `batch_map_fn` on each batch's images (e.g. a whole batch
    resized by one op: measured 163 vs about 225 µs an image for 256 -> 160 px alone)."""
    if plan.batch_map is None:
        return dataset

    def per_batch(*element):
        features, label, has_label = _split(element if len(element) > 1 else element[0])
        return _join(_map_images(features, plan.batch_map), label, has_label)

    return dataset.map(per_batch, num_parallel_calls=plan.parallel,
                       deterministic=plan.batch_det)

