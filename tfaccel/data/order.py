"""THE source-order rule: a sorted or grouped source is permuted once, seeded, before any cache.

Sources list their examples in a natural order that is often sorted by class (an image
folder's sub-folders, TFRecord files named by class, a Python source or arrays indexed in
class order). Cached in that order and then shuffled with a buffer smaller than the data,
batches come in runs of one class and a model may not learn at all. Keras' loaders avoid it
by shuffling the listing once, seeded ("Shuffle globally to erase macro-structure",
`keras.utils.image_dataset_from_directory`); every tfaccel builder does the same with this
one rule, so the library and the recipe path get the same guard. The per-epoch shuffle after
the cache is unchanged, and a run resumed with the same seed rebuilds the same order.
"""

from __future__ import annotations

import hashlib
from typing import Optional, Sequence

import numpy as np

from tfaccel.data import sharding


def permutation(n: int, seed: int) -> np.ndarray:
    """The seeded permutation of ``range(n)``: Keras' own rule.

    ``np.random.RandomState(seed).permutation(n)`` draws exactly what Keras'
    ``RandomState(seed).shuffle(file_paths)`` does to a list of `n` items, so a listing
    permuted here is in the order Keras' loader gives it for the same seed.
    """
    return np.random.RandomState(seed).permutation(n)


def resolve_seed(seed: Optional[int], *, input_context=None) -> int:
    """The seed of a source's one permutation: `seed`, or one drawn when it is None.

    With None the draw is Keras' (``np.random.randint(1e6)``): a different order each run.
    When several input pipelines split the permuted examples by position afterwards (a
    multi-worker strategy in scope, or an `input_context` of more than one pipeline), every
    pipeline must permute alike, so None means 0 there.
    """
    if seed is not None:
        return int(seed)
    if (input_context is not None and input_context.num_input_pipelines > 1) \
            or sharding.multi_worker_in_scope():
        return 0
    return int(np.random.randint(1e6))


def describe(items: Sequence, *, seed: Optional[int], shuffled: bool) -> str:
    """How a source's `items` (paths, indices) were ordered, for a file cache's fingerprint.

    A seeded order is recorded exactly (a digest of the sequence), so a cache is reused only
    in the order a fresh run with that seed would build; an unseeded permutation is any
    permutation (a new draw each run must not rebuild the cache every time).
    """
    if not shuffled:
        return "file order"
    if seed is None:
        return "permuted without a seed (any order)"
    digest = hashlib.sha256("\n".join(map(str, items)).encode()).hexdigest()[:16]
    return f"permuted with seed {seed} ({digest})"
