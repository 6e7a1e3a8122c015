"""Tests of the builders under MirroredStrategy on 2 logical CPUs: batches, shards, drop_remainder."""

import numpy as np
import pytest
import tensorflow as tf

from tfaccel import data

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


@pytest.fixture
def strategy(logical_cpus):
    return tf.distribute.MirroredStrategy(logical_cpus)


def _per_replica(strategy, value):
    return [t.numpy() for t in strategy.experimental_local_results(value)]


def test_global_batch_is_split_into_disjoint_replica_shares(strategy):
    x = np.arange(20, dtype=np.float32)[:, None]
    y = np.arange(20)
    with strategy.scope():
        ds = data.from_arrays(x, y, batch_size=8, seed=0)
    # drop_remainder is automatic with 2 replicas: 20 // 8 = 2 full global batches.
    assert ds.element_spec[1].shape.as_list() == [8]
    seen = []
    for _, labels in strategy.experimental_distribute_dataset(ds):
        shares = _per_replica(strategy, labels)
        assert [len(s) for s in shares] == [4, 4]
        assert set(shares[0]).isdisjoint(shares[1])
        seen += [v for s in shares for v in s.tolist()]
    assert len(seen) == 16 and len(set(seen)) == 16


def test_input_context_gives_per_replica_batches_and_disjoint_pipelines(strategy):
    x = np.arange(24, dtype=np.float32)
    y = np.arange(24)
    # Two input pipelines, as two workers would have: each keeps its own half.
    contexts = [tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=i,
                                           num_replicas_in_sync=4) for i in range(2)]
    shares = []
    for ctx in contexts:
        ds = data.from_arrays(x, y, batch_size=8, input_context=ctx, shuffle_buffer=0)
        assert ds.element_spec[1].shape.as_list() == [2]  # 8 global / 4 replicas
        shares.append(set(np.concatenate([b.numpy() for _, b in ds]).tolist()))
    assert shares[0].isdisjoint(shares[1]) and shares[0] | shares[1] == set(range(24))


def test_distribute_datasets_from_function_with_python_source(strategy):
    class Items:
        def __len__(self):
            return 16

        def __getitem__(self, i):
            return np.float32(i), np.int64(i)

    def make(ctx):
        return data.from_python(Items(), batch_size=8, workers=1, mode="thread",
                                input_context=ctx, deterministic=True)

    dist = strategy.distribute_datasets_from_function(make)
    seen = []
    for _, labels in dist:
        shares = _per_replica(strategy, labels)
        assert [len(s) for s in shares] == [4, 4]
        assert set(shares[0]).isdisjoint(shares[1])
        seen += [v for s in shares for v in s.tolist()]
    assert sorted(seen) == list(range(16))


def test_tfrecords_shard_policy_is_file_capable_and_arrays_data(tmp_path):
    path = str(tmp_path / "a.tfrecord")
    with tf.io.TFRecordWriter(path) as w:
        for i in range(4):
            w.write(tf.train.Example(features=tf.train.Features(feature={
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i]))}))
                .SerializeToString())
    ds = data.from_tfrecords(path, features={"label": {"dtype": "int64"}}, label_key=None,
                             batch_size=2)
    policy = ds.options().experimental_distribute.auto_shard_policy
    assert policy == tf.data.experimental.AutoShardPolicy.AUTO
    ds = data.from_arrays(np.zeros(4), batch_size=2)
    assert (ds.options().experimental_distribute.auto_shard_policy
            == tf.data.experimental.AutoShardPolicy.DATA)


def test_python_sources_split_by_input_pipeline():
    class Items:
        def __len__(self):
            return 12

        def __getitem__(self, i):
            return np.float32(i), np.int64(i)

    def shards(index, count):
        for i in range(index, 20, count):
            yield np.float32(i), np.int64(i)

    for source, total in ((Items(), 12), (shards, 20)):
        seen = []
        for pipeline_id in range(2):
            ctx = tf.distribute.InputContext(num_input_pipelines=2,
                                             input_pipeline_id=pipeline_id,
                                             num_replicas_in_sync=2)
            ds = data.from_python(source, batch_size=4, workers=2, mode="thread",
                                  input_context=ctx, shuffle=source is not shards, seed=1)
            seen.append(set(np.concatenate([b.numpy() for _, b in ds]).tolist()))
        assert seen[0].isdisjoint(seen[1]) and seen[0] | seen[1] == set(range(total))


def _two_pipelines():
    # Two workers, one replica each: the contexts distribute_datasets_from_function gives.
    return [tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=i,
                                       num_replicas_in_sync=2) for i in range(2)]


def _assert_each_example_once(shares, expected):
    seen = [v for share in shares for v in share]
    assert sorted(seen) == sorted(expected)  # every example once: no overlap, none missed
    assert all(len(share) == len(expected) // 2 for share in shares)


@pytest.mark.parametrize("seed", [None, 5])
def test_arrays_two_input_pipelines_shuffled_nondeterministic(seed):
    # Shuffling on and a non-deterministic order (the default), no seed shared between the
    # two "workers": the shard must still be decided before any shuffle.
    x = np.arange(40, dtype=np.float32)
    shares = []
    for ctx in _two_pipelines():
        ds = data.from_arrays(x, np.zeros(40, np.int64), batch_size=4, input_context=ctx,
                              shuffle_buffer=40, seed=seed, deterministic=False,
                              augment=None)
        shares.append([int(v) for b, _ in ds for v in b.numpy()])
    _assert_each_example_once(shares, range(40))


@pytest.mark.parametrize("seed", [None, 5])
def test_image_folder_two_input_pipelines_shuffled_nondeterministic(tmp_path, seed):
    ids = []
    for c in range(2):
        (tmp_path / f"c{c}").mkdir()
        for i in range(6):
            ident = 10 * (6 * c + i) + 5  # one distinct value per image (kept: no resize)
            ids.append(ident)
            img = np.full((4, 4, 3), ident, np.uint8)
            (tmp_path / f"c{c}" / f"{i}.png").write_bytes(tf.io.encode_png(img).numpy())
    shares = []
    for ctx in _two_pipelines():
        ds = data.from_image_folder(tmp_path, batch_size=2, image_size=(4, 4),
                                    input_context=ctx, shuffle_buffer=12, seed=seed,
                                    deterministic=False)
        # A float cast of the uint8 pixels: the values as written (no scaling).
        shares.append([int(img[0, 0, 0]) for b, _ in ds for img in b.numpy()])
    _assert_each_example_once(shares, ids)


class _FourExamples:
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return np.float32(i), np.int64(0)


@pytest.mark.parametrize("build", ["arrays", "image_folder", "python"])
def test_data_sharded_sources_keep_a_fixed_order_under_multi_worker(tmp_path, monkeypatch,
                                                                     build):
    # Under a multi-worker strategy, experimental_distribute_dataset shards these sources by
    # DATA (every k-th element of the same pipeline on each worker): unsafe unless the order
    # is fixed, so the builder fixes it even when the caller asked for speed.
    from tfaccel.data import sharding

    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "0.png").write_bytes(
        tf.io.encode_png(np.zeros((4, 4, 3), np.uint8)).numpy())

    def make():
        if build == "arrays":
            return data.from_arrays(np.zeros((4, 2), np.float32), np.zeros(4, np.int64),
                                    batch_size=2, deterministic=False)
        if build == "python":  # was not fixed: workers could train on overlapping shares
            return data.from_python(_FourExamples(), batch_size=2, workers=1, mode="thread",
                                    deterministic=False)
        return data.from_image_folder(tmp_path, batch_size=1, image_size=(4, 4),
                                      deterministic=False)

    assert make().options().deterministic is False  # one worker: the caller's choice
    monkeypatch.setattr(sharding, "multi_worker_in_scope", lambda: True)
    assert make().options().deterministic is True


def test_multi_worker_in_scope_is_false_for_mirrored(strategy):
    from tfaccel.data import sharding

    assert sharding.multi_worker_in_scope() is False
    with strategy.scope():
        assert sharding.multi_worker_in_scope() is False
