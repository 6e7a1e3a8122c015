"""Text loaders side by side: tfaccel.data.from_text_folder vs keras text_dataset_from_directory.

Writes N .txt files (2 class folders, 100-2,500 bytes each, like IMDB reviews) into a temp
dir, then times full epochs of:
  * `keras.utils.text_dataset_from_directory` (seed 0, batch 64);
  * `tfaccel.data.from_text_folder` with the same arguments (the same batches, element for
    element), and without a seed (no fixed order: texts handed out as they are read);
  * `tfaccel.data.from_text_lines` on the same texts written one per line into 8 files
    (another layout of the same data, for scale).
Each contender is rebuilt before every timed epoch (its build, the listing and for tfaccel
the read of every file to check it decodes, is timed apart), contenders alternate, and the
best epoch is kept: timings on shared 2-core machines are bimodal per epoch.

    python benchmarks/bench_data_text.py [--quick] [--files 20000] [--repeats 5]
"""

import argparse
import os
import shutil
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from alternate import best_epochs
from machine import describe_cpu

from tfaccel import data

BATCH = 64
WORDS = [f"w{i}" for i in range(2000)]


def write_texts(root, n, *, seed=0):
    """n texts into root/{neg,pos}/*.txt and the same texts as lines into root_lines/*.tsv."""
    rng = np.random.default_rng(seed)
    lines_dir = root + "_lines"
    os.makedirs(lines_dir, exist_ok=True)
    shards = [open(os.path.join(lines_dir, f"part-{k}.tsv"), "w") for k in range(8)]
    for i in range(n):
        label = ("neg", "pos")[i % 2]
        folder = os.path.join(root, label)
        os.makedirs(folder, exist_ok=True)
        text = " ".join(rng.choice(WORDS, int(rng.integers(20, 400))))
        with open(os.path.join(folder, f"{i:06d}.txt"), "w") as f:
            f.write(text)
        shards[i % 8].write(f"{label}\t{text}\n")
    for f in shards:
        f.close()
    return lines_dir


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2,000 files, 2 repeats.")
    parser.add_argument("--files", type=int, default=20_000, help="Number of .txt files.")
    parser.add_argument("--repeats", type=int, default=5, help="Timed epochs per contender.")
    args = parser.parse_args()
    n, repeats = (2000, 2) if args.quick else (args.files, args.repeats)

    import keras

    root = tempfile.mkdtemp(prefix="tfaccel_bench_text_")
    lines_dir = None
    try:
        lines_dir = write_texts(root, n)
        contenders = {
            "keras text_dataset_from_directory": lambda: keras.utils.text_dataset_from_directory(
                root, batch_size=BATCH, seed=0, verbose=False),
            "tfaccel from_text_folder (seed 0: Keras' batches)": lambda: data.from_text_folder(
                root, batch_size=BATCH, seed=0, verbose=False),
            "tfaccel from_text_folder (no seed)": lambda: data.from_text_folder(
                root, batch_size=BATCH, verbose=False),
            "tfaccel from_text_lines (8 files of lines)": lambda: data.from_text_lines(
                os.path.join(lines_dir, "*.tsv"), labels="first_field", batch_size=BATCH,
                seed=0),
        }
        best, build, _ = best_epochs(contenders, repeats=repeats, examples=n)
    finally:
        shutil.rmtree(root, ignore_errors=True)
        if lines_dir:
            shutil.rmtree(lines_dir, ignore_errors=True)

    rate = {name: n / s for name, s in best.items()}
    keras_rate = rate["keras text_dataset_from_directory"]
    print(f"\n{n} .txt files (2 classes, 100-2,500 bytes), batch {BATCH}, best of {repeats} "
          f"epochs, {describe_cpu()}\n")
    print("| pipeline | texts/s (epoch) | vs keras | build s (best) |")
    print("| --- | ---: | ---: | ---: |")
    for name, r in rate.items():
        print(f"| {name} | {r:,.0f} | {r / keras_rate:.2f}x | {build[name]:.2f} |")
    print(f"\nload average during the run: {os.getloadavg()[0]:.1f} (other processes share "
          "the cores)")


if __name__ == "__main__":
    main()
