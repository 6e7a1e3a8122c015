"""Tests for tfaccel.engine.model_pipeline and model_split: placement, exact gradients, refusals."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfaccel.engine.accumulation import accumulate
from tfaccel.engine.model_pipeline import PipelineModel, pipeline
from tfaccel.engine.model_split import split_model
from tfaccel.errors import UserInputError

BATCH = 32
FLOAT32_ATOL = 1e-5
# mixed_bfloat16: bf16 activations (8 bits of mantissa) of micro-batches and of the whole
# batch round differently (oneDNN's kernels, the order of the gradient sums). Measured
# after 3 epochs of Adam (lr 1e-2, 9 steps) on the MLP below, K=4: 7.0e-3 max abs weight
# difference (weights up to ~0.6); float32 is 1e-5.
BF16_ATOL = 2e-2


@pytest.fixture(autouse=True)
def _float32_policy():
    keras.mixed_precision.set_global_policy("float32")
    yield
    keras.mixed_precision.set_global_policy("float32")


def _data(n=96):
    rng = np.random.default_rng(0)
    return rng.normal(size=(n, 8)).astype("float32"), rng.integers(0, 3, size=(n,))


def _mlp(sequential=True):
    keras.utils.set_random_seed(1)
    layers = [keras.layers.Dense(16, activation="relu", name="d1",
                                 kernel_regularizer=keras.regularizers.L2(1e-3)),
              keras.layers.Dense(32, activation="relu", name="d2"),
              keras.layers.Dense(3, name="out", dtype="float32")]
    if sequential:
        return keras.Sequential([keras.Input((8,)), *layers])
    inputs = keras.Input((8,))
    x = inputs
    for layer in layers:
        x = layer(x)
    return keras.Model(inputs, x)


def _compile(model, optimizer="adam"):
    made = keras.optimizers.Adam(1e-2) if optimizer == "adam" else keras.optimizers.SGD(0.1)
    model.compile(optimizer=made, metrics=["accuracy"],
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def _fit(model, epochs, batch=BATCH, examples=96):
    x, y = _data(examples)
    return model.fit(x, y, batch_size=batch, epochs=epochs, shuffle=False, verbose=0)


def _max_difference(a, b):
    return max(float(np.max(np.abs(u.astype("float32") - v.astype("float32"))))
               for u, v in zip(a.get_weights(), b.get_weights()))


def test_each_stage_s_variables_and_optimizer_state_live_on_its_device(logical_cpus):
    piped = _compile(pipeline(_mlp(), split_at=["d1"], micro_batches=2, devices=logical_cpus))
    _fit(piped, 1)
    where = {v.path: v.value.device for v in piped.inner.weights}
    assert where["d1/kernel"].endswith("CPU:0") and where["d1/bias"].endswith("CPU:0")
    assert all(where[f"{n}/{w}"].endswith("CPU:1") for n in ("d2", "out")
               for w in ("kernel", "bias"))
    # Adam's moments are colocated with their variable (Keras' TF optimizer does that).
    slots = {v.path: v.value.device for v in piped.optimizer.variables if "d1_kernel" in v.path
             or "out_kernel" in v.path}
    assert slots and all(d.endswith("CPU:0") == ("d1_" in p) for p, d in slots.items())
    assert [s.describe() for s in piped.stages] == [
        {"stage": 0, "device": logical_cpus[0], "layers": ["d1"], "parameters": 144},
        {"stage": 1, "device": logical_cpus[1], "layers": ["d2", "out"], "parameters": 643}]


@pytest.mark.parametrize("micro_batches,epochs,examples,optimizer",
                         [(2, 1, 32, "sgd"), (4, 3, 96, "adam"), (3, 3, 96, "sgd")])
def test_weights_equal_a_plain_fit(logical_cpus, micro_batches, epochs, examples, optimizer):
    # One step (32 examples), or 3 epochs of 3 steps; K=3 cuts 32 into 11, 11, 10.
    plain = _compile(_mlp(), optimizer)
    reference = _fit(plain, epochs, examples=examples)
    piped = _compile(pipeline(_mlp(), split_at=["d1"], micro_batches=micro_batches,
                              devices=logical_cpus), optimizer)
    traces = []
    original = piped.train_step
    piped.train_step = lambda data: traces.append(1) or original(data)
    history = _fit(piped, epochs, examples=examples)
    # Its optimizer and metric variables are built before the first trace (Keras 3.15
    # makes them inside it off a strategy and traces again): one trace.
    assert len(traces) == 1
    assert _max_difference(plain, piped.inner) <= FLOAT32_ATOL
    assert int(piped.optimizer.iterations.numpy()) == epochs * examples // BATCH
    assert history.history["loss"] == pytest.approx(reference.history["loss"], abs=1e-5)


def test_three_stages_of_a_functional_model_with_accumulation_equal_a_plain_fit(logical_cpus):
    plain = _compile(_mlp(sequential=False))
    _fit(plain, 2)
    piped = _compile(pipeline(_mlp(sequential=False), split_at=["d1", "d2"], micro_batches=2,
                              devices=logical_cpus, accumulation_steps=2))
    assert [s.device for s in piped.stages] == [logical_cpus[0], logical_cpus[1],
                                                logical_cpus[0]]
    _fit(piped, 2)
    assert _max_difference(plain, piped.inner) <= FLOAT32_ATOL
    # The same as tfaccel's accumulation over the same 4 micro-batches of each batch.
    accumulated = _compile(accumulate(_mlp(sequential=False), 4))
    _fit(accumulated, 2)
    assert _max_difference(accumulated.inner, piped.inner) <= FLOAT32_ATOL


@pytest.mark.parametrize("policy, compute", [("mixed_bfloat16", "bfloat16"),
                                             ("mixed_float16", "float16")])
def test_mixed_precision_stays_within_its_tolerance_of_a_plain_fit(logical_cpus, policy,
                                                                   compute):
    # mixed_float16 needs loss scaling: Keras wraps the optimizer in a LossScaleOptimizer,
    # whose scale_loss the pipeline calls per micro-batch and whose apply unscales.
    # float16 keeps 3 more mantissa bits than bfloat16: within bfloat16's tolerance.
    keras.mixed_precision.set_global_policy(policy)
    plain = _compile(_mlp())
    _fit(plain, 3)
    piped = _compile(pipeline(_mlp(), split_at=["d1"], micro_batches=4, devices=logical_cpus))
    _fit(piped, 3)
    assert piped.inner.get_layer("d2").compute_dtype == compute
    assert isinstance(piped.optimizer, keras.optimizers.LossScaleOptimizer) \
        == (policy == "mixed_float16")
    assert all(np.isfinite(w).all() for w in piped.inner.get_weights())
    assert _max_difference(plain, piped.inner) <= BF16_ATOL


def test_stages_balance_parameters_and_default_to_one_per_device(logical_cpus):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(100, name="a"),
                              keras.layers.Dense(100, name="b"), keras.layers.Dense(4, name="c"),
                              keras.layers.Dense(4, name="d")])
    # a 500, b 10,100, c 404, d 20: the cut after b leaves 10,600 | 424, after a 500 | 10,524.
    _, stages = split_model(model, stages=2, devices=logical_cpus)
    assert [s.layers for s in stages] == [("a",), ("b", "c", "d")]
    _, stages = split_model(model, devices=logical_cpus)
    assert len(stages) == 2
    _, stages = split_model(model, stages=4, devices=logical_cpus)
    assert [s.layers for s in stages] == [("a",), ("b",), ("c",), ("d",)]
    with pytest.raises(UserInputError, match="stages is 5 but .* at only 3 layer"):
        split_model(model, stages=5, devices=logical_cpus)


# Once heavy (~100 s while the pipeline's step traced twice); 1.3 s since it traces once.
def test_batch_norm_and_dropout_train_in_micro_batches(logical_cpus):
    def build():
        keras.utils.set_random_seed(3)
        return keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, name="d1"),
                                 keras.layers.BatchNormalization(name="bn"),
                                 keras.layers.Dropout(0.5, name="drop"),
                                 keras.layers.Dense(3, name="out")])

    # One micro-batch: BN sees the whole batch, the same dropout masks are drawn: exact.
    plain = _compile(build(), "sgd")
    _fit(plain, 1)
    one = _compile(pipeline(build(), split_at=["bn"], micro_batches=1, devices=logical_cpus),
                   "sgd")
    _fit(one, 1)
    assert _max_difference(plain, one.inner) <= FLOAT32_ATOL
    # Two: BN's statistics are each micro-batch's own and its moving averages move twice
    # per step, so the moving variance differs from the full batch's (documented).
    two = _compile(pipeline(build(), split_at=["bn"], micro_batches=2, devices=logical_cpus),
                   "sgd")
    _fit(two, 1)
    moving = two.inner.get_layer("bn").moving_variance.numpy()
    assert np.all(np.isfinite(moving))
    assert np.max(np.abs(moving - plain.get_layer("bn").moving_variance.numpy())) > 1e-4


def test_evaluate_and_predict_run_through_the_stages(logical_cpus):
    model = _compile(_mlp())
    piped = _compile(pipeline(_mlp(), split_at=["d2"], micro_batches=2, devices=logical_cpus))
    x, y = _data()
    assert np.allclose(piped.predict(x, verbose=0), model.predict(x, verbose=0), atol=1e-6)
    assert piped.evaluate(x, y, verbose=0)[0] == pytest.approx(
        model.evaluate(x, y, verbose=0)[0], abs=1e-6)


def test_a_subclassed_model_is_refused_with_what_to_do():
    class Mine(keras.Model):
        def __init__(self):
            super().__init__()
            self.dense = keras.layers.Dense(2)

        def call(self, x):
            return self.dense(x)

    model = Mine()
    model(np.zeros((1, 3), "float32"))
    with pytest.raises(UserInputError, match="subclassed keras.Model .Mine.*functional API"):
        pipeline(model, stages=2)


def test_splits_that_cannot_hold_are_refused_naming_the_layer(logical_cpus):
    inputs = keras.Input((8,))
    a = keras.layers.Dense(8, name="a")(inputs)
    b = keras.layers.Dense(8, name="b")(a)
    added = keras.layers.Add(name="add")([a, b])
    model = keras.Model(inputs, keras.layers.Dense(2, name="out")(added))
    with pytest.raises(UserInputError, match="cannot split at 'b': a tensor besides"):
        pipeline(model, split_at=["b"], devices=logical_cpus)
    with pytest.raises(UserInputError, match="names layer 'bb'.*its layers: a, b, add, out"):
        pipeline(model, split_at=["bb"], devices=logical_cpus)
    with pytest.raises(UserInputError, match="the model's last layer"):
        pipeline(model, split_at=["out"], devices=logical_cpus)
    with pytest.raises(UserInputError, match="not both"):
        pipeline(model, split_at=["a"], stages=2, devices=logical_cpus)
    with pytest.raises(UserInputError, match="micro_batches must be an integer >= 1; got 0"):
        pipeline(model, split_at=["a"], micro_batches=0)
    piped = pipeline(model, split_at=["add"], devices=logical_cpus)
    assert isinstance(piped, PipelineModel)
    with pytest.raises(UserInputError, match="jit_compile=True cannot compile a pipeline"):
        piped.compile(optimizer="sgd", loss="mse", jit_compile=True)


def test_the_summary_text_names_each_stage_s_device_and_parameters(logical_cpus):
    piped = pipeline(_mlp(), split_at=["d1"], micro_batches=4, devices=logical_cpus)
    text = piped.summary_text()
    assert text.splitlines() == [
        "pipeline: 2 stage(s), 4 micro-batch(es) in flight, 1 accumulation step(s) per batch",
        f"  stage 0 on {logical_cpus[0]}: 144 parameters, layers d1",
        f"  stage 1 on {logical_cpus[1]}: 643 parameters, layers d2, out"]


def test_the_micro_batches_of_a_step_are_independent_ops_on_both_devices(logical_cpus):
    # What lets the executor overlap them: stage 0's ops of micro-batch 2 do not wait for
    # stage 1's of micro-batch 1. Checked in the traced graph's device placement.
    piped = _compile(pipeline(_mlp(), split_at=["d1"], micro_batches=2, devices=logical_cpus))
    x, y = _data(32)
    piped.make_train_function()
    graph = tf.function(piped.train_step).get_concrete_function(
        (tf.constant(x), tf.constant(y))).graph
    devices = {op.device.rsplit("/", 1)[-1] for op in graph.get_operations()
               if op.type == "MatMul"}
    assert devices == {"device:CPU:0", "device:CPU:1"}


def test_a_last_batch_smaller_than_the_micro_batch_count_stays_exact(logical_cpus):
    # 34 examples in batches of 32: the last batch holds 2 examples for K=4 micro-batches.
    plain = _compile(_mlp(), "sgd")
    _fit(plain, 1, examples=34)
    piped = _compile(pipeline(_mlp(), split_at=["d1"], micro_batches=4, devices=logical_cpus),
                     "sgd")
    _fit(piped, 1, examples=34)
    assert _max_difference(plain, piped.inner) <= FLOAT32_ATOL
    # With BatchNormalization the 2 empty pieces are skipped, not normalised (NaN).
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4, name="d"),
                              keras.layers.BatchNormalization(name="bn"),
                              keras.layers.Dense(3, name="out")])
    with_bn = _compile(pipeline(model, split_at=["d"], micro_batches=4, devices=logical_cpus))
    _fit(with_bn, 1, examples=34)
    assert all(np.all(np.isfinite(w)) for w in with_bn.inner.get_weights())
