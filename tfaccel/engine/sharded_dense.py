"""ShardedDense: a Dense kernel as K Keras variables of column (or row) blocks, for parameter servers."""

from __future__ import annotations

from typing import Optional

import keras
import numpy as np

from tfaccel.engine.sharded_embedding import shard_count, shard_rows

SPLITS = ("columns", "rows")


@keras.saving.register_keras_serializable(package="tfaccel")
class ShardedDense(keras.layers.Layer):
    """`keras.layers.Dense` whose kernel is `num_shards` variables of consecutive blocks.

    Built in a `tf.distribute.ParameterServerStrategy` scope, each block is its own
    variable, so the strategy deals them round-robin over the parameter servers: a kernel
    larger than one server's memory trains, and its updates are spread over the servers.
    (TensorFlow's `variable_partitioner` cannot be used with Keras 3: engine/ps_cluster.py.)

    ``split="columns"`` (the default) cuts the output units: the layer's output is the
    concatenation of ``inputs @ block`` for each block, so each output column is computed
    from exactly the values a Dense uses. ``split="rows"`` cuts the input features (for a
    kernel with fewer units than shards, such as a wide 1-unit head): the output is the sum
    of each block's partial product, equal to Dense's up to float rounding of that sum.
    Either way each block's gradient is the matching block of Dense's, so trained weights
    equal those of a Dense holding the same kernel (within float noise).

    Saved on its own (`model.save`), the layer writes ONE kernel and the bias, in the
    order Dense does, and splits them again when loaded.

    Args:
        units: Output width, as Dense's.
        num_shards: How many variables hold the kernel (at most the split axis' length).
        split: ``"columns"`` (units) or ``"rows"`` (input features).
        activation: As Dense's.
        use_bias: As Dense's.
        kernel_initializer: Initializer of the whole kernel (split after): the same values
            as a Dense's.
        bias_initializer: As Dense's.
        kernel_regularizer: Applied to each block; L1/L2 sum over the blocks to the value
            on the whole kernel.
        bias_regularizer: As Dense's.
        activity_regularizer: As Dense's.
        **kwargs: `keras.layers.Layer` arguments (name, dtype, trainable).

    Example:
        >>> layer = ShardedDense(6, num_shards=2)
        >>> layer(np.ones((1, 4), "float32")).shape
        TensorShape([1, 6])
    """

    def __init__(self, units: int, *, num_shards: int = 2, split: str = "columns",
                 activation=None, use_bias: bool = True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, bias_regularizer=None,
                 activity_regularizer=None, **kwargs):
        super().__init__(activity_regularizer=activity_regularizer, **kwargs)
        if split not in SPLITS:
            raise ValueError(f"ShardedDense split must be one of {SPLITS}; got {split!r}.")
        if split == "columns" and not 1 <= int(num_shards) <= int(units):
            raise ValueError(f"ShardedDense num_shards must be between 1 and units ({units}) "
                             f"for split 'columns'; got {num_shards}.")
        self.units, self.num_shards, self.split = int(units), int(num_shards), split
        self.activation = keras.activations.get(activation)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
        self.bias_regularizer = keras.regularizers.get(bias_regularizer)
        self.input_spec = keras.InputSpec(min_ndim=2)
        self.supports_masking = True
        self.shards: list = []
        self.bias = None
        self.input_dim: Optional[int] = None

    def build(self, input_shape):
        if self.built:
            return
        self.input_dim = int(input_shape[-1])
        if self.split == "rows" and not 1 <= self.num_shards <= self.input_dim:
            raise ValueError(f"ShardedDense {self.name!r}: num_shards must be between 1 and "
                             f"its input features ({self.input_dim}) for split 'rows'; got "
                             f"{self.num_shards}.")
        # The whole kernel is drawn once, then split: the same values as a Dense's.
        kernel = self.kernel_initializer(shape=(self.input_dim, self.units),
                                         dtype=self.variable_dtype)
        # The blocks are made one after the other, before the bias, so that the strategy's
        # round-robin deals K consecutive blocks to K different servers.
        for index, (start, size) in enumerate(self._blocks()):
            part = (kernel[:, start:start + size] if self.split == "columns"
                    else kernel[start:start + size])
            self.shards.append(self.add_weight(
                shape=tuple(part.shape), name=f"kernel_shard_{index}",
                initializer=lambda shape, dtype=None, part=part: part,
                regularizer=self.kernel_regularizer, trainable=True))
        if self.use_bias:
            self.bias = self.add_weight(shape=(self.units,), name="bias",
                                        initializer=self.bias_initializer,
                                        regularizer=self.bias_regularizer, trainable=True)
        self.input_spec = keras.InputSpec(min_ndim=2, axes={-1: self.input_dim})
        self.built = True

    def _blocks(self) -> list:
        """``(start, size)`` of each block along the split axis (sizes as shard_rows)."""
        length = self.units if self.split == "columns" else self.input_dim
        blocks, start = [], 0
        for size in shard_rows(length, self.num_shards):
            blocks.append((start, size))
            start += size
        return blocks

    def call(self, inputs):
        ops = keras.ops
        if self.split == "columns":
            parts = [ops.matmul(inputs, shard) for shard in self.shards]
            x = parts[0] if len(parts) == 1 else ops.concatenate(parts, axis=-1)
        else:
            x = None
            for (start, size), shard in zip(self._blocks(), self.shards):
                part = ops.matmul(inputs[..., start:start + size], shard)
                x = part if x is None else x + part
        if self.bias is not None:
            x = ops.add(x, self.bias)
        if self.activation is not None:
            x = self.activation(x)
        return x

    def compute_output_shape(self, input_shape):
        return (*input_shape[:-1], self.units)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(
            units=self.units, num_shards=self.num_shards, split=self.split,
            activation=keras.activations.serialize(self.activation), use_bias=self.use_bias,
            kernel_initializer=keras.initializers.serialize(self.kernel_initializer),
            bias_initializer=keras.initializers.serialize(self.bias_initializer),
            kernel_regularizer=keras.regularizers.serialize(self.kernel_regularizer),
            bias_regularizer=keras.regularizers.serialize(self.bias_regularizer),
            activity_regularizer=keras.regularizers.serialize(self.activity_regularizer))
        return config

    def kernel(self) -> np.ndarray:
        """The whole ``(input_dim, units)`` kernel, blocks joined in order (read from
        wherever they live)."""
        parts = [np.asarray(shard.numpy()) for shard in self.shards]
        return np.concatenate(parts, axis=1 if self.split == "columns" else 0)

    def set_kernel(self, kernel) -> None:
        """Assigns a whole ``(input_dim, units)`` kernel, split over the blocks."""
        kernel = np.asarray(kernel)
        if not self.built or kernel.shape != (self.input_dim, self.units):
            raise ValueError(f"ShardedDense {self.name!r} holds a kernel of shape "
                             f"{(self.input_dim, self.units)}; got {kernel.shape}.")
        for (start, size), shard in zip(self._blocks(), self.shards):
            shard.assign(kernel[:, start:start + size] if self.split == "columns"
                         else kernel[start:start + size])

    # Saved as Dense saves: "0" the whole kernel, "1" the bias (a .keras file then holds
    # one kernel whatever the number of shards).
    def save_own_variables(self, store) -> None:
        store["0"] = self.kernel()
        if self.bias is not None:
            store["1"] = np.asarray(self.bias.numpy())

    def load_own_variables(self, store) -> None:
        expected = 2 if self.bias is not None else 1
        if len(store.keys()) != expected:
            raise ValueError(f"ShardedDense {self.name!r} expects {expected} saved "
                             f"variable(s) (the kernel and the bias); got {len(store.keys())}.")
        self.set_kernel(store["0"])
        if self.bias is not None:
            self.bias.assign(store["1"])

    @classmethod
    def from_dense(cls, layer, *, num_shards: int, split: str = "columns") -> "ShardedDense":
        """The sharded copy of a `keras.layers.Dense`: its config, its weights if built.

        Raises:
            ValueError: The Dense has what a split kernel cannot keep (a constraint, LoRA,
                quantization).
        """
        reason = unshardable_dense(layer)
        if reason:
            raise ValueError(f"Dense {layer.name!r} cannot be sharded: {reason}.")
        config = layer.get_config()
        sharded = cls(config["units"], num_shards=num_shards, split=split,
                      activation=config["activation"], use_bias=config["use_bias"],
                      kernel_initializer=config["kernel_initializer"],
                      bias_initializer=config["bias_initializer"],
                      kernel_regularizer=config["kernel_regularizer"],
                      bias_regularizer=config["bias_regularizer"],
                      activity_regularizer=config.get("activity_regularizer"),
                      name=config["name"], dtype=config["dtype"],
                      trainable=config["trainable"])
        if layer.built:
            sharded.build((None, int(layer.kernel.shape[0])))
            sharded.set_kernel(layer.kernel.numpy())
            if layer.use_bias:
                sharded.bias.assign(layer.bias.numpy())
        return sharded

    def to_dense(self):
        """A `keras.layers.Dense` of the same config holding the whole kernel and bias."""
        layer = keras.layers.Dense(
            self.units, activation=self.activation, use_bias=self.use_bias,
            kernel_initializer=self.kernel_initializer, bias_initializer=self.bias_initializer,
            kernel_regularizer=self.kernel_regularizer, bias_regularizer=self.bias_regularizer,
            activity_regularizer=self.activity_regularizer, name=self.name,
            dtype=self.dtype_policy, trainable=self.trainable)
        if self.built:
            layer.build((None, self.input_dim))
            layer.kernel.assign(self.kernel())
            if self.use_bias:
                layer.bias.assign(self.bias.numpy())
        return layer


def unshardable_dense(layer) -> Optional[str]:
    """Why a Dense's kernel cannot be split into blocks, or None."""
    if getattr(layer, "kernel_constraint", None) is not None:
        return "its kernel_constraint acts on the whole kernel"
    if getattr(layer, "bias_constraint", None) is not None:
        return "it has a bias_constraint (kept whole only by Dense itself)"
    if getattr(layer, "lora_enabled", False):
        return "it has LoRA weights"
    if getattr(layer, "quantization_mode", None):
        return f"it is quantized ({layer.quantization_mode})"
    return None


def dense_split(*, input_dim: int, units: int, itemsize: int, min_shard_bytes: int,
                max_shards: int) -> tuple:
    """``(shards, split)`` for a Dense kernel under the MinSizePartitioner rule.

    Columns (whole output units) when they give as many shards as rows would, else rows
    (a kernel with fewer units than shards, e.g. a wide 1-unit head). ``shards`` 1: the
    kernel stays whole.
    """
    by_columns = shard_count(rows=units, row_bytes=input_dim * itemsize,
                             min_shard_bytes=min_shard_bytes, max_shards=max_shards)
    by_rows = shard_count(rows=input_dim, row_bytes=units * itemsize,
                          min_shard_bytes=min_shard_bytes, max_shards=max_shards)
    return (by_columns, "columns") if by_columns >= by_rows else (by_rows, "rows")
