"""Benchmark 1: JPEG-folder decode + augment, tfaccel vs truly sequential tf.data vs Keras.

Writes N JPEGs (4 class folders) into a temp dir, then times full epochs of:
  * the truly sequential build of the very same pipeline (`sequential=True`: no parallel
    calls, no prefetch, tf.data's map_parallelization / inject_prefetch / autotune off);
  * `keras.utils.image_dataset_from_directory` + the same vectorised augmentation in a
    parallel map + prefetch (as the Keras guide writes it), without and with `.cache()`;
  * `tfaccel.data.from_image_folder`, without and with `cache="memory"`.
Contenders alternate, each is rebuilt before every timed epoch, and the best epoch is kept:
timings on these 2-core machines are bimodal per epoch (an epoch gets both cores or about
one, whatever the pipeline), so only the best of several says what a pipeline can do.
`--source 256 --size 160` is the second workload (larger JPEGs resized to 160 px).

`--cpu-rounds R` times instead the CPU each uncached epoch costs (the process's CPU time,
what a loaded machine distorts least), R alternated rounds of Keras' loader, tfaccel, and
tfaccel resizing image by image (its batch resize off: the path before it), and prints the
min and median of each and of the per-round ratios to Keras.

    python benchmarks/bench_data_image.py [--quick] [--images 2000] [--repeats 6]
        [--source 96] [--size 64] [--format jpg|png] [--noise 12] [--bound]
        [--cpu-rounds R]
"""

import argparse
import os
import shutil
import statistics
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf
from alternate import best_epochs, epoch_seconds  # benchmarks/alternate.py
from machine import describe_cpu  # benchmarks/machine.py

from tfaccel import data
from tfaccel.data import augment as augment_lib

BATCH = 64
AUGMENT = ["flip", "crop"]


def write_jpegs(root, n, *, source_size=96, seed=0, image_format="jpg", noise=12.0):
    """Writes n smooth-plus-noise square JPEGs (realistic compression) into 4 class folders
    (PNGs with ``image_format="png"``; `noise`: the noise's standard deviation, 0 for
    smooth images, which a PNG compresses ~5x and decodes faster)."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:source_size, 0:source_size] / source_size
    for i in range(n):
        label = i % 4
        folder = os.path.join(root, f"class_{label}")
        os.makedirs(folder, exist_ok=True)
        base = rng.uniform(0, 255, 3)
        image = (base + 80 * np.sin(6 * (xx * (label + 1)) + yy * 3)[..., None]
                 + rng.normal(0, noise, (source_size, source_size, 3)))
        image = np.clip(image, 0, 255).astype(np.uint8)
        encoded = (tf.io.encode_png(image) if image_format == "png"
                   else tf.io.encode_jpeg(image, quality=90))
        with open(os.path.join(folder, f"{i:05d}.{image_format}"), "wb") as f:
            f.write(encoded.numpy())


def keras_pipeline(root, *, image_size, cache):
    import keras

    ds = keras.utils.image_dataset_from_directory(
        root, image_size=image_size, batch_size=BATCH, shuffle=True, seed=0, verbose=False)
    if cache:
        ds = ds.cache()
    names = augment_lib.check_names(AUGMENT)
    seeds = tf.data.Dataset.random(seed=0, rerandomize_each_iteration=True)

    def aug(element, rnd):
        images, labels = element
        seed = tf.stack([rnd, tf.constant(1, tf.int64)])
        return augment_lib.apply_to_batch(images, names, seed), labels

    ds = tf.data.Dataset.zip((ds, seeds)).map(aug, num_parallel_calls=tf.data.AUTOTUNE)
    return ds.prefetch(tf.data.AUTOTUNE)


def ours(root, *, image_size, cache=None, sequential=False):
    return data.from_image_folder(root, batch_size=BATCH, image_size=image_size,
                                  augment=AUGMENT, seed=0, cache=cache, sequential=sequential)


def ours_without_safety_net(root, *, image_size):
    """A bound, not a product: tfaccel with its corrupt-image net (ignore_errors and the
    prefetch behind it) taken out, so a bad file would stop the epoch."""
    import dataclasses

    from tfaccel.data.tail import stages

    decode = stages.decode
    stages.decode = lambda dataset, plan, source, **kw: decode(
        dataset, plan, dataclasses.replace(source, ignore_decode_errors=False), **kw)
    try:
        return ours(root, image_size=image_size)
    finally:
        stages.decode = decode


def ours_image_by_image(root, *, image_size):
    """tfaccel with its batch resize off: each image resized alone (the path before it)."""
    from tfaccel.data.sources import image_folder

    batch_resize = image_folder._batch_resize
    image_folder._batch_resize = lambda **kwargs: None
    try:
        return ours(root, image_size=image_size)
    finally:
        image_folder._batch_resize = batch_resize


def cpu_rounds(contenders: dict, *, rounds: int, examples: int) -> dict:
    """CPU seconds of each contender's epochs, `rounds` alternated rounds (the order
    rotated each round), each epoch of a freshly built dataset after one untimed warm-up."""
    for make in contenders.values():
        epoch_seconds(make())
    names, cpu = list(contenders), {name: [] for name in contenders}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            dataset = contenders[name]()
            start, count = time.process_time(), 0
            for _, labels in dataset:
                count += int(labels.shape[0])
            cpu[name].append(time.process_time() - start)
            assert count == examples, (name, count)
    return cpu


def print_cpu_rounds(cpu: dict, *, keras_name: str):
    print("| pipeline | CPU ms/epoch min | median | vs Keras min | median of rounds |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, seconds in cpu.items():
        ratios = [k / s for k, s in zip(cpu[keras_name], seconds)]
        print(f"| {name} | {1000 * min(seconds):,.0f} | "
              f"{1000 * statistics.median(seconds):,.0f} | "
              f"{min(cpu[keras_name]) / min(seconds):.2f}x | "
              f"{statistics.median(ratios):.2f}x |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="500 images, 2 repeats.")
    parser.add_argument("--images", type=int, default=2000, help="Number of JPEGs.")
    parser.add_argument("--repeats", type=int, default=6, help="Timed epochs per contender.")
    parser.add_argument("--source", type=int, default=96, help="Side of the square JPEGs.")
    parser.add_argument("--size", type=int, default=64, help="Side they are resized to.")
    parser.add_argument("--format", choices=("jpg", "png"), default="jpg",
                        help="Image files written (png: e.g. --source 32 --size 32).")
    parser.add_argument("--bound", action="store_true",
                        help="Also time tfaccel with its corrupt-image net taken out (a bound).")
    parser.add_argument("--noise", type=float, default=12.0,
                        help="Pixel noise (standard deviation) of the images written.")
    parser.add_argument("--cpu-rounds", type=int, default=0,
                        help="Instead: CPU per uncached epoch, this many alternated rounds.")
    args = parser.parse_args()
    n, repeats = (500, 2) if args.quick else (args.images, args.repeats)
    size = (args.size, args.size)

    root = tempfile.mkdtemp(prefix="tfaccel_bench_jpeg_")
    try:
        write_jpegs(root, n, source_size=args.source, image_format=args.format,
                    noise=args.noise)
        if args.cpu_rounds:
            keras_name = "keras image_dataset_from_directory + parallel augment"
            cpu = cpu_rounds({
                keras_name: lambda: keras_pipeline(root, image_size=size, cache=False),
                "tfaccel from_image_folder": lambda: ours(root, image_size=size),
                "tfaccel, image by image": lambda: ours_image_by_image(root,
                                                                       image_size=size),
            }, rounds=args.cpu_rounds, examples=n)
            print(f"\n{n} {args.format.upper()}s {args.source}x{args.source} -> {size}, "
                  f"batch {BATCH}, augment {AUGMENT}, {args.cpu_rounds} alternated rounds, "
                  f"{describe_cpu()}\n")
            print_cpu_rounds(cpu, keras_name=keras_name)
            print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
            return
        uncached = {  # rebuilt before every timed epoch
            "truly sequential tf.data (same pipeline)": lambda: ours(
                root, image_size=size, sequential=True),
            "keras image_dataset_from_directory + parallel augment": lambda: keras_pipeline(
                root, image_size=size, cache=False),
            "tfaccel from_image_folder": lambda: ours(root, image_size=size),
        }
        if args.bound:
            uncached["tfaccel, safety net off (bound)"] = lambda: ours_without_safety_net(
                root, image_size=size)
        # A cached pipeline is built once and warmed (its first epoch fills the cache).
        cached = {
            "keras image_dataset_from_directory + .cache()": keras_pipeline(
                root, image_size=size, cache=True),
            "tfaccel from_image_folder, cache=memory": ours(root, image_size=size,
                                                            cache="memory"),
        }
        for ds in cached.values():
            epoch_seconds(ds)
        contenders = {**uncached, **{name: (lambda ds=ds: ds) for name, ds in cached.items()}}
        best, _, cores = best_epochs(contenders, repeats=repeats, examples=n)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    rate = {name: n / s for name, s in best.items()}
    seq = rate["truly sequential tf.data (same pipeline)"]
    keras_plain = rate["keras image_dataset_from_directory + parallel augment"]
    keras_cache = rate["keras image_dataset_from_directory + .cache()"]
    print(f"\n{n} {args.format.upper()}s {args.source}x{args.source} -> {size}, batch {BATCH}, "
          f"augment {AUGMENT}, best of {repeats} epochs, {describe_cpu()}\n")
    # CPU ms: the process's CPU time in the best epoch (what a loaded machine distorts
    # least: the work a pipeline does, whatever share of the cores it got).
    print("| pipeline | img/s | vs sequential | vs keras (same cache) | cores used | CPU ms |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, r in rate.items():
        peer = keras_cache if "cache" in name else keras_plain
        vs_keras = f"{r / peer:.2f}x" if name.startswith("tfaccel") else ""
        print(f"| {name} | {r:,.0f} | {r / seq:.2f}x | {vs_keras} | {cores[name]:.2f} | "
              f"{1000 * best[name] * cores[name]:.0f} |")
    print(f"\nload average during the run: {os.getloadavg()[0]:.1f} (other processes share "
          "the cores; a parallel pipeline cannot beat the CPU share it gets)")


if __name__ == "__main__":
    main()
