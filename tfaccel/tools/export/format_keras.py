"""The Keras file format (model.keras): Keras' int8 quantization, the save and the load."""

from __future__ import annotations

import warnings
from pathlib import Path

from tfaccel.errors import UserInputError
from tfaccel.tools.export.format_runtime import Runtime


def keras_int8(model):
    """A copy of `model` quantized in-framework by Keras (``model.quantize("int8")``).

    Keras 3.15 quantizes Dense, EinsumDense and Embedding layers (int8 weights, activations
    quantized per call); other layers stay float.

    Raises:
        UserInputError: No layer of the model is one Keras can quantize.
    """
    # Deferred: Keras and TensorFlow (seconds); tools/export imports TF-free.
    import keras

    copy = keras.models.clone_model(model)
    copy.set_weights(model.get_weights())
    with warnings.catch_warnings():
        # One warning per layer without int8 support; the report lists what was quantized.
        warnings.filterwarnings("ignore", message=".*does not have a `quantize` method")
        copy.quantize("int8")
    quantized = [layer.name for layer in copy._flatten_layers()
                 if getattr(layer, "quantization_mode", None) == "int8"]
    if not quantized:
        kinds = sorted({type(layer).__name__ for layer in model.layers})
        raise UserInputError(
            "--quantize int8 with Keras: no layer of this model can be quantized (Keras "
            f"quantizes Dense, EinsumDense and Embedding layers; this model has "
            f"{', '.join(kinds)}). Use --format litert --quantize int8.")
    return copy, {"quantized_layers": quantized}


def convert(model, artifact: Path, *, quantize: str) -> dict:
    """Writes `model` (quantized by Keras if asked) as a .keras file; returns the details."""
    details = {}
    if quantize == "int8":
        model, details = keras_int8(model)
    model.save(artifact)
    return details


def load_runtime(path: Path) -> Runtime:
    """Loads a .keras file with Keras, its call compiled as a served model's would be."""
    # Deferred: Keras and TensorFlow (seconds); tools/export imports TF-free.
    import keras
    import tensorflow as tf

    model = keras.saving.load_model(path, compile=False)
    # Compiled like a served model; eager Python overhead would swamp a small model.
    call = tf.function(lambda x: model(x, training=False), reduce_retracing=True)
    return Runtime(lambda x: call(tf.constant(x)).numpy())
