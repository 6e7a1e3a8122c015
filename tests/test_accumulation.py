"""Tests for tfaccel.engine.accumulation: exact equivalence with a plain fit, under strategies."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfaccel.engine.accumulation import AccumulatingModel, accumulate
from tfaccel.engine.strategy import make_strategy
from tfaccel.errors import UserInputError

# Equality with a plain fit needs no learning: 2 epochs of 3 steps carry the optimizer's
# state over an epoch's end (each epoch of a mirrored fit makes two multi-device iterators).
EPOCHS = 2
GLOBAL_BATCH = 32
FLOAT32_ATOL = 1e-5
# Mixed precision: per-micro-batch bf16/fp16 forward passes round differently from one
# full-batch pass. Measured after 3 epochs of Adam on the MLP below (2 replicas, k=4):
# mixed_bfloat16 2.7e-4, mixed_float16 5.6e-5 max abs weight difference.
MIXED_ATOL = {"mixed_bfloat16": 1e-3, "mixed_float16": 2e-4}
MIXED_EPOCHS = 3  # where MIXED_ATOL was measured


@pytest.fixture(autouse=True)
def _float32_policy():
    keras.mixed_precision.set_global_policy("float32")
    yield
    keras.mixed_precision.set_global_policy("float32")


def _data(n=96, features=8, classes=3):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, features)).astype("float32")
    y = rng.integers(0, classes, size=(n,))
    return x, y


def _mlp(output_dtype=None):
    keras.utils.set_random_seed(1)
    return keras.Sequential(
        [
            keras.Input((8,)),
            keras.layers.Dense(16, activation="relu", kernel_regularizer=keras.regularizers.L2(1e-3)),
            keras.layers.Dense(3, dtype=output_dtype),
        ]
    )


def _sparse_ce(**kwargs):
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True, **kwargs)


def _optimizer(name):
    return {"sgd": lambda: keras.optimizers.SGD(0.1), "adam": lambda: keras.optimizers.Adam(1e-2)}[name]()


def _fit(*, optimizer, steps=None, strategy=None, steps_per_execution=1, jit_compile=False,
         batch_size=GLOBAL_BATCH, build=_mlp, sample_weight=None, epochs=EPOCHS):
    x, y = _data()
    strategy = strategy or tf.distribute.get_strategy()
    with strategy.scope():
        model = build()
        trained = accumulate(model, steps) if steps else model
        trained.compile(
            optimizer=_optimizer(optimizer),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
            steps_per_execution=steps_per_execution,
            jit_compile=jit_compile,
        )
    history = trained.fit(
        x, y, sample_weight=sample_weight, batch_size=batch_size, epochs=epochs, shuffle=False, verbose=0
    )
    return [w.numpy() for w in model.weights], history.history


@pytest.fixture(scope="module")
def _plain_adam_once():
    """The plain single-device Adam fit of the MLP (float32), fitted once for the module."""
    keras.mixed_precision.set_global_policy("float32")  # module fixtures come before autouse
    weights, history = _fit(optimizer="adam")
    for w in weights:
        w.setflags(write=False)  # shared: compared with, never changed
    return weights, history


@pytest.fixture
def plain_adam(_plain_adam_once):
    """``_fit(optimizer="adam")``: (weights, history), a test's own copy of the shared fit."""
    weights, history = _plain_adam_once
    return [w.copy() for w in weights], {k: list(v) for k, v in history.items()}


def _max_diff(a, b):
    assert len(a) == len(b)
    return max(float(np.abs(u - v).max()) for u, v in zip(a, b))


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_contract_mirrored_k4_equals_plain_single_device(optimizer, logical_cpus, request):
    plain, plain_history = (request.getfixturevalue("plain_adam") if optimizer == "adam"
                            else _fit(optimizer=optimizer))
    mirrored = make_strategy("mirrored", devices=logical_cpus)
    ours, history = _fit(optimizer=optimizer, steps=4, strategy=mirrored)
    assert _max_diff(plain, ours) <= FLOAT32_ATOL
    np.testing.assert_allclose(history["loss"], plain_history["loss"], rtol=1e-5)
    np.testing.assert_allclose(history["accuracy"], plain_history["accuracy"], rtol=1e-6)


def test_contract_holds_with_steps_per_execution_2(logical_cpus, plain_adam):
    plain, _ = plain_adam
    mirrored = make_strategy("mirrored", devices=logical_cpus)
    ours, _ = _fit(optimizer="adam", steps=4, strategy=mirrored, steps_per_execution=2)
    assert _max_diff(plain, ours) <= FLOAT32_ATOL


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_contract_under_mixed_precision(policy, logical_cpus):
    keras.mixed_precision.set_global_policy(policy)
    build = lambda: _mlp(output_dtype="float32")  # keep logits in float32
    plain, _ = _fit(optimizer="adam", build=build, epochs=MIXED_EPOCHS)
    mirrored = make_strategy("mirrored", devices=logical_cpus)
    ours, _ = _fit(optimizer="adam", steps=4, strategy=mirrored, build=build,
                   epochs=MIXED_EPOCHS)
    assert _max_diff(plain, ours) <= MIXED_ATOL[policy]


def test_mixed_float16_uses_keras_loss_scale_optimizer():
    keras.mixed_precision.set_global_policy("mixed_float16")
    model = accumulate(_mlp(output_dtype="float32"), 2)
    model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)


def test_jit_compile_on_one_device_equals_plain(plain_adam):
    plain, _ = plain_adam
    ours, _ = _fit(optimizer="adam", steps=4, jit_compile=True)
    assert _max_diff(plain, ours) <= FLOAT32_ATOL


def test_remainder_micro_batches_are_weighted_by_share(logical_cpus, plain_adam):
    # 32 / 3 -> micro-batches of 10, 11, 11; per replica 16 / 5 -> 3, 3, 3, 3, 4.
    plain, _ = plain_adam
    ours, _ = _fit(optimizer="adam", steps=3)
    assert _max_diff(plain, ours) <= FLOAT32_ATOL
    mirrored = make_strategy("mirrored", devices=logical_cpus)
    ours, _ = _fit(optimizer="adam", steps=5, strategy=mirrored)
    assert _max_diff(plain, ours) <= FLOAT32_ATOL


def test_short_last_batch_smaller_than_steps():
    # 96 examples in batches of 31: the last batch holds 3 examples, fewer than 4 steps.
    plain, _ = _fit(optimizer="sgd", batch_size=31)
    ours, _ = _fit(optimizer="sgd", steps=4, batch_size=31)
    assert _max_diff(plain, ours) <= FLOAT32_ATOL


def test_sample_weights_match_plain(logical_cpus):
    weights = np.random.default_rng(3).uniform(0.0, 3.0, size=96).astype("float32")
    plain, plain_history = _fit(optimizer="adam", sample_weight=weights)
    mirrored = make_strategy("mirrored", devices=logical_cpus)
    ours, history = _fit(optimizer="adam", steps=4, strategy=mirrored, sample_weight=weights)
    assert _max_diff(plain, ours) <= FLOAT32_ATOL
    np.testing.assert_allclose(history["loss"], plain_history["loss"], rtol=1e-5)


def _two_headed():
    keras.utils.set_random_seed(2)
    image = keras.Input((6,), name="image")
    meta = keras.Input((2,), name="meta")
    hidden = keras.layers.Dense(8, activation="tanh", activity_regularizer=keras.regularizers.L1(1e-3))(
        keras.layers.Concatenate()([image, meta])
    )
    return keras.Model(
        {"image": image, "meta": meta},
        {"label": keras.layers.Dense(3, name="label")(hidden), "score": keras.layers.Dense(1, name="score")(hidden)},
    )


def test_dict_inputs_outputs_and_activity_regularizer(logical_cpus):
    rng = np.random.default_rng(4)
    x = {"image": rng.normal(size=(64, 6)).astype("float32"), "meta": rng.normal(size=(64, 2)).astype("float32")}
    y = {"label": rng.integers(0, 3, size=(64,)), "score": rng.normal(size=(64, 1)).astype("float32")}
    results = {}
    for name, steps, strategy in (
        ("plain", None, tf.distribute.get_strategy()),
        ("ours", 4, make_strategy("mirrored", devices=logical_cpus)),
    ):
        with strategy.scope():
            model = _two_headed()
            trained = accumulate(model, steps) if steps else model
            trained.compile(
                optimizer=keras.optimizers.Adam(1e-2),
                loss={"label": keras.losses.SparseCategoricalCrossentropy(from_logits=True), "score": "mse"},
                loss_weights={"label": 1.0, "score": 0.5},
                metrics={"label": ["accuracy"], "score": ["mae"]},
            )
        history = trained.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0).history
        results[name] = ([w.numpy() for w in model.weights], history)
    assert _max_diff(results["plain"][0], results["ours"][0]) <= FLOAT32_ATOL
    assert set(results["ours"][1]) == set(results["plain"][1])
    for key, values in results["plain"][1].items():
        np.testing.assert_allclose(results["ours"][1][key], values, rtol=1e-5, atol=1e-6, err_msg=key)


def test_subclassed_model_and_train_on_batch():
    class TwoLayer(keras.Model):
        def __init__(self):
            super().__init__()
            self.hidden = keras.layers.Dense(5, activation="relu")
            self.out = keras.layers.Dense(3)

        def call(self, inputs):
            return self.out(self.hidden(inputs))

    x, y = _data(n=16)
    results = []
    for steps in (None, 4):
        keras.utils.set_random_seed(5)
        model = TwoLayer()
        trained = accumulate(model, steps) if steps else model
        trained.compile(optimizer=keras.optimizers.SGD(0.1), loss=_sparse_ce())
        losses = [trained.train_on_batch(x, y) for _ in range(3)]
        results.append(([w.numpy() for w in model.weights], losses))
    assert _max_diff(results[0][0], results[1][0]) <= FLOAT32_ATOL
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-5)


def test_batchnorm_statistics_are_per_micro_batch(logical_cpus):
    # Documented semantics: each micro-batch updates the moving averages once.
    x = np.array([[0.0], [2.0], [10.0], [20.0]] * 2, dtype="float32")  # per replica: 0,2,10,20
    y = np.zeros((8, 1), dtype="float32")
    momentum = 0.5
    with make_strategy("mirrored", devices=logical_cpus).scope():
        keras.utils.set_random_seed(6)
        inner = keras.Sequential(
            [keras.Input((1,)), keras.layers.BatchNormalization(momentum=momentum), keras.layers.Dense(1)]
        )
        model = accumulate(inner, 2)
        model.compile(optimizer="sgd", loss="mse")
    model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    # Micro-batch means 1 then 15; moving = m * (m * 0 + (1 - m) * 1) + (1 - m) * 15.
    expected = momentum * (1 - momentum) * 1.0 + (1 - momentum) * 15.0
    moving_mean = inner.layers[0].moving_mean.numpy()
    np.testing.assert_allclose(moving_mean, [expected], rtol=1e-6)


def test_keras_own_accumulation_fails_under_mirrored_where_ours_works(logical_cpus):
    # keras-team/keras#20582, still present in keras 3.15.1.
    x, y = _data(n=32)
    strategy = make_strategy("mirrored", devices=logical_cpus)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    with strategy.scope():
        theirs = _mlp()
        theirs.compile(optimizer=keras.optimizers.SGD(0.1, gradient_accumulation_steps=4), loss=loss)
    with pytest.raises(RuntimeError, match="merge_call"):
        theirs.fit(x, y, batch_size=8, epochs=1, verbose=0)
    with strategy.scope():
        ours = accumulate(_mlp(), 4)
        ours.compile(optimizer=keras.optimizers.SGD(0.1), loss=loss)
    history = ours.fit(x, y, batch_size=8, epochs=1, verbose=0).history
    assert np.isfinite(history["loss"][0])


def test_saves_and_reloads_wrapper_and_inner(tmp_path):
    x, y = _data(n=32)
    model = accumulate(_mlp(), 2)
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x, y, batch_size=16, epochs=1, verbose=0)
    expected = model.predict(x, verbose=0)

    model.save(tmp_path / "wrapper.keras")
    reloaded = keras.models.load_model(tmp_path / "wrapper.keras")
    assert isinstance(reloaded, AccumulatingModel) and reloaded.steps == 2
    np.testing.assert_allclose(reloaded.predict(x, verbose=0), expected, rtol=1e-6)
    reloaded.fit(x, y, batch_size=16, epochs=1, verbose=0)  # compiled state restored too

    model.inner.save(tmp_path / "model.keras")
    plain = keras.models.load_model(tmp_path / "model.keras")
    assert not isinstance(plain, AccumulatingModel)
    np.testing.assert_allclose(plain.predict(x, verbose=0), expected, rtol=1e-6)


def test_accumulate_shares_weights_and_copies_compile_config():
    inner = _mlp()
    inner.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse", metrics=["mae"])
    model = accumulate(inner, 4)
    assert model.inner is inner and model.steps == 4
    assert [id(v) for v in model.weights] == [id(v) for v in inner.weights]
    assert model.compiled and isinstance(model.optimizer, keras.optimizers.SGD)
    assert model.optimizer is not inner.optimizer
    np.testing.assert_allclose(float(model.optimizer.learning_rate), 0.05)


@pytest.mark.parametrize("steps", [0, -1, 2.0, "4", True])
def test_bad_steps_are_user_errors(steps):
    with pytest.raises(UserInputError, match="steps must be an integer >= 1"):
        accumulate(_mlp(), steps)


def test_non_model_and_double_wrap_are_user_errors():
    with pytest.raises(UserInputError, match="keras.Model; got Dense"):
        accumulate(keras.layers.Dense(2), 2)
    with pytest.raises(UserInputError, match="already an AccumulatingModel"):
        accumulate(accumulate(_mlp(), 2), 2)


def test_sum_reduction_is_rejected():
    x, y = _data(n=16)
    model = accumulate(_mlp(), 2)
    model.compile(optimizer="sgd", loss=_sparse_ce(reduction="sum"))
    with pytest.raises(UserInputError, match="reduction='sum'"):
        model.fit(x, y, batch_size=8, epochs=1, verbose=0)


def test_jit_compile_needs_divisible_batch():
    x, y = _data(n=90)
    model = accumulate(_mlp(), 4)
    model.compile(optimizer="sgd", loss=_sparse_ce(), jit_compile=True)
    # Static batch size known when the step is traced: our own error with the numbers.
    expected = r"per-replica batch \(30\) must be divisible by the accumulation steps \(4\)"
    with pytest.raises(UserInputError, match=expected):
        model.fit(x, y, batch_size=30, epochs=1, verbose=0)
    # Unknown static batch size: XLA compilation fails, naming both numbers.
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(30)
    model = accumulate(_mlp(), 4)
    model.compile(optimizer="sgd", loss=_sparse_ce(), jit_compile=True)
    with pytest.raises(tf.errors.InvalidArgumentError, match="tensor with 30 values.*multiple of 4"):
        model.fit(dataset, epochs=1, shuffle=False, verbose=0)


def test_embedding_gradients_accumulate_densely():
    # Documented: sparse (IndexedSlices) gradients are summed as dense tensors. With Adam
    # this equals a plain fit on dense gradients; Keras' plain fit applies IndexedSlices
    # row-wise (only the rows seen, squares per occurrence), which differs for Adam.
    rng = np.random.default_rng(7)
    x, y = rng.integers(0, 50, size=(64, 5)), rng.integers(0, 2, size=(64,))
    results = {}
    for name in ("plain_dense", "ours"):
        keras.utils.set_random_seed(0)
        model = keras.Sequential(
            [
                keras.Input((5,), dtype="int32"),
                keras.layers.Embedding(50, 4),
                keras.layers.GlobalAveragePooling1D(),
                keras.layers.Dense(2),
            ]
        )
        optimizer = keras.optimizers.Adam(1e-2)
        if name == "plain_dense":
            apply = optimizer.apply_gradients
            optimizer.apply_gradients = lambda pairs: apply(
                [(tf.convert_to_tensor(g), v) for g, v in pairs]
            )
        trained = accumulate(model, 4) if name == "ours" else model
        trained.compile(optimizer=optimizer, loss=_sparse_ce())
        trained.fit(x, y, batch_size=32, epochs=2, shuffle=False, verbose=0)
        results[name] = [w.numpy() for w in model.weights]
    assert _max_diff(results["plain_dense"], results["ours"]) <= FLOAT32_ATOL


def _padded_sequences(n=32, length=6, vocab=12, classes=3):
    rng = np.random.default_rng(3)
    tokens = rng.integers(1, vocab, size=(n, length))
    # Very unequal lengths, so each micro-batch's share of valid tokens differs from its
    # share of examples: the first half are mostly padding, the second half full.
    lengths = np.where(np.arange(n) < n // 2, 1, length)
    tokens[np.arange(length)[None, :] >= lengths[:, None]] = 0  # 0 = padding
    labels = rng.integers(0, classes, size=(n, length))
    return tokens, labels


def _token_model(vocab=12, classes=3):
    keras.utils.set_random_seed(2)
    return keras.Sequential([
        keras.Input((6,), dtype="int32"),
        keras.layers.Embedding(vocab, 8, mask_zero=True),
        keras.layers.Dense(classes),
    ])


def _token_fit(x, y, accumulation, *, epochs, strategy=None, sample_weight=None):
    """The masked token model trained plainly (accumulation None) or accumulating:
    (weights, per-epoch losses)."""
    with (strategy or tf.distribute.get_strategy()).scope():
        model = _token_model()
        trained = accumulate(model, accumulation) if accumulation else model
        trained.compile(optimizer=keras.optimizers.SGD(0.5), loss=_sparse_ce())
    history = trained.fit(x, y, sample_weight=sample_weight, batch_size=32,
                          epochs=epochs, shuffle=False, verbose=0)
    return model.get_weights(), history.history["loss"]


def _assert_token_fits_match(x, y, steps, *, epochs=3, strategy=None, sample_weight=None,
                             plain=None):
    """Trains the masked token model plainly (unless `plain` gives that fit's result) and
    with accumulation; weights and losses agree."""
    plain_w, plain_loss = plain or _token_fit(x, y, None, epochs=epochs, strategy=strategy,
                                              sample_weight=sample_weight)
    acc_w, acc_loss = _token_fit(x, y, steps, epochs=epochs, strategy=strategy,
                                 sample_weight=sample_weight)
    for a, b in zip(plain_w, acc_w):
        np.testing.assert_allclose(a, b, atol=1e-6)
    np.testing.assert_allclose(plain_loss, acc_loss, rtol=1e-6)


@pytest.fixture(scope="module")
def plain_token_fit():
    """The plain 3-epoch fit of the masked token model on `_padded_sequences()`, (weights,
    losses): the reference of both cases of the masked per-token test, fitted once."""
    keras.mixed_precision.set_global_policy("float32")  # module fixtures come before autouse
    weights, losses = _token_fit(*_padded_sequences(), None, epochs=3)
    for w in weights:
        w.setflags(write=False)  # shared: compared with, never changed
    return weights, tuple(losses)


@pytest.mark.parametrize("steps", [2, 4])
def test_masked_per_token_loss_accumulates_exactly(steps, plain_token_fit):
    # Keras divides a masked loss by the number of VALID entries: a mean of per-micro-batch
    # means weighted by example share is a different objective (7.9e-4 apart after 2 epochs).
    x, y = _padded_sequences()
    _assert_token_fits_match(x, y, steps, plain=plain_token_fit)


class _BatchSizeProbe(keras.layers.Layer):
    """Records the largest batch it was called on (to see micro-batching happen)."""

    def build(self, input_shape):
        self.largest = self.add_weight(shape=(), initializer="zeros", trainable=False,
                                       dtype="int32", name="largest")

    def call(self, x):
        self.largest.assign(tf.maximum(self.largest, tf.shape(x)[0]))
        return x


def _probed_mlp():
    keras.utils.set_random_seed(1)
    inputs = keras.Input((8,))
    hidden = keras.layers.Dense(16, activation="relu")(_BatchSizeProbe()(inputs))
    return keras.Model(inputs, keras.layers.Dense(3)(hidden))


def test_evaluate_and_predict_run_in_micro_batches_with_the_same_results():
    x, y = _data(n=100)  # 100 = 3 batches of 32 + a partial batch of 4
    model = _probed_mlp()
    model.compile(optimizer="sgd", loss=_sparse_ce(), metrics=["accuracy"])
    plain_eval = model.evaluate(x, y, batch_size=32, verbose=0, return_dict=True)
    plain_pred = model.predict(x, batch_size=32, verbose=0)
    probe = model.layers[1]
    assert int(probe.largest.numpy()) == 32
    probe.largest.assign(0)
    wrapper = accumulate(model, 4)
    wrapper.compile(optimizer="sgd", loss=_sparse_ce(), metrics=["accuracy"])
    evaluated = wrapper.evaluate(x, y, batch_size=32, verbose=0, return_dict=True)
    predicted = wrapper.predict(x, batch_size=32, verbose=0)
    assert int(probe.largest.numpy()) == 8  # micro-batches of 32 / 4, never the batch
    assert evaluated["loss"] == pytest.approx(plain_eval["loss"], rel=1e-6)
    assert evaluated["accuracy"] == pytest.approx(plain_eval["accuracy"], rel=1e-6)
    np.testing.assert_allclose(predicted, plain_pred, atol=1e-6)
    assert predicted.shape == (100, 3)


def test_masked_evaluate_in_micro_batches_equals_plain():
    x, y = _padded_sequences()
    model = _token_model()
    model.compile(optimizer="sgd", loss=_sparse_ce(), metrics=["accuracy"])
    plain = model.evaluate(x, y, batch_size=32, verbose=0, return_dict=True)
    wrapper = accumulate(model, 4)
    wrapper.compile(optimizer="sgd", loss=_sparse_ce(), metrics=["accuracy"])
    micro = wrapper.evaluate(x, y, batch_size=32, verbose=0, return_dict=True)
    assert micro["loss"] == pytest.approx(plain["loss"], rel=1e-6)
    assert micro["accuracy"] == pytest.approx(plain["accuracy"], rel=1e-6)


def test_masked_loss_with_ragged_lengths_and_zero_sample_weights_is_exact():
    # Lengths 0..6 (rows of padding only; the first micro-batch holds no valid token) and
    # sample weights with zeros: Keras divides by the count of valid mask entries, which
    # sample weights do not change, so weighting by valid-entry share stays exact.
    rng = np.random.default_rng(7)
    n, length = 32, 6
    tokens = rng.integers(1, 12, size=(n, length))
    lengths = rng.integers(0, length + 1, size=n)
    lengths[:8] = 0
    tokens[np.arange(length)[None, :] >= lengths[:, None]] = 0
    labels = rng.integers(0, 3, size=(n, length))
    # Per-token weights (Keras broadcasts a (n,) weight against a (n, length) mask badly).
    weights = rng.uniform(0.0, 2.0, size=(n, length)).astype("float32")
    weights[rng.permutation(n)[:10]] = 0.0
    weights[:, 2] = 0.0
    _assert_token_fits_match(tokens, labels, 4, sample_weight=weights)


def test_zero_sample_weights_are_exact_unmasked():
    # Keras' sum_over_batch_size divides by the number of examples, not the sum of the
    # weights: a micro-batch whose weights are all zero still counts in the denominator.
    weights = np.random.default_rng(5).uniform(0.0, 3.0, size=96).astype("float32")
    weights[:8] = 0.0  # the first micro-batch of the first batch weighs nothing
    weights[40:44] = 0.0
    plain, plain_history = _fit(optimizer="sgd", sample_weight=weights)
    ours, history = _fit(optimizer="sgd", steps=4, sample_weight=weights)
    assert _max_diff(plain, ours) <= 1e-6
    np.testing.assert_allclose(history["loss"], plain_history["loss"], rtol=1e-6)


def test_micro_batched_evaluate_and_predict_under_mirrored_equal_plain(logical_cpus):
    # 2 replicas: each replica splits its own half-batch; the loss is scaled per replica
    # by Keras and unscaled for the report, as in Keras' own test step.
    x, y = _data(n=100)
    model = _mlp()
    model.compile(optimizer="sgd", loss=_sparse_ce(), metrics=["accuracy"])
    plain_eval = model.evaluate(x, y, batch_size=32, verbose=0, return_dict=True)
    plain_pred = model.predict(x, batch_size=32, verbose=0)
    with make_strategy("mirrored", devices=logical_cpus).scope():
        inner = _mlp()
        inner.set_weights(model.get_weights())
        wrapper = accumulate(inner, 4)
        wrapper.compile(optimizer="sgd", loss=_sparse_ce(), metrics=["accuracy"])
    evaluated = wrapper.evaluate(x, y, batch_size=32, verbose=0, return_dict=True)
    predicted = wrapper.predict(x, batch_size=32, verbose=0)
    assert evaluated["loss"] == pytest.approx(plain_eval["loss"], rel=1e-6)
    assert evaluated["accuracy"] == pytest.approx(plain_eval["accuracy"], rel=1e-6)
    np.testing.assert_allclose(predicted, plain_pred, atol=1e-6)


def test_masked_loss_under_mirrored_equals_a_plain_mirrored_fit(logical_cpus):
    # Keras divides each replica's masked loss by that replica's valid count (then by the
    # number of replicas); accumulation per replica must reproduce exactly that.
    x, y = _padded_sequences()
    _assert_token_fits_match(x, y, 2, epochs=2,
                             strategy=make_strategy("mirrored", devices=logical_cpus))


@pytest.mark.parametrize("targets", [1, 2])
def test_float_targets_of_a_regression_accumulate_exactly(targets, logical_cpus):
    # Regression targets come as float32 (batch, targets) (data.sources.base.shape_targets):
    # the micro-batches split them on the first axis and weigh them by their share, so k=4
    # under two replicas ends where one plain step of the whole batch does, with the auto
    # metrics (mae, rmse) of a regression run compiled.
    rng = np.random.default_rng(3)
    x = rng.normal(size=(96, 8)).astype("float32")
    y = (x[:, :targets] * 2.0 - x[:, -targets:] + 0.5).astype("float32").reshape(96, targets)

    def fit(steps, strategy):
        with strategy.scope():
            keras.utils.set_random_seed(1)
            model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                                      keras.layers.Dense(targets)])
            trained = accumulate(model, steps) if steps else model
            trained.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mean_squared_error",
                            metrics=[keras.metrics.MeanAbsoluteError(name="mae"),
                                     keras.metrics.RootMeanSquaredError(name="rmse")])
        history = trained.fit(x, y, batch_size=GLOBAL_BATCH, epochs=EPOCHS, shuffle=False,
                              verbose=0)
        return [w.numpy() for w in model.weights], history.history

    plain, plain_history = fit(None, tf.distribute.get_strategy())
    accumulated, history = fit(4, make_strategy("mirrored"))
    assert _max_diff(plain, accumulated) < FLOAT32_ATOL
    np.testing.assert_allclose(history["mae"], plain_history["mae"], rtol=1e-4)
    assert plain_history["loss"][-1] < plain_history["loss"][0]  # it learned something


@pytest.mark.parametrize("given", ["dataset", "arrays"])
def test_fit_traces_the_train_step_once_with_the_same_numbers(plain_adam, given):
    # Off a strategy Keras 3.15 creates Adam's slots and the metrics' sums inside the first
    # trace of the train function, which TensorFlow then traces again; the wrapper builds
    # them first from the element spec of the data fit was given, a dataset or arrays
    # (keras_compat.BuildsBeforeTracing).
    plain, plain_history = plain_adam
    x, y = _data()
    model = _mlp()
    trained = accumulate(model, 4)
    trained.compile(optimizer=_optimizer("adam"), loss=_sparse_ce(), metrics=["accuracy"])
    traces = []
    original = trained.train_step
    trained.train_step = lambda data: traces.append(1) or original(data)
    if given == "dataset":
        dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(GLOBAL_BATCH)
        history = trained.fit(dataset, epochs=EPOCHS, verbose=0)
    else:
        history = trained.fit(x, y, batch_size=GLOBAL_BATCH, epochs=EPOCHS, shuffle=False,
                              verbose=0)
    assert len(traces) == 1
    assert _max_diff(plain, [w.numpy() for w in model.weights]) <= FLOAT32_ATOL
    np.testing.assert_allclose(history.history["loss"], plain_history["loss"], rtol=1e-5)
