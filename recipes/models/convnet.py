"""keras.io's "Simple MNIST convnet" as a recipe model (``model.name: models/convnet.py:build``).

Conv2D 32 3x3, max-pool 2, Conv2D 64 3x3, max-pool 2, flatten, dropout, a softmax layer:
34,826 weights for 28x28x1 inputs and 10 classes.
"""

import keras


def build(*, input_shape, num_classes, dropout=0.5):
    """Builds the convnet, uncompiled.

    Args:
        input_shape: Shape of one image, e.g. ``(28, 28, 1)``; pixels in 0-255.
        num_classes: Number of classes of the softmax.
        dropout: Dropout rate before the softmax layer.

    Returns:
        A `keras.Model` from images to class probabilities (float32).
    """
    inputs = keras.Input(shape=input_shape)
    # Raw 0-255 pixels come in (Keras' mnist.npz layout); the example divides by 255.
    x = keras.layers.Rescaling(1 / 255)(inputs)
    x = keras.layers.Conv2D(32, kernel_size=(3, 3), activation="relu")(x)
    x = keras.layers.MaxPooling2D(pool_size=(2, 2))(x)
    x = keras.layers.Conv2D(64, kernel_size=(3, 3), activation="relu")(x)
    x = keras.layers.MaxPooling2D(pool_size=(2, 2))(x)
    x = keras.layers.Flatten()(x)
    x = keras.layers.Dropout(dropout)(x)
    # float32 softmax: the loss stays in full precision under mixed_bfloat16/float16.
    outputs = keras.layers.Dense(num_classes, activation="softmax", dtype="float32")(x)
    return keras.Model(inputs, outputs, name="mnist_convnet")
