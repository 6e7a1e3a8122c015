"""THE in-memory stage: arrays (NumPy or tensors, or dicts of them) checked and batched (from_arrays; a DataFrame of from_csv)."""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Optional

import numpy as np
import tensorflow as tf

from tfaccel.data import cache_files, finite_values, order, sharding, splits, tail
from tfaccel.data.tail.spec import UNSET
from tfaccel.errors import DataError, UserInputError
from tfaccel.reading import labels


def _length(x, name):
    lengths = {len(v) for v in tf.nest.flatten(x)}
    if len(lengths) != 1:
        raise DataError(f"{name} holds arrays of different lengths: {sorted(lengths)}.")
    return lengths.pop()


def _content_digest(elements) -> str:
    """A digest of the arrays' bytes, shapes and dtypes, in order (what a cache holds)."""
    digest = hashlib.blake2b(digest_size=16)
    for array in tf.nest.flatten(elements):
        digest.update(f"{array.dtype.str}{array.shape}".encode())
        digest.update(np.ascontiguousarray(array).data)
    return digest.hexdigest()


def from_arrays(x, y=None, batch_size: Optional[int] = None, *,
                shuffle_buffer: Optional[int] = None, seed: Optional[int] = None,
                validation_split: Optional[float] = None, task: Optional[str] = None,
                cache=None, augment=None, augment_on: str = "batch",
                drop_remainder: Optional[bool] = None, deterministic: bool = False,
                num_parallel_calls: int = tail.AUTOTUNE,
                private_threads: Optional[int] = None,
                ram_budget_bytes: Optional[int] = None, shard_policy: Optional[str] = "data",
                image_dtype: Optional[str] = "float32", input_context=None,
                sequential: bool = False, stream=None, service=None,
                batch_by_length: bool = False, **unknown):
    """Builds batches from in-memory arrays.

    Example::

        train = tfaccel.data.from_arrays(x_train, y_train, 128,
                                         augment=["flip", "crop"], seed=0)
        model.fit(train, epochs=5)

        train, val = tfaccel.data.from_arrays(x_train, y_train, 128, validation_split=0.1)
        model.fit(train, validation_data=val, epochs=5)

    `x`, `y` and `batch_size` come in `model.fit`'s order, positionally or by name; the
    rest is keyword-only.

    Args:
        x: An array, or a dict of arrays with the same first dimension.
        y: Labels with the same first dimension, or None for features only.
        batch_size: The GLOBAL batch size (required).
        shuffle_buffer: Shuffle buffer in examples, 0 for no shuffling (as
            ``data.shuffle_buffer``). None (default): every example, a full shuffle each
            epoch as ``model.fit(x, y)`` does. A smaller buffer first permutes the
            arrays once, seeded (`tfaccel.data.order`), so arrays sorted by label still
            give mixed batches after a cache.
        seed: Seed of that permutation, of shuffling and augmentation.
        validation_split: `fit`'s meaning: the last fraction of the arrays, taken before
            any shuffling, is held out (Keras' rule: the first
            ``floor(n * (1 - validation_split))`` examples train). The validation dataset
            keeps their order and every example (never shuffled, augmented, streamed or
            sent to a tf.data service; its last partial batch kept) and caches into its own files
            (``PREFIX_validation``) with a file `cache`.
        task: None (default): the labels go to `fit` as given, as ``fit(x, y)`` takes
            them. Else THE label rule of the recipes (`tfaccel.reading.labels`), on the
            training part's labels: ``auto``, ``classification``, ``binary``,
            ``multi_label`` or ``regression``. Classes are the sorted distinct values
            (1..K, -1/1, strings) as ids 0..K-1, never an empty class; float labels under a
            classification task are refused. The datasets then carry ``class_names`` (id
            order) and ``task``.
        cache: None, ``"memory"`` or a file prefix: `tfaccel.data.optimize`'s `cache`.
        augment: Augmentation names or a callable (`optimize`'s `augment`).
        augment_on: Where a callable `augment` runs (`optimize`'s `augment_on`).
        drop_remainder: None: True when more than one replica is in sync.
        deterministic: Fix the element order (`optimize`'s `deterministic`).
        num_parallel_calls: Parallelism of the maps (AUTOTUNE).
        private_threads: As `optimize`'s.
        ram_budget_bytes: As `optimize`'s.
        shard_policy: ``"data"`` (default): in-memory data has no files to split among
            workers; else as `optimize`'s.
        image_dtype: uint8 images are cast to this dtype after the cache (None: kept uint8).
        input_context: From ``distribute_datasets_from_function`` (`optimize`'s).
        sequential: The benchmarks' truly sequential pipeline (`optimize`'s).
        stream: An `EpochStream`: a resumable stream of passes (`optimize`'s).
        service: A `ServiceTarget`: run the tail on a tf.data service (`optimize`'s).
        batch_by_length: Batch texts and sequences of similar length together (`optimize`'s).
        **unknown: Refused, naming the nearest keyword (`tail.refuse_unknown`).

    Returns:
        A `tf.data.Dataset` of ``(x_batch, y_batch)`` (or ``x_batch``) ready for `fit`;
        with `validation_split` a ``(training, validation)`` tuple of them, as
        `from_image_folder`'s ``subset="both"``.

    Raises:
        DataError: The arrays are empty or their lengths differ, or a floating-point array
            holds NaN or an infinite value (the first is named with its example).
        UserInputError: An unknown keyword, no `batch_size`, or a `validation_split` that
            leaves no example on one side (Keras' check).
    """
    tail.refuse_unknown(unknown, builder=from_arrays)
    options = tail.TailOptions(
        seed=seed, cache=cache, augment=augment, augment_on=augment_on,
        drop_remainder=drop_remainder, deterministic=deterministic,
        num_parallel_calls=num_parallel_calls, private_threads=private_threads,
        ram_budget_bytes=ram_budget_bytes, shard_policy=shard_policy, image_dtype=image_dtype,
        input_context=input_context, sequential=sequential, stream=stream, service=service,
        batch_by_length=batch_by_length)
    return arrays_dataset(x, y, batch_size=batch_size, shuffle_buffer=shuffle_buffer,
                          validation_split=validation_split, task=task, options=options)


def arrays_dataset(x, y=None, *, batch_size: Optional[int], shuffle_buffer: Optional[int],
                   options: tail.TailOptions, validation_split: Optional[float] = None,
                   task: Optional[str] = None):
    """`from_arrays` with its tail options as one `TailOptions` (what a `Source` calls);
    an unset `shard_policy` is ``"data"``, as `from_arrays`' default."""
    if options.shard_policy is UNSET:
        options = dataclasses.replace(options, shard_policy="data")
    seed = options.resolved().seed
    if batch_size is None:
        raise UserInputError("from_arrays() needs batch_size (the third argument, or "
                             "batch_size=), as fit(x, y, batch_size) takes it.")
    n = _length(x, "x")
    if y is not None and _length(y, "y") != n:
        raise DataError(f"x has {n} examples but y has {_length(y, 'y')}.")
    if n == 0:
        raise DataError("x is empty: from_arrays needs at least one example.")
    x = tf.nest.map_structure(np.asarray, x)
    finite_values.check_array(x, name="x")
    if y is not None:
        finite_values.check_array(y, name="y")
    plan = None
    if task is not None:
        y, plan = _planned(y, task=task, validation_split=validation_split)
    elements = x if y is None else (x, np.asarray(y))
    if validation_split is not None:
        built = _with_validation(elements, validation_split, batch_size=batch_size,
                                 shuffle_buffer=shuffle_buffer, seed=seed, options=options)
    else:
        built = _batches(elements, batch_size=batch_size, shuffle_buffer=shuffle_buffer,
                         seed=seed, options=options)
    if plan is not None:
        for dataset in (built if isinstance(built, tuple) else (built,)):
            dataset.task = plan.task
            dataset.class_names = list(plan.class_names) if plan.class_names else None
    return built


def _planned(y, *, task: str, validation_split):
    """``(targets, LabelPlan)``: THE label rule on the training part of `y` (all of it, or
    fit's first ``floor(n * (1 - validation_split))``), every label encoded by it."""
    if y is None:
        raise UserInputError(f"task={task!r} needs labels: from_arrays(x, y, ...).")
    y = np.asarray(y)
    train = y
    if isinstance(validation_split, float) and 0 < validation_split < 1:
        train = y[:splits.fit_split_at(len(y), validation_split)]
    plan = labels.plan_labels(train, task=task, where="from_arrays' y")
    if y.ndim == 2 and y.shape[1] == 1 and plan.task != "multi_label":
        y = y[:, 0]
    return plan.encode(y), plan


def _with_validation(elements, validation_split, *, batch_size, shuffle_buffer, seed,
                     options: tail.TailOptions):
    """`from_arrays` with `fit`'s `validation_split`: ``(training, validation)``."""
    if isinstance(validation_split, bool) or not isinstance(validation_split, (int, float)) \
            or not 0 < validation_split < 1:
        raise UserInputError("validation_split must be a number between 0 and 1 (the "
                             f"held-out fraction), got {validation_split!r}.")
    n = len(tf.nest.flatten(elements)[0])
    # Keras' rule (data.splits) and wording (array_slicing.py train_validation_split).
    split_at = splits.fit_split_at(n, validation_split)
    if split_at in (0, n):
        raise UserInputError(
            f"Training data contains {n} samples, which is not sufficient to split it into "
            f"a validation and training set as specified by `validation_split="
            f"{validation_split}`. Either provide more data, or a different value for the "
            "`validation_split` argument.")
    train_cache, validation_cache = cache_files.split_prefixes(options.resolved().cache)
    train = _batches(tf.nest.map_structure(lambda a: a[:split_at], elements),
                     batch_size=batch_size, shuffle_buffer=shuffle_buffer, seed=seed,
                     options=dataclasses.replace(options, cache=train_cache))
    validation = _batches(tf.nest.map_structure(lambda a: a[split_at:], elements),
                          batch_size=batch_size, shuffle_buffer=0, seed=seed,
                          options=dataclasses.replace(tail.validation_options(options),
                                                      cache=validation_cache))
    return train, validation


def _batches(elements, *, batch_size, shuffle_buffer, seed, options: tail.TailOptions):
    """The checked `elements` (x, or (x, y)) through the standard tail."""
    n = len(tf.nest.flatten(elements)[0])
    resolved = options.resolved()
    if shuffle_buffer is None:
        shuffle_buffer = n
    if 0 < shuffle_buffer < n:
        # A buffer smaller than the data mixes only neighbours: permute once, seeded, so
        # arrays sorted by label still mix (a whole-data buffer needs no help).
        permuted = order.permutation(n, order.resolve_seed(
            seed, input_context=resolved.input_context))
        elements = tf.nest.map_structure(lambda a: a[permuted], elements)
    fingerprint = None
    if cache_files.is_file_cache(resolved.cache):
        fingerprint = {"builder": "from_arrays",
                       "examples": f"{n}: {_content_digest(elements)}"}
    dataset = tf.data.Dataset.from_tensor_slices(elements)
    if resolved.input_context is None and sharding.order_must_be_fixed():
        # DATA sharding (in-memory data has no files to split) needs a fixed order
        # (`sharding.fix_order_for_data_sharding`).
        options = dataclasses.replace(options, deterministic=True)
    return tail.build(dataset, batch_size=batch_size,
                      source=tail.SourceStages(shuffle_buffer=shuffle_buffer,
                                               cache_fingerprint=fingerprint),
                      options=options)
