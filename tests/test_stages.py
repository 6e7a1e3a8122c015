"""Tests of the standard tail: order, shuffling, augmentation randomness, determinism, arrays."""

import numpy as np
import pytest
import tensorflow as tf

from tfaccel import data
from tfaccel.errors import DataError, UserInputError

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


def _images(n=16, size=8):
    rng = np.random.RandomState(0)
    return rng.randint(0, 256, (n, size, size, 3)).astype(np.uint8), np.arange(n)


def _epoch(ds):
    xs, ys = [], []
    for x, y in ds:
        xs.append(x.numpy())
        ys.append(y.numpy())
    return np.concatenate(xs), np.concatenate(ys)


def test_from_arrays_yields_every_example_once_as_float_batches():
    x, y = _images(10)
    ds = data.from_arrays(x, y, batch_size=4, seed=0)
    xb, yb = _epoch(ds)
    assert xb.dtype == np.float32 and xb.shape == (10, 8, 8, 3)
    assert sorted(yb.tolist()) == list(range(10))
    np.testing.assert_array_equal(xb[np.argsort(yb)], x.astype(np.float32))


def test_shuffle_differs_per_epoch_and_is_reproducible_with_seed():
    x, y = _images(64)
    ds = data.from_arrays(x, y, batch_size=64, seed=3, deterministic=True)
    first, second = _epoch(ds)[1], _epoch(ds)[1]
    assert first.tolist() != second.tolist()
    assert sorted(first.tolist()) == sorted(second.tolist()) == list(range(64))
    again = data.from_arrays(x, y, batch_size=64, seed=3, deterministic=True)
    assert _epoch(again)[1].tolist() == first.tolist()


def test_augmentation_stays_random_across_epochs_with_cache():
    x, y = _images(8)
    ds = data.optimize(tf.data.Dataset.from_tensor_slices((x, y)), batch_size=8,
                       cache="memory", augment=["flip", "crop", "brightness"], seed=1,
                       deterministic=True)
    e1, e2 = _epoch(ds)[0], _epoch(ds)[0]
    assert not np.array_equal(e1, e2)
    # Reproducible: a fresh pipeline with the same seed gives the same two epochs.
    ds2 = data.optimize(tf.data.Dataset.from_tensor_slices((x, y)), batch_size=8,
                        cache="memory", augment=["flip", "crop", "brightness"], seed=1,
                        deterministic=True)
    np.testing.assert_array_equal(_epoch(ds2)[0], e1)
    np.testing.assert_array_equal(_epoch(ds2)[0], e2)


def test_cache_to_file_is_written_and_augment_still_random(tmp_path):
    x, y = _images(8)
    ds = data.optimize(tf.data.Dataset.from_tensor_slices((x, y)), batch_size=8,
                       cache=str(tmp_path / "c"), augment=["flip", "contrast"], seed=2)
    e1 = _epoch(ds)[0]
    assert any(p.name.startswith("c.") for p in tmp_path.iterdir())  # tf.data's file prefix
    assert not np.array_equal(e1, _epoch(ds)[0])


def test_batches_keep_their_order_without_deterministic():
    # Failing before: with deterministic=False (the default) the batch stage and the maps
    # after it handed out whichever batch was ready first, so the partial batch of 1 came
    # before a full one (2 of 30 builds here; Keras' own tests read the first batch and
    # expect a full one) and a batch met another position's augmentation seed (the
    # tf.data service test compared two builds and failed in CI).
    x = np.full((33, 128, 128, 3), 100, np.uint8)
    x[:, 0, 0, 0] = np.arange(33)  # each example recognisable
    builds = []
    for _ in range(20):
        batches = list(data.from_arrays(x, np.arange(33), batch_size=8, shuffle_buffer=0,
                                        seed=1, augment=["flip", "brightness"]
                                        ).as_numpy_iterator())
        assert [len(y) for _, y in batches] == [8, 8, 8, 8, 1]
        builds.append(np.concatenate([b for b, _ in batches]))
    for other in builds[1:]:
        np.testing.assert_array_equal(other, builds[0])  # each batch, its seed


def test_each_named_augmentation_keeps_shape_range_and_changes_something():
    x, y = _images(32, size=16)
    for name in data.AUGMENTATIONS:
        ds = data.from_arrays(x, y, batch_size=32, shuffle_buffer=0, augment=[name], seed=0)
        out, labels = _epoch(ds)
        assert out.shape == x.shape and out.min() >= 0 and out.max() <= 255
        assert not np.array_equal(out, x.astype(np.float32)), name


def test_flip_and_crop_move_pixels_exactly():
    # flip/crop only move pixels: every output image is a rearrangement of reflect-padded input.
    x = np.arange(2 * 8 * 8 * 1, dtype=np.uint8).reshape(2, 8, 8, 1)
    ds = data.from_arrays(x, np.arange(2), batch_size=2, shuffle_buffer=0, augment=["flip"],
                          seed=5, deterministic=True)
    out = _epoch(ds)[0]
    for i in range(2):
        assert (np.array_equal(out[i], x[i]) or np.array_equal(out[i], x[i, :, ::-1]))
    ds = data.from_arrays(x, np.arange(2), batch_size=2, shuffle_buffer=0, augment=["crop"],
                          seed=5, deterministic=True)
    out = _epoch(ds)[0]
    padded = np.pad(x, [(0, 0), (1, 1), (1, 1), (0, 0)], mode="reflect").astype(np.float32)
    for i in range(2):
        windows = [padded[i, a:a + 8, b:b + 8] for a in range(3) for b in range(3)]
        assert any(np.array_equal(out[i], w) for w in windows)


def test_callable_augment_gets_a_seed_per_example_and_per_batch():
    x, y = _images(6)

    def jitter(features, label, seed):
        return features + tf.random.stateless_uniform(tf.shape(features), seed), label

    for where in ("example", "batch"):
        ds = data.from_arrays(x, y, batch_size=6, shuffle_buffer=0, augment=jitter,
                              augment_on=where, seed=0, deterministic=True)
        e1, e2 = _epoch(ds)[0], _epoch(ds)[0]
        assert e1.dtype == np.float32 and not np.array_equal(e1, e2)
        assert np.all(np.abs(e1 - x) <= 1.0)


def test_features_dict_and_features_only():
    x = {"image": _images(4)[0], "extra": np.arange(4.0)}
    ds = data.from_arrays(x, batch_size=4, shuffle_buffer=0, augment=["flip"], seed=0,
                          deterministic=True)
    batch = next(iter(ds))
    assert set(batch) == {"image", "extra"} and batch["image"].dtype == tf.float32
    assert batch["extra"].numpy().tolist() == [0.0, 1.0, 2.0, 3.0]


def test_options_are_applied():
    x, y = _images(4)
    ds = data.from_arrays(x, y, batch_size=2, deterministic=True, private_threads=3,
                          ram_budget_bytes=1 << 28, shard_policy="data")
    opts = ds.options()
    assert opts.deterministic is True
    assert opts.threading.private_threadpool_size == 3
    assert opts.autotune.ram_budget == 1 << 28
    assert (opts.experimental_distribute.auto_shard_policy
            == tf.data.experimental.AutoShardPolicy.DATA)


def test_sequential_options_turn_off_automatic_parallelism():
    opts = data.sequential_options()
    assert opts.experimental_optimization.map_parallelization is False
    assert opts.experimental_optimization.inject_prefetch is False
    assert opts.autotune.enabled is False


@pytest.mark.parametrize("kwargs, message", [
    ({"batch_size": 0}, "batch_size"),
    ({"batch_size": 2, "augment": ["spin"]}, "spin"),
    ({"batch_size": 2, "shard_policy": "files"}, "shard_policy"),
    ({"batch_size": 2, "augment_on": "epoch"}, "augment_on"),
    ({"batch_size": 2, "shuffle_buffer": -1}, "shuffle_buffer"),
])
def test_bad_arguments_name_the_argument(kwargs, message):
    x, y = _images(4)
    with pytest.raises(UserInputError, match=message):
        data.from_arrays(x, y, **kwargs)


def test_batch_size_none_skips_only_the_batch_stage():
    # Keras' loaders yield single examples with batch_size=None; the cast and prefetch stay.
    x, y = _images(6)
    ds = data.optimize(tf.data.Dataset.from_tensor_slices((x, y)), batch_size=None,
                       shuffle_buffer=6, seed=0, cache="memory", deterministic=True)
    assert ds.element_spec == (tf.TensorSpec((8, 8, 3), tf.float32),
                               tf.TensorSpec((), tf.int64))
    examples = list(ds)
    assert sorted(int(label) for _, label in examples) == list(range(6))
    for image, label in examples:
        np.testing.assert_array_equal(image.numpy(), x[int(label)].astype(np.float32))

    def add_one(features, label, seed):
        return features + 1.0, label

    ds = data.optimize(tf.data.Dataset.from_tensor_slices((x, y)), batch_size=None,
                       augment=add_one, augment_on="example", deterministic=True)
    np.testing.assert_array_equal(next(iter(ds))[0].numpy(), x[0] + 1.0)


@pytest.mark.parametrize("kwargs, message", [
    ({"augment": ["flip"]}, r"batch_size=None \(no batches\) cannot run augment=\['flip'\] "
                            r"with augment_on='batch'"),
    ({"stream": data.EpochStream()}, r"batch_size=None cannot make a stream "
                                     r"\(EpochStream\(first_pass=0"),
])
def test_batch_size_none_refuses_what_counts_batches(kwargs, message):
    x, y = _images(4)
    with pytest.raises(UserInputError, match=message):
        data.optimize(tf.data.Dataset.from_tensor_slices((x, y)), batch_size=None, **kwargs)


def test_arrays_of_different_lengths_or_empty():
    with pytest.raises(DataError, match="4 examples but y has 3"):
        data.from_arrays(np.zeros((4, 2)), np.zeros(3), batch_size=2)
    with pytest.raises(DataError, match="empty"):
        data.from_arrays(np.zeros((0, 2)), np.zeros(0), batch_size=2)


def _photos_of_two_sizes():
    """(JPEG bytes, label) examples of 24x32 and 16x12 images: a decode yields (None, None, 3)."""
    photos = [tf.io.encode_jpeg(tf.fill([h, w, 3], tf.constant(v, tf.uint8)))
              for (h, w), v in [((24, 32), 40), ((16, 12), 200), ((24, 32), 90)]]
    return tf.data.Dataset.from_tensor_slices((tf.stack(photos), [0, 1, 0]))


def decode(jpeg, label):
    return tf.io.decode_jpeg(jpeg, channels=3), label


@pytest.mark.parametrize("augment", [None, ["flip", "crop"]])
def test_images_of_unknown_size_are_refused_naming_map_fn_and_the_shape(augment):
    # Issue #29: these came out as ragged batches without augment (silently) and failed
    # deep inside the augmentation with "Index 1 is not uniform" with it.
    with pytest.raises(UserInputError) as error:
        data.optimize(_photos_of_two_sizes(), batch_size=2, map_fn=decode, augment=augment)
    message = str(error.value)
    assert "map_fn=decode" in message and "(None, None, 3)" in message
    assert "tf.image.resize" in message and "\n" not in message


def test_images_resized_in_map_fn_batch_and_augment():
    def decode_resized(jpeg, label):
        image = tf.image.resize(tf.io.decode_jpeg(jpeg, channels=3), (8, 8))
        return tf.cast(tf.round(image), tf.uint8), label

    batches = list(data.optimize(_photos_of_two_sizes(), batch_size=2, map_fn=decode_resized,
                                 augment=["flip", "crop"], seed=0, deterministic=True))
    assert [tuple(x.shape) for x, _ in batches] == [(2, 8, 8, 3), (1, 8, 8, 3)]
    assert [y.numpy().tolist() for _, y in batches] == [[0, 1], [0]]
    # Flat-coloured photos: moving pixels keeps each one's colour (JPEG within a level).
    assert np.abs(batches[0][0].numpy()[1] - 200).max() <= 2


def test_images_of_unknown_size_without_map_fn_name_the_dataset():
    examples = _photos_of_two_sizes().map(decode)
    with pytest.raises(UserInputError, match=r"the dataset's images .*\(None, None, 3\)"):
        data.optimize(examples, batch_size=2)
    padded = next(iter(data.optimize(examples, batch_size=2, padded_batch=True)))[0]
    assert padded.shape == (2, 24, 32, 3)  # asked for: zeros up to the largest
