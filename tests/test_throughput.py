"""ThroughputMonitor: input wait measured in the train step, CPU use, peak memory."""

import time

import numpy as np
import pytest


def _fit(*, slow_input: bool, steps_per_execution: int = 1, jit_compile: bool = False):
    import keras
    import tensorflow as tf

    from tfaccel.training.fit_callbacks.throughput import ThroughputMonitor

    keras.utils.set_random_seed(0)
    x = np.random.rand(256, 16).astype("float32")
    y = np.random.randint(0, 3, 256)
    dataset = tf.data.Dataset.from_tensor_slices((x, y))
    if slow_input:
        # A Python stage that sleeps 3 ms per example: 96 ms per batch of 32, far longer
        # than the model's step, so most of the step is waiting for input.
        def slow(value):
            time.sleep(0.003)
            return value

        dataset = dataset.map(lambda a, b: (tf.ensure_shape(
            tf.numpy_function(slow, [a], tf.float32), [16]), b))
    else:
        dataset = dataset.cache()
    dataset = dataset.batch(32).repeat().prefetch(tf.data.AUTOTUNE)
    # Steps of a few ms (512 units): on a loaded machine the scheduler's ms-sized delays then
    # stay a small part of the ready input's step (with 256 units, 0.3 ms steps, they made
    # up half of it at a load of 6 on 2 cores; measured 0.04-0.12 with 512).
    model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(512, activation="relu"),
                              keras.layers.Dense(512, activation="relu"),
                              keras.layers.Dense(3)])
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  steps_per_execution=steps_per_execution, jit_compile=jit_compile)
    monitor = ThroughputMonitor(steps_per_execution=steps_per_execution)
    monitor.attach(model)
    history = model.fit(dataset, epochs=2, steps_per_epoch=8, verbose=0, callbacks=[monitor],
                        shuffle=False)
    return history.history, monitor


@pytest.mark.parametrize("steps_per_execution", [1, 4])
def test_a_slow_input_shows_as_input_wait_and_a_ready_one_does_not(steps_per_execution):
    slow, _ = _fit(slow_input=True, steps_per_execution=steps_per_execution)
    ready, _ = _fit(slow_input=False, steps_per_execution=steps_per_execution)
    # Gross margins only (shared machine): the slow input is over 90 ms a batch.
    assert slow["input_wait_fraction"][-1] > 0.5
    assert ready["input_wait_fraction"][-1] < slow["input_wait_fraction"][-1] / 2
    for history in (slow, ready):
        assert len(history["input_wait_fraction"]) == 2  # one figure per epoch
        assert history["steps_per_sec"][-1] > 0
        assert 0 < history["cpu_utilisation"][-1] <= 1.05
        assert history["peak_rss_mb"][-1] > 100


def test_jit_compile_leaves_the_input_wait_unmeasured_and_says_why():
    history, monitor = _fit(slow_input=False, jit_compile=True)
    assert "input_wait_fraction" not in history
    assert monitor.unavailable_reason.startswith("jit_compile")
    assert history["steps_per_sec"][-1] > 0


def test_the_timer_does_not_change_what_is_trained():
    # The wrapped train_step returns the same logs and applies the same updates.
    import keras
    import tensorflow as tf

    from tfaccel.training.fit_callbacks.throughput import ThroughputMonitor

    def train(with_monitor):
        keras.utils.set_random_seed(1)
        x = np.random.rand(64, 4).astype("float32")
        y = np.random.randint(0, 2, 64)
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
        model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        callbacks = []
        if with_monitor:
            monitor = ThroughputMonitor()
            monitor.attach(model)
            callbacks = [monitor]
        dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(16)
        model.fit(dataset, epochs=2, verbose=0, callbacks=callbacks, shuffle=False)
        return model.get_weights()

    for plain, timed in zip(train(False), train(True)):
        np.testing.assert_array_equal(plain, timed)


def test_op_determinism_leaves_the_input_wait_unmeasured_and_training_runs():
    # TensorFlow refuses timestamp ops under op determinism ("Timestamp cannot be called
    # when determinism is enabled"): the monitor must not wrap the step then.
    from tfaccel.engine.determinism import op_determinism_enabled, set_op_determinism

    set_op_determinism(True)
    try:
        assert op_determinism_enabled()
        history, monitor = _fit(slow_input=False)
    finally:
        set_op_determinism(False)
    assert not op_determinism_enabled()
    assert "input_wait_fraction" not in history
    assert monitor.unavailable_reason.startswith("runtime.deterministic")
    assert len(history["loss"]) == 2 and history["steps_per_sec"][-1] > 0
