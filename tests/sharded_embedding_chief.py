"""The chief of tests/test_sharded_embedding_cluster.py: a ShardedEmbedding model on the
parameter servers trained by ClusterCoordinator steps, beside keras.layers.Embedding trained
on the chief itself; prints where each shard lives and how far the weights are apart."""

import json

import keras
import numpy as np
import tensorflow as tf

from tfaccel.engine.parameter_server import make_parameter_server_strategy
from tfaccel.engine.sharded_embedding import ShardedEmbedding, shard_embeddings, sharding_report

STEPS = 5


def make_model():
    keras.utils.set_random_seed(0)
    ids = keras.Input((6,), dtype="int32")
    x = keras.layers.Embedding(50, 8, name="embedding")(ids)
    x = keras.layers.GlobalAveragePooling1D()(x)
    return keras.Model(ids, keras.layers.Dense(3, name="head")(x))


rng = np.random.default_rng(0)
batches = [(rng.integers(0, 50, size=(4, 6)).astype("int32"), rng.integers(0, 3, size=4))
           for _ in range(STEPS)]
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

strategy = make_parameter_server_strategy()
reference = make_model()  # on the chief, no strategy: keras.layers.Embedding
coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
built = make_model()  # on the chief; its copy below is made on the servers
with strategy.scope():
    # 50 rows x 32 bytes = 1600 bytes: 2 shards of at least 512 bytes (max_shards 2).
    model = shard_embeddings(built, min_shard_bytes=512, max_shards=2)
    optimizer = keras.optimizers.Adam(0.05)
    optimizer.build(model.trainable_variables)
reference_optimizer = keras.optimizers.Adam(0.05)


def step(model, optimizer, x, y):
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
    gradients = tape.gradient(loss, model.trainable_variables)
    optimizer.apply(gradients, model.trainable_variables)
    return [type(g).__name__ for g in gradients]


kinds = {}


@tf.function
def train_step(x, y):
    def replica(x, y):
        kinds["gradients"] = step(model, optimizer, x, y)  # recorded while tracing
        return tf.constant(0)

    return strategy.run(replica, args=(x, y))


for x, y in batches:
    coordinator.schedule(train_step, args=(tf.constant(x), tf.constant(y)))
    coordinator.join()  # one step at a time: the same sequence as one process
    step(reference, reference_optimizer, x, y)

layer = model.get_layer("embedding")
print("RESULT " + json.dumps({
    "layer": type(layer).__name__,
    "devices": [shard.value.device for shard in layer.shards],
    "rows": [int(shard.shape[0]) for shard in layer.shards],
    "gradients": kinds["gradients"],
    "table_diff": float(np.abs(layer.table()
                               - reference.get_layer("embedding").embeddings.numpy()).max()),
    "head_diff": float(np.abs(model.get_layer("head").kernel.numpy()
                              - reference.get_layer("head").kernel.numpy()).max()),
    "trained": float(np.abs(layer.table() - make_model().get_layer("embedding")
                            .embeddings.numpy()).max()),
    "iterations": int(optimizer.iterations.numpy()),
    "report": sharding_report(model, servers=2),
    "is_sharded": isinstance(layer, ShardedEmbedding),
}), flush=True)
