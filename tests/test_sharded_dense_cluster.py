"""ShardedDense on a real parameter-server cluster on 127.0.0.1 (a chief, 2 ps, 1 worker):
a large kernel's column blocks are dealt one per server, and after coordinator-scheduled
Adam steps its weights equal the same model trained on the same cluster unsharded (its
kernel whole on one server) within float noise; model.keras gets one plain Dense (heavy)."""

import json

import numpy as np
import pytest
from launch_helpers import ps_cluster_result

pytestmark = [pytest.mark.slow, pytest.mark.multiworker]

# Float noise: the sharded step multiplies by each 32-column block, the unsharded by the
# whole kernel; the matmul kernels may block and sum differently (about 1e-7 relative on
# values of order 1 per step), and 8 Adam steps of lr 0.01 carry that along (measured: the
# kernels 4.1e-7 apart, the head 3e-8, while training moved the kernel by 0.077). 1e-5 is
# 25x the noise measured and 1000x less than one Adam step (lr 0.01) could move a weight.
TOLERANCE = 1e-5


# heavy: a cluster of its own (40 s on 2 loaded cores); the blocks' placement and their
# weights against the plain model stay in the suite in test_layer_sharding_cluster.py,
# the layer against Dense in test_sharded_dense.py.
@pytest.mark.heavy
def test_kernel_blocks_land_on_both_servers_and_train_as_the_unsharded_run(tmp_path,
                                                                          monkeypatch):
    found = ps_cluster_result(__file__, ps=2, workers=1,
                              tmp_path=tmp_path, monkeypatch=monkeypatch)
    assert found["split"] == "columns" and found["blocks"] == [[32, 32], [32, 32]]
    assert sorted(found["devices"]) == ["/job:ps/replica:0/task:0/device:CPU:0",
                                        "/job:ps/replica:0/task:1/device:CPU:0"]
    assert len(found["whole_device"]) == 1  # the unsharded kernel: one server
    assert found["iterations"] == [8, 8]
    assert found["trained"] > 0.05  # 8 steps of lr 0.01 moved the kernel
    assert sorted(found["diffs"]) == ["bias", "head_bias", "head_kernel", "kernel"]
    assert max(found["diffs"].values()) < TOLERANCE, found["diffs"]
    assert found["saved"] == ["Dense", [32, 64]]
    assert found["report"].startswith(
        "sharded: wide (Dense kernel 32x64, 0.01 MiB) in 2 column shards over 2 of 2 "
        "server(s) [ps 0, ps 1]; each other variable lives whole")


# The chief of the test runs this file as a script (the cluster's Python).
def _chief():
    """The chief's script: one model trained on the servers by coordinator steps twice,
    its kernel sharded and whole; prints RESULT and a JSON."""
    import keras
    import tensorflow as tf

    from tfaccel.engine.layer_sharding import shard_layers, sharding_report, unshard_layers
    from tfaccel.engine.ps_cluster import make_parameter_server_strategy
    from tfaccel.engine.sharded_dense import ShardedDense

    def make_model():
        keras.utils.set_random_seed(0)
        inputs = keras.Input((32,))
        x = keras.layers.Dense(64, activation="tanh", name="wide")(inputs)
        return keras.Model(inputs, keras.layers.Dense(3, name="head")(x))

    rng = np.random.default_rng(0)
    batches = [(rng.normal(size=(16, 32)).astype("float32"), rng.integers(0, 3, size=16))
               for _ in range(8)]
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    strategy = make_parameter_server_strategy()
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    built = make_model()  # on the chief; its copies below are made on the servers
    models, optimizers = {}, {}
    with strategy.scope():
        # 32 x 64 x 4 = 8 KiB: 2 column blocks of at least 2 KiB (max_shards 2); the head's
        # 384 bytes stay whole. A 1 GiB shard size: the same copy, nothing sharded.
        for name, shard_bytes in (("sharded", 2048), ("whole", 1 << 30)):
            models[name] = shard_layers(built, min_shard_bytes=shard_bytes, max_shards=2)
            optimizers[name] = keras.optimizers.Adam(0.01)
            optimizers[name].build(models[name].trainable_variables)

    def train_step_of(model, optimizer):
        @tf.function
        def train_step(x, y):
            def replica(x, y):
                with tf.GradientTape() as tape:
                    loss = loss_fn(y, model(x, training=True))
                variables = model.trainable_variables
                optimizer.apply(tape.gradient(loss, variables), variables)
                return loss

            return strategy.run(replica, args=(x, y))

        return train_step

    steps = {name: train_step_of(models[name], optimizers[name]) for name in models}
    for x, y in batches:
        for name in models:  # one step at a time: the same sequence as one process
            coordinator.schedule(steps[name], args=(tf.constant(x), tf.constant(y)))
            coordinator.join()
    sharded, whole = models["sharded"].get_layer("wide"), models["whole"].get_layer("wide")
    saved = unshard_layers(models["sharded"]).get_layer("wide")
    head, whole_head = models["sharded"].get_layer("head"), models["whole"].get_layer("head")
    pairs = {"kernel": (sharded.kernel(), whole.kernel), "bias": (sharded.bias, whole.bias),
             "head_kernel": (head.kernel, whole_head.kernel),
             "head_bias": (head.bias, whole_head.bias)}
    values = lambda v: v if isinstance(v, np.ndarray) else v.numpy()
    diffs = {k: np.abs(values(a) - values(b)).max() for k, (a, b) in pairs.items()}
    print("RESULT " + json.dumps({
        "split": sharded.split if isinstance(sharded, ShardedDense) else None,
        "blocks": [list(map(int, s.shape)) for s in sharded.shards],
        "devices": [s.value.device for s in sharded.shards],
        "whole_device": sorted({whole.kernel.value.device}),
        "iterations": [int(o.iterations.numpy()) for o in optimizers.values()],
        "trained": float(np.abs(sharded.kernel() - built.get_layer("wide").kernel.numpy())
                         .max()),
        "diffs": {k: float(v) for k, v in diffs.items()},
        "saved": [type(saved).__name__, list(map(int, saved.kernel.shape))],
        "report": sharding_report(models["sharded"], servers=2),
    }), flush=True)


if __name__ == "__main__":
    _chief()
