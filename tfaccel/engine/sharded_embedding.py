"""ShardedEmbedding: an embedding table as K Keras variables of row ranges, for parameter servers."""

from __future__ import annotations

from typing import List, Optional

import keras
import numpy as np
import tensorflow as tf

# TensorFlow's MinSizePartitioner default: a shard holds at least this many bytes.
MIN_SHARD_BYTES = 256 << 10


def shard_rows(rows: int, shards: int) -> List[int]:
    """The rows of each shard under 'div' partitioning (tf.nn.embedding_lookup's rule).

    The first ``rows % shards`` shards hold one row more than the others: the sizes
    TensorFlow's `MinSizePartitioner` gives a `ShardedVariable`.
    """
    base, extra = divmod(rows, shards)
    return [base + (1 if i < extra else 0) for i in range(shards)]


def shard_count(*, rows: int, row_bytes: int, min_shard_bytes: int, max_shards: int) -> int:
    """How many shards `MinSizePartitioner(min_shard_bytes, max_shards)` makes of a table.

    As many as keep every shard at least `min_shard_bytes` (at most `max_shards`, at most
    one per row, at least 1): a table shards once it holds twice `min_shard_bytes`.
    """
    by_size = (rows * row_bytes) // max(int(min_shard_bytes), 1)
    return max(1, min(int(max_shards), rows, by_size))


@keras.saving.register_keras_serializable(package="tfaccel")
class ShardedEmbedding(keras.layers.Layer):
    """`keras.layers.Embedding` whose table is `num_shards` variables of consecutive rows.

    Built in a `tf.distribute.ParameterServerStrategy` scope, each shard is its own
    variable, so the strategy deals them round-robin over the parameter servers: a table
    larger than one server's memory trains. TensorFlow's own `variable_partitioner` makes a
    `ShardedVariable` that Keras 3 cannot train (docs/distributed.md); this layer keeps
    plain Keras variables instead. Rows are split as TensorFlow's 'div' strategy does
    (`shard_rows`) and looked up with `tf.nn.embedding_lookup` over the list of shards, so
    each shard's gradient is an `IndexedSlices` of the rows the batch used (a sparse update
    per shard). Outputs, gradients and so trained weights equal those of an `Embedding`
    holding the same table.

    Args:
        input_dim: Rows of the table (the vocabulary size).
        output_dim: Width of each embedding vector.
        num_shards: How many variables hold the table (at most `input_dim`).
        embeddings_initializer: Initializer of the whole table (split after).
        embeddings_regularizer: Applied to each shard; L1/L2 sum over shards to the value
            on the whole table.
        mask_zero: Id 0 is padding, as in `Embedding`.
        **kwargs: `keras.layers.Layer` arguments (name, dtype, trainable).

    Example:
        >>> layer = ShardedEmbedding(1000, 16, num_shards=2)
        >>> layer(np.array([[1, 999]])).shape
        TensorShape([1, 2, 16])
    """

    def __init__(self, input_dim: int, output_dim: int, *, num_shards: int = 2,
                 embeddings_initializer="uniform", embeddings_regularizer=None,
                 mask_zero: bool = False, **kwargs):
        super().__init__(**kwargs)
        if not 1 <= int(num_shards) <= int(input_dim):
            raise ValueError(f"ShardedEmbedding num_shards must be between 1 and input_dim "
                             f"({input_dim}); got {num_shards}.")
        self.input_dim, self.output_dim = int(input_dim), int(output_dim)
        self.num_shards = int(num_shards)
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)
        self.embeddings_regularizer = keras.regularizers.get(embeddings_regularizer)
        self.mask_zero = bool(mask_zero)
        self.supports_masking = self.mask_zero
        self.autocast = False  # as Embedding: the lookup reads the variables as they are
        self.shards: list = []

    def build(self, input_shape=None):
        if self.built:
            return
        # The whole table is drawn once, then split: the same values as an Embedding's.
        table = self.embeddings_initializer(shape=(self.input_dim, self.output_dim),
                                            dtype=self.variable_dtype)
        start = 0
        for index, rows in enumerate(shard_rows(self.input_dim, self.num_shards)):
            part = table[start:start + rows]
            self.shards.append(self.add_weight(
                shape=(rows, self.output_dim), name=f"shard_{index}",
                initializer=lambda shape, dtype=None, part=part: part,
                regularizer=self.embeddings_regularizer, trainable=True))
            start += rows
        self.built = True

    def call(self, inputs):
        if inputs.dtype not in ("int32", "int64"):
            inputs = tf.cast(inputs, "int32")
        outputs = tf.nn.embedding_lookup([shard.value for shard in self.shards], inputs)
        return tf.cast(outputs, self.compute_dtype)

    def compute_mask(self, inputs, mask=None):
        if not self.mask_zero:
            return None
        return keras.ops.not_equal(inputs, 0)  # also on symbolic inputs

    def compute_output_shape(self, input_shape):
        return (*input_shape, self.output_dim)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(input_dim=self.input_dim, output_dim=self.output_dim,
                      num_shards=self.num_shards, mask_zero=self.mask_zero,
                      embeddings_initializer=keras.initializers.serialize(
                          self.embeddings_initializer),
                      embeddings_regularizer=keras.regularizers.serialize(
                          self.embeddings_regularizer))
        return config

    def table(self) -> np.ndarray:
        """The whole table, shards stacked in order (read from wherever they live)."""
        return np.concatenate([np.asarray(shard.numpy()) for shard in self.shards])

    def set_table(self, table) -> None:
        """Assigns a whole ``(input_dim, output_dim)`` table, split over the shards."""
        table = np.asarray(table)
        if table.shape != (self.input_dim, self.output_dim):
            raise ValueError(f"ShardedEmbedding {self.name!r} holds a table of shape "
                             f"{(self.input_dim, self.output_dim)}; got {table.shape}.")
        self.build()
        start = 0
        for shard in self.shards:
            shard.assign(table[start:start + shard.shape[0]])
            start += shard.shape[0]

    @classmethod
    def from_embedding(cls, layer, *, num_shards: int) -> "ShardedEmbedding":
        """The sharded copy of a `keras.layers.Embedding`: its config, its table if built.

        Raises:
            ValueError: The Embedding has what a split table cannot keep (a constraint,
                LoRA, quantization).
        """
        reason = unshardable(layer)
        if reason:
            raise ValueError(f"Embedding {layer.name!r} cannot be sharded: {reason}.")
        config = layer.get_config()
        sharded = cls(config["input_dim"], config["output_dim"], num_shards=num_shards,
                      embeddings_initializer=config["embeddings_initializer"],
                      embeddings_regularizer=config["embeddings_regularizer"],
                      mask_zero=config["mask_zero"], name=config["name"],
                      dtype=config["dtype"], trainable=config["trainable"])
        if layer.built:
            sharded.set_table(layer.embeddings.numpy())
        return sharded

    def to_embedding(self):
        """A `keras.layers.Embedding` of the same config holding the whole table."""
        layer = keras.layers.Embedding(
            self.input_dim, self.output_dim, embeddings_initializer=self.embeddings_initializer,
            embeddings_regularizer=self.embeddings_regularizer, mask_zero=self.mask_zero,
            name=self.name, dtype=self.dtype_policy, trainable=self.trainable)
        if self.built:
            layer.build()
            layer.embeddings.assign(self.table())
        return layer


def unshardable(layer) -> Optional[str]:
    """Why an Embedding's table cannot be split into shards, or None."""
    if getattr(layer, "embeddings_constraint", None) is not None:
        return "its embeddings_constraint acts on the whole table"
    if getattr(layer, "lora_enabled", False):
        return "it has LoRA weights"
    if getattr(layer, "quantization_mode", None):
        return f"it is quantized ({layer.quantization_mode})"
    return None
