"""``data.source: arrays``: an .npz file's arrays through the in-memory stage (`tfaccel.data.in_memory`)."""

from __future__ import annotations

import os

import numpy as np

from tfaccel.data import finite_values, splits
from tfaccel.data.in_memory import arrays_dataset
from tfaccel.data.sources import array_files, base
from tfaccel.errors import DataError
from tfaccel.reading import labels


class ArraysSource(base.Source):
    """``data.source: arrays``: an ``.npz`` file of x and y, or Keras' dataset layout.

    `array_files` says which arrays hold which split: ``data.train_split`` (train) and
    ``data.validation_split_name`` (test) name ``x_train``/``y_train`` and ``x_test``/``y_test``;
    plain x and y are the train split. ``data.validation_fraction`` holds examples out of
    the training arrays instead (as for TFDS). Integer images get a channel axis and
    travel as uint8 (`array_files.as_images`).
    """

    names = ("arrays",)

    def build(self, *, batch_size, common, train_options, validation_options) -> base.Built:
        config = self.config
        path = config.path
        if not os.path.exists(path):
            raise DataError(f"Arrays file {path!r} does not exist.")
        with np.load(path, allow_pickle=False) as npz:
            pairs = array_files.splits_in(npz.files, path=path)
            x_name, y_name = array_files.pair_of(pairs, config.train_split,
                                                 key="data.train_split", path=path)
            val_pair = None if config.validation_fraction else array_files.validation_pair(
                pairs, config.validation_split_name, path=path)
            x, y = npz[x_name], npz[y_name]
            vx, vy = (None, None) if val_pair is None else (npz[val_pair[0]],
                                                            npz[val_pair[1]])
        # THE label rule (tfaccel.reading.labels): the task and the classes are read from
        # the training labels; the held-out ones are encoded with the same plan, so a class
        # seen only there is named rather than counted.
        plan = labels.plan_labels(y, task=config.task, where=f"Arrays file {path!r}: {y_name}",
                                  num_classes=config.num_classes)
        y = plan.encode(_labels_of(y, plan))
        if vy is not None:
            vy = plan.encode(_labels_of(vy, plan, where=f"Arrays file {path!r}: {val_pair[1]}"))
        # Named here, with the file, before the split renumbers the examples.
        finite_values.check_array(x, name=f"Arrays file {path!r}: {x_name}")
        x = array_files.as_images(x)
        if vx is not None:
            finite_values.check_array(
                vx, name=f"Arrays file {path!r}: {val_pair[0]}")
            vx = array_files.as_images(vx)
        if config.validation_fraction:
            train_idx, val_idx = splits.split_indices(len(x), config.validation_fraction,
                                                      self.seed)
            x, y, vx, vy = x[train_idx], y[train_idx], x[val_idx], y[val_idx]
        val = None if vx is None else arrays_dataset(
            vx, vy, batch_size=batch_size, shuffle_buffer=0,
            options=common.merged(validation_options))
        train = arrays_dataset(x, y, batch_size=batch_size,
                               shuffle_buffer=min(config.shuffle_buffer, len(x)),
                               options=common.merged(train_options))
        return base.Built(train=train, validation=val, num_classes=plan.num_classes,
                          class_names=list(plan.class_names) if plan.class_names else None,
                          task=plan.task, num_outputs=plan.num_outputs, train_examples=len(x),
                          validation_examples=None if vx is None else len(vx))


def _labels_of(y: np.ndarray, plan, *, where: str = "") -> np.ndarray:
    """`y` in the shape the plan reads: one label per example for a single-label task (a
    trailing axis of 1, as Keras' datasets give some, dropped); rows for several columns.

    Raises:
        DataError: Held-out labels of another width than the training ones.
    """
    if y.ndim == 2 and y.shape[1] == 1 and plan.task != "multi_label":
        y = y[:, 0]
    several = plan.task in ("multi_label", "regression") and plan.num_outputs > 1
    width = y.shape[1] if y.ndim == 2 else 1
    if where and (several or y.ndim == 2) and width != plan.num_outputs:
        raise DataError(f"{where} holds {width} label column(s) per example but the training "
                        f"labels hold {plan.num_outputs}.")
    return y
