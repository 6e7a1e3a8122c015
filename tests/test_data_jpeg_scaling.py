"""Reduced-scale JPEG decoding (libjpeg DCT scaling) in the image folder source."""

import numpy as np
import pytest
import tensorflow as tf

from tfaccel.data import from_image_folder
from tfaccel.data.image_folder import decode_image_for_size


def _photo(height, width, seed=0):
    # Smooth gradients plus a little noise: photo-like content for JPEG.
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:height, 0:width]
    base = np.stack([xx / width * 255, yy / height * 255, (xx + yy) / (height + width) * 255],
                    axis=-1)
    return np.clip(base + rng.normal(0, 8, base.shape), 0, 255).astype(np.uint8)


def _jpeg(height=480, width=640, seed=0):
    return tf.io.encode_jpeg(_photo(height, width, seed), quality=90)


@pytest.mark.parametrize("target, crop, decoded", [
    ((224, 224), False, (240, 320)),   # 480x640: 1/2 leaves >= 224 in both sides
    ((100, 150), False, (120, 160)),   # 1/4
    ((60, 80), False, (60, 80)),       # 1/8 exactly
    ((300, 300), False, (480, 640)),   # more than half: full decode
    ((224, 224), True, (240, 320)),    # the kept 480x480 crop still allows 1/2
    ((200, 400), True, (480, 640)),    # the kept 320x640 crop: 1/2 would leave 160 < 200 rows
])
def test_the_largest_scaling_that_keeps_the_target_size(target, crop, decoded):
    image = decode_image_for_size(_jpeg(), 3, target, crop_to_aspect_ratio=crop)
    assert tuple(image.shape[:2]) == decoded and image.dtype == tf.uint8


def test_other_formats_and_four_channels_decode_in_full():
    png = tf.io.encode_png(_photo(480, 640))
    assert tuple(decode_image_for_size(png, 3, (60, 80)).shape) == (480, 640, 3)
    assert tuple(decode_image_for_size(_jpeg(), 4, (60, 80)).shape) == (480, 640, 4)
    assert tuple(decode_image_for_size(_jpeg(), 1, (60, 80)).shape) == (60, 80, 1)


def test_scaled_decoding_stays_close_to_a_full_decode(tmp_path):
    for c in ("a", "b"):
        (tmp_path / c).mkdir()
        for i in range(3):
            (tmp_path / c / f"{i}.jpg").write_bytes(_jpeg(seed=i + 3 * (c == "b")).numpy())
    common = dict(image_size=(224, 224), batch_size=6, shuffle=False)
    scaled = next(iter(from_image_folder(str(tmp_path), **common)))[0].numpy()
    full = next(iter(from_image_folder(str(tmp_path), jpeg_dct_scaling=False,
                                       **common)))[0].numpy()
    difference = np.abs(scaled - full).mean()
    # Not the same pixels (the DCT-scaled image is smoother), but close: measured ~3 levels.
    assert 0.0 < difference < 6.0, difference
