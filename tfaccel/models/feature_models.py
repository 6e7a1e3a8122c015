"""The model of plain feature vectors (table rows, tiny images): mlp."""

import keras

from tfaccel.models.pixels import rescale_pixels
from tfaccel.models.task_head import HEAD_ACTIVATIONS, output_head


def build_mlp(*, input_shape, num_classes,
              task="classification", hidden_units, dropout, normalization, l2=0.0,
              linear_path=False):
    inputs = keras.Input(shape=input_shape)
    x = keras.layers.Flatten()(inputs)
    if normalization == "rescale":
        x = rescale_pixels(x)  # raw 0-255 pixels
    elif normalization == "per_image":
        # Per-example standardisation of the features, as a stock layer.
        x = keras.layers.LayerNormalization(center=False, scale=False, epsilon=1e-3)(x)
    # An L2 penalty on every kernel (Keras' kernel_regularizer) when l2 > 0.
    penalty = keras.regularizers.L2(l2) if l2 else None
    h = x
    for units in hidden_units:
        h = keras.layers.Dense(units, activation="relu", kernel_regularizer=penalty)(h)
        if dropout:
            h = keras.layers.Dropout(dropout)(h)
    if not linear_path and not l2:
        outputs = output_head(h, task=task, num_outputs=num_classes, dropout=0.0)
        return keras.Model(inputs, outputs, name="mlp")
    z = keras.layers.Dense(num_classes, kernel_regularizer=penalty, name="deep")(h)
    if linear_path:
        # "Wide and deep": the inputs' own linear map added to the deep part's, so the
        # model holds a logistic / linear regression on its features (tables' default).
        wide = keras.layers.Dense(num_classes, kernel_regularizer=penalty, name="wide")(x)
        z = keras.layers.Add(name="wide_and_deep")([z, wide])
    outputs = keras.layers.Activation(HEAD_ACTIVATIONS[task] or "linear", dtype="float32",
                                      name="predictions")(z)
    return keras.Model(inputs, outputs, name="mlp")
