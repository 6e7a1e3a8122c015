"""Every real-table recipe through `tfaccel train` (seeds 0-2) beside its scikit-learn baselines.

For each recipe (default: ``recipes/tables/*.yaml``) this runs ``tfaccel train RECIPE --set
seed=S`` once per seed (validation file = the test file; each recipe keeps its last epoch,
so the figure is the last epoch's validation metric, never a selected one), reads the run's
``metrics.jsonl``, and fits `table_baselines.py`'s linear model and gradient boosting on the
very same files and columns. One table: dataset, task, metric, tfaccel mean ± standard
deviation over the seeds (and the range), the linear baseline, the boosting, the floor
(majority class or training mean), and whether the recipe reaches the linear baseline
(the issue's goal). The CPU and the load average before and after are printed: accuracy
does not depend on them, wall times do (2 shared cores: not a speed figure).

    python benchmarks/real_data/prepare_penguins.py   # ... each recipe's data.prepare
    python benchmarks/real_data/bench_tables.py [RECIPE ...] [--seeds 0 1 2] [--set K=V]
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from table_baselines import DEFAULT_RECIPES, LOWER_IS_BETTER, METRICS, REPO, Table, \
    describe_cpu, evaluate, fmt  # noqa: I001

# The names Keras logs each task's metric under, on the validation split (tfaccel's
# training.metrics auto), first match wins.
LOGGED = {"accuracy": ("val_accuracy", "val_binary_accuracy"), "auc": ("val_auc",),
          "mae": ("val_mae", "val_mean_absolute_error"),
          "rmse": ("val_rmse", "val_root_mean_squared_error")}
MULTI_LABEL_ACCURACY = ("val_binary_accuracy", "val_accuracy")


def train(recipe: str, *, seed: int, run_dir: str, overrides: list) -> dict:
    """Runs ``tfaccel train`` once; returns the last epoch's logged metrics and the wall time.

    Args:
        recipe: The recipe file.
        seed: Its ``seed``.
        run_dir: Where the run directory goes.
        overrides: Extra ``KEY=VALUE`` settings.

    Returns:
        ``{"last": {metric: value}, "epochs": n, "wall_seconds": s}``.
    """
    command = [sys.executable, "-m", "tfaccel.cli.main", "train", recipe, "--run-dir",
               run_dir, "--set", f"seed={seed}", "--set", "runtime.verbose=0"]
    for override in overrides:
        command += ["--set", override]
    env = {**os.environ, "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO)
    if result.returncode:
        return {"error": (result.stdout + result.stderr).strip()[-1500:],
                "exit": result.returncode}
    with open(os.path.join(run_dir, "metrics.jsonl"), encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    epochs = [row for row in rows if any(k.startswith("val_") for k in row)]
    with open(os.path.join(run_dir, "summary.json"), encoding="utf-8") as handle:
        summary = json.load(handle)
    return {"last": epochs[-1] if epochs else {}, "epochs": len(epochs),
            "wall_seconds": round(summary.get("wall_seconds", float("nan")), 1)}


def logged(task: str, metric: str, last: dict):
    """The value of `metric` in a run's last logged epoch (None when not logged)."""
    names = MULTI_LABEL_ACCURACY if (task, metric) == ("multi_label", "accuracy") \
        else LOGGED[metric]
    return next((float(last[n]) for n in names if n in last), None)


def reaches(metric: str, value: float, bar: float) -> bool:
    """Whether `value` is at or above the bar (at or below it for an error)."""
    return value <= bar if metric in LOWER_IS_BETTER else value >= bar


def main() -> None:
    """Trains every recipe per seed, fits the baselines, prints one JSON line per run and
    the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recipes", nargs="*", help=f"recipe files (default: {DEFAULT_RECIPES})")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="seeds")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        help="a KEY=VALUE override for every run (repeatable)")
    parser.add_argument("--runs", default=None,
                        help="folder for the run directories (default: a temporary one)")
    parser.add_argument("--no-baselines", action="store_true",
                        help="train only (the baseline columns stay empty)")
    args = parser.parse_args()
    recipes = args.recipes or sorted(glob.glob(DEFAULT_RECIPES))
    runs = args.runs or tempfile.mkdtemp(prefix="tfaccel-tables-")
    load_before = os.getloadavg()
    print(f"CPU: {describe_cpu()}; load average (1, 5, 15 min) before: "
          + ", ".join(f"{x:.1f}" for x in load_before), flush=True)
    rows = []
    for recipe in recipes:
        table = Table(recipe)
        base = None if args.no_baselines else evaluate(table)
        results = []
        for seed in args.seeds:
            run_dir = os.path.join(runs, table.name, f"seed{seed}")
            result = train(recipe, seed=seed, run_dir=run_dir, overrides=args.overrides)
            print(json.dumps({"recipe": table.name, "seed": seed, "run_dir": run_dir,
                              **result}), flush=True)
            results.append(result)
        for metric in METRICS[table.task]:
            values = [logged(table.task, metric, r["last"]) for r in results if "last" in r]
            values = [v for v in values if v is not None]
            rows.append({"name": table.name, "task": table.task, "metric": metric,
                         "values": values, "failed": len(results) - len(values),
                         "walls": [r["wall_seconds"] for r in results if "last" in r],
                         "base": base})
    load_after = os.getloadavg()
    print(f"\nCPU: {describe_cpu()}\nload average (1, 5, 15 min) before "
          + ", ".join(f"{x:.1f}" for x in load_before) + ", after "
          + ", ".join(f"{x:.1f}" for x in load_after)
          + f"; seeds {args.seeds}; overrides {args.overrides or 'none'}\n")
    print("| table | task | metric | tfaccel mean ± sd (seeds) | range | linear | boosting | "
          "floor | reaches linear | wall s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        metric, values, base = row["metric"], row["values"], row["base"]
        if values:
            mean = float(np.mean(values))
            shown = f"{fmt(metric, mean)} ± {fmt(metric, float(np.std(values)))} " \
                    f"({len(values)})"
            spread = f"{fmt(metric, min(values))}-{fmt(metric, max(values))}"
            goal = ("yes" if reaches(metric, mean, base["linear"][metric]) else "NO") \
                if base else ""
        else:
            shown, spread, goal = f"failed ({row['failed']})", "", ""
        bars = [fmt(metric, base[k][metric]) if base else "" for k in
                ("linear", "boosting", "floor")]
        walls = "-".join(f"{w:.0f}" for w in (min(row["walls"]), max(row["walls"]))) \
            if row["walls"] else ""
        print(f"| {row['name']} | {row['task']} | {metric} | {shown} | {spread} | "
              f"{' | '.join(bars)} | {goal} | {walls} |")


if __name__ == "__main__":
    main()
