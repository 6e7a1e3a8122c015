"""Benchmark: time-to-first-batch and peak memory of big image folders, tfaccel vs Keras.

Makes folders of tiny JPEGs (one 32x32 JPEG's bytes written N times, in 100 class
folders, in a temp dir deleted after) of 20k, 100k and 1M files by default, and measures
side by side in ONE run, each contender in its own fresh process (peak memory is that
process's `resource.getrusage` maxrss, TensorFlow's import included), from the builder
call to the first batch:
  * keras: `keras.utils.image_dataset_from_directory(root, batch_size=32, seed=0)`;
  * tfaccel cold: `tfaccel.data.from_image_folder` (same arguments) with an empty listing
    cache: from 10k files the check of every file runs in a background thread and each
    file is checked as it is decoded; the process waits for that thread after the first
    batch (untimed, its memory counted in the peak) so that the listing is saved;
  * tfaccel warm: the same again, the listing cache written by the cold run reused (no
    file read; each file's size, times and inode compared).
Contenders run in turn, A B C A B C ..., and the median of `--repeats` runs is kept. The
files sit in the page cache (just written): a cold disk adds the same reads to every
contender that opens files (tfaccel cold, and each one's first batch).

    python benchmarks/bench_data_scale.py [--files 20000 100000 1000000] [--repeats 3]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from machine import describe_cpu  # benchmarks/machine.py

CLASSES = 100
CONTENDERS = ("keras", "tfaccel cold", "tfaccel warm")


def tiny_jpeg() -> bytes:
    """One 32x32 noise JPEG (1.5 KB), made with Pillow (no TensorFlow in the parent)."""
    import io

    import numpy as np
    from PIL import Image

    pixels = np.random.default_rng(0).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "JPEG", quality=90)
    return buffer.getvalue()


def make_folder(root: str, files: int) -> None:
    """`files` copies of one JPEG in `CLASSES` class folders (os-level writes: fast)."""
    content = tiny_jpeg()
    for c in range(CLASSES):
        os.makedirs(os.path.join(root, f"class_{c:03d}"), exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    for i in range(files):
        fd = os.open(os.path.join(root, f"class_{i % CLASSES:03d}", f"{i:07d}.jpg"), flags)
        os.write(fd, content)
        os.close(fd)


def child(contender: str, root: str) -> None:
    """One measurement in this (fresh) process: prints JSON seconds and peak MiB."""
    import resource

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf  # noqa: F401 (imported before the clock starts, as both need it)

    if contender == "keras":
        import keras
    else:
        from tfaccel import data
    imported = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    start = time.perf_counter()
    if contender == "keras":
        dataset = keras.utils.image_dataset_from_directory(root, batch_size=32, seed=0,
                                                           verbose=False)
    else:
        dataset = data.from_image_folder(root, batch_size=32, seed=0)
    images, _ = next(iter(dataset))
    seconds = time.perf_counter() - start
    assert images.shape[0] == 32
    if contender != "keras":
        # A cold run checks the files in a background thread during the first epoch and
        # saves the listing for the next run: let it finish (untimed; its memory counted).
        from tfaccel.data import listing_cache

        listing_cache.wait_for_background_checks()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": seconds, "peak_mib": peak, "imported_mib": imported}))


def measure(contender: str, root: str, cache: str) -> dict:
    """Runs `child` in a fresh process; "tfaccel cold" first empties the listing cache."""
    if contender == "tfaccel cold":
        shutil.rmtree(cache, ignore_errors=True)
    env = {**os.environ, "TFACCEL_LISTING_CACHE": cache, "TF_CPP_MIN_LOG_LEVEL": "3"}
    out = subprocess.run([sys.executable, __file__, "--child", contender, root], env=env,
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, nargs="+", default=[20_000, 100_000, 1_000_000])
    parser.add_argument("--repeats", type=int, default=3, help="Runs of each contender.")
    parser.add_argument("--dir", default=None, help="Where the temp folders go.")
    parser.add_argument("--child", nargs=2, metavar=("CONTENDER", "ROOT"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    results = {}
    for files in args.files:
        work = tempfile.mkdtemp(prefix="tfaccel_bench_scale_", dir=args.dir)
        try:
            root, cache = os.path.join(work, "images"), os.path.join(work, "listings")
            written = time.time()
            make_folder(root, files)
            # Files changed within the last 3 s are never trusted from a saved listing
            # (listing_cache.RACY_NS): let the newest age past that.
            time.sleep(max(0.0, 3.5 - (time.time() - written)))
            runs = {c: [] for c in CONTENDERS}
            for _ in range(args.repeats):
                for contender in CONTENDERS:  # warm right after cold: its cache exists
                    runs[contender].append(measure(contender, root, cache))
            results[files] = {c: {k: statistics.median(r[k] for r in rs) for k in rs[0]}
                              for c, rs in runs.items()}
            print(f"{files:,} files: " + ", ".join(
                f"{c} {v['seconds']:.2f} s {v['peak_mib']:.0f} MiB"
                for c, v in results[files].items()), flush=True)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    print(f"\nTime to first batch and peak memory, {CLASSES} classes of tiny JPEGs, batch 32, "
          f"median of {args.repeats} runs each in its own process, contenders alternated; "
          f"CPU: {describe_cpu()}; load average {os.getloadavg()[0]:.1f}\n")
    print("| files | contender | first batch s | vs keras | peak MiB | vs keras | "
          "above import MiB |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    for files, by in results.items():
        keras = by["keras"]
        for c, v in by.items():
            print(f"| {files:,} | {c} | {v['seconds']:.2f} | {v['seconds'] / keras['seconds']:.2f}x"
                  f" | {v['peak_mib']:.0f} | {v['peak_mib'] / keras['peak_mib']:.2f}x | "
                  f"{v['peak_mib'] - v['imported_mib']:.0f} |")
    sizes = list(results)
    for a, b in zip(sizes, sizes[1:]):
        growth = ", ".join(f"{c} {results[b][c]['seconds'] / results[a][c]['seconds']:.1f}x"
                           for c in CONTENDERS)
        print(f"\ngrowth of the time {a:,} -> {b:,} files ({b / a:.0f}x the files): {growth}")


if __name__ == "__main__":
    main()
