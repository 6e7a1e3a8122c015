"""ShardedDense against keras.layers.Dense on one device: outputs, gradients, weights after
training, initial values, save/load as one kernel, the split rule and what is refused."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfaccel.engine.sharded_dense import ShardedDense, dense_split

FAST_TIER = True

FEATURES, UNITS = 7, 10
# Float32 matmuls of blocks vs the whole kernel may sum in another order (rows split) or
# block differently: about 1e-7 relative; 1e-6 absolute on values of order 1 is that noise.
ATOL = 1e-6


def _kernel():
    return np.random.default_rng(0).normal(size=(FEATURES, UNITS)).astype("float32")


def _inputs(*shape):
    return np.random.default_rng(1).normal(size=(*shape, FEATURES)).astype("float32")


def _pair(*, num_shards, split, activation="tanh", use_bias=True, **kwargs):
    plain = keras.layers.Dense(UNITS, activation=activation, use_bias=use_bias, **kwargs)
    sharded = ShardedDense(UNITS, num_shards=num_shards, split=split, activation=activation,
                           use_bias=use_bias, **kwargs)
    for layer in (plain, sharded):
        layer.build((None, FEATURES))
    plain.kernel.assign(_kernel())
    sharded.set_kernel(_kernel())
    if use_bias:
        bias = np.linspace(-1, 1, UNITS).astype("float32")
        plain.bias.assign(bias)
        sharded.bias.assign(bias)
    return plain, sharded


@pytest.mark.parametrize("split, num_shards, shapes", [
    ("columns", 3, [(FEATURES, 4), (FEATURES, 3), (FEATURES, 3)]),
    ("rows", 2, [(4, UNITS), (3, UNITS)]),
])
@pytest.mark.parametrize("batch", [(5,), (2, 3)])  # a rank-3 input: Dense on the last axis
def test_outputs_and_gradients_equal_dense(split, num_shards, shapes, batch):
    plain, sharded = _pair(num_shards=num_shards, split=split,
                           kernel_regularizer=keras.regularizers.L2(0.01))
    assert [tuple(s.shape) for s in sharded.shards] == shapes
    x = tf.constant(_inputs(*batch))
    results = {}
    for name, layer in (("plain", plain), ("sharded", sharded)):
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(x)
            out = layer(x)
            loss = tf.reduce_sum(out * out) + tf.add_n(layer.losses)
        kernel_grads = tape.gradient(loss, [plain.kernel] if name == "plain" else sharded.shards)
        axis = 1 if split == "columns" else 0
        results[name] = (out.numpy(), np.concatenate([g.numpy() for g in kernel_grads], axis),
                         tape.gradient(loss, layer.bias).numpy(), tape.gradient(loss, x).numpy(),
                         float(tf.add_n(layer.losses)))
    assert results["plain"][0].shape == (*batch, UNITS)
    for got, want in zip(results["sharded"], results["plain"]):
        np.testing.assert_allclose(got, want, atol=ATOL * max(1.0, np.abs(want).max()))


@pytest.mark.parametrize("split", ["columns", "rows"])
def test_weights_after_training_steps_equal_dense(split):
    plain, sharded = _pair(num_shards=2, split=split, activation="relu")
    x, y = _inputs(4, 4), np.arange(16).reshape(4, 4) % 3
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    for layer in (plain, sharded):
        head = keras.layers.Dense(3)
        head.build((None, UNITS))  # not all ones: the loss would not depend on the layer
        head.kernel.assign(np.random.default_rng(2).normal(size=(UNITS, 3)))
        optimizer = keras.optimizers.Adam(0.05)
        for xb, yb in zip(x, y):  # 4 eager steps
            with tf.GradientTape() as tape:
                loss = loss_fn(yb, head(layer(xb)))
            variables = layer.trainable_variables + head.trainable_variables
            optimizer.apply(tape.gradient(loss, variables), variables)
    np.testing.assert_allclose(sharded.kernel(), plain.kernel.numpy(), atol=1e-5)
    np.testing.assert_allclose(sharded.bias.numpy(), plain.bias.numpy(), atol=1e-5)
    assert np.abs(sharded.kernel() - _kernel()).max() > 1e-2  # it did train


def test_a_seeded_initializer_gives_the_same_kernel_as_dense():
    init = keras.initializers.GlorotUniform(seed=3)
    plain = keras.layers.Dense(UNITS, kernel_initializer=init)
    sharded = ShardedDense(UNITS, num_shards=4, kernel_initializer=init)
    plain.build((None, FEATURES)), sharded.build((None, FEATURES))
    np.testing.assert_array_equal(sharded.kernel(), plain.kernel.numpy())
    assert [s.shape[1] for s in sharded.shards] == [3, 3, 2, 2]


def test_a_saved_model_holds_one_kernel_and_loads_back_sharded(tmp_path):
    _, layer = _pair(num_shards=3, split="columns")
    inputs = keras.Input((FEATURES,))
    model = keras.Model(inputs, layer(inputs))
    x = _inputs(4)
    before = model(x).numpy()
    store = {}
    layer.save_own_variables(store)
    assert {k: v.shape for k, v in store.items()} == {"0": (FEATURES, UNITS), "1": (UNITS,)}
    model.save(tmp_path / "m.keras")
    loaded = keras.models.load_model(tmp_path / "m.keras")
    (again,) = [l for l in loaded.layers if isinstance(l, ShardedDense)]
    assert (again.num_shards, again.split) == (3, "columns")
    np.testing.assert_array_equal(again.kernel(), _kernel())
    np.testing.assert_allclose(loaded(x), before, atol=ATOL)
    with pytest.raises(ValueError, match="expects 2 saved variable"):
        again.load_own_variables({"0": _kernel()})


def test_to_dense_and_from_dense_keep_config_and_weights():
    plain, sharded = _pair(num_shards=2, split="rows", activation="relu",
                           kernel_regularizer="l2", activity_regularizer="l1")
    back = sharded.to_dense()
    assert type(back) is keras.layers.Dense and back.get_config() == plain.get_config() | {
        "name": back.name}
    np.testing.assert_array_equal(back.kernel.numpy(), _kernel())
    again = ShardedDense.from_dense(back, num_shards=3)
    assert (again.num_shards, again.split, again.input_dim) == (3, "columns", FEATURES)
    np.testing.assert_array_equal(again.kernel(), _kernel())
    np.testing.assert_array_equal(again.bias.numpy(), back.bias.numpy())


def test_columns_unless_rows_give_more_shards():
    # 1000 x 256 float32 = 1,024,000 bytes: 3 shards of >= 256 KiB, by columns.
    assert dense_split(input_dim=1000, units=256, itemsize=4, min_shard_bytes=256 << 10,
                       max_shards=4) == (3, "columns")
    # A wide 1-unit head cannot be cut by columns: by rows.
    assert dense_split(input_dim=200_000, units=1, itemsize=4, min_shard_bytes=256 << 10,
                       max_shards=2) == (2, "rows")
    # Under twice the shard size: whole.
    assert dense_split(input_dim=100, units=100, itemsize=4, min_shard_bytes=20_001,
                       max_shards=8)[0] == 1


def test_what_a_split_kernel_cannot_keep_is_refused():
    layer = keras.layers.Dense(UNITS, kernel_constraint="max_norm", name="constrained")
    with pytest.raises(ValueError, match="Dense 'constrained' cannot be sharded: its "
                                         "kernel_constraint acts on the whole kernel"):
        ShardedDense.from_dense(layer, num_shards=2)
    with pytest.raises(ValueError, match=r"num_shards must be between 1 and units \(10\) for "
                                         r"split 'columns'; got 11"):
        ShardedDense(UNITS, num_shards=11)
    with pytest.raises(ValueError, match="split must be one of"):
        ShardedDense(UNITS, split="diagonal")
    with pytest.raises(ValueError, match=r"input features \(7\) for split 'rows'; got 8"):
        ShardedDense(UNITS, num_shards=8, split="rows").build((None, FEATURES))


def test_mixed_precision_keeps_float32_blocks_and_computes_as_dense():
    plain = keras.layers.Dense(UNITS, dtype="mixed_bfloat16")
    plain.build((None, FEATURES))
    sharded = ShardedDense.from_dense(plain, num_shards=2)
    assert [s.dtype for s in sharded.shards] == ["float32", "float32"]
    x = _inputs(3)
    got, want = sharded(x), plain(x)
    assert (got.dtype, want.dtype) == ("bfloat16", "bfloat16")
    # bfloat16 keeps 8 bits of mantissa: 1e-2 relative is its rounding of values of order 1.
    np.testing.assert_allclose(np.asarray(got, "float32"), np.asarray(want, "float32"),
                               rtol=1e-2, atol=1e-2)
    assert sharded.to_dense().dtype_policy.name == "mixed_bfloat16"
