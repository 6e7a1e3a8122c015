"""Which arrays of an .npz file hold which split: x/y, or Keras' x_train/y_train/x_test/y_test."""

from __future__ import annotations

from typing import Dict, Iterable, Optional, Tuple

import numpy as np

from tfaccel.errors import DataError
from tfaccel.messages import say

# The split plain x and y hold (a file of one split): what data.train_split names by default.
PLAIN_SPLIT = "train"
# data.validation_split_name's default: a file without it has no validation, said, not an error.
DEFAULT_VALIDATION = "test"

EXPECTED = ("x and y (one split), or Keras' dataset layout x_train, y_train, x_test, y_test "
            "(x_<split> and y_<split> for any split name), as keras.datasets.*.load_data() "
            "gives them and numpy.savez writes them")


def splits_in(names: Iterable[str], *, path: str) -> Dict[str, Tuple[str, str]]:
    """``{split: (features array name, labels array name)}`` of an .npz file's arrays.

    Plain ``x`` and ``y`` are the split `PLAIN_SPLIT`; ``x_<split>`` with ``y_<split>``
    are `split` (Keras' ``x_train``, ``y_train``, ``x_test``, ``y_test``).

    Raises:
        DataError: An array of another name, an x without its y (or the reverse), or
            both layouts in one file: what was found and what is expected are named.
    """
    names = sorted(names)
    pairs, unexpected, unpaired = {}, [], []
    for name in names:
        if name in ("x", "y"):
            split, pair = PLAIN_SPLIT, ("x", "y")
        elif name[:2] in ("x_", "y_") and len(name) > 2:
            split, pair = name[2:], (f"x_{name[2:]}", f"y_{name[2:]}")
        else:
            unexpected.append(name)
            continue
        if not set(pair) <= set(names):
            unpaired.append(name)
        elif split in pairs and pairs[split] != pair:
            raise DataError(f"Arrays file {path!r} holds both x/y and x_{split}/y_{split} "
                            f"(arrays {names}); expected {EXPECTED}.")
        else:
            pairs[split] = pair
    if unexpected or unpaired or not pairs:
        found = "; ".join(
            part for part in (f"unexpected: {unexpected}" if unexpected else "",
                              f"without their x or y: {unpaired}" if unpaired else "")
            if part) or "no arrays"
        raise DataError(f"Arrays file {path!r} holds arrays {names} ({found}); expected "
                        f"{EXPECTED}.")
    return pairs


def pair_of(pairs: Dict[str, Tuple[str, str]], split: str, *, key: str,
            path: str) -> Tuple[str, str]:
    """The array names of `split`, which the recipe's `key` names.

    Raises:
        DataError: The file holds no such split (its splits are named).
    """
    if split in pairs:
        return pairs[split]
    raise DataError(f"{key} {split!r} names arrays x_{split} and y_{split}, which arrays "
                    f"file {path!r} does not hold; it holds the splits "
                    f"{', '.join(sorted(pairs, key=_keras_order))} "
                    f"({', '.join(n for s in sorted(pairs, key=_keras_order) for n in pairs[s])}).")


def _keras_order(split: str):
    return ({"train": 0, "test": 1}.get(split, 2), split)


def as_images(x: np.ndarray) -> np.ndarray:
    """Integer images as the folder and TFDS sources give them: (N, H, W, C) uint8.

    Keras' grey-scale datasets (MNIST, Fashion-MNIST) are (N, H, W): they get a channel
    axis (N, H, W, 1). Integer images whose values all fit 0-255 become uint8 (the same
    values; float32 0-255 after the cache, as every source delivers pixels). Other arrays
    are returned as they are (floats, token ids, other ranks).
    """
    if not np.issubdtype(x.dtype, np.integer) or x.ndim not in (3, 4):
        return x
    if x.ndim == 3:
        x = x[..., np.newaxis]
    if x.dtype != np.uint8 and x.size and 0 <= x.min() and x.max() <= 255:
        x = x.astype(np.uint8)
    return x


def validation_pair(pairs, split: Optional[str], *, path: str):
    """The array names of the validation split, or None (no split asked, or the default
    `test` of a file without one, which is said: not silently ignored)."""
    if not split:
        return None
    if split == DEFAULT_VALIDATION and set(pairs) == {PLAIN_SPLIT}:
        say(f"arrays file {path!r} holds x and y only, no x_test/y_test for "
            f"data.validation_split_name {split!r}: training with no validation. Hold examples "
            "out with data.validation_fraction (e.g. 0.1), or set "
            "data.validation_split_name: null to say there is none.")
        return None
    return pair_of(pairs, split, key="data.validation_split_name", path=path)
