"""Inception-style random resized crops, decoding only the JPEG's crop window, at DCT scale.

The standard ImageNet training augmentation keeps a random region of 8% to 100% of the
image, of aspect ratio 3/4 to 4/3, resized to the model's input. Decoding the whole photo
to keep a part of it wastes most of the decode; as TensorFlow's own ImageNet input
pipelines do (official ResNet's `_decode_crop_and_flip`), the window is sampled from the
size in the JPEG header (`tf.io.extract_jpeg_shape`, no decoding) and only that window is
decoded (`tf.io.decode_and_crop_jpeg`, with libjpeg's fast integer inverse DCT as
TensorFlow's TPU ImageNet pipelines use for training crops). When the window is at least twice the output size,
libjpeg also decodes it at 1/2, 1/4 or 1/8 scale straight from the DCT coefficients (the
crop window is then given in the scaled image's pixels). Other formats are decoded whole
and cropped.

The window is drawn by `tf.image.stateless_sample_distorted_bounding_box` from the image's
size and a per-example seed: the same sampler, with the same arguments, a user would call
on the decoded image, so the crops have exactly its distribution (tests compare the windows
one by one).
"""

from __future__ import annotations

from typing import Callable, Sequence, Tuple

import tensorflow as tf

from tfaccel.data import images, jpeg_headers
from tfaccel.errors import UserInputError

# Inception / torchvision / KerasCV defaults: area fraction and width/height ratio.
SCALE = (0.08, 1.0)
RATIO = (3 / 4, 4 / 3)
# As TensorFlow's official ImageNet pipeline: the window must cover 10% of the whole-image
# box, 100 tries before the whole image is taken.
_MIN_OBJECT_COVERED = 0.1
_MAX_ATTEMPTS = 100


def check_range(name: str, value: Sequence[float], *, low: float) -> Tuple[float, float]:
    """``(a, b)`` with ``low < a <= b``; else a `UserInputError` naming `name` and `value`."""
    try:
        a, b = (float(v) for v in value)
    except (TypeError, ValueError):
        raise UserInputError(f"{name} must be two numbers (low, high), got {value!r}.") \
            from None
    if not low < a <= b:
        raise UserInputError(f"{name} must be two numbers with {low} < low <= high, got "
                             f"{value!r}.")
    return a, b


def sample_window(image_shape, seed, *, scale=SCALE, ratio=RATIO):
    """The crop window ``[offset_y, offset_x, height, width]`` (int32) for an image shape.

    Args:
        image_shape: ``[height, width, channels]`` (int32 tensor), e.g. from the header.
        seed: Shape-[2] integer seed; the window is a pure function of (shape, seed).
        scale: Range of the window's area as a fraction of the image's.
        ratio: Range of the window's width / height.
    """
    whole = tf.constant([[[0.0, 0.0, 1.0, 1.0]]])
    begin, size, _ = tf.image.stateless_sample_distorted_bounding_box(
        image_shape, bounding_boxes=whole, seed=seed,
        min_object_covered=_MIN_OBJECT_COVERED, aspect_ratio_range=ratio, area_range=scale,
        max_attempts=_MAX_ATTEMPTS, use_image_if_no_bounding_boxes=True)
    return tf.stack([begin[0], begin[1], size[0], size[1]])


def dct_scale_index(h, w, image_size) -> tf.Tensor:
    """Index into `jpeg_headers.RATIOS` of the largest scale whose `h` x `w` region (tensors)
    still covers `image_size`: the in-graph twin of `jpeg_headers.ratio_index`."""
    height, width = (int(v) for v in image_size)
    index = tf.constant(0)
    for i, ratio in enumerate(jpeg_headers.RATIOS[1:], start=1):
        fits = tf.logical_and(h >= ratio * height, w >= ratio * width)
        index = tf.where(fits, i, index)
    return index


def _dct_index(window, image_size) -> tf.Tensor:
    """The scale index for a crop window ``[y, x, height, width]``."""
    return dct_scale_index(window[2], window[3], image_size)


# libjpeg's fast integer inverse DCT, as TensorFlow's TPU ImageNet pipelines decode their
# training crops: measured ~30% less decode time on 640x480 photos than the accurate one
# (the default), pixels within a level or two, under the crop's own randomness.
_DCT_METHOD = "INTEGER_FAST"


def _decode_jpeg_window(data, window, *, channels: int, image_size, dct_scaling: bool):
    if not dct_scaling:
        return tf.io.decode_and_crop_jpeg(data, window, channels=channels,
                                          dct_method=_DCT_METHOD)

    def at(ratio):
        # In the scaled image's pixels; the window stays inside it (floor of a sum is at
        # least the sum of floors).
        scaled = tf.concat([window[:2] // ratio, tf.maximum(window[2:] // ratio, 1)], 0)
        return tf.io.decode_and_crop_jpeg(data, scaled, channels=channels, ratio=ratio,
                                          dct_method=_DCT_METHOD)

    return tf.switch_case(_dct_index(window, image_size),
                          [lambda r=r: at(r) for r in jpeg_headers.RATIOS])


def make_random_crop_decoder(*, image_size: Tuple[int, int], channels: int = 3,
                             scale=SCALE, ratio=RATIO, dct_scaling: bool = True,
                             interpolation: str = "bilinear") -> Callable:
    """``fn(data, seed) -> float32 [H, W, channels]``: a random resized crop of encoded bytes.

    Args:
        image_size: Output ``(height, width)``.
        channels: 1 or 3.
        scale: Range of the crop's area as a fraction of the image.
        ratio: Range of the crop's aspect ratio (width / height).
        dct_scaling: Decode a JPEG window at 1/2, 1/4 or 1/8 scale when it is at least that
            many times the output size (slightly smoother pixels, much less decoding).
        interpolation: `tf.image.resize` method for the final resize.
    """
    if channels not in (1, 3):
        raise UserInputError(f"random crops decode 1 or 3 channels, got channels={channels!r}.")
    scale = check_range("random_resized_crop scale", scale, low=0.0)
    ratio = check_range("random_resized_crop ratio", ratio, low=0.0)
    height, width = (int(v) for v in image_size)

    def decode(data, seed):
        def jpeg():
            shape = tf.io.extract_jpeg_shape(data)
            window = sample_window(tf.concat([shape[:2], [channels]], 0), seed,
                                   scale=scale, ratio=ratio)
            return _decode_jpeg_window(data, window, channels=channels,
                                       image_size=(height, width), dct_scaling=dct_scaling)

        def other():
            image = images.decode_image(data, channels)
            shape = tf.shape(image)
            window = sample_window(shape, seed, scale=scale, ratio=ratio)
            return tf.slice(image, [window[0], window[1], 0], [window[2], window[3], -1])

        is_jpeg = tf.equal(tf.strings.substr(data, 0, 3), b"\xff\xd8\xff")
        crop = tf.cond(is_jpeg, jpeg, other)
        crop.set_shape([None, None, channels])
        return tf.image.resize(crop, (height, width), method=interpolation)

    return decode
