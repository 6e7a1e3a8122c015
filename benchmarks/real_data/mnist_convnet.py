"""recipes/models/convnet.py on MNIST: tfaccel (from_arrays, precision auto) vs plain Keras fit.

What recipes/mnist.yaml will run once `model.name: module:callable` and Keras' npz layout
are in `source: arrays`, measured here through the library instead: the same model, data,
epochs, batch size and optimizer. Each run trains on the 60,000 training images and reports
the accuracy on the 10,000 test images after every epoch (the last one is the figure).

    python benchmarks/real_data/prepare_mnist.py
    python benchmarks/real_data/mnist_convnet.py --seeds 0 1
"""

import argparse
import importlib.util
import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from shared import DEFAULT_OUT, REPO

sys.path.insert(0, os.path.join(REPO, "benchmarks"))
from machine import describe_cpu


def load_builder():
    """Imports ``build`` from recipes/models/convnet.py, as a recipe would name it.

    Returns:
        The builder function.
    """
    path = os.path.join(REPO, "recipes", "models", "convnet.py")
    spec = importlib.util.spec_from_file_location("recipe_convnet", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build


class EpochLog:
    """A Keras callback keeping each epoch's test accuracy and duration."""

    def __new__(cls):
        import keras

        class _Log(keras.callbacks.Callback):
            def on_train_begin(self, logs=None):
                self.accuracy, self.seconds = [], []

            def on_epoch_begin(self, epoch, logs=None):
                self._start = time.perf_counter()

            def on_epoch_end(self, epoch, logs=None):
                self.seconds.append(round(time.perf_counter() - self._start, 1))
                self.accuracy.append(round(float(logs["val_accuracy"]), 4))

        return _Log()


def run(mode: str, seed: int, data: dict, epochs: int, batch_size: int) -> dict:
    """Trains the convnet once and measures it.

    Args:
        mode: ``"tfaccel"`` (from_arrays batches, precision "auto") or ``"keras"``
            (``model.fit(x, y)``, float32).
        seed: Seed of weights, shuffling and dropout.
        data: The four MNIST arrays, images with a channel axis.
        epochs: Epochs to train.
        batch_size: Batch size.

    Returns:
        The run's figures: last and best test accuracy, per-epoch accuracies, wall time.
    """
    import keras

    import tfaccel

    keras.backend.clear_session()
    if mode == "tfaccel":
        precision = tfaccel.set_precision("auto")
    else:
        precision = "float32"
        keras.mixed_precision.set_global_policy(precision)
    keras.utils.set_random_seed(seed)
    model = load_builder()(input_shape=(28, 28, 1), num_classes=10)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    log = EpochLog()
    start = time.perf_counter()
    if mode == "tfaccel":
        train = tfaccel.data.from_arrays(data["x_train"], data["y_train"],
                                         batch_size=batch_size, seed=seed)
        test = tfaccel.data.from_arrays(data["x_test"], data["y_test"],
                                        batch_size=batch_size, shuffle_buffer=0)
        model.fit(train, epochs=epochs, validation_data=test, callbacks=[log], verbose=0)
    else:
        model.fit(data["x_train"], data["y_train"], batch_size=batch_size, epochs=epochs,
                  validation_data=(data["x_test"], data["y_test"]), callbacks=[log],
                  verbose=0)
    wall = time.perf_counter() - start
    return {"mode": mode, "precision": precision, "seed": seed, "epochs": epochs,
            "params": model.count_params(), "test_accuracy_last": log.accuracy[-1],
            "test_accuracy_best": max(log.accuracy),
            "best_epoch": int(np.argmax(log.accuracy)) + 1, "wall_seconds": round(wall, 1),
            "epoch_seconds": log.seconds, "test_accuracy_per_epoch": log.accuracy}


def main() -> None:
    """Runs the requested seeds and modes, alternating modes, one JSON line per run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--npz", default=os.path.join(DEFAULT_OUT, "mnist.npz"),
                        help="mnist.npz written by prepare_mnist.py (default: %(default)s)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="seeds to run")
    parser.add_argument("--modes", nargs="+", default=["tfaccel", "keras"],
                        choices=["tfaccel", "keras"], help="contenders, run in this order")
    parser.add_argument("--epochs", type=int, default=15, help="epochs (keras.io: 15)")
    parser.add_argument("--batch-size", type=int, default=128, help="batch size (keras.io: 128)")
    parser.add_argument("--out", default=None, help="also append the JSON lines to this file")
    args = parser.parse_args()
    if not os.path.exists(args.npz):
        sys.exit(f"{args.npz} does not exist: run benchmarks/real_data/prepare_mnist.py first")
    with np.load(args.npz) as npz:
        # Keras' layout is (N, 28, 28) uint8: Conv2D wants a channel axis.
        data = {k: npz[k][..., None] if k.startswith("x") else npz[k] for k in npz.files}
    print(describe_cpu(), flush=True)
    for seed in args.seeds:
        for mode in args.modes:
            line = json.dumps(run(mode, seed, data, args.epochs, args.batch_size))
            print(line, flush=True)
            if args.out:
                with open(args.out, "a", encoding="utf-8") as handle:
                    handle.write(line + "\n")


if __name__ == "__main__":
    main()
