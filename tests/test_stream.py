"""The resumable stream of passes: order a pure function of (seed, pass), exact skipping."""

import numpy as np
import pytest
import tensorflow as tf

from tfaccel import data
from tfaccel.errors import UserInputError

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


def _labels(dataset):
    return [batch[1].numpy().tolist() for batch in dataset]


def _stream(stream, *, deterministic=True, n=40, **kwargs):
    x = np.arange(n * 2 * 2 * 3).reshape(n, 2, 2, 3).astype(np.uint8)
    y = np.arange(n)
    kwargs.setdefault("shuffle_buffer", n)
    return data.optimize(tf.data.Dataset.from_tensor_slices((x, y)), batch_size=8, seed=3,
                         cache="memory", deterministic=deterministic, stream=stream, **kwargs)


def test_each_pass_is_a_new_order_of_every_example():
    batches = _labels(_stream(data.EpochStream(num_passes=3)))
    passes = [sum(batches[i * 5:(i + 1) * 5], []) for i in range(3)]
    assert len(batches) == 15
    for order in passes:
        assert sorted(order) == list(range(40))
    assert passes[0] != passes[1] != passes[2]


def test_a_pass_rebuilt_elsewhere_resumes_exactly_at_any_batch():
    full = _stream(data.EpochStream(num_passes=3), augment=["flip", "brightness"])
    full = [(x.numpy(), y.numpy()) for x, y in full]
    for first_pass, skip in [(1, 0), (1, 3), (2, 4)]:
        resumed = _stream(data.EpochStream(first_pass=first_pass, skip_batches=skip,
                                           num_passes=3), augment=["flip", "brightness"])
        resumed = [(x.numpy(), y.numpy()) for x, y in resumed]
        expected = full[first_pass * 5 + skip:]
        assert len(resumed) == len(expected)
        for (xa, ya), (xb, yb) in zip(expected, resumed):
            np.testing.assert_array_equal(ya, yb)
            np.testing.assert_array_equal(xa, xb)  # same augmentation draws too


@pytest.mark.parametrize("augment_on", ["example", "batch"])
def test_a_callable_augmentation_may_branch_on_tensors_in_a_stream(augment_on):
    # The pass function is not converted by autograph (its start-up cost), but the maps
    # inside it are: a Python `if` on a tensor in the user's function still works.
    def darken_odd(features, label, seed):
        if tf.reduce_sum(label) % 2 == 1:
            features = features * 0.0
        return features, label

    batches = list(_stream(data.EpochStream(num_passes=1), augment=darken_odd,
                           augment_on=augment_on))
    assert len(batches) == 5
    for x, y in batches:
        odd = (y.numpy() % 2 == 1) if augment_on == "example" else \
            np.full(len(y), y.numpy().sum() % 2 == 1)
        assert (x.numpy()[odd] == 0).all() and (x.numpy()[~odd] > 0).any() == (~odd).any()


def test_without_determinism_a_resumed_pass_sees_each_remaining_example_once():
    # Parallel stages after the resume point may reorder, but the examples trained before
    # the checkpoint are never seen again and none is missed.
    seen_before = sum(_labels(_stream(data.EpochStream(first_pass=1, num_passes=2),
                                      deterministic=True))[:2], [])
    rest = sum(_labels(_stream(data.EpochStream(first_pass=1, skip_batches=2, num_passes=2),
                               deterministic=False, num_parallel_calls=4,
                               augment=["flip"])), [])
    assert sorted(seen_before + rest) == list(range(40))


def test_a_reference_shuffle_is_skipped_before_decoding():
    decoded = []

    def decode(i):
        tf.py_function(lambda v: decoded.append(int(v)), [i], [])
        return tf.cast(i, tf.float32), i

    stream = data.EpochStream(first_pass=0, skip_batches=3, num_passes=1)
    out = data.optimize(tf.data.Dataset.range(40), batch_size=8, map_fn=decode,
                        source_shuffle=40, seed=1, stream=stream, deterministic=True)
    labels = sum(_labels(out), [])
    assert len(labels) == 16 and len(decoded) == 16  # the 24 skipped were never decoded


def test_stream_arguments_are_checked():
    with pytest.raises(UserInputError, match="skip_batches must be an integer >= 0"):
        data.EpochStream(skip_batches=-1)
    with pytest.raises(UserInputError, match="num_passes .2. must be more than first_pass"):
        data.EpochStream(first_pass=2, num_passes=2)
    with pytest.raises(UserInputError, match="cannot be combined"):
        data.optimize(tf.data.Dataset.range(4), batch_size=2, source_shuffle=4,
                      cache="memory", stream=data.EpochStream())


def test_tfrecord_files_in_a_stream_resume_exactly(tmp_path):
    paths = []
    for f in range(3):
        path = str(tmp_path / f"part-{f}.tfrecord")
        with tf.io.TFRecordWriter(path) as writer:
            for i in range(f * 8, f * 8 + 8):
                example = tf.train.Example(features=tf.train.Features(feature={
                    "x": tf.train.Feature(float_list=tf.train.FloatList(value=[i])),
                    "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i]))}))
                writer.write(example.SerializeToString())
        paths.append(path)

    def build(stream):
        return data.from_tfrecords(paths, batch_size=4, features={
            "x": {"dtype": "float32"}, "label": {"dtype": "int64"}}, label_key="label",
            shuffle_buffer=8, seed=2, stream=stream, deterministic=True)

    full = _labels(build(data.EpochStream(num_passes=3)))
    assert sorted(sum(full[6:12], [])) == list(range(24))  # pass 1: every record once
    assert full[0:6] != full[6:12]
    assert _labels(build(data.EpochStream(first_pass=1, skip_batches=2, num_passes=3))) \
        == full[8:]


def _python_config(tmp_path, kind, **keys):
    import dataclasses

    from tfaccel.config.recipe import DataConfig

    (tmp_path / "src.py").write_text(
        "import numpy as np\n"
        "class Items:\n"
        "    num_classes = 40\n"
        "    def __len__(self):\n        return 40\n"
        "    def __getitem__(self, i):\n        return np.float32([i]), np.int64(i)\n"
        "items = Items()\n"
        "def gen(worker, workers):\n"
        "    for i in range(worker, 40, workers):\n"
        "        yield np.float32([i]), np.int64(i)\n")
    return dataclasses.replace(DataConfig(), source="python", path=f"{tmp_path}/src.py:{kind}",
                               validation_split_name=None, cache=None, workers=1, num_classes=40,
                               **keys)


def _build(config, stream=None):
    from tfaccel.data.from_recipe import build_datasets

    return build_datasets(config, global_batch_size=8, num_replicas=1, seed=4,
                          deterministic=True, stream=stream)[0]


def test_a_generator_python_source_is_shuffled_by_data_shuffle_buffer(tmp_path):
    plain = sum(_labels(_build(_python_config(tmp_path, "gen", shuffle_buffer=0))), [])
    mixed = sum(_labels(_build(_python_config(tmp_path, "gen", shuffle_buffer=40))), [])
    assert plain == list(range(40))
    assert sorted(mixed) == list(range(40)) and mixed != plain


@pytest.mark.parametrize("kind", ["items", "gen"])
def test_a_python_source_in_a_stream_resumes_exactly(tmp_path, kind):
    config = _python_config(tmp_path, kind, shuffle_buffer=40)
    full = _labels(_build(config, data.EpochStream(num_passes=3)))
    assert full[0:5] != full[5:10]
    resumed = _labels(_build(config, data.EpochStream(first_pass=1, skip_batches=2,
                                                      num_passes=3)))
    assert resumed == full[7:]


def _image_folder(tmp_path, n=24):
    for i in range(n):
        folder = tmp_path / "images" / ("a" if i % 2 else "b")
        folder.mkdir(parents=True, exist_ok=True)
        image = np.full((4, 4, 3), i, np.uint8)
        (folder / f"{i:03d}.png").write_bytes(tf.io.encode_png(image).numpy())
    return tmp_path / "images"


@pytest.mark.parametrize("cache", [None, "memory"])
def test_an_image_folder_takes_data_shuffle_buffer_as_given(tmp_path, cache):
    import dataclasses

    from tfaccel.config.recipe import DataConfig

    folder = _image_folder(tmp_path)

    def first_pass(buffer):
        config = dataclasses.replace(DataConfig(), source="image_folder", path=str(folder),
                                     image_size=[4, 4], cache=cache, shuffle_buffer=buffer,
                                     validation_split_name=None)
        batches = _build(config, data.EpochStream(num_passes=1))
        # Pixel values hold the file number.
        return [int(v) for x, _ in batches for v in x.numpy()[:, 0, 0, 0]]

    from tfaccel.data import order

    folder_order = sorted(range(24), key=lambda i: (i % 2 == 0, i))  # a/ then b/
    assert first_pass(0) == folder_order
    # A buffer of 1 shuffles nothing itself (it was once taken as "on": a full shuffle),
    # but any shuffling reads the folder in its one seeded permutation (data.order), so a
    # small buffer still sees both classes.
    assert first_pass(1) == [folder_order[i] for i in order.permutation(24, 4)]
    shuffled = first_pass(24)
    assert sorted(shuffled) == list(range(24)) and shuffled != first_pass(0)


def test_an_image_folder_with_a_validation_split_is_listed_once(tmp_path, monkeypatch):
    import dataclasses

    from tfaccel.config.recipe import DataConfig
    from tfaccel.data.sources import image_folder

    folder = _image_folder(tmp_path)
    calls = []
    real = image_folder.list_image_folder
    monkeypatch.setattr(image_folder, "list_image_folder",
                        lambda *a, **k: calls.append(a) or real(*a, **k))
    config = dataclasses.replace(DataConfig(), source="image_folder", path=str(folder),
                                 image_size=[4, 4], validation_fraction=0.25,
                                 validation_split_name=None)
    from tfaccel.data.from_recipe import build_datasets

    _, _, info = build_datasets(config, global_batch_size=4, num_replicas=1, seed=0,
                                deterministic=True)
    assert len(calls) == 1  # was 2: every header read twice
    assert info.train_examples == 18 and info.validation_examples == 6
