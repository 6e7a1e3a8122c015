"""Benchmark 3: from_python workers vs tf.data.Dataset.from_generator on Python-heavy work.

Each example costs a pure-Python loop (about `--work-ms` milliseconds, GIL held). Contenders,
alternated, best of `--repeats`, each timed from iterator creation to the last batch (so
worker start-up is included):
  * `tf.data.Dataset.from_generator` + batch + prefetch (the GIL serialises the work);
  * `tfaccel.data.from_python(..., workers=N)` (process mode);
  * Grain's `DataLoader(worker_count=N)`, if grain is installed (the existing engine that
    was measured when choosing from_python's engine);
then the job size is varied to find the break-even size where workers start to pay off.

    python benchmarks/bench_data_python.py [--quick] [--workers 2] [--work-ms 1.0]
    python benchmarks/bench_data_python.py --start-methods   # pool start-up per method
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf

from tfaccel import data

BATCH = 32
FEATURES = 64


def _busy(seed, iterations):
    acc = seed
    for _ in range(iterations):
        acc = (acc * 1103515245 + 12345) & 0x7FFFFFFF
    return acc


class HeavySource:
    """Random access; each example runs `iterations` steps of a Python LCG (GIL held)."""

    def __init__(self, n, iterations):
        self.n, self.iterations = n, iterations

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        acc = _busy(i + 1, self.iterations)
        features = np.full((FEATURES,), acc % 1000, np.float32)
        return features, np.int64(i % 10)


def calibrate(work_ms):
    start = time.perf_counter()
    _busy(1, 200_000)
    per_iteration = (time.perf_counter() - start) / 200_000
    return max(1, int(work_ms / 1000 / per_iteration))


def from_generator(source):
    def gen():
        for i in range(len(source)):
            yield source[i]

    ds = tf.data.Dataset.from_generator(gen, output_signature=(
        tf.TensorSpec([FEATURES], tf.float32), tf.TensorSpec([], tf.int64)))
    return ds.batch(BATCH).prefetch(tf.data.AUTOTUNE)


def ours(source, workers):
    return data.from_python(source, batch_size=BATCH, workers=workers)


def grain_loader(source, workers):
    import grain.python as grain

    sampler = grain.IndexSampler(num_records=len(source), shard_options=grain.NoSharding(),
                                 shuffle=False, num_epochs=1, seed=0)
    return grain.DataLoader(data_source=source, sampler=sampler,
                            operations=[grain.Batch(BATCH)], worker_count=workers)


def _cpu():
    t = os.times()  # children count once joined: the pools join their workers at the end
    return t.user + t.system + t.children_user + t.children_system


def run(make):
    """Wall seconds, examples, and cores used (this process and its finished children)."""
    start, cpu = time.perf_counter(), _cpu()
    count = 0
    for _, labels in make():
        count += len(labels)
    wall = time.perf_counter() - start
    return wall, count, (_cpu() - cpu) / wall


def start_methods(workers, repeats=3):
    """Seconds from creating a pool to its first chunk, per start method (TF running).

    What each dataset pays once (its pool serves every epoch). Run it as a script: spawn
    and forkserver re-import the main module in every worker, and this one imports
    TensorFlow at its top, as a training script does (the worker pool itself imports none).
    """
    from tfaccel.reading import worker_pool

    tf.reduce_sum(tf.ones([4]))  # TensorFlow's thread pools are running, as in training
    source = HeavySource(64, 1)
    print(f"\nPool start-up with {workers} workers, TensorFlow loaded (first pool, then "
          f"the best of the next {repeats - 1}):\n")
    print("| start method | first pool (s) | later pools (s) |")
    print("| --- | ---: | ---: |")
    for method in ("fork", "forkserver", "spawn"):
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            pool = worker_pool.Pool(source=source, transform=None, random_access=True,
                                 workers=workers, mode="process", start_method=method)
            try:
                next(worker_pool.run_epoch(pool, random_access=True, order=np.arange(64),
                                        chunk_size=8, deterministic=True))
                times.append(time.perf_counter() - start)
            finally:
                pool.close()
        print(f"| {method} | {times[0]:.3f} | {min(times[1:]):.3f} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="Smaller jobs, 2 repeats.")
    parser.add_argument("--workers", type=int, default=2, help="Worker processes.")
    parser.add_argument("--work-ms", type=float, default=1.0, help="Python work per example.")
    parser.add_argument("--examples", type=int, default=4000, help="Examples in the main job.")
    parser.add_argument("--repeats", type=int, default=3, help="Alternating runs each.")
    parser.add_argument("--start-methods", action="store_true",
                        help="Only measure pool start-up per multiprocessing start method.")
    args = parser.parse_args()
    if args.start_methods:
        start_methods(args.workers)
        return
    n = 1000 if args.quick else args.examples
    repeats = 2 if args.quick else args.repeats
    iterations = calibrate(args.work_ms)
    import importlib.util

    have_grain = importlib.util.find_spec("grain") is not None

    def contenders(size):
        source = HeavySource(size, iterations)
        out = {
            "tf.data from_generator": lambda: from_generator(source),
            f"tfaccel from_python ({args.workers} processes)": lambda: ours(
                source, args.workers),
        }
        if have_grain:
            out[f"grain DataLoader ({args.workers} processes)"] = lambda: grain_loader(
                source, args.workers)
        return out

    best, cores = {}, {}
    for _ in range(repeats):
        for name, make in contenders(n).items():
            seconds, count, used = run(make)
            assert count == n, (name, count)
            if seconds < best.get(name, float("inf")):
                best[name], cores[name] = seconds, used
    base = best["tf.data from_generator"]
    print(f"\n{n} examples x ~{args.work_ms} ms of Python each, batch {BATCH}, best of "
          f"{repeats}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}\n")
    print("| pipeline | examples/s | vs from_generator | cores used |")
    print("| --- | ---: | ---: | ---: |")
    for name, seconds in best.items():
        print(f"| {name} | {n / seconds:,.0f} | {base / seconds:.2f}x | {cores[name]:.2f} |")

    print("\nBreak-even job size (wall time from iterator creation to the last batch):\n")
    print("| examples | from_generator (s) | from_python (s) | ratio |")
    print("| ---: | ---: | ---: | ---: |")
    sizes = [8, 32, 128, 512] if args.quick else [8, 32, 64, 128, 256, 512, 1024]
    break_even = None
    for size in sizes:
        times = {"gen": float("inf"), "ours": float("inf")}
        source = HeavySource(size, iterations)
        for _ in range(repeats):
            times["gen"] = min(times["gen"], run(lambda: from_generator(source))[0])
            times["ours"] = min(times["ours"], run(lambda: ours(source, args.workers))[0])
        ratio = times["gen"] / times["ours"]
        if break_even is None and ratio >= 1.0:
            break_even = size
        print(f"| {size} | {times['gen']:.3f} | {times['ours']:.3f} | {ratio:.2f}x |")
    print(f"\nbreak-even: about {break_even} examples of ~{args.work_ms} ms "
          f"(~{(break_even or 0) * args.work_ms / 1000:.2f} s of Python work)"
          if break_even else "\nno break-even within the sizes tried")


if __name__ == "__main__":
    main()
