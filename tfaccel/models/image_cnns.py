"""The image models: small_cnn, resnet_small and keras.applications backbones between our
normalisation and head."""

import keras

from tfaccel.models.defaults import APPLICATION_MIN_SIZE, BN_MOMENTUM
from tfaccel.models.pixels import normalize_pixels
from tfaccel.models.task_head import output_head


def _conv_bn_relu(x, *, filters, batch_norm, strides=1):
    x = keras.layers.Conv2D(filters, 3, strides=strides, padding="same",
                            use_bias=not batch_norm)(x)
    if batch_norm:
        x = keras.layers.BatchNormalization(momentum=BN_MOMENTUM)(x)
    return keras.layers.ReLU()(x)


def build_small_cnn(*, input_shape, num_classes,
                    task="classification", filters, dense_units, dropout, batch_norm,
                    normalization):
    inputs = keras.Input(shape=input_shape)
    x = normalize_pixels(inputs, normalization=normalization)
    for stage, width in enumerate(filters):
        x = _conv_bn_relu(x, filters=width, batch_norm=batch_norm)
        # Keep the last stage's resolution for global pooling; pool between stages.
        if stage < len(filters) - 1:
            x = keras.layers.MaxPooling2D()(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    if dense_units:
        x = keras.layers.Dense(dense_units, activation="relu")(x)
    outputs = output_head(x, task=task, num_outputs=num_classes, dropout=dropout)
    return keras.Model(inputs, outputs, name="small_cnn")


def _residual_block(x, *, filters, strides):
    """Pre-activation-free basic block (two 3x3 convs), projection shortcut when shapes change."""
    shortcut = x
    y = _conv_bn_relu(x, filters=filters, batch_norm=True, strides=strides)
    y = keras.layers.Conv2D(filters, 3, padding="same", use_bias=False)(y)
    # Gamma starts at one, not zero ("each block starts as identity", Goyal et al. 2017):
    # that trick is for deep stacks; on this 6-block net it slowed learning to 0.41-0.48
    # validation accuracy where ones reached 0.94-0.96 (3,000 images, 2 epochs, seeds 0-1).
    y = keras.layers.BatchNormalization(momentum=BN_MOMENTUM)(y)
    if strides != 1 or shortcut.shape[-1] != filters:
        shortcut = keras.layers.Conv2D(filters, 1, strides=strides, use_bias=False)(shortcut)
        shortcut = keras.layers.BatchNormalization(momentum=BN_MOMENTUM)(shortcut)
    return keras.layers.ReLU()(keras.layers.Add()([y, shortcut]))


def build_resnet_small(*, input_shape, num_classes,
                       task="classification", width, stages, blocks_per_stage, dropout,
                       normalization):
    inputs = keras.Input(shape=input_shape)
    # Per-image standardisation by default, like small_cnn: with 1/255 scaling alone this
    # net sat at chance on tfaccel_shapes (train and validation accuracy 0.24-0.26 after
    # 2 epochs), its random background colours and gradients drowning the shapes.
    x = normalize_pixels(inputs, normalization=normalization)
    x = _conv_bn_relu(x, filters=width, batch_norm=True)
    for stage in range(stages):
        filters = width * 2**stage
        for block in range(blocks_per_stage):
            strides = 2 if (stage > 0 and block == 0) else 1
            x = _residual_block(x, filters=filters, strides=strides)
    x = keras.layers.GlobalAveragePooling2D()(x)
    outputs = output_head(x, task=task, num_outputs=num_classes, dropout=dropout)
    return keras.Model(inputs, outputs, name="resnet_small")


def _application_input(*, input_shape, image_size):
    """Input, resized when smaller than keras.applications accept (or to `image_size`)."""
    inputs = keras.Input(shape=input_shape)
    height, width = input_shape[0], input_shape[1]
    if image_size is None:
        target = (max(height, APPLICATION_MIN_SIZE), max(width, APPLICATION_MIN_SIZE))
    else:
        target = (image_size, image_size)
    x = inputs
    if target != (height, width):
        x = keras.layers.Resizing(*target)(x)
    return inputs, x, (*target, input_shape[2])


def _set_batchnorm_momentum(model, momentum):
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
    inputs, x, backbone_shape = _application_input(input_shape=input_shape,
                                                     image_size=image_size)
    x = normalize_pixels(x, normalization=normalization)
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
    _set_batchnorm_momentum(backbone, bn_momentum)
    x = backbone(x)
    outputs = output_head(x, task=task, num_outputs=num_classes, dropout=dropout)
    return keras.Model(inputs, outputs, name=family)


def build_mobilenet_v3_small(**params):
    """keras.applications.MobileNetV3Small between our normalisation and head."""
    return _build_application("mobilenet_v3_small", **params)


def build_efficientnet_b0(**params):
    """keras.applications.EfficientNetB0 between our normalisation and head."""
    return _build_application("efficientnet_b0", **params)


def build_resnet50(**params):
    """keras.applications.ResNet50 between our normalisation and head."""
    return _build_application("resnet50", **params)
