"""Benchmark: CSV tables, tfaccel.data.from_csv vs what a Keras user writes, examples/s.

Writes a table (numeric and text columns, a label) as several CSV files, then times whole
epochs of:
  * ``tf.data.experimental.make_csv_dataset`` as TensorFlow's "Load CSV data" guide writes
    it (``num_epochs=1``, its default shuffle and parallel reads), and with
    ``num_parallel_reads=AUTOTUNE``;
  * `tfaccel.data.from_csv` on the same files, without and with ``cache="memory"``;
  * the recipe's path (`data.source: csv`: the column plan, lines + decode_csv, the
    conversion per batch), with its labels looked up in a hash table and parsed as numbers;
  * if pandas is installed: keras.io's structured-data recipe (``pd.read_csv`` once, then
    ``from_tensor_slices((dict(df), labels)).shuffle(len(df)).batch(B)``) beside
    ``from_csv(df)``.
Each dataset is built once (its build time is reported apart: from_csv parses every file
up front to name bad rows), its first epoch is a warm-up, then the contenders alternate
epoch by epoch and the best epoch of each is kept: timings on shared 2-core machines are
bimodal, so only the best of several says what a pipeline can do.

    python benchmarks/bench_data_csv.py [--quick] [--rows 200000] [--files 8] [--repeats 5]
"""

import argparse
import os
import shutil
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf

# One epoch's (seconds, examples, cores used), and the contenders alternated epoch by
# epoch; this script's folder is on sys.path when it runs.
from alternate import best_epochs, epoch_seconds  # benchmarks/alternate.py
from machine import describe_cpu  # benchmarks/machine.py

from tfaccel import data

BATCH = 256
CITIES = ["Paris", "Rome", "Oslo", "Lima", "Kyiv", "Quito", "Accra", "Hanoi"]


def write_table(root, *, rows, files, seed=0):
    """`files` CSV files of `rows` rows in all: 6 float, 2 int, 2 text columns, a label."""
    rng = np.random.default_rng(seed)
    header = ",".join([f"f{i}" for i in range(6)] + ["i0", "i1", "city", "code", "label"])
    paths = []
    for f in range(files):
        n = rows // files
        floats = rng.normal(size=(n, 6)).round(4)
        ints = rng.integers(0, 1000, size=(n, 2))
        cities = rng.integers(0, len(CITIES), n)
        codes = rng.integers(0, 50, n)
        labels = (floats[:, 0] + (cities % 2) > 0.5).astype(int)
        lines = [header]
        for k in range(n):
            lines.append(",".join([*map(str, floats[k]), str(ints[k, 0]), str(ints[k, 1]),
                                   CITIES[cities[k]], f"c{codes[k]}", str(labels[k])]))
        path = os.path.join(root, f"part-{f:03d}.csv")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n")
        paths.append(path)
    return os.path.join(root, "part-*.csv")


def contenders(pattern):
    """name -> builder; every builder returns a finite dataset of (features, label) batches."""
    found = {
        "make_csv_dataset (TF guide)": lambda: tf.data.experimental.make_csv_dataset(
            pattern, batch_size=BATCH, label_name="label", num_epochs=1, shuffle_seed=0),
        "make_csv_dataset, num_parallel_reads=AUTOTUNE":
            lambda: tf.data.experimental.make_csv_dataset(
                pattern, batch_size=BATCH, label_name="label", num_epochs=1, shuffle_seed=0,
                num_parallel_reads=tf.data.AUTOTUNE),
        "tfaccel from_csv": lambda: data.from_csv(pattern, batch_size=BATCH,
                                                  label_name="label", seed=0),
        "tfaccel from_csv, cache=memory": lambda: data.from_csv(
            pattern, batch_size=BATCH, label_name="label", seed=0, cache="memory"),
    }
    found["tfaccel recipe path (column plan)"] = lambda: recipe_path(pattern)
    found["tfaccel recipe path, labels by to_number"] = lambda: recipe_path(pattern,
                                                                            lookup=False)
    try:
        import pandas
    except ImportError:
        return found, None
    frame = pandas.concat([pandas.read_csv(p) for p in sorted(tf.io.gfile.glob(pattern))],
                          ignore_index=True)

    def keras_io():
        df = frame.copy()
        labels = df.pop("label")
        ds = tf.data.Dataset.from_tensor_slices((dict(df), labels))
        return ds.shuffle(buffer_size=len(df), seed=0).batch(BATCH)

    found["keras.io: pandas -> from_tensor_slices"] = keras_io
    found["tfaccel from_csv(DataFrame)"] = lambda: data.from_csv(
        frame, batch_size=BATCH, label_name="label", seed=0)
    return found, len(frame)


def recipe_path(pattern, *, lookup=True):
    """`data.source: csv`'s pipeline: the column plan (one Python pass over every row, in
    the build time), then lines + decode_csv + the plan's conversion per batch. Without
    `lookup` the labels are parsed as numbers instead of looked up in the StaticHashTable
    (what the table costs)."""
    import dataclasses

    from tfaccel.config.recipe import recipe_from_dict
    from tfaccel.data.sources import csv_tables
    from tfaccel.data.tail import TailOptions

    config = recipe_from_dict({"data": {"source": "csv", "path": pattern, "label_key": "label",
                                        "validation_fraction": 0.0}}).data
    files, _, scan, _, plan = csv_tables.CsvSource(config, seed=0).plan()
    if not lookup:
        plan = dataclasses.replace(plan, label_keys=None)
    return csv_tables.from_table_plan(files, scan.row_counts, columns=scan.columns, plan=plan,
                                      batch_size=BATCH, options=TailOptions(seed=0))


# Each tfaccel contender and the Keras-side peer its ratio is taken against.
PEERS = {"tfaccel from_csv": "make_csv_dataset (TF guide)",
         "tfaccel from_csv, cache=memory": "make_csv_dataset (TF guide)",
         "tfaccel from_csv(DataFrame)": "keras.io: pandas -> from_tensor_slices",
         "tfaccel recipe path (column plan)": "make_csv_dataset (TF guide)",
         "tfaccel recipe path, labels by to_number": "make_csv_dataset (TF guide)"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="40,000 rows, 2 repeats.")
    parser.add_argument("--rows", type=int, default=200_000, help="Rows in all files.")
    parser.add_argument("--files", type=int, default=8, help="CSV files.")
    parser.add_argument("--repeats", type=int, default=5, help="Timed epochs per contender.")
    args = parser.parse_args()
    rows, repeats = (40_000, 2) if args.quick else (args.rows, args.repeats)
    rows -= rows % args.files

    root = tempfile.mkdtemp(prefix="tfaccel_bench_csv_")
    try:
        pattern = write_table(root, rows=rows, files=args.files)
        builders, _ = contenders(pattern)
        datasets, build_seconds = {}, {}
        for name, build in builders.items():
            start = time.perf_counter()
            datasets[name] = build()
            build_seconds[name] = time.perf_counter() - start
            epoch_seconds(datasets[name])  # warm-up (fills a cache)
        best, _, cores = best_epochs({name: (lambda ds=ds: ds) for name, ds in datasets.items()},
                                  repeats=repeats, examples=rows)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    rate = {name: rows / s for name, s in best.items()}
    print(f"\n{rows:,} rows (6 float, 2 int, 2 text columns + label) in {args.files} CSV "
          f"files, batch {BATCH}, best of {repeats} epochs after a warm-up; {describe_cpu()}\n")
    print("| pipeline | build s | examples/s | vs Keras-side peer | cores used |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, r in rate.items():
        peer = PEERS.get(name)
        ratio = f"{r / rate[peer]:.2f}x" if peer in rate else ""
        print(f"| {name} | {build_seconds[name]:.2f} | {r:,.0f} | {ratio} | "
              f"{cores[name]:.2f} |")
    print(f"\nload average during the run: {os.getloadavg()[0]:.1f} (other processes share "
          "the cores)")


if __name__ == "__main__":
    main()
