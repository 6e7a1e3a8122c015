"""In-memory arrays (NumPy or tensors, or dicts of them) as a batched tf.data pipeline."""

from __future__ import annotations

import hashlib
import os
from typing import Optional

import numpy as np
import tensorflow as tf

from tfaccel.data import cache_files, order, pipeline, sharding, splits
from tfaccel.data.sources import base
from tfaccel.errors import DataError


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


def _check_finite(arrays, name: str) -> None:
    """Refuses NaN and infinite values in floating-point arrays, naming the first one."""
    if isinstance(arrays, dict):
        for key, value in arrays.items():
            _check_finite(value, f"{name}[{key!r}]")
        return
    found = base.first_non_finite(arrays)
    if found is None:
        return
    index, value, count = found
    position = f" (position {index[1:]})" if len(index) > 1 else ""
    raise DataError(
        f"{name} holds {value} at example {index[0]}{position}; {count} value(s) are not "
        f"finite. {base.NON_FINITE_REFUSED}. Fill or drop them first (e.g. numpy.nan_to_num, "
        "or a mask feature and a fill value).")


def from_arrays(x, y=None, *, batch_size: int, shuffle_buffer: Optional[int] = None,
                seed: Optional[int] = None, **options) -> tf.data.Dataset:
    """Builds batches from in-memory arrays.

    Example::

        train = tfaccel.data.from_arrays(x_train, y_train, batch_size=128,
                                         augment=["flip", "crop"], seed=0)
        model.fit(train, epochs=5)

    Args:
        x: An array, or a dict of arrays with the same first dimension.
        y: Labels with the same first dimension, or None for features only.
        batch_size: The GLOBAL batch size.
        shuffle_buffer: Shuffle buffer in examples, 0 for no shuffling (as
            ``data.shuffle_buffer``). None (default): every example, a full shuffle each
            epoch as ``model.fit(x, y)`` does. A smaller buffer first permutes the
            arrays once, seeded (`tfaccel.data.order`), so arrays sorted by label still
            give mixed batches after a cache.
        seed: Seed of that permutation, of shuffling and augmentation.
        **options: Any keyword of `tfaccel.data.optimize` (augment, seed, deterministic,
            cache, private_threads, ...).

    Returns:
        A `tf.data.Dataset` of ``(x_batch, y_batch)`` (or ``x_batch``) ready for `fit`.

    Raises:
        DataError: The arrays are empty or their lengths differ, or a floating-point array
            holds NaN or an infinite value (the first is named with its example).
    """
    pipeline.check_builder_options(options, builder=from_arrays)
    n = _length(x, "x")
    if y is not None and _length(y, "y") != n:
        raise DataError(f"x has {n} examples but y has {_length(y, 'y')}.")
    if n == 0:
        raise DataError("x is empty: from_arrays needs at least one example.")
    x = tf.nest.map_structure(np.asarray, x)
    _check_finite(x, "x")
    if y is not None:
        _check_finite(y, "y")
    elements = x if y is None else (x, np.asarray(y))
    if shuffle_buffer is None:
        shuffle_buffer = n
    if 0 < shuffle_buffer < n:
        # A buffer smaller than the data mixes only neighbours: permute once, seeded, so
        # arrays sorted by label still mix (a whole-data buffer needs no help).
        permuted = order.permutation(n, order.resolve_seed(
            seed, input_context=options.get("input_context")))
        elements = tf.nest.map_structure(lambda a: a[permuted], elements)
    if cache_files.is_file_cache(options.get("cache")):
        options["cache_fingerprint"] = {"builder": "from_arrays",
                                        "examples": f"{n}: {_content_digest(elements)}",
                                        **options.get("cache_fingerprint", {})}
    dataset = tf.data.Dataset.from_tensor_slices(elements)
    # In-memory data has no files to split: a multi-worker strategy must shard by element.
    options.setdefault("shard_policy", "data")
    sharding.fix_order_for_data_sharding(options)  # DATA sharding needs a fixed order
    return pipeline.optimize(dataset, batch_size=batch_size, shuffle_buffer=shuffle_buffer,
                             seed=seed, **options)


class ArraysSource(base.Source):
    """``data.source: arrays``: an ``.npz`` file holding arrays named x and y."""

    names = ("arrays",)

    def build(self, *, batch_size, common, train_options, validation_options) -> base.Built:
        config = self.config
        path = config.path
        if not os.path.exists(path):
            raise DataError(f"Arrays file {path!r} does not exist.")
        with np.load(path, allow_pickle=False) as npz:
            if "x" not in npz or "y" not in npz:
                raise DataError(f"Arrays file {path!r} must hold arrays named 'x' and 'y'; "
                                f"it has {sorted(npz.files)}.")
            x, y = npz["x"], npz["y"]
        num_classes = base.classes_for_labels(
            int(np.min(y)), int(np.max(y)), num_classes=config.num_classes,
            where=repr(path)) if len(y) else config.num_classes
        # Named here, with the file, before the split renumbers the examples.
        _check_finite(x, f"Arrays file {path!r}: x")
        val, val_examples = None, None
        if config.validation_fraction:
            train_idx, val_idx = splits.split_indices(len(x), config.validation_fraction,
                                                      self.seed)
            x, y, vx, vy = x[train_idx], y[train_idx], x[val_idx], y[val_idx]
            val = from_arrays(vx, vy, batch_size=batch_size, shuffle_buffer=0, **common,
                              **validation_options)
            val_examples = len(val_idx)
        train = from_arrays(x, y, batch_size=batch_size,
                            shuffle_buffer=min(config.shuffle_buffer, len(x)), **common,
                            **train_options)
        return base.Built(train=train, validation=val, num_classes=num_classes,
                          class_names=None, train_examples=len(x),
                          validation_examples=val_examples)
