"""Time series windows: tfaccel.data.from_timeseries vs keras.utils.timeseries_dataset_from_array.

Both build the same windows of the same in-memory array (checked equal batch by batch
before timing), unshuffled and shuffled with the same seed. An epoch is one full pass,
read batch by batch as `fit` would (no model). Contenders alternate and each is rebuilt
before every timed epoch; the best epoch is kept (on shared 2-core machines an epoch gets
both cores or about one, whatever the pipeline, so only the best says what a pipeline can
do). Keras gathers each window in a per-window map and batches them; tfaccel batches
window start positions and gathers the whole batch in one op.

    python benchmarks/bench_data_timeseries.py [--quick] [--steps 100000] [--features 8]
        [--length 48] [--batch 128] [--repeats 5]
"""

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np
from alternate import best_epochs  # benchmarks/alternate.py
from machine import describe_cpu  # benchmarks/machine.py

from tfaccel import data


def check_same(ours, theirs):
    for (x, y), (kx, ky) in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(x, kx)
        np.testing.assert_array_equal(y, ky)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20,000 steps, 2 repeats.")
    parser.add_argument("--steps", type=int, default=100_000, help="Timesteps in the array.")
    parser.add_argument("--features", type=int, default=8, help="Values per timestep.")
    parser.add_argument("--length", type=int, default=48, help="sequence_length.")
    parser.add_argument("--batch", type=int, default=128, help="batch_size.")
    parser.add_argument("--repeats", type=int, default=5, help="Timed epochs per contender.")
    args = parser.parse_args()
    steps, repeats = (20_000, 2) if args.quick else (args.steps, args.repeats)
    rng = np.random.default_rng(0)
    series = rng.normal(size=(steps, args.features)).astype(np.float32)
    targets = series[args.length:, 0]  # the step after each window
    common = dict(sequence_length=args.length, batch_size=args.batch)

    rows = []
    for shuffle in (False, True):
        kwargs = dict(common, shuffle=shuffle, seed=0 if shuffle else None)
        contenders = {
            "keras": lambda kw=kwargs: keras.utils.timeseries_dataset_from_array(
                series[:-args.length], targets, **kw),
            "tfaccel": lambda kw=kwargs: data.from_timeseries(
                series[:-args.length], targets, **kw),
        }
        check_same(contenders["tfaccel"](), contenders["keras"]())
        windows = sum(int(w.shape[0]) for w, _ in contenders["keras"]())
        best, _, _ = best_epochs(contenders, repeats=repeats, examples=windows)
        rate = {name: windows / s for name, s in best.items()}
        rows.append((shuffle, rate["keras"], rate["tfaccel"]))

    print(f"\n{steps:,} timesteps x {args.features} float32, sequence_length {args.length}, "
          f"batch {args.batch}, {windows:,} windows per epoch, best of {repeats} epochs, "
          f"{describe_cpu()}\n")
    print("| shuffle | keras windows/s | tfaccel windows/s | tfaccel / keras |")
    print("| --- | ---: | ---: | ---: |")
    for shuffle, keras_rate, ours_rate in rows:
        print(f"| {shuffle} | {keras_rate:,.0f} | {ours_rate:,.0f} | "
              f"{ours_rate / keras_rate:.2f}x |")
    print(f"\nload average during the run: {os.getloadavg()[0]:.1f} (other processes share "
          "the cores)")


if __name__ == "__main__":
    main()
