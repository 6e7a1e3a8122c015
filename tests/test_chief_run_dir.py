"""Every worker learns the chief's run directory (tfaccel.training.distributed.chief_run_dir);
across two real workers in tests/test_platform_tasks.py."""

from pathlib import Path

import numpy as np
import tensorflow as tf

from tfaccel.config.cluster import WorkerRole
from tfaccel.training.distributed import chief_run_dir as shared

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


def test_alone_the_own_directory_is_kept_without_a_collective():
    class NoCollective:  # any call into the strategy would fail the test
        pass

    assert shared.chief_run_dir(NoCollective(), role=WorkerRole(), own=Path("runs/a")) == \
        Path("runs/a")


def test_only_the_first_replica_contributes_so_the_path_arrives_whole(logical_cpus):
    strategy = tf.distribute.MirroredStrategy(logical_cpus,
                                              cross_device_ops=tf.distribute.ReductionToOneDevice())
    codes = np.zeros(shared.MAX_PATH_BYTES, dtype=np.int32)
    path = "/shared/runs/exp-é1".encode()
    codes[:len(path)] = np.frombuffer(path, dtype=np.uint8)
    summed = shared._sum_from_chief(strategy, tf.constant(codes))
    assert bytes(int(c) for c in summed if c > 0) == path  # not doubled by replica 1


def test_a_worker_without_the_chiefs_path_names_none(logical_cpus):
    strategy = tf.distribute.MirroredStrategy(logical_cpus,
                                              cross_device_ops=tf.distribute.ReductionToOneDevice())
    worker = WorkerRole(index=1, count=2)  # contributes zeros: nobody sent a path
    assert shared.chief_run_dir(strategy, role=worker, own=Path("mine")) is None
    chief = WorkerRole(index=0, count=2)
    assert shared.chief_run_dir(strategy, role=chief, own=Path("runs/b")) == Path("runs/b")
