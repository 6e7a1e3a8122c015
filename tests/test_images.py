"""One resize-and-round rule for images, whichever source decodes them."""

import numpy as np
import tensorflow as tf

from tfaccel.data import images
from tfaccel.data.sources import image_folder

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


def _png():
    # Resized to 1x1, bilinear averages the four pixels: 0.5 exactly in every channel,
    # where round-half-up and round-half-to-even disagree.
    pixels = np.zeros((2, 2, 3), np.uint8)
    pixels[0, 1] = 2
    return tf.io.encode_png(pixels)


def test_every_source_rounds_a_resized_image_the_same_way(tmp_path):
    path = tmp_path / "x.png"
    path.write_bytes(_png().numpy())
    folder, _ = image_folder.make_decoder(image_size=(1, 1), channels=3, keep_uint8=True)(
        tf.constant(str(path)), tf.constant(0))
    decoded = images.decode_image(_png(), 3)
    shared = images.resize_to_uint8(decoded, (1, 1))
    assert shared.dtype == tf.uint8
    np.testing.assert_array_equal(folder.numpy(), shared.numpy())
    np.testing.assert_array_equal(shared.numpy(), np.zeros((1, 1, 3), np.uint8))  # half to even


def test_resize_to_uint8_clips_overshoot():
    # Bicubic resizing overshoots at sharp edges; values must be clipped, not wrapped.
    values = tf.constant([[[-3.0], [255.6], [127.5], [128.5]]])
    np.testing.assert_array_equal(images.to_uint8(values).numpy().ravel(), [0, 255, 128, 128])
