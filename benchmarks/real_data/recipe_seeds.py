"""Trains a shipped recipe once per seed with `tfaccel train` and prints each run's accuracy.

The last epoch's validation accuracy is the figure (what a run leaves); the best epoch's is
printed beside it, separately. Extra ``--set`` overrides go to every run.

    python benchmarks/real_data/prepare_tweets.py
    python benchmarks/real_data/recipe_seeds.py recipes/tweets.yaml --seeds 0 1 2
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile


def accuracies(run_dir: str) -> list:
    """The validation accuracy of every epoch of a run, from its metrics.jsonl.

    Args:
        run_dir: The run directory `tfaccel train` wrote.

    Returns:
        One float per epoch, in order.
    """
    with open(os.path.join(run_dir, "metrics.jsonl"), encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    return [row["val_accuracy"] for row in rows if "val_accuracy" in row]


def main() -> None:
    """Runs the seeds one after the other; one JSON line per run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recipe", help="the recipe file, e.g. recipes/tweets.yaml")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="seeds")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        help="a KEY=VALUE override for every run (repeatable)")
    parser.add_argument("--runs", default=None,
                        help="folder for the run directories (default: a temporary one)")
    args = parser.parse_args()
    runs = args.runs or tempfile.mkdtemp(prefix="tfaccel-seeds-")
    for seed in args.seeds:
        run_dir = os.path.join(runs, f"seed{seed}")
        command = [sys.executable, "-m", "tfaccel.cli.main", "train", args.recipe,
                   "--run-dir", run_dir, "--set", f"seed={seed}", "--set", "runtime.verbose=0"]
        for override in args.overrides:
            command += ["--set", override]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode:
            sys.exit(f"seed {seed} failed:\n{result.stdout[-2000:]}{result.stderr[-2000:]}")
        per_epoch = accuracies(run_dir)
        with open(os.path.join(run_dir, "summary.json"), encoding="utf-8") as handle:
            wall = json.load(handle)["wall_seconds"]
        print(json.dumps({"seed": seed, "last": round(per_epoch[-1], 4),
                          "best": round(max(per_epoch), 4),
                          "best_epoch": per_epoch.index(max(per_epoch)) + 1,
                          "per_epoch": [round(a, 4) for a in per_epoch],
                          "wall_seconds": round(wall, 1), "run_dir": run_dir,
                          "overrides": args.overrides}), flush=True)


if __name__ == "__main__":
    main()
