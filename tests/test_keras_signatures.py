"""config/keras_signatures.py: the TF-free table of Keras' optimizer, schedule, loss and metric
classes and their parameters is exactly what the installed Keras gives (regenerated here)."""

import inspect
from pathlib import Path

import keras
import pytest

from tfaccel.config import keras_names, keras_signatures
from tfaccel.training.keras_objects import keras_classes
from tfaccel.training.keras_objects.arguments import accepted_arguments

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


def test_the_table_module_is_what_the_installed_keras_generates():
    generated = keras_classes.render_table_module(keras_classes.signature_table())
    written = Path(keras_signatures.__file__).read_text()
    assert written == generated, (
        "Keras' classes changed: run `python -m tfaccel.training.keras_objects.keras_classes` "
        "and review the difference of tfaccel/config/keras_signatures.py")


def test_the_table_names_every_recipe_name_and_a_class_behind_each():
    assert set(keras_signatures.CLASSES) == set(keras_classes.KINDS)
    assert set(keras_signatures.CLASSES["optimizer"]) == set(keras_names.OPTIMIZERS)
    assert set(keras_signatures.CLASSES["schedule"]) == set(keras_names.KERAS_SCHEDULES)
    assert set(keras_signatures.CLASSES["loss"]) == set(keras_names.LOSSES)
    assert set(keras_signatures.CLASSES["metric"]) == set(keras_names.METRICS)
    # Aliases name their class: keras.metrics.get("mae") is a MeanAbsoluteError object.
    assert keras_signatures.CLASSES["metric"]["mae"] == "MeanAbsoluteError"
    assert keras_signatures.CLASSES["loss"]["bce"] == "BinaryCrossentropy"
    assert keras_signatures.CLASSES["optimizer"]["schedulefreeadamw"] == "ScheduleFreeAdamW"


@pytest.mark.parametrize("kind, name", [("optimizer", "adam"), ("optimizer", "sgd"),
                                        ("schedule", "PiecewiseConstantDecay"),
                                        ("loss", "mse"), ("metric", "sparse_top_k_categorical_accuracy"),
                                        ("metric", "AUC")])
def test_a_recorded_class_takes_what_the_keras_class_takes(kind, name):
    live, recorded = keras_classes.live_class(kind, name), keras_classes.recorded_class(kind,
                                                                                          name)
    assert recorded.__name__ == live.__name__
    assert accepted_arguments(recorded) == accepted_arguments(live)
    required = [[p.name for p in inspect.signature(c).parameters.values()
                 if p.default is p.empty and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
                for c in (live, recorded)]
    assert required[0] == required[1]
    with pytest.raises(TypeError, match="stand-in"):
        recorded()
    assert keras_classes.live_class("optimizer", "adam") is keras.optimizers.Adam


def test_parameters_round_trip_in_python_notation():
    def f(a, b=1, /, c=2, *args, d, e=3, **kwargs): ...

    def g(x, *, y): ...

    encoded = keras_classes.encode_parameters(inspect.signature(f))
    assert encoded == ("a", "b=", "/", "c=", "*args", "d", "e=", "**kwargs")
    assert str(keras_classes.decode_parameters(encoded)) == \
        "(a, b=..., /, c=..., *args, d, e=..., **kwargs)"
    assert keras_classes.encode_parameters(inspect.signature(g)) == ("x", "*", "y")
    assert str(keras_classes.decode_parameters(("x", "*", "y"))) == "(x, *, y)"
