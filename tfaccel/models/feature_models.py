"""The model of plain feature vectors (table rows, tiny images): mlp."""

import keras

from tfaccel.models.pixels import rescale_pixels
from tfaccel.models.task_head import HEAD_ACTIVATIONS, output_head


def build_mlp(*, input_shape, num_classes,
              task="classification", hidden_units, dropout, normalization, l2=0.0,
              linear_path=False, members=1):
    inputs = keras.Input(shape=input_shape)
    x = keras.layers.Flatten()(inputs)
    if normalization == "rescale":
        x = rescale_pixels(x)  # raw 0-255 pixels
    elif normalization == "per_image":
        # Per-example standardisation of the features, as a stock layer.
        x = keras.layers.LayerNormalization(center=False, scale=False, epsilon=1e-3)(x)
    # An L2 penalty on every kernel (Keras' kernel_regularizer) when l2 > 0.
    penalty = keras.regularizers.L2(l2) if l2 else None
    if members == 1 and not linear_path and not l2:
        h = _hidden(x, hidden_units=hidden_units, dropout=dropout, penalty=None)
        outputs = output_head(h, task=task, num_outputs=num_classes, dropout=0.0)
        return keras.Model(inputs, outputs, name="mlp")
    if members == 1:
        z = keras.layers.Dense(num_classes, kernel_regularizer=penalty, name="deep")(
            _hidden(x, hidden_units=hidden_units, dropout=dropout, penalty=penalty))
    else:
        # Several hidden stacks from their own random starts, their outputs (before the
        # head's activation) averaged: an ensemble inside one model, which evens out what
        # one start's stack fits to a small table's noise.
        z = keras.layers.Average(name="deep")([
            keras.layers.Dense(num_classes, kernel_regularizer=penalty, name=f"deep_{m}")(
                _hidden(x, hidden_units=hidden_units, dropout=dropout, penalty=penalty))
            for m in range(members)])
    if linear_path:
        # "Wide and deep": the inputs' own linear map added to the deep part's, so the
        # model holds a logistic / linear regression on its features (tables' default).
        wide = keras.layers.Dense(num_classes, kernel_regularizer=penalty, name="wide")(x)
        z = keras.layers.Add(name="wide_and_deep")([z, wide])
    outputs = keras.layers.Activation(HEAD_ACTIVATIONS[task] or "linear", dtype="float32",
                                      name="predictions")(z)
    return keras.Model(inputs, outputs, name="mlp")


def _hidden(x, *, hidden_units, dropout, penalty):
    """The ReLU Dense layers (each followed by dropout when > 0)."""
    for units in hidden_units:
        x = keras.layers.Dense(units, activation="relu", kernel_regularizer=penalty)(x)
        if dropout:
            x = keras.layers.Dropout(dropout)(x)
    return x
