"""Two-worker MultiWorkerMirroredStrategy + model.fit on 127.0.0.1, with keras_compat's patch."""

import json
import os
import socket
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest

from tfaccel.engine.accumulation import accumulate

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)

# Only the two-worker test is slow (it spawns processes); the unit tests of the patch below
# run in `-m "not slow"` so that the patch stays tested there.

TIMEOUT_SECONDS = 300

WORKER = textwrap.dedent(
    """
    import json, os, sys
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    from tfaccel.engine.strategy import make_strategy

    strategy = make_strategy("multi_worker")  # before any other TF op: joins the cluster
    import keras
    import numpy as np
    from tfaccel.engine.accumulation import accumulate
    from tfaccel.engine.keras_compat import patch_for_multi_worker
    sys.path.insert(0, sys.argv[2])
    from test_keras_compat_multiworker import build, data, LOSS

    x, y = data()
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(32)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    dataset = dataset.with_options(options)
    with strategy.scope():
        inner = build()
        model = accumulate(inner, 2)
        model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=LOSS())
    patch_for_multi_worker(model)
    history = model.fit(dataset, epochs=2, verbose=0)
    with open(sys.argv[1], "w") as handle:
        json.dump({"loss": history.history["loss"],
                   "weights": [w.numpy().tolist() for w in inner.weights]}, handle)
    """
)


def LOSS():  # shared with the worker script
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(128, 8)).astype("float32"), rng.integers(0, 3, size=(128,))


def build():
    keras.utils.set_random_seed(1)
    return keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(3)])


def _free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for sock in sockets:
        sock.bind(("127.0.0.1", 0))
    ports = [sock.getsockname()[1] for sock in sockets]
    for sock in sockets:
        sock.close()
    return ports


@pytest.mark.multiworker
@pytest.mark.slow
@pytest.mark.heavy  # tests/test_launch_multiworker.py checks the same through the runner
def test_two_workers_fit_with_accumulation_matches_plain_fit(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    workers = [f"127.0.0.1:{port}" for port in _free_ports(2)]
    processes = []
    for index in range(2):
        env = dict(os.environ)
        env["TF_CONFIG"] = json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}})
        env["CUDA_VISIBLE_DEVICES"] = ""
        processes.append(
            subprocess.Popen(
                [sys.executable, str(script), str(tmp_path / f"out{index}.json"), os.path.dirname(__file__)],
                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            )
        )
    try:
        outputs = [process.communicate(timeout=TIMEOUT_SECONDS)[0] for process in processes]
    finally:
        for process in processes:  # a hung collective must fail the test, not block CI
            if process.poll() is None:
                process.kill()
    for process, output in zip(processes, outputs):
        assert process.returncode == 0, output[-3000:]
    results = [json.loads((tmp_path / f"out{index}.json").read_text()) for index in range(2)]
    assert results[0]["loss"] == results[1]["loss"]
    assert all(np.isfinite(results[0]["loss"]))

    plain = build()
    plain.compile(optimizer=keras.optimizers.Adam(1e-2), loss=LOSS())
    x, y = data()
    history = plain.fit(x, y, batch_size=32, epochs=2, shuffle=False, verbose=0)
    for got, expected in zip(results[0]["weights"], plain.weights):
        np.testing.assert_allclose(np.array(got), expected.numpy(), atol=1e-5)
    np.testing.assert_allclose(results[0]["loss"], history.history["loss"], rtol=1e-5)


def test_patch_is_a_no_op_without_a_multi_worker_cluster():
    from tfaccel.engine.keras_compat import patch_for_multi_worker

    model = accumulate(build(), 2)
    before = model.train_step
    assert patch_for_multi_worker(model) is model
    assert model.train_step == before and "train_step" not in vars(model)


def test_patched_build_and_steps_take_per_replica_values_on_two_replicas(monkeypatch,
                                                                          logical_cpus):
    # The patch's logic, fast: a MirroredStrategy on 2 logical CPUs declared multi-worker.
    # Workaround 1: the symbolic build must receive the FIRST local replica's batch (plain
    # tensors), never the PerReplica value Keras would reduce across workers.
    # Workaround 2: train/test step logs come out shaped [1].
    import tensorflow as tf

    from tfaccel.engine import keras_compat

    monkeypatch.setattr(keras_compat.cluster, "is_multi_worker", lambda strategy: True)
    strategy = tf.distribute.MirroredStrategy(
        logical_cpus, cross_device_ops=tf.distribute.ReductionToOneDevice())
    with strategy.scope():
        model = build()
        model.compile(optimizer=keras.optimizers.SGD(0.1), loss=LOSS())
    received = []
    monkeypatch.setattr(model, "_maybe_symbolic_build",
                        lambda iterator=None, data_batch=None: received.append(data_batch))
    keras_compat.patch_for_multi_worker(model)
    x, y = data()
    dataset = strategy.experimental_distribute_dataset(
        tf.data.Dataset.from_tensor_slices((x[:8], y[:8])).batch(8))
    batch = next(iter(dataset))
    assert isinstance(batch[0], tf.distribute.DistributedValues)
    model._maybe_symbolic_build(iterator=[(0, 1, iter([batch]))])
    (built_on,) = received
    first = strategy.experimental_local_results(batch[0])[0]
    assert not isinstance(built_on[0], tf.distribute.DistributedValues)
    np.testing.assert_array_equal(built_on[0].numpy(), first.numpy())
    assert built_on[0].shape[0] == 4  # one replica's half of the batch of 8
    logs = model.test_step((x[:8], y[:8]))
    assert logs["loss"].shape == [1]
    logs = model.train_step((x[:8], y[:8]))
    assert logs["loss"].shape == [1]
