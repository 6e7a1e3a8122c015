"""The data guards' cost: each guarded up-front read vs the bare read of the same file.

- CSV: `from_csv`'s verify pass (TensorFlow counts the rows of each file and checks its
  float columns are finite) vs the same count without the finite check (the pass as it
  was before the guard), on the same CsvDataset readers.
- Time series CSV: `read_timeseries_csv` (one read through text_files, numpy's parser, the
  finite check) vs `numpy.loadtxt` of the file alone.
- Text lines: `from_text_lines`' verify scan of a gzip file (text_files: decompress, decode,
  BOM, truncation, labels) vs `gzip.decompress` + `bytes.decode` + split into lines.

Contenders alternate (A B A B ...) in one process and the best of each is kept; the ratio
is ours / bare (1.00: the guard costs nothing measurable).

    python benchmarks/bench_data_guards.py [--rows 200000] [--repeats 5]
"""

import argparse
import gzip
import os
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf
from machine import describe_cpu  # benchmarks/machine.py

from tfaccel.data.sources import csv_tables, text_lines, timeseries


def best(fns: dict, repeats: int) -> dict:
    """Best seconds of each function, run in turn `repeats` times."""
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: min(t) for name, t in times.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    folder = tempfile.mkdtemp()
    rng = np.random.default_rng(0)
    values = rng.normal(size=(args.rows, 4)).astype("float32")
    labels = rng.integers(0, 3, args.rows)
    table = os.path.join(folder, "t.csv")
    with open(table, "w") as f:
        f.write("a,b,c,d,label\n")
        f.writelines(f"{a:.5f},{b:.5f},{c:.5f},{d:.5f},{y}\n"
                     for (a, b, c, d), y in zip(values, labels))
    lines = os.path.join(folder, "l.tsv.gz")
    with open(lines, "wb") as f:
        f.write(gzip.compress("".join(f"{('neg', 'pos')[y % 2]}\tsome words {i} here\n"
                                      for i, y in enumerate(labels)).encode()))
    parsed = csv_tables._read_table(
        [table], csv_tables._Format(header=True, field_delim=",", use_quote_delim=True,
                                    na_value="", encoding="utf-8", compression_type=None),
        column_names=None, column_types=None, column_defaults=None, select_columns=None,
        label_name="label", num_rows_for_inference=100)

    def bare_count():
        # The verify pass without the finite check: rows counted, batch by batch.
        tf.data.Dataset.from_tensor_slices(parsed.files).map(
            lambda path: parsed.reader(path).batch(8192).reduce(
                tf.constant(0, tf.int64),
                lambda n, b: n + tf.shape(b[0], out_type=tf.int64)[0])).get_single_element()

    def bare_scan():
        with open(lines, "rb") as f:
            gzip.decompress(f.read()).decode("utf-8").split("\n")

    rows = [
        ("CSV verify pass", parsed.count_rows, bare_count),
        ("time series CSV read",
         lambda: timeseries.read_timeseries_csv(table, columns=None, targets="label"),
         lambda: np.loadtxt(table, delimiter=",", skiprows=1, dtype="float32")),
        ("text lines scan (gzip)",
         lambda: text_lines._scan(lines, encoding=None, skip_header_lines=0, separator="\t",
                                  compression="GZIP"), bare_scan),
    ]
    print(f"CPU: {describe_cpu()}; {args.rows:,} rows, best of {args.repeats}, alternated")
    print("| read | guarded s | bare s | guarded / bare |\n|---|---|---|---|")
    for name, ours, bare in rows:
        ours(), bare()  # warm: graphs traced, files in the page cache
        t = best({"ours": ours, "bare": bare}, args.repeats)
        print(f"| {name} | {t['ours']:.3f} | {t['bare']:.3f} | {t['ours'] / t['bare']:.2f} |")


if __name__ == "__main__":
    main()
