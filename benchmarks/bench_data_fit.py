"""Benchmark 2: input efficiency, `fit` fed by tfaccel's pipeline vs the same batches in memory.

The default recipe's workload (`--workload recipe`, the default): recipes/default.yaml's
data section built by the runner's own `build_datasets` (tfaccel_shapes 32x32x3, cache in
memory, shuffle 12,000, no augmentation, its global batch 64) and the registered small_cnn.
`--workload augment`: batch 128, shuffle 10,000, flip + crop augmentation. Contenders:
  * `fit` on tfaccel's pipeline: decoding, caching, shuffling (and augmentation) every epoch;
  * `fit` on the very batches that pipeline produced, materialised in memory beforehand (the
    input then costs nothing: the upper bound);
  * `fit` on a plain parallel pipeline without cache (`tfds.load` + map + batch + prefetch),
    the "as users write it" peer.
Efficiency = examples/s with the pipeline / examples/s in memory. One model, one compiled
train function; contenders alternate, each `fit` runs 2 full epochs and the second is
timed; best of `--repeats`.

    python benchmarks/bench_data_fit.py [--workload recipe|augment] [--quick] [--repeats 3]
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

from tfaccel import data, datasets  # noqa: E402

DEFAULT_RECIPE = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir,
                              "recipes", "default.yaml")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="A quarter of the training split, 2 repeats.")
    parser.add_argument("--repeats", type=int, default=3, help="Timed epochs per contender.")
    parser.add_argument("--precision", default="auto",
                        help="auto, float32, mixed_bfloat16 (tfaccel.set_precision).")
    parser.add_argument("--data-dir", default=None, help="TFDS data dir for tfaccel_shapes.")
    parser.add_argument("--workload", choices=["recipe", "augment"], default="recipe",
                        help="recipe: the default recipe's pipeline; augment: batch 128 with "
                             "flip + crop.")
    args = parser.parse_args()
    repeats = 2 if args.quick else args.repeats

    import keras

    from tfaccel import models
    from tfaccel.engine.precision import set_precision

    policy = set_precision(args.precision)
    datasets.prepare(data_dir=args.data_dir)

    split = "train[:25%]" if args.quick else "train"
    if args.workload == "recipe":
        import dataclasses

        from tfaccel.data.from_recipe import build_datasets
        from tfaccel.config.recipe import load_recipe

        recipe = load_recipe(DEFAULT_RECIPE)
        batch = recipe.training.global_batch_size
        config = dataclasses.replace(recipe.data, train_split=split, validation_split=None,
                                     data_dir=args.data_dir)
        ours, _, _ = build_datasets(config, global_batch_size=batch, num_replicas=1,
                                    seed=recipe.seed, deterministic=False)
        label = "tfaccel, default recipe's pipeline (cache, shuffle)"
    else:
        batch = 128
        ours = data.from_tfds("tfaccel_shapes", split=split, data_dir=args.data_dir,
                              batch_size=batch, cache="memory", shuffle_buffer=10_000,
                              augment=["flip", "crop"], seed=0, drop_remainder=True)
        label = "tfaccel from_tfds (cache, shuffle, augment)"

    import tensorflow_datasets as tfds

    plain = tfds.load("tfaccel_shapes", split=split, data_dir=args.data_dir,
                      as_supervised=True)
    plain = (plain.shuffle(10_000, seed=0)
             .map(lambda x, y: (tf.image.random_flip_left_right(tf.cast(x, tf.float32)), y),
                  num_parallel_calls=tf.data.AUTOTUNE)
             .batch(batch, drop_remainder=True).prefetch(tf.data.AUTOTUNE))

    # The same batches as our pipeline yields, materialised once: input then costs nothing.
    batches = list(ours)
    steps = len(batches)
    # Concatenated and re-batched alike, so a short last batch is kept as it was.
    memory = tf.data.Dataset.from_tensor_slices((
        tf.concat([b[0] for b in batches], 0), tf.concat([b[1] for b in batches], 0))
    ).batch(batch).cache()
    memory = memory.prefetch(tf.data.AUTOTUNE)
    del batches

    model = models.build_model("small_cnn", input_shape=datasets.IMAGE_SHAPE,
                               num_classes=datasets.NUM_CLASSES)
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])

    contenders = {"in-memory batches (upper bound)": memory,
                  label: ours,
                  "plain parallel tf.data, no cache": plain}

    class Timer(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            self.seconds = []

        def on_epoch_begin(self, epoch, logs=None):
            self.start = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            self.seconds.append(time.perf_counter() - self.start)

    timer = Timer()
    best = {name: float("inf") for name in contenders}
    for _ in range(repeats):
        for name, ds in contenders.items():
            # Epoch 1 warms up (tracing, thread pools; our in-memory cache fills once and
            # is reused by later iterators); epoch 2 is timed.
            model.fit(ds, epochs=2, verbose=0, callbacks=[timer])
            best[name] = min(best[name], timer.seconds[1])

    rate = {name: steps * batch / s for name, s in best.items()}
    upper = rate["in-memory batches (upper bound)"]
    print(f"\nsmall_cnn on tfaccel_shapes, {args.workload} workload, batch {batch}, "
          f"{steps} steps/epoch, precision "
          f"{policy}, best of {repeats}, {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f}\n")
    print("| fit fed by | examples/s | input efficiency (vs in memory) |")
    print("| --- | ---: | ---: |")
    for name, r in rate.items():
        print(f"| {name} | {r:,.0f} | {r / upper:.2f} |")


if __name__ == "__main__":
    main()
