"""THE rule that turns resized (float) pixels back into uint8, for every image source."""

from __future__ import annotations

from typing import Sequence

import tensorflow as tf


def to_uint8(image: tf.Tensor) -> tf.Tensor:
    """Rounds (half to even, like NumPy) and clips float pixels to uint8 in [0, 255].

    Clipping matters for resize methods that overshoot at sharp edges (bicubic, lanczos);
    a bare cast would wrap 256 to 0.
    """
    return tf.cast(tf.clip_by_value(tf.round(image), 0.0, 255.0), tf.uint8)


def resize_to_uint8(image: tf.Tensor, size: Sequence[int]) -> tf.Tensor:
    """Bilinear resize to `size` ([height, width]) and `to_uint8`: what caches hold."""
    return to_uint8(tf.image.resize(image, [int(v) for v in size]))
