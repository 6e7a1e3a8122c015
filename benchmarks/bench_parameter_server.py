"""What asynchronous training does to the loss: synchronous (one process) vs parameter servers.

Run:  python benchmarks/bench_parameter_server.py [--epochs 6] [--workers 1 2]

The same recipe (a small MLP on a fixed synthetic 3-class problem, 1000 training and 200
validation examples, batch 25, Adam 1e-2, float32, the same seed and data order) is trained
as `tfaccel train` with runtime.strategy one_device, then as `tfaccel launch --ps 1 --workers
W -- train` for each W. Printed: the per-epoch training loss of each, the last epoch's
validation accuracy and loss, the step count tfaccel counted against Keras' own
optimizer.iterations, and examples/s (a side note: the cluster's processes share the
machine's cores with the chief).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from machine import describe_cpu

RECIPE = """
name: {name}
data: {{source: arrays, path: blobs.npz, validation_split_name: test}}
model: {{name: mlp, params: {{hidden_units: [32], normalization: none, dropout: 0.0}}}}
optimizer: {{name: adam, learning_rate: 1e-2}}
training: {{epochs: {epochs}, global_batch_size: 25, keep: last}}
runtime: {{strategy: {strategy}, precision: float32, tensorboard: false, deterministic: true,
          runs_dir: runs, verbose: 0}}
"""


def _data(folder: Path) -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1200, 16)).astype("float32")
    y = (x @ rng.normal(size=(16, 3))).argmax(1).astype("int64")
    np.savez(folder / "blobs.npz", x_train=x[:1000], y_train=y[:1000], x_test=x[1000:],
             y_test=y[1000:])


def _run(folder: Path, name: str, args: list, *, epochs: int, strategy: str) -> dict:
    (folder / f"{name}.yaml").write_text(RECIPE.format(name=name, epochs=epochs,
                                                       strategy=strategy))
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run([sys.executable, "-m", "tfaccel.cli", *args, f"{name}.yaml"],
                            cwd=folder, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{name} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    (run,) = [p for p in (folder / "runs").iterdir() if p.name.startswith(name + "-")]
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return {"records": records, "summary": json.loads((run / "summary.json").read_text())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        _data(folder)
        runs = {"synchronous (one_device)": _run(folder, "sync", ["train"],
                                                 epochs=options.epochs, strategy="one_device")}
        for workers in options.workers:
            runs[f"ps 1, {workers} worker(s)"] = _run(
                folder, f"ps{workers}", ["launch", "--ps", "1", "--workers", str(workers),
                                         "--", "train"],
                epochs=options.epochs, strategy="parameter_server")
    print(f"CPU: {describe_cpu()}")
    names = list(runs)
    print("\n| epoch | " + " | ".join(f"loss, {n}" for n in names) + " |")
    print("|---:|" + "---:|" * len(names))
    for epoch in range(options.epochs):
        print(f"| {epoch + 1} | " + " | ".join(
            f"{runs[n]['records'][epoch]['loss']:.4f}" for n in names) + " |")
    print("\n| run | val_loss | val_accuracy | steps counted | Keras optimizer.iterations "
          "| examples/s |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in names:
        last, summary = runs[name]["records"][-1], runs[name]["summary"]
        steps = summary.get("steps_completed", options.epochs * summary["steps_per_epoch"])
        iterations = summary.get("optimizer_iterations", steps)
        print(f"| {name} | {last['val_loss']:.4f} | {last['val_accuracy']:.4f} | {steps} | "
              f"{iterations} | {summary['examples_per_sec']:.0f} |")


if __name__ == "__main__":
    main()
