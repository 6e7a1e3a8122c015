"""Workarounds for Keras 3 `fit` under MultiWorkerMirroredStrategy (keras-team/keras#20585)."""

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
