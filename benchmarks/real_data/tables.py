"""Real tables through the csv recipe path vs logistic regression on the same held-out rows.

Tables (for measuring only; no test runs this): scikit-learn's bundled wine (178 rows, 13
numbers, 3 classes) and breast cancer (569 rows, 30 numbers, 2 classes), and palmerpenguins'
344 penguins (species from island, sex, 4 measurements with NA in 2 rows and sex NA in 11,
year; the issue's case). Needs `pip install scikit-learn palmerpenguins` (not tfaccel
dependencies).

Each table is split per seed, stratified 80/20, and written as 5 CSV files: the held-out
rows go into the file the recipe's ``validation_fraction: 0.2`` holds out (the seeded file
rule), so `tfaccel train` and the baseline see the same rows. The baseline: scikit-learn's
mean imputation with indicators, standard scaling, one-hot text columns and
LogisticRegression (C=1, lbfgs). The recipe: ``model: {name: mlp}`` with the given params.

    python benchmarks/real_data/tables.py                      # every table, seeds 0-2
    python benchmarks/real_data/tables.py --tables penguins --seeds 0 \\
        --set model.params.hidden_units=[64,32]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

TABLES = ("wine", "breast_cancer", "penguins")
# The recipe measured: the mlp on the encoded columns (normalisation inside the pipeline).
RECIPE = """\
name: {name}
seed: {seed}
data:
  source: csv
  path: {folder}/part-*.csv
  label_key: {label}
  validation_fraction: 0.2
model: {{name: mlp}}
training: {{epochs: {epochs}, global_batch_size: {batch}}}
runtime: {{verbose: 0, runs_dir: {folder}/runs, precision: float32}}
"""


def load(name: str):
    """``(DataFrame with the label column, label column name)`` of table `name`."""
    if name == "penguins":
        import palmerpenguins

        return palmerpenguins.load_penguins(), "species"
    from sklearn import datasets

    loaded = getattr(datasets, f"load_{name}")(as_frame=True)
    frame = loaded.frame.rename(columns=lambda c: c.replace("/", "_").replace(" ", "_"))
    return frame, "target"


def write_split(frame, label: str, folder: str, *, seed: int = 0):
    """The stratified 80/20 split written as 5 files, the held-out rows where the recipe's
    seeded file rule holds out; ``(train frame, held-out frame)``."""
    from sklearn.model_selection import train_test_split

    sys.path.insert(0, os.getcwd())
    from tfaccel.data import splits

    train, held = train_test_split(frame, test_size=0.2, stratify=frame[label],
                                   random_state=seed)
    names = [os.path.join(folder, f"part-{i}.csv") for i in range(5)]
    _, held_files = splits.held_out_files(names, 0.2, seed, what="CSV files")
    parts = np.array_split(np.arange(len(train)), 4)
    k = 0
    for path in names:
        rows = held if path in held_files else train.iloc[parts[(k := k + 1) - 1]]
        rows.to_csv(path, index=False, na_rep="NA")
    return train, held


def baseline(train, held, label: str) -> float:
    """Logistic regression on the same split (imputed, scaled, one-hot): held-out accuracy."""
    from sklearn.compose import make_column_transformer
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    features = [c for c in train.columns if c != label]
    from pandas.api.types import is_numeric_dtype

    text = [c for c in features if not is_numeric_dtype(train[c])]
    numbers = [c for c in features if c not in text]
    prepare = make_column_transformer(
        (make_pipeline(SimpleImputer(add_indicator=True), StandardScaler()), numbers),
        (make_pipeline(SimpleImputer(strategy="constant", fill_value="[missing]"),
                       OneHotEncoder(handle_unknown="ignore")), text))
    model = make_pipeline(prepare, LogisticRegression(max_iter=5000))
    model.fit(train[features].astype({c: str for c in text}), train[label].astype(str))
    return float(model.score(held[features].astype({c: str for c in text}),
                             held[label].astype(str)))


def run_recipe(folder: str, *, name: str, label: str, seed: int, epochs: int, batch: int,
               settings) -> dict:
    """`tfaccel train` of the recipe; the kept model's held-out accuracy and the plan line."""
    recipe = os.path.join(folder, f"recipe-{seed}.yaml")
    with open(recipe, "w") as handle:
        handle.write(RECIPE.format(name=name, seed=seed, folder=folder, label=label,
                                   epochs=epochs, batch=batch))
    run_dir = os.path.join(folder, f"run-{seed}")
    args = ["tfaccel", "train", recipe, "--run-dir", run_dir]
    for setting in settings:
        args += ["--set", setting]
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(done.stdout + done.stderr)
    summary = json.load(open(os.path.join(run_dir, "summary.json")))
    metrics = summary.get("saved_model_metrics") or summary["final_metrics"]
    plan = next((line for line in done.stdout.splitlines() if "table:" in line), "")
    return {"val_accuracy": metrics.get("val_accuracy"), "plan": plan.strip(),
            "wall_s": summary.get("wall_time_s")}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", nargs="+", default=list(TABLES), choices=TABLES)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--epochs", type=int, default=60)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--set", dest="settings", action="append", default=[])
    args = parser.parse_args()
    for name in args.tables:
        frame, label = load(name)
        line = {"table": name, "rows": len(frame)}
        for seed in args.seeds:
            # Each seed: its own stratified split (the recipe's seed also picks the file it
            # holds out), the baseline and the recipe on it.
            folder = tempfile.mkdtemp(prefix=f"tfaccel-{name}-{seed}-")
            train, held = write_split(frame, label, folder, seed=seed)
            got = run_recipe(folder, name=name, label=label, seed=seed, epochs=args.epochs,
                             batch=args.batch, settings=args.settings)
            line[f"seed{seed}"] = {"held_out": len(held),
                                   "logistic": round(baseline(train, held, label), 4),
                                   "recipe": got["val_accuracy"] and round(got["val_accuracy"], 4)}
            line["plan"] = got["plan"]
        print(json.dumps(line), flush=True)

if __name__ == "__main__":
    main()
