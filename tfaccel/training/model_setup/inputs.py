"""The training input of a run: the validation set and the training stream at any step."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Callable

import tensorflow as tf

from tfaccel.config.batching import BatchPlan
from tfaccel.config.recipe import Recipe
from tfaccel.data import from_recipe, sharding
from tfaccel.data.tail import EpochStream
from tfaccel.data.tail.counting import count_pass, drops_remainder
from tfaccel.errors import DataError
from tfaccel.messages import say

if TYPE_CHECKING:  # tfaccel.data imports TensorFlow; the runner imports this module first
    from tfaccel.data.dataset_info import DatasetInfo


@dataclasses.dataclass
class TrainData:
    """The training input as a function of the resume point, and what it is made of."""

    make_stream: Callable  # global_step -> dataset of batches starting at that step
    validation: object
    info: DatasetInfo  # frozen: a measurement (the padding) replaces it
    steps_per_epoch: int
    batches_per_pass: int
    examples_per_epoch: int


def input_order_is_fixed(*, deterministic: bool, strategy) -> bool:
    """Whether the input pipeline must keep a fixed element order.

    When `runtime.deterministic` asks for it, and whenever the data layer's rule says so
    for `strategy` (`data.sharding.order_must_be_fixed`: a multi-worker job may split by
    element).

    Args:
        deterministic: `runtime.deterministic`.
        strategy: The `tf.distribute` strategy the run trains under.
    """

    return deterministic or sharding.order_must_be_fixed(strategy)


def build_data(recipe: Recipe, plan: BatchPlan, *, deterministic: bool,
               strategy=None) -> TrainData:
    """Builds the validation set and a function giving the training stream at any step.

    Under a multi-worker `strategy`, a file source whose files divide evenly among the
    workers (`data.from_recipe.worker_file_shares`) is split by file before the stream is built:
    each worker reads only its own files, through `distribute_datasets_from_function`.
    Any other source gives the strategy one stream of global batches to split by element.
    """

    def build(stream, input_context=None, adapted=None):
        return from_recipe.build_datasets(recipe.data, global_batch_size=plan.global_batch_size,
                              num_replicas=plan.replicas, seed=recipe.seed,
                              deterministic=deterministic, stream=stream,
                              input_context=input_context, adapted=adapted)

    by_file = _file_sharding(recipe, plan, strategy=strategy)
    if by_file is not None:
        return _build_data_by_file(build, recipe=recipe, strategy=strategy, plan=plan,
                                   context=by_file)
    first_stream, validation, info = build(EpochStream())
    adapted = _adapted(info)
    drop = drops_remainder(plan.replicas)
    # The data layer's own count (the one drop rule), or one counted pass when the source
    # cannot tell its size.
    per_pass, per_pass_examples = info.steps_per_epoch, info.train_examples_per_pass
    train_examples = info.train_examples
    if per_pass is None:
        per_pass, per_pass_examples = count_pass(build(None, adapted=adapted)[0])
        train_examples = per_pass_examples
        # Counted even with training.steps_per_epoch: the resumable stream needs the
        # length of a pass to find a resume point (an earlier text said otherwise).
        say(f"the training source does not declare its size; one pass counted: "
            f"{per_pass_examples} examples in {per_pass} batches (a resume point is found "
            "by it).")
    if per_pass == 0:
        raise DataError(
            f"the training split has {train_examples} examples, fewer than one global batch "
            f"of {plan.global_batch_size}"
            + (f" (with {plan.replicas} replicas the last partial batch is dropped)"
               if drop else "") + "; lower training.global_batch_size or add data.")
    steps = recipe.training.steps_per_epoch or per_pass
    examples = steps * plan.global_batch_size if recipe.training.steps_per_epoch \
        else per_pass_examples
    first_built = {"stream": first_stream}
    # Skipping a pass of the first stream costs less than rebuilding only when its
    # examples come from memory; a service hands out batches in the order its workers
    # finish them, so nothing is skipped over it.
    reusable = recipe.data.cache == "memory" and not recipe.data.service.dispatcher

    def make_stream(global_step: int):
        # The resume point in data terms: which pass, how many of its batches are done.
        pass_index, skip = divmod(global_step, per_pass)
        if pass_index == 0 and skip == 0 and first_built.get("stream") is not None:
            return first_built.pop("stream")  # built above already
        if reusable and 0 < global_step <= per_pass:
            # The next part of this process's run (`steps_per_execution: auto` after its
            # measured first epoch): the first stream again, its first steps skipped. Its
            # memory cache is already filled, and the stream is a pure function of
            # (seed, pass), so these are the batches a rebuilt stream would give, without
            # listing, decoding and caching the source a second time.
            return first_stream.skip(global_step)
        return build(EpochStream(first_pass=pass_index, skip_batches=skip), adapted=adapted)[0]

    return TrainData(make_stream=make_stream, validation=validation, info=info,
                     steps_per_epoch=steps, batches_per_pass=per_pass,
                     examples_per_epoch=examples)


def _adapted(info: DatasetInfo):
    """What the first build adapted on the training split (a text source's vocabulary, a
    table's FeatureSpace), or None: every later stream encodes with it. Adapting again
    would be another pass over the training split for the same result (a resumed run of
    a 640-row CSV builds two streams: 7.5 s of CPU with their two adapts, 5.6 without)."""
    return info.vectorizer if info.vectorizer is not None else info.feature_space


def _file_sharding(recipe: Recipe, plan: BatchPlan, *, strategy):
    """This worker's input context when the training files are divided by file, else None."""
    if strategy is None:
        return None

    index, workers = sharding.worker_of(strategy)
    if workers < 2:
        return None
    shares = from_recipe.worker_file_shares(recipe.data, workers=workers,
                                global_batch_size=plan.global_batch_size, seed=recipe.seed)
    if shares is None:
        return None  # arrays, image folders, Python sources: by element
    say(shares.describe(index))
    if not shares.by_file:
        return None

    # The context distribute_datasets_from_function gives this worker (TF's numbering).
    return tf.distribute.InputContext(num_input_pipelines=workers, input_pipeline_id=index,
                                      num_replicas_in_sync=plan.replicas)


def _build_data_by_file(build: Callable, *, recipe: Recipe, strategy, plan: BatchPlan,
                        context) -> TrainData:
    """`build_data` for a stream split by file: one per-worker stream per resume point."""

    _, validation, info = build(EpochStream(), context)
    adapted = _adapted(info)
    per_pass = info.steps_per_epoch  # the same on every worker
    steps = recipe.training.steps_per_epoch or per_pass
    # Each worker's stream yields per-replica batches; its local replicas take one each
    # per step, so a step is `local` batches of this worker's stream.
    local = plan.replicas // context.num_input_pipelines

    def make_stream(global_step: int):
        pass_index, skip = divmod(global_step, per_pass)
        stream = EpochStream(first_pass=pass_index, skip_batches=skip * local,
                             batches_per_pass=per_pass * local)
        # Keras' fit takes the distributed dataset as it is: no rebatching, no autoshard.
        return strategy.distribute_datasets_from_function(
            lambda input_context: build(stream, input_context, adapted=adapted)[0])

    return TrainData(make_stream=make_stream, validation=validation, info=info,
                     steps_per_epoch=steps, batches_per_pass=per_pass,
                     examples_per_epoch=steps * plan.global_batch_size)
