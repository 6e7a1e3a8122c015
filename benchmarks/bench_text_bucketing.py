"""Benchmark: texts batched by length vs every batch padded to the dataset's longest text.

The built-in tfaccel_phrases (10-300 words, most near 30), Keras' TextVectorization adapted
on the training split, the same text_cnn, Adam 2e-3, batch 64, as `recipes/text.yaml` builds
them (`build_datasets`). Contenders, alternated, each a fresh model trained `--epochs` epochs
per repeat, best of `--repeats` (training examples/s of the last epoch, timed by Keras'
own epoch):
  * padded to the longest: every batch padded to 300 tokens (what a fixed
    `output_sequence_length` or `padded_batch` to the dataset's longest gives);
  * by length (tfaccel's default): length-sorted windows after the shuffle, each batch
    padded to its own longest text.
Both read the same texts in the same number of batches; validation accuracy and the padding
fraction of the training batches are printed beside the speed.

    python benchmarks/bench_text_bucketing.py [--epochs 2] [--repeats 2] [--data-dir DIR]
"""

import argparse
import dataclasses
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import tensorflow as tf
from machine import describe_cpu  # benchmarks/machine.py

from tfaccel import models
from tfaccel.config.recipe import load_recipe
from tfaccel.data import length_batches
from tfaccel.data.from_recipe import build_datasets

RECIPE = os.path.join(os.path.dirname(__file__), "..", "recipes", "text.yaml")
LONGEST = 300  # tokens: the dataset's longest text (tfaccel_phrases' maximum)


def datasets_for(recipe, *, by_length):
    data = dataclasses.replace(recipe.data, text=dataclasses.replace(
        recipe.data.text, batch_by_length=by_length))
    train, val, info = build_datasets(data, global_batch_size=recipe.training.global_batch_size,
                                      num_replicas=1, seed=recipe.seed, deterministic=False)
    if not by_length:
        def pad(ids, labels):
            return tf.pad(ids, [[0, 0], [0, LONGEST - tf.shape(ids)[1]]]), labels

        train = train.map(pad, num_parallel_calls=tf.data.AUTOTUNE)
    return train.cache().prefetch(tf.data.AUTOTUNE), val, info


class EpochTimer(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        self.start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.seconds = time.perf_counter() - self.start


def train_once(train, val, info, *, epochs):
    model = models.build_model("text_cnn", input_shape=(None,),
                               num_classes=info.num_classes,
                               vocab_size=info.text.vocabulary_size)
    model.compile(optimizer=keras.optimizers.Adam(2e-3),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    timer = EpochTimer()
    history = model.fit(train, validation_data=val, epochs=epochs, callbacks=[timer],
                        verbose=0)
    return info.train_examples / timer.seconds, history.history["val_accuracy"][-1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=2, help="Epochs per timed run.")
    parser.add_argument("--repeats", type=int, default=2, help="Runs of each contender.")
    parser.add_argument("--data-dir", default=None, help="TFDS data directory.")
    args = parser.parse_args()
    recipe = load_recipe(RECIPE)
    if args.data_dir:
        recipe = dataclasses.replace(recipe, data=dataclasses.replace(
            recipe.data, data_dir=args.data_dir))
    contenders = {"padded to the longest (300 tokens)": False,
                  "by length (tfaccel default)": True}
    built = {name: datasets_for(recipe, by_length=flag) for name, flag in contenders.items()}
    padding = {name: length_batches.padding_fraction(train) for name, (train, _, _)
               in built.items()}
    best = {name: (0.0, 0.0) for name in contenders}
    for run in range(args.repeats):
        for name in contenders:  # alternated: drift hits both alike
            rate, accuracy = train_once(*built[name], epochs=args.epochs)
            best[name] = max(best[name], (rate, accuracy))
            print(f"  run {run + 1}: {name}: {rate:,.0f} examples/s, val_accuracy "
                  f"{accuracy:.4f}", flush=True)
    base = best["padded to the longest (300 tokens)"][0]
    print(f"\ntfaccel_phrases, text_cnn, batch {recipe.training.global_batch_size}, "
          f"{args.epochs} epochs per run, best of {args.repeats}, {describe_cpu()}, load "
          f"average {os.getloadavg()[0]:.1f}:\n")
    print("| batches | training examples/s | vs padded | padding fraction | val_accuracy |\n"
          "|---|---:|---:|---:|---:|")
    for name in contenders:
        rate, accuracy = best[name]
        print(f"| {name} | {rate:,.0f} | {rate / base:.2f}x | {padding[name]:.1%} | "
              f"{accuracy:.4f} |")


if __name__ == "__main__":
    main()
