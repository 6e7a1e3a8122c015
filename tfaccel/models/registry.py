"""Registry of Keras model builders that recipes name; importable without TensorFlow.

Every model takes raw pixel values (uint8 or float in [0, 255]) and normalises them
itself, so a data pipeline never has to agree with the model on a scale. Every model ends
in its task's float32 head (``dtype="float32"`` on the last Dense layer, models/task_head.py),
so its outputs stay numerically safe under a ``mixed_float16`` or ``mixed_bfloat16`` policy.
"""

import dataclasses
import importlib
from typing import Any, Mapping

from tfaccel.errors import UserInputError, did_you_mean
from tfaccel.models.defaults import BN_MOMENTUM
from tfaccel.models.param_checks import check_classes, check_param, check_shape


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """A registered model: its builder, its parameters with defaults, a one-line summary."""

    # "module:function" of the builder, in a module of this package (one per family:
    # image_cnns, text_models, ...). A name, not the function: those modules import Keras,
    # which this table and `tfaccel validate` do without.
    builder: str
    defaults: Mapping[str, Any]
    summary: str
    # What the model takes: "images" (height, width, channels), "features" (any shape, e.g.
    # the MLP), "sequences" (timesteps, channels) of floats where timesteps may be None
    # (audio waveforms, time-series windows) or "tokens" (int ids of any length, 0 = padding).
    inputs: str = "images"


MODELS = {
    "mlp": ModelSpec(
        "tfaccel.models.feature_models:build_mlp",
        {"hidden_units": (256, 128), "dropout": 0.2, "normalization": "rescale", "l2": 0.0,
         "linear_path": False, "members": 1},
        "Flatten + Dense layers; a baseline for tiny images or plain feature vectors "
        "(normalization: none); linear_path adds the inputs' linear map to the head (on by "
        "default for tables), members averages that many hidden stacks (5 by default for "
        "classification tables), l2 an L2 penalty on every kernel.",
        inputs="features",
    ),
    "text_cnn": ModelSpec(
        "tfaccel.models.text_models:build_text_cnn",
        {"vocab_size": None, "embed_dim": 64, "filters": (128, 128), "kernel_size": 5,
         "dropout": 0.2},
        "Token ids (0 = padding) -> Embedding, Conv1D layers, masked global max pooling, "
        "softmax; vocab_size follows a recipe's adapted vocabulary when left empty.",
        inputs="tokens",
    ),
    "text_bag": ModelSpec(
        "tfaccel.models.text_models:build_text_bag",
        {"vocab_size": None, "embed_dim": 64, "dropout": 0.2},
        "Token ids (0 = padding) -> Embedding, masked mean (fastText's bag of embeddings; "
        "with data.text.ngrams 2 a match for TF-IDF and a linear classifier on short "
        "texts), softmax; vocab_size follows a recipe's adapted vocabulary when left empty.",
        inputs="tokens",
    ),
    "text_transformer": ModelSpec(
        "tfaccel.models.text_models:build_text_transformer",
        # Small enough for 2 CPU cores: one block of 2 heads over 64-wide embeddings.
        {"vocab_size": None, "max_length": 512, "embed_dim": 64, "num_heads": 2,
         "ff_dim": 128, "num_layers": 1, "dropout": 0.1},
        "Token ids (0 = padding) -> token + learned position Embedding, Transformer "
        "encoder blocks (MultiHeadAttention masked to real tokens, feed-forward, "
        "LayerNormalization), masked mean pooling, softmax; reads the first max_length "
        "tokens (a recipe's data.text.max_length when set).",
        inputs="tokens",
    ),
    "seq_cnn": ModelSpec(
        "tfaccel.models.sequence_models:build_seq_cnn",
        {"filters": (32, 64, 128), "kernel_size": 9, "strides": 4, "standardize": True,
         "dropout": 0.1, "input_mean": None, "input_std": None},
        "Sequences (timesteps, channels) of any length: per-example standardisation, strided "
        "causal Conv1D stages, masked mean and max pooling, softmax; trailing zeros "
        "(padding) do not change a prediction. With input_mean/input_std (set from the "
        "training rows for source timeseries) each window's level and scale are features "
        "too.",
        inputs="sequences",
    ),
    "forecast_mlp": ModelSpec(
        "tfaccel.models.forecast_models:build_forecast_mlp",
        {"hidden_units": (64,), "dropout": 0.0, "input_mean": None, "input_std": None,
         "target_mean": None, "target_std": None, "anchor": None},
        "Fixed-length windows (timesteps, channels) -> Normalization by the training rows "
        "-> each window relative to its last step, plus that level -> Dense layers -> a "
        "linear head over the hidden units and those features (a linear skip) -> the "
        "targets' units (with anchor: the change from the last value); for forecasting "
        "(source timeseries with data.timeseries.horizon sets the statistics and anchor).",
        inputs="sequences",
    ),
    "small_cnn": ModelSpec(
        "tfaccel.models.image_cnns:build_small_cnn",
        # Defaults tuned on tfaccel_shapes (2 CPU cores, mixed_bfloat16, Adam 2e-3, batch
        # 64, 6 epochs: 0.97-0.99 validation accuracy over seeds 0-2). BatchNorm is off by
        # default: Keras' BatchNormalization made this net 3.5x slower on that CPU.
        {"filters": (16, 32, 64), "dense_units": 64, "dropout": 0.0,
         "normalization": "per_image", "batch_norm": False},
        "Conv-ReLU stages with max pooling, global average pooling, Dense, softmax.",
    ),
    "resnet_small": ModelSpec(
        "tfaccel.models.image_cnns:build_resnet_small",
        {"width": 16, "stages": 3, "blocks_per_stage": 2, "dropout": 0.0,
         "normalization": "per_image"},
        "CIFAR-style ResNet: `stages` stages of `blocks_per_stage` residual blocks.",
    ),
    "mobilenet_v3_small": ModelSpec(
        "tfaccel.models.image_cnns:build_mobilenet_v3_small",
        {"image_size": None, "alpha": 1.0, "dropout": 0.2, "normalization": "per_image",
         "bn_momentum": BN_MOMENTUM},
        "keras.applications.MobileNetV3Small, weights=None.",
    ),
    "efficientnet_b0": ModelSpec(
        "tfaccel.models.image_cnns:build_efficientnet_b0",
        {"image_size": None, "dropout": 0.2, "normalization": "per_image",
         "bn_momentum": BN_MOMENTUM},
        "keras.applications.EfficientNetB0, weights=None.",
    ),
    "resnet50": ModelSpec(
        "tfaccel.models.image_cnns:build_resnet50",
        {"image_size": None, "dropout": 0.0, "normalization": "per_image",
         "bn_momentum": BN_MOMENTUM},
        "keras.applications.ResNet50, weights=None.",
    ),
}


# --------------------------------------------------------------------------- public API


def model_names():
    """Names of the registered models, sorted.

    Returns:
      A list of strings accepted by `build_model` and `model_params`.
    """
    return sorted(MODELS)


def _spec(name):
    if name not in MODELS:
        raise UserInputError(
            f"Unknown model name {name!r}{did_you_mean(name, MODELS)}. "
            f"Known models: {', '.join(model_names())}; or your own builder, "
            "'module:callable' or 'path/file.py:callable'."
        )
    return MODELS[name]


def model_params(name):
    """The parameters a model accepts, with their defaults.

    Args:
      name: a registered model name.

    Returns:
      A new dict of parameter name -> default value (tuples for lists of ints, None for
      "derived from the data").

    Raises:
      UserInputError: unknown model name (the message suggests the closest one).
    """
    return dict(_spec(name).defaults)


def build_model(name, *, input_shape, num_classes=None, task="classification",
               num_outputs=None, **params):
    """Builds a registered model, uncompiled, under the current Keras dtype policy.

    Args:
      name: a registered model name (see `model_names()`).
      input_shape: (height, width, channels) of one example, e.g. (32, 32, 3).
      num_classes: number of classes of the softmax output (>= 2), for classification.
      task: classification (softmax), binary (one sigmoid), multi_label (a sigmoid per
        label) or regression (linear units): the model's last layer.
      num_outputs: width of the last layer (default: num_classes).
      **params: model parameters; unspecified ones take the defaults of `model_params(name)`.

    Returns:
      A `keras.Model` mapping raw pixels (0-255) to float32 outputs of shape
      (batch, num_outputs): class probabilities, sigmoid probabilities or values.

    Raises:
      UserInputError: unknown model or parameter (with a did-you-mean), a parameter value of
        the wrong type or range, or a bad input shape or class count.
    """
    merged = check_params(name, params)
    spec = _spec(name)
    width = num_outputs if num_outputs is not None else num_classes
    check_classes(width, task)
    if spec.inputs == "tokens":
        if merged.get("vocab_size") is None:
            raise UserInputError(f"model {name!r} needs vocab_size (the number of token ids); "
                                 "a recipe sets it from the adapted vocabulary.")
        return _builder(spec)(input_shape=input_shape, num_classes=width, task=task, **merged)
    # The MLP flattens whatever it gets; sequence models take (timesteps, channels).
    shape = check_shape(input_shape, inputs=spec.inputs)
    return _builder(spec)(input_shape=shape, num_classes=width, task=task, **merged)


def _builder(spec):
    """The builder function a spec names, its module (and Keras with it) imported now."""
    module, function = spec.builder.split(":")
    return getattr(importlib.import_module(module), function)


def check_params(name, params):
    """THE check of a model name and its parameters, without TensorFlow.

    Used by `build_model` and by recipe validation (`tfaccel validate`), so both say the
    same thing about the same mistake.

    Args:
      name: a registered model name.
      params: a mapping of parameter name -> value (unspecified ones take defaults).

    Returns:
      A dict of every parameter with its checked value (lists as tuples).

    Raises:
      UserInputError: unknown model or parameter (with a did-you-mean), or a value of the
        wrong type or range (naming the parameter and the value received).
    """
    spec = _spec(name)
    unknown = sorted(set(params) - set(spec.defaults))
    if unknown:
        key = unknown[0]
        raise UserInputError(
            f"Unknown parameter {key!r}{did_you_mean(key, spec.defaults)} for model "
            f"{name!r}. "
            f"Known parameters: {', '.join(sorted(spec.defaults)) or '(none)'}."
        )
    checked = {key: check_param(name, key, params.get(key, default), default)
               for key, default in spec.defaults.items()}
    if "num_heads" in checked and checked["embed_dim"] % checked["num_heads"]:
        # Each head gets embed_dim / num_heads of the width.
        raise UserInputError(
            f"model {name!r} parameter 'embed_dim' must be a multiple of 'num_heads', got "
            f"embed_dim={checked['embed_dim']!r} and num_heads={checked['num_heads']!r}.")
    return checked
