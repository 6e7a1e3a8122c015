"""The model of plain feature vectors (table rows, tiny images): mlp."""

import keras

from tfaccel.models.pixels import rescale_pixels
from tfaccel.models.task_head import output_head


def build_mlp(*, input_shape, num_classes,
              task="classification", hidden_units, dropout, normalization):
    inputs = keras.Input(shape=input_shape)
    x = keras.layers.Flatten()(inputs)
    if normalization == "rescale":
        x = rescale_pixels(x)  # raw 0-255 pixels
    elif normalization == "per_image":
        # Per-example standardisation of the features, as a stock layer.
        x = keras.layers.LayerNormalization(center=False, scale=False, epsilon=1e-3)(x)
    for units in hidden_units:
        x = keras.layers.Dense(units, activation="relu")(x)
        if dropout:
            x = keras.layers.Dropout(dropout)(x)
    outputs = output_head(x, task=task, num_outputs=num_classes, dropout=0.0)
    return keras.Model(inputs, outputs, name="mlp")
