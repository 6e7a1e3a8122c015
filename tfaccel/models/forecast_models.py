"""The forecasting model forecast_mlp: fixed-length windows to the targets' own units."""

import keras
from keras import ops

from tfaccel.errors import UserInputError
from tfaccel.models.task_head import output_head


def build_forecast_mlp(*, input_shape, num_classes, task="regression", hidden_units,
                       dropout, input_mean=None, input_std=None, target_mean=None,
                       target_std=None, anchor=None):
    """Normalization by the training rows -> each window relative to its last step, plus
    that step (the level) -> Dense layers -> a linear head that also reads those features
    (a linear skip: a ridge-like model plus what the hidden layers add) -> the targets'
    own units.

    With `anchor` (the input channel of each target column: a series forecast from its
    own past), the head predicts the change from the window's last value of that channel,
    standardised by `target_mean`/`target_std` (the statistics of those changes); without
    it, the target itself standardised by them. Statistics come from the training split
    only; a recipe over `source: timeseries` sets them (None: left as they are). Unlike
    seq_cnn's per-window standardisation, a window keeps its level.
    """
    if input_shape[0] is None:
        raise UserInputError("model 'forecast_mlp' needs windows of a fixed length, got "
                             f"input_shape {tuple(input_shape)!r}.")
    channels = input_shape[-1]
    inputs = keras.Input(shape=input_shape, name="window")
    raw = ops.cast(inputs, "float32")
    x = raw
    if input_mean is not None:
        _check_width("input_mean", input_mean, channels)
        _check_width("input_std", input_std, channels)
        x = keras.layers.Normalization(axis=-1, mean=list(input_mean),
                                       variance=[v * v for v in input_std], dtype="float32",
                                       name="input_normalization")(x)
    # The window's shape (relative to its last step) and its level apart: the level is
    # large and common to every step, and a linear layer on raw steps learns the small
    # differences that carry the forecast slowly (badly conditioned).
    last = x[:, -1, :]
    shape = keras.layers.Flatten()(x - last[:, None, :])
    features = keras.layers.Concatenate(name="shape_and_level")([shape, last])
    # The hidden layers read the shape only: a level outside the training rows' range (a
    # trend) then reaches the forecast through the linear head alone, not through ReLUs
    # fitted to levels seen in training.
    h = shape
    for units in hidden_units:
        h = keras.layers.Dense(units, activation="relu")(h)
        if dropout:
            h = keras.layers.Dropout(dropout)(h)
    h = keras.layers.Concatenate(name="hidden_and_window")([ops.cast(h, "float32"), features])
    outputs = output_head(h, task=task, num_outputs=num_classes, dropout=0.0)
    if task != "regression":
        return keras.Model(inputs, outputs, name="forecast_mlp")
    if target_mean is not None:
        _check_width("target_mean", target_mean, num_classes)
        _check_width("target_std", target_std, num_classes)
        outputs = keras.layers.Normalization(
            axis=-1, mean=list(target_mean), variance=[v * v for v in target_std],
            invert=True, dtype="float32", name="target_units")(outputs)
    if anchor is not None:
        if not anchor or num_classes % len(anchor) or max(anchor) >= channels:
            raise UserInputError(
                f"model 'forecast_mlp' parameter 'anchor' must name one input channel (0 to "
                f"{channels - 1}) per target column, and {num_classes} outputs a whole "
                f"number of steps of them; got {list(anchor)!r}.")
        # Step-major outputs (each step's target columns together): the last values of the
        # anchor channels, repeated once per step.
        level = ops.tile(ops.take(raw[:, -1, :], list(anchor), axis=-1),
                         [1, num_classes // len(anchor)])
        outputs = keras.layers.Add(name="from_last_value", dtype="float32")([outputs, level])
    return keras.Model(inputs, outputs, name="forecast_mlp")


def _check_width(key, values, width):
    if values is None or len(values) != width:
        raise UserInputError(f"model parameter {key!r} needs {width} values (one per "
                             f"{'channel' if key.startswith('input') else 'output'}), got "
                             f"{values!r}.")
