"""Benchmark: Inception-style random resized crops of photos, tfaccel vs Keras' loader + layers.

Writes N 640x480 JPEGs (4 class folders, the photos of bench_data_jpeg_scaling.py), then
times full training epochs (nothing cached: the decode is the work), contenders alternated,
each rebuilt before each of its epochs, best of `--repeats`:
  * keras: `keras.utils.image_dataset_from_directory(image_size=(480, 640),
    batch_size=None)` (every photo decoded whole), then per image the window drawn by
    `tf.image.stateless_sample_distorted_bounding_box` (8%-100% of the area, aspect 3/4 to
    4/3: the Inception crop), cropped, and `keras.layers.Resizing(224, 224)`; batched;
  * tfaccel (default): `from_image_folder(random_resized_crop=True)`: the same sampler on
    the header's size, only the window decoded, at full scale;
  * tfaccel, `random_resized_crop={"dct_scaling": True}`: the window decoded at 1/2, 1/4 or
    1/8 scale when it is that many times the output.
The crops have the same distribution in all three: the same sampler with the same
arguments; tests/test_crops.py checks the windows one by one against the sampler run
on the decoded image. Ratios hold for this run's machine only (named below).

    python benchmarks/bench_data_crop.py [--images 600] [--repeats 6] [--size 224]
        [--photos noisy|smooth] [--single-thread]
"""

import argparse
import os
import shutil
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf
from alternate import best_epochs  # benchmarks/alternate.py
from bench_data_jpeg_scaling import NOISE, SOURCE, write_photos
from machine import describe_cpu  # benchmarks/machine.py

from tfaccel import data
from tfaccel.data import crops

BATCH = 32


def keras_pipeline(root, size, seed):
    """What a Keras user writes: Keras' loader, the Inception window, Keras' Resizing."""
    import keras

    resize = keras.layers.Resizing(*size)
    whole = tf.constant([[[0.0, 0.0, 1.0, 1.0]]])
    photos = keras.utils.image_dataset_from_directory(
        root, image_size=SOURCE, batch_size=None, shuffle=True, seed=seed, verbose=False)

    def crop(image, label, rnd):
        begin, extent, _ = tf.image.stateless_sample_distorted_bounding_box(
            tf.shape(image), bounding_boxes=whole, seed=tf.stack([rnd, 0]),
            min_object_covered=0.1, aspect_ratio_range=crops.RATIO, area_range=crops.SCALE,
            max_attempts=100, use_image_if_no_bounding_boxes=True)
        return resize(tf.slice(image, begin, extent)), label

    seeds = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True)
    return (tf.data.Dataset.zip(photos, seeds)
            .map(lambda pair, rnd: crop(*pair, rnd), num_parallel_calls=tf.data.AUTOTUNE)
            .batch(BATCH).prefetch(tf.data.AUTOTUNE))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=600, help="Number of JPEGs.")
    parser.add_argument("--repeats", type=int, default=6, help="Timed epochs per contender.")
    parser.add_argument("--size", type=int, default=224, help="Output side (square).")
    parser.add_argument("--photos", choices=sorted(NOISE), default="noisy",
                        help="Sensor-like noise (about 85 KB a file: entropy decoding, which no "
                        "crop skips, dominates) or smooth (about 33 KB).")
    parser.add_argument("--single-thread", action="store_true",
                        help="Run every contender on one thread (TensorFlow's pools and "
                        "tf.data's): the ratio is then the per-image work's, the bound of any "
                        "parallel pipeline on the same cores.")
    args = parser.parse_args()
    size = (args.size, args.size)
    one_thread = None
    if args.single_thread:
        # Before TensorFlow runs its first op: the pools are fixed from then on.
        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
        one_thread = tf.data.Options()
        one_thread.threading.private_threadpool_size = 1
        one_thread.threading.max_intra_op_parallelism = 1
    root = tempfile.mkdtemp(prefix="tfaccel_bench_crops_")
    try:
        mean_bytes = write_photos(root, args.images, noise=NOISE[args.photos])
        common = dict(batch_size=BATCH, image_size=size, seed=0, random_resized_crop=True)
        contenders = {
            "keras loader + Inception window + keras Resizing": lambda: keras_pipeline(
                root, size, seed=0),
            "tfaccel, window decode (default)": lambda: data.from_image_folder(
                root, **common),
            "tfaccel, window decode at DCT scale": lambda: data.from_image_folder(
                root, **{**common, "random_resized_crop": {"dct_scaling": True}}),
        }
        if one_thread is not None:
            contenders = {name: (lambda build=build: build().with_options(one_thread))
                          for name, build in contenders.items()}
        # The output shape is checked once; the timed epochs count every example.
        for name, build in contenders.items():
            shape = tuple(next(iter(build()))[0].shape[1:])
            assert shape == (*size, 3), (name, shape)
        best, _, _ = best_epochs(contenders, repeats=args.repeats, examples=args.images)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    rate = {name: args.images / s for name, s in best.items()}
    peer = rate["keras loader + Inception window + keras Resizing"]
    print(f"\n{args.images} {args.photos} JPEGs {SOURCE[1]}x{SOURCE[0]} (mean "
          f"{mean_bytes / 1024:.0f} KB) -> random resized crops {size[1]}x{size[0]}, batch "
          f"{BATCH}, no cache, best of {args.repeats} alternating epochs"
          f"{', one thread' if one_thread is not None else ''}, {describe_cpu()}, "
          f"load average {os.getloadavg()[0]:.1f}\n")
    print("| pipeline | img/s | vs keras |")
    print("| --- | ---: | ---: |")
    for name, r in rate.items():
        print(f"| {name} | {r:,.0f} | {r / peer:.2f}x |")


if __name__ == "__main__":
    main()
