"""The multi-worker fit patch (keras#20585), exercised fast on one machine (not slow)."""

import keras
import numpy as np
import tensorflow as tf

from tfaccel.engine import keras_compat


def _model():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    model.compile(optimizer=keras.optimizers.SGD(0.1),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def test_scalar_logs_become_vectors_the_axis_0_reduce_accepts():
    logs = keras_compat._logs_as_vectors({"loss": tf.constant(2.5), "v": tf.ones([3])})
    assert logs["loss"].shape == [1] and float(logs["loss"][0]) == 2.5
    assert logs["v"].shape == [3]


def test_the_patch_is_a_no_op_off_multi_worker():
    model = _model()
    before = model.train_step
    assert keras_compat.patch_for_multi_worker(model) is model
    assert model.train_step == before


def test_patched_fit_on_two_replicas_trains_like_the_unpatched_one(monkeypatch, logical_cpus):
    # The patched symbolic build (shapes from the first local replica of a PerReplica
    # batch) and vector logs run for real on a distributed iterator; a multi-worker
    # cluster is simulated by declaring this MirroredStrategy multi-worker.
    x = np.random.default_rng(0).normal(size=(64, 4)).astype("float32")
    y = np.arange(64) % 3
    strategy = tf.distribute.MirroredStrategy(logical_cpus)
    losses = []
    for patched in (False, True):
        monkeypatch.setattr(keras_compat, "_is_multi_worker", lambda s: patched)
        with strategy.scope():
            model = _model()
            keras_compat.patch_for_multi_worker(model)
        if patched:
            logs = model.test_step((x[:8], y[:8]))
            assert logs["loss"].shape == [1]  # the patch is applied
        history = model.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0)
        losses.append(history.history["loss"])
        weights = model.get_weights()
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-6)
    assert all(np.isfinite(w).all() for w in weights)
