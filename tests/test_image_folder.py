"""Tests of from_image_folder: formats, class names, split, bad files and bad folders."""

import io
import logging

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from tfaccel import data
from tfaccel.data.tail import TailOptions
from tfaccel.errors import DataError, UserInputError

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


def _write(path, fmt, value, size=(6, 5)):
    array = np.full((*size, 3), value, np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "jpg":
        path.write_bytes(tf.io.encode_jpeg(array, quality=100).numpy())
    elif fmt == "png":
        path.write_bytes(tf.io.encode_png(array).numpy())
    else:
        buf = io.BytesIO()
        Image.fromarray(array).save(buf, format={"gif": "GIF", "bmp": "BMP"}[fmt])
        path.write_bytes(buf.getvalue())


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "imgs"
    # Class folders are created out of order to check sorting; each format in each class.
    for label, name in ((1, "dog"), (0, "cat")):
        for i, fmt in enumerate(("jpg", "png", "gif", "bmp")):
            _write(root / name / f"{i}.{fmt}", fmt, value=40 + 120 * label)
    return root


def _all(ds):
    xs, ys = zip(*[(x.numpy(), y.numpy()) for x, y in ds])
    return np.concatenate(xs), np.concatenate(ys)


def test_reads_every_format_with_sorted_class_names(folder):
    ds = data.from_image_folder(folder, batch_size=3, image_size=(4, 4), seed=0)
    assert ds.class_names == ["cat", "dog"]
    x, y = _all(ds)
    assert x.shape == (8, 4, 4, 3) and x.dtype == np.float32
    assert sorted(y.tolist()) == [0] * 4 + [1] * 4
    # Uniform colour per class survives decode/resize (JPEG/GIF within a few levels).
    np.testing.assert_allclose(x[y == 0].mean(axis=(1, 2, 3)), 40, atol=4)
    np.testing.assert_allclose(x[y == 1].mean(axis=(1, 2, 3)), 160, atol=4)


def test_grayscale_channels(folder):
    ds = data.from_image_folder(folder, batch_size=8, image_size=(3, 3), channels=1)
    assert next(iter(ds))[0].shape == (8, 3, 3, 1)


def test_split_is_seeded_disjoint_and_complete(folder):
    kw = dict(batch_size=8, image_size=(4, 4), validation_fraction=0.25, seed=7)
    train = data.from_image_folder(folder, subset="training", **kw)
    val = data.from_image_folder(folder, subset="validation", **kw)
    assert len(val.file_paths) == 2 and len(train.file_paths) == 6
    assert set(train.file_paths).isdisjoint(val.file_paths)
    again = data.from_image_folder(folder, subset="validation", **kw)
    assert again.file_paths == val.file_paths


def test_corrupt_and_non_image_files_are_skipped_with_one_warning(folder, caplog):
    (folder / "cat" / "notes.txt").write_text("not an image")
    (folder / "cat" / "fake.jpg").write_text("not a jpeg either")
    good = (folder / "dog" / "0.jpg").read_bytes()
    (folder / "dog" / "cut.jpg").write_bytes(good[: len(good) // 2])
    (folder / "dog" / "empty.png").write_bytes(b"")
    with caplog.at_level(logging.WARNING, logger="tfaccel.data.sources.image_folder"):
        ds = data.from_image_folder(folder, batch_size=4, image_size=(4, 4))
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    message = warnings[0].getMessage()
    assert "Skipped 4 file(s)" in message and "notes.txt" in message
    assert len(ds.skipped_files) == 4
    x, y = _all(ds)  # a full epoch: no crash on the bad files
    assert len(y) == 8


def test_undetected_corruption_stops_the_epoch_as_in_keras(folder):
    # Valid header and ending, garbage in the middle: only the decoder can tell. No
    # ignore_errors stage skips it (that made the length unknown): the epoch stops, as
    # Keras' loader's does (a cold big folder names the file: test_data_image_folder_cold).
    good = bytearray((folder / "cat" / "1.png").read_bytes())
    good[40:60] = b"\x00" * 20
    (folder / "cat" / "1.png").write_bytes(bytes(good))
    ds = data.from_image_folder(folder, batch_size=4, image_size=(4, 4))
    assert len(ds) == 2 and ds.skipped_files == []
    with pytest.raises(tf.errors.InvalidArgumentError):
        _all(ds)


def test_missing_path_empty_folder_and_no_classes(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        data.from_image_folder(tmp_path / "nope", batch_size=2, image_size=(4, 4))
    (tmp_path / "flat").mkdir()
    (tmp_path / "flat" / "a.jpg").write_bytes(b"x")
    with pytest.raises(DataError, match="no class sub-folders"):
        data.from_image_folder(tmp_path / "flat", batch_size=2, image_size=(4, 4))
    (tmp_path / "empty" / "cat").mkdir(parents=True)
    with pytest.raises(DataError, match="no usable"):
        data.from_image_folder(tmp_path / "empty", batch_size=2, image_size=(4, 4))
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(DataError, match="not a folder"):
        data.from_image_folder(tmp_path / "file.txt", batch_size=2, image_size=(4, 4))


def test_bad_arguments(folder):
    with pytest.raises(UserInputError, match="channels"):
        data.from_image_folder(folder, batch_size=2, image_size=(4, 4), channels=2)
    with pytest.raises(UserInputError, match="image_size"):
        data.from_image_folder(folder, batch_size=2, image_size="4x4")
    with pytest.raises(UserInputError, match="validation_fraction"):
        data.from_image_folder(folder, batch_size=2, image_size=(4, 4), subset="training")


def test_cache_and_augment_with_folder(folder):
    ds = data.from_image_folder(folder, batch_size=8, image_size=(4, 4), cache="memory",
                                augment=["flip", "brightness"], seed=0)
    e1, e2 = _all(ds)[0], _all(ds)[0]
    assert not np.array_equal(np.sort(e1, axis=None), np.sort(e2, axis=None))


@pytest.mark.parametrize("augmentation", [dict(augment=["flip", "brightness"]),
                                          dict(random_resized_crop=True)])
def test_the_validation_subset_of_both_is_never_augmented(tmp_path, augmentation):
    # subset="both" (the README's own example) once handed the training subset's
    # augmentations to the validation subset too: validation accuracy was measured on
    # randomly flipped, brightened or cropped images, silently, a new draw every epoch.
    root = tmp_path / "imgs"
    rng = np.random.default_rng(0)
    for name in ("a", "b"):
        for i in range(10):
            array = rng.integers(0, 256, (12, 10, 3), dtype=np.uint8)
            (root / name).mkdir(parents=True, exist_ok=True)
            (root / name / f"{i}.png").write_bytes(tf.io.encode_png(array).numpy())
    kwargs = dict(batch_size=4, image_size=(8, 8), validation_split=0.3, seed=3)
    _, validation = data.from_image_folder(root, subset="both", **augmentation, **kwargs)
    # The same files un-augmented (subset="validation" alone is shuffled each epoch, so
    # images are compared in a fixed order: by their pixels).
    plain = data.from_image_folder(root, subset="validation", **kwargs)

    def in_pixel_order(dataset):
        x, y = _all(dataset)
        order = np.lexsort(x.reshape(len(x), -1).T)
        return x[order], y[order]

    expected_x, expected_y = in_pixel_order(plain)
    first = _all(validation)
    for epoch in range(2):  # two epochs: the same images, in the same order, each time
        x, y = _all(validation)
        np.testing.assert_array_equal(x, first[0])
        sorted_x, sorted_y = in_pixel_order(validation)
        np.testing.assert_array_equal(sorted_y, expected_y)
        np.testing.assert_array_equal(sorted_x, expected_x)


def _photos(root, *, size, count=6):
    """`count` noisy JPEGs of one `size` (height, width) in two class folders."""
    rng = np.random.default_rng(0)
    for i in range(count):
        path = root / ("a" if i % 2 else "b") / f"{i}.jpg"
        path.parent.mkdir(parents=True, exist_ok=True)
        pixels = rng.integers(0, 256, (*size, 3), dtype=np.uint8)
        path.write_bytes(tf.io.encode_jpeg(pixels, quality=90).numpy())
    return root


def _with_and_without_batch_resize(monkeypatch, make):
    """``(images, labels)`` of `make()` resized a batch at a time, then image by image."""
    from tfaccel.data.sources import image_folder

    used = []
    original = image_folder._batch_resize

    def spy(**kwargs):
        used.append(original(**kwargs) is not None)
        return original(**kwargs)

    monkeypatch.setattr(image_folder, "_batch_resize", spy)
    batched = _all(make())
    monkeypatch.setattr(image_folder, "_batch_resize", lambda **kwargs: None)
    return batched, _all(make()), used


@pytest.mark.parametrize("size, interpolation", [((37, 50), "bilinear"),
                                                 ((37, 50), "nearest"),
                                                 ((97, 65), "bilinear")])  # DCT 1/2 decode
def test_a_one_size_jpeg_folder_is_resized_a_batch_at_a_time_with_the_same_output(
        tmp_path, monkeypatch, size, interpolation):
    root = _photos(tmp_path / "photos", size=size)

    def make():
        return data.from_image_folder(root, batch_size=4, image_size=(20, 24), shuffle=False,
                                      interpolation=interpolation, verbose=False)

    (images, labels), (reference, reference_labels), used = _with_and_without_batch_resize(
        monkeypatch, make)
    assert used == [True]
    assert images.shape == (6, 20, 24, 3) and images.dtype == reference.dtype
    np.testing.assert_array_equal(labels, reference_labels)
    np.testing.assert_allclose(images, reference, atol=1e-4)
    if size == (37, 50):  # a full-scale decode: Keras' loader gives the same images
        import keras

        theirs = keras.utils.image_dataset_from_directory(
            root, batch_size=4, image_size=(20, 24), shuffle=False,
            interpolation=interpolation, verbose=False)
        np.testing.assert_allclose(images, _all(theirs)[0], atol=1e-4)


def test_batch_resize_keeps_seeded_augmentation_and_skips_caches_and_sizes(
        tmp_path, monkeypatch):
    root = _photos(tmp_path / "photos", size=(40, 30))

    def make():
        return data.from_image_folder(root, batch_size=3, image_size=(16, 16), seed=1,
                                      augment=["flip", "crop"], verbose=False)

    (images, _), (reference, _), used = _with_and_without_batch_resize(monkeypatch, make)
    assert used == [True]
    np.testing.assert_allclose(images, reference, atol=1e-4)
    # Resized images cached, or files of two sizes: image by image.
    monkeypatch.undo()
    from tfaccel.data.sources import image_folder

    assert image_folder._batch_resize(
        listing=image_folder.list_image_folder(str(root)), jpeg_plan=1, cache="memory",
        crop=None, channels=3, image_size=(16, 16), interpolation="bilinear",
        crop_to_aspect_ratio=False, pad_to_aspect_ratio=False,
        options=TailOptions()) is None
    _photos(root, size=(41, 30), count=1)  # b/0.jpg now 41 px high
    assert image_folder._one_decoded_size(image_folder.list_image_folder(str(root)), 1) is None


def _pngs(root, *, size, count=6, mode="RGB", bits=8):
    """`count` noisy PNGs of one `size` (height, width) in two class folders, in PIL's
    `mode` (RGB, L, P, RGBA) or, with ``bits=16``, 16-bit RGB."""
    rng = np.random.default_rng(1)
    for i in range(count):
        path = root / ("a" if i % 2 else "b") / f"{i}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        if bits == 16:
            pixels = rng.integers(0, 65536, (*size, 3), dtype=np.uint16)
            path.write_bytes(tf.io.encode_png(pixels).numpy())
            continue
        pixels = rng.integers(0, 256, (*size, 3), dtype=np.uint8)
        image = Image.fromarray(pixels)
        image = image.convert(mode) if mode != "P" else image.quantize(16)
        buf = io.BytesIO()
        image.save(buf, format="PNG")
        path.write_bytes(buf.getvalue())
    return root


def test_the_listing_reads_a_pngs_size_from_its_header_and_still_refuses_a_bad_one(tmp_path):
    from tfaccel.data.sources import image_folder

    root = _pngs(tmp_path / "p", size=(7, 11), count=2)
    good = (root / "b" / "0.png").read_bytes()
    assert image_folder._inspect(str(root / "b" / "0.png")) == "png:7x11"
    cases = {
        "cut_short": good[:len(good) // 2],  # no IEND: refused, as before
        "not_a_png": b"this was never a png",
        "signature_only": good[:8],
        # A whole-looking file whose first chunk is not IHDR: usable (the decode decides,
        # as before) but of unknown size, so never planned as one size.
        "no_ihdr": good[:12] + b"XXXX" + good[16:],
        "zero_width": good[:16] + bytes(4) + good[20:],
    }
    seen = {}
    for name, content in cases.items():
        (tmp_path / name).write_bytes(content)
        seen[name] = image_folder._inspect(str(tmp_path / name))
    assert seen == {"cut_short": False, "not_a_png": False, "signature_only": False,
                    "no_ihdr": True, "zero_width": True}
    listing = image_folder.list_image_folder(str(root))
    assert listing.results == ["png:7x11", "png:7x11"]
    assert image_folder._one_decoded_size(listing, 0) == (7, 11)
    assert image_folder._one_decoded_size(listing, 1) is None  # never a JPEG's DCT plan


@pytest.mark.parametrize("size, target, interpolation, mode, bits, channels", [
    ((37, 50), (20, 24), "bilinear", "RGB", 8, 3),
    ((37, 50), (20, 24), "nearest", "RGB", 8, 3),
    ((32, 32), (32, 32), "bilinear", "RGB", 8, 3),   # the resize's same-size shortcut
    ((30, 20), (16, 16), "bilinear", "P", 8, 3),     # palette: converted to RGB
    ((30, 20), (16, 16), "bilinear", "RGBA", 8, 3),  # alpha dropped
    ((30, 20), (16, 16), "bilinear", "L", 8, 1),     # grey
    ((30, 20), (16, 16), "bilinear", "RGBA", 8, 1),  # converted to grey
    ((30, 20), (16, 16), "bilinear", "RGB", 16, 3),  # 16-bit samples
])
def test_a_one_size_png_folder_is_resized_a_batch_at_a_time_with_the_same_output(
        tmp_path, monkeypatch, size, target, interpolation, mode, bits, channels):
    root = _pngs(tmp_path / "pngs", size=size, mode=mode, bits=bits)

    def make(**augmented):
        return data.from_image_folder(root, batch_size=4, image_size=target, shuffle=False,
                                      interpolation=interpolation, channels=channels,
                                      verbose=False, **augmented)

    # At the same size the batch keeps its uint8 pixels (the resize returns them as they
    # are): seeded augmentations must not see a difference.
    augmented = dict(seed=5, augment=["flip", "crop"]) if size == target else {}
    (images, labels), (reference, reference_labels), used = _with_and_without_batch_resize(
        monkeypatch, lambda: make(**augmented))
    assert used == [True]
    assert images.shape == (6, *target, channels) and images.dtype == reference.dtype
    np.testing.assert_array_equal(labels, reference_labels)
    np.testing.assert_allclose(images, reference, atol=1e-4)
    monkeypatch.undo()
    images = _all(make())[0]
    if mode != "L" and channels == 1:
        # Colour to grey: tfaccel converts after decoding (tf.image.rgb_to_grayscale),
        # Keras' loader asks libpng for grey: up to 1 level apart, image by image as well.
        return
    import keras

    theirs = keras.utils.image_dataset_from_directory(
        root, batch_size=4, image_size=target, shuffle=False, interpolation=interpolation,
        color_mode={1: "grayscale", 3: "rgb"}[channels], verbose=False)
    keras_images = _all(theirs)[0]
    assert keras_images.dtype == images.dtype
    np.testing.assert_allclose(images, keras_images, atol=1e-4)


def test_a_one_size_mix_of_jpegs_and_pngs_is_resized_a_batch_at_a_time(tmp_path,
                                                                        monkeypatch):
    root = _photos(tmp_path / "mixed", size=(37, 50), count=4)
    rng = np.random.default_rng(2)
    for i in range(4, 8):
        pixels = rng.integers(0, 256, (37, 50, 3), dtype=np.uint8)
        (root / ("a" if i % 2 else "b") / f"{i}.png").write_bytes(
            tf.io.encode_png(pixels).numpy())

    def make():
        return data.from_image_folder(root, batch_size=3, image_size=(20, 24), seed=4,
                                      augment=["flip"], verbose=False)

    (images, labels), (reference, reference_labels), used = _with_and_without_batch_resize(
        monkeypatch, make)
    assert used == [True] and images.shape == (8, 20, 24, 3)
    np.testing.assert_array_equal(labels, reference_labels)
    np.testing.assert_allclose(images, reference, atol=1e-4)
    import keras

    ours = _all(data.from_image_folder(root, batch_size=3, image_size=(20, 24),
                                       shuffle=False, verbose=False))[0]
    theirs = keras.utils.image_dataset_from_directory(
        root, batch_size=3, image_size=(20, 24), shuffle=False, verbose=False)
    np.testing.assert_allclose(ours, _all(theirs)[0], atol=1e-4)
    # Unplanned (verify=False: each file's format chosen as it is decoded, its JPEGs by
    # decode_jpeg): the same images as the one generic decode the mix now takes.
    unplanned = _all(data.from_image_folder(root, batch_size=3, image_size=(20, 24),
                                            shuffle=False, verify=False, verbose=False))[0]
    np.testing.assert_allclose(ours, unplanned, atol=1e-4)


def test_pngs_of_two_sizes_gifs_and_dct_scaled_jpegs_beside_pngs_are_resized_one_by_one(
        tmp_path):
    from tfaccel.data.sources import image_folder

    def decoded_size(root, image_size=(16, 16)):
        listing = image_folder.list_image_folder(str(root))
        plan, per_file = image_folder._jpeg_plan(
            listing.paths, listing=listing, image_size=image_size, channels=3,
            crop_to_aspect_ratio=False, jpeg_dct_scaling=True, verified=True)
        return plan, image_folder._one_decoded_size(listing, plan)

    root = _pngs(tmp_path / "one", size=(30, 20))
    assert decoded_size(root) == (0, (30, 20))
    _pngs(root, size=(31, 20), count=1)  # b/0.png now 31 px high
    assert decoded_size(root) == (0, None)
    root = _pngs(tmp_path / "gif", size=(30, 20))
    _write(root / "a" / "x.gif", "gif", 9, size=(30, 20))  # GIF sizes are not read
    assert decoded_size(root) == (0, None)
    # JPEGs of twice the target decode at 1/2 (15x10) beside full-size PNGs: one plan
    # per file, so image by image.
    root = _pngs(tmp_path / "dct", size=(15, 10))
    _photos(root, size=(30, 20), count=2)
    plan, size = decoded_size(root, image_size=(12, 8))
    assert plan == "per_file" and size is None


def test_a_grey_mix_of_jpegs_and_pngs_decodes_jpegs_to_grey_as_keras(tmp_path):
    # Grey JPEGs come from libjpeg's own luma (decode_jpeg(channels=1), as in Keras'
    # loader); the generic decoder's RGB decode then conversion rounds differently, so a
    # mix of JPEGs and PNGs must keep the JPEG decode when grey is asked for.
    import keras

    root = _photos(tmp_path / "mixed", size=(37, 50), count=4)
    _pngs(tmp_path / "grey", size=(37, 50), count=4, mode="L")
    for i, png in enumerate(sorted((tmp_path / "grey").rglob("*.png"))):
        (root / ("a" if i % 2 else "b") / f"g{i}.png").write_bytes(png.read_bytes())
    common = dict(batch_size=8, image_size=(20, 24), shuffle=False, verbose=False)
    ours = _all(data.from_image_folder(root, channels=1, **common))[0]
    theirs = _all(keras.utils.image_dataset_from_directory(root, color_mode="grayscale",
                                                           **common))[0]
    np.testing.assert_allclose(ours, theirs, atol=1e-4)
