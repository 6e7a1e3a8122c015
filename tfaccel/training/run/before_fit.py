"""What a run checks and keeps before it builds the model: the compile arguments, the data
service, the steps per call against the epoch, the vocabulary, feature space and padding, the
precision `auto` chose."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from tfaccel.config.batching import check_steps_per_execution
from tfaccel.config.recipe import Recipe
from tfaccel.data import table_features, text_vectors
from tfaccel.data.length_batches import has_open_length, padding_fraction
from tfaccel.errors import UserInputError
from tfaccel.messages import say
from tfaccel.training.keras_objects.losses import check_loss_and_metrics
from tfaccel.training.keras_objects.optimizers import check_optimizer
from tfaccel.training.model_setup.inputs import TrainData
from tfaccel.training.run.context import RunContext
from tfaccel.training.run_dir import run_files


def check_compile_arguments(recipe: Recipe) -> None:
    """The optimizer's, schedule's, loss's and metrics' arguments against their signatures:
    before the data is built, so a misspelt argument costs no pipeline build."""
    check_optimizer(recipe.optimizer)
    check_loss_and_metrics(recipe.training)


def check_data_service(recipe: Recipe, *, strategy: str) -> None:
    """Refuses a tf.data service under the multi-worker strategy `auto` resolved to."""
    # Recipe validation refuses `strategy: multi_worker` itself; `auto` only resolves to it
    # here (TF_CONFIG), so the same refusal is repeated once the strategy is known.
    if recipe.data.service.dispatcher and strategy == "multi_worker":
        raise UserInputError(
            "data.service with a multi_worker strategy (runtime.strategy "
            f"{recipe.runtime.strategy!r} resolved to multi_worker from TF_CONFIG) is not "
            "supported yet; use one trainer, or leave data.service.dispatcher empty.")


def check_steps_against_the_epoch(recipe: Recipe, data: TrainData) -> None:
    """The recipe's steps per call against the epoch's steps, now that they are known."""
    training = recipe.training
    if training.steps_per_execution != "auto":
        check_steps_per_execution(training.steps_per_execution,
                                  steps_per_epoch=data.steps_per_epoch,
                                  every_steps=training.checkpoint_every_steps)


def keep_vocabulary(ctx: RunContext, data: TrainData) -> None:
    """A text run's vocabulary in the run directory (one token per line, in id order).

    It is what turns texts into the ids the saved model takes:
    `data.text_vectors.with_vectorizer` puts it in front of the model.
    """
    layer = data.info.vectorizer
    if layer is None:
        return
    path = text_vectors.save_vocabulary(layer, ctx.directory)
    say(f"text: {data.info.text.vocabulary_size} tokens in {Path(path).name}.")


def keep_feature_space(ctx: RunContext, data: TrainData) -> None:
    """A table run's FeatureSpace in the run directory: how its columns became features."""
    space = data.info.feature_space
    if space is None:
        return
    path = table_features.save_feature_space(space, ctx.directory)
    table = data.info.table
    for note in table.notes:
        say(note)
    say(f"{table.line[:-1]} ({Path(path).name}).")


def measure_padding(data: TrainData) -> None:
    """The padding of sequences of open length (token ids, waveforms) in the summary's data.

    Measured on the validation batches (a fixed pass): the share of their steps that are
    the zeros a batch appends, what batches by length (data.text.batch_by_length) keep low.
    """
    if data.validation is None or not has_open_length(data.info.input_shape):
        return

    fraction = padding_fraction(data.validation)
    data.info = dataclasses.replace(data.info,
                                    validation_padding_fraction=round(fraction, 4))
    say(f"{fraction:.1%} of the validation batches' steps are padding.")


def record_precision(ctx: RunContext) -> None:
    """`runtime.precision: auto`'s choice: said, and kept in the run directory for a resume."""
    choice = ctx.session.precision_choice
    if choice is None:
        return
    say(f"precision auto: {choice['policy']} ({choice['reason']}).")
    if not ctx.resuming:
        run_files.write_json(ctx.directory / run_files.PRECISION_FILE, choice)
