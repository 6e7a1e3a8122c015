"""Table columns as one float feature vector, by Keras' FeatureSpace adapted on the training rows.

What the keras.io structured-data examples do, for a recipe's ``data.source: csv``, after
the column plan (`tfaccel.reading.table_plan`): `converter` turns each batch of texts into
numbers (missing ones imputed, with an indicator), categories and calendar features; then
numbers are normalised (mean 0, variance 1 over the training split), categories one-hot
encoded with one out-of-vocabulary slot, and everything concatenated into the one vector a
dense model takes. The FeatureSpace is
applied in the tf.data pipeline (on the CPU, overlapped with training by the prefetch) and
saved in the run directory (`FEATURE_SPACE_FILE`), so the same encoding can be put in front
of the model for inference.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import re
from typing import Dict, Iterable

import keras
import tensorflow as tf

from tfaccel.reading import table_plan

FEATURE_SPACE_FILE = "feature_space.keras"


# A valid text of each date format: what a missing date is parsed as (then masked).
_DATE_FILLERS = {"YYYY-MM-DD": "2000-01-01", "YYYY/MM/DD": "2000/01/01",
                 "MM/DD/YYYY": "01/01/2000", "DD/MM/YYYY": "01/01/2000",
                 "DD.MM.YYYY": "01.01.2000"}


# What a Keras layer name may hold here: the FeatureSpace names a layer after each feature,
# Keras refuses '/', and spaces or other signs are unsafe in saved files and graph names.
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def keras_names(names: Iterable[str]) -> Dict[str, str]:
    """A valid, unique Keras layer name for each feature name (in the FeatureSpace only).

    A name Keras takes keeps itself; any other gets its unsafe characters replaced by
    ``_`` and, if that name is taken, a ``_2``, ``_3``... suffix. The plan, the summary
    and every message keep the user's column names; only the FeatureSpace (its inputs,
    saved in feature_space.keras) sees these.

    Args:
        names: Feature names (`table_plan.Column.features`), in order.

    Returns:
        ``{feature name: Keras name}``, in the order of `names`.
    """
    names = list(names)
    taken = {name for name in names if not _UNSAFE.search(name)}
    safe = {}
    for name in names:
        if name in taken:
            safe[name] = name
            continue
        base = _UNSAFE.sub("_", name) or "_"
        candidate, k = base, 1
        while candidate in taken:
            k += 1
            candidate = f"{base}_{k}"
        taken.add(candidate)
        safe[name] = candidate
    return safe


def _plan_names(plan: table_plan.TablePlan) -> Dict[str, str]:
    """`keras_names` of every feature `plan` makes."""
    return _names_of(plan.kept)


def _names_of(kept) -> Dict[str, str]:
    return keras_names(name for column in kept for name, _ in column.features)


def days_since_epoch(year, month, day):
    """Days from 1970-01-01 to the civil date (int64 tensors; H. Hinnant's days_from_civil)."""
    year = year - tf.cast(month <= 2, tf.int64)
    era = tf.math.floordiv(year, 400)
    yoe = year - era * 400
    doy = (153 * tf.math.floormod(month + 9, 12) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def _calendar(text, missing, column: table_plan.Column) -> Dict[str, tf.Tensor]:
    """A date column's calendar features (`table_plan.Column.features`), from its texts."""
    fmt = column.date_format
    safe = tf.where(missing, _DATE_FILLERS[fmt], text)
    pattern = "^" + table_plan.date_pattern(fmt) + "$"

    def group(k):
        found = tf.strings.regex_replace(safe, pattern, f"\\{k}")
        return tf.strings.to_number(tf.where(found == "", "0", found), tf.int64)

    parts = dict(zip(table_plan.date_order(fmt), (group(1), group(2), group(3))))
    days = days_since_epoch(parts["year"], parts["month"], parts["day"])
    ones = tf.ones_like(parts["year"])
    phases = {"month": parts["month"] - 1, "weekday": tf.math.floormod(days + 4, 7),
              "yearday": days - days_since_epoch(parts["year"], ones, ones)}
    if column.has_time:
        phases["hour"] = group(4)
    year = tf.cast(parts["year"], tf.float32)
    out = {f"{column.name}_year": tf.where(missing, tf.cast(column.mean, tf.float32), year)}
    for cycle, period in table_plan.CYCLES + (("hour", 24),):
        if cycle not in phases:
            continue
        angle = tf.cast(phases[cycle], tf.float32) * (2 * math.pi / period)
        zero = tf.zeros_like(angle)
        out[f"{column.name}_{cycle}_sin"] = tf.where(missing, zero, tf.sin(angle))
        out[f"{column.name}_{cycle}_cos"] = tf.where(missing, zero, tf.cos(angle))
    return out


def converter(plan: table_plan.TablePlan):
    """THE conversion of a batch of a table's texts into features and model targets.

    Args:
        plan: The table's `table_plan.TablePlan`.

    Returns:
        A function mapping ``{column: [B] strings}`` (every column of the file, the label
        included) to ``({feature: [B] values}, targets)``: numbers as float32 with missing
        values imputed by the training mean (and a 0/1 ``<column>_missing`` feature),
        categories as stripped strings (missing ones ``[missing]``), dates as calendar
        features; targets int32 class ids (a `tf.lookup.StaticHashTable` of the label
        texts), or float32 targets (regression, multi_label).
    """
    names = _plan_names(plan)
    lookup = None
    if plan.label_keys is not None:
        keys = sorted(plan.label_keys)
        lookup = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(keys), tf.constant([plan.label_keys[k] for k in keys], tf.int32)),
            default_value=-1)

    def convert(row):
        features = _features(row, plan.kept, plan.markers, names)
        if lookup is not None:
            target = lookup.lookup(tf.strings.strip(row[plan.label[0]]))
        else:
            target = tf.stack([tf.strings.to_number(tf.strings.strip(row[name]), tf.float32)
                               for name in plan.label], axis=-1)
            if len(plan.label) == 1:
                target = target[..., 0]
        return features, target

    return convert


def _features(row, kept, markers, names) -> Dict[str, tf.Tensor]:
    """THE features of a batch of a table's texts ``{column: [B] strings}``: `converter`'s
    and `RawColumns`' one rule, keyed by `keras_names`."""
    markers = tf.constant(list(markers))

    def is_missing(text):
        return tf.reduce_any(tf.equal(tf.expand_dims(text, -1), markers), axis=-1)

    features = {}
    for column in kept:
        text = tf.strings.strip(row[column.name])
        missing = is_missing(text)
        if column.kind == "numeric":
            value = tf.strings.to_number(tf.where(missing, "0", text), tf.float32)
            features[column.name] = tf.where(missing, tf.cast(column.mean, tf.float32), value)
        elif column.kind == "categorical":
            features[column.name] = tf.where(missing, table_plan.MISSING_CATEGORY, text)
        else:
            features.update(_calendar(text, missing, column))
        if column.missing and column.kind != "categorical":
            features[f"{column.name}_missing"] = tf.cast(missing, tf.float32)
    return {names[name]: value for name, value in features.items()}


@contextlib.contextmanager
def _float32_layers():
    """Keras layers made inside compute in float32, whatever the run's precision policy.

    The FeatureSpace runs in the input pipeline, not in the model: under mixed_bfloat16 its
    Normalization would otherwise compute in bfloat16 (and fail adding its float32 input).
    """

    previous = keras.mixed_precision.global_policy().name
    keras.mixed_precision.set_global_policy("float32")
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy(previous)


def adapt_feature_space(tables: tf.data.Dataset, plan: table_plan.TablePlan):
    """A `keras.utils.FeatureSpace` of `plan`'s features, adapted on `tables`.

    Args:
        tables: The training split, converted: batches of ``({feature: values}, labels)``.
        plan: The table's plan.

    Returns:
        The adapted FeatureSpace (``output_mode="concat"``: one float32 vector per row):
        numbers and years normalised, indicators and sines/cosines as they are,
        categories one-hot with one out-of-vocabulary slot.
    """

    space = keras.utils.FeatureSpace
    makers = {"normalized": space.float_normalized, "passthrough": space.float,
              "category": lambda: space.string_categorical(num_oov_indices=1,
                                                           output_mode="one_hot")}
    names = _plan_names(plan)
    with _float32_layers():
        features = {names[name]: makers[how]() for column in plan.kept
                    for name, how in column.features}
        feature_space = space(features, output_mode="concat")
        feature_space.adapt(tables.map(lambda features, *_: features))
    return feature_space


def encode(dataset: tf.data.Dataset, feature_space) -> tf.data.Dataset:
    """Maps batches ``({feature: values}, labels...)`` to ``(vectors [B, n], labels...)``."""

    def apply(features, *rest):
        return (feature_space(features),) + rest

    return dataset.map(apply, num_parallel_calls=tf.data.AUTOTUNE)


def save_feature_space(feature_space, directory) -> str:
    """Saves `feature_space` into `directory` as `FEATURE_SPACE_FILE`; its path."""
    path = os.path.join(os.fspath(directory), FEATURE_SPACE_FILE)
    feature_space.save(path)
    return path


def with_feature_space(model, feature_space):
    """One Keras model taking the raw columns: `feature_space` in front of `model`.

    The keras.io structured-data pattern: the FeatureSpace's own inputs (one per kept
    column, named by `keras_names`: ``a/b c`` becomes ``a_b_c``) and encoded features feed the trained model, so inference needs no separate
    encoding step.

    Args:
        model: A model trained on `feature_space`'s encoded rows (a table run's
            model.keras).
        feature_space: The adapted FeatureSpace (the run's feature_space.keras).

    Returns:
        A `keras.Model` taking ``{column: values}`` (numbers as float32, categories as
        their strings or integers) and giving `model`'s outputs.
    """

    with _float32_layers():
        inputs = feature_space.get_inputs()
        outputs = model(feature_space.get_encoded_features())
        return keras.Model(inputs, outputs, name=f"{model.name}_on_columns")


def _raw_columns_layer():
    """`RawColumns`, defined (and registered with Keras) on first use: no Keras at import."""
    global _RAW_COLUMNS
    if _RAW_COLUMNS is not None:
        return _RAW_COLUMNS

    @keras.saving.register_keras_serializable(package="tfaccel")
    class RawColumns(keras.layers.Layer):
        """A table's raw columns (``{column: [B] strings}``, as the CSV file holds them) to
        the features the FeatureSpace takes: `converter`'s rule inside a model (missing
        values imputed with the training means and flagged, dates as calendar features,
        categories stripped). Its config is the plan's kept columns and markers."""

        def __init__(self, columns, markers, **kwargs):
            kwargs.setdefault("trainable", False)
            super().__init__(**kwargs)
            self.columns = [dict(c) for c in columns]
            self.markers = list(markers)
            self._kept = [table_plan.Column(**c) for c in self.columns]
            self._names = _names_of(self._kept)

        def call(self, inputs):
            row = {name: tf.reshape(tf.cast(value, tf.string) if value.dtype != tf.string
                                    else value, [-1]) for name, value in inputs.items()}
            features = _features(row, self._kept, self.markers, self._names)
            # The FeatureSpace's inputs are (B, 1).
            return {name: tf.expand_dims(value, -1) for name, value in features.items()}

        def get_config(self):
            return {**super().get_config(), "columns": self.columns, "markers": self.markers}

    _RAW_COLUMNS = RawColumns
    return RawColumns


_RAW_COLUMNS = None


def with_raw_columns(model, feature_space, plan: table_plan.TablePlan):
    """One Keras model taking a table's raw columns, as text: the column plan's conversion
    (`RawColumns`) and `feature_space`'s encoding in front of `model`.

    Args:
        model: A model trained on `feature_space`'s encoded rows (a table run's model.keras).
        feature_space: The adapted FeatureSpace (the run's feature_space.keras).
        plan: The run's column plan (`tfaccel.reading.table_plan.plan_for` on its training
            split; `CsvSource.plan`).

    Returns:
        A `keras.Model` taking ``{column: [B] strings}`` for every kept column (named by
        `keras_names`: the file's names where Keras takes them, ``size cm`` as ``size_cm``;
        missing-value markers such as ``NA`` or ``""`` as in the file) and giving
        `model`'s outputs. It saves to one ``.keras`` file; loading it needs
        ``import tfaccel.data.table_features`` and a call of `register_layers` first.
    """

    layer = _raw_columns_layer()
    kept = plan.kept
    safe = keras_names(c.name for c in kept)
    with _float32_layers():
        inputs = {safe[c.name]: keras.Input(shape=(), dtype="string", name=safe[c.name])
                  for c in kept}
        features = layer([dataclasses.asdict(c) for c in kept], plan.markers,
                         name="raw_columns")({c.name: inputs[safe[c.name]] for c in kept})
        encoder = keras.Model(feature_space.get_inputs(),
                              feature_space.get_encoded_features(), name="feature_space")
        outputs = model(encoder(features))
        return keras.Model(inputs, outputs, name=f"{model.name}_on_raw_columns")


def register_layers() -> None:
    """Registers `RawColumns` with Keras, so a saved `with_raw_columns` model loads."""
    _raw_columns_layer()
