"""Tests of from_tfds on a tiny local builder (no download) and its error messages."""

import re

import numpy as np
import pytest
import tensorflow_datasets as tfds

from tfaccel import data
from tfaccel.errors import DataError

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


class TinyDigits(tfds.core.GeneratorBasedBuilder):
    """Eight 4x4 one-channel images with labels 0..3, generated locally."""

    VERSION = tfds.core.Version("1.0.0")

    def _info(self):
        return tfds.core.DatasetInfo(
            builder=self,
            features=tfds.features.FeaturesDict({
                "image": tfds.features.Image(shape=(4, 4, 1)),
                "label": tfds.features.ClassLabel(names=["a", "b", "c", "d"]),
            }),
            supervised_keys=("image", "label"))

    def _split_generators(self, dl_manager):
        return {"train": self._generate_examples(8), "test": self._generate_examples(4)}

    def _generate_examples(self, n):
        for i in range(n):
            yield i, {"image": np.full((4, 4, 1), 10 * i, np.uint8), "label": i % 4}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("tfds")
    TinyDigits(data_dir=str(path)).download_and_prepare()
    return str(path)


def test_reads_a_prepared_dataset(data_dir):
    ds = data.from_tfds("tiny_digits", split="train", data_dir=data_dir, batch_size=3,
                        shuffle_buffer=8, seed=0)
    assert ds.class_names == ["a", "b", "c", "d"] and ds.num_examples == 8
    xs, ys = zip(*[(x.numpy(), y.numpy()) for x, y in ds])
    x, y = np.concatenate(xs), np.concatenate(ys)
    assert x.dtype == np.float32 and x.shape == (8, 4, 4, 1)
    assert sorted(x[:, 0, 0, 0].tolist()) == [10.0 * i for i in range(8)]
    np.testing.assert_array_equal(y, (x[:, 0, 0, 0] / 10).astype(int) % 4)


def test_split_slice_and_resize(data_dir):
    ds = data.from_tfds("tiny_digits", split="train[:50%]", data_dir=data_dir, batch_size=4,
                        image_size=(2, 2))
    x, _ = next(iter(ds))
    assert x.shape == (4, 2, 2, 1) and ds.num_examples == 4


def test_not_prepared_says_how_to_prepare_and_never_downloads(tmp_path):
    with pytest.raises(DataError, match="not prepared") as raised:
        data.from_tfds("tiny_digits", split="train", data_dir=str(tmp_path), batch_size=2)
    assert not any(tmp_path.rglob("*.tfrecord*"))
    # The advice works as given (`tfds build` would need apache_beam, not installed here).
    command = re.search(r'`python3 -c "(.*?)"`', str(raised.value)).group(1)
    assert f"tfds.builder('tiny_digits', data_dir={str(tmp_path)!r})" in command
    exec(command, {})
    ds = data.from_tfds("tiny_digits", split="train", data_dir=str(tmp_path), batch_size=2)
    assert ds.num_examples > 0


def test_download_true_prepares(tmp_path):
    ds = data.from_tfds("tiny_digits", split="test", data_dir=str(tmp_path), download=True,
                        batch_size=4)
    assert next(iter(ds))[0].shape == (4, 4, 4, 1)


def test_unknown_name_and_split(data_dir):
    with pytest.raises(DataError, match="no dataset named"):
        data.from_tfds("no_such_dataset_xyz", split="train", batch_size=2)
    with pytest.raises(DataError, match="no split 'validation'"):
        data.from_tfds("tiny_digits", split="validation", data_dir=data_dir, batch_size=2)



def test_export_image_folder_round_trip(tmp_path, data_dir):
    from tfaccel.data.image_folder_writer import export_image_folder

    summary = export_image_folder(tmp_path / "out", dataset="tiny_digits", data_dir=data_dir)
    assert summary["images"] == 8 and summary["per_class"] == {"a": 2, "b": 2, "c": 2, "d": 2}
    folder = data.from_image_folder(tmp_path / "out", batch_size=8, image_size=(4, 4),
                                    channels=1, shuffle_buffer=0)
    assert folder.class_names == ["a", "b", "c", "d"]
    x, y = next(iter(folder))
    np.testing.assert_array_equal(y.numpy(), (x.numpy()[:, 0, 0, 0] / 10).astype(int) % 4)


@pytest.mark.slow
def test_builtin_shapes_and_export_round_trip(tmp_path):
    data_dir = str(tmp_path / "tfds")
    ds = data.from_tfds("tfaccel_shapes", split="test", data_dir=data_dir, batch_size=16)
    x, y = next(iter(ds))
    assert x.shape == (16, 32, 32, 3) and ds.num_examples == 2000
    assert ds.class_names == ["circle", "square", "triangle", "cross"]

    from tfaccel.data.image_folder_writer import export_image_folder

    summary = export_image_folder(tmp_path / "folder", split="test", limit=40,
                                  data_dir=data_dir)
    assert summary["images"] == 40 and sum(summary["per_class"].values()) == 40
    folder = data.from_image_folder(tmp_path / "folder", batch_size=40, image_size=(32, 32),
                                    shuffle_buffer=0)
    assert folder.class_names == sorted(summary["class_names"])
    images, labels = next(iter(folder))
    # PNG is lossless and the size is unchanged: pixels equal the TFDS originals.
    originals = np.concatenate([b[0].numpy() for b in data.from_tfds(
        "tfaccel_shapes", split="test[:40]", data_dir=data_dir, batch_size=40)])
    got = {im.tobytes() for im in images.numpy()}
    assert all(o.tobytes() in got for o in originals)
    with pytest.raises(Exception, match="not empty"):
        export_image_folder(tmp_path / "folder", split="test", limit=1, data_dir=data_dir)


@pytest.mark.parametrize("name, shape", [("mnist", (28, 28, 1)), ("cifar10", (32, 32, 3))])
def test_from_tfds_under_tfds_mock_data(name, shape):
    # TFDS's own way to unit-test a pipeline without downloading: nothing is prepared,
    # the builder generates examples.
    import tensorflow as tf
    import tensorflow_datasets as tfds

    from tfaccel.data import from_tfds

    with tfds.testing.mock_data(num_examples=20):
        ds = from_tfds(name, split="train", batch_size=8, shuffle_buffer=20, seed=0,
                       cache="memory", augment=["flip"])
        batches = list(ds)
        assert ds.num_examples == 20
        # cifar10 reads its class names from the downloaded files: "0".."9" unprepared.
        assert ds.class_names == [str(i) for i in range(10)]
        resized = from_tfds(name, split="test[:50%]", batch_size=5, image_size=(16, 16))
        assert [tuple(x.shape) for x, _ in resized] == [(5, 16, 16, shape[2])] * 4
    # Not deterministic by default, but batches keep their order: the partial one comes
    # last (CI once saw 8, 4, 8 when the batch stage could hand out any order).
    assert [int(y.shape[0]) for _, y in batches] == [8, 8, 4]
    assert tuple(batches[0][0].shape[1:]) == shape and batches[0][0].dtype == tf.float32
    assert all(0 <= int(v) < 10 for _, y in batches for v in y)


def test_a_recipe_builds_tfds_data_under_mock_data():
    import tensorflow_datasets as tfds

    from tfaccel.config.recipe import DataConfig
    from tfaccel.data.from_recipe import build_datasets

    with tfds.testing.mock_data(num_examples=12):
        train, val, info = build_datasets(DataConfig(source="tfds", name="mnist"),
                                          global_batch_size=4, num_replicas=1, seed=0,
                                          deterministic=True)
        assert sum(int(y.shape[0]) for _, y in train) == 12
        assert sum(int(y.shape[0]) for _, y in val) == 12
    assert info.num_classes == 10 and info.train_examples == 12
    assert info.input_shape == (28, 28, 1) and info.steps_per_epoch == 3


def test_tfds_files_are_divided_among_workers_before_the_stream(tmp_path):
    # TinyDigits' 8 training examples in 4 files of 2; 2 workers, global batch 4: each
    # worker reads its 2 files (TFDS's own input-context sharding) and makes 2 steps of 2.
    import dataclasses

    import tensorflow as tf

    from tfaccel.config.recipe import DataConfig
    from tfaccel.data import EpochStream
    from tfaccel.data.from_recipe import build_datasets, worker_file_shares

    builder = TinyDigits(data_dir=str(tmp_path))
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(num_shards=4))
    instructions = builder.info.splits["train"].file_instructions
    in_file = [sorted(int(ex["image"][0, 0, 0]) // 10 for ex in tfds.as_numpy(
        tf.data.TFRecordDataset(i.filename).map(builder.info.features.deserialize_example)))
        for i in instructions]
    assert [len(ids) for ids in in_file] == [2, 2, 2, 2]
    config = dataclasses.replace(DataConfig(), source="tfds", name="tiny_digits",
                                 data_dir=str(tmp_path), validation_split_name=None,
                                 shuffle_buffer=8, cache="memory")
    assert worker_file_shares(config, workers=2, global_batch_size=4, seed=0).by_file
    epoch = []
    for worker in range(2):
        ctx = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=worker,
                                         num_replicas_in_sync=2)
        train, _, info = build_datasets(config, global_batch_size=4, num_replicas=2, seed=0,
                                        deterministic=True, input_context=ctx,
                                        stream=EpochStream(num_passes=2))
        assert info.steps_per_epoch == 2 and info.worker_sharding == "file"
        batches = [(x.numpy()[:, 0, 0, 0] // 10).astype(int).tolist() for x, _ in train]
        assert len(batches) == 4 and {len(b) for b in batches} == {2}
        assert sorted(sum(batches[:2], [])) == sorted(in_file[worker] + in_file[worker + 2])
        epoch += sum(batches[:2], [])
    assert sorted(epoch) == list(range(8))  # every example once across the workers
