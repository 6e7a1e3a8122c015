"""What splitting a table costs on one process: ShardedEmbedding (K shards) vs keras Embedding.

Run:  python benchmarks/bench_sharded_embedding.py [--rows 200000] [--rounds 5]

The same model (ids -> table of ROWS x 64 -> mean -> Dense 10) and the same batches (256
texts of 32 ids, Zipf-distributed as words are) are trained with Adam by one tf.function
step, once with keras.layers.Embedding and once with ShardedEmbedding of 2 and 4 shards
holding the same table. Rounds alternate the variants (A B C A B C ...) and the median of
each variant's step times is printed with its ratio to Embedding's: the cost of the
partition/gather/stitch of `tf.nn.embedding_lookup` over a list of shards. On a cluster the
shards sit on different parameter servers; that is what they buy (each server holds 1/K of
the table), not speed on one process.
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import keras
import numpy as np
import tensorflow as tf
from machine import describe_cpu

from tfaccel.engine.sharded_embedding import ShardedEmbedding

WIDTH, LENGTH, BATCH, STEPS = 64, 32, 256, 30


def _model(rows: int, shards: int):
    keras.utils.set_random_seed(0)
    ids = keras.Input((LENGTH,), dtype="int32")
    layer = (ShardedEmbedding(rows, WIDTH, num_shards=shards, name="table") if shards > 1
             else keras.layers.Embedding(rows, WIDTH, name="table"))
    x = keras.layers.GlobalAveragePooling1D()(layer(ids))
    return keras.Model(ids, keras.layers.Dense(10)(x))


def _stepper(model):
    optimizer = keras.optimizers.Adam(1e-3)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        optimizer.apply(tape.gradient(loss, model.trainable_variables),
                        model.trainable_variables)
        return loss

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    batches = [(np.minimum(rng.zipf(1.3, size=(BATCH, LENGTH)), args.rows - 1).astype("int32"),
                rng.integers(0, 10, size=BATCH)) for _ in range(STEPS)]
    variants = {"Embedding": 1, "ShardedEmbedding K=2": 2, "ShardedEmbedding K=4": 4}
    steps = {name: _stepper(_model(args.rows, k)) for name, k in variants.items()}
    for step in steps.values():  # trace and warm up
        step(*batches[0])
    times = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name, step in steps.items():
            started = time.perf_counter()
            for x, y in batches:
                loss = step(x, y)
            float(loss)
            times[name].append((time.perf_counter() - started) / STEPS * 1e3)
    base = statistics.median(times["Embedding"])
    print(f"{describe_cpu()}; table {args.rows} x {WIDTH} float32 "
          f"({args.rows * WIDTH * 4 / 2**20:.1f} MiB), batch {BATCH} x {LENGTH} ids, Adam; "
          f"median of {args.rounds} alternated rounds of {STEPS} steps")
    print("| layer | ms / step | vs Embedding |")
    print("|---|---:|---:|")
    for name in variants:
        median = statistics.median(times[name])
        print(f"| {name} | {median:.2f} | {median / base:.2f}x |")


if __name__ == "__main__":
    main()
