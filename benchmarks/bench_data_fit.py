"""Benchmark 2: input efficiency, `fit` fed by tfaccel's pipeline vs the same batches in memory.

The default recipe's workload (`--workload recipe`, the default): recipes/default.yaml's
data section built by the runner's own `build_datasets` (tfaccel_shapes 32x32x3, cache in
memory, shuffle 12,000, no augmentation, its global batch 64) and the registered small_cnn.
`--workload augment`: batch 128, shuffle 10,000, flip + crop augmentation (`--augment`).
Contenders:
  * `fit` on tfaccel's pipeline: decoding, caching, shuffling (and augmentation) every epoch;
  * `fit` on the very batches that pipeline produced, materialised in memory beforehand (the
    input then costs nothing: the upper bound);
  * `fit` on a plain parallel pipeline without cache (`tfds.load` + map + batch + prefetch),
    the "as users write it" peer.
With `--workload augment` a fourth contender is the same pipeline with its flips and crops
run as TensorFlow's own kernels, the way they ran before they were compiled with XLA
(`augment._move_pixels`, `augment._recolour`): before vs after, side by side.
Efficiency = examples/s with the pipeline / examples/s in memory. One model, one compiled
train function; contenders alternate, each `fit` runs 2 full epochs and the second is
timed; best of `--repeats`. `--model` picks a registered model: a small one (`mlp`) or
`--precision mixed_bfloat16` makes the step fast enough to expose the input.

`--pipeline-only` times no model: the augment workload's pipelines alone (and without
augmentation, for scale), alternating, one epoch each per round, reporting the CPU-seconds
the whole process spent per 1,000 examples (all threads) and examples/s: the pipeline's own
cost, which any machine's model step then competes with on the same cores.

    python benchmarks/bench_data_fit.py [--workload recipe|augment] [--quick] [--repeats 3]
        [--model small_cnn] [--precision auto] [--augment flip,crop] [--pipeline-only]
"""

import argparse
import contextlib
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf
from machine import describe_cpu  # benchmarks/machine.py

from tfaccel import data, datasets
from tfaccel.data import augment

DEFAULT_RECIPE = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir,
                              "recipes", "default.yaml")
BEFORE = "tfaccel, augmentation as TF kernels (before)"


@contextlib.contextmanager
def kernels_not_xla():
    """Pipelines built inside this block move pixels with TensorFlow's own kernels (the
    same gathers and cast, not compiled): tf.data traces the augmentation when the pipeline
    is built, so the swap only has to last that long."""
    compiled = augment._move_pixels, augment._recolour
    augment._move_pixels, augment._recolour = (tf.function(f.python_function)
                                               for f in compiled)
    try:
        yield
    finally:
        augment._move_pixels, augment._recolour = compiled


AUGMENT = ["flip", "crop"]  # --augment


def augmented(split, data_dir, batch, **options):
    """The augment workload's pipeline (cache in memory, shuffle 10,000, flip + crop)."""
    return data.from_tfds("tfaccel_shapes", split=split, data_dir=data_dir,
                          batch_size=batch, cache="memory", shuffle_buffer=10_000, seed=0,
                          drop_remainder=True, **{"augment": AUGMENT, **options})


def pipeline_only(split, data_dir, repeats):
    """CPU-seconds per 1,000 examples and examples/s of the augment pipelines alone."""
    with kernels_not_xla():
        before = augmented(split, data_dir, 128)
    contenders = {"tfaccel, augmentation compiled (XLA)": augmented(split, data_dir, 128),
                  BEFORE: before,
                  "tfaccel, no augmentation": augmented(split, data_dir, 128, augment=None)}
    for ds in contenders.values():
        for _ in ds:  # fills each one's memory cache, traces, compiles
            pass
    cpu = {name: float("inf") for name in contenders}
    rate = {name: 0.0 for name in contenders}
    for _ in range(repeats):
        for name, ds in contenders.items():
            start, clock, count = time.perf_counter(), time.process_time(), 0
            for _, labels in ds:
                count += int(labels.shape[0])
            wall = time.perf_counter() - start
            cpu[name] = min(cpu[name], (time.process_time() - clock) / count * 1000)
            rate[name] = max(rate[name], count / wall)
    print(f"\ntfaccel_shapes {split} 32x32x3, batch 128, cache in memory, shuffle 10,000, "
          f"augment {'+'.join(AUGMENT)}, pipeline alone (no model), best of {repeats} "
          f"alternating epochs, {describe_cpu()}, load average {os.getloadavg()[0]:.1f}\n")
    print("| pipeline | CPU-s per 1,000 examples | vs before | examples/s |")
    print("| --- | ---: | ---: | ---: |")
    for name in contenders:
        print(f"| {name} | {cpu[name]:.4f} | {cpu[name] / cpu[BEFORE]:.2f}x | "
              f"{rate[name]:,.0f} |")


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
    parser.add_argument("--model", default="small_cnn", help="A registered model name.")
    parser.add_argument("--augment", default="flip,crop",
                        help="The augment workload's names, comma-separated.")
    parser.add_argument("--pipeline-only", action="store_true",
                        help="No model: the augment workload's pipelines' CPU-seconds per "
                             "1,000 examples, before vs after.")
    args = parser.parse_args()
    repeats = 2 if args.quick else args.repeats
    AUGMENT[:] = args.augment.split(",")
    split = "train[:25%]" if args.quick else "train"
    if args.pipeline_only:
        datasets.prepare(data_dir=args.data_dir)
        pipeline_only(split, args.data_dir, repeats)
        return

    import keras

    from tfaccel import models
    from tfaccel.engine.precision import set_precision

    policy = set_precision(args.precision)
    datasets.prepare(data_dir=args.data_dir)

    before = None
    if args.workload == "recipe":
        import dataclasses

        from tfaccel.config.recipe import load_recipe
        from tfaccel.data.from_recipe import build_datasets

        recipe = load_recipe(DEFAULT_RECIPE)
        batch = recipe.training.global_batch_size
        config = dataclasses.replace(recipe.data, train_split=split, validation_split_name=None,
                                     data_dir=args.data_dir)
        ours, _, _ = build_datasets(config, global_batch_size=batch, num_replicas=1,
                                    seed=recipe.seed, deterministic=False)
        label = "tfaccel, default recipe's pipeline (cache, shuffle)"
    else:
        batch = 128
        ours = augmented(split, args.data_dir, batch)
        with kernels_not_xla():
            before = augmented(split, args.data_dir, batch)
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

    model = models.build_model(args.model, input_shape=datasets.IMAGE_SHAPE,
                               num_classes=datasets.NUM_CLASSES)
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])

    contenders = {"in-memory batches (upper bound)": memory,
                  label: ours,
                  "plain parallel tf.data, no cache": plain}
    if before is not None:
        contenders[BEFORE] = before

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
    names = f" ({'+'.join(AUGMENT)})" if args.workload == "augment" else ""
    print(f"\n{args.model} on tfaccel_shapes, {args.workload} workload{names}, batch {batch}, "
          f"{steps} steps/epoch, precision "
          f"{policy}, best of {repeats}, {describe_cpu()}, load average "
          f"{os.getloadavg()[0]:.1f}\n")
    print("| fit fed by | examples/s | input efficiency (vs in memory) |")
    print("| --- | ---: | ---: |")
    for name, r in rate.items():
        print(f"| {name} | {r:,.0f} | {r / upper:.2f} |")


if __name__ == "__main__":
    main()
