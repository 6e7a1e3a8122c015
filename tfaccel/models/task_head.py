"""THE last layer of every registered model, by task (tfaccel.reading.labels.TASKS)."""

import keras

from tfaccel.errors import UserInputError

# The activation of the last layer, by task.
HEAD_ACTIVATIONS = {"classification": "softmax", "binary": "sigmoid",
                     "multi_label": "sigmoid", "regression": None}


def output_head(x, *, task, num_outputs, dropout):
    """Dropout then the task's float32 Dense, whatever the global dtype policy is:
    a softmax over the classes, one sigmoid (binary), a sigmoid per label (multi_label) or
    linear units (regression)."""
    if task not in HEAD_ACTIVATIONS:
        raise UserInputError(f"task must be one of {sorted(HEAD_ACTIVATIONS)}, got {task!r}.")
    if dropout:
        x = keras.layers.Dropout(dropout)(x)
    # float32 output: softmax and the loss computed from it need the range, and Keras
    # casts the inputs of a float32 layer for us.
    return keras.layers.Dense(num_outputs, activation=HEAD_ACTIVATIONS[task],
                              dtype="float32", name="predictions")(x)
