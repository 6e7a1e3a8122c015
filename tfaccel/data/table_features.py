"""Table columns as one float feature vector, by Keras' FeatureSpace adapted on the training rows.

What the keras.io structured-data examples do, for a recipe's ``data.source: csv``: numbers
are normalised (mean 0, variance 1 over the training split), strings and the integer columns
named as categorical are one-hot encoded with one out-of-vocabulary slot, and the encoded
columns are concatenated into the one vector a dense model takes. The FeatureSpace is
applied in the tf.data pipeline (on the CPU, overlapped with training by the prefetch) and
saved in the run directory (`FEATURE_SPACE_FILE`), so the same encoding can be put in front
of the model for inference.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from typing import Dict, List, Optional, Sequence

import tensorflow as tf

from tfaccel.errors import DataError, did_you_mean

FEATURE_SPACE_FILE = "feature_space.keras"


@dataclasses.dataclass(frozen=True)
class ColumnPlan:
    """Which columns become which features.

    Attributes:
        numeric: Columns normalised as numbers (in table order).
        categorical: Columns one-hot encoded (in table order).
        ignored: Columns left out.
        types: ``{column: dtype name}`` of the kept columns.
    """

    numeric: List[str]
    categorical: List[str]
    ignored: List[str]
    types: Dict[str, str]

    def as_dict(self) -> dict:
        """The plan as the summary shows it (without the types)."""
        return {"numeric": list(self.numeric), "categorical": list(self.categorical),
                "ignored": list(self.ignored)}


def plan_columns(column_types: Dict[str, str], *, label: str,
                 categorical: Optional[Sequence[str]] = None,
                 ignore: Optional[Sequence[str]] = None,
                 where: str = "data.table") -> ColumnPlan:
    """Sorts a table's columns into numeric, categorical and ignored ones.

    Args:
        column_types: ``{column: dtype name}`` of the table (label column included), e.g. a
            `from_csv` dataset's ``column_types``.
        label: The label column (never a feature).
        categorical: Integer columns to one-hot as categories; string columns always are.
        ignore: Columns to leave out.
        where: How the caller names `categorical` and `ignore` (``where.categorical``) in
            messages.

    Raises:
        DataError: A named column is not in the table, is the label, or cannot be a category.
    """
    features = [name for name in column_types if name != label]
    for key, names in (("ignore", ignore), ("categorical", categorical)):
        for name in names or ():
            if name == label:
                raise DataError(f"{where}.{key} names {name!r}, the label column "
                                "(data.label_key): the label is never a feature.")
            if name not in column_types:
                raise DataError(f"{where}.{key} names {name!r}, which is not a column of the "
                                f"table{did_you_mean(str(name), features)}; its columns: "
                                f"{', '.join(features)}.")
    for name in categorical or ():
        kind = column_types[name]
        if not (kind.startswith("int") or kind == "string"):
            raise DataError(f"{where}.categorical names {name!r}, a {kind} column: only "
                            "integer codes can be categories (string columns always are); "
                            "leave it out to normalise it as a number.")
    left_out = set(ignore or ())
    kept = [name for name in features if name not in left_out]
    chosen = set(categorical or ())
    as_category = [name for name in kept
                   if name in chosen or column_types[name] == "string"]
    if not kept:
        raise DataError(f"{where}.ignore leaves no feature column (the table's columns: "
                        f"{', '.join(features)}).")
    return ColumnPlan(numeric=[name for name in kept if name not in as_category],
                      categorical=as_category,
                      ignored=[name for name in features if name in left_out],
                      types={name: column_types[name] for name in kept})


def _selected(features: dict, plan: ColumnPlan) -> dict:
    """The kept columns; numbers as float32 (FeatureSpace normalises floats)."""
    return {name: tf.cast(features[name], tf.float32) if name in plan.numeric
            else features[name] for name in plan.types}


@contextlib.contextmanager
def _float32_layers():
    """Keras layers made inside compute in float32, whatever the run's precision policy.

    The FeatureSpace runs in the input pipeline, not in the model: under mixed_bfloat16 its
    Normalization would otherwise compute in bfloat16 (and fail adding its float32 input).
    """
    import keras

    previous = keras.mixed_precision.global_policy().name
    keras.mixed_precision.set_global_policy("float32")
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy(previous)


def adapt_feature_space(tables: tf.data.Dataset, plan: ColumnPlan):
    """A `keras.utils.FeatureSpace` of `plan`'s columns, adapted on `tables`.

    Args:
        tables: The training split: batches of ``({column: values}, labels)``.
        plan: `plan_columns`'s choice.

    Returns:
        The adapted FeatureSpace (``output_mode="concat"``: one float32 vector per row).
    """
    import keras

    space = keras.utils.FeatureSpace
    with _float32_layers():
        features = {name: space.float_normalized() for name in plan.numeric}
        for name in plan.categorical:
            make = space.string_categorical if plan.types[name] == "string" \
                else space.integer_categorical
            features[name] = make(num_oov_indices=1, output_mode="one_hot")
        feature_space = space(features, output_mode="concat")
        feature_space.adapt(tables.map(lambda features, *_: _selected(features, plan)))
    return feature_space


def encode(dataset: tf.data.Dataset, feature_space, plan: ColumnPlan) -> tf.data.Dataset:
    """Maps batches ``({column: values}, labels...)`` to ``(vectors [B, n], labels...)``."""

    def apply(features, *rest):
        return (feature_space(_selected(features, plan)),) + rest

    return dataset.map(apply, num_parallel_calls=tf.data.AUTOTUNE)


def save_feature_space(feature_space, directory) -> str:
    """Saves `feature_space` into `directory` as `FEATURE_SPACE_FILE`; its path."""
    path = os.path.join(os.fspath(directory), FEATURE_SPACE_FILE)
    feature_space.save(path)
    return path


def with_feature_space(model, feature_space):
    """One Keras model taking the raw columns: `feature_space` in front of `model`.

    The keras.io structured-data pattern: the FeatureSpace's own inputs (one per kept
    column) and encoded features feed the trained model, so inference needs no separate
    encoding step.

    Args:
        model: A model trained on `feature_space`'s encoded rows (a table run's
            model.keras).
        feature_space: The adapted FeatureSpace (the run's feature_space.keras).

    Returns:
        A `keras.Model` taking ``{column: values}`` (numbers as float32, categories as
        their strings or integers) and giving `model`'s outputs.
    """
    import keras

    with _float32_layers():
        inputs = feature_space.get_inputs()
        outputs = model(feature_space.get_encoded_features())
        return keras.Model(inputs, outputs, name=f"{model.name}_on_columns")
