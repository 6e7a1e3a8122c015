"""THE held-out counts of every source: tfaccel's round(fraction * n), and Keras' own where a loader is Keras' drop-in.

The rule per family (docs/data.md, "Validation split"):

- tfaccel's `validation_fraction` (arrays, Python, TFDS, TFRecords, CSV and text-lines
  files): `held_out_count`,
  ``round(fraction * n)``, at least 1 and never all, chosen by `split_indices`' seeded
  permutation. The file-glob sources (TFRecords, CSV, text lines) hold out whole files
  when there are enough (`tfaccel.reading.split_rule.whole_files`: round(fraction *
  files) is at least 1 and leaves a file for training), else the examples of all their
  files (`held_out_rows`: one seeded permutation of every example, in listing order).
- Keras' drop-ins, judged by Keras' own code and tests: the class folders' Keras name
  `validation_split` and their `validation_fraction` (image, text, audio folders, and
  their recipes) hold out `keras_held_out_count`, ``int(fraction * n)`` of Keras' permutation (keras
  ``utils/dataset_utils.py``, ``get_training_or_validation_split``), so the files equal
  Keras' files; `fit`'s `validation_split` of `from_arrays` trains the first
  `fit_split_at`, ``floor(n * (1 - fraction))`` (keras ``array_slicing.py``).
- A time series holds out its LAST `keras_held_out_count` rows, in time order.

13 items at 0.2: tfaccel's rule holds out 3, the class folders 2 (as Keras' loaders).
"""

from __future__ import annotations

import math

from tfaccel.errors import DataError
from tfaccel.reading import split_rule


def held_out_count(n: int, fraction: float, *, what: str = "examples") -> int:
    """How many of `n` items a `fraction` holds out: round(fraction * n), at least 1.

    Raises:
        DataError: The fraction leaves no item on one side (too few items for it).
    """
    n_val = split_rule.held_out(n, fraction)  # a fraction > 0 always holds something out
    if n_val >= n or n_val < 1:
        raise DataError(
            f"data.validation_fraction={fraction} of {n} {what} leaves "
            f"{'no' if n_val < 1 else 'nothing for training, i.e. no'} "
            f"{'validation' if n_val < 1 else 'training'} {what}; use more {what} or "
            "another fraction.")
    return n_val


def split_indices(n: int, fraction: float, seed: int, *, what: str = "examples"):
    """Seeded, disjoint ``(train_indices, validation_indices)`` of ``range(n)``, sorted.

    The held-out items are the last `held_out_count` of a permutation drawn from
    ``numpy.random.default_rng(seed)``: the same split for the same (n, fraction, seed)
    on every machine, a different one for another seed.
    """
    return split_rule.split_order(n, held_out_count(n, fraction, what=what), seed)


def held_out_files(files, fraction: float, seed: int, *, what: str = "files"):
    """``(training files, validation files)``: whole files held out by `split_indices`.

    Held out by whole files, so no example is ever read by both; each list keeps the
    listing's order. No fraction: every file trains.
    """
    files = list(files)
    if not fraction:
        return files, []
    train_idx, val_idx = split_indices(len(files), fraction, seed, what=what)
    return [files[i] for i in train_idx], [files[i] for i in val_idx]


def held_out_rows(counts, fraction: float, seed: int, *, what: str = "examples"):
    """``(training masks, validation masks)``: one boolean array per file of `counts` (its
    examples in file order), from `split_indices` over every example of the files in
    listing order. Each example is True in exactly one of the two masks.

    Raises:
        DataError: The fraction leaves no example on one side (`held_out_count`).
    """
    counts = [int(c) for c in counts]
    return split_rule.row_masks(counts, held_out_count(sum(counts), fraction, what=what), seed)


def keras_held_out_count(n: int, fraction: float, *, what: str = "files",
                         argument: str = "validation_split") -> int:
    """Keras' count for its loaders: ``int(fraction * n)`` (0 for no fraction).

    Keras' ``get_training_or_validation_split`` (keras/src/utils/dataset_utils.py) holds
    out the last ``int(validation_split * len(samples))`` of its permutation; a drop-in
    that counts otherwise would give other files than Keras for the same seed.

    Args:
        n: Items (files, rows) to split.
        fraction: The held-out fraction (0 or None: nothing held out).
        what: The items, for messages.
        argument: The name the caller's user gave the fraction, for messages.

    Raises:
        DataError: A fraction > 0 that leaves one side empty (Keras would build an empty
            dataset there).
    """
    if not fraction:
        return 0
    held_out = int(fraction * n)
    if not 0 < held_out < n:
        raise DataError(
            f"{argument}={fraction} of {n} {what} holds out {held_out}, leaving no "
            f"{'validation' if held_out == 0 else 'training'} {what}; use more {what} or "
            f"another {argument}.")
    return held_out


def fit_split_at(n: int, fraction: float) -> int:
    """Keras ``fit(validation_split=)``: how many of `n` leading examples train,
    ``floor(n * (1 - fraction))`` (keras/src/trainers/data_adapters/array_slicing.py; it
    can differ by one from ``n - int(n * fraction)``: floating-point rounding)."""
    return int(math.floor(n * (1.0 - fraction)))
