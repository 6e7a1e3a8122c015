"""Benchmark: `tfaccel train` vs the Keras tutorial script, the same job end to end.

The job (issue #19): a folder of 6,000 PNGs of the built-in tfaccel_shapes (written once with
`export_image_folder`), 20% held out, the registered small_cnn, Adam 2e-3, batch 64, 4
epochs. Contenders, alternated, best of `--repeats`:
  * Keras tutorial: `keras.utils.image_dataset_from_directory(validation_split=0.2,
    subset="both", seed=0)`, `.cache().shuffle(1000).prefetch(AUTOTUNE)`, `model.fit`
    (Keras' defaults: jit_compile="auto", which is off on a CPU-only machine);
  * tfaccel: `tfaccel.train` with an image_folder recipe of the same data, model and
    schedule (precision auto, its pipeline, its callbacks and checkpoints).
Speed is steady-state training examples/s: the examples of epochs 3-N over their wall time
(epoch 1 compiles and fills the caches, and with steps_per_execution auto epoch 2 retraces),
measured by one Keras callback in both (tfaccel runs it as an extra callback). Beside it
the whole job from the call to its return: the Keras script's loader, model, fit and
validation; `tfaccel.train` with its set-up (recipe, run directory, listing, pipeline),
checkpoints and model.keras: its wall seconds and its ratio to the Keras script's ("whole
vs Keras", higher is faster), and the process's CPU seconds over it (what a loaded machine
distorts least). Validation accuracy of the last epoch is printed beside it
(`--seeds N`: its mean over seeds 0..N-1, each contender with the same seed). `--levers` adds
tfaccel with each of its speed levers turned off alone (precision auto -> float32,
steps_per_execution auto -> 1), so the table states each lever's share. `--tfds` runs the
same comparison on the default recipe's data (the built-in dataset prepared by TFDS):
`tfds.load(as_supervised=True)` + `.cache().shuffle(1000).batch(64).prefetch` in the Keras
script, the default recipe's data section (memory cache, whole-split shuffle) in tfaccel.

`--processes N` times WHOLE processes instead, what a user waits for: `python
benchmarks/keras_script.py FOLDER` against `tfaccel train recipe.yaml --timings` (the same
job as a recipe), each a fresh process timed from its start to its exit, after one
untimed warm-up of each (the page cache, tfaccel's cached precision measurement), then N
rounds alternated (Keras first in even rounds, tfaccel first in odd ones), medians. The
ratio is the median of the per-round ratios (Keras' seconds over tfaccel's: higher is
faster). tfaccel's own phases (`--timings`) are printed as medians beside it, with the exit
(the process's end after its last line) measured from outside.

    python benchmarks/bench_end_to_end.py [--images 6000] [--epochs 4] [--repeats 2]
        [--levers] [--seeds 3] [--tfds] [--processes N]
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import tensorflow as tf
from machine import describe_cpu  # benchmarks/machine.py

import tfaccel
from tfaccel import models
from tfaccel.data import export_image_folder
from tfaccel.engine.precision import resolve_precision

BATCH = 64


class SteadyRate(keras.callbacks.Callback):
    """Training examples/s over the epochs after the second (validation time left out).

    Epoch 1 traces and compiles and fills the caches; with steps_per_execution auto, epoch 2
    retraces with the chosen steps per call. Both are one-time costs, so the steady rate
    starts at epoch 3; `fit_seconds` (the whole fit, validation included) counts them.
    """

    def __init__(self, examples_per_epoch):
        super().__init__()
        self.examples_per_epoch = examples_per_epoch
        self.seconds = []

    def on_train_begin(self, logs=None):
        if not self.seconds:
            self.fit_start = time.perf_counter()

    def on_epoch_begin(self, epoch, logs=None):
        self.start = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        self.last = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.seconds.append(self.last - self.start)
        self.val_accuracy = (logs or {}).get("val_accuracy")
        self.fit_seconds = time.perf_counter() - self.fit_start

    @property
    def rate(self):
        steady = self.seconds[2:] or self.seconds
        return self.examples_per_epoch * len(steady) / sum(steady)


def _keras_fit(train, val, *, epochs, train_examples):
    model = models.build_model("small_cnn", input_shape=(32, 32, 3), num_classes=4)
    model.compile(optimizer=keras.optimizers.Adam(2e-3),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    rate = SteadyRate(train_examples)
    model.fit(train, validation_data=val, epochs=epochs, callbacks=[rate], verbose=0)
    return rate


def keras_tutorial(job, *, epochs, train_examples, seed=0):
    """The keras.io way: Keras' folder loader, or `tfds.load` (`job["tfds"]`)."""
    keras.utils.set_random_seed(seed)
    if "tfds" in job:
        import tensorflow_datasets as tfds

        train, val = tfds.load("tfaccel_shapes", split=["train", "test"], as_supervised=True,
                               data_dir=job["tfds"])
        train = train.cache().shuffle(1000).batch(BATCH).prefetch(tf.data.AUTOTUNE)
        val = val.batch(BATCH).cache().prefetch(tf.data.AUTOTUNE)
    else:
        train, val = keras.utils.image_dataset_from_directory(
            job["folder"], validation_split=0.2, subset="both", seed=seed,
            image_size=(32, 32), batch_size=BATCH, verbose=False)
        train = train.cache().shuffle(1000).prefetch(tf.data.AUTOTUNE)
        val = val.cache().prefetch(tf.data.AUTOTUNE)
    return _keras_fit(train, val, epochs=epochs, train_examples=train_examples)


def tfaccel_train(job, run_dir, *, epochs, train_examples, seed=0, **runtime):
    """`tfaccel.train` with its defaults, or with levers turned off (`runtime` keys)."""
    rate = SteadyRate(train_examples)
    steps = runtime.pop("steps_per_execution", "auto")
    if "tfds" in job:  # the default recipe's data section
        data = {"source": "builtin", "data_dir": job["tfds"], "cache": "memory",
                "shuffle_buffer": 12000}
    else:
        data = {"source": "image_folder", "path": job["folder"], "image_size": [32, 32],
                "validation_fraction": 0.2, "validation_split_name": None, "cache": "memory"}
    result = tfaccel.train({
        "seed": seed,
        "data": data,
        "model": {"name": "small_cnn"},
        "optimizer": {"name": "adam", "learning_rate": 2e-3},
        "training": {"epochs": epochs, "global_batch_size": BATCH,
                     "steps_per_execution": steps},
        "runtime": {"verbose": 0, "tensorboard": False, **runtime},
    }, run_dir=run_dir, callbacks=[rate])
    rate.steps_per_execution = result.summary["steps_per_execution"]
    return rate


# The tfaccel contenders: its defaults, then each lever turned off alone (--levers).
LEVERS = {
    "tfaccel train (defaults)": {},
    "tfaccel, precision float32": {"precision": "float32"},
    "tfaccel, steps_per_execution 1": {"steps_per_execution": 1},
    "tfaccel, float32 and 1 step per call": {"precision": "float32",
                                             "steps_per_execution": 1},
}


HERE = os.path.dirname(os.path.abspath(__file__))


def _tfaccel_command(recipe_path, run_dir):
    """`tfaccel train RECIPE --timings`: the console script where installed, else the same
    entry point through this interpreter."""
    script = shutil.which("tfaccel")
    head = [script] if script else [
        sys.executable, "-c", "import sys; from tfaccel.cli.main import main; sys.exit(main())"]
    return head + ["train", recipe_path, "--run-dir", run_dir, "--timings"]


def _timed_process(command):
    """Wall seconds of one process from its start to its exit, and what it printed."""
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{command} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return seconds, done.stdout


def _phases(output):
    """`--timings` lines -> (seconds to the last line, {phase: seconds}); duplicates
    summed (a phase named per epoch is not)."""
    text = output[output.index("Timings: "):]
    lines = text.splitlines()
    wall = float(re.match(r"Timings: ([\d.]+) s", lines[0]).group(1))
    phases = {}
    for line in lines[1:]:
        found = re.match(r"\s+([\d.]+) s  (.+)$", line)
        if found:
            phases[found.group(2)] = phases.get(found.group(2), 0.0) + float(found.group(1))
    return wall, phases


def whole_processes(folder, root, *, rounds, epochs):
    """`--processes`: each contender a fresh process, alternated, medians (see the top)."""
    recipe_path = os.path.join(root, "recipe.yaml")
    with open(recipe_path, "w", encoding="utf-8") as out:
        json.dump({"seed": 0,
                   "data": {"source": "image_folder", "path": folder, "image_size": [32, 32],
                            "validation_fraction": 0.2, "validation_split_name": None,
                            "cache": "memory"},
                   "model": {"name": "small_cnn"},
                   "optimizer": {"name": "adam", "learning_rate": 2e-3},
                   "training": {"epochs": epochs, "global_batch_size": BATCH},
                   "runtime": {"verbose": 0, "tensorboard": False}}, out)
    keras_command = [sys.executable, os.path.join(HERE, "keras_script.py"), folder,
                     str(epochs), "0"]
    names = ("Keras tutorial script", "tfaccel train")
    seconds = {name: [] for name in names}
    phases, exits = [], []
    loads = [os.getloadavg()[0]]
    for index in range(rounds + 1):  # round 0 is the untimed warm-up
        order = names if index % 2 == 0 else names[::-1]
        for name in order:
            command = keras_command if name == names[0] else _tfaccel_command(
                recipe_path, os.path.join(root, f"process-run{index}"))
            wall, output = _timed_process(command)
            if index == 0:
                continue
            seconds[name].append(wall)
            if name == names[1]:
                to_last_line, run_phases = _phases(output)
                phases.append(run_phases)
                exits.append(wall - to_last_line)
            print(f"  round {index}: {name}: {wall:.1f} s", flush=True)
        loads.append(os.getloadavg()[0])
    ratios = [k / t for k, t in zip(seconds[names[0]], seconds[names[1]])]
    print(f"\n{folder}: small_cnn, batch {BATCH}, {epochs} epochs, whole processes (start to "
          f"exit), {rounds} rounds alternated after a warm-up, medians; {describe_cpu()}; load "
          f"average {min(loads):.1f}-{max(loads):.1f} over the runs:\n")
    print("| contender | whole process s (median) | min | max | whole vs Keras |\n"
          "|---|---:|---:|---:|---:|")
    for name in names:
        values = seconds[name]
        ratio = "1.00x" if name == names[0] else f"{statistics.median(ratios):.2f}x"
        print(f"| {name} | {statistics.median(values):.1f} | {min(values):.1f} | "
              f"{max(values):.1f} | {ratio} |")
    print(f"\nper-round ratios: {', '.join(f'{r:.2f}x' for r in ratios)}")
    print("\ntfaccel train's phases (median seconds over the rounds; --timings):\n")
    print("| phase | s |\n|---|---:|")
    for name in phases[0]:
        values = [p.get(name, 0.0) for p in phases]
        print(f"| {name} | {statistics.median(values):.2f} |")
    print(f"| exit (after the last line, measured from outside) | {statistics.median(exits):.2f} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=6000, help="PNGs in the folder.")
    parser.add_argument("--epochs", type=int, default=4, help="Epochs per run.")
    parser.add_argument("--repeats", type=int, default=2, help="Runs of each contender.")
    parser.add_argument("--levers", action="store_true",
                        help="Also run tfaccel with each lever (precision, steps per call) off.")
    parser.add_argument("--seeds", type=int, default=1,
                        help="Seeds for the accuracy comparison (speed: best run of seed 0).")
    parser.add_argument("--data-dir", default=None, help="TFDS data dir for tfaccel_shapes.")
    parser.add_argument("--tfds", action="store_true",
                        help="The default recipe's data through TFDS (12,000 train / 2,000 test "
                        "examples) instead of the PNG folder: tfds.load in the Keras script.")
    parser.add_argument("--processes", type=int, default=0, metavar="N",
                        help="Time whole processes (start to exit) of the Keras script and "
                        "`tfaccel train`, N rounds alternated after a warm-up; medians.")
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="tfaccel_bench_e2e_")
    if args.processes:
        try:
            folder = os.path.join(root, "images")
            export_image_folder(folder, limit=args.images, data_dir=args.data_dir)
            whole_processes(folder, root, rounds=args.processes, epochs=args.epochs)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        return
    names = ["Keras tutorial script"] + (list(LEVERS) if args.levers
                                         else ["tfaccel train (defaults)"])
    try:
        if args.tfds:
            from tfaccel import datasets

            job = {"tfds": args.data_dir or os.path.join(root, "tfds")}
            datasets.prepare(data_dir=job["tfds"])
            train_examples = 12000
        else:
            job = {"folder": os.path.join(root, "images")}
            export_image_folder(job["folder"], limit=args.images, data_dir=args.data_dir)
            train_examples = args.images - int(0.2 * args.images)  # both hold out 20%
        best = dict.fromkeys(names)
        whole, whole_cpu = {}, {}  # each contender's shortest whole job (seed 0)
        accuracy = {name: [] for name in names}
        runs = [(seed, repeat) for seed in range(args.seeds)
                for repeat in range(args.repeats if seed == 0 else 1)]
        for index, (seed, repeat) in enumerate(runs):
            for name in names:  # alternated: drift hits all alike
                started, cpu = time.perf_counter(), time.process_time()
                if name == "Keras tutorial script":
                    result = keras_tutorial(job, epochs=args.epochs,
                                            train_examples=train_examples, seed=seed)
                else:
                    result = tfaccel_train(job, os.path.join(root, f"run{index}-{name}"),
                                           epochs=args.epochs, train_examples=train_examples,
                                           seed=seed, **LEVERS[name])
                result.whole_seconds = time.perf_counter() - started
                result.whole_cpu = time.process_time() - cpu
                print(f"  seed {seed} run {repeat + 1}: {name}: {result.rate:,.0f} "
                      f"examples/s, whole {result.whole_seconds:.1f} s "
                      f"({result.whole_cpu:.1f} s CPU), val_accuracy "
                      f"{result.val_accuracy:.4f}", flush=True)
                if repeat == 0:
                    accuracy[name].append(result.val_accuracy)
                if seed == 0 and (best[name] is None or result.rate > best[name].rate):
                    best[name] = result
                if seed == 0:
                    whole[name] = min(whole.get(name, float("inf")), result.whole_seconds)
                    whole_cpu[name] = min(whole_cpu.get(name, float("inf")), result.whole_cpu)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    base = best["Keras tutorial script"].rate
    what = ("tfaccel_shapes through TFDS (12,000 train / 2,000 test, 32x32, 4 classes)"
            if args.tfds else f"{args.images} PNGs (32x32, 4 classes), 20% held out")
    print(f"\n{what}, small_cnn, batch {BATCH}, "
          f"{args.epochs} epochs, steady examples/s (epochs 3-{args.epochs}), best of "
          f"{args.repeats} (seed 0), val_accuracy mean over seeds 0-{args.seeds - 1}, "
          f"{describe_cpu()}, precision auto -> {resolve_precision('auto')}, load average "
          f"{os.getloadavg()[0]:.1f}:\n")
    print("| contender | steps per call | training examples/s | vs Keras | whole job s "
          "| whole vs Keras | whole job CPU s | val_accuracy |\n"
          "|---|---:|---:|---:|---:|---:|---:|---:|")
    keras_whole = whole["Keras tutorial script"]
    for name, result in best.items():
        mean = sum(accuracy[name]) / len(accuracy[name])
        print(f"| {name} | {getattr(result, 'steps_per_execution', 1)} | {result.rate:,.0f} | "
              f"{result.rate / base:.2f}x | {whole[name]:.1f} | "
              f"{keras_whole / whole[name]:.2f}x | {whole_cpu[name]:.1f} | {mean:.4f} |")


if __name__ == "__main__":
    main()
