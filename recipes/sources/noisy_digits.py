"""A Python random-access source for recipes/python_source.yaml: seven-segment digits with noise.

Each example is rendered by per-pixel Python code on purpose: this is the kind of
preprocessing the GIL serialises, which `source: python` spreads over worker processes.
"""

import random

import numpy as np

SIZE = 16
# Segments a..g of a seven-segment display, as (row0, col0, row1, col1) boxes on a 16x16 grid.
_SEGMENTS = {
    "a": (1, 4, 2, 11), "b": (2, 11, 7, 12), "c": (8, 11, 13, 12), "d": (13, 4, 14, 11),
    "e": (8, 3, 13, 4), "f": (2, 3, 7, 4), "g": (7, 4, 8, 11),
}
_DIGITS = ["abcdef", "bc", "abdeg", "abcdg", "bcfg", "acdfg", "acdefg", "abc", "abcdefg",
           "abcdfg"]


class NoisyDigits:
    """`len(source)` examples; `source[i]` is `(image float32 [16, 16, 1], label int64)`."""

    num_classes = 10
    class_names = [str(d) for d in range(10)]

    def __init__(self, size=6000, seed=0):
        self.size, self.seed = size, seed

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        rng = random.Random(self.seed * 1_000_003 + index)
        label = rng.randrange(10)
        shift_r, shift_c = rng.randint(-1, 1), rng.randint(-2, 2)
        lit = set()
        for segment in _DIGITS[label]:
            r0, c0, r1, c1 = _SEGMENTS[segment]
            for r in range(r0, r1):
                for c in range(c0, c1):
                    lit.add((r + shift_r, c + shift_c))
        pixels = [[(0.8 if (r, c) in lit else 0.0) + rng.gauss(0.0, 0.25)
                   for c in range(SIZE)] for r in range(SIZE)]
        image = np.asarray(pixels, dtype=np.float32).reshape(SIZE, SIZE, 1)
        return image, np.int64(label)


source = NoisyDigits()
