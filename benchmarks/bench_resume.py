"""Benchmark resumable checkpoints: the cost of `checkpoint_every_steps` and checkpoint size.

Run:  python benchmarks/bench_resume.py [--epochs 2] [--repeats 3] [--every 200,50]

Side by side in one process, on the default recipe (built-in dataset, small CNN): the same
training with epoch-end checkpoints only, and with a step checkpoint every N optimizer
steps, alternating the contenders and keeping the best `fit` time of each (the machine is
shared and timings are bimodal). It then compares a checkpoint's size on disk with the
model's weights alone (float32 parameters, no optimizer state).
"""

import argparse
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
REPO = Path(__file__).resolve().parents[1]


def _train(workdir: Path, name: str, overrides: list) -> dict:
    from tfaccel.runner import train

    result = train(str(REPO / "recipes" / "default.yaml"), overrides,
                   run_dir=str(workdir / name))
    return {"fit_seconds": result.summary["fit_seconds"], "run_dir": result.run_dir}


def _folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--every", default="200,50",
                        help="Comma-separated step intervals to compare with none.")
    args = parser.parse_args(argv)
    import keras
    import numpy as np

    from tfaccel.engine.precision import cpu_has_bf16

    everies = [int(v) for v in args.every.split(",") if v]
    common = ["runtime.verbose=0", "runtime.tensorboard=false", "runtime.precision=float32",
              f"training.epochs={args.epochs}"]
    contenders = {"epoch ends only": []}
    for every in everies:
        contenders[f"every {every} steps"] = [f"training.checkpoint_every_steps={every}"]
    best = {name: float("inf") for name in contenders}
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        # A first, discarded run pays once for what every later run reuses (TFDS
        # preparation, Python imports, TF's kernel caches).
        _train(workdir, "warm-up", common + ["training.epochs=1"])
        names = list(contenders)
        for repeat in range(args.repeats):
            # Alternate the order, so a slow spell of the shared machine hits each contender.
            for index, name in enumerate(names if repeat % 2 == 0 else names[::-1]):
                extra = contenders[name]
                run = _train(workdir, f"run-{repeat}-{index}", common + extra)
                runs[name] = run
                best[name] = min(best[name], run["fit_seconds"])
        checkpoint = sorted((runs["epoch ends only"]["run_dir"] / "checkpoints").iterdir())[-1]
        model = keras.saving.load_model(runs["epoch ends only"]["run_dir"] / "model.keras",
                                        compile=False)
        weights_bytes = sum(int(np.prod(w.shape)) * w.dtype.itemsize
                            for w in model.get_weights())
        checkpoint_bytes = _folder_bytes(checkpoint)
        weights_file = workdir / "alone.weights.h5"
        model.save_weights(str(weights_file))
        weights_file_bytes = weights_file.stat().st_size

    base = best["epoch ends only"]
    print(f"bench_resume: default recipe, {args.epochs} epoch(s) of 188 steps, float32, "
          f"best of {args.repeats} alternating runs; CPU with bf16: {cpu_has_bf16()}")
    print(f"{'contender':24} {'fit s':>8} {'ratio':>7}")
    for name in contenders:
        print(f"{name:24} {best[name]:8.2f} {best[name] / base:7.3f}x")
    print(f"checkpoint {checkpoint.name}: {checkpoint_bytes / 1e6:.3f} MB on disk; weights "
          f"alone {weights_bytes / 1e6:.3f} MB of parameters ({weights_file_bytes / 1e6:.3f} "
          f"MB as a .weights.h5): {checkpoint_bytes / weights_bytes:.2f}x the parameters, "
          f"{checkpoint_bytes / weights_file_bytes:.2f}x the weights file")
    return 0


if __name__ == "__main__":
    sys.exit(main())
