"""Benchmark: the default recipe's training pipeline, augmented, through a tf.data service.

The data section of recipes/default.yaml (tfaccel_shapes, memory cache, shuffle) with two
sets of tfaccel augmentations, built by the runner's own `build_datasets` as the same
resumable stream of passes `tfaccel train` reads:
  * pixels: flip, crop, rotate90 (they only move pixels: batches cross the service as uint8
    and are cast to float32 on arrival, as the in-process pipeline casts them);
  * heavy: every augmentation (brightness and contrast compute in float32 on the workers,
    so those batches cross as float32, 4x the bytes).
Contenders, alternated, best of `--repeats`, for each set:
  * in-process: the pipeline runs in this process (no service);
  * service, 1 worker: a dispatcher and 1 `tfaccel data-service worker` process on loopback;
  * service, 2 workers: another dispatcher and 2 worker processes.
Each run builds the pipeline afresh (a new service job: every worker decodes and caches
again), reads `--warmup` batches untimed (the cache fill) and times the next `--batches`.
All workers run on this machine, so on a 2-core CPU this measures the service's overhead
(serialising batches, gRPC on loopback, processes competing for the same cores), not the
speed-up that workers on other machines give.

    python benchmarks/bench_data_service.py [--quick] [--repeats 3] [--data-dir DIR]
"""

import argparse
import dataclasses
import os
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf
from machine import describe_cpu  # benchmarks/machine.py

from tfaccel import datasets
from tfaccel.config.recipe import ServiceConfig, load_recipe
from tfaccel.data import augment as augment_lib
from tfaccel.data import service as service_lib
from tfaccel.data.from_recipe import build_datasets
from tfaccel.data.tail import EpochStream

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_RECIPE = ROOT / "recipes" / "default.yaml"
AUGMENTS = {"pixels": ["flip", "crop", "rotate90"],
            "heavy": ["flip", "flip_vertical", "crop", "rotate90", "brightness", "contrast"]}


def wire_bytes(augment, *, batch):
    """Bytes of one batch as it crosses the service: images (uint8 or float32) and labels."""
    height, width, channels = datasets.IMAGE_SHAPE
    pixel_bytes = 1 if set(augment) <= set(augment_lib.PIXEL_MOVING) else 4
    return batch * (height * width * channels * pixel_bytes + 8)  # int64 labels


def start_workers(address, count):
    """`count` worker processes (the CLI command) registered with `address`."""
    processes = []
    for _ in range(count):
        process = subprocess.Popen(
            [sys.executable, "-m", "tfaccel.cli", "data-service", "worker",
             "--dispatcher", address], stdout=subprocess.PIPE, text=True,
            env=dict(os.environ, PYTHONPATH=str(ROOT)))
        line = process.stdout.readline()  # "tfaccel: worker ... listening ..." once it serves
        if "listening" not in line:
            raise RuntimeError(f"worker did not start: {line!r}")
        processes.append(process)
    return processes


def pipeline(recipe, service_address, *, batch, augment, compression="snappy"):
    data = dataclasses.replace(recipe.data, augment=augment, service=ServiceConfig(
        dispatcher=service_address, compression=compression))
    train, _, _ = build_datasets(data, global_batch_size=batch, num_replicas=1,
                                 seed=recipe.seed, deterministic=False, stream=EpochStream())
    return train


def cpu_seconds(pids):
    """CPU time (user + system) of this process and of the worker processes `pids`."""
    own = os.times()
    total = own.user + own.system
    ticks = os.sysconf("SC_CLK_TCK")
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
    return total


def measure(dataset, *, warmup, batches, pids):
    """(examples/s, cores used) over `batches` batches after `warmup` untimed ones."""
    iterator = iter(dataset)
    for _ in range(warmup):
        next(iterator)
    examples = 0
    cpu, start = cpu_seconds(pids), time.perf_counter()
    for _ in range(batches):
        examples += int(tf.shape(next(iterator)[0])[0])
    wall = time.perf_counter() - start
    return examples / wall, (cpu_seconds(pids) - cpu) / wall


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="Fewer batches and repeats.")
    parser.add_argument("--repeats", type=int, default=3, help="Runs of each contender.")
    parser.add_argument("--warmup", type=int, default=None,
                        help="Untimed batches first (default: two passes).")
    parser.add_argument("--batches", type=int, default=None,
                        help="Timed batches (default: two passes).")
    parser.add_argument("--data-dir", default=None, help="TFDS data directory.")
    args = parser.parse_args()

    datasets.prepare(data_dir=args.data_dir)
    recipe = load_recipe(DEFAULT_RECIPE)
    if args.data_dir:
        recipe = dataclasses.replace(recipe, data=dataclasses.replace(
            recipe.data, data_dir=args.data_dir))
    batch = recipe.training.global_batch_size
    per_pass = 12000 // batch
    warmup = args.warmup if args.warmup is not None else (per_pass // 2 if args.quick
                                                          else 2 * per_pass)
    timed = args.batches if args.batches is not None else (per_pass // 2 if args.quick
                                                           else 2 * per_pass)
    repeats = 1 if args.quick else args.repeats

    servers, processes = [], []
    try:
        addresses = {}
        for count in (1, 2):
            server, address = service_lib.start_dispatcher()
            servers.append(server)
            processes += start_workers(address, count)
            addresses[count] = address
        # name: (dispatcher, compression)
        contenders = {
            "in-process (no service)": (None, "snappy"),
            "service, 1 local worker, snappy": (addresses[1], "snappy"),
            "service, 1 local worker, uncompressed": (addresses[1], "none"),
            "service, 2 local workers, snappy": (addresses[2], "snappy"),
            "service, 2 local workers, uncompressed": (addresses[2], "none"),
        }
        best = {(aug, name): (0.0, 0.0) for aug in AUGMENTS for name in contenders}
        pids = [p.pid for p in processes]
        for run in range(repeats):
            for aug, augment in AUGMENTS.items():
                for name, (address, compression) in contenders.items():  # alternated
                    rate, cores = measure(pipeline(recipe, address, batch=batch,
                                                   augment=augment, compression=compression),
                                          warmup=warmup, batches=timed, pids=pids)
                    best[aug, name] = max(best[aug, name], (rate, cores))
                    print(f"  run {run + 1}: {aug}: {name}: {rate:,.0f} examples/s, "
                          f"{cores:.2f} cores", flush=True)
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()  # never leave a worker behind
                process.wait()
            tail = process.stdout.read().strip()
            if "stopped" not in tail:
                print(f"  worker {process.pid} (exit {process.returncode}): {tail}")
        for server in servers:
            server._stop()

    print(f"\nDefault recipe pipeline, global batch {batch}, {warmup} batches warm-up, "
          f"{timed} timed, best of {repeats}, {describe_cpu()}, load average "
          f"{os.getloadavg()[0]:.1f}:\n")
    print("| augment | pipeline | bytes per batch on the wire | examples/s | vs in-process | "
          "cores used (trainer + workers) |\n|---|---|---:|---:|---:|---:|")
    for aug, augment in AUGMENTS.items():
        base = best[aug, "in-process (no service)"][0]
        for name in contenders:
            rate, cores = best[aug, name]
            on_wire = "-" if "in-process" in name else f"{wire_bytes(augment, batch=batch):,}"
            print(f"| {aug} ({', '.join(augment)}) | {name} | {on_wire} | {rate:,.0f} | "
                  f"{rate / base:.2f}x | {cores:.2f} |")


if __name__ == "__main__":
    main()
