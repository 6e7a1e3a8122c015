"""In-memory arrays (NumPy or tensors, or dicts of them) as a batched tf.data pipeline."""

from __future__ import annotations

from typing import Optional

import numpy as np
import tensorflow as tf

from tfaccel.data import pipeline, sharding
from tfaccel.errors import DataError


def _length(x, name):
    lengths = {len(v) for v in tf.nest.flatten(x)}
    if len(lengths) != 1:
        raise DataError(f"{name} holds arrays of different lengths: {sorted(lengths)}.")
    return lengths.pop()


def from_arrays(x, y=None, *, batch_size: int, shuffle_buffer: Optional[int] = None,
                **options) -> tf.data.Dataset:
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
            epoch as ``model.fit(x, y)`` does.
        **options: Any keyword of `tfaccel.data.optimize` (augment, seed, deterministic,
            cache, private_threads, ...).

    Returns:
        A `tf.data.Dataset` of ``(x_batch, y_batch)`` (or ``x_batch``) ready for `fit`.

    Raises:
        DataError: The arrays are empty or their lengths differ.
    """
    pipeline.check_builder_options(options, builder=from_arrays)
    n = _length(x, "x")
    if y is not None and _length(y, "y") != n:
        raise DataError(f"x has {n} examples but y has {_length(y, 'y')}.")
    if n == 0:
        raise DataError("x is empty: from_arrays needs at least one example.")
    x = tf.nest.map_structure(np.asarray, x)
    elements = x if y is None else (x, np.asarray(y))
    dataset = tf.data.Dataset.from_tensor_slices(elements)
    if shuffle_buffer is None:
        shuffle_buffer = n
    # In-memory data has no files to split: a multi-worker strategy must shard by element.
    options.setdefault("shard_policy", "data")
    sharding.fix_order_for_data_sharding(options)  # DATA sharding needs a fixed order
    return pipeline.optimize(dataset, batch_size=batch_size, shuffle_buffer=shuffle_buffer,
                             **options)
