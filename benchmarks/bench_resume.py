"""Benchmark resumable checkpoints: the cost of `checkpoint_every_steps` and checkpoint size.

Run:  python benchmarks/bench_resume.py [--epochs 2] [--repeats 3] [--every 200,50]

Side by side in one process, on the default recipe (built-in dataset, small CNN): the same
training with epoch-end checkpoints only, and with a step checkpoint every N optimizer
steps, alternating the contenders and keeping the best `fit` time of each (the machine is
shared and timings are bimodal). Because whole-run times move by more than the overhead on
a shared machine, every checkpoint write is also timed inside its run: the overhead of step
checkpoints is the extra share of `fit` time spent writing them. It then compares a checkpoint's size on disk with the
model's weights alone (float32 parameters, no optimizer state).
"""

import argparse
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
REPO = Path(__file__).resolve().parents[1]


# Seconds spent inside checkpoint writes during the current run (see `_timed_writes`).
_WRITE_SECONDS = []


def _timed_writes() -> None:
    """Times every checkpoint write: the overhead measured inside the very run it slows.

    Whole-run times of two contenders differ by more than the overhead itself on a shared
    machine; the writes' own share of a run's `fit` time is the same quantity measured where
    the load is the same for both parts.
    """
    import time

    from tfaccel.training.run_dir import checkpoints

    original = checkpoints.write_checkpoint

    def timed(*args, **kwargs):
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            _WRITE_SECONDS.append(time.perf_counter() - start)

    checkpoints.write_checkpoint = timed  # callbacks.py calls it through the module


def _train(workdir: Path, name: str, overrides: list) -> dict:
    from tfaccel.training.run.runner import train

    _WRITE_SECONDS.clear()
    result = train(str(REPO / "recipes" / "default.yaml"), overrides,
                   run_dir=str(workdir / name))
    return {"fit_seconds": result.summary["fit_seconds"], "run_dir": result.run_dir,
            "write_seconds": sum(_WRITE_SECONDS), "writes": len(_WRITE_SECONDS)}


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
    share = {name: float("inf") for name in contenders}  # write seconds / fit seconds
    writes = {}
    runs = {}
    _timed_writes()
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
                share[name] = min(share[name], run["write_seconds"] / run["fit_seconds"])
                writes[name] = run["writes"]
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
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print("| contender | fit s (best) | vs epoch ends only | checkpoints written | time in "
          "checkpoint writes / fit time (best) | overhead of the step checkpoints |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name in contenders:
        extra = share[name] - share["epoch ends only"]
        print(f"| {name} | {best[name]:.2f} | {best[name] / base:.3f}x | {writes[name]} | "
              f"{share[name]:.2%} | {1 + extra:.3f}x |")
    print(f"checkpoint {checkpoint.name}: {checkpoint_bytes / 1e6:.3f} MB on disk; weights "
          f"alone {weights_bytes / 1e6:.3f} MB of parameters ({weights_file_bytes / 1e6:.3f} "
          f"MB as a .weights.h5): {checkpoint_bytes / weights_bytes:.2f}x the parameters, "
          f"{checkpoint_bytes / weights_file_bytes:.2f}x the weights file")
    return 0


if __name__ == "__main__":
    sys.exit(main())
