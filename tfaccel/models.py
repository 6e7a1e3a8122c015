"""Registry of Keras model builders that recipes name; importable without TensorFlow.

Every model takes raw pixel values (uint8 or float in [0, 255]) and normalises them
itself, so a data pipeline never has to agree with the model on a scale. Every model ends
in a float32 softmax (``dtype="float32"`` on the last Dense layer), so its outputs are
probabilities for ``sparse_categorical_crossentropy`` and stay numerically safe under a
``mixed_float16`` or ``mixed_bfloat16`` policy.
"""

import dataclasses
import math
from typing import Any, Callable, Mapping

from tfaccel.errors import UserInputError, did_you_mean

# keras.applications refuse inputs smaller than this (imagenet_utils.obtain_input_shape).
_APPLICATION_MIN_SIZE = 32
# BatchNorm moving-average momentum of our own builders (Keras' default is 0.99). Validation
# uses the moving statistics; after the ~100 steps of a short run, 0.99 leaves them 37% at
# their initial values and resnet_small's validation accuracy at 0.27 while its batch-stat
# accuracy was 0.52 (and 0.85 vs 0.99 once it learned). 0.9 forgets the start in ~40 steps.
_BN_MOMENTUM = 0.9


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """A registered model: its builder, its parameters with defaults, a one-line summary."""

    build: Callable[..., Any]
    defaults: Mapping[str, Any]
    summary: str
    # What the model takes: "images" (height, width, channels), "features" (any shape, e.g.
    # the MLP), "sequences" (timesteps, channels) of floats where timesteps may be None
    # (audio waveforms, time-series windows) or "tokens" (int ids of any length, 0 = padding).
    inputs: str = "images"


# --------------------------------------------------------------------------- helpers


# The last layer of every registered model, by task (tfaccel.reading.labels.TASKS).
_HEAD_ACTIVATIONS = {"classification": "softmax", "binary": "sigmoid",
                     "multi_label": "sigmoid", "regression": None}


def _output_head(keras, x, *, task, num_outputs, dropout):
    """Dropout then the task's float32 Dense, whatever the global dtype policy is:
    a softmax over the classes, one sigmoid (binary), a sigmoid per label (multi_label) or
    linear units (regression)."""
    if task not in _HEAD_ACTIVATIONS:
        raise UserInputError(f"task must be one of {sorted(_HEAD_ACTIVATIONS)}, got {task!r}.")
    if dropout:
        x = keras.layers.Dropout(dropout)(x)
    # float32 output: softmax and the loss computed from it need the range, and Keras
    # casts the inputs of a float32 layer for us.
    return keras.layers.Dense(num_outputs, activation=_HEAD_ACTIVATIONS[task],
                              dtype="float32", name="predictions")(x)


def _conv_bn_relu(keras, x, *, filters, batch_norm, strides=1):
    x = keras.layers.Conv2D(filters, 3, strides=strides, padding="same",
                            use_bias=not batch_norm)(x)
    if batch_norm:
        x = keras.layers.BatchNormalization(momentum=_BN_MOMENTUM)(x)
    return keras.layers.ReLU()(x)


# --------------------------------------------------------------------------- builders


def _build_text_cnn(*, input_shape, num_classes,
                    task="classification", vocab_size, embed_dim, filters, kernel_size,
                    dropout):
    """Embedding, Conv1D layers, masked global max pooling: texts of any length."""
    import keras
    from keras import ops

    del input_shape  # any length: each batch is as long as its own longest text
    ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
    x = keras.layers.Embedding(vocab_size, embed_dim, name="embedding")(ids)
    # Padding (id 0) must not change the result: its embeddings are zeroed, like the
    # convolutions' own zero padding at the ends, and it is left out of the pooling.
    mask = ops.expand_dims(ops.cast(ops.not_equal(ids, 0), x.dtype), -1)
    x = x * mask
    for width in filters:
        x = keras.layers.Conv1D(width, kernel_size, padding="same", activation="relu")(x)
        x = x * ops.cast(mask, x.dtype)
    # ReLU outputs are >= 0, so zeroed padding never wins the max.
    x = ops.max(x, axis=1)
    return keras.Model(ids, _output_head(keras, x, task=task, num_outputs=num_classes,
                                             dropout=dropout), name="text_cnn")


def _build_text_bag(*, input_shape, num_classes,
                    task="classification", vocab_size, embed_dim, dropout):
    """fastText's classifier: the mean of the tokens' embeddings, a softmax layer.

    Order-free, so n-grams (data.text.ngrams) bring the word order it has; Joulin et al.
    2016 measured it with bigrams on par with TF-IDF and a linear classifier. Padding (id
    0) is left out of the mean.
    """
    import keras
    from keras import ops

    del input_shape  # any length: each batch is as long as its own longest text
    ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
    x = keras.layers.Embedding(vocab_size, embed_dim, name="embedding")(ids)
    # The mean of up to hundreds of vectors in float32: bfloat16 sums lose digits.
    x = ops.cast(x, "float32")
    x = _masked_mean(ops, x, ops.expand_dims(ops.cast(ops.not_equal(ids, 0), x.dtype), -1))
    return keras.Model(ids, _output_head(keras, x, task=task, num_outputs=num_classes,
                                             dropout=dropout), name="text_bag")


def _build_text_transformer(*, input_shape, num_classes,
                            task="classification", vocab_size, max_length, embed_dim,
                            num_heads, ff_dim, num_layers, dropout):
    """Token and learned position embeddings, Transformer encoder blocks, masked mean pooling.

    Stock Keras layers and ops only, so a saved model.keras loads without custom objects.
    Texts of any length are taken; the model reads the first `max_length` tokens of each
    (the position embedding has one row per position, and a gather past its end would be
    an error on a CPU and a silent zero on a GPU).
    """
    import keras
    from keras import ops

    del input_shape  # any length: each batch is as long as its own longest text
    ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
    cut = ids[:, :max_length]
    valid = ops.not_equal(cut, 0)  # padding is id 0, at the end of each text
    # 0, 1, ..., length - 1 along each text, from the ids' own (open) length.
    positions = ops.cumsum(ops.ones_like(cut), axis=1) - 1
    x = keras.layers.Embedding(vocab_size, embed_dim, name="embedding")(cut)
    x = x + keras.layers.Embedding(max_length, embed_dim, name="position_embedding")(positions)
    if dropout:
        x = keras.layers.Dropout(dropout)(x)
    # A query attends to real tokens only; padding rows attend to them too and are then
    # left out of the pooling, so padding never reaches a real token or the result.
    attend = ops.logical_and(ops.expand_dims(valid, 1), ops.expand_dims(valid, 2))
    for block in range(num_layers):
        attended = keras.layers.MultiHeadAttention(
            num_heads, embed_dim // num_heads, dropout=dropout,
            name=f"attention_{block}")(x, x, attention_mask=attend)
        x = keras.layers.LayerNormalization(epsilon=1e-6, name=f"norm_{block}_a")(x + attended)
        hidden = keras.layers.Dense(ff_dim, activation="relu", name=f"ff_{block}_in")(x)
        hidden = keras.layers.Dense(embed_dim, name=f"ff_{block}_out")(hidden)
        if dropout:
            hidden = keras.layers.Dropout(dropout)(hidden)
        x = keras.layers.LayerNormalization(epsilon=1e-6, name=f"norm_{block}_b")(x + hidden)
    # Masked mean: the sum over real tokens over their count (at least 1: an empty text
    # pools to zeros rather than NaN).
    weights = ops.expand_dims(ops.cast(valid, x.dtype), -1)
    count = ops.maximum(ops.sum(weights, axis=1), 1.0)
    x = ops.sum(x * weights, axis=1) / count
    return keras.Model(ids, _output_head(keras, x, task=task, num_outputs=num_classes,
                                             dropout=dropout), name="text_transformer")


def _trailing_mask(ops, x):
    """1.0 up to each example's last non-zero timestep, 0.0 after it: ``[batch, time, 1]``.

    A padded batch appends zeros, so the zeros after the last non-zero step are taken as
    padding (a recording's own trailing silence too: it cannot be told from padding).
    """
    nonzero = ops.cast(ops.any(ops.not_equal(x, 0), axis=-1, keepdims=True), "float32")
    # Reverse cumulative sum: > 0 wherever a non-zero step is at or after this one.
    later = ops.flip(ops.cumsum(ops.flip(nonzero, axis=1), axis=1), axis=1)
    return ops.cast(ops.greater(later, 0), "float32")


def _masked_mean(ops, x, mask):
    """Mean over time of the steps `mask` keeps (0 for an example with none)."""
    count = ops.maximum(ops.sum(mask, axis=1), 1.0)
    return ops.sum(x * mask, axis=1) / count


def _build_seq_cnn(*, input_shape, num_classes,
                   task="classification", filters, kernel_size, strides, standardize,
                   dropout, input_mean=None, input_std=None):
    """Masked per-example standardisation, strided causal Conv1D stages, masked pooling.

    Predictions do not depend on zeros appended at the end (a padded batch): the mask
    drops them from the statistics and the pooling, and causal convolutions (padded on the
    left only, by an amount that does not depend on the length) compute every kept step
    from kept steps alone. Equal up to float rounding; tests/test_models_sequence.py.
    """
    import keras
    from keras import ops

    inputs = keras.Input(shape=input_shape, name="sequence")
    x = ops.cast(inputs, "float32")
    mask = _trailing_mask(ops, x)
    level = None
    if standardize:
        # Each example, each channel, to mean 0 and variance 1 over its own steps: raw WAV
        # floats in [-1, 1] and raw time-series values (any scale) alike. Computed in
        # float32 whatever the policy, before the first layer casts to it.
        mean = _masked_mean(ops, x, mask)[:, None, :]
        var = _masked_mean(ops, ops.square(x - mean), mask)[:, None, :]
        x = (x - mean) * ops.rsqrt(var + 1e-6) * mask
        if input_mean is not None:
            # That removes the window's level and scale, which a series' classes may be
            # (a temperature binned into classes): given the training rows' statistics,
            # they return as features, standardised by them (docs/engine.md).
            level = _window_level(ops, mean[:, 0, :], ops.sqrt(var[:, 0, :]),
                                  input_mean=input_mean, input_std=input_std)
    for width in filters:
        x = keras.layers.Conv1D(width, kernel_size, strides=strides, padding="causal",
                                activation="relu")(x)
        # Step j of a strided causal layer is computed from input steps up to j * strides:
        # it is kept when that step was.
        mask = mask[:, ::strides, :]
    # Pooled in float32: a mean over thousands of steps in bfloat16 would lose digits.
    x = ops.cast(x, "float32")
    # ReLU outputs are >= 0, so the zeroed dropped steps never win the max.
    pooled = [_masked_mean(ops, x, mask), ops.max(x * mask, axis=1)]
    x = keras.layers.Concatenate()(pooled + ([] if level is None else [level]))
    return keras.Model(inputs, _output_head(keras, x, task=task, num_outputs=num_classes,
                                                dropout=dropout), name="seq_cnn")


def _window_level(ops, mean, std, *, input_mean, input_std):
    """A window's per-channel mean and standard deviation, standardised by the training
    rows' (`input_mean`, `input_std`, one per channel), float32: ``[batch, 2 * channels]``."""
    centre = ops.convert_to_tensor(input_mean, "float32")
    scale = ops.convert_to_tensor(input_std, "float32")
    return ops.concatenate([(mean - centre) / scale, std / scale], axis=-1)


def _build_forecast_mlp(*, input_shape, num_classes, task="regression", hidden_units,
                        dropout, input_mean=None, input_std=None, target_mean=None,
                        target_std=None, anchor=None):
    """Normalization by the training rows -> each window relative to its last step, plus
    that step (the level) -> Dense layers -> a linear head that also reads those features
    (a linear skip: a ridge-like model plus what the hidden layers add) -> the targets'
    own units.

    With `anchor` (the input channel of each target column: a series forecast from its
    own past), the head predicts the change from the window's last value of that channel,
    standardised by `target_mean`/`target_std` (the statistics of those changes); without
    it, the target itself standardised by them. Statistics come from the training split
    only; a recipe over `source: timeseries` sets them (None: left as they are). Unlike
    seq_cnn's per-window standardisation, a window keeps its level.
    """
    import keras
    from keras import ops

    if input_shape[0] is None:
        raise UserInputError("model 'forecast_mlp' needs windows of a fixed length, got "
                             f"input_shape {tuple(input_shape)!r}.")
    channels = input_shape[-1]
    inputs = keras.Input(shape=input_shape, name="window")
    raw = ops.cast(inputs, "float32")
    x = raw
    if input_mean is not None:
        _check_width("input_mean", input_mean, channels)
        _check_width("input_std", input_std, channels)
        x = keras.layers.Normalization(axis=-1, mean=list(input_mean),
                                       variance=[v * v for v in input_std], dtype="float32",
                                       name="input_normalization")(x)
    # The window's shape (relative to its last step) and its level apart: the level is
    # large and common to every step, and a linear layer on raw steps learns the small
    # differences that carry the forecast slowly (badly conditioned).
    last = x[:, -1, :]
    shape = keras.layers.Flatten()(x - last[:, None, :])
    features = keras.layers.Concatenate(name="shape_and_level")([shape, last])
    # The hidden layers read the shape only: a level outside the training rows' range (a
    # trend) then reaches the forecast through the linear head alone, not through ReLUs
    # fitted to levels seen in training.
    h = shape
    for units in hidden_units:
        h = keras.layers.Dense(units, activation="relu")(h)
        if dropout:
            h = keras.layers.Dropout(dropout)(h)
    h = keras.layers.Concatenate(name="hidden_and_window")([ops.cast(h, "float32"), features])
    outputs = _output_head(keras, h, task=task, num_outputs=num_classes, dropout=0.0)
    if task != "regression":
        return keras.Model(inputs, outputs, name="forecast_mlp")
    if target_mean is not None:
        _check_width("target_mean", target_mean, num_classes)
        _check_width("target_std", target_std, num_classes)
        outputs = keras.layers.Normalization(
            axis=-1, mean=list(target_mean), variance=[v * v for v in target_std],
            invert=True, dtype="float32", name="target_units")(outputs)
    if anchor is not None:
        if not anchor or num_classes % len(anchor) or max(anchor) >= channels:
            raise UserInputError(
                f"model 'forecast_mlp' parameter 'anchor' must name one input channel (0 to "
                f"{channels - 1}) per target column, and {num_classes} outputs a whole "
                f"number of steps of them; got {list(anchor)!r}.")
        # Step-major outputs (each step's target columns together): the last values of the
        # anchor channels, repeated once per step.
        level = ops.tile(ops.take(raw[:, -1, :], list(anchor), axis=-1),
                         [1, num_classes // len(anchor)])
        outputs = keras.layers.Add(name="from_last_value", dtype="float32")([outputs, level])
    return keras.Model(inputs, outputs, name="forecast_mlp")


def _check_width(key, values, width):
    if values is None or len(values) != width:
        raise UserInputError(f"model parameter {key!r} needs {width} values (one per "
                             f"{'channel' if key.startswith('input') else 'output'}), got "
                             f"{values!r}.")


def _build_mlp(*, input_shape, num_classes,
               task="classification", hidden_units, dropout, normalization, l2=0.0,
               linear_path=False):
    import keras

    inputs = keras.Input(shape=input_shape)
    x = keras.layers.Flatten()(inputs)
    if normalization == "rescale":
        x = _rescale_pixels(keras, x)  # raw 0-255 pixels
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
        outputs = _output_head(keras, h, task=task, num_outputs=num_classes, dropout=0.0)
        return keras.Model(inputs, outputs, name="mlp")
    z = keras.layers.Dense(num_classes, kernel_regularizer=penalty, name="deep")(h)
    if linear_path:
        # "Wide and deep": the inputs' own linear map added to the deep part's, so the
        # model holds a logistic / linear regression on its features (tables' default).
        wide = keras.layers.Dense(num_classes, kernel_regularizer=penalty, name="wide")(x)
        z = keras.layers.Add(name="wide_and_deep")([z, wide])
    outputs = keras.layers.Activation(_HEAD_ACTIVATIONS[task] or "linear", dtype="float32",
                                      name="predictions")(z)
    return keras.Model(inputs, outputs, name="mlp")


def _rescale_pixels(keras, x):
    """0-255 pixels to [0, 1]."""
    # Named, so a saved model and export.json name it the same in every process (Keras
    # numbers unnamed layers per process: "rescaling_6" after other models were built).
    return keras.layers.Rescaling(1.0 / 255, name="rescaling")(x)


def _normalize_pixels(keras, inputs, *, normalization):
    """Maps raw 0-255 pixels to the scale the first layer expects."""
    if normalization == "none":
        return inputs
    x = _rescale_pixels(keras, inputs)
    if normalization == "per_image":
        # Per-image, per-channel standardisation (what tf.image.per_image_standardization
        # does), written as a stock layer so saved models load without custom objects.
        # It removes each image's colour cast: on tfaccel_shapes a CNN fed only 1/255-scaled
        # pixels sat at chance for 4+ epochs, while this trained to 0.94 in 3.
        x = keras.layers.LayerNormalization(axis=(1, 2), center=False, scale=False,
                                            epsilon=1e-3, name="per_image_standardization")(x)
    return x


def _build_small_cnn(*, input_shape, num_classes,
                     task="classification", filters, dense_units, dropout, batch_norm,
                     normalization):
    import keras

    inputs = keras.Input(shape=input_shape)
    x = _normalize_pixels(keras, inputs, normalization=normalization)
    for stage, width in enumerate(filters):
        x = _conv_bn_relu(keras, x, filters=width, batch_norm=batch_norm)
        # Keep the last stage's resolution for global pooling; pool between stages.
        if stage < len(filters) - 1:
            x = keras.layers.MaxPooling2D()(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    if dense_units:
        x = keras.layers.Dense(dense_units, activation="relu")(x)
    outputs = _output_head(keras, x, task=task, num_outputs=num_classes, dropout=dropout)
    return keras.Model(inputs, outputs, name="small_cnn")


def _residual_block(keras, x, *, filters, strides):
    """Pre-activation-free basic block (two 3x3 convs), projection shortcut when shapes change."""
    shortcut = x
    y = _conv_bn_relu(keras, x, filters=filters, batch_norm=True, strides=strides)
    y = keras.layers.Conv2D(filters, 3, padding="same", use_bias=False)(y)
    # Gamma starts at one, not zero ("each block starts as identity", Goyal et al. 2017):
    # that trick is for deep stacks; on this 6-block net it slowed learning to 0.41-0.48
    # validation accuracy where ones reached 0.94-0.96 (3,000 images, 2 epochs, seeds 0-1).
    y = keras.layers.BatchNormalization(momentum=_BN_MOMENTUM)(y)
    if strides != 1 or shortcut.shape[-1] != filters:
        shortcut = keras.layers.Conv2D(filters, 1, strides=strides, use_bias=False)(shortcut)
        shortcut = keras.layers.BatchNormalization(momentum=_BN_MOMENTUM)(shortcut)
    return keras.layers.ReLU()(keras.layers.Add()([y, shortcut]))


def _build_resnet_small(*, input_shape, num_classes,
                        task="classification", width, stages, blocks_per_stage, dropout,
                        normalization):
    import keras

    inputs = keras.Input(shape=input_shape)
    # Per-image standardisation by default, like small_cnn: with 1/255 scaling alone this
    # net sat at chance on tfaccel_shapes (train and validation accuracy 0.24-0.26 after
    # 2 epochs), its random background colours and gradients drowning the shapes.
    x = _normalize_pixels(keras, inputs, normalization=normalization)
    x = _conv_bn_relu(keras, x, filters=width, batch_norm=True)
    for stage in range(stages):
        filters = width * 2**stage
        for block in range(blocks_per_stage):
            strides = 2 if (stage > 0 and block == 0) else 1
            x = _residual_block(keras, x, filters=filters, strides=strides)
    x = keras.layers.GlobalAveragePooling2D()(x)
    outputs = _output_head(keras, x, task=task, num_outputs=num_classes, dropout=dropout)
    return keras.Model(inputs, outputs, name="resnet_small")


def _application_input(keras, *, input_shape, image_size):
    """Input, resized when smaller than keras.applications accept (or to `image_size`)."""
    inputs = keras.Input(shape=input_shape)
    height, width = input_shape[0], input_shape[1]
    if image_size is None:
        target = (max(height, _APPLICATION_MIN_SIZE), max(width, _APPLICATION_MIN_SIZE))
    else:
        target = (image_size, image_size)
    x = inputs
    if target != (height, width):
        x = keras.layers.Resizing(*target)(x)
    return inputs, x, (*target, input_shape[2])


def _set_batchnorm_momentum(keras, model, momentum):
    """Sets every BatchNormalization layer's moving-average momentum (saved in its config)."""
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if isinstance(layer, keras.layers.BatchNormalization):
            layer.momentum = momentum


def _build_application(family, *, input_shape, num_classes,
                       task="classification", image_size, dropout, normalization,
                       bn_momentum, **kwargs):
    """A keras.applications backbone (weights=None) between our normalisation and head.

    Keras' own set-up did not learn tfaccel_shapes: MobileNetV3Small with its [-1, 1]
    rescaling and BatchNorm momentum 0.999 stayed at 0.25 train / 0.26 validation accuracy
    after 2 epochs of 3,000 images. With per-image standardisation and momentum 0.9 (the two
    fixes that made resnet_small learn) it reached 0.948 validation accuracy in 10 epochs of
    the default recipe (12,000 images, 262 s on 2 shared CPU cores), EfficientNetB0 0.871
    in 8 epochs (733 s). ResNet50 with the same fixes learns too, slowly from scratch:
    validation accuracy 0.32 -> 0.55 over 6 epochs of 6,000 images (about an hour on 2
    CPU cores at 5 s a step of 64).
    """
    import keras

    inputs, x, backbone_shape = _application_input(
        keras, input_shape=input_shape, image_size=image_size
    )
    x = _normalize_pixels(keras, x, normalization=normalization)
    if family == "mobilenet_v3_small":
        kwargs["include_preprocessing"] = False  # ours instead of its [-1, 1] Rescaling
    if family == "efficientnet_b0" and normalization != "none":
        # EfficientNet always divides its input by 255 itself (no switch to turn it off).
        x = keras.layers.Rescaling(255.0, name="undo_efficientnet_rescaling")(x)
    constructor = {
        "mobilenet_v3_small": keras.applications.MobileNetV3Small,
        "efficientnet_b0": keras.applications.EfficientNetB0,
        "resnet50": keras.applications.ResNet50,
    }[family]
    # Our own head instead of include_top: it keeps the last layer in float32 and the class
    # count free. weights=None: no downloads, ever.
    backbone = constructor(include_top=False, weights=None, input_shape=backbone_shape,
                           pooling="avg", **kwargs)
    _set_batchnorm_momentum(keras, backbone, bn_momentum)
    x = backbone(x)
    outputs = _output_head(keras, x, task=task, num_outputs=num_classes, dropout=dropout)
    return keras.Model(inputs, outputs, name=family)


def _application(family):
    def build(**params):
        return _build_application(family, **params)

    return build


MODELS = {
    "mlp": ModelSpec(
        _build_mlp,
        {"hidden_units": (256, 128), "dropout": 0.2, "normalization": "rescale", "l2": 0.0,
         "linear_path": False},
        "Flatten + Dense layers; a baseline for tiny images or plain feature vectors "
        "(normalization: none); linear_path adds the inputs' linear map to the head (on by "
        "default for tables), l2 an L2 penalty on every kernel.",
        inputs="features",
    ),
    "text_cnn": ModelSpec(
        _build_text_cnn,
        {"vocab_size": None, "embed_dim": 64, "filters": (128, 128), "kernel_size": 5,
         "dropout": 0.2},
        "Token ids (0 = padding) -> Embedding, Conv1D layers, masked global max pooling, "
        "softmax; vocab_size follows a recipe's adapted vocabulary when left empty.",
        inputs="tokens",
    ),
    "text_bag": ModelSpec(
        _build_text_bag,
        {"vocab_size": None, "embed_dim": 64, "dropout": 0.2},
        "Token ids (0 = padding) -> Embedding, masked mean (fastText's bag of embeddings; "
        "with data.text.ngrams 2 a match for TF-IDF and a linear classifier on short "
        "texts), softmax; vocab_size follows a recipe's adapted vocabulary when left empty.",
        inputs="tokens",
    ),
    "text_transformer": ModelSpec(
        _build_text_transformer,
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
        _build_seq_cnn,
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
        _build_forecast_mlp,
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
        _build_small_cnn,
        # Defaults tuned on tfaccel_shapes (2 CPU cores, mixed_bfloat16, Adam 2e-3, batch
        # 64, 6 epochs: 0.97-0.99 validation accuracy over seeds 0-2). BatchNorm is off by
        # default: Keras' BatchNormalization made this net 3.5x slower on that CPU.
        {"filters": (16, 32, 64), "dense_units": 64, "dropout": 0.0,
         "normalization": "per_image", "batch_norm": False},
        "Conv-ReLU stages with max pooling, global average pooling, Dense, softmax.",
    ),
    "resnet_small": ModelSpec(
        _build_resnet_small,
        {"width": 16, "stages": 3, "blocks_per_stage": 2, "dropout": 0.0,
         "normalization": "per_image"},
        "CIFAR-style ResNet: `stages` stages of `blocks_per_stage` residual blocks.",
    ),
    "mobilenet_v3_small": ModelSpec(
        _application("mobilenet_v3_small"),
        {"image_size": None, "alpha": 1.0, "dropout": 0.2, "normalization": "per_image",
         "bn_momentum": _BN_MOMENTUM},
        "keras.applications.MobileNetV3Small, weights=None.",
    ),
    "efficientnet_b0": ModelSpec(
        _application("efficientnet_b0"),
        {"image_size": None, "dropout": 0.2, "normalization": "per_image",
         "bn_momentum": _BN_MOMENTUM},
        "keras.applications.EfficientNetB0, weights=None.",
    ),
    "resnet50": ModelSpec(
        _application("resnet50"),
        {"image_size": None, "dropout": 0.0, "normalization": "per_image",
         "bn_momentum": _BN_MOMENTUM},
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


# String-valued parameters and the values they accept.
_CHOICES = {"normalization": ("per_image", "rescale", "none")}
# Integer parameters where 0 is meaningful ("leave this part out"); others start at 1.
_INT_MINIMUM = {"dense_units": 0}


# Per-channel or per-output statistics of the training split (source timeseries sets them).
_STATISTICS = ("input_mean", "input_std", "target_mean", "target_std")


def _check_statistics(where, key, value):
    if value is None:
        return None
    numbers = value if isinstance(value, (list, tuple)) else None
    if not numbers or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                              and math.isfinite(v) for v in numbers) \
            or (key.endswith("_std") and min(numbers) <= 0):
        kind = "positive numbers" if key.endswith("_std") else "finite numbers"
        raise UserInputError(f"{where} must be null (set from the training data) or a "
                             f"non-empty list of {kind}, got {value!r}.")
    return tuple(float(v) for v in numbers)


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _check_param(model, key, value, default):
    """Returns `value` converted to the default's kind, or raises naming the parameter."""
    where = f"model {model!r} parameter {key!r}"
    if isinstance(default, tuple):
        if (not isinstance(value, (list, tuple)) or not value
                or not all(_is_int(v) and v > 0 for v in value)):
            raise UserInputError(
                f"{where} must be a non-empty list of positive integers, got {value!r}."
            )
        return tuple(value)
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise UserInputError(f"{where} must be true or false, got {value!r}.")
        return value
    if key in _CHOICES:
        if value not in _CHOICES[key]:
            raise UserInputError(
                f"{where} must be one of {', '.join(map(repr, _CHOICES[key]))}, got {value!r}"
                f"{did_you_mean(value, _CHOICES[key])}."
            )
        return value
    if key == "dropout":
        if not (isinstance(value, (int, float)) and not isinstance(value, bool)
                and 0 <= value < 1):
            raise UserInputError(f"{where} must be a number in [0, 1), got {value!r}.")
        return float(value)
    if key == "l2":
        if not (isinstance(value, (int, float)) and not isinstance(value, bool)
                and 0 <= value < math.inf):
            raise UserInputError(f"{where} must be a number >= 0, got {value!r}.")
        return float(value)
    if key == "bn_momentum":
        if not (isinstance(value, (int, float)) and not isinstance(value, bool)
                and 0 <= value < 1):
            raise UserInputError(f"{where} must be a number in [0, 1), got {value!r}.")
        return float(value)
    if key == "vocab_size":
        if value is not None and not (_is_int(value) and value >= 3):
            raise UserInputError(f"{where} must be null (the adapted vocabulary's size) or an "
                                 f"integer >= 3, got {value!r}.")
        return value
    if key in _STATISTICS:
        return _check_statistics(where, key, value)
    if key == "anchor":
        if value is not None and not (isinstance(value, (list, tuple)) and value
                                      and all(_is_int(v) and v >= 0 for v in value)):
            raise UserInputError(f"{where} must be null or a non-empty list of input channel "
                                 f"indices (integers >= 0), got {value!r}.")
        return None if value is None else tuple(value)
    if key == "image_size":
        if value is not None and not (_is_int(value) and value >= _APPLICATION_MIN_SIZE):
            raise UserInputError(
                f"{where} must be null (input size, at least {_APPLICATION_MIN_SIZE}) or an "
                f"integer >= {_APPLICATION_MIN_SIZE}, got {value!r}."
            )
        return value
    if isinstance(default, float):
        if not (isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0):
            raise UserInputError(f"{where} must be a positive number, got {value!r}.")
        return float(value)
    if _is_int(default):
        minimum = _INT_MINIMUM.get(key, 1)
        if not (_is_int(value) and value >= minimum):
            raise UserInputError(f"{where} must be an integer >= {minimum}, got {value!r}.")
        return value
    return value


_EXPECTED_SHAPES = {"images": "(height, width, channels)", "features": "a shape",
                    "sequences": "(timesteps, channels), timesteps None for any length"}


def _check_shape(input_shape, *, inputs="images"):
    shape = tuple(input_shape) if isinstance(input_shape, (list, tuple)) else None
    rank = {"images": 3, "sequences": 2}.get(inputs)
    rank_ok = shape is not None and (len(shape) == rank if rank else len(shape) >= 1)
    # Only a sequence's length may be open (each batch as long as its own longest).
    sizes = shape[1:] if rank_ok and inputs == "sequences" and shape[0] is None else shape
    if not rank_ok or not all(_is_int(d) and d > 0 for d in sizes):
        expected = _EXPECTED_SHAPES[inputs]
        fix = ""
        if inputs == "images" and shape is not None and len(shape) == 2:
            # Keras' grey-scale datasets (MNIST) are (N, H, W): the usual way to get here.
            fix = (f": grey-scale images need a channel axis, {(*shape, 1)!r} (data.source "
                   "arrays adds it to integer (N, H, W) arrays; give float ones as "
                   "x[..., None])")
        raise UserInputError(
            f"input_shape must be {expected} of positive integers, got {input_shape!r}"
            f"{fix}."
        )
    return shape


def _check_classes(num_classes, task="classification"):
    if task == "classification":
        if not (_is_int(num_classes) and num_classes >= 2):
            raise UserInputError(f"num_classes must be an integer >= 2, got {num_classes!r}.")
    elif not (_is_int(num_classes) and num_classes >= 1):
        raise UserInputError(f"num_outputs must be an integer >= 1 for task {task!r}, got "
                             f"{num_classes!r}.")


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
    _check_classes(width, task)
    if spec.inputs == "tokens":
        if merged.get("vocab_size") is None:
            raise UserInputError(f"model {name!r} needs vocab_size (the number of token ids); "
                                 "a recipe sets it from the adapted vocabulary.")
        return spec.build(input_shape=input_shape, num_classes=width, task=task, **merged)
    # The MLP flattens whatever it gets; sequence models take (timesteps, channels).
    shape = _check_shape(input_shape, inputs=spec.inputs)
    return spec.build(input_shape=shape, num_classes=width, task=task, **merged)


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
    checked = {key: _check_param(name, key, params.get(key, default), default)
               for key, default in spec.defaults.items()}
    if "num_heads" in checked and checked["embed_dim"] % checked["num_heads"]:
        # Each head gets embed_dim / num_heads of the width.
        raise UserInputError(
            f"model {name!r} parameter 'embed_dim' must be a multiple of 'num_heads', got "
            f"embed_dim={checked['embed_dim']!r} and num_heads={checked['num_heads']!r}.")
    return checked


# --------------------------------------------------------------------------- own models

# What a builder is always called with; `model.params` adds the rest.
_BUILDER_ARGUMENTS = ("input_shape", "num_classes")
# What a builder is also told when its signature names them: the task of the labels and
# the width of the output its last layer must have.
_TASK_ARGUMENTS = ("task", "num_outputs")
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


def builder_arguments(builder):
    """The names a model builder is called with beyond model.params: ``input_shape`` and
    ``num_classes`` always, ``task`` and ``num_outputs`` when its signature names them."""
    import inspect

    try:
        named = inspect.signature(builder).parameters
    except (TypeError, ValueError):
        return _BUILDER_ARGUMENTS
    return _BUILDER_ARGUMENTS + tuple(a for a in _TASK_ARGUMENTS if a in named)


def check_builder_params(builder, params, *, where):
    """Checks `params` against a model builder's signature, before it is called.

    Args:
      builder: The callable (``model.name: module:callable``, or `tfaccel.train(model=...)`).
      params: ``model.params``.
      where: How messages name the builder, e.g. ``"model.name 'convnet.py:build'"``.

    Raises:
      UserInputError: The builder takes no ``input_shape=``/``num_classes=``, a parameter it
        does not take (with a did-you-mean), one the data sets, or a required one missing.
    """
    import inspect

    try:
        signature = inspect.signature(builder)
    except (TypeError, ValueError):
        return  # a callable without a signature (a C function): its call says what is wrong
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    named = {n: p for n, p in signature.parameters.items() if p.kind in kinds}
    open_keywords = any(p.kind is inspect.Parameter.VAR_KEYWORD
                        for p in signature.parameters.values())
    from_data = _BUILDER_ARGUMENTS + _TASK_ARGUMENTS
    taken = sorted(set(params) & set(from_data))
    if taken:
        raise UserInputError(f"{where}: model.params {taken[0]!r} is set from the data; "
                             "leave it out of model.params.")
    missing = [a for a in _BUILDER_ARGUMENTS if a not in named and not open_keywords]
    if missing:
        raise UserInputError(f"{where}: the builder {builder.__name__}{signature} must take "
                             f"{missing[0]}= (it is called with input_shape=, num_classes= "
                             "and model.params, and with task= and num_outputs= when it "
                             "names them).")
    own = sorted(set(named) - set(from_data))
    unknown = [] if open_keywords else sorted(set(params) - set(named))
    if unknown:
        key = unknown[0]
        raise UserInputError(f"Unknown parameter {key!r}{did_you_mean(key, own)} for {where}. "
                             f"Known parameters: {', '.join(own) or '(none)'}.")
    required = [n for n in own if named[n].default is inspect.Parameter.empty
                and n not in params]
    if required:
        raise UserInputError(f"{where}: the builder needs parameter {required[0]!r}, which "
                             "has no default: set it in model.params.")


def build_own_model(builder, *, where, input_shape, num_classes, params,
                    task="classification", num_outputs=None):
    """Calls a user's model builder and checks what it returns fits the data.

    The builder is called with ``input_shape=``, ``num_classes=`` and ``model.params``,
    and with ``task=`` and ``num_outputs=`` when its signature names them (a builder
    written before tasks keeps working). ``num_classes`` is the number of classes
    (classification; 2 for binary), of labels (multi_label) or of targets (regression);
    ``num_outputs`` is the width the model's last layer must have: the classes, 1 for
    binary (one sigmoid), the labels, the targets.

    Args:
      builder: A callable ``builder(*, input_shape, num_classes, [task, num_outputs,]
        **params)``.
      where: How messages name it (the recipe key and value, or the builder's name).
      input_shape: One example's shape, as the data reports it.
      num_classes: The data's classes (labels, targets: see above).
      params: ``model.params``, passed as keyword arguments.
      task: classification, binary, multi_label or regression.
      num_outputs: The output width (None: num_classes).

    Returns:
      The `keras.Model` the builder returned.

    Raises:
      UserInputError: A parameter the builder does not take, a builder that raised (its
        exception's type and message), or a result that is no keras.Model or does not fit
        the data's inputs and labels.
    """
    check_builder_params(builder, params, where=where)
    shape = tuple(input_shape)
    width = num_classes if num_outputs is None else num_outputs
    told = {"input_shape": shape, "num_classes": num_classes, "task": task,
            "num_outputs": width}
    told = {name: told[name] for name in builder_arguments(builder)}
    try:
        model = builder(**told, **params)
    except Exception as error:  # the user's code may raise anything
        raise UserInputError(
            f"{where} raised {type(error).__name__}: {error} (called with "
            + ", ".join(f"{k}={v!r}" for k, v in {**told, **params}.items()) + ").") from None
    check_model_fits(model, where=where, input_shape=shape, num_classes=num_classes,
                     task=task, num_outputs=width)
    return model


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
