"""Audio resampling side by side: from_audio_folder without and with sampling_rate, and scipy's.

Writes N mono 16-bit WAV files at 22,050 Hz (0.25 to 1 s each, 4 class folders) into a
temp dir and times full epochs of the same pipeline (`from_audio_folder(batch_size=None,
shuffle=False)`, then `padded_batch(64)` and a prefetch) with the waveforms:
  * read at the files' rate (no resampling: the yardstick);
  * resampled by tfaccel (`sampling_rate=`: `tfaccel.data.resample` in the decode map);
  * resampled by `scipy.signal.resample_poly` in a `tf.py_function` map (AUTOTUNE), the
    way left to a Keras user without tensorflow-io;
to 16,000 Hz (320/441, the longest filter) and to 11,025 Hz (1/2). tfaccel's and scipy's
first batches are checked equal (to float32 rounding) before timing. Contenders alternate,
each rebuilt before every timed epoch, and the best epoch is kept: timings on shared
2-core machines are bimodal per epoch.

    python benchmarks/bench_data_resample.py [--quick] [--files 1000] [--repeats 5]
"""

import argparse
import math
import os
import shutil
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np
import tensorflow as tf
from alternate import best_epochs
from bench_data_audio import write_wavs
from machine import describe_cpu

import tfaccel.data as tfd

BATCH = 64
RATE = 22050


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="300 files, 2 repeats.")
    parser.add_argument("--files", type=int, default=1000, help="Number of .wav files.")
    parser.add_argument("--repeats", type=int, default=5, help="Timed epochs per contender.")
    args = parser.parse_args()
    n, repeats = (300, 2) if args.quick else (args.files, args.repeats)

    import scipy.signal

    def batched(dataset):
        return dataset.padded_batch(BATCH).prefetch(tf.data.AUTOTUNE)

    def tfaccel_loader(**kwargs):
        return lambda: batched(tfd.from_audio_folder(root, batch_size=None, shuffle=False,
                                                     verbose=False, **kwargs))

    def scipy_loader(target):
        g = math.gcd(RATE, target)

        def resample(audio):
            return scipy.signal.resample_poly(audio.numpy(), target // g, RATE // g,
                                              axis=0).astype(np.float32)

        def step(audio, label):
            out = tf.py_function(resample, [audio], tf.float32)
            out.set_shape([None, 1])
            return out, label

        return lambda: batched(tfd.from_audio_folder(
            root, batch_size=None, shuffle=False, verbose=False).map(
                step, num_parallel_calls=tf.data.AUTOTUNE))

    root = tempfile.mkdtemp(prefix="tfaccel_bench_resample_")
    try:
        write_wavs(root, n, rate=RATE)
        contenders = {("22050 (none)", "files' rate"): tfaccel_loader()}
        for target in (16000, 11025):
            contenders[(str(target), "tfaccel sampling_rate")] = tfaccel_loader(
                sampling_rate=target)
            contenders[(str(target), "scipy resample_poly in py_function")] = scipy_loader(
                target)
            (ours, _), = contenders[(str(target), "tfaccel sampling_rate")]().take(1)
            (theirs, _), = contenders[(str(target), "scipy resample_poly in py_function")]()\
                .take(1)
            np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=0, atol=2e-6)
        best, build, _ = best_epochs(contenders, repeats=repeats, examples=n)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    rate = {name: n / s for name, s in best.items()}
    base = rate[("22050 (none)", "files' rate")]
    print(f"\n{n} mono 16-bit WAV files at {RATE} Hz (0.25-1 s), batch {BATCH} padded, "
          f"best of {repeats} epochs\n{describe_cpu()}\n")
    print("| to (Hz) | resampled by | waveforms/s (epoch) | vs no resampling | "
          "vs scipy | build s |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for (target, name), r in rate.items():
        scipy_rate = rate.get((target, "scipy resample_poly in py_function"))
        vs_scipy = f"{r / scipy_rate:.2f}x" if scipy_rate else ""
        print(f"| {target} | {name} | {r:,.0f} | {r / base:.2f}x | {vs_scipy} | "
              f"{build[(target, name)]:.2f} |")
    print(f"\nload average during the run: {os.getloadavg()[0]:.1f} (other processes share "
          "the cores)")


if __name__ == "__main__":
    main()
