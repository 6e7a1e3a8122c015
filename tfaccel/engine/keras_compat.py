"""Workarounds for Keras 3 `fit` on TensorFlow: under MultiWorkerMirroredStrategy, and its second trace."""

import types

import keras
import tensorflow as tf

from tfaccel.config import cluster


def patch_for_multi_worker(model):
    """Make `model.fit`/`evaluate` work under a multi-worker MultiWorkerMirroredStrategy.

    Keras 3.15's TensorFlow trainer fails there in two places (keras-team/keras#20585):

    1. `_maybe_symbolic_build` reduces the first distributed batch across workers with
       `strategy.reduce("MEAN", batch)` only to learn its shapes; that collective fails on
       PerReplica inputs. The first local replica's value has the same shapes.
    2. The step's scalar logs are reduced with `strategy.reduce("MEAN", value, axis=0)`,
       which fails for rank-0 values. Logs shaped [1] reduce to the same scalar.

    The patch is per model instance and a no-op (returns the model untouched) unless the
    model's strategy is a MultiWorkerMirroredStrategy running with more than one worker,
    so single-machine training keeps Keras' own code paths. Remove it once the upstream
    issue is fixed.

    Args:
        model: A Keras model created (and compiled) inside the strategy's scope.

    Returns:
        The same model, patched when needed.
    """
    strategy = model.distribute_strategy
    if not cluster.is_multi_worker(strategy):
        return model
    original_build = model._maybe_symbolic_build
    original_train_step = model.train_step
    original_test_step = model.test_step

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        if iterator is not None and data_batch is None:
            # Workaround 1: shapes from the first local replica, no cross-worker reduce.
            for _, _, it in iterator:
                batch = next(it)
                data_batch = keras.tree.map_structure(
                    lambda v: strategy.experimental_local_results(v)[0]
                    if isinstance(v, tf.distribute.DistributedValues)
                    else v,
                    batch,
                )
                break
        return original_build(data_batch=data_batch)

    def train_step(self, data):
        return _logs_as_vectors(original_train_step(data))

    def test_step(self, data):
        return _logs_as_vectors(original_test_step(data))

    model._maybe_symbolic_build = types.MethodType(_maybe_symbolic_build, model)
    model.train_step = types.MethodType(train_step, model)
    model.test_step = types.MethodType(test_step, model)
    return model


def _logs_as_vectors(logs):
    # Workaround 2: rank-0 logs become shape [1]; the axis-0 mean restores a scalar.
    return keras.tree.map_structure(
        lambda v: tf.reshape(v, [1]) if isinstance(v, tf.Tensor) and v.shape.rank == 0 else v,
        logs,
    )


def build_before_fit(model, dataset) -> bool:
    """Creates a compiled model's optimizer and metric variables before its first `fit`.

    Keras 3.15's TensorFlow trainer builds them ahead of the train function only when the
    model was compiled under a distribution strategy (`_maybe_symbolic_build`); otherwise
    the optimizer's slots and the compiled metrics' sums are created inside the first trace
    of the train function, and a `tf.function` that created variables is traced again
    without them: every step (Adam's update of each variable too) is traced twice. Built
    here first, from `dataset`'s element spec (no batch is read), the train function is
    traced once: the same graph, half the tracing (a 1-epoch fit of a small MLP: 24 Adam
    update traces instead of 48, 2.1 s instead of 2.8-5.1 s on a loaded 2-core AMD EPYC).

    A no-op (returns False) when Keras builds the model itself (compiled under a strategy),
    when everything is built already, or when an input is not a plain tensor (ragged or
    sparse specs: Keras' own first trace builds those, as before).

    Args:
        model: A compiled Keras model (or `tfaccel.accumulate`'s wrapper).
        dataset: The `tf.data.Dataset` `fit` will read.

    Returns:
        Whether the variables were created here.
    """
    symbolic_build = getattr(model, "_symbolic_build", None)  # Keras' private step
    if symbolic_build is None or getattr(model, "_distribute_strategy", True) is not None:
        return False
    spec = getattr(dataset, "element_spec", None)
    leaves = tf.nest.flatten(spec)  # [None] without a spec: not a TensorSpec either
    if not leaves or not all(type(leaf) is tf.TensorSpec for leaf in leaves):
        return False
    optimizer_built = model.optimizer is None or model.optimizer.built
    metrics = getattr(model, "_compile_metrics", None)
    if optimizer_built and (metrics is None or metrics.built):
        return False
    symbolic_build(data_batch=spec)
    return True


class BuildsBeforeTracing:
    """A mixin for tfaccel's `keras.Model` subclasses: `fit` and `evaluate` trace once.

    Keras 3.15 hands `_maybe_symbolic_build` the epoch iterator it made of the data
    `fit` or `evaluate` was given (arrays, a `tf.data.Dataset`, a generator) and builds
    there only under a strategy; off one, every input was traced twice (see
    `build_before_fit`). Here the variables are built from the element spec of that
    iterator's dataset instead (no batch is read): `tfaccel.accumulate`'s wrapper and
    `tfaccel.pipeline`'s model trace their step once (a 3-epoch fit of a small MLP on
    arrays: 1 trace instead of 2, CPU time halved, the same weights). Put it before
    `keras.Model` among the bases.
    """

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        super()._maybe_symbolic_build(iterator=iterator, data_batch=data_batch)
        # Keras' TFEpochIterator keeps the dataset it iterates: off a strategy a plain
        # tf.data.Dataset; under one, a distributed dataset Keras has just built from.
        dataset = getattr(iterator, "_distributed_dataset", None)
        if isinstance(dataset, tf.data.Dataset):
            build_before_fit(self, dataset)
