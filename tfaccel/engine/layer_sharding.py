"""A model's large Embedding tables and Dense kernels swapped for sharded layers, and back."""

from __future__ import annotations

import re

import keras
import numpy as np

from tfaccel.engine.sharded_dense import ShardedDense, dense_split, unshardable_dense
from tfaccel.engine.sharded_embedding import ShardedEmbedding, shard_count, unshardable

SHARDED = (ShardedEmbedding, ShardedDense)


def shard_layers(model, *, min_shard_bytes: int, max_shards: int):
    """A copy of `model`, made in the caller's scope, its large Embeddings and Dense sharded.

    Each `keras.layers.Embedding` whose table, and each `keras.layers.Dense` whose kernel,
    makes at least 2 shards of `min_shard_bytes` (TensorFlow's MinSizePartitioner rule,
    `shard_count`, at most `max_shards`) becomes a `ShardedEmbedding` / `ShardedDense`
    holding the same weights; every other layer is copied with its weights. Called in a
    ParameterServerStrategy's scope, the copy's variables live on the parameter servers,
    the shards of one layer on different servers.

    Args:
        model: A functional or Sequential Keras model, built.
        min_shard_bytes: The smallest shard (TensorFlow's MinSizePartitioner's).
        max_shards: The most shards of one table or kernel (the number of parameter servers).

    Returns:
        The copy.

    Raises:
        ValueError: `model` cannot be copied layer by layer (`copyable`).
    """
    if not copyable(model):
        raise ValueError(f"model {model.name!r} is not functional or Sequential: its "
                         "layers cannot be swapped for ShardedEmbedding or ShardedDense "
                         "layers; build it with them in the strategy's scope instead.")

    def clone(layer):
        itemsize = np.dtype(getattr(layer, "variable_dtype", None) or "float32").itemsize
        if isinstance(layer, keras.layers.Embedding) and not unshardable(layer):
            shards = shard_count(rows=layer.input_dim, row_bytes=layer.output_dim * itemsize,
                                 min_shard_bytes=min_shard_bytes, max_shards=max_shards)
            if shards > 1:
                return ShardedEmbedding.from_embedding(layer, num_shards=shards)
        # Exactly Dense: a subclass may compute something else with its kernel.
        if type(layer) is keras.layers.Dense and layer.built and not unshardable_dense(layer):
            shards, split = dense_split(input_dim=int(layer.kernel.shape[0]),
                                        units=layer.units, itemsize=itemsize,
                                        min_shard_bytes=min_shard_bytes, max_shards=max_shards)
            if shards > 1:
                return ShardedDense.from_dense(layer, num_shards=shards, split=split)
        return layer.__class__.from_config(layer.get_config())

    return _copy(model, clone)


def copyable(model) -> bool:
    """Whether `keras.models.clone_model` copies `model` layer by layer (functional, Sequential)."""
    return isinstance(model, keras.Sequential) or (
        isinstance(model, keras.Model) and type(model).__name__ == "Functional")


def unshard_layers(model):
    """A copy of `model` with each sharded layer back to an Embedding or a Dense (whole).

    What a run saves: model.keras then loads anywhere Keras does, without tfaccel, and
    `tfaccel export` and `compare` see plain layers.
    """
    if not any(isinstance(layer, SHARDED) for layer in _layers(model)):
        return model

    def clone(layer):
        if isinstance(layer, ShardedEmbedding):
            return layer.to_embedding()
        if isinstance(layer, ShardedDense):
            return layer.to_dense()
        return layer.__class__.from_config(layer.get_config())

    return _copy(model, clone)


def _copy(model, clone):
    """`keras.models.clone_model` with `clone`, then each copied layer's own values set."""
    copy = keras.models.clone_model(model, clone_function=clone, recursive=True)
    for old, new in zip(_layers(model), _layers(copy), strict=True):
        if isinstance(old, SHARDED) != isinstance(new, SHARDED):
            continue  # a swapped layer came with its weights (from_*, to_*)
        for source, target in zip(_own_variables(old), _own_variables(new), strict=True):
            target.assign(source.numpy())
    return copy


def _layers(model) -> list:
    return list(model._flatten_layers(include_self=False, recursive=True))


def _own_variables(layer) -> list:
    # A layer's own, not its sublayers' (those are visited themselves).
    return list(layer._trainable_variables) + list(layer._non_trainable_variables)


def sharding_report(model, *, servers: int) -> str:
    """What the run log says of where a parameter-server model's variables live."""
    sharded = [layer for layer in _layers(model) if isinstance(layer, SHARDED)]
    whole = ("each other variable lives whole on one parameter server (dealt round-robin "
             "among them)")
    if not sharded:
        why = ("one parameter server" if servers < 2 else "runtime.min_shard_bytes: an "
               "Embedding table or a Dense kernel shards once it holds 2 shards' worth")
        return f"no table or kernel sharded ({why}); {whole}"
    parts = []
    for layer in sharded:
        tasks = sorted({_ps_task(shard) for shard in layer.shards})
        if isinstance(layer, ShardedEmbedding):
            rows, columns, what = layer.input_dim, layer.output_dim, ""
        else:
            rows, columns = layer.input_dim, layer.units
            what = "Dense kernel "
        mib = rows * columns * np.dtype(layer.variable_dtype).itemsize / 2**20
        kind = "" if isinstance(layer, ShardedEmbedding) else f"{layer.split[:-1]} "
        parts.append(f"{layer.name} ({what}{rows}x{columns}, {mib:.2f} MiB) in "
                     f"{layer.num_shards} {kind}shards over {len(tasks)} of {servers} "
                     f"server(s) [{', '.join(tasks)}]")
    return "sharded: " + "; ".join(parts) + f"; {whole}"


def _ps_task(variable) -> str:
    """``ps N`` of a variable's device, or the device as it is."""
    device = getattr(variable.value, "device", "") or ""
    match = re.search(r"/job:ps/replica:\d+/task:(\d+)", device)
    return f"ps {match.group(1)}" if match else (device or "local")
