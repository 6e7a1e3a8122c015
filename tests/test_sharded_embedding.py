"""ShardedEmbedding against keras.layers.Embedding on one process: shard sizes, outputs,
per-shard sparse gradients, weights after training, what is refused (the model swap:
test_layer_sharding.py)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfaccel.engine.sharded_embedding import ShardedEmbedding, shard_count, shard_rows

VOCAB, WIDTH = 11, 4


def test_rows_are_split_as_div_and_shards_counted_as_min_size_partitioner():
    assert shard_rows(11, 3) == [4, 4, 3]  # tf.nn.embedding_lookup's 'div'
    assert shard_rows(4, 4) == [1, 1, 1, 1]
    # MinSizePartitioner: as many shards as keep each >= min bytes, at most max_shards.
    assert shard_count(rows=1000, row_bytes=256, min_shard_bytes=256 << 10, max_shards=4) == 1
    assert shard_count(rows=2048, row_bytes=256, min_shard_bytes=256 << 10, max_shards=4) == 2
    assert shard_count(rows=10**6, row_bytes=256, min_shard_bytes=256 << 10, max_shards=3) == 3
    assert shard_count(rows=2, row_bytes=10**6, min_shard_bytes=1, max_shards=8) == 2


def _table():
    return np.random.default_rng(0).normal(size=(VOCAB, WIDTH)).astype("float32")


def _model(num_shards=None, *, mask_zero=False):
    ids = keras.Input((5,), dtype="int32")
    if num_shards:
        layer = ShardedEmbedding(VOCAB, WIDTH, num_shards=num_shards, mask_zero=mask_zero,
                                 name="embedding")
    else:
        layer = keras.layers.Embedding(VOCAB, WIDTH, mask_zero=mask_zero, name="embedding")
    x = layer(ids)
    x = keras.layers.GlobalAveragePooling1D()(x)
    out = keras.layers.Dense(3, kernel_initializer="ones", name="head")(x)
    model = keras.Model(ids, out)
    if num_shards:
        layer.set_table(_table())
    else:
        layer.embeddings.assign(_table())
    return model


IDS = np.array([[0, 1, 4, 10, 10], [3, 7, 8, 0, 0]], dtype="int32")
LABELS = np.array([0, 2])


def test_outputs_and_gradients_equal_embedding_with_sparse_gradients_per_shard():
    plain, sharded = _model(), _model(3)
    np.testing.assert_allclose(sharded(IDS), plain(IDS), rtol=1e-6)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    grads = {}
    for name, model in (("plain", plain), ("sharded", sharded)):
        with tf.GradientTape() as tape:
            value = loss(LABELS, model(IDS))
        grads[name] = tape.gradient(value, model.trainable_variables)
    shard_grads = grads["sharded"][:3]
    assert all(isinstance(g, tf.IndexedSlices) for g in shard_grads)
    # Each shard's sparse gradient names only its own rows of the batch (4, 4, 3 rows).
    assert [sorted(set(g.indices.numpy().tolist())) for g in shard_grads] == [
        [0, 1, 3], [0, 3], [0, 2]]
    dense = [tf.convert_to_tensor(g).numpy() for g in shard_grads]
    np.testing.assert_allclose(np.concatenate(dense),
                               tf.convert_to_tensor(grads["plain"][0]).numpy(), rtol=1e-6)


@pytest.mark.parametrize("mask_zero", [False, True])
def test_weights_after_training_steps_equal_embedding(mask_zero):
    plain, sharded = _model(mask_zero=mask_zero), _model(3, mask_zero=mask_zero)
    for model in (plain, sharded):
        model.compile(optimizer=keras.optimizers.Adam(0.1),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        model.fit(IDS, LABELS, batch_size=2, epochs=4, verbose=0, shuffle=False)
    layer = sharded.get_layer("embedding")
    np.testing.assert_allclose(layer.table(), plain.get_layer("embedding").embeddings.numpy(),
                               rtol=1e-5, atol=1e-6)
    assert not np.allclose(layer.table(), _table())  # it did train
    np.testing.assert_allclose(sharded.get_layer("head").kernel.numpy(),
                               plain.get_layer("head").kernel.numpy(), rtol=1e-5)


def test_a_seeded_initializer_gives_the_same_table_as_embedding():
    init = keras.initializers.RandomNormal(seed=3)
    plain = keras.layers.Embedding(VOCAB, WIDTH, embeddings_initializer=init)
    sharded = ShardedEmbedding(VOCAB, WIDTH, num_shards=2, embeddings_initializer=init)
    plain.build(), sharded.build()
    np.testing.assert_array_equal(sharded.table(), plain.embeddings.numpy())
    assert [tuple(s.shape) for s in sharded.shards] == [(6, WIDTH), (5, WIDTH)]


def test_what_a_split_table_cannot_keep_is_refused():
    layer = keras.layers.Embedding(VOCAB, WIDTH, embeddings_constraint="max_norm",
                                   name="constrained")
    with pytest.raises(ValueError, match="Embedding 'constrained' cannot be sharded: its "
                                         "embeddings_constraint acts on the whole table"):
        ShardedEmbedding.from_embedding(layer, num_shards=2)
    with pytest.raises(ValueError, match=r"num_shards must be between 1 and input_dim \(11\); "
                                         r"got 12"):
        ShardedEmbedding(VOCAB, WIDTH, num_shards=12)
