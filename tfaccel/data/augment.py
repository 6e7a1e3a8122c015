"""Random image augmentations, vectorised over a batch and seeded per batch (stateless ops)."""

from __future__ import annotations

import tensorflow as tf

from tfaccel.errors import UserInputError

# Strengths are fixed on purpose: they are the usual small-image defaults (CIFAR-style), and
# a recipe that needs something else passes its own callable instead of a growing option list.
_CROP_PAD_FRACTION = 8  # pad by 1/8 of the side (4 px on 32 px), then crop back at random
_BRIGHTNESS_DELTA = 0.1 * 255.0  # images are float32 in [0, 255] here, like Keras' loaders
_CONTRAST_RANGE = (0.8, 1.2)


def _flip(images, seed):
    mask = tf.random.stateless_uniform([tf.shape(images)[0]], seed=seed) < 0.5
    return tf.where(mask[:, None, None, None], tf.reverse(images, axis=[2]), images)


def _flip_vertical(images, seed):
    mask = tf.random.stateless_uniform([tf.shape(images)[0]], seed=seed) < 0.5
    return tf.where(mask[:, None, None, None], tf.reverse(images, axis=[1]), images)


def _crop(images, seed):
    # Reflect-pad then take an exact integer window per example with two batched gathers:
    # one op pair for the whole batch instead of one random_crop per image.
    shape = tf.shape(images)
    batch, height, width = shape[0], shape[1], shape[2]
    pad_h = tf.maximum(1, height // _CROP_PAD_FRACTION)
    pad_w = tf.maximum(1, width // _CROP_PAD_FRACTION)
    padded = tf.pad(images, [[0, 0], [pad_h, pad_h], [pad_w, pad_w], [0, 0]], mode="REFLECT")
    seeds = tf.random.experimental.stateless_split(seed, num=2)
    off_y = tf.random.stateless_uniform([batch], seed=seeds[0], maxval=2 * pad_h + 1,
                                        dtype=tf.int32)
    off_x = tf.random.stateless_uniform([batch], seed=seeds[1], maxval=2 * pad_w + 1,
                                        dtype=tf.int32)
    rows = off_y[:, None] + tf.range(height)[None, :]
    cols = off_x[:, None] + tf.range(width)[None, :]
    out = tf.gather(padded, rows, axis=1, batch_dims=1)
    return tf.gather(out, cols, axis=2, batch_dims=1)


def _brightness(images, seed):
    delta = tf.random.stateless_uniform([tf.shape(images)[0], 1, 1, 1], seed=seed,
                                        minval=-_BRIGHTNESS_DELTA, maxval=_BRIGHTNESS_DELTA)
    return tf.clip_by_value(images + delta, 0.0, 255.0)


def _contrast(images, seed):
    factor = tf.random.stateless_uniform([tf.shape(images)[0], 1, 1, 1], seed=seed,
                                         minval=_CONTRAST_RANGE[0], maxval=_CONTRAST_RANGE[1])
    mean = tf.reduce_mean(images, axis=[1, 2], keepdims=True)
    return tf.clip_by_value((images - mean) * factor + mean, 0.0, 255.0)


def _rotate90(images, seed):
    # Quarter turns keep the shape only for square images; otherwise only 0 or 180 degrees.
    height, width = images.shape[1], images.shape[2]
    square = height is not None and height == width
    turns = tf.random.stateless_uniform([tf.shape(images)[0]], seed=seed, maxval=4,
                                        dtype=tf.int32)
    if not square:
        turns = 2 * (turns // 2)
    rot180 = tf.reverse(images, axis=[1, 2])
    out = tf.where((turns == 2)[:, None, None, None], rot180, images)
    if square:
        rot90 = tf.reverse(tf.transpose(images, [0, 2, 1, 3]), axis=[1])  # counter-clockwise
        rot270 = tf.reverse(rot90, axis=[1, 2])
        out = tf.where((turns == 1)[:, None, None, None], rot90, out)
        out = tf.where((turns == 3)[:, None, None, None], rot270, out)
    return out


AUGMENTATIONS = {
    "flip": _flip,
    "flip_vertical": _flip_vertical,
    "crop": _crop,
    "brightness": _brightness,
    "contrast": _contrast,
    "rotate90": _rotate90,
}


def check_names(names):
    """Checks a list of augmentation names and returns it as a tuple.

    Args:
        names: Names from `AUGMENTATIONS`, e.g. ``["flip", "crop"]``.

    Returns:
        The names as a tuple, in the order given (which is the order they are applied).

    Raises:
        UserInputError: A name is unknown or `names` is not a list of strings.
    """
    if isinstance(names, str):
        names = [names]
    names = tuple(names)
    unknown = [n for n in names if n not in AUGMENTATIONS]
    if unknown:
        raise UserInputError(
            f"augment has unknown name(s) {unknown!r}; choose from {sorted(AUGMENTATIONS)} "
            "or pass a callable(features, label, seed).")
    return names


def apply_to_batch(images, names, seed):
    """Applies the named augmentations to a float32 batch ``[B, H, W, C]`` in ``[0, 255]``.

    Args:
        images: The batch.
        names: Names checked by `check_names`.
        seed: A shape ``[2]`` integer tensor; each augmentation gets its own split of it, so
            the result is a pure function of (batch, seed).

    Returns:
        The augmented batch, same shape and dtype.
    """
    if not names:
        return images
    seeds = tf.random.experimental.stateless_split(seed, num=len(names))
    for i, name in enumerate(names):
        images = AUGMENTATIONS[name](images, seeds[i])
    return images
