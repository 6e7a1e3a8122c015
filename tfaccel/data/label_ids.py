"""A `LabelPlan` (tfaccel.reading.labels) applied inside tf.data: label values to class ids, checked."""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np
import tensorflow as tf

from tfaccel.errors import DataError
from tfaccel.reading.labels import LabelPlan


def check_known(plan: LabelPlan, labels, *, where: str) -> None:
    """Refuses a label of another split (validation) that the plan has no class for.

    Raises:
        DataError: A label outside the training split's classes, naming `where`.
    """
    labels = np.asarray(labels)
    if plan.values is None or not labels.size:
        return
    if plan.task == "multi_label" or (plan.identity and labels.dtype.kind in "iub"):
        known = np.isin(labels, np.asarray(plan.values))
        if not known.all():
            value = labels.reshape(-1)[int(np.argmin(known.reshape(-1)))].item()
            raise DataError(f"{where} holds label {value!r}, which is not one of the classes "
                            f"of the training split ({', '.join(plan.class_names[:10])}"
                            f"{', ...' if len(plan.class_names) > 10 else ''}).")
        return
    try:
        plan.encode(labels)
    except DataError as error:
        raise DataError(f"{where}: {error}") from None


def encoder(plan: LabelPlan) -> Optional[Callable[[tf.Tensor], tf.Tensor]]:
    """``fn(labels) -> targets`` for the model, or None when the labels are its targets.

    classification and binary: a lookup of the label values (1..K, -1/1, strings) to ids
    0..K-1 (int32); a value without a class stops the pipeline naming it (the splits'
    labels are checked up front, so only changed files get there). regression and
    multi_label: float32.
    """
    if plan.task == "multi_label" and plan.values is not None:
        return _multi_hot(plan)
    if plan.task in ("regression", "multi_label"):
        return lambda labels: tf.cast(labels, tf.float32)
    if plan.identity:
        return None
    texts = isinstance(plan.values[0], str)
    keys = tf.constant([str(v) for v in plan.values] if texts
                       else [int(v) for v in plan.values], tf.string if texts else tf.int64)
    table = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(keys, tf.range(len(plan.values), dtype=tf.int32)),
        default_value=-1)

    def encode(labels):
        if not texts:
            labels = tf.cast(labels, tf.int64)
        ids = table.lookup(labels)
        check = tf.debugging.Assert(tf.reduce_all(ids >= 0),
                                    ["Labels without a class of the training split:",
                                     tf.boolean_mask(labels, ids < 0)], summarize=5)
        with tf.control_dependencies([check]):
            return tf.identity(ids)

    return encode


def _multi_hot(plan: LabelPlan) -> Callable:
    """A list of label values per example (a ragged batch) to 0/1 float32 [B, labels]."""
    table = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(
            tf.constant([int(v) for v in plan.values], tf.int64),
            tf.range(len(plan.values), dtype=tf.int64)), default_value=-1)

    def encode(labels):
        ids = tf.ragged.map_flat_values(table.lookup, tf.cast(labels, tf.int64))
        check = tf.debugging.Assert(tf.reduce_all(ids.flat_values >= 0),
                                    ["Labels without a class of the training split:",
                                     tf.boolean_mask(labels.flat_values,
                                                     ids.flat_values < 0)], summarize=5)
        with tf.control_dependencies([check]):
            sparse = ids.to_sparse()
        return tf.cast(tf.sparse.to_indicator(sparse, len(plan.values)), tf.float32)

    return encode


def encode_labels(dataset: tf.data.Dataset, plan: LabelPlan) -> tf.data.Dataset:
    """`dataset` of ``(features, labels, ...)`` batches with the labels encoded by `plan`
    (`encoder`); unchanged when the labels are already the targets."""
    encode = encoder(plan)
    if encode is None or dataset is None:
        return dataset
    return dataset.map(lambda x, y, *rest: (x, encode(y), *rest))
