"""Random image augmentations on whole batches: stateless seeded draws, XLA-compiled pixel work."""

from __future__ import annotations

import tensorflow as tf

from tfaccel.errors import UserInputError

# Strengths are fixed on purpose: they are the usual small-image defaults (CIFAR-style), and
# a recipe that needs something else passes its own callable instead of a growing option list.
_CROP_PAD_FRACTION = 8  # pad by 1/8 of the side (4 px on 32 px), then crop back at random
_BRIGHTNESS_DELTA = 0.1 * 255.0  # images are float32 in [0, 255] here, like Keras' loaders
_CONTRAST_RANGE = (0.8, 1.2)


def _reflect(index, size):
    """Maps any integer index onto [0, size) the way REFLECT padding does (no edge repeat)."""
    index = tf.abs(index)
    return (size - 1) - tf.abs((size - 1) - index)


def _geometric_draws(images, names, seed):
    """Per-example random choices of flip, vertical flip and crop: ``[B]`` tensors each.

    Drawn in TensorFlow's own kernels, not under XLA, whose stateless random numbers differ:
    the choices, and so every augmented batch of a seed, stay what they were before the
    pixel moving was compiled.
    """
    shape = tf.shape(images)
    batch, height, width = shape[0], shape[1], shape[2]
    seeds = tf.random.experimental.stateless_split(seed, num=4)
    no = tf.zeros([batch], tf.bool)
    still = tf.zeros([batch], tf.int32)
    flip = tf.random.stateless_uniform([batch], seed=seeds[0]) < 0.5 if "flip" in names else no
    flip_vertical = (tf.random.stateless_uniform([batch], seed=seeds[1]) < 0.5
                     if "flip_vertical" in names else no)
    off_y = off_x = still
    if "crop" in names:
        # Same as reflect-padding by 1/8 of the side and cropping back at a random offset.
        pad_h = tf.maximum(1, height // _CROP_PAD_FRACTION)
        pad_w = tf.maximum(1, width // _CROP_PAD_FRACTION)
        off_y = tf.random.stateless_uniform([batch], seed=seeds[2], minval=-pad_h,
                                            maxval=pad_h + 1, dtype=tf.int32)
        off_x = tf.random.stateless_uniform([batch], seed=seeds[3], minval=-pad_w,
                                            maxval=pad_w + 1, dtype=tf.int32)
    return flip, flip_vertical, off_y, off_x


@tf.function(jit_compile=True)
def _move_pixels(images, flip, flip_vertical, off_y, off_x, dtype):
    """Flips and reflected crop offsets folded into per-example row and column indices, the
    gathers and the cast to `dtype` compiled by XLA into one pass over the batch.

    TensorFlow's own CPU kernels move a pixel of 3 bytes at a time and make a full copy per
    step (`tf.pad(mode="REFLECT")`, `tf.reverse`, `tf.gather`, `tf.cast`): measured, flip +
    crop of a batch of 128 uint8 32x32x3 images to float32, one thread, call included,
    0.76 ms with the gathers and the cast as kernels vs 0.30 ms compiled (the pipeline as a
    whole: docs/performance.md, benchmarks/bench_data_fit.py --pipeline-only).
    """
    shape = tf.shape(images)
    batch, height, width = shape[0], shape[1], shape[2]
    rows = tf.broadcast_to(tf.range(height)[None, :], [batch, height])
    cols = tf.broadcast_to(tf.range(width)[None, :], [batch, width])
    cols = tf.where(flip[:, None], (width - 1) - cols, cols)
    rows = tf.where(flip_vertical[:, None], (height - 1) - rows, rows)
    rows = _reflect(rows + off_y[:, None], height)
    cols = _reflect(cols + off_x[:, None], width)
    images = tf.gather(images, rows, axis=1, batch_dims=1)
    return tf.cast(tf.gather(images, cols, axis=2, batch_dims=1), dtype)


def _geometric(images, names, seed, *, dtype=None):
    """Flip, vertical flip and crop of a batch, cast to `dtype` (None: the batch's own)."""
    return _move_pixels(images, *_geometric_draws(images, names, seed),
                        dtype=dtype or images.dtype)


def _brightness_draw(batch, seed):
    return tf.random.stateless_uniform([batch, 1, 1, 1], seed=seed,
                                       minval=-_BRIGHTNESS_DELTA, maxval=_BRIGHTNESS_DELTA)


def _contrast_draw(batch, seed):
    return tf.random.stateless_uniform([batch, 1, 1, 1], seed=seed,
                                       minval=_CONTRAST_RANGE[0], maxval=_CONTRAST_RANGE[1])


def _brighten(images, delta):
    return tf.clip_by_value(images + delta, 0.0, 255.0)


def _stretch(images, factor):
    mean = tf.reduce_mean(images, axis=[1, 2], keepdims=True)
    return tf.clip_by_value((images - mean) * factor + mean, 0.0, 255.0)


# Photometric augmentations: a per-example random draw (TF's kernels, like the geometric
# ones) and the arithmetic on float pixels (compiled together in `_recolour`).
_PHOTOMETRIC = {"brightness": (_brightness_draw, _brighten),
                "contrast": (_contrast_draw, _stretch)}


@tf.function(jit_compile=True)
def _recolour(images, draws, names, dtype):
    """The photometric augmentations `names` in order, then the cast to `dtype`, compiled by
    XLA into about two passes over the batch (TF's kernels make one full copy per op:
    measured, flip + crop + brightness + contrast on 128 images of 32x32x3, one thread,
    1.51 ms vs 0.49 ms). The contrast's mean is summed in XLA's order, so pixels can differ
    from TF's kernels in the last float bits (a few 1e-4 of a level)."""
    images = tf.cast(images, tf.float32)
    for name, draw in zip(names, draws):
        images = _PHOTOMETRIC[name][1](images, draw)
    if dtype.is_integer:
        return tf.saturate_cast(tf.round(images), dtype)
    return tf.cast(images, dtype)


def _brightness(images, seed):
    return _brighten(images, _brightness_draw(tf.shape(images)[0], seed))


def _contrast(images, seed):
    return _stretch(images, _contrast_draw(tf.shape(images)[0], seed))


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


_GEOMETRIC = ("flip", "flip_vertical", "crop")
# The augmentations that only move pixels: exact on uint8 (`apply_to_batch` runs them first).
PIXEL_MOVING = _GEOMETRIC + ("rotate90",)

AUGMENTATIONS = {
    "flip": _geometric,
    "flip_vertical": _geometric,
    "crop": _geometric,
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


def apply_to_batch(images, names, seed, *, dtype=tf.float32):
    """Applies the named augmentations to a batch ``[B, H, W, C]`` of pixels in ``[0, 255]``.

    Geometric ones (flip, flip_vertical, crop, rotate90) move pixels only, so they run
    first, on the batch's own dtype (uint8 straight from the cache is 4x less memory to
    move); then the batch is cast to float and the photometric ones (brightness, contrast)
    run in the order given, then the cast to `dtype`. Flips and crops, and the photometric
    ones, each run as one XLA-compiled function; their random choices are drawn outside it.

    Args:
        images: The batch (uint8 or float).
        names: Names checked by `check_names`.
        seed: A shape ``[2]`` integer tensor; each augmentation gets its own split of it, so
            the result is a pure function of (batch, seed).
        dtype: Dtype of the result.

    Returns:
        The augmented batch, same shape, of `dtype`.
    """
    seeds = tf.random.experimental.stateless_split(seed, num=3)
    geometric = [n for n in names if n in _GEOMETRIC]
    photometric = [n for n in names if n not in PIXEL_MOVING]
    if geometric:
        # The cast is fused into the last compiled step: the move when nothing follows it.
        last = not photometric and "rotate90" not in names
        images = _geometric(images, geometric, seeds[0], dtype=dtype if last else None)
    if "rotate90" in names:
        images = _rotate90(images, seeds[1])
    if not photometric:
        return tf.cast(images, dtype)
    photo_seeds = tf.random.experimental.stateless_split(seeds[2], num=len(photometric))
    batch = tf.shape(images)[0]
    draws = [_PHOTOMETRIC[name][0](batch, photo_seeds[i]) for i, name in enumerate(photometric)]
    return _recolour(images, draws, names=tuple(photometric), dtype=dtype)
