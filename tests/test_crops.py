"""Random resized crops decoded from the JPEG's window only: same windows, same pixels nearly."""

import numpy as np
import pytest
import tensorflow as tf

from tfaccel.data import crops
from tfaccel.errors import UserInputError

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


def _photo(height=480, width=640):
    # Smooth gradients with a little texture: what JPEG and DCT scaling keep well.
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    image = np.stack([x / width * 255, y / height * 255,
                      127 + 60 * np.sin(x / 23.0) * np.cos(y / 31.0)], axis=-1)
    return tf.io.encode_jpeg(image.astype(np.uint8), quality=95)


def test_the_window_is_the_one_the_sampler_draws_on_the_decoded_image():
    # The distribution check: for every seed the window from the header equals what
    # tf.image.stateless_sample_distorted_bounding_box draws on the decoded image's shape
    # with the same arguments, so the crops' distribution is exactly the sampler's.
    data = _photo()
    decoded_shape = tf.shape(tf.io.decode_jpeg(data, channels=3))
    header_shape = tf.concat([tf.io.extract_jpeg_shape(data)[:2], [3]], 0)
    areas, ratios = [], []
    for s in range(200):
        seed = tf.constant([s, 11], tf.int64)
        begin, size, _ = tf.image.stateless_sample_distorted_bounding_box(
            decoded_shape, bounding_boxes=tf.constant([[[0.0, 0.0, 1.0, 1.0]]]), seed=seed,
            min_object_covered=0.1, aspect_ratio_range=crops.RATIO, area_range=crops.SCALE,
            max_attempts=100, use_image_if_no_bounding_boxes=True)
        window = crops.sample_window(header_shape, seed).numpy()
        assert window.tolist() == [int(begin[0]), int(begin[1]), int(size[0]), int(size[1])]
        areas.append(window[2] * window[3] / (480 * 640))
        ratios.append(window[3] / window[2])
    # Inception-style: areas over the range, aspect ratios within [3/4, 4/3] (rounding).
    assert 0.07 < min(areas) < 0.2 and max(areas) > 0.8
    assert 0.70 < min(ratios) and max(ratios) < 1.4


@pytest.mark.parametrize("window, image_size, ratio", [
    ([0, 0, 480, 640], (64, 64), 4),  # 480 >= 4 * 64, not 8 * 64: 1/4 scale
    ([100, 200, 160, 240], (64, 64), 2),
    ([100, 200, 100, 100], (64, 64), 1),
    ([0, 0, 480, 640], (224, 224), 2),
])
def test_a_large_window_is_decoded_at_dct_scale_and_still_covers_the_output(window, image_size,
                                                                           ratio):
    data = _photo()
    window = tf.constant(window, tf.int32)
    assert jpeg_ratio(window, image_size) == ratio
    crop = crops._decode_jpeg_window(data, window, channels=3, image_size=image_size,
                                     dct_scaling=True)
    expected = [int(window[2]) // ratio, int(window[3]) // ratio, 3]
    assert crop.shape.as_list() == expected
    assert expected[0] >= image_size[0] and expected[1] >= image_size[1]


def jpeg_ratio(window, image_size):
    from tfaccel.data import jpeg_headers

    return jpeg_headers.RATIOS[int(crops._dct_index(window, image_size))]


def test_the_crop_is_the_full_decode_s_crop_resized_within_jpeg_noise():
    data = _photo()
    full = tf.io.decode_jpeg(data, channels=3)
    decode = crops.make_random_crop_decoder(image_size=(64, 64))
    plain = crops.make_random_crop_decoder(image_size=(64, 64), dct_scaling=False)
    for s in range(10):
        seed = tf.constant([s, 3], tf.int64)
        y, x, h, w = crops.sample_window(tf.shape(full), seed).numpy()
        reference = tf.image.resize(full[y:y + h, x:x + w], (64, 64)).numpy()
        for fn in (decode, plain):
            out = fn(data, seed).numpy()
            assert out.shape == (64, 64, 3) and out.dtype == np.float32
            assert np.abs(out - reference).mean() < 3.0, (s, np.abs(out - reference).mean())


def test_png_and_grey_images_are_cropped_from_the_whole_decode():
    image = (np.arange(60 * 80 * 3) % 256).astype(np.uint8).reshape(60, 80, 3)
    seed = tf.constant([5, 1], tf.int64)
    out = crops.make_random_crop_decoder(image_size=(16, 16))(tf.io.encode_png(image), seed)
    y, x, h, w = crops.sample_window(tf.constant([60, 80, 3]), seed).numpy()
    np.testing.assert_allclose(out.numpy(), tf.image.resize(image[y:y + h, x:x + w],
                                                            (16, 16)).numpy(), atol=1e-3)
    grey = crops.make_random_crop_decoder(image_size=(16, 16), channels=1)
    assert grey(_photo(), seed).shape == (16, 16, 1)


@pytest.mark.parametrize("kwargs, words", [
    ({"scale": (0.5, 0.1)}, "random_resized_crop scale must be two numbers with 0.0 < low"),
    ({"ratio": "wide"}, "random_resized_crop ratio must be two numbers (low, high), got 'wide'"),
    ({"channels": 4}, "random crops decode 1 or 3 channels, got channels=4"),
])
def test_bad_crop_arguments_are_named(kwargs, words):
    with pytest.raises(UserInputError, match=words.replace("(", r"\(").replace(")", r"\)")):
        crops.make_random_crop_decoder(image_size=(8, 8), **kwargs)


def _folder(root, n=12):
    for i in range(n):
        folder = root / f"c{i % 3}"
        folder.mkdir(exist_ok=True)
        # Each image one flat colour per file: a crop keeps the colour, so the file is known.
        image = np.full((120, 160, 3), 20 * i, np.uint8)
        (folder / f"{i:02d}.jpg").write_bytes(tf.io.encode_jpeg(image, quality=100).numpy())
    return root


def _epoch(dataset):
    images, labels = [], []
    for x, y in dataset:
        images.append(x.numpy())
        labels.append(y.numpy())
    return np.concatenate(images), np.concatenate(labels)


@pytest.mark.parametrize("cache", [None, "memory"])
def test_an_image_folder_with_random_crops_sees_every_file_once_per_epoch(tmp_path, cache):
    from tfaccel.data import from_image_folder

    root = _folder(tmp_path)
    train = from_image_folder(root, batch_size=4, image_size=(32, 32), seed=1, cache=cache,
                              random_resized_crop=True, augment=["flip"])
    assert train.element_spec[0].shape.as_list() == [None, 32, 32, 3]
    assert train.element_spec[0].dtype == tf.float32
    first, labels = _epoch(train)
    second, _ = _epoch(train)
    # Every file once per epoch: its flat colour identifies it (JPEG keeps a flat block).
    colours = sorted(int(round(c)) for c in first.mean(axis=(1, 2, 3)))
    assert colours == [20 * i for i in range(12)], colours
    assert sorted(labels.tolist()) == sorted([i % 3 for i in range(12)])
    assert not np.array_equal(first, second)  # another order, other crops, every epoch
    # The same seed makes the same epochs in a new pipeline (reproducible runs).
    again = from_image_folder(root, batch_size=4, image_size=(32, 32), seed=1, cache=cache,
                              random_resized_crop=True, augment=["flip"])
    np.testing.assert_array_equal(_epoch(again)[0], first)


def test_random_crops_vary_within_a_file_and_keep_the_output_size(tmp_path):
    from tfaccel.data import from_image_folder

    folder = tmp_path / "only"
    folder.mkdir()
    y, x = np.mgrid[0:240, 0:320]
    gradient = np.stack([x * 255 // 320, y * 255 // 240, np.zeros_like(x)], -1).astype(np.uint8)
    (folder / "a.jpg").write_bytes(tf.io.encode_jpeg(gradient, quality=95).numpy())
    train = from_image_folder(tmp_path, batch_size=None, image_size=(16, 16), seed=0,
                              random_resized_crop={"scale": (0.1, 0.3)})
    crops_seen = [next(iter(train))[0].numpy() for _ in range(5)]
    means = {tuple(np.round(c.mean(axis=(0, 1)))) for c in crops_seen}
    assert len(means) == 5  # five epochs, five different regions of the gradient
    assert all(c.shape == (16, 16, 3) for c in crops_seen)


@pytest.mark.parametrize("kwargs, words", [
    ({"random_resized_crop": "yes"}, "random_resized_crop must be True, False, None or a dict"),
    ({"random_resized_crop": {"area": (0.1, 1)}}, "random_resized_crop must be True, False"),
    ({"random_resized_crop": True, "crop_to_aspect_ratio": True},
     "random_resized_crop chooses its own region"),
])
def test_bad_random_crop_options_are_named(tmp_path, kwargs, words):
    from tfaccel.data import from_image_folder

    with pytest.raises(UserInputError, match=words):
        from_image_folder(_folder(tmp_path, 3), batch_size=2, image_size=(8, 8), **kwargs)


@pytest.mark.parametrize("option, expected", [
    (True, False), ({"scale": (0.1, 0.3)}, False), ({"dct_scaling": True}, True)])
def test_windows_decode_at_full_scale_unless_asked(tmp_path, monkeypatch, option, expected):
    # Measured: the DCT-scaled window was 5-12% slower than the full-scale one on an AMD
    # EPYC Zen 4 (4 runs) and no faster on an AVX2 EPYC (docs/performance.md), so crops do
    # not follow jpeg_dct_scaling; the dict asks for it.
    from tfaccel.data import from_image_folder

    seen = {}
    original = crops.make_random_crop_decoder

    def spy(**kwargs):
        seen.update(kwargs)
        return original(**kwargs)

    monkeypatch.setattr(crops, "make_random_crop_decoder", spy)
    folder = tmp_path / "only"
    folder.mkdir()
    (folder / "a.jpg").write_bytes(_photo(96, 128).numpy())
    train = from_image_folder(tmp_path, batch_size=None, image_size=(16, 16), seed=0,
                              random_resized_crop=option)
    assert next(iter(train))[0].shape == (16, 16, 3)
    assert seen["dct_scaling"] is expected
