"""Reduced-scale JPEG decoding (libjpeg DCT scaling) in the image folder source."""

import numpy as np
import pytest
import tensorflow as tf

from tfaccel.data import from_image_folder, jpeg_headers
from tfaccel.data.sources import image_folder
from tfaccel.data.sources.image_folder import decode_image_for_size

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


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


def _with_exif(jpeg: bytes) -> bytes:
    # An APP1 segment (as cameras write EXIF) between SOI and the frame header.
    payload = b"Exif\x00\x00" + bytes(300)
    return jpeg[:2] + b"\xff\xe1" + (len(payload) + 2).to_bytes(2, "big") + payload + jpeg[2:]


def test_jpeg_size_reads_the_frame_header_past_other_segments(tmp_path):
    plain = tmp_path / "plain.jpg"
    plain.write_bytes(_jpeg(48, 64).numpy())
    exif = tmp_path / "exif.jpg"
    exif.write_bytes(_with_exif(_jpeg(30, 20).numpy()))
    progressive = tmp_path / "progressive.jpg"
    progressive.write_bytes(tf.io.encode_jpeg(_photo(40, 50), progressive=True).numpy())
    png = tmp_path / "image.png"
    png.write_bytes(tf.io.encode_png(_photo(8, 8)).numpy())
    cut = tmp_path / "cut.jpg"
    cut.write_bytes(_jpeg(48, 64).numpy()[:10])
    assert tuple(tf.io.decode_jpeg(exif.read_bytes()).shape[:2]) == (30, 20)
    assert [jpeg_headers.jpeg_size(str(p)) for p in (plain, exif, progressive, png, cut)] == [
        (48, 64), (30, 20), (40, 50), None, None]
    assert jpeg_headers.jpeg_size(str(tmp_path / "missing.jpg")) is None


@pytest.mark.parametrize("target, crop", [((224, 224), False), ((100, 150), False),
                                          ((60, 80), False), ((300, 300), False),
                                          ((224, 224), True), ((200, 400), True)])
def test_the_header_plan_picks_the_scale_the_decoder_would(target, crop):
    # The same rule, once from the file header before training, once in the graph.
    index = jpeg_headers.ratio_index((480, 640), target, crop_to_aspect_ratio=crop)
    ratio = jpeg_headers.RATIOS[index - 1]
    decoded = decode_image_for_size(_jpeg(), 3, target, crop_to_aspect_ratio=crop)
    assert (480 // ratio, 640 // ratio) == tuple(decoded.shape[:2])
    assert jpeg_headers.ratio_index(None, target) == jpeg_headers.GENERIC


def test_a_planned_folder_decodes_exactly_like_the_per_image_header_check(tmp_path):
    # Mixed sources (JPEGs of two sizes, a PNG) need a plan per file; every image must
    # come out as the in-graph header check (verify=False plans nothing) makes it.
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "big.jpg").write_bytes(_jpeg(480, 640).numpy())
    (tmp_path / "a" / "small.jpg").write_bytes(_with_exif(_jpeg(120, 160, seed=1).numpy()))
    (tmp_path / "b" / "png.png").write_bytes(tf.io.encode_png(_photo(200, 240, 2)).numpy())
    (tmp_path / "b" / "mid.jpg").write_bytes(_jpeg(240, 320, seed=3).numpy())
    common = dict(image_size=(100, 120), batch_size=4, shuffle=False)
    planned = from_image_folder(str(tmp_path), **common)
    assert planned.element_spec[0].shape.as_list() == [None, 100, 120, 3]
    checked = from_image_folder(str(tmp_path), verify=False, **common)
    (images, labels), = list(planned)
    (expected, expected_labels), = list(checked)
    np.testing.assert_array_equal(images.numpy(), expected.numpy())
    np.testing.assert_array_equal(labels.numpy(), expected_labels.numpy())
    # The plan differs per file: 1/4, full (120 < 2 x 100), generic (PNG), 1/2.
    assert jpeg_headers.plan(planned.file_paths, (100, 120)) == [3, 1, 2, 0]


def test_a_header_longer_than_the_first_bytes_read_is_read_from_the_file(tmp_path):
    # The listing reads each file's first 4 KiB once; an EXIF block past them (a camera's
    # thumbnail) sends the header parse back to the file, which still finds the size.
    jpeg = _jpeg(30, 20).numpy()
    payload = b"Exif\x00\x00" + bytes(9000)
    big_exif = jpeg[:2] + b"\xff\xe1" + (len(payload) + 2).to_bytes(2, "big") + payload + jpeg[2:]
    path = tmp_path / "camera.jpg"
    path.write_bytes(big_exif)
    head = big_exif[:image_folder._HEAD]
    assert jpeg_headers.jpeg_size_in(head, str(path)) == (30, 20)
    assert jpeg_headers.jpeg_size_in(jpeg[:4096], "/nonexistent.jpg") == (30, 20)
    assert jpeg_headers.jpeg_size_in(b"\x89PNG\r\n\x1a\n", str(path)) is None
    assert image_folder._inspect(str(path)) == "30x20"
    path.write_bytes(big_exif[:5000])  # cut short: no end-of-image marker
    assert image_folder._inspect(str(path)) is False


def test_a_folder_listed_from_its_saved_record_is_planned_and_decoded_the_same(
        tmp_path, monkeypatch):
    from tfaccel.data import listing_cache

    monkeypatch.setenv(listing_cache.ENV, str(tmp_path / "listings"))
    monkeypatch.setattr(listing_cache, "MIN_FILES", 0)
    monkeypatch.setattr(listing_cache, "RACY_NS", 0)
    root = tmp_path / "imgs"
    (root / "a").mkdir(parents=True)
    (root / "b").mkdir()
    (root / "a" / "big.jpg").write_bytes(_jpeg(480, 640).numpy())
    (root / "a" / "small.jpg").write_bytes(_jpeg(120, 160, seed=1).numpy())
    (root / "b" / "mid.jpg").write_bytes(_jpeg(240, 320, seed=3).numpy())
    common = dict(image_size=(100, 120), batch_size=3, shuffle=False)
    cold = from_image_folder(str(root), **common)
    read = []
    map_paths = listing_cache.chunked.map_paths

    def spy(fn, paths, **kwargs):
        if fn is image_folder._inspect:
            read.extend(paths)
        return map_paths(fn, paths, **kwargs)

    monkeypatch.setattr(listing_cache.chunked, "map_paths", spy)
    warm_listing = image_folder.list_image_folder(str(root))
    assert read == []  # no file read again: the sizes come from the saved record
    assert warm_listing.results == ["480x640", "120x160", "240x320"]
    warm = from_image_folder(str(root), listing=warm_listing, **common)
    (cold_images, _), = list(cold)
    (warm_images, _), = list(warm)
    np.testing.assert_array_equal(cold_images.numpy(), warm_images.numpy())
