"""Benchmark the pipeline: step time of K = 1, 2, 4, 8 micro-batches on 2 stages vs one device.

Run:  python benchmarks/bench_pipeline.py [--quick] [--repeats N] [--intra-op 1]

One process splits the CPU into 2 logical devices (before TensorFlow initialises), builds
every contender (the same MLP, the same batch, the same data), traces and warms each up,
then times `fit` calls alternating between contenders (best of the repeats: the machine
is shared). "one device" is the plain Keras model on /CPU:0; the pipeline rows split it in
2 stages balanced by parameters, stage 0 on /CPU:0 and stage 1 on /CPU:1. On a CPU the two
logical devices share the same cores and thread pools, so overlapping the stages cannot
add compute; the rows show what the schedule costs (more, smaller ops) and what overlap
wins back. On GPUs each stage has a device of its own.
"""

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from bench_engine import Contender, _alternate  # (benchmarks/ is the script's folder)
from machine import describe_cpu


def _model(width, depth):
    import keras

    keras.utils.set_random_seed(0)
    layers = [keras.layers.Dense(width, activation="relu", name=f"dense_{i}")
              for i in range(depth)]
    return keras.Sequential([keras.Input((width,)), *layers,
                             keras.layers.Dense(10, name="logits")])


def _dataset(batch, width, examples):
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    x = rng.normal(size=(examples, width)).astype("float32")
    y = rng.integers(0, 10, size=(examples,))
    return (tf.data.Dataset.from_tensor_slices((x, y)).batch(batch, drop_remainder=True)
            .cache().repeat())


def _compile(model):
    import keras

    model.compile(optimizer=keras.optimizers.SGD(0.01),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps and repeats")
    parser.add_argument("--repeats", type=int, default=None,
                        help="timed fit calls per contender, alternating (best kept); more "
                        "on a loaded machine")
    parser.add_argument("--intra-op", type=int, default=0,
                        help="TensorFlow intra-op threads (0: its default, every core); 1 "
                        "leaves the second core to the overlap of the stages alone")
    args = parser.parse_args(argv)
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.intra_op)

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import tfaccel

    width, depth, batch = 1024, 4, 256
    steps, repeats = (8, 3) if args.quick else (20, 5)
    repeats = args.repeats or repeats
    data = _dataset(batch, width, batch * 4)
    devices = [d.name for d in tf.config.list_logical_devices("CPU")]
    with tf.device(devices[0]):
        contenders = [Contender("one device (plain Keras)", _compile(_model(width, depth)), data,
                                batch=batch, steps=steps)]
    for k in (1, 2, 4, 8):
        piped = tfaccel.pipeline(_model(width, depth), stages=2, micro_batches=k,
                                 devices=devices)
        contenders.append(Contender(f"pipeline, 2 stages, K={k}", _compile(piped), data,
                                    batch=batch, steps=steps))
    # The same schedule with both stages on one device: what micro-batching costs without
    # any overlap; the K=4 row against it is what the second device wins back.
    same = tfaccel.pipeline(_model(width, depth), stages=2, micro_batches=4,
                            devices=devices[:1])
    contenders.append(Contender("pipeline, 2 stages on ONE device, K=4", _compile(same), data,
                                batch=batch, steps=steps))
    best = _alternate(contenders, repeats)
    base = best[contenders[0].name]
    print(f"\n### Pipeline step time, MLP {depth}x{width}, batch {batch}, "
          f"2 logical CPUs, intra-op threads {args.intra_op or 'default'}\n\n"
          f"{describe_cpu()}\n")
    print("| contender | ms / step | bubble (S-1)/(K+S-1) | ratio vs one device |")
    print("|---|---:|---:|---:|")
    for contender in contenders:
        seconds = best[contender.name]
        k = getattr(contender.model, "micro_batches", None)
        bubble = "-" if k is None else f"{1 / (k + 1):.2f}"
        print(f"| {contender.name} | {seconds * batch * 1e3:.2f} | {bubble} | "
              f"{seconds / base:.2f}x |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
