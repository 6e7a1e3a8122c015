"""The TensorFlow SavedModel format: Keras' export of its serving signature, and its load."""

from __future__ import annotations

from pathlib import Path

from tfaccel.tools.export.format_keras import keras_int8
from tfaccel.tools.export.format_runtime import Runtime


def convert(model, artifact: Path, *, quantize: str) -> dict:
    """Writes `model` (quantized by Keras if asked) as a SavedModel; returns the details."""
    details = {}
    if quantize == "int8":
        model, details = keras_int8(model)
    model.export(str(artifact), format="tf_saved_model", verbose=False)
    return details


def load_runtime(path: Path) -> Runtime:
    """Loads a SavedModel with TensorFlow and calls its serving_default signature."""
    # Deferred: TensorFlow (seconds); tools/export imports TF-free.
    import tensorflow as tf

    loaded = tf.saved_model.load(str(path))
    serve = loaded.signatures["serving_default"]
    key = next(iter(serve.structured_input_signature[1]))
    return Runtime(lambda x: next(iter(serve(**{key: tf.constant(x)}).values())).numpy())
