"""The one interface a recipe's `data.source` implements, and the label rule all sources share.

In the spirit of big_vision's `DataSource`: a source knows its examples (how many, in which
files, which labels) and builds each split with the internal builder under its `from_*`
front door; the pipeline's tail options (cache, augmentation, stream, service) come from
the caller, `data.from_recipe`, which is the only place that reads the recipe's other
sections.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any, ClassVar, Optional, Sequence, Tuple

import tensorflow as tf

from tfaccel.config import sources
from tfaccel.data.tail import TailOptions
from tfaccel.errors import DataError


@dataclasses.dataclass(frozen=True)
class Built:
    """What a source built: the two pipelines and what it knows of its data.

    Attributes:
        train: The training dataset of batches.
        validation: The validation dataset, or None without a validation split.
        num_classes: Classes of the labels (None: not known).
        class_names: Names of the classes, or None.
        train_examples: Examples in the training split (None: not declared).
        validation_examples: Examples in the validation split, or None.
        task: What the labels ask for (`tfaccel.reading.labels.TASKS` but auto).
        num_outputs: Width of the model's output for the task (None: num_classes, the
            classification default).
        series: A time series source's `dataset_info.SeriesInfo` (None elsewhere).
    """

    train: tf.data.Dataset
    validation: Optional[tf.data.Dataset]
    num_classes: Optional[int]
    class_names: Optional[list]
    train_examples: Optional[int]
    validation_examples: Optional[int]
    task: str = "classification"
    num_outputs: Optional[int] = None
    series: Optional[Any] = None


class Source(abc.ABC):
    """A recipe's data source: the recipe's data section turned into builder calls.

    Subclasses name the `data.source` values they serve in `names`, build both splits in
    `build`, and, when the training split is a list of files whose example counts are
    known, say so in `file_counts` (workers of a job may then each read their own files).
    """

    names: ClassVar[Tuple[str, ...]] = ()

    def __init__(self, config, *, seed: int):
        """Keeps the recipe's `DataConfig` and seed (it seeds held-out splits and order)."""
        self.config = config
        self.seed = seed

    @abc.abstractmethod
    def build(self, *, batch_size: int, common: TailOptions, train_options: TailOptions,
              validation_options: TailOptions) -> Built:
        """Builds the training and validation pipelines.

        Args:
            batch_size: The global batch size.
            common: Options of the standard tail both splits take (seed, parallelism...).
            train_options: The training split's own tail options (cache, augment, stream,
                input context, service).
            validation_options: The validation split's own tail options.

        Each is a frozen `TailOptions`; a source hands a split's
        ``common.merged(train_options)`` whole to its internal builder (the one under its
        `from_*` front door), which hands it on to `tail.build`; a variant is
        `dataclasses.replace`.
        """

    def plain_training(self, built: Built, *, batch_size: int) -> Optional[tf.data.Dataset]:
        """The training split in plain batches, to adapt a preprocessing layer on (a
        vocabulary, a FeatureSpace): no cache, stream, shuffle or service, and every
        example (``drop_remainder=False``: a strategy in scope must not drop the last
        partial batch, as it does for training batches).

        Made from what `build` already listed and checked (no second listing or check of
        the files); None (the default): the caller builds the split again, plainly.
        """
        return None

    def file_counts(self) -> Optional[Tuple[Optional[Sequence[int]], str]]:
        """``(examples of each training file in read order, or None, what they are)``.

        None (the default): the source has no files to divide among workers.
        """
        return None

    def damaged_file(self) -> Optional[str]:
        """After tf.data stopped on damaged data (a `DataLossError`, which names an offset,
        not a file): the text of a `DataError` naming the damaged file, found by checking
        the source's files; None (the default) where the source cannot tell."""
        return None


def classes_for_labels(low: int, high: int, *, num_classes, where: str) -> int:
    """THE label rule: labels are 0..num_classes-1 (inferred as largest + 1 if not given).

    Raises:
        DataError: A label is negative or not below the given `data.num_classes`.
    """
    if low < 0:
        raise DataError(f"{where} holds label {low}; labels must be integers from 0 to "
                        "data.num_classes - 1.")
    if num_classes is None:
        return high + 1
    if high >= num_classes:
        raise DataError(f"{where} holds label {high} but data.num_classes is {num_classes}; "
                        f"labels must be below it (set data.num_classes: {high + 1} or more, "
                        "or fix the labels).")
    return num_classes


def refuse_one_class(num_classes: Optional[int], *, config) -> None:
    """THE class-count guard of a recipe: a classifier needs at least 2 classes.

    Every source's count reaches the model builder, whose own check names neither the
    data nor the key; this one names both.

    Args:
        num_classes: The classes a source found (None: not known, nothing to check).
        config: The recipe's `DataConfig` (`path` or `name`, `source`, `label_key`).

    Raises:
        DataError: Fewer than 2 classes, naming data.path and where the labels come from.
    """
    if num_classes is None or num_classes >= 2:
        return
    where = (f"data.path {config.path!r}" if config.path
             else f"data.name {config.name!r}")
    if config.num_classes is not None:
        raise DataError(f"data.num_classes is {config.num_classes} for {where}; a classifier "
                        "needs at least 2 classes: set data.num_classes: 2 or more.")
    # Where the classes come from is the source table's (tfaccel.config.sources).
    entry = sources.entry(config.source)
    classes_from = entry.classes_from if entry is not None else ""
    origin = classes_from or f"its label column data.label_key {config.label_key!r}"
    fix = ("Point data.path at data with at least 2 classes." if classes_from
           else "Check that data.label_key names the label and that data.path holds every "
                "class, or set data.num_classes (2 or more) if a class is absent here.")
    raise DataError(f"{where} (data.source {config.source}) holds {num_classes} class in "
                    f"{origin}: a classifier needs at least 2 classes. {fix}")


def shape_targets(dataset: tf.data.Dataset, *, task: str,
                  num_outputs: Optional[int]) -> tf.data.Dataset:
    """THE target shape of every task: what the model's head gives, so the loss never has
    to guess (a (batch,) target beside a (batch, 1) prediction broadcasts to (batch, batch)
    in a hand-written loss, silently).

    binary: float32 0/1 of shape (batch, 1), what a sigmoid head and binary cross-entropy
    take; regression: float32 (batch, targets); multi_label: float32 (batch, labels);
    classification: the integer ids as they are (sparse categorical cross-entropy).
    """
    spec = dataset.element_spec
    if task == "classification" or not (isinstance(spec, tuple) and len(spec) >= 2
                                        and isinstance(spec[1], tf.TensorSpec)):
        return dataset
    width = num_outputs or 1
    if spec[1].dtype == tf.float32 and spec[1].shape.rank == 2 and spec[1].shape[1] == width:
        return dataset

    def shaped(*element):
        targets = tf.reshape(tf.cast(element[1], tf.float32), (-1, width))
        return (element[0], targets) + tuple(element[2:])

    return dataset.map(shaped, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


def check_labels_in_pipeline(dataset, num_classes: int, *, where: str):
    """Stops the pipeline with a message naming the label when one is outside 0..n-1."""
    spec = dataset.element_spec
    if not (isinstance(spec, tuple) and len(spec) >= 2 and isinstance(spec[1], tf.TensorSpec)
            and spec[1].dtype.is_integer):
        return dataset  # no integer label tensor to check (dict or float targets)

    def check(*element):
        labels = element[1]
        bad = "{} holds a label outside 0..{} (data.num_classes is {}): labels must be " \
              "integers from 0 to data.num_classes - 1.".format(where, num_classes - 1,
                                                                 num_classes)
        with tf.control_dependencies([
                tf.debugging.assert_non_negative(labels, message=bad),
                tf.debugging.assert_less(labels, tf.cast(num_classes, labels.dtype),
                                         message=bad)]):
            labels = tf.identity(labels)
        return (element[0], labels) + tuple(element[2:])

    return dataset.map(check)
