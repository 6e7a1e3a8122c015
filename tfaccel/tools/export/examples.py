"""The examples an export is checked and calibrated on, read through the run's own recipe."""

from __future__ import annotations

import dataclasses
from typing import Optional

from tfaccel.errors import DataError, UserInputError


def _data_config(recipe):
    # No augmentation (the model is checked and calibrated on what it will see), and no
    # cache: a file cache would be written by this read-only step.
    return dataclasses.replace(recipe.data, augment=[], cache="")


def _build(recipe, *, raw_texts: bool = False):
    # Deferred: TensorFlow (seconds); tools/export imports TF-free.
    from tfaccel.data.from_recipe import build_datasets

    return build_datasets(_data_config(recipe), global_batch_size=min(
        recipe.training.global_batch_size, 256), num_replicas=1, seed=recipe.seed,
        deterministic=True, raw=raw_texts)


def validation_arrays(recipe, *, limit: Optional[int], texts: bool = False):
    """(features, labels) of the run's validation split, at most `limit` examples."""
    _, validation, _ = _build(recipe, raw_texts=texts)
    if validation is None:
        raise DataError("the run's recipe has no validation data (data.validation_split_name or "
                        "data.validation_fraction); export checks every model on it.")
    features, labels = _take_examples(validation, limit)
    if not len(labels):
        raise DataError("the run's validation split is empty; export checks every model on "
                        "it.")
    return features, labels


def calibration_arrays(recipe, *, count: int):
    """`count` training examples for an int8 calibration, without augmentation."""
    # The training split as the recipe reads it (its own seeded shuffle, so a class-ordered
    # source still gives every class), minus augmentation.
    train, _, _ = _build(recipe)
    features, _ = _take_examples(train, count)
    return features


def _take_examples(dataset, limit: Optional[int]):
    # Deferred: TensorFlow (seconds); tools/export imports TF-free.
    import numpy as np
    import tensorflow as tf

    element = dataset.element_spec
    if not isinstance(element, tuple) or isinstance(element[0], dict):
        raise UserInputError("export supports datasets of (features, label) with one "
                             f"feature tensor; this one yields {element}.")
    dataset = dataset.map(lambda *e: (e[0], e[1])).unbatch()
    if limit is not None:
        dataset = dataset.take(limit)
    features, labels = [], []
    # Padded: sequences of different lengths (texts, waveforms) end in zeros, which
    # tfaccel's sequence models ignore; fixed-size examples are batched as they are.
    for batch in dataset.padded_batch(256).prefetch(tf.data.AUTOTUNE).as_numpy_iterator():
        features.append(batch[0])
        labels.append(batch[1])
    if not features:
        return np.zeros((0,), "float32"), np.zeros((0,), "int64")
    if features[0].dtype == object:  # texts stay strings (bytes objects)
        return np.concatenate(features), np.concatenate(labels)
    widest = np.max([f.shape[1:] for f in features], axis=0)
    features = [np.pad(f, [(0, 0)] + [(0, w - n) for w, n in zip(widest, f.shape[1:])])
                for f in features]
    return (np.concatenate(features).astype("float32"), np.concatenate(labels))

