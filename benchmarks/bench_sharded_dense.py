"""What sharding a large Dense kernel over parameter servers costs or buys against one server.

Run:  python benchmarks/bench_sharded_dense.py [--features 512] [--units 2048] [--rounds 2]

The same recipe (an MLP whose first Dense kernel is FEATURES x UNITS float32, 4 MiB by
default, on a fixed synthetic 10-class problem of 4096 examples, batch 64, Adam 1e-3,
float32, the same seed and data order) is trained with `tfaccel launch --ps N --workers 1
-- train` three ways: one parameter server (the kernel whole on it), two servers with
runtime.min_shard_bytes empty (the kernel whole on one of them) and two servers with the
default 256 KiB (the kernel in 2 column shards, one per server). Rounds alternate the
variants (A B C A B C); printed are the median examples/s of each variant's last epoch
(the first one traces) with its ratio to one server, the run log's sharding line, and the
largest difference between the sharded and the whole run's trained kernels (one worker:
the steps run in the same order, so they differ by float noise only). Every process of
the cluster shares this machine's cores, over 127.0.0.1: the ratio says what splitting the
kernel's transfers and updates over two servers does, not what separate machines give.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from machine import describe_cpu

RECIPE = """
name: {name}
data: {{source: arrays, path: blobs.npz, validation_split_name: test}}
model: {{name: mlp, params: {{hidden_units: [{units}], normalization: none, dropout: 0.0}}}}
optimizer: {{name: adam, learning_rate: 1e-3}}
training: {{epochs: {epochs}, global_batch_size: 64, keep: last}}
runtime: {{strategy: parameter_server, precision: float32, tensorboard: false,
          deterministic: true, runs_dir: runs, verbose: 0, min_shard_bytes: {shard_bytes}}}
"""
VARIANTS = {  # name: (parameter servers, runtime.min_shard_bytes)
    "1 ps, kernel whole": (1, 262144),
    "2 ps, kernel whole": (2, "null"),
    "2 ps, kernel in 2 shards": (2, 262144),
}


def _data(folder: Path, features: int) -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4096 + 512, features)).astype("float32")
    y = (x @ rng.normal(size=(features, 10))).argmax(1).astype("int64")
    np.savez(folder / "blobs.npz", x_train=x[:4096], y_train=y[:4096], x_test=x[4096:],
             y_test=y[4096:])


def _run(folder: Path, name: str, *, servers: int, shard_bytes, units: int,
         epochs: int) -> dict:
    (folder / f"{name}.yaml").write_text(RECIPE.format(
        name=name, units=units, epochs=epochs, shard_bytes=shard_bytes))
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run([sys.executable, "-m", "tfaccel.cli", "launch", "--ps",
                             str(servers), "--workers", "1", "--", "train", f"{name}.yaml"],
                            cwd=folder, env=env, capture_output=True, text=True)
    output = result.stdout + result.stderr
    if result.returncode != 0:
        raise SystemExit(f"{name} failed:\n{output[-4000:]}")
    (run,) = [p for p in (folder / "runs").iterdir() if p.name.startswith(name + "-")]
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    line = next((l.split("; ", 1)[1] for l in output.splitlines()
                 if "parameter servers:" in l), "?")
    return {"examples_per_sec": records[-1]["examples_per_sec"], "run": run,
            "val_loss": records[-1]["val_loss"], "line": line}


def _largest_kernel(run: Path) -> np.ndarray:
    import keras

    model = keras.models.load_model(run / "model.keras")
    kernels = [layer.kernel.numpy() for layer in model.layers if hasattr(layer, "kernel")]
    assert all(type(l).__name__ != "ShardedDense" for l in model.layers)  # saved whole
    return max(kernels, key=lambda k: k.size)


def _one_process(features: int, units: int, rounds: int) -> dict:
    """Milliseconds per train step on this process, Dense vs ShardedDense (2 column blocks):
    what the layer's own matmuls and concatenation cost, without servers."""
    import keras
    import tensorflow as tf

    from tfaccel.engine.sharded_dense import ShardedDense

    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=(64, features)).astype("float32"))
    y = tf.constant(rng.integers(0, 10, size=64))
    steps = {}
    for name, layer in (("Dense", keras.layers.Dense(units, activation="relu")),
                        ("ShardedDense K=2", ShardedDense(units, num_shards=2,
                                                          activation="relu"))):
        inputs = keras.Input((features,))
        model = keras.Model(inputs, keras.layers.Dense(10)(layer(inputs)))
        optimizer = keras.optimizers.Adam(1e-3)
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

        @tf.function
        def step(model=model, optimizer=optimizer, loss_fn=loss_fn):
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
            optimizer.apply(tape.gradient(loss, model.trainable_variables),
                            model.trainable_variables)
            return loss

        step()  # trace
        steps[name] = step
    times = {name: [] for name in steps}
    for _ in range(rounds * 3):
        for name, step in steps.items():
            started = time.perf_counter()
            for _ in range(20):
                loss = step()
            float(loss)
            times[name].append((time.perf_counter() - started) / 20 * 1e3)
    return {name: statistics.median(t) for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--features", type=int, default=512)
    parser.add_argument("--units", type=int, default=2048)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    options = parser.parse_args()
    results = {name: [] for name in VARIANTS}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        _data(folder, options.features)
        for round_ in range(options.rounds):
            for index, (name, (servers, shard_bytes)) in enumerate(VARIANTS.items()):
                results[name].append(_run(folder, f"v{index}r{round_}", servers=servers,
                                          shard_bytes=shard_bytes, units=options.units,
                                          epochs=options.epochs))
                print(f"round {round_ + 1}, {name}: "
                      f"{results[name][-1]['examples_per_sec']:.0f} examples/s", flush=True)
        sharded = _largest_kernel(results["2 ps, kernel in 2 shards"][0]["run"])
        whole = _largest_kernel(results["2 ps, kernel whole"][0]["run"])
        one = _largest_kernel(results["1 ps, kernel whole"][0]["run"])
    local = _one_process(options.features, options.units, options.rounds)
    mib = options.features * options.units * 4 / 2**20
    print(f"\nCPU: {describe_cpu()}")
    print(f"Kernel {options.features}x{options.units} float32 ({mib:.1f} MiB), 1 worker, "
          f"batch 64, {options.epochs} epochs of 64 steps, {options.rounds} round(s)\n")
    base = statistics.median(r["examples_per_sec"] for r in results["1 ps, kernel whole"])
    print("| run | examples/s (median of last epochs) | vs 1 ps | val_loss |")
    print("|---|---:|---:|---:|")
    for name, runs in results.items():
        speed = statistics.median(r["examples_per_sec"] for r in runs)
        print(f"| {name} | {speed:.0f} | {speed / base:.2f}x | {runs[0]['val_loss']:.4f} |")
    print("\nOne process, no servers (the layer's own cost): " + ", ".join(
        f"{name} {ms:.2f} ms/step ({ms / local['Dense']:.2f}x)" for name, ms in local.items()))
    print(f"sharded run's log: {results['2 ps, kernel in 2 shards'][0]['line']}")
    print(f"trained kernel, sharded vs whole (2 ps): max |diff| "
          f"{np.abs(sharded - whole).max():.2e}; whole on 2 ps vs 1 ps: "
          f"{np.abs(whole - one).max():.2e} (of weights up to {np.abs(whole).max():.3f})")


if __name__ == "__main__":
    main()
