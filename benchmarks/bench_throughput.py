"""Benchmark the ThroughputMonitor's overhead: fit with and without it, side by side.

Run:  python benchmarks/bench_throughput.py [--repeats 5] [--steps 60]

Two models: the built-in small CNN on 32x32 images (batch 64, a step of tens of ms here)
and a tiny MLP (batch 32, a step well under a millisecond: the worst case for a per-step
cost). Each contender is built, compiled and warmed up (traced) once; then timed `fit` calls
of --steps steps on in-memory batches alternate between "plain" and "monitored" and the
best of the repeats is kept (the machine is shared; timings are bimodal). The table gives
the mean step time of each and the overhead of the monitor as a ratio.
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _dataset(kind):
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    if kind == "small_cnn":
        x = rng.integers(0, 255, size=(512, 32, 32, 3)).astype("uint8")
        batch = 64
    else:
        x = rng.normal(size=(512, 16)).astype("float32")
        batch = 32
    y = rng.integers(0, 4, size=(512,))
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(batch).cache().repeat()


def _model(kind, monitored):
    import keras

    from tfaccel import models
    from tfaccel.training.fit_callbacks.throughput import ThroughputMonitor

    keras.utils.set_random_seed(0)
    if kind == "small_cnn":
        model = models.build_model("small_cnn", input_shape=(32, 32, 3), num_classes=4)
    else:
        model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(32, activation="relu"),
                                  keras.layers.Dense(4)])
    model.compile("adam", "sparse_categorical_crossentropy"
                  if kind == "small_cnn" else keras.losses.SparseCategoricalCrossentropy(
                      from_logits=True))
    callbacks = []
    if monitored:
        monitor = ThroughputMonitor()
        monitor.attach(model)
        callbacks = [monitor]
    return model, callbacks


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=60)
    args = parser.parse_args()
    rows = []
    for kind in ("small_cnn", "tiny_mlp"):
        data = _dataset(kind)
        contenders = {name: _model(kind, name == "monitored") for name in ("plain", "monitored")}
        for model, callbacks in contenders.values():  # trace and warm up
            model.fit(data, epochs=1, steps_per_epoch=5, verbose=0, callbacks=callbacks,
                      shuffle=False)
        best = {name: float("inf") for name in contenders}
        for _ in range(args.repeats):
            for name, (model, callbacks) in contenders.items():
                started = time.perf_counter()
                model.fit(data, epochs=1, steps_per_epoch=args.steps, verbose=0,
                          callbacks=callbacks, shuffle=False)
                best[name] = min(best[name], (time.perf_counter() - started) / args.steps)
        rows.append((kind, best["plain"], best["monitored"]))
    print("| model | plain step (ms) | monitored step (ms) | overhead |")
    print("| --- | ---: | ---: | ---: |")
    for kind, plain, monitored in rows:
        print(f"| {kind} | {plain * 1e3:.2f} | {monitored * 1e3:.2f} | "
              f"{monitored / plain - 1:+.1%} |")


if __name__ == "__main__":
    main()
