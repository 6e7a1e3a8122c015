"""Multi-worker file sharding of the resumable stream, one worker's pipeline at a time.

Each test builds the pipeline of every worker in this process with the input context that
`distribute_datasets_from_function` would give it (the 2-process check through the
runner is in tests/test_launch_multiworker.py).
"""

import json

import numpy as np
import pytest
import tensorflow as tf

from tfaccel.config.recipe import recipe_from_dict
from tfaccel.data import EpochStream, cache_files, files_stage, sharding
from tfaccel.data.from_recipe import build_datasets, worker_file_shares
from tfaccel.errors import DataError

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)

# 4 files of 24 examples; example i is in file i // 24.
IDS = np.arange(96)
BATCH = 8  # global: 4 per worker per step, 12 steps per pass


def _contexts(workers=2):
    return [tf.distribute.InputContext(num_input_pipelines=workers, input_pipeline_id=i,
                                       num_replicas_in_sync=workers) for i in range(workers)]


def write_id_records(folder, sizes):
    """TFRecord files ids-<f>.tfrecord holding consecutive ids, `sizes[f]` in file f."""
    folder.mkdir(exist_ok=True)
    start = 0
    for f, size in enumerate(sizes):
        with tf.io.TFRecordWriter(str(folder / f"ids-{f}.tfrecord")) as writer:
            for i in range(start, start + size):
                writer.write(tf.train.Example(features=tf.train.Features(feature={
                    "id": tf.train.Feature(int64_list=tf.train.Int64List(value=[i])),
                    "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 4]))}))
                    .SerializeToString())
        start += size
    return str(folder / "*.tfrecord")


def _config(path, **keys):
    return recipe_from_dict({"data": {
        "source": "tfrecords", "path": path, "validation_split_name": None, "num_classes": 4,
        "features": {"id": {"dtype": "int64", "shape": [1]}, "label": {"dtype": "int64"}},
        "image_key": "id", "label_key": "label", "shuffle_buffer": 96, **keys}}).data


def _steps(dataset):
    """The ids of each batch (a list per batch)."""
    return [x.numpy().reshape(-1).tolist() for x, _ in dataset]


def _worker_stream(config, ctx, stream):
    train, _, info = build_datasets(config, global_batch_size=BATCH, num_replicas=2, seed=0,
                                    deterministic=True, stream=stream, input_context=ctx)
    return train, info


def test_the_shares_rule_asks_for_equal_steps_on_every_worker():
    shares = sharding.plan_file_shares([24] * 4, workers=2, global_batch_size=8)
    assert shares.by_file and shares.steps_per_pass == 12
    assert shares.files_of(0) == (0, 2) and shares.files_of(1) == (1, 3)
    assert ("worker 1 reads 2 of them (48 examples); every worker makes 12 steps of 4 "
            "examples per pass") in shares.describe(1)
    # 26 + 22 examples: 6 and 5 steps of 4: the workers would fall out of step.
    uneven = sharding.plan_file_shares([13, 11, 13, 11], workers=2, global_batch_size=8)
    assert not uneven.by_file and uneven.steps_per_pass is None
    assert "26 examples (6 steps), 22 examples (5 steps)" in uneven.reason
    assert "every worker reads every file and keeps its share by element" in \
        uneven.describe(0)
    # Unequal files whose shares still make equal steps: by file (each drops its rest).
    assert sharding.plan_file_shares([25, 24, 24, 26], workers=2, global_batch_size=8) \
        .steps_per_pass == 12
    assert sharding.plan_file_shares([96], workers=2, global_batch_size=8).reason == \
        "1 file(s) for 2 workers"
    assert "not known" in sharding.plan_file_shares(None, workers=2,
                                                    global_batch_size=8).reason


def test_each_worker_reads_only_its_files_and_every_example_is_seen_once(tmp_path):
    config = _config(write_id_records(tmp_path / "four", [24] * 4))
    passes = []
    for worker, ctx in enumerate(_contexts()):
        train, info = _worker_stream(config, ctx, EpochStream(num_passes=2))
        assert info.steps_per_epoch == 12 and info.train_examples_per_pass == 96
        assert info.worker_sharding == "file"
        # Already split: TensorFlow must not split it again.
        assert (train.options().experimental_distribute.auto_shard_policy
                == tf.data.experimental.AutoShardPolicy.OFF)
        batches = _steps(train)
        assert len(batches) == 24 and {len(b) for b in batches} == {4}  # per-replica batch
        files = {i // 24 for b in batches for i in b}
        # Only this worker's files: every other file of the one seeded order (seed 0).
        read_order = files_stage.read_order(list(range(4)), shuffled=True, seed=0)[0]
        assert files == set(read_order[worker::2])
        passes.append((sum(batches[:12], []), sum(batches[12:], [])))
    for p in range(2):  # one pass = one epoch: every example exactly once across workers
        assert sorted(passes[0][p] + passes[1][p]) == IDS.tolist()
    assert passes[0][0] != passes[0][1]  # reshuffled each pass


def test_a_resume_in_the_middle_of_a_pass_continues_each_worker_exactly(tmp_path):
    config = _config(write_id_records(tmp_path / "four", [24] * 4), augment=[])
    remaining = []
    for ctx in _contexts():
        full = _steps(_worker_stream(config, ctx, EpochStream(num_passes=2))[0])
        resumed = _steps(_worker_stream(
            config, ctx, EpochStream(first_pass=1, skip_batches=5, num_passes=2))[0])
        assert resumed == full[12 + 5:]
        remaining.append(sum(resumed, []))
        trained = sum(full[12:12 + 5], [])
        assert not set(trained) & set(remaining[-1])
    seen_before = [sum(_steps(_worker_stream(config, ctx, EpochStream(
        first_pass=1, num_passes=2))[0])[:5], []) for ctx in _contexts()]
    assert sorted(sum(seen_before, []) + sum(remaining, [])) == IDS.tolist()


def test_a_pass_holds_the_same_steps_on_every_worker_when_files_differ(tmp_path):
    # 25 + 24 and 24 + 26 examples: 12 steps of 4 each; every worker drops what is left of
    # its share in a pass (1 and 2 examples), and each pass yields exactly 12 batches.
    config = _config(write_id_records(tmp_path / "odd", [25, 24, 24, 26]), shuffle_buffer=99)
    for ctx in _contexts():
        batches = _steps(_worker_stream(config, ctx, EpochStream(num_passes=3))[0])
        assert len(batches) == 36


def test_batches_per_pass_caps_every_pass_after_a_resume_too():
    from tfaccel.data import optimize

    def stream(**keys):
        out = optimize(tf.data.Dataset.from_tensor_slices((np.arange(20.0), np.arange(20))),
                       batch_size=4, seed=1, shuffle_buffer=20, deterministic=True,
                       stream=EpochStream(num_passes=2, batches_per_pass=3, **keys))
        return [y.numpy().tolist() for _, y in out]

    full = stream()
    assert len(full) == 6  # 5 full batches per pass, 3 kept
    assert stream(first_pass=1, skip_batches=1) == full[4:]
    with pytest.raises(Exception, match="batches_per_pass must be an integer above"):
        EpochStream(skip_batches=3, batches_per_pass=3)


def test_shares_that_would_fall_out_of_step_are_refused_as_an_input_context(tmp_path):
    # 30 + 10 against 10 + 10 examples, whichever the seeded file order: 10 and 5 steps.
    config = _config(write_id_records(tmp_path / "uneven", [30, 10, 10, 10]))
    assert not worker_file_shares(config, workers=2, global_batch_size=BATCH, seed=0).by_file
    with pytest.raises(DataError, match="cannot be divided by file among 2 workers"):
        _worker_stream(config, _contexts()[0], EpochStream())
    unknown = _config(config.path, verify_records=False)
    assert "not known" in worker_file_shares(unknown, workers=2, global_batch_size=BATCH,
                                             seed=0).reason


def test_each_worker_caches_its_own_share_under_its_own_prefix(tmp_path):
    # Workers on one machine used to be refused by the cache lock (both wrote PREFIX).
    config = _config(write_id_records(tmp_path / "four", [24] * 4),
                     cache=str(tmp_path / "cache" / "c"))
    try:
        for worker, ctx in enumerate(_contexts()):
            train, _ = _worker_stream(config, ctx, EpochStream(num_passes=2))
            assert len(_steps(train)) == 24
        read_order = files_stage.read_order(list(range(4)), shuffled=True, seed=0)[0]
        for worker, files in ((0, read_order[0::2]), (1, read_order[1::2])):
            prefix = tmp_path / "cache" / f"c.worker-{worker}-of-2"
            assert (tmp_path / "cache" / f"{prefix.name}.index").exists()
            fingerprint = json.loads((tmp_path / "cache" /
                                      f"{prefix.name}.tfaccel.json").read_text())
            # The worker's cache is fingerprinted with its own files only.
            every = sorted(str(p) for p in (tmp_path / "four").glob("*.tfrecord"))
            assert fingerprint["source files"] == cache_files.files_digest(
                [every[i] for i in files])
            assert fingerprint["source files"].startswith("2 files")
        assert not (tmp_path / "cache" / "c.index").exists()
        # A rebuilt stream (a resume) of worker 1 reads its complete cache as it is.
        resumed = _steps(_worker_stream(config, _contexts()[1],
                                        EpochStream(first_pass=1, num_passes=2))[0])
        assert {i // 24 for b in resumed for i in b} == set(read_order[1::2])
    finally:
        cache_files.forget_prepared()


def test_split_prefixes_name_each_worker():
    assert cache_files.split_prefixes("/c/p", worker=(1, 2)) == (
        "/c/p.worker-1-of-2", "/c/p_validation.worker-1-of-2")
    assert cache_files.split_prefixes("/c/p") == ("/c/p", "/c/p_validation")
    assert cache_files.split_prefixes("memory", worker=(1, 2)) == ("memory", "memory")
