"""training.micro_batch_size auto: a first step out of memory retried with half the micro-batch.

The out-of-memory error is injected where a real one happens: at run time, inside the
compiled train step, by a layer whose op raises ResourceExhaustedError when the batch it
gets (the per-replica micro-batch) is above a limit. Each retry therefore runs the real
path: the failed step, the wrapper's steps changed, the train function traced again, a
new input stream from the same position. A GPU shows the real error:
benchmarks/device_check.py's `out of memory` row.
"""

import json

import numpy as np
import pytest

from tfaccel.errors import TrainingError

CLASSES = 3
FAST = {"precision": "float32", "verbose": 0, "tensorboard": False}
# The injected device: micro-batches above LIMIT["n"] examples run out of memory. SEEN holds
# the size of every micro-batch that went through a train step.
LIMIT = {"n": 4}
SEEN = []


def _check(size):
    size = int(size)
    if size > LIMIT["n"]:
        # tf.numpy_function turns a MemoryError into tf.errors.ResourceExhaustedError, the
        # error a device allocator raises.
        raise MemoryError(f"OOM when allocating tensor with shape[{size},8,8,3] (injected)")
    SEEN.append(size)
    return np.int32(size)


def _builder(*, input_shape, num_classes):
    import keras
    import tensorflow as tf

    class OutOfMemoryAbove(keras.layers.Layer):
        """Passes its input on; in training, runs out of memory above LIMIT examples."""

        def call(self, x, training=None):
            if not training:
                return x
            size = tf.numpy_function(_check, [tf.shape(x)[0]], tf.int32, stateful=True)
            with tf.control_dependencies([size]):
                return tf.identity(x)

    inputs = keras.Input(shape=input_shape)
    x = OutOfMemoryAbove()(inputs)
    x = keras.layers.Rescaling(1 / 255)(x)
    x = keras.layers.Conv2D(3, 3, activation="relu")(x)
    x = keras.layers.BatchNormalization()(x)  # its moving statistics must not see a failed step
    x = keras.layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, keras.layers.Dense(num_classes, activation="softmax")(x))


def _recipe(folder, *, strategy, micro_batch_size, epochs=1):
    rng = np.random.default_rng(0)
    np.savez(folder / "tiny.npz", x=rng.uniform(0, 255, (64, 8, 8, 3)).astype("float32"),
             y=rng.integers(0, CLASSES, 64).astype("int64"))
    return {"name": "oom", "seed": 3,
            "data": {"source": "arrays", "path": str(folder / "tiny.npz"),
                     "validation_fraction": 0.25, "shuffle_buffer": 64},
            "training": {"epochs": epochs, "global_batch_size": 16, "steps_per_execution": 1,
                         "micro_batch_size": micro_batch_size},
            "optimizer": {"name": "adam", "learning_rate": 0.01},
            "runtime": {**FAST, "strategy": strategy, "runs_dir": str(folder / "runs")}}


def _train(folder, *, strategy, micro_batch_size, limit, epochs=1):
    import tfaccel

    LIMIT["n"] = limit
    SEEN.clear()
    folder.mkdir(exist_ok=True)
    return tfaccel.train(_recipe(folder, strategy=strategy, micro_batch_size=micro_batch_size,
                                 epochs=epochs), model=_builder)


def _weights(run_dir):
    import keras

    model = keras.saving.load_model(run_dir / "model.keras", compile=False, safe_mode=False,
                                    custom_objects={"OutOfMemoryAbove": keras.layers.Identity})
    return model.get_weights()


@pytest.mark.parametrize("strategy, per_replica, limit, expected, epochs", [
    ("one_device", 16, 4, [(16, 8, 2), (8, 4, 4)], 1),  # halved twice
    # Two epochs: the second keeps the smaller plan (nothing traces the old step again).
    # One retry: each costs a mirrored trace, and halving twice is the case above.
    ("mirrored", 8, 4, [(8, 4, 2)], 2),
])
def test_auto_halves_the_micro_batch_and_ends_where_a_run_at_that_size_ends(
        tmp_path, capsys, logical_cpus, strategy, per_replica, limit, expected, epochs):
    auto = _train(tmp_path / "auto", strategy=strategy, micro_batch_size="auto",
                  limit=limit, epochs=epochs)
    seen_auto = list(SEEN)
    out = capsys.readouterr().out
    retries = [line for line in out.splitlines() if "out of memory at micro-batch" in line]
    assert retries == [
        f"tfaccel: out of memory at micro-batch {size}: retrying with {half} "
        f"(accumulating {steps} steps), global batch 16 unchanged." for size, half, steps in
        expected]
    summary = auto.summary
    assert summary["status"] == "completed"
    assert summary["micro_batch_retries"] == [
        {"micro_batch_size": a, "retried_with": b, "accumulation_steps": s,
         "error": "ResourceExhaustedError"} for a, b, s in expected]
    # The plan in force at the end, the global batch unchanged.
    assert (summary["global_batch_size"], summary["per_replica_batch_size"],
            summary["micro_batch_size"], summary["accumulation_steps"]) == \
        (16, per_replica, limit, per_replica // limit)
    # Every example of every step went through the model once: none skipped, none twice.
    steps = summary["steps_per_epoch"]
    assert sum(seen_auto) == epochs * steps * 16 and set(seen_auto) == {limit}
    on_disk = json.loads((auto.run_dir / "summary.json").read_text())
    assert on_disk["micro_batch_retries"] == summary["micro_batch_retries"]

    fixed = _train(tmp_path / "fixed", strategy=strategy, micro_batch_size=limit,
                   limit=limit, epochs=epochs)
    assert "micro_batch_retries" not in fixed.summary
    assert sorted(SEEN) == sorted(seen_auto)
    for ours, theirs in zip(_weights(auto.run_dir), _weights(fixed.run_dir)):
        # Same steps in the same order: equal up to float reassociation (stated: 1e-6).
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-6)
    assert auto.summary["final_metrics"]["loss"] == pytest.approx(
        fixed.summary["final_metrics"]["loss"], abs=1e-6)


def test_out_of_memory_at_micro_batch_1_stops_with_a_clear_error(tmp_path, capsys):
    with pytest.raises(TrainingError) as raised:
        _train(tmp_path / "run", strategy="one_device", micro_batch_size="auto", limit=0)
    message = str(raised.value)
    assert message.startswith("out of device memory at micro-batch 1 "
                              "(training.micro_batch_size auto tried 16, 8, 4, 2 and 1; "
                              "global batch 16): even one example per replica does not fit.")
    out = capsys.readouterr().out
    assert "retrying with 1 (accumulating 16 steps)" in out
    [run_dir] = (tmp_path / "run" / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "failed"
    assert summary["failure"] == {"error": "TrainingError", "message": message}
    assert [r["retried_with"] for r in summary["micro_batch_retries"]] == [8, 4, 2, 1]
    assert SEEN == []


def test_a_fixed_micro_batch_is_not_retried(tmp_path):
    with pytest.raises(TrainingError, match="training failed after 0 finished epoch.*OOM when "
                                            "allocating tensor with shape.16,8,8,3."):
        _train(tmp_path / "run", strategy="one_device", micro_batch_size=None, limit=4)
    [run_dir] = (tmp_path / "run" / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["failure"]["error"] == "ResourceExhaustedError"
    assert "micro_batch_retries" not in summary


def _retry(*, workers=1):
    import keras
    import tensorflow as tf

    from tfaccel.config.batching import plan_batches
    from tfaccel.engine.accumulation import accumulate
    from tfaccel.training.run.micro_batch_retry import MicroBatchRetry

    wrapped = accumulate(keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)]), 1)
    wrapped.compile(optimizer="adam", loss="mse")
    return MicroBatchRetry(auto=True, plan=plan_batches(global_batch_size=8, replicas=1),
                           trained_model=wrapped, strategy=tf.distribute.get_strategy(),
                           workers=workers), wrapped


def test_out_of_memory_after_a_step_ended_is_not_retried():
    import tensorflow as tf

    retry, wrapped = _retry()
    calls = []

    def attempt():
        calls.append(len(calls))
        retry.on_train_batch_end(0)  # a step ended: a checkpoint or a log may hold it
        raise tf.errors.ResourceExhaustedError(None, None, "OOM when allocating (injected)")

    with pytest.raises(tf.errors.ResourceExhaustedError):
        retry.fit(attempt)
    assert calls == [0] and wrapped.steps == 1 and retry.retries == []


def test_auto_is_refused_for_several_workers():
    from tfaccel.errors import UserInputError

    with pytest.raises(UserInputError, match="cannot be used by a run of 2 workers"):
        _retry(workers=2)
