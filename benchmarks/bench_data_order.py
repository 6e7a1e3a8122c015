"""Benchmark: what keeping order costs where tfaccel keeps it without `deterministic`.

Two places keep their order even with ``deterministic=False`` (the default), because out of
order they gave wrong results:
  * the batch stage and the maps after it (augmentation, cast): out of order, the last
    partial batch could come first and a batch met another position's augmentation seed.
    Work: 20,000 random 64x64 uint8 images from arrays, batch 128, shuffled,
    flip + crop + brightness.
  * a stream batched by length, every stage before the batches: out of order, a resumed
    pass grouped other texts than the interrupted one. Work: 20,000 texts of 10-300
    words, decoded to ids in a parallel map, batch 64, one pass of an `EpochStream`.
Contenders, alternated in one process, best epoch of `--repeats`: tfaccel as it is
("in order") vs the same pipeline with those stages free ("any order", the former code).

    python benchmarks/bench_data_order.py [--repeats 5]
"""

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf
from alternate import best_epochs  # benchmarks/alternate.py
from machine import describe_cpu  # benchmarks/machine.py

from tfaccel.data import from_arrays, tail
from tfaccel.data.tail import stages, stream

NUM = 20_000


def images_work():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 255, (NUM, 64, 64, 3), dtype=np.uint8)
    y = np.arange(NUM) % 10
    return lambda: from_arrays(x, y, batch_size=128, shuffle_buffer=NUM, seed=1,
                               augment=["flip", "crop", "brightness"])


def texts_work():
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(50)]
    texts = [" ".join(words[i % 50] for i in range(n)) for n in rng.integers(10, 300, NUM)]
    examples = tf.data.Dataset.from_tensor_slices((texts, np.arange(NUM)))
    lookup = tf.keras.layers.StringLookup(vocabulary=words)

    def decode(text, label):
        return lookup(tf.strings.split(text)), label

    return lambda: tail.optimize(
        examples, map_fn=decode, source_shuffle=NUM, batch_size=64, seed=1,
        batch_by_length=True, stream=tail.EpochStream(num_passes=1))


def any_order(make):
    """`make` with the stages tfaccel keeps in order left free (the former code)."""
    def build():
        saved = stages.Plan.batch_det, stream.in_order_before_the_skip
        stages.Plan.batch_det = property(lambda plan: plan.det)
        stream.in_order_before_the_skip = lambda plan: plan
        try:
            return make()
        finally:
            stages.Plan.batch_det, stream.in_order_before_the_skip = saved
    return build


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(describe_cpu())
    print(f"{'work':<36}{'in order /s':>14}{'any order /s':>15}{'ratio':>8}")
    for name, make in (("augmented image batches (arrays)", images_work()),
                       ("texts by length, stream (ids)", texts_work())):
        best, _, _ = best_epochs({"in order": make, "any order": any_order(make)},
                                 repeats=args.repeats, examples=NUM)
        ours, free = NUM / best["in order"], NUM / best["any order"]
        print(f"{name:<36}{ours:>14,.0f}{free:>15,.0f}{ours / free:>7.2f}x")


if __name__ == "__main__":
    main()
