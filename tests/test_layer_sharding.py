"""The model swap both ways (large Embedding tables and Dense kernels to sharded layers and
back to plain ones), what it copies, and the run log's line of where variables live."""

import keras
import numpy as np
import pytest

from tfaccel.engine.layer_sharding import copyable, shard_layers, sharding_report, unshard_layers
from tfaccel.engine.sharded_dense import ShardedDense
from tfaccel.engine.sharded_embedding import ShardedEmbedding

VOCAB, WIDTH = 11, 4
IDS = np.array([[0, 1, 4, 10, 10], [3, 7, 8, 0, 0]], dtype="int32")
FAST_TIER = True

LOCAL = "/job:localhost/replica:0/task:0/device:CPU:0"  # no cluster: all on this process


def _model():
    keras.utils.set_random_seed(0)
    ids = keras.Input((5,), dtype="int32")
    big = keras.layers.Embedding(VOCAB, WIDTH, name="big")(ids)
    small = keras.layers.Embedding(3, WIDTH, name="small")(keras.ops.minimum(ids, 2))
    x = keras.layers.GlobalAveragePooling1D()(big + small)
    x = keras.layers.Dense(24, activation="relu", name="wide")(x)  # 4 x 24 x 4 = 384 bytes
    return keras.Model(ids, keras.layers.Dense(1, name="head")(x))  # 24 x 1 x 4 = 96 bytes


def test_the_swap_shards_large_tables_and_kernels_only_and_unswap_restores_them(tmp_path):
    model = _model()
    before = model(IDS)
    # 176-byte table: 3 shards of >= 48 bytes; the 48-byte table stays whole. The 384-byte
    # kernel: 3 column shards (max_shards); the 96-byte 1-unit head: 2 row shards.
    sharded = shard_layers(model, min_shard_bytes=48, max_shards=3)
    table, wide, head = (sharded.get_layer(n) for n in ("big", "wide", "head"))
    assert isinstance(table, ShardedEmbedding) and table.num_shards == 3
    assert type(sharded.get_layer("small")) is keras.layers.Embedding
    assert (type(wide), wide.num_shards, wide.split) == (ShardedDense, 3, "columns")
    assert [tuple(s.shape) for s in wide.shards] == [(4, 8)] * 3
    assert (type(head), head.num_shards, head.split) == (ShardedDense, 2, "rows")
    np.testing.assert_array_equal(wide.kernel(), model.get_layer("wide").kernel.numpy())
    np.testing.assert_allclose(sharded(IDS), before, rtol=1e-6, atol=1e-6)
    assert sharding_report(sharded, servers=3) == (
        f"sharded: big (11x4, 0.00 MiB) in 3 shards over 1 of 3 server(s) [{LOCAL}]; "
        f"wide (Dense kernel 4x24, 0.00 MiB) in 3 column shards over 1 of 3 server(s) "
        f"[{LOCAL}]; head (Dense kernel 24x1, 0.00 MiB) in 2 row shards over 1 of 3 "
        f"server(s) [{LOCAL}]; each other variable lives whole on one parameter server "
        "(dealt round-robin among them)")
    # A .keras file keeps the layers (get_config, their weights) and loads back equal.
    sharded.save(tmp_path / "sharded.keras")
    loaded = keras.models.load_model(tmp_path / "sharded.keras")
    assert isinstance(loaded.get_layer("big"), ShardedEmbedding)
    assert isinstance(loaded.get_layer("wide"), ShardedDense)
    np.testing.assert_allclose(loaded(IDS), before, rtol=1e-6, atol=1e-6)
    # What a run saves: plain Embedding and Dense layers holding the whole weights.
    plain = unshard_layers(sharded)
    assert [type(plain.get_layer(n)).__name__ for n in ("big", "small", "wide", "head")] == [
        "Embedding", "Embedding", "Dense", "Dense"]
    for name in ("wide", "head"):
        for got, want in zip(plain.get_layer(name).weights, model.get_layer(name).weights):
            np.testing.assert_array_equal(got.numpy(), want.numpy())
    np.testing.assert_array_equal(plain.get_layer("big").embeddings.numpy(),
                                  model.get_layer("big").embeddings.numpy())
    np.testing.assert_allclose(plain(IDS), before, rtol=1e-6, atol=1e-6)
    assert unshard_layers(model) is model  # nothing sharded: nothing copied


def test_a_sharded_model_copied_again_keeps_its_weights():
    sharded = shard_layers(_model(), min_shard_bytes=48, max_shards=3)
    again = shard_layers(sharded, min_shard_bytes=48, max_shards=3)
    np.testing.assert_array_equal(again.get_layer("wide").kernel(),
                                  sharded.get_layer("wide").kernel())
    np.testing.assert_allclose(again(IDS), sharded(IDS), rtol=1e-6)


def test_a_dense_subclass_and_a_constrained_dense_stay_whole():
    class Scaled(keras.layers.Dense):  # computes something else with its kernel
        def call(self, inputs):
            return 2 * super().call(inputs)

    inputs = keras.Input((8,))
    x = Scaled(8, name="scaled")(inputs)
    x = keras.layers.Dense(8, kernel_constraint="max_norm", name="constrained")(x)
    model = keras.Model(inputs, keras.layers.Dense(8, name="plain")(x))
    sharded = shard_layers(model, min_shard_bytes=16, max_shards=2)
    assert [type(sharded.get_layer(n)).__name__ for n in ("scaled", "constrained", "plain")] \
        == ["Scaled", "Dense", "ShardedDense"]


def test_a_subclassed_model_is_not_copied():
    class Own(keras.Model):
        def __init__(self):
            super().__init__()
            self.table = keras.layers.Embedding(VOCAB, WIDTH)

        def call(self, ids):
            return self.table(ids)

    own = Own()
    assert (copyable(own), copyable(_model())) == (False, True)
    with pytest.raises(ValueError, match="model 'own' is not functional or Sequential"):
        shard_layers(own, min_shard_bytes=1, max_shards=2)


def test_the_report_says_why_nothing_was_sharded():
    model = _model()
    assert sharding_report(model, servers=1).startswith(
        "no table or kernel sharded (one parameter server); each other variable lives whole")
    assert sharding_report(model, servers=2).startswith(
        "no table or kernel sharded (runtime.min_shard_bytes: an Embedding table or a Dense "
        "kernel shards once it holds 2 shards' worth)")
