"""Your own model in a run: a builder's result, a saved model, a given keras.Model, checked."""

from __future__ import annotations

import keras

from tfaccel.errors import UserInputError
from tfaccel.messages import say
from tfaccel.models.model_checks import check_model_fits
from tfaccel.models.own_builder import build_own_model


def call_builder(builder, *, where: str, input_shape, num_classes: int, params: dict,
                 task: str = "classification", num_outputs=None):
    """Calls a user's builder (in the caller's strategy scope) and checks its model.

    The builder is told the task and the output width when its signature names ``task``
    and ``num_outputs`` (`tfaccel.models.own_builder.build_own_model`). A compiled model is accepted: `build_model` compiles it again with the recipe's
    optimizer, loss and metrics, and says so.
    """
    model = build_own_model(builder, where=where, input_shape=input_shape,
                            num_classes=num_classes, params=params, task=task,
                            num_outputs=num_outputs)
    if getattr(model, "compiled", False):
        say(f"{where} returned a compiled model; it is compiled again with the recipe's "
            "optimizer, loss and metrics (its own compile settings are not used).")
    return model


def load_saved(path: str, *, input_shape, num_classes: int, task: str = "classification",
               num_outputs=None):
    """Loads model.path (a .keras file) uncompiled, and checks it fits the data's inputs
    and the task's output width."""

    where = f"model.path {path!r}"
    try:
        model = keras.saving.load_model(path, compile=False)
    except Exception as error:  # a bad file or an unknown custom layer
        raise UserInputError(f"{where} cannot be loaded: {type(error).__name__}: "
                             f"{_first_line(error)}") from None
    check_model_fits(model, where=where, input_shape=input_shape,
                     num_classes=num_classes, task=task, num_outputs=num_outputs)
    return model


def from_given(given, *, input_shape, num_classes: int, params: dict,
               task: str = "classification", num_outputs=None):
    """`train(model=...)`: a builder is called; a built model is cloned into the scope.

    A built model's variables live where it was built; a multi-replica strategy needs them
    created in its scope, so the model is cloned here (`keras.models.clone_model`, which
    rebuilds each layer from its config, dtype policy included) and given the original's
    weights. The caller's model is left untouched.
    """
    if not _is_model(given):
        name = getattr(given, "__qualname__", type(given).__name__)
        return call_builder(given, where=f"train(model=...) builder {name}",
                            input_shape=input_shape, num_classes=num_classes, params=params,
                            task=task, num_outputs=num_outputs)

    where = f"train(model=...) model {given.name!r}"
    if params:
        raise UserInputError(f"{where} is built already: model.params {params!r} would be "
                             "ignored; leave them out, or pass a builder.")
    check_model_fits(given, where=where, input_shape=input_shape,
                     num_classes=num_classes, task=task, num_outputs=num_outputs)
    try:
        clone = keras.models.clone_model(given)
    except Exception as error:  # a subclassed model may not clone
        raise UserInputError(
            f"{where} cannot be cloned into the strategy's scope ({type(error).__name__}: "
            f"{_first_line(error)}); pass a builder callable instead, "
            "train(model=lambda input_shape, num_classes: MyModel(...)).") from None
    clone.set_weights(given.get_weights())
    return clone


def _is_model(value) -> bool:

    return isinstance(value, keras.Model)


def _first_line(error) -> str:
    lines = [line for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__
