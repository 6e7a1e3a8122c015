"""Sorted sources mix with any shuffle buffer: each builder permutes its source once, seeded.

A class-sorted source that is cached and then shuffled with a buffer smaller than the data
yields batches of one class (a small CNN stayed at chance). Every builder permutes a sorted
source once, before decode and cache, so the library and the recipe path share the guard;
what is counted here is what the pipeline actually delivers.
"""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from tfaccel import data
from tfaccel.config.recipe import DataConfig
from tfaccel.data import order
from tfaccel.data.from_recipe import build_datasets

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)

CLASSES = 4
PER_CLASS = 48
BATCH = 16
SMALL_BUFFER = 8


@pytest.fixture(scope="module")
def sorted_folder(tmp_path_factory):
    """4 class folders of 48 tiny PNGs each; each class has its own colour."""
    root = tmp_path_factory.mktemp("sorted")
    colours = ((200, 20, 20), (20, 200, 20), (20, 20, 200), (200, 200, 20))
    for c in range(CLASSES):
        (root / f"class{c}").mkdir()
        for i in range(PER_CLASS):
            pixels = np.full((4, 4, 3), colours[c], np.uint8) + np.uint8(i % 5)
            (root / f"class{c}" / f"{i:03d}.png").write_bytes(
                tf.io.encode_png(pixels).numpy())
    return str(root)


def _labels_per_batch(dataset):
    return [np.asarray(y).reshape(-1) for _, y in dataset]


def _mean_classes_per_batch(batches):
    return float(np.mean([len(set(b.tolist())) for b in batches]))


def _sorted_labels():
    return np.repeat(np.arange(CLASSES), PER_CLASS)


def _assert_mixed_and_complete(batches, *, total=CLASSES * PER_CLASS):
    labels = np.concatenate(batches)
    # Every example exactly once per epoch, whatever the order.
    assert len(labels) == total
    np.testing.assert_array_equal(np.bincount(labels, minlength=CLASSES),
                                  [total // CLASSES] * CLASSES)
    # A run of one class gives ~1.3 classes per batch of 16 here; a random order ~3.9.
    assert _mean_classes_per_batch(batches) >= 3.0, _mean_classes_per_batch(batches)


def test_keras_rule_is_randomstate_shuffle_of_the_list():
    listed = list(range(50))
    np.random.RandomState(3).shuffle(listed)
    np.testing.assert_array_equal(order.permutation(50, 3), listed)


@pytest.mark.parametrize("cache", ["memory", "file"])
def test_image_folder_with_cache_and_small_buffer_mixes_classes(sorted_folder, tmp_path,
                                                                cache):
    cache = str(tmp_path / "c") if cache == "file" else cache
    train = data.from_image_folder(sorted_folder, batch_size=BATCH, image_size=(4, 4),
                                   cache=cache, shuffle_buffer=SMALL_BUFFER, seed=0)
    _assert_mixed_and_complete(_labels_per_batch(train))


def test_image_folder_default_buffer_with_cache_mixes_beyond_the_buffer(sorted_folder,
                                                                       monkeypatch):
    # The default buffer after a cache is capped (10,000 in production): a folder larger
    # than the cap is the case that failed; the cap is shrunk here to stand for it.
    from tfaccel.data.sources import image_folder

    monkeypatch.setattr(image_folder, "_CACHED_SHUFFLE_CAP", SMALL_BUFFER)
    train = data.from_image_folder(sorted_folder, batch_size=BATCH, image_size=(4, 4),
                                   cache="memory", seed=1)
    _assert_mixed_and_complete(_labels_per_batch(train))


def test_image_folder_without_shuffling_keeps_file_order(sorted_folder):
    for kwargs in ({"shuffle_buffer": 0}, {"shuffle": False}):
        ds = data.from_image_folder(sorted_folder, batch_size=BATCH, image_size=(4, 4),
                                    cache="memory", seed=0, **kwargs)
        np.testing.assert_array_equal(np.concatenate(_labels_per_batch(ds)),
                                      _sorted_labels())
        assert ds.file_paths == sorted(ds.file_paths)


def test_image_folder_training_subset_is_mixed_and_disjoint_from_validation(sorted_folder):
    # tfaccel's own held-out rule (validation_fraction) picks a sorted subset; the
    # training subset is then permuted like the whole folder.
    common = dict(batch_size=BATCH, image_size=(4, 4), validation_fraction=0.25, seed=2,
                  cache="memory", shuffle_buffer=SMALL_BUFFER)
    train = data.from_image_folder(sorted_folder, subset="training", **common)
    val = data.from_image_folder(sorted_folder, subset="validation", **common)
    assert not set(train.file_paths) & set(val.file_paths)
    assert len(train.file_paths) + len(val.file_paths) == CLASSES * PER_CLASS
    batches = _labels_per_batch(train)
    assert sum(len(b) for b in batches) == len(train.file_paths) == 144
    assert _mean_classes_per_batch(batches) >= 3.0


def test_arrays_sorted_by_label_mix_with_cache_and_small_buffer():
    x = np.arange(CLASSES * PER_CLASS, dtype=np.float32)[:, None]
    y = _sorted_labels()
    train = data.from_arrays(x, y, batch_size=BATCH, cache="memory",
                             shuffle_buffer=SMALL_BUFFER, seed=0)
    batches, features = [], []
    for xb, yb in train:
        batches.append(yb.numpy())
        features.append(xb.numpy()[:, 0])
    _assert_mixed_and_complete(batches)
    features = np.concatenate(features).astype(int)
    # Each example still carries its own label.
    np.testing.assert_array_equal(y[features], np.concatenate(batches))


class _SortedSource:
    """A random-access Python source indexed in class order."""

    def __len__(self):
        return CLASSES * PER_CLASS

    def __getitem__(self, i):
        return np.float32(i), np.int64(i // PER_CLASS)


def test_python_source_indexed_in_order_mixes_with_cache_and_small_buffer():
    train = data.from_python(_SortedSource(), batch_size=BATCH, workers=1, mode="thread",
                             cache="memory", shuffle_buffer=SMALL_BUFFER, seed=0)
    _assert_mixed_and_complete(_labels_per_batch(train))


def test_tfrecord_files_written_one_class_each_mix(tmp_path):
    # 24 files, 6 per class, named in class order: the interleave reads 16 files at once,
    # so without a permuted file list it would read mostly one class at a time.
    per_file = PER_CLASS // 6
    for f in range(CLASSES * 6):
        with tf.io.TFRecordWriter(str(tmp_path / f"part-{f:03d}.tfrecord")) as writer:
            for _ in range(per_file):
                example = tf.train.Example(features=tf.train.Features(feature={
                    "x": tf.train.Feature(float_list=tf.train.FloatList(value=[f])),
                    "label": tf.train.Feature(
                        int64_list=tf.train.Int64List(value=[f // 6]))}))
                writer.write(example.SerializeToString())
    train = data.from_tfrecords(str(tmp_path / "*.tfrecord"), batch_size=BATCH,
                                features={"x": {"dtype": "float32"},
                                          "label": {"dtype": "int64"}},
                                label_key="label", cache="memory",
                                shuffle_buffer=SMALL_BUFFER, seed=0)
    _assert_mixed_and_complete(_labels_per_batch(train))


def test_recipe_image_folder_with_cache_and_small_buffer_mixes_classes(sorted_folder):
    config = dataclasses.replace(DataConfig(), source="image_folder", path=sorted_folder,
                                 image_size=[4, 4], cache="memory",
                                 shuffle_buffer=SMALL_BUFFER, validation_fraction=0.0,
                                 validation_split_name=None)
    train, _, info = build_datasets(config, global_batch_size=BATCH, num_replicas=1, seed=0,
                                    deterministic=True)
    _assert_mixed_and_complete(_labels_per_batch(train))
    assert info.train_examples == CLASSES * PER_CLASS


def test_permutation_is_a_pure_function_of_the_seed(sorted_folder):
    # Resume rebuilds the pipeline in another process: the same seed, the same order.
    def paths(seed):
        return data.from_image_folder(sorted_folder, batch_size=BATCH, image_size=(4, 4),
                                      cache="memory", shuffle_buffer=SMALL_BUFFER,
                                      seed=seed).file_paths

    assert paths(5) == paths(5) and paths(5) != paths(6)
    assert sorted(paths(5)) == sorted(paths(6))


def test_small_buffer_on_a_sorted_folder_learns_like_the_whole_buffer(sorted_folder):
    import keras

    def accuracy(buffer):
        keras.utils.set_random_seed(0)
        train = data.from_image_folder(sorted_folder, batch_size=BATCH, image_size=(4, 4),
                                       cache="memory", shuffle_buffer=buffer, seed=0)
        model = keras.Sequential([keras.Input((4, 4, 3)), keras.layers.Rescaling(1 / 255),
                                  keras.layers.Flatten(), keras.layers.Dense(CLASSES)])
        model.compile(keras.optimizers.SGD(0.5),
                      keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["accuracy"])
        model.fit(train, epochs=3, verbose=0)
        plain = data.from_image_folder(sorted_folder, batch_size=64, image_size=(4, 4),
                                       shuffle=False)
        return model.evaluate(plain, verbose=0)[1]

    whole, small = accuracy(CLASSES * PER_CLASS), accuracy(SMALL_BUFFER)
    assert whole >= 0.9
    assert small >= whole - 0.05, (small, whole)


def _sorted_python_module(tmp_path):
    (tmp_path / "sorted_src.py").write_text(
        "import numpy as np\n"
        f"class Items:\n    num_classes = {CLASSES}\n"
        f"    def __len__(self):\n        return {CLASSES * PER_CLASS}\n"
        "    def __getitem__(self, i):\n"
        f"        return np.float32([i]), np.int64(i // {PER_CLASS})\n"
        "items = Items()\n")
    return f"{tmp_path}/sorted_src.py:items"


@pytest.mark.parametrize("source", ["arrays", "python"])
@pytest.mark.parametrize("cache", ["memory", "file"])
def test_recipe_sources_sorted_by_label_mix_with_cache_and_small_buffer(tmp_path, source,
                                                                        cache):
    if source == "arrays":
        path = str(tmp_path / "sorted.npz")
        np.savez(path, x=np.arange(CLASSES * PER_CLASS, dtype=np.float32)[:, None],
                 y=_sorted_labels())
    else:
        path = _sorted_python_module(tmp_path)
    config = dataclasses.replace(
        DataConfig(), source=source, path=path, workers=1,
        cache=str(tmp_path / "c" / "tr") if cache == "file" else cache,
        shuffle_buffer=SMALL_BUFFER, validation_fraction=0.0, validation_split_name=None)
    train, _, info = build_datasets(config, global_batch_size=BATCH, num_replicas=1, seed=0,
                                    deterministic=True)
    _assert_mixed_and_complete(_labels_per_batch(train))
    assert info.train_examples == CLASSES * PER_CLASS


@pytest.mark.parametrize("source", ["image_folder", "arrays"])
def test_a_permuted_source_in_a_stream_resumes_exactly(sorted_folder, tmp_path, source):
    # The permutation is a pure function of the seed: a pass rebuilt in another process
    # and resumed at (pass 1, batch 3) continues the uninterrupted stream exactly.
    if source == "arrays":
        path = str(tmp_path / "sorted.npz")
        np.savez(path, x=np.arange(CLASSES * PER_CLASS, dtype=np.float32)[:, None],
                 y=_sorted_labels())
        extra = {}
    else:
        path, extra = sorted_folder, {"image_size": [4, 4]}
    config = dataclasses.replace(DataConfig(), source=source, path=path, cache="memory",
                                 shuffle_buffer=SMALL_BUFFER, validation_fraction=0.0,
                                 validation_split_name=None, **extra)

    def labels(stream):
        train, _, _ = build_datasets(config, global_batch_size=BATCH, num_replicas=1,
                                     seed=7, deterministic=True, stream=stream)
        return [b.tolist() for b in _labels_per_batch(train)]

    full = labels(data.EpochStream(num_passes=2))
    steps = CLASSES * PER_CLASS // BATCH
    assert len(full) == 2 * steps
    assert _mean_classes_per_batch([np.array(b) for b in full]) >= 3.0
    resumed = labels(data.EpochStream(first_pass=1, skip_batches=3, num_passes=2))
    assert resumed == full[steps + 3:]
