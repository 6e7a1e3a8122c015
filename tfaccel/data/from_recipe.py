"""Builds the train/validation datasets a recipe's data section describes, through its `Source`."""

from __future__ import annotations

import dataclasses
import importlib
from typing import Iterator, Mapping, Optional, Tuple

import tensorflow as tf

from tfaccel.config import sources
from tfaccel.data import cache_files, sharding, table_features, tail, text_vectors, wordpiece
from tfaccel.data.dataset_info import DatasetInfo, TableInfo, TextInfo
from tfaccel.data.service import ServiceTarget
from tfaccel.data.sources import base
from tfaccel.data.tail import TailOptions
from tfaccel.errors import DataError


def _common(config, *, seed: int, deterministic: bool, sequential: bool) -> TailOptions:
    """Options of the standard tail shared by every source."""
    return TailOptions(
        sequential=sequential, seed=seed, deterministic=deterministic,
        num_parallel_calls=config.num_parallel_calls or tf.data.AUTOTUNE,
        private_threads=config.private_threads,
        ram_budget_bytes=(config.ram_budget_mb or 0) * 2**20 or None)


def _cache_prefixes(config, worker=(0, 1)) -> Tuple[Optional[str], Optional[str]]:
    """The training and validation caches: "memory", None, or each split's own file prefix.

    Each worker of a multi-worker job caches what it reads under its own prefix.
    """
    return cache_files.split_prefixes(config.cache, worker=worker)


def _train_tail(config, num_replicas: int, *, stream=None, input_context=None,
                worker=(0, 1)) -> TailOptions:
    # The one drop rule (tail.drops_remainder): the same one steps_per_epoch counts with.
    options = TailOptions(cache=_cache_prefixes(config, worker)[0],
                          augment=list(config.augment) or None,
                          drop_remainder=tail.drops_remainder(num_replicas),
                          batch_by_length=config.text.batch_by_length)
    if stream is not None:
        # The runner's resumable stream of passes (tail.EpochStream).
        options = dataclasses.replace(options, stream=stream)
    if input_context is not None:
        options = dataclasses.replace(options, input_context=input_context)
    target = ServiceTarget.from_config(getattr(config, "service", None))
    if target is not None:
        # Training input only: validation is read once per epoch, without augmentation,
        # and stays in this process.
        if target.job_name and stream is not None and (stream.first_pass
                                                       or stream.skip_batches):
            # A named job is joined, not rebuilt: the dispatcher may still hold the
            # interrupted run's job, and rejoining it would ignore the resume point.
            target = dataclasses.replace(target, job_name=(
                f"{target.job_name}-resume-pass{stream.first_pass}-batch"
                f"{stream.skip_batches}"))
        options = dataclasses.replace(options, service=target)
    return options


def _val_tail(config, worker=(0, 1)) -> TailOptions:
    # Validation: same decoding and cache, never shuffled or augmented, and the last partial
    # batch kept (Keras evaluates uneven batches fine, even under a strategy).
    return TailOptions(cache=_cache_prefixes(config, worker)[1], augment=None,
                       drop_remainder=False, batch_by_length=config.text.batch_by_length)


def source_class(name: str) -> type:
    """The `base.Source` class of `data.source` `name`: its source table entry's builder.

    The table (`tfaccel.config.sources`) names it as ``module:Class`` so the config layer
    stays TensorFlow-free; the module is imported here, when a recipe first uses it.

    Raises:
        DataError: No source has that name.
        TypeError: The entry's builder is not a `base.Source` (a bug in the table).
    """
    entry = sources.entry(name)
    if entry is None:
        raise DataError(f"data.source {name!r} is not one of {', '.join(sources.names())}.")
    module, _, attribute = entry.builder.partition(":")
    cls = getattr(importlib.import_module(module), attribute)
    if not (isinstance(cls, type) and issubclass(cls, base.Source)):
        raise TypeError(f"the source table's builder {entry.builder!r} of {name!r} is not a "
                        "tfaccel.data.sources.base.Source")
    return cls


class _SourceClasses(Mapping):
    """Every recipe source's class by its data.source value, read from the source table."""

    def __getitem__(self, name: str) -> type:
        if sources.entry(name) is None:
            raise KeyError(name)
        return source_class(name)

    def __iter__(self) -> Iterator[str]:
        return iter(sources.names())

    def __len__(self) -> int:
        return len(sources.names())


# Every recipe source, by its data.source value (each module's `base.Source`).
SOURCES: Mapping[str, type] = _SourceClasses()


def source_for(config, *, seed: int) -> base.Source:
    """The `Source` of a recipe's data section.

    Raises:
        DataError: `data.source` names no source.
    """
    return source_class(config.source)(config, seed=seed)


def damaged_file(config) -> Optional[str]:
    """For a run that tf.data stopped with a `DataLossError`: the recipe source's own check
    of its files, naming the damaged one (`base.Source.damaged_file`), or None."""
    # Every file is checked, training and validation alike: the seed does not matter.
    return source_for(config, seed=0).damaged_file()


def worker_file_shares(config, *, workers: int, global_batch_size: int,
                       seed: int) -> Optional[sharding.FileShares]:
    """Whether `workers` can each read a disjoint share of the training files in lock-step.

    For TFRecords (record counts from `verify_records`) and TFDS/builtin (TFDS's own
    per-file counts); None for the other sources, which are split by element. See
    `sharding.plan_file_shares` for the rule.

    Args:
        config: The recipe's `DataConfig`.
        workers: Workers in the job.
        global_batch_size: Examples per optimizer step over all workers.
        seed: The recipe's seed (it picks the held-out files of `validation_fraction`).

    Returns:
        The `sharding.FileShares`, or None for a source without files.
    """
    known = source_for(config, seed=seed).file_counts()
    if known is None:
        return None
    counts, what = known
    return sharding.plan_file_shares(counts, workers=workers,
                                     global_batch_size=global_batch_size, what=what)


def _holds_texts(spec) -> bool:
    features = spec[0] if isinstance(spec, tuple) else spec
    return isinstance(features, tf.TensorSpec) and features.dtype == tf.string \
        and features.shape.rank == 1


def _plain_training(source: base.Source, built: base.Built, *, global_batch_size: int,
                    common: TailOptions) -> tf.data.Dataset:
    """The training split once, plainly, to adapt a vocabulary or a FeatureSpace on: the
    source's own `plain_training` (no second listing or check), or the split built again."""
    adapt_on = source.plain_training(built, batch_size=global_batch_size)
    if adapt_on is None:
        plain = TailOptions(cache=None, augment=None, drop_remainder=False,
                            batch_by_length=False)
        adapt_on = source.build(batch_size=global_batch_size, common=common,
                                train_options=plain, validation_options=plain).train
    return adapt_on


def _texts_to_ids(config, source: base.Source, built: base.Built, *, global_batch_size: int,
                  common: TailOptions, adapted=None):
    """Token ids for a text source: the recipe's tokenizer adapted on the training split.

    Keras' TextVectorization, or a KerasHub WordPiece tokenizer (data.text.tokenizer),
    adapted on one plain pass of the training split (`_plain_training`), then applied to
    whole batches
    of both splits, each padded to its own longest text. `adapted`: that tokenizer from
    an earlier build of the same data, used as it is (no second pass).

    Returns:
        ``(train, val, text_info, layer)``, text_info a `TextInfo`.
    """

    texts = config.text
    train, val = built.train, built.validation
    layer = adapted
    if layer is None:
        adapt_on = _plain_training(source, built, global_batch_size=global_batch_size,
                                   common=common)
        if texts.tokenizer == "wordpiece":
            layer = wordpiece.adapt_wordpiece(adapt_on, max_tokens=texts.max_tokens)
        else:
            layer = text_vectors.adapt_vectorizer(adapt_on, max_tokens=texts.max_tokens,
                                                  ngrams=texts.ngrams,
                                                  char_ngrams=texts.char_ngrams)
    train = text_vectors.vectorize(train, layer, max_length=texts.max_length)
    if val is not None:
        val = text_vectors.vectorize(val, layer, max_length=texts.max_length)
    info = TextInfo(tokenizer=texts.tokenizer, vocabulary_size=int(layer.vocabulary_size()),
                    max_length=texts.max_length, batch_by_length=texts.batch_by_length,
                    ngrams=texts.ngrams, char_ngrams=texts.char_ngrams)
    return train, val, info, layer


def _table_to_vectors(config, source: base.Source, built: base.Built, *,
                      global_batch_size: int, common: TailOptions, adapted=None):
    """One float vector per row for a table source: Keras' FeatureSpace on the training rows.

    Adapted on one plain pass of the training split (`_plain_training`), then applied to
    whole batches of both splits (`table_features`). `adapted`: that FeatureSpace from an
    earlier build of the same data, used as it is (no second pass).

    Returns:
        ``(train, val, table_info, feature_space)``, table_info a `TableInfo`.
    """

    plan = built.train.table_plan  # the source's column plan (tfaccel.reading.table_plan)
    space = adapted
    if space is None:
        adapt_on = _plain_training(source, built, global_batch_size=global_batch_size,
                                   common=common)
        space = table_features.adapt_feature_space(adapt_on, plan)
    train = table_features.encode(built.train, space)
    val = None if built.validation is None else table_features.encode(built.validation, space)
    summary = plan.summary()
    summary["features"] = int(train.element_spec[0].shape[-1])
    info = TableInfo(**summary, line=plan.line(), notes=list(plan.notes))
    return train, val, info, space


def build_datasets(config, *, global_batch_size: int, num_replicas: int, seed: int,
                   deterministic: bool, sequential: bool = False, stream=None,
                   input_context: Optional[tf.distribute.InputContext] = None,
                   raw: bool = False, adapted=None):
    """Builds the training and validation datasets of a recipe's data section.

    Args:
        config: The recipe's `DataConfig`.
        global_batch_size: Examples per optimizer step over all replicas.
        num_replicas: Replicas in sync; with more than one, training batches drop the
            remainder so every replica gets an equal share.
        seed: Seed of shuffling, augmentation and held-out splits.
        deterministic: Fixed tf.data order (slower).
        sequential: Build the truly sequential version of the same pipelines (the baseline
            of `tfaccel.tools.bench`).
        stream: A `tail.EpochStream` for the training data (counted in this
            pipeline's batches).
        input_context: This worker's context in a multi-worker job, as
            `strategy.distribute_datasets_from_function` gives it: the training files are
            divided among the workers (`worker_file_shares` must allow it) and the training
            dataset yields this worker's per-replica batches; each pass of a `stream` makes
            the same number of batches on every worker. Validation is unchanged.
        raw: Keep a text source's strings and a table's columns as they are (no
            vocabulary or FeatureSpace is adapted): what an export that takes raw strings
            is checked on, and what shows which rows each split holds.
        adapted: The text tokenizer or FeatureSpace an earlier build of the same `config`
            and `seed` adapted (its info's ``vectorizer`` or ``feature_space``), used as it
            is: a stream at another resume point encodes as the first did, without another
            pass over the training split to adapt the same one again.

    Returns:
        ``(train_ds, val_ds_or_None, info)``, info a `DatasetInfo`: the classes, the
        input shape, the examples of each split, ``steps_per_epoch`` (optimizer steps per
        pass, by `tail.drops_remainder`, or by the file shares with an
        `input_context`), ``train_examples_per_pass``, the tf.data service, how texts or
        table columns became features and, in a multi-worker job, ``worker_sharding``
        (``"file"`` or ``"element"``).

    Raises:
        DataError: Missing or unusable data (see each source), or files that cannot be
            divided among the workers of an `input_context`.
    """
    shares = None
    if input_context is not None and input_context.num_input_pipelines > 1:
        worker = (input_context.input_pipeline_id, input_context.num_input_pipelines)
        shares = worker_file_shares(config, workers=worker[1],
                                    global_batch_size=global_batch_size, seed=seed)
        if shares is None or not shares.by_file:
            raise DataError(
                f"data.source {config.source!r} cannot be divided by file among "
                f"{worker[1]} workers ({'it has no files' if shares is None else shares.reason})"
                "; leave the split to the strategy (no input context).")
        if stream is not None and stream.batches_per_pass is None:
            local = input_context.num_replicas_in_sync // worker[1]
            stream = dataclasses.replace(stream,
                                         batches_per_pass=shares.steps_per_pass * local)
    else:
        worker = sharding.worker_in_scope()
    common = _common(config, seed=seed, deterministic=deterministic, sequential=sequential)
    source = source_for(config, seed=seed)
    built = source.build(
        batch_size=global_batch_size, common=common,
        train_options=_train_tail(config, num_replicas, stream=stream,
                                  input_context=input_context, worker=worker),
        validation_options=_val_tail(config, worker))
    if built.task in ("classification", "binary"):
        # Regression targets and multi-label columns are no class count.
        base.refuse_one_class(built.num_classes, config=config)
    train, val = built.train, built.validation
    text = table = vectorizer = feature_space = None
    if _holds_texts(train.element_spec) and not raw:
        train, val, text, vectorizer = _texts_to_ids(
            config, source, built, global_batch_size=global_batch_size, common=common,
            adapted=adapted)
    if sources.entry(config.source).table_columns and not raw:
        train, val, table, feature_space = _table_to_vectors(
            config, source, built, global_batch_size=global_batch_size, common=common,
            adapted=adapted)
    train = base.shape_targets(train, task=built.task, num_outputs=built.num_outputs)
    val = None if val is None else base.shape_targets(val, task=built.task,
                                                      num_outputs=built.num_outputs)
    features_spec = train.element_spec[0] if isinstance(train.element_spec, tuple) \
        else train.element_spec
    if isinstance(features_spec, dict):
        input_shape = {k: tuple(v.shape[1:]) for k, v in features_spec.items()}
    else:
        input_shape = tuple(features_spec.shape[1:])
    # Training batches (optimizer steps) per pass and the examples they hold, by the same drop
    # rule as the batch stage; None when the source does not declare its size.
    known = built.train_examples
    drop = tail.drops_remainder(num_replicas)
    steps = None if known is None else tail.batches_per_pass(
        known, global_batch_size, drop_remainder=drop)
    per_pass = None if known is None else steps * global_batch_size if drop else known
    if shares is not None:
        # Every worker makes the same number of steps from its own files.
        steps = shares.steps_per_pass
        per_pass = shares.steps_per_pass * global_batch_size
    target = ServiceTarget.from_config(getattr(config, "service", None))
    info = DatasetInfo(
        task=built.task, num_outputs=built.num_outputs if built.num_outputs is not None
        else built.num_classes,
        num_classes=built.num_classes, class_names=built.class_names,
        train_examples=known, validation_examples=built.validation_examples,
        input_shape=input_shape, steps_per_epoch=steps, train_examples_per_pass=per_pass,
        # Where the training input was made (summary.json's dataset section shows it).
        data_service=None if target is None else {
            "dispatcher": target.dispatcher, "processing_mode": target.processing_mode,
            "job_name": target.job_name},
        text=text, table=table, series=built.series, vectorizer=vectorizer, feature_space=feature_space,
        worker_sharding=None if worker[1] <= 1 else "file" if shares is not None
        else "element")
    return train, val, info
