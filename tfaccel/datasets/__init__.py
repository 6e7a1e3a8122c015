"""tfaccel's built-in datasets: names and shapes without TensorFlow, builders on demand.

The only dataset so far is ``tfaccel_shapes``: noisy coloured shapes of four classes,
generated procedurally (no network) and prepared once into the TFDS data directory by a
``tfds.core.GeneratorBasedBuilder``. After ``prepare()`` (or after importing
``tfaccel.datasets.shapes``) it is read like any TFDS dataset::

    from tfaccel import datasets
    datasets.prepare()                    # first call ~5-10 s, then a no-op
    import tensorflow_datasets as tfds
    train = tfds.load(datasets.NAME, split="train", as_supervised=True)

The constants (kept in `catalog`) are importable without TensorFlow so that recipe
validation and the CLI's ``--help`` stay fast.
"""

import os

# The constants live in `catalog` (the builder modules import them from there, so the
# package does not import its own submodules' importers); re-exported here for callers.
from tfaccel.datasets.catalog import (
    BUILTIN,
    CLASS_NAMES,
    IMAGE_SHAPE,
    NAME,
    NUM_CLASSES,
    SPLIT_SIZES,
    TEXT_CLASS_NAMES,
    TEXT_NAME,
    TEXT_SPLIT_SIZES,
)

__all__ = ["NAME", "CLASS_NAMES", "NUM_CLASSES", "IMAGE_SHAPE", "SPLIT_SIZES", "TEXT_NAME",
           "TEXT_CLASS_NAMES", "TEXT_SPLIT_SIZES", "BUILTIN", "is_prepared", "prepare",
           "prepare_builtin"]


def is_prepared(data_dir=None, name: str = NAME) -> bool:
    """Whether a built-in dataset (default ``tfaccel_shapes``) is prepared (TensorFlow-free).

    TFDS writes ``NAME/VERSION/dataset_info.json`` last when it prepares a dataset, so its
    presence in any version folder means a complete one. The launcher asks this before it
    starts workers, without importing TensorFlow.

    Args:
      data_dir: TFDS data directory; ``None`` means TFDS's default (``$TFDS_DATA_DIR`` or
        ``~/tensorflow_datasets``).
      name: The built-in dataset's name.
    """
    root = os.path.join(data_dir or os.environ.get("TFDS_DATA_DIR")
                        or os.path.expanduser("~/tensorflow_datasets"), name)
    versions = os.listdir(root) if os.path.isdir(root) else ()
    return any(os.path.isfile(os.path.join(root, v, "dataset_info.json")) for v in versions)


def prepare(data_dir=None):
    """Prepares ``tfaccel_shapes`` in the TFDS data directory once, then reuses it.

    Importing the builder module registers the name with TFDS, so afterwards
    ``tfds.load("tfaccel_shapes", data_dir=data_dir)`` works in this process.

    Args:
      data_dir: TFDS data directory; ``None`` means TFDS's default (``$TFDS_DATA_DIR`` or
        ``~/tensorflow_datasets``).

    Returns:
      The prepared ``tfds.core.DatasetBuilder``; ``builder.as_dataset(split=...)`` reads it.
    """
    from tfaccel.datasets import shapes  # imports TensorFlow Datasets, hence lazily

    return shapes.prepare(data_dir=data_dir)


def prepare_builtin(name: str, data_dir=None):
    """Prepares the built-in dataset `name` (one of `BUILTIN`) once, like `prepare`."""
    if name == TEXT_NAME:
        from tfaccel.datasets import phrases  # imports TensorFlow Datasets, hence lazily

        return phrases.prepare(data_dir=data_dir)
    return prepare(data_dir=data_dir)
