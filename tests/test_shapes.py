"""Tests of the built-in tfaccel_shapes dataset: generator, TFDS builder, TF-free constants."""

import hashlib
import subprocess
import sys

import numpy as np
import pytest

from tfaccel import datasets
from tfaccel.datasets import _generate

# Its subprocesses check start-up itself (TensorFlow's import lines, what a call imports):
# real interpreters, not forks of the warm one (tests/warm_python.py).
pytestmark = pytest.mark.cold_python

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


def test_constants_import_without_tensorflow():
    code = (
        "import sys, tfaccel.datasets as d;"
        "assert d.NAME == 'tfaccel_shapes' and d.NUM_CLASSES == 4, d.NAME;"
        "assert 'tensorflow' not in sys.modules and 'tensorflow_datasets' not in sys.modules,"
        " sorted(m for m in sys.modules if m.startswith('tensorflow'))"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_constants_describe_the_generated_data():
    # The TF-free constants recipe validation reads, checked against what the generator
    # makes (the builder's splits: test_prepare_writes_both_splits_with_declared_features).
    images, labels = _generate.generate(64, seed=0)
    assert images.shape[1:] == datasets.IMAGE_SHAPE
    assert sorted(set(labels.tolist())) == list(range(datasets.NUM_CLASSES))
    assert len(datasets.CLASS_NAMES) == datasets.NUM_CLASSES


def test_each_label_draws_the_shape_its_class_name_says():
    # Points around a shape of radius 10 centred at 0, upright: which of them fall inside
    # tells a circle, a square, an (upward-pointing) triangle and a cross apart.
    points = np.array([(8.2, 8.2),    # a square's corner: outside the circle
                       (0.0, 9.5),    # the circle's and the cross's edge, past the square's
                       (6.5, 6.5),    # inside the circle and the square only
                       (0.0, -10.5)],  # the triangle's apex only
                      np.float32)
    inside_by_shape = {"circle": [0, 1, 1, 0], "square": [1, 0, 1, 0],
                       "triangle": [0, 0, 0, 1], "cross": [0, 1, 0, 0]}
    n = datasets.NUM_CLASSES
    dx = np.broadcast_to(points[:, 0], (n, 1, len(points))).astype(np.float32)
    dy = np.broadcast_to(points[:, 1], (n, 1, len(points))).astype(np.float32)
    distance = _generate._signed_distance(np.arange(n), dx, dy,
                                          np.full((n, 1, 1), 10, np.float32),
                                          np.zeros((n, 1, 1), np.float32))
    inside = (distance[:, 0] < 0).astype(int).tolist()
    assert inside == [inside_by_shape[name] for name in datasets.CLASS_NAMES]


def test_generate_shapes_dtypes_and_exact_balance():
    images, labels = _generate.generate(400, seed=7)
    assert images.shape == (400, 32, 32, 3) and images.dtype == np.uint8
    assert labels.shape == (400,) and labels.dtype == np.int64
    assert np.bincount(labels, minlength=4).tolist() == [100, 100, 100, 100]
    # A majority-class guess therefore scores exactly 25%, under the 40% bound.
    assert np.bincount(labels).max() / labels.size == 0.25


def test_generate_is_deterministic_per_seed_and_differs_across_seeds():
    a_images, a_labels = _generate.generate(64, seed=(1, 0))
    b_images, b_labels = _generate.generate(64, seed=(1, 0))
    c_images, _ = _generate.generate(64, seed=(1, 1))
    np.testing.assert_array_equal(a_images, b_images)
    np.testing.assert_array_equal(a_labels, b_labels)
    assert not np.array_equal(a_images, c_images)


def test_generate_draws_visible_shapes_on_varied_backgrounds():
    images, _ = _generate.generate(256, seed=3)
    pixels = images.astype(np.float32)
    # Every image has contrast well above the +-20 noise: a shape is present.
    spread = pixels.reshape(256, -1, 3).std(axis=1).max(axis=1)
    assert spread.min() > 15.0, spread.min()
    # Backgrounds vary in colour across images (the corner pixel's mean colour).
    corners = pixels[:, :3, :3].mean(axis=(1, 2))
    assert corners.std(axis=0).min() > 40.0


@pytest.fixture(scope="module")
def prepared(shapes_data_dir):
    # The session's data dir (tests/conftest.py) is datasets.prepare run into a fresh folder:
    # the preparation under test, shared rather than generated a second time. Called again
    # here it reuses what is there (test_prepare_again_reuses_the_prepared_data checks it).
    from pathlib import Path

    data_dir = Path(shapes_data_dir)
    return data_dir, datasets.prepare(data_dir)


def test_prepare_writes_both_splits_with_declared_features(prepared):
    _, builder = prepared
    info = builder.info
    assert info.name == datasets.NAME
    assert {name: split.num_examples for name, split in info.splits.items()} == \
        datasets.SPLIT_SIZES
    assert tuple(info.features["image"].shape) == datasets.IMAGE_SHAPE
    assert info.features["label"].names == list(datasets.CLASS_NAMES)
    assert info.supervised_keys == ("image", "label")


def test_tfds_load_reads_the_generated_test_split(prepared):
    import tensorflow_datasets as tfds

    data_dir, _ = prepared
    # Same path a user takes for MNIST or CIFAR, after the module registered the name.
    ds = tfds.load(datasets.NAME, split="test", data_dir=str(data_dir), as_supervised=True)
    images, labels = zip(*tfds.as_numpy(ds))
    images, labels = np.stack(images), np.array(labels)
    assert images.shape == (2_000, 32, 32, 3) and images.dtype == np.uint8
    assert np.bincount(labels).tolist() == [500, 500, 500, 500]

    # Lossless PNG round trip: exactly the generator's images and labels (TFDS reorders).
    from tfaccel.datasets import shapes

    want_images, want_labels = _generate.generate(2_000, seed=(shapes.SEED, 1))

    def fingerprints(imgs, labs):
        return sorted(hashlib.sha1(i.tobytes()).hexdigest() + str(l) for i, l in zip(imgs, labs))

    assert fingerprints(images, labels) == fingerprints(want_images, want_labels)


def test_prepare_again_reuses_the_prepared_data(prepared):
    data_dir, _ = prepared
    files = sorted(p for p in (data_dir / datasets.NAME).rglob("*") if p.is_file())
    before = {p: p.stat().st_mtime_ns for p in files}
    builder = datasets.prepare(data_dir)
    assert builder.info.splits["train"].num_examples == 12_000
    assert {p: p.stat().st_mtime_ns for p in files} == before


@pytest.mark.slow
@pytest.mark.heavy
def test_default_small_cnn_learns_it_to_90_percent(prepared):
    """A real learning problem: chance is 25% (balanced classes), a small CNN gets >= 90%."""
    import keras
    import tensorflow as tf

    from tfaccel import models

    _, builder = prepared
    keras.utils.set_random_seed(0)
    train = (builder.as_dataset(split="train", as_supervised=True).cache()
             .shuffle(12_000, seed=0).batch(64).prefetch(tf.data.AUTOTUNE))
    test = builder.as_dataset(split="test", as_supervised=True).batch(500)
    model = models.build_model("small_cnn", input_shape=datasets.IMAGE_SHAPE,
                               num_classes=datasets.NUM_CLASSES)
    model.compile(optimizer=keras.optimizers.Adam(2e-3),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    history = model.fit(train, validation_data=test, epochs=6, verbose=0)
    assert history.history["val_accuracy"][-1] >= 0.90, history.history["val_accuracy"]
