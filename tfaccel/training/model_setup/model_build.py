"""The model a run fits: registered, the recipe's own builder, a saved one or given, compiled."""

from __future__ import annotations

import tensorflow as tf

from tfaccel import python_refs
from tfaccel.config.batching import BatchPlan
from tfaccel.config.cluster import read_parameter_server_cluster
from tfaccel.config.recipe import Recipe
from tfaccel.engine.accumulation import accumulate
from tfaccel.engine.keras_compat import patch_for_multi_worker
from tfaccel.engine.layer_sharding import copyable, shard_layers
from tfaccel.engine.model_pipeline import pipeline_from_recipe
from tfaccel.errors import UserInputError
from tfaccel.models import registry
from tfaccel.models.defaults import TABLE_MEMBERS
from tfaccel.training.keras_objects.losses import make_loss, make_metrics
from tfaccel.training.keras_objects.optimizers import make_optimizer
from tfaccel.training.model_setup import own_models
from tfaccel.training.model_setup.execution import initial_steps
from tfaccel.training.model_setup.inputs import TrainData


def build_model(recipe: Recipe, *, strategy, plan: BatchPlan, data: TrainData, given=None):
    """The recipe's Keras model and its accumulation wrapper, compiled in `strategy`'s scope.

    What `train` fits, built the same way for other tools (`tfaccel doctor`). The model is
    a registered one, the recipe's own builder (model.name ``module:callable``), a saved
    model (model.path) or `given` (`train(model=...)`), always compiled with the recipe's
    optimizer, loss and metrics.

    Returns:
        ``(trained_model, model)``: the model `fit` runs (the accumulation wrapper when
        accumulating) and the plain Keras model inside it.
    """

    training = recipe.training
    model = _parameter_server_model(recipe, strategy=strategy, data=data, given=given)
    with strategy.scope():
        if model is None:
            model = _make_model(recipe, data=data, given=given)
        optimizer = make_optimizer(recipe.optimizer,
                                   total_steps=data.steps_per_epoch * training.epochs,
                                   steps_per_epoch=data.steps_per_epoch)
        trained_model = model
        if recipe.runtime.strategy == "pipeline":
            trained_model = pipeline_from_recipe(model, recipe.runtime, plan.accumulation_steps)
            model = trained_model.inner  # the placed copy is what trains and is saved
        elif plan.accumulation_steps > 1 or training.micro_batch_size == "auto":
            # micro_batch_size auto: wrapped even at one step (a plain Keras step then), so
            # that running out of memory changes the wrapper's steps, not the model fitted.

            trained_model = accumulate(model, plan.accumulation_steps)
        info = data.info
        trained_model.compile(optimizer=optimizer, loss=make_loss(training, task=info.task),
                              metrics=make_metrics(training, task=info.task,
                                                   num_outputs=_outputs(info)),
                              jit_compile=training.jit_compile,
                              steps_per_execution=initial_steps(training.steps_per_execution))
        # A no-op except under multi-worker MultiWorkerMirroredStrategy (keras#20585).
        patch_for_multi_worker(trained_model)
    return trained_model, model


def _parameter_server_model(recipe: Recipe, *, strategy, data: TrainData, given):
    """Under ParameterServerStrategy: the model with its large layers sharded, else None.

    The model is made on the chief, then copied into the strategy's scope, each Embedding
    table and Dense kernel of at least 2 shards of runtime.min_shard_bytes becoming a
    ShardedEmbedding / ShardedDense holding the same weights: only the copy's variables
    live on the parameter servers (a table or kernel is never placed whole first). None (made in the scope as any model) when min_shard_bytes is empty or the
    model cannot be copied layer by layer (a subclassed model).
    """

    if recipe.runtime.min_shard_bytes is None or not isinstance(
            strategy, tf.distribute.ParameterServerStrategy):
        return None

    made = _make_model(recipe, data=data, given=given)
    if not copyable(made):
        return None
    with strategy.scope():
        return shard_layers(made, min_shard_bytes=recipe.runtime.min_shard_bytes,
                            max_shards=len(read_parameter_server_cluster()["ps"]))


def _make_model(recipe: Recipe, *, data: TrainData, given):
    """The uncompiled model, made in the caller's strategy scope and precision policy."""

    info = data.info
    # A builder's num_classes: the classes (2 for binary), else the labels or targets.
    shape, classes = info.input_shape, (info.num_classes if info.num_classes is not None
                                        else _outputs(info))
    # What the model's head must give: the task and its width (classes, 1, labels, targets).
    head = dict(task=info.task, num_outputs=_outputs(info))
    name = recipe.model.name
    if given is not None:
        return own_models.from_given(given, input_shape=shape, num_classes=classes,
                                     params=dict(recipe.model.params), **head)
    if recipe.model.path is not None:
        return own_models.load_saved(recipe.model.path, input_shape=shape, num_classes=classes,
                                     **head)
    if python_refs.is_reference(name):
        builder = python_refs.load(name, key="model.name")
        return own_models.call_builder(builder, where=f"model.name {name!r}",
                                       input_shape=shape, num_classes=classes,
                                       params=dict(recipe.model.params), **head)
    return registry.build_model(name, input_shape=shape, num_classes=classes, **head,
                                **_model_params(recipe, info))


def _outputs(info):
    """The model's output width: the source's, else its classes (earlier sources)."""
    return info.num_outputs if info.num_outputs is not None else info.num_classes


def _model_params(recipe: Recipe, info) -> dict:
    """`model.params`, with a token model's `vocab_size` taken from the adapted vocabulary
    and its `max_length` (positions, text_transformer) from data.text.max_length when set."""

    params = dict(recipe.model.params)
    text = info.text
    defaults = registry.model_params(recipe.model.name)
    if info.table is not None and "normalization" in defaults:
        # FeatureSpace already normalised the numbers and one-hot encoded the categories:
        # a pixel rescaling (mlp's default) would shrink them 255-fold.
        params.setdefault("normalization", "none")
    if info.table is not None and "linear_path" in defaults:
        # A table's MLP also gets a linear path from its features to the head (wide and
        # deep): it contains the logistic / linear regression the tables are judged
        # against. Chosen by 5-fold cross-validation on the training files of the small
        # tables (benchmarks/real_data/table_defaults_cv.py; docs/performance.md).
        params.setdefault("linear_path", True)
    if info.table is not None and "members" in defaults:
        # And, for the classification tasks, several hidden stacks averaged (an ensemble
        # inside one model): one stack fits a small table's noise its own way, their mean
        # less so (same CV; it did not help the regression table).
        params.setdefault("members", TABLE_MEMBERS.get(info.task, 1))
    series = info.series
    if series is not None:
        # A time series' training-split statistics, for the models that normalise with
        # them (forecast_mlp, seq_cnn): a window keeps its level, a forecast its units.
        for key in ("input_mean", "input_std", "target_mean", "target_std", "anchor"):
            if key in defaults and getattr(series, key) is not None:
                params.setdefault(key, list(getattr(series, key)))
    if text is None or "vocab_size" not in defaults:
        return params
    cut = text.max_length
    if "max_length" in defaults and cut is not None:
        if params.setdefault("max_length", cut) < cut:
            raise UserInputError(
                f"model.params.max_length is {params['max_length']} but data.text.max_length "
                f"keeps {cut} tokens of each text; the model would read only the first "
                f"{params['max_length']}. Leave model.params.max_length unset to follow "
                "data.text.max_length, or lower data.text.max_length.")
    vocabulary = text.vocabulary_size
    if params.setdefault("vocab_size", vocabulary) < vocabulary:
        raise UserInputError(
            f"model.params.vocab_size is {params['vocab_size']} but the vocabulary adapted "
            f"on the training texts has {vocabulary} tokens (data.text.max_tokens "
            f"{recipe.data.text.max_tokens}); leave vocab_size empty to follow it, or lower "
            "data.text.max_tokens.")
    return params
