"""Module-level Python sources for the from_python tests, so that spawn/forkserver can pickle them."""

import numpy as np


class Squares:
    """Random-access source: example i is ([i, i*i] float32, i int64)."""

    def __init__(self, size=37):
        self.size = size

    def __len__(self):
        return self.size

    def __getitem__(self, i):
        return np.array([i, i * i], np.float32), np.int64(i)


def shard(worker_index, num_workers):
    """Generator source: this worker's share of examples 0..28 as ({"v", "w"}, label)."""
    for i in range(worker_index, 29, num_workers):
        yield {"v": np.float32(i), "w": np.full((2,), i, np.int32)}, np.int64(i)


def draws(example):
    """Transform: (x, i) -> (x, i, a draw of NumPy's global RNG, a draw of Python's `random`)."""
    import random

    x, i = example
    return x, i, np.float64(np.random.rand()), np.float64(random.random())


class SquaresWithNan(Squares):
    """`Squares` whose example 23 holds NaN."""

    def __getitem__(self, i):
        x, label = super().__getitem__(i)
        return (x * np.nan if i == 23 else x), label


def tensorflow_in_worker(worker_index, num_workers):
    """Generator source: one example per worker, (whether TensorFlow is imported in the
    worker's process, the worker's index)."""
    import sys

    yield np.int64("tensorflow" in sys.modules), np.int64(worker_index)
