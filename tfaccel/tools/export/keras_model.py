"""The run's model.keras as the model to export: in float32, its preprocessing split off if asked."""

from __future__ import annotations

import warnings
from pathlib import Path

from tfaccel.errors import UserInputError


def load_float32_model(path: Path):
    """Loads model.keras for inference, in float32 even if it was trained in mixed precision.

    A mixed_bfloat16/float16 model computes in half precision, which LiteRT's and ONNX's
    CPU kernels do not run (or run slowly); its variables are float32 already, so the same
    architecture under a float32 policy with the same weights is the model to deploy.
    """
    # Deferred: Keras and TensorFlow (seconds); tools/export imports TF-free.
    import keras

    with warnings.catch_warnings():
        # A training run's file also holds the optimizer, which inference never needs.
        warnings.filterwarnings("ignore", message=".*Skipping variable loading for optimizer")
        model = keras.saving.load_model(path, compile=False)
    if len(model.inputs) != 1 or len(model.outputs) != 1:
        raise UserInputError(f"{path} has {len(model.inputs)} input(s) and "
                             f"{len(model.outputs)} output(s); export supports models with one "
                             "input and one class-probability output.")
    if all(layer.dtype_policy.name == "float32" for layer in model.layers):
        return model

    def as_float32(layer):
        config = layer.get_config()
        # keras.ops calls between layers (text_cnn's mask, seq_cnn's pooling) are
        # Operations: they take no dtype policy, and a Cast's "dtype" is its target.
        if isinstance(layer, keras.layers.Layer):
            config["dtype"] = "float32"
        return layer.__class__.from_config(config)

    clone = keras.models.clone_model(model, clone_function=as_float32)
    clone.set_weights(model.get_weights())
    return clone


def split_preprocessing(model):
    """Splits `model` into its leading weightless layers and the rest, two Keras models.

    The leading layers are the chain from the input up to the first layer with weights
    (each with one input, feeding only the next); for tfaccel's models, the 1/255 rescaling
    and the per-image standardisation. ``rest(prefix(x))`` equals ``model(x)``.

    Raises:
        UserInputError: The model's first layer has weights (nothing to move out).
    """
    # Deferred: Keras and TensorFlow (seconds); tools/export imports TF-free.
    import keras

    consumers: dict = {}
    for layer in model.layers:
        for node in layer._inbound_nodes:  # Keras' functional graph; no public accessor
            for tensor in node.input_tensors:
                consumers.setdefault(id(tensor), []).append(layer)
    cut, moved = model.inputs[0], []
    while len(consumers.get(id(cut), ())) == 1:
        layer = consumers[id(cut)][0]
        nodes = layer._inbound_nodes
        if (layer.weights or len(nodes) != 1 or len(nodes[0].input_tensors) != 1
                or len(nodes[0].output_tensors) != 1
                or nodes[0].output_tensors[0] is model.outputs[0]):
            break
        moved.append(layer)
        cut = nodes[0].output_tensors[0]
    if not moved:
        first = next((layer for layer in model.layers
                      if not isinstance(layer, keras.layers.InputLayer)), None)
        raise UserInputError(
            "--preprocessing outside: the model has no weightless layers before its first "
            f"layer with weights ({first.name if first else 'none'}: "
            f"{type(first).__name__}); there is no preprocessing to move out. Use "
            "--preprocessing inside.")
    prefix = keras.Model(model.inputs, cut, name="preprocessing")
    # Keras builds a functional model from an intermediate tensor (the cut becomes its
    # input layer); the weights are the original model's own variables.
    rest = keras.Model(cut, model.outputs, name=model.name)
    return prefix, rest


def run_keras(model, features):
    """`model`'s float32 outputs on an array of features."""
    # Deferred: numpy (~0.1 s); tools/export imports TF-free.
    import numpy as np

    return np.asarray(model.predict(features, batch_size=256, verbose=0), "float32")
