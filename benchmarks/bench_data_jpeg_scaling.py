"""Benchmark: photo-sized JPEGs resized small, tfaccel (DCT-scaled decode) vs Keras' loader.

Writes N 640x480 JPEGs (4 class folders), then times full epochs, alternating, best of
several, of:
  * `keras.utils.image_dataset_from_directory(image_size=(224, 224))` (full decode, resize);
  * `tfaccel.data.from_image_folder(..., jpeg_dct_scaling=False)` (full decode, resize);
  * `tfaccel.data.from_image_folder(...)` (default: libjpeg decodes at 1/2 scale, then
    resize), and states the mean absolute pixel difference against the full decode.
Nothing is cached and nothing augmented, so the decode is the work being measured.

Timings on the 2-core machines here are bimodal per epoch (an epoch runs on both cores or on
about one, whatever the pipeline: measured with fixed parallelism too), so every contender is
rebuilt before each of its timed epochs, contenders alternate, and the best epoch is kept.
`--photos noisy` (the default: sensor-like noise, about 85 KB a file at quality 90) makes
entropy decoding, which DCT scaling cannot skip, a large share of the work; `--photos smooth`
(about 30 KB a file) leaves more of it to the inverse DCT and colour conversion it skips.

    python benchmarks/bench_data_jpeg_scaling.py [--images 600] [--repeats 8] [--size 224]
        [--photos noisy|smooth]
"""

import argparse
import os
import shutil
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf
from alternate import best_epochs  # benchmarks/alternate.py
from machine import describe_cpu  # benchmarks/machine.py

from tfaccel import data

BATCH = 32
SOURCE = (480, 640)


NOISE = {"noisy": 10.0, "smooth": 3.0}  # per-pixel standard deviation, 0-255 scale


def write_photos(root, n, *, seed=0, noise=NOISE["noisy"]):
    """Writes n 640x480 photo-like JPEGs (gradients, waves, noise; quality 90); mean bytes."""
    rng = np.random.default_rng(seed)
    height, width = SOURCE
    yy, xx = np.mgrid[0:height, 0:width] / max(SOURCE)
    total = 0
    for i in range(n):
        folder = os.path.join(root, f"class_{i % 4}")
        os.makedirs(folder, exist_ok=True)
        colour = rng.uniform(0, 255, 3)
        wave = 70 * np.sin(rng.uniform(2, 12) * xx + rng.uniform(2, 12) * yy)[..., None]
        image = colour + wave + rng.normal(0, noise, (height, width, 3))
        encoded = tf.io.encode_jpeg(np.clip(image, 0, 255).astype(np.uint8), quality=90).numpy()
        total += len(encoded)
        with open(os.path.join(folder, f"{i:05d}.jpg"), "wb") as f:
            f.write(encoded)
    return total / n


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=600, help="Number of JPEGs.")
    parser.add_argument("--repeats", type=int, default=8, help="Timed epochs per contender.")
    parser.add_argument("--photos", choices=sorted(NOISE), default="noisy",
                        help="Sensor-like noise (about 85 KB a file) or smooth (about 30 KB).")
    parser.add_argument("--size", type=int, default=224, help="Target side (square).")
    args = parser.parse_args()
    import keras

    size = (args.size, args.size)
    root = tempfile.mkdtemp(prefix="tfaccel_bench_photos_")
    try:
        mean_bytes = write_photos(root, args.images, noise=NOISE[args.photos])
        common = dict(batch_size=BATCH, image_size=size, shuffle_buffer=0, seed=0)
        contenders = {  # builders: each timed epoch reads a freshly built dataset
            "keras image_dataset_from_directory": lambda: (
                keras.utils.image_dataset_from_directory(
                    root, image_size=size, batch_size=BATCH, shuffle=False, verbose=False)),
            "tfaccel, full decode (jpeg_dct_scaling=False)": lambda: data.from_image_folder(
                root, jpeg_dct_scaling=False, **common),
            "tfaccel, DCT-scaled decode (default)": lambda: data.from_image_folder(
                root, **common),
        }
        full = np.concatenate([x.numpy() for x, _ in
                               contenders["tfaccel, full decode (jpeg_dct_scaling=False)"]()])
        scaled = np.concatenate([x.numpy() for x, _ in
                                 contenders["tfaccel, DCT-scaled decode (default)"]()])
        mae = float(np.abs(full - scaled).mean())
        best, _, _ = best_epochs(contenders, repeats=args.repeats, examples=args.images)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    rate = {name: args.images / s for name, s in best.items()}
    peer = rate["keras image_dataset_from_directory"]
    print(f"\n{args.images} {args.photos} JPEGs {SOURCE[1]}x{SOURCE[0]} (mean "
          f"{mean_bytes / 1024:.0f} KB) -> {size[1]}x{size[0]}, batch {BATCH}, "
          f"no cache, no augmentation, best of {args.repeats} alternating epochs, "
          f"{describe_cpu()}, load average {os.getloadavg()[0]:.1f}\n")
    print("| pipeline | img/s | vs keras |")
    print("| --- | ---: | ---: |")
    for name, r in rate.items():
        print(f"| {name} | {r:,.0f} | {r / peer:.2f}x |")
    print(f"\nmean absolute pixel difference, DCT-scaled vs full decode (0-255 scale): {mae:.2f}")


if __name__ == "__main__":
    main()
