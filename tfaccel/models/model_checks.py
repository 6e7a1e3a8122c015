"""THE check that a model (built, loaded or given) takes the data's examples and gives the
task's output."""

from tfaccel.errors import UserInputError

# The last layer each task's model needs, for messages (num: the output width).
_HEAD_ADVICE = {
    "classification": ("one probability per class of the data's {num} classes",
                       "keras.layers.Dense({num}, activation='softmax')"),
    "binary": ("one probability of the second class (data.task binary: the labels' second "
               "value)", "keras.layers.Dense(1, activation='sigmoid')"),
    "multi_label": ("one probability per label of the data's {num} labels",
                    "keras.layers.Dense({num}, activation='sigmoid')"),
    "regression": ("one value per target of the data's {num} target(s)",
                   "keras.layers.Dense({num}) (linear, float32 under mixed precision)"),
}


def _shape_text(shape):
    return "(" + ", ".join("batch" if i == 0 and d is None else str(d)
                           for i, d in enumerate(shape)) + ")"


def _one_shape(tensors, *, where, what, needed):
    """The shape of a model's one input (or output); several are refused."""
    if len(tensors) != 1:
        raise UserInputError(f"{where}: the model has {len(tensors)} {what}; {needed}.")
    return tuple(tensors[0].shape)


def check_model_fits(model, *, where, input_shape, num_classes, task="classification",
                     num_outputs=None):
    """Checks that a model takes the data's examples and gives the task's output.

    Args:
      model: What a builder returned, or a loaded or given model.
      where: How messages name the model's origin.
      input_shape: One example's shape, as the data reports it.
      num_classes: The data's number of classes.
      task: classification, binary, multi_label or regression: what the output holds.
      num_outputs: The output width the task needs (None: num_classes).

    Raises:
      UserInputError: Not a keras.Model, several inputs or outputs, an input shape other
        than the data's, or an output other than ``(batch, num_outputs)`` (the message
        says the last layer the task needs).
    """
    # Keras (and TensorFlow, seconds) only once a model is checked: `tfaccel.models` is
    # imported by `tfaccel validate`, which stays TF-free.
    import keras

    width = num_classes if num_outputs is None else num_outputs
    if not isinstance(model, keras.Model):
        text = repr(model)
        text = text if len(text) <= 80 else text[:77] + "..."
        raise UserInputError(f"{where} returned {type(model).__module__}."
                             f"{type(model).__qualname__} {text}, not a keras.Model: return "
                             "the model (uncompiled), e.g. keras.Model(inputs, outputs).")
    data_shape = (None, *input_shape)
    inputs = getattr(model, "inputs", None)
    if inputs:
        taken = _one_shape(inputs, where=where, what="inputs",
                           needed=f"tfaccel feeds one, of shape {_shape_text(data_shape)}")
        fits = len(taken) == len(data_shape) and all(
            a is None or b is None or a == b for a, b in zip(taken[1:], data_shape[1:]))
        if not fits:
            raise UserInputError(
                f"{where}: the model takes inputs of shape {_shape_text(taken)}, but the data "
                f"gives {_shape_text(data_shape)}: build it for input_shape={input_shape}.")
    outputs = getattr(model, "outputs", None)
    if outputs:
        given = _one_shape(outputs, where=where, what="outputs",
                           needed=f"the labels need one, of shape (batch, {width})")
    else:
        # A subclassed model has no symbolic outputs: ask Keras for the output's shape.
        try:
            given = tuple(model.compute_output_spec(keras.KerasTensor(data_shape)).shape)
        except Exception:  # unknown until the first batch; fit will say
            return
    if len(given) != 2 or given[-1] != width:
        holds, layer = _HEAD_ADVICE.get(task, _HEAD_ADVICE["classification"])
        raise UserInputError(
            f"{where}: the model's output has shape {_shape_text(given)}, but the labels need "
            f"(batch, {width}) for data.task {task}: {holds.format(num=width)} (end with "
            f"{layer.format(num=width)}).")
