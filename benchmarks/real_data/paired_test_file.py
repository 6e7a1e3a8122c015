"""A regression table recipe beside its linear baseline on the test file, row by row (paired).

`bench_tables.py` compares means over the test rows; with a test file of 88 rows the gap
between two such means is smaller than either's noise, and most of each row's error is
shared by the two models. This script compares them on the same rows: it trains the recipe
through ``tfaccel train`` once per seed (`bench_tables.train`; validation file = the test
file, the last epoch kept), predicts the test rows with each run's own model on the raw
columns (`tfaccel.tools.export.table_runs.model_on_raw_columns`: the run's column plan,
FeatureSpace and model.keras) and checks that those predictions give the MAE the run
logged, fits the linear baseline of `table_baselines.py` (RidgeCV on the same encoding),
and prints, per seed and for the seeds together, ours minus the baseline in MAE and RMSE
with a paired bootstrap interval over the rows and the Wilcoxon signed-rank p-value of the
per-row differences (`paired.paired_rows`). "seeds' mean error": each row's absolute
(squared) error averaged over the seeds, what one run of the recipe makes on that row in
expectation; "seeds' mean prediction": the seeds' predictions averaged first (an ensemble
of the runs, which the recipe does not ship). ``--versus`` adds one row: ours against
another setting's finished runs of the same seeds (both sides' errors averaged over the
seeds).

    python benchmarks/real_data/prepare_diabetes.py
    python benchmarks/real_data/paired_test_file.py recipes/tables/diabetes.yaml \
        --seeds 0 1 2 3 4 [--runs DIR] [--set KEY=VALUE] [--versus OTHER_RUNS]
"""

import argparse
import csv
import json
import os
import sys
import tempfile

import numpy as np
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_tables import train
from paired import paired_rows
from table_baselines import Table, _linear, describe_cpu


def run_predictions(run_dir: str, test_path: str, label: str) -> np.ndarray:
    """A run's predictions on the test file's rows, in file order, from the raw columns.

    Args:
        run_dir: A finished ``tfaccel train`` run of a one-target regression recipe.
        test_path: The test CSV file.
        label: Its target column (left out of the inputs).

    Returns:
        The predictions, shape (rows,).
    """
    # TensorFlow only here: the script's other steps (the baseline, the statistics) run
    # without it.
    from tfaccel.data.table_features import keras_names
    from tfaccel.tools.export.table_runs import model_on_raw_columns

    model = model_on_raw_columns(run_dir)
    with open(test_path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    columns = {safe: name for name, safe in
               keras_names(name for name in rows[0] if name != label).items()}
    # In the model's own input order (Keras warns when a dict's order differs).
    texts = {safe: np.array([row[columns[safe]] for row in rows], dtype=object)
             for safe in model.input}
    return np.asarray(model.predict(texts, verbose=0, batch_size=1024))[:, 0]


def compare(truth, ours, theirs, *, resamples: int, seed: int) -> dict:
    """MAE and RMSE of ours against theirs on the same rows (`paired.paired_rows`).

    Args:
        truth: The test targets, (rows,).
        ours: Our predictions, (rows,), or (seeds, rows) to compare each row's error
            averaged over the seeds.
        theirs: The other model's predictions, likewise.
        resamples: Bootstrap resamples.
        seed: The bootstrap's seed.
    """
    ours, theirs = np.atleast_2d(ours), np.atleast_2d(theirs)
    return {"mae": paired_rows(np.mean(np.abs(ours - truth), axis=0),
                               np.mean(np.abs(theirs - truth), axis=0),
                               resamples=resamples, seed=seed),
            "rmse": paired_rows(np.mean((ours - truth) ** 2, axis=0),
                                np.mean((theirs - truth) ** 2, axis=0), root=True,
                                resamples=resamples, seed=seed)}


def main() -> None:
    """Trains the seeds, predicts, compares; one JSON line per seed, then the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recipe", help="a regression table recipe, e.g. "
                                       "recipes/tables/diabetes.yaml")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        help="a KEY=VALUE override for every run (repeatable)")
    parser.add_argument("--runs", default=None,
                        help="folder for the run directories (default: a temporary one); "
                             "a seed whose run already finished there is not trained again")
    parser.add_argument("--versus", default=None, metavar="RUNS",
                        help="also compare with another setting's finished runs of the same "
                             "seeds (an earlier --runs folder), each row's error averaged "
                             "over the seeds on both sides")
    parser.add_argument("--resamples", type=int, default=10_000)
    parser.add_argument("--bootstrap-seed", type=int, default=0)
    args = parser.parse_args()
    table = Table(args.recipe)
    if table.task != "regression" or len(table.labels) != 1:
        sys.exit(f"{args.recipe}: a one-target regression recipe is needed; its task is "
                 f"{table.task} with labels {table.labels}")
    (x_train, y_train), (x_test, truth) = table.xy("train"), table.xy("test")
    truth = truth.astype(float)
    ridge = _linear(table).fit(x_train, y_train).predict(x_test)
    with open(args.recipe, encoding="utf-8") as handle:
        test_file = yaml.safe_load(handle)["data"]["validation_path"]
    test_path = os.path.join(os.path.dirname(os.path.abspath(args.recipe)), test_file)
    runs = args.runs or tempfile.mkdtemp(prefix="tfaccel-paired-")
    print(f"CPU: {describe_cpu()}; load average {os.getloadavg()[0]:.1f}", flush=True)
    predictions, rows = [], []
    for seed in args.seeds:
        run_dir = os.path.join(runs, table.name, f"seed{seed}")
        if not os.path.exists(os.path.join(run_dir, "model.keras")):
            result = train(args.recipe, seed=seed, run_dir=run_dir, overrides=args.overrides)
            if "error" in result:
                sys.exit(f"seed {seed} failed:\n{result['error']}")
        with open(os.path.join(run_dir, "metrics.jsonl"), encoding="utf-8") as handle:
            logged = [json.loads(line) for line in handle if line.strip()]
        logged_mae = [r["val_mae"] for r in logged if "val_mae" in r][-1]
        predicted = run_predictions(run_dir, test_path, table.labels[0])
        predictions.append(predicted)
        result = compare(truth, predicted, ridge, resamples=args.resamples,
                         seed=args.bootstrap_seed)
        # The predictions must be the run's: their MAE is the one it logged (float32 sums).
        mae = result["mae"]["ours"]
        if abs(mae - logged_mae) > 0.01:
            sys.exit(f"seed {seed}: predictions give MAE {mae:.4f}, the run logged "
                     f"{logged_mae:.4f}: not the run's model")
        print(json.dumps({"seed": seed, "run_dir": run_dir, "logged_mae": logged_mae,
                          **result}), flush=True)
        rows.append((f"seed {seed}", result))
    if len(predictions) > 1:
        rows.append(("seeds' mean error", compare(truth, np.stack(predictions), ridge,
                                                  resamples=args.resamples,
                                                  seed=args.bootstrap_seed)))
        rows.append(("seeds' mean prediction", compare(truth, np.mean(predictions, axis=0),
                                                       ridge, resamples=args.resamples,
                                                       seed=args.bootstrap_seed)))
    if args.versus:
        others = [run_predictions(os.path.join(args.versus, table.name, f"seed{seed}"),
                                  test_path, table.labels[0]) for seed in args.seeds]
        rows.append((f"seeds' mean error vs {args.versus}'s",
                     compare(truth, np.stack(predictions), np.stack(others),
                             resamples=args.resamples, seed=args.bootstrap_seed)))
    print(f"\n{table.name}: ours minus the linear baseline (RidgeCV; or the runs named) on "
          f"the test file's {len(truth)} rows; {args.resamples:,} paired bootstrap resamples (seed "
          f"{args.bootstrap_seed}), 95% percentile intervals; Wilcoxon signed-rank on the "
          f"per-row differences; overrides {args.overrides or 'none'}\n")
    print("| tfaccel | MAE ours / theirs | MAE difference [95% interval] | Wilcoxon p | rows "
          "lower / higher | RMSE ours / theirs | RMSE difference [95% interval] |")
    print("|---|---|---|---|---|---|---|")
    for name, result in rows:
        mae, rmse = result["mae"], result["rmse"]
        print(f"| {name} | {mae['ours']:.2f} / {mae['theirs']:.2f} | "
              f"{mae['difference']:+.2f} [{mae['interval'][0]:+.2f}, "
              f"{mae['interval'][1]:+.2f}] | {mae['wilcoxon_p']:.2g} | "
              f"{mae['lower']} / {mae['higher']} | {rmse['ours']:.2f} / {rmse['theirs']:.2f} "
              f"| {rmse['difference']:+.2f} [{rmse['interval'][0]:+.2f}, "
              f"{rmse['interval'][1]:+.2f}] |")


if __name__ == "__main__":
    main()
