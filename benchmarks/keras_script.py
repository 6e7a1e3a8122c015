"""The Keras tutorial script of bench_end_to_end.py as a process of its own, as a user runs it.

Keras' folder loader (validation_split=0.2, subset="both"), `.cache().shuffle(1000)
.prefetch(AUTOTUNE)`, the registered small_cnn (the only tfaccel import: `tfaccel.models`,
a module without TensorFlow work of its own), Adam 2e-3, `model.fit` with Keras' defaults.
`bench_end_to_end.py --processes` times it from process start to exit against
`tfaccel train`.

    python benchmarks/keras_script.py FOLDER [EPOCHS] [SEED]
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import tensorflow as tf

from tfaccel.models import build_model

BATCH = 64


def main(folder: str, epochs: int = 4, seed: int = 0) -> float:
    """Trains the job; returns the last epoch's validation accuracy."""
    keras.utils.set_random_seed(seed)
    train, val = keras.utils.image_dataset_from_directory(
        folder, validation_split=0.2, subset="both", seed=seed, image_size=(32, 32),
        batch_size=BATCH, verbose=False)
    train = train.cache().shuffle(1000).prefetch(tf.data.AUTOTUNE)
    val = val.cache().prefetch(tf.data.AUTOTUNE)
    model = build_model("small_cnn", input_shape=(32, 32, 3), num_classes=4)
    model.compile(optimizer=keras.optimizers.Adam(2e-3),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    history = model.fit(train, validation_data=val, epochs=epochs, verbose=0)
    return history.history["val_accuracy"][-1]


if __name__ == "__main__":
    args = sys.argv[1:]
    accuracy = main(args[0], *(int(a) for a in args[1:3]))
    print(f"val_accuracy {accuracy:.4f}")
