"""Tests of a cold big image folder: checked while decoding, a bad file named, saved for later."""

import io
import logging

import numpy as np
import pytest
import tensorflow as tf
import yaml
from click.testing import CliRunner
from PIL import Image

from tfaccel import data
from tfaccel.cli.main import main
from tfaccel.data import listing_cache
from tfaccel.data.sources import image_folder
from tfaccel.training.run.failures import data_error_in


def _image(fmt, seed, size=(20, 30)):
    array = np.random.RandomState(seed).randint(0, 256, (*size, 3), np.uint8)
    if fmt == "jpg":
        return tf.io.encode_jpeg(array, quality=90).numpy()
    if fmt == "png":
        return tf.io.encode_png(array).numpy()
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format={"gif": "GIF", "bmp": "BMP"}[fmt])
    return buffer.getvalue()


@pytest.fixture
def cache(saved_listings, monkeypatch):
    """A listing cache of the test's own (conftest); a 'big' folder is 10 files here."""
    monkeypatch.setattr(image_folder, "DEFER_CHECK_FROM", 10)
    return saved_listings


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "imgs"
    for label, name in enumerate(("cat", "dog")):
        (root / name).mkdir(parents=True)
        for i, fmt in enumerate(("jpg", "png", "gif", "bmp", "jpg", "jpg")):
            (root / name / f"{i}.{fmt}").write_bytes(_image(fmt, seed=10 * label + i))
    return root


def _all(ds):
    xs, ys = zip(*[(x.numpy(), y.numpy()) for x, y in ds])
    return np.concatenate(xs), np.concatenate(ys)


def test_the_graph_check_agrees_with_the_listing_check(tmp_path):
    jpeg, png, gif, bmp = (_image(f, seed=1) for f in ("jpg", "png", "gif", "bmp"))
    cases = {"jpeg": jpeg, "png": png, "gif": gif, "bmp": bmp,
             "gif_padded": gif + b"\0" * 7, "jpeg_cut": jpeg[:len(jpeg) // 2],
             "png_cut": png[:-20], "gif_cut": gif[:-1], "bmp_cut": bmp[:-10],
             "empty": b"", "text": b"not an image at all", "bm_short": b"BM\x01",
             "jpeg_magic_only": b"\xff\xd8\xff", "big_jpeg_tail": jpeg + b"\0" * 3000}
    seen = {}
    for name, content in cases.items():
        path = tmp_path / f"{name}.img"
        path.write_bytes(content)
        listed = image_folder._inspect(str(path)) is not False
        in_graph = bool(image_folder._is_whole_image(tf.constant(content)))
        seen[name] = (listed, in_graph)
    assert {n: g for n, (_, g) in seen.items()} == {n: l for n, (l, _) in seen.items()}
    assert [n for n, (ok, _) in seen.items() if ok] == ["jpeg", "png", "gif", "bmp",
                                                        "gif_padded"]


def test_a_cold_big_folder_is_not_opened_before_training_and_decodes_as_a_checked_one(
        folder, cache, monkeypatch):
    kw = dict(batch_size=5, image_size=(8, 12), seed=3, validation_fraction=0.25,
              subset="training")
    later = []
    monkeypatch.setattr(listing_cache, "check_in_background",
                        lambda *args, **kwargs: later.append(args[0]))
    listing = image_folder.list_image_folder(str(folder))
    assert listing.deferred and listing.results is None and later == [str(folder)]
    cold = data.from_image_folder(folder, listing=listing, **kw)
    monkeypatch.setattr(image_folder, "DEFER_CHECK_FROM", 10**9)  # checked up front
    checked = data.from_image_folder(folder, **kw)
    assert cold.file_paths == checked.file_paths and len(cold.file_paths) == 9
    (x_cold, y_cold), (x_checked, y_checked) = _all(cold), _all(checked)
    np.testing.assert_array_equal(y_cold, y_checked)
    np.testing.assert_array_equal(x_cold, x_checked)


def test_a_corrupt_file_met_on_a_cold_run_is_named(folder, cache, caplog):
    bad = folder / "dog" / "7.jpg"
    bad.write_bytes(_image("jpg", seed=5)[:300])  # a download cut short
    ds = data.from_image_folder(folder, batch_size=4, image_size=(8, 8), seed=0)
    assert bad.as_posix() in ds.file_paths and ds.skipped_files == []
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
        _all(ds)
    text = data_error_in(raised.value)
    assert text.startswith(f"Image file {bad} is not a whole JPEG, PNG, GIF or BMP image")
    assert text.endswith("runs skip such files with a warning.)")
    # The background check saved the listing: the next run skips the file and says so.
    listing_cache.wait_for_background_checks()
    with caplog.at_level(logging.WARNING, logger="tfaccel.data.sources.image_folder"):
        warm = data.from_image_folder(folder, batch_size=4, image_size=(8, 8), seed=0)
    assert warm.skipped_files == [str(bad)] and str(bad) in caplog.text
    assert len(_all(warm)[1]) == 12


@pytest.mark.parametrize("crop", [None, True])
def test_a_file_that_looks_whole_but_fails_to_decode_on_a_cold_run_is_named(folder, cache,
                                                                           crop):
    # Valid header and ending, damaged data between: only the decoder can tell, and
    # TensorFlow's own error would not say which file (whole images and random crops).
    bad = folder / "cat" / "1.png"
    damaged = bytearray(bad.read_bytes())
    damaged[40:60] = b"\x00" * 20
    bad.write_bytes(bytes(damaged))
    ds = data.from_image_folder(folder, batch_size=4, image_size=(8, 8), seed=0,
                                random_resized_crop=crop, verbose=False)
    assert len(ds) == 3  # the length stays known (12 files, batches of 4)
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
        _all(ds)
    assert data_error_in(raised.value) == (
        f"Image file {bad} cannot be decoded (its first bytes and its ending look like an "
        "image, the data between them is damaged): remove or replace it.")
    listing_cache.wait_for_background_checks()


def test_a_corrupt_file_met_on_a_cold_run_exits_2_naming_it(folder, cache, tmp_path):
    bad = folder / "cat" / "9.png"
    bad.write_bytes(b"this was never a png")
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump({
        "data": {"source": "image_folder", "path": str(folder), "image_size": [8, 8],
                 "validation_fraction": 0.0, "cache": None},
        "model": {"name": "small_cnn"},
        "training": {"epochs": 1, "global_batch_size": 4},
        "runtime": {"verbose": 0, "tensorboard": False, "runs_dir": str(tmp_path / "runs")}}))
    result = CliRunner().invoke(main, ["train", str(recipe)])
    assert result.exit_code == 2, result.output
    assert f"Image file {bad} is not a whole JPEG, PNG, GIF or BMP image" in result.output
    assert "Traceback" not in result.output and "assertion failed" not in result.output
    listing_cache.wait_for_background_checks()


@pytest.mark.parametrize("cached", [False, True])
def test_random_crops_of_a_cold_folder_name_a_corrupt_file_too(folder, cache, tmp_path,
                                                              cached):
    bad = folder / "cat" / "8.gif"
    bad.write_bytes(b"GIF89a" + b"\x01" * 40)  # no trailer: cut short
    ds = data.from_image_folder(folder, batch_size=4, image_size=(8, 8), seed=0,
                                random_resized_crop=True,
                                cache=str(tmp_path / "crops") if cached else None)
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
        _all(ds)
    assert data_error_in(raised.value).startswith(f"Image file {bad} is not a whole")
    listing_cache.wait_for_background_checks()
