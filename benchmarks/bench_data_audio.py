"""Audio loaders side by side: tfaccel.data.from_audio_folder vs keras audio_dataset_from_directory.

Writes N mono 16-bit WAV files at 16 kHz (0.25 to 1 s each, 4 class folders, like
speech commands) into a temp dir, checks that both loaders give the same batches, then
times full epochs of:
  * `keras.utils.audio_dataset_from_directory` and `tfaccel.data.from_audio_folder` with
    the same arguments and seed 0 (the same batches, element for element), for
    ``output_sequence_length=16000`` (fixed-length batches) and for None (batches
    zero-padded to their longest waveform);
  * `from_audio_folder` without a seed (no fixed order: waveforms handed out as they are
    decoded).
Each contender is rebuilt before every timed epoch (its build, the listing and for tfaccel
the header check of every file, is timed apart), contenders alternate, and the best epoch
is kept: timings on shared 2-core machines are bimodal per epoch.

    python benchmarks/bench_data_audio.py [--quick] [--files 4000] [--repeats 5]
"""

import argparse
import os
import shutil
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np
import tensorflow as tf
from alternate import best_epochs
from machine import describe_cpu

from tfaccel import data

BATCH = 64
RATE = 16000
CLASSES = ("down", "go", "left", "up")


def write_wavs(root, n, *, seed=0, rate=RATE):
    """n mono WAV files of 0.25-1 s at `rate` into root/<class>/*.wav."""
    rng = np.random.default_rng(seed)
    for i in range(n):
        folder = os.path.join(root, CLASSES[i % len(CLASSES)])
        os.makedirs(folder, exist_ok=True)
        frames = int(rng.integers(rate // 4, rate + 1))
        audio = (0.3 * rng.standard_normal((frames, 1))).clip(-1, 1).astype(np.float32)
        with open(os.path.join(folder, f"{i:06d}.wav"), "wb") as f:
            f.write(tf.audio.encode_wav(audio, rate).numpy())


def same_batches(ours, theirs, batches=3) -> bool:
    """Whether the first `batches` batches are equal, waveform for waveform."""
    for (x, y), (kx, ky) in zip(ours.take(batches), theirs.take(batches)):
        if not (np.array_equal(x.numpy(), kx.numpy()) and np.array_equal(y, ky)):
            return False
    return True


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="600 files, 2 repeats.")
    parser.add_argument("--files", type=int, default=4000, help="Number of .wav files.")
    parser.add_argument("--repeats", type=int, default=5, help="Timed epochs per contender.")
    args = parser.parse_args()
    n, repeats = (600, 2) if args.quick else (args.files, args.repeats)

    import keras

    def keras_loader(**kwargs):
        return lambda: keras.utils.audio_dataset_from_directory(
            root, batch_size=BATCH, verbose=False, **kwargs)

    def tfaccel_loader(**kwargs):
        return lambda: data.from_audio_folder(root, batch_size=BATCH, verbose=False,
                                              **kwargs)

    root = tempfile.mkdtemp(prefix="tfaccel_bench_audio_")
    try:
        write_wavs(root, n)
        contenders = {
            ("16000", "keras"): keras_loader(seed=0, output_sequence_length=RATE),
            ("16000", "tfaccel (seed 0: Keras' batches)"): tfaccel_loader(
                seed=0, output_sequence_length=RATE),
            ("16000", "tfaccel (no seed)"): tfaccel_loader(output_sequence_length=RATE),
            ("None (padded)", "keras"): keras_loader(seed=0),
            ("None (padded)", "tfaccel (seed 0: Keras' batches)"): tfaccel_loader(seed=0),
        }
        for length in ("16000", "None (padded)"):
            assert same_batches(contenders[(length, "tfaccel (seed 0: Keras' batches)")](),
                                contenders[(length, "keras")]()), length
        best, build, _ = best_epochs(contenders, repeats=repeats, examples=n)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    rate = {name: n / s for name, s in best.items()}
    print(f"\n{n} mono 16-bit WAV files at {RATE} Hz (0.25-1 s, {len(CLASSES)} classes), "
          f"batch {BATCH}, best of {repeats} epochs\n{describe_cpu()}\n")
    print("| output_sequence_length | pipeline | waveforms/s (epoch) | vs keras | build s |")
    print("| --- | --- | ---: | ---: | ---: |")
    for (length, name), r in rate.items():
        print(f"| {length} | {name} | {r:,.0f} | {r / rate[(length, 'keras')]:.2f}x | "
              f"{build[(length, name)]:.2f} |")
    print(f"\nload average during the run: {os.getloadavg()[0]:.1f} (other processes share "
          "the cores)")


if __name__ == "__main__":
    main()
