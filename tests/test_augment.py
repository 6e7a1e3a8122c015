"""Tests of the named augmentations' pixel moving: exact values, XLA vs TF kernels, seeds."""

import itertools

import numpy as np
import pytest
import tensorflow as tf

from tfaccel.data import augment

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)

GEOMETRIC = ("flip", "flip_vertical", "crop")


def _reference(x, flip, flip_vertical, off_y, off_x):
    """numpy: each example cropped from its reflect-padded copy at the offset, then flipped."""
    out = np.empty_like(x)
    height, width = x.shape[1:3]
    pad_h, pad_w = max(1, height // 8), max(1, width // 8)
    for i in range(x.shape[0]):
        padded = np.pad(x[i], [(pad_h, pad_h), (pad_w, pad_w), (0, 0)], mode="reflect")
        top, left = pad_h + off_y[i], pad_w + off_x[i]
        crop = padded[top:top + height, left:left + width]
        out[i] = crop[::-1 if flip_vertical[i] else 1, ::-1 if flip[i] else 1]
    return out


@pytest.mark.parametrize("names", [c for k in (1, 2, 3) for c in
                                   itertools.combinations(GEOMETRIC, k)])
@pytest.mark.parametrize("dtype", [tf.uint8, tf.float32])
def test_compiled_pixel_moving_equals_the_numpy_reference_and_the_kernels(names, dtype):
    x = np.random.RandomState(1).randint(0, 256, (16, 9, 17, 3)).astype(np.uint8)
    seed = tf.constant([5, 2], tf.int64)
    draws = [d.numpy() for d in augment._geometric_draws(tf.constant(x), names, seed)]
    assert draws[0].any() == ("flip" in names) and draws[1].any() == ("flip_vertical" in names)
    assert np.abs(draws[3]).max() == (2 if "crop" in names else 0)  # 17 // 8
    compiled = augment._geometric(tf.constant(x), names, seed, dtype=dtype)
    kernels = augment._move_pixels.python_function(tf.constant(x), *draws, dtype=dtype)
    assert compiled.dtype == dtype
    np.testing.assert_array_equal(compiled.numpy(), _reference(x, *draws).astype(
        dtype.as_numpy_dtype))
    np.testing.assert_array_equal(compiled.numpy(), kernels.numpy())


def test_seeded_batches_are_the_ones_made_before_compiling():
    # Pinned from the uncompiled code: XLA's stateless random numbers differ from TF's
    # kernels', so the draws stay outside XLA and a seed keeps its batches.
    x = tf.constant(np.arange(4 * 8 * 8, dtype=np.uint8).reshape(4, 8, 8, 1))
    out = augment.apply_to_batch(x, GEOMETRIC, tf.constant([3, 1], tf.int64),
                                 dtype=tf.uint8).numpy()
    assert out[:, 0, :, 0].tolist() == [[9, 8, 9, 10, 11, 12, 13, 14],
                                        [121, 122, 123, 124, 125, 126, 127, 126],
                                        [177, 178, 179, 180, 181, 182, 183, 182],
                                        [240, 241, 242, 243, 244, 245, 246, 247]]
    assert out[:, :, 0, 0].tolist() == [[9, 17, 25, 33, 41, 49, 57, 49],
                                        [121, 113, 105, 97, 89, 81, 73, 65],
                                        [177, 185, 177, 169, 161, 153, 145, 137],
                                        [240, 232, 224, 216, 208, 200, 192, 200]]


@pytest.mark.parametrize("names", [("flip", "crop", "brightness"), ("crop", "rotate90"),
                                   ("rotate90", "flip", "contrast"),
                                   ("contrast", "brightness")])
@pytest.mark.parametrize("dtype", [tf.float32, tf.uint8])
def test_compiled_steps_equal_the_kernels_one_op_at_a_time(names, dtype):
    x = tf.constant(np.random.RandomState(2).randint(0, 256, (6, 8, 8, 3)).astype(np.uint8))
    seed = tf.constant([1, 9], tf.int64)
    out = augment.apply_to_batch(x, names, seed, dtype=dtype)
    assert out.dtype == dtype and out.shape == x.shape
    # The same batch made by TF's kernels one augmentation at a time, in the documented
    # order: pixel moves on uint8, then the photometric ones in float, then the cast.
    seeds = tf.random.experimental.stateless_split(seed, num=3)
    expected = augment._geometric(x, [n for n in names if n in GEOMETRIC], seeds[0])
    assert expected.dtype == tf.uint8
    if "rotate90" in names:
        expected = augment._rotate90(expected, seeds[1])
    rest = [n for n in names if n not in augment.PIXEL_MOVING]
    expected = tf.cast(expected, tf.float32)
    rest_seeds = tf.random.experimental.stateless_split(seeds[2], num=max(len(rest), 1))
    for i, name in enumerate(rest):
        expected = augment.AUGMENTATIONS[name](expected, rest_seeds[i])
    if dtype == tf.uint8:
        expected = tf.saturate_cast(tf.round(expected), tf.uint8)
        # Rounding may tip a pixel whose float differs in the last bits (contrast's mean).
        assert np.abs(out.numpy().astype(int) - expected.numpy()).max() <= (1 if rest else 0)
    elif rest:
        # XLA sums the contrast's mean in its own order: the last float bits may differ.
        np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=0, atol=2e-3)
    else:
        np.testing.assert_array_equal(out.numpy(), expected.numpy())
