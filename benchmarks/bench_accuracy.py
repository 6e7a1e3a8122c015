"""Benchmark: validation accuracy at the same epochs, tfaccel vs the Keras script, one factor at a time.

The job of `bench_end_to_end.py` (a folder of 6,000 PNGs of tfaccel_shapes, 20% held out,
small_cnn, Adam 2e-3, batch 64, 4 epochs). Each variant changes ONE thing against its
neighbour, so the table says which factor moves validation accuracy at epoch 4:

  * keras: the Keras tutorial script (benchmarks/keras_script.py): Keras' loader
    (validation_split=0.2, subset="both", seed), `.cache().shuffle(1000)`, float32.
    Its loader shuffles paths with a 512-path buffer BEFORE batching, and the script caches
    the batches: the batches' composition is fixed after epoch 1, only their order changes.
  * keras, bf16: the same under mixed_bfloat16 (the precision tfaccel's `auto` picks on a
    CPU with bf16 instructions).
  * keras, example shuffle: Keras' loader unbatched, `.cache().shuffle(4800).batch(64)`:
    every epoch new batches (what tfaccel does).
  * keras fit, tfaccel data: `model.fit` of the Keras script on `from_image_folder`'s
    datasets, with the arguments tfaccel's recipe gives it (validation_fraction).
  * tfaccel float32, spe 1: `tfaccel.train` with precision float32, steps_per_execution 1.
  * tfaccel float32: steps_per_execution auto.
  * tfaccel (defaults): precision auto, steps_per_execution auto.

Seeds 0..N-1 alternate the variants; each variant's mean, standard deviation and each
seed's value are printed. Accuracy does not depend on the machine's load.

    python benchmarks/bench_accuracy.py [--seeds 5] [--variants keras,tfaccel] [--epochs 4]
        [--folder DIR]
"""

import argparse
import os
import statistics
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import tensorflow as tf
from machine import describe_cpu  # benchmarks/machine.py

import tfaccel
from tfaccel import models
from tfaccel.data import export_image_folder
from tfaccel.engine.precision import resolve_precision

BATCH = 64


def _fit(train, val, *, epochs, seed, precision="float32"):
    keras.mixed_precision.set_global_policy(precision)
    try:
        model = models.build_model("small_cnn", input_shape=(32, 32, 3), num_classes=4)
        model.compile(optimizer=keras.optimizers.Adam(2e-3),
                      loss="sparse_categorical_crossentropy", metrics=["accuracy"])
        history = model.fit(train, validation_data=val, epochs=epochs, verbose=0)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    return history.history["val_accuracy"]


def _keras_loader(folder, seed, **kwargs):
    return keras.utils.image_dataset_from_directory(
        folder, validation_split=0.2, subset="both", seed=seed, image_size=(32, 32),
        verbose=False, **kwargs)


def keras_script(folder, seed, epochs, precision="float32", **_):
    keras.utils.set_random_seed(seed)
    train, val = _keras_loader(folder, seed, batch_size=BATCH)
    train = train.cache().shuffle(1000).prefetch(tf.data.AUTOTUNE)
    val = val.cache().prefetch(tf.data.AUTOTUNE)
    return _fit(train, val, epochs=epochs, seed=seed, precision=precision)


def keras_example_shuffle(folder, seed, epochs, **_):
    keras.utils.set_random_seed(seed)
    train, val = _keras_loader(folder, seed, batch_size=None)
    train = train.cache().shuffle(4800).batch(BATCH).prefetch(tf.data.AUTOTUNE)
    val = val.batch(BATCH).cache().prefetch(tf.data.AUTOTUNE)
    return _fit(train, val, epochs=epochs, seed=seed)


def keras_fit_tfaccel_data(folder, seed, epochs, fixed_batches=False, **_):
    keras.utils.set_random_seed(seed)
    common = dict(batch_size=BATCH, image_size=(32, 32), validation_fraction=0.2, seed=seed,
                  cache="memory")
    train = tfaccel.data.from_image_folder(folder, subset="training", **common)
    val = tfaccel.data.from_image_folder(folder, subset="validation", shuffle_buffer=0,
                                         **common)
    if fixed_batches:  # the Keras script's order: epoch 1's batches, reordered each epoch
        train = train.cache().shuffle(1000)
    return _fit(train, val, epochs=epochs, seed=seed)


def tfaccel_train(folder, seed, epochs, *, root, **runtime):
    steps = runtime.pop("steps_per_execution", "auto")
    data = {"source": "image_folder", "path": folder, "image_size": [32, 32],
            "validation_fraction": 0.2, "validation_split_name": None, "cache": "memory"}
    data.update(runtime.pop("data", {}))
    run_dir = tempfile.mkdtemp(dir=root)
    result = tfaccel.train({
        "seed": seed, "data": data, "model": {"name": "small_cnn"},
        "optimizer": {"name": "adam", "learning_rate": 2e-3},
        "training": {"epochs": epochs, "global_batch_size": BATCH,
                     "steps_per_execution": steps},
        "runtime": {"verbose": 0, "tensorboard": False, **runtime},
    }, run_dir=run_dir)
    keras.mixed_precision.set_global_policy("float32")
    return [epoch["val_accuracy"] for epoch in result.epochs]


VARIANTS = {
    "keras": keras_script,
    "keras, bf16": lambda f, s, e, **_: keras_script(f, s, e, precision="mixed_bfloat16"),
    "keras, example shuffle": keras_example_shuffle,
    "keras fit, tfaccel data": keras_fit_tfaccel_data,
    "keras fit, tfaccel data, fixed batches": lambda f, s, e, **_: keras_fit_tfaccel_data(
        f, s, e, fixed_batches=True),
    "tfaccel float32, spe 1": lambda f, s, e, **k: tfaccel_train(
        f, s, e, precision="float32", steps_per_execution=1, **k),
    "tfaccel float32": lambda f, s, e, **k: tfaccel_train(f, s, e, precision="float32", **k),
    "tfaccel": tfaccel_train,
}
SHORT = {"keras": "keras", "keras-bf16": "keras, bf16", "keras-shuffle": "keras, example shuffle",
         "keras-tfdata": "keras fit, tfaccel data",
         "keras-tfdata-fixed": "keras fit, tfaccel data, fixed batches", "tf32-spe1": "tfaccel float32, spe 1",
         "tf32": "tfaccel float32", "tfaccel": "tfaccel"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="Seeds 0..N-1.")
    parser.add_argument("--first-seed", type=int, default=0, help="The first seed.")
    parser.add_argument("--epochs", type=int, default=4, help="Epochs per run.")
    parser.add_argument("--images", type=int, default=6000, help="PNGs in the folder.")
    parser.add_argument("--variants", default=",".join(SHORT),
                        help=f"Comma-separated, of: {', '.join(SHORT)}.")
    parser.add_argument("--folder", default=None,
                        help="An exported folder to reuse (written there if absent).")
    args = parser.parse_args()
    names = [SHORT[v] for v in args.variants.split(",")]
    root = tempfile.mkdtemp(prefix="tfaccel_bench_accuracy_")
    folder = args.folder or os.path.join(root, "images")
    if not os.path.isdir(folder):
        export_image_folder(folder, limit=args.images)
    accuracy = {name: [] for name in names}
    curves = {name: [] for name in names}
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    for seed in seeds:
        for name in names:
            curve = VARIANTS[name](folder, seed, args.epochs, root=root)
            accuracy[name].append(curve[-1])
            curves[name].append(curve)
            print(f"  seed {seed}: {name}: val_accuracy {curve[-1]:.4f} (by epoch: "
                  f"{', '.join(f'{v:.3f}' for v in curve)})", flush=True)
    print(f"\n{args.images} PNGs, small_cnn, batch {BATCH}, {args.epochs} epochs, "
          f"val_accuracy over seeds {seeds[0]}-{seeds[-1]}; {describe_cpu()}; precision "
          f"auto -> {resolve_precision('auto')}:\n")
    print("| variant | mean | std | per seed | mean by epoch |\n|---|---:|---:|---|---|")
    for name in names:
        values = accuracy[name]
        std = statistics.stdev(values) if len(values) > 1 else 0.0
        by_epoch = [statistics.mean(c[e] for c in curves[name]) for e in range(args.epochs)]
        print(f"| {name} | {statistics.mean(values):.4f} | {std:.4f} | "
              f"{', '.join(f'{v:.3f}' for v in values)} | "
              f"{', '.join(f'{v:.3f}' for v in by_epoch)} |")


if __name__ == "__main__":
    main()
