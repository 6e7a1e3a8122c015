"""The bars for the real-table recipes: scikit-learn on the very split and columns each recipe reads.

For every recipe (default: ``recipes/tables/*.yaml``) the baseline reads what the recipe
names: the training file (``data.path``), the test file (``data.validation_path``), the
label column(s) (``data.label_key``), the task (``data.task``; ``auto`` decided by
tfaccel's own label rule, `tfaccel.reading.labels.plan_labels`, NumPy only) and the columns
left out (``data.table.ignore``); ``data.table.categorical`` integer columns are
categories. Then, as a scikit-learn user writes it:

* linear: a ``Pipeline`` of a ``ColumnTransformer`` (numbers: ``SimpleImputer(median,
  add_indicator=True)`` then ``StandardScaler``; words and declared categories:
  ``SimpleImputer(constant "missing")`` then ``OneHotEncoder(handle_unknown="ignore")``)
  and ``LogisticRegression(max_iter=5000)`` (classification, binary; one per label under
  ``OneVsRestClassifier`` for multi_label) or ``RidgeCV`` (regression, alpha by efficient
  leave-one-out on the training split only, alphas 1e-3 .. 1e3);
* boosting: ``HistGradientBoostingClassifier`` / ``Regressor`` (defaults, random_state 0;
  missing numbers handled natively, words ``OrdinalEncoder``-ed and declared categorical;
  ``MultiOutputClassifier`` for multi_label);
* the floor: the majority class, or the training mean.

Metrics on the test file, as Keras reports them for the task: accuracy (classification,
binary: threshold 0.5; multi_label: the mean per-label accuracy, Keras' binary_accuracy),
ROC AUC (binary; multi_label: the mean of the labels' AUCs, Keras' ``AUC(multi_label=True)``),
MAE and RMSE (regression). Needs scikit-learn and pandas (``pip install scikit-learn pandas``;
measurement tools, not tfaccel dependencies).

    python benchmarks/real_data/prepare_penguins.py   # ... one per table (data.prepare)
    python benchmarks/real_data/table_baselines.py [RECIPE ...] [--json]
"""

import argparse
import glob
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))  # benchmarks/: machine.py
sys.path.insert(0, REPO)  # tfaccel's label rule (TF-free)
from machine import describe_cpu

DEFAULT_RECIPES = os.path.join(REPO, "recipes", "tables", "*.yaml")
# What each task is judged by, first the headline (the column of the runner's table).
METRICS = {"classification": ["accuracy"], "binary": ["accuracy", "auc"],
           "multi_label": ["accuracy", "auc"], "regression": ["mae", "rmse"]}
LOWER_IS_BETTER = {"mae", "rmse"}


class Table:
    """One recipe's table: its split read with pandas, its columns sorted as the recipe says.

    Attributes:
        name: The recipe's file name without ``.yaml``.
        task: classification, binary, multi_label or regression.
        labels: The label column(s), a list.
        numeric: Feature columns read as numbers.
        categorical: Feature columns that are words or declared categories.
        train, test: pandas DataFrames of the two files.
        prepare: The recipe's ``data.prepare`` command.
    """

    def __init__(self, recipe_path: str):
        import pandas as pd
        import yaml

        with open(recipe_path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle)["data"]
        self.name = os.path.splitext(os.path.basename(recipe_path))[0]
        self.prepare = data.get("prepare", "")
        folder = os.path.dirname(os.path.abspath(recipe_path))
        paths = [os.path.normpath(os.path.join(folder, data[key]))
                 for key in ("path", "validation_path")]
        for path in paths:
            if not os.path.exists(path):
                sys.exit(f"{recipe_path}: {path} does not exist. Prepare the data first: "
                         f"{self.prepare}")
        # pandas' default missing-value markers: "", NA, N/A, nan, null, ... (not "?").
        self.train, self.test = (pd.read_csv(path) for path in paths)
        label_key = data.get("label_key", "label")
        self.labels = list(label_key) if isinstance(label_key, list) else [label_key]
        table = data.get("table") or {}
        ignored = set(table.get("ignore") or ()) | set(self.labels)
        declared = set(table.get("categorical") or ())
        features = [c for c in self.train.columns if c not in ignored]
        self.categorical = [c for c in features
                            if c in declared or self.train[c].dtype == object
                            or str(self.train[c].dtype).startswith(("str", "string"))]
        self.numeric = [c for c in features if c not in self.categorical]
        self.task = self._task(data.get("task", "auto"))

    def _task(self, declared: str) -> str:
        from tfaccel.reading.labels import plan_labels

        values = self.train[self.labels].to_numpy()
        values = values[:, 0] if len(self.labels) == 1 else values
        if values.dtype == object:
            values = values.astype(str)
        return plan_labels(values, task=declared, where=f"{self.name}: data.label_key",
                           names=self.labels if len(self.labels) > 1 else None).task

    def xy(self, split: str):
        """``(features, targets)`` of ``"train"`` or ``"test"``; targets 1-D but for
        multi_label (n, L) and regression with several targets."""
        frame = self.train if split == "train" else self.test
        features = frame[self.numeric + self.categorical].copy()
        for column in self.categorical:  # one type per column for the encoders
            features[column] = features[column].astype(object).where(
                features[column].notna(), np.nan)
        targets = frame[self.labels].to_numpy()
        return features, (targets[:, 0] if len(self.labels) == 1 else targets)


def _linear(table: Table):
    from sklearn.compose import ColumnTransformer
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression, RidgeCV
    from sklearn.multiclass import OneVsRestClassifier
    from sklearn.pipeline import Pipeline, make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    columns = ColumnTransformer([
        ("numbers", make_pipeline(SimpleImputer(strategy="median", add_indicator=True),
                                  StandardScaler()), table.numeric),
        ("words", make_pipeline(SimpleImputer(strategy="constant", fill_value="missing"),
                                OneHotEncoder(handle_unknown="ignore")), table.categorical),
    ])
    if table.task == "regression":
        model = RidgeCV(alphas=np.logspace(-3, 3, 13))
    elif table.task == "multi_label":
        model = OneVsRestClassifier(LogisticRegression(max_iter=5000))
    else:
        model = LogisticRegression(max_iter=5000)
    return Pipeline([("columns", columns), ("model", model)])


def _boosting(table: Table):
    from sklearn.compose import ColumnTransformer
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
    from sklearn.multioutput import MultiOutputClassifier
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OrdinalEncoder

    columns = ColumnTransformer([
        ("numbers", "passthrough", table.numeric),
        ("words", OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=np.nan,
                                 encoded_missing_value=np.nan), table.categorical),
    ])
    # The ordinal codes come after the numbers: mark them as categories.
    categories = [False] * len(table.numeric) + [True] * len(table.categorical)
    options = {"random_state": 0, "categorical_features": categories or None}
    if table.task == "regression":
        model = HistGradientBoostingRegressor(**options)
    elif table.task == "multi_label":
        model = MultiOutputClassifier(HistGradientBoostingClassifier(**options))
    else:
        model = HistGradientBoostingClassifier(**options)
    return Pipeline([("columns", columns), ("model", model)])


def scores(task: str, truth, predicted, *, classes=None) -> dict:
    """The task's metrics (`METRICS`) of predictions on the test split.

    Args:
        task: classification, binary, multi_label or regression.
        truth: The test labels (class values, 0/1 columns, or targets).
        predicted: classification: class probabilities (n, K) with the classes sorted;
            binary: the probability of the second sorted class (n,); multi_label: (n, L)
            probabilities; regression: predictions shaped like `truth`.

    Returns:
        ``{metric: value}``.
    """
    from sklearn.metrics import mean_absolute_error, mean_squared_error, roc_auc_score

    if task == "regression":
        return {"mae": float(mean_absolute_error(truth, predicted)),
                "rmse": float(np.sqrt(mean_squared_error(truth, predicted)))}
    if task == "multi_label":
        truth = np.asarray(truth, dtype=int)
        return {"accuracy": float(np.mean((predicted >= 0.5) == truth)),
                "auc": float(roc_auc_score(truth, predicted, average="macro"))}
    classes = np.unique(truth) if classes is None else np.asarray(classes)
    if task == "binary":
        positive = np.asarray(truth) == classes[1]
        return {"accuracy": float(np.mean((predicted >= 0.5) == positive)),
                "auc": float(roc_auc_score(positive, predicted))}
    return {"accuracy": float(np.mean(classes[np.argmax(predicted, axis=1)] == truth))}


def _predict(model, task: str, x):
    if task == "regression":
        return model.predict(x)
    if task == "multi_label":
        probabilities = model.predict_proba(x)
        # MultiOutputClassifier: one (n, 2) array per label.
        return (np.stack([p[:, 1] for p in probabilities], axis=1)
                if isinstance(probabilities, list) else probabilities)
    probabilities = model.predict_proba(x)
    return probabilities[:, 1] if task == "binary" else probabilities


def floor(table: Table) -> dict:
    """The majority class (or per label; the training mean for regression) on the test split."""
    (_, y_train), (_, y_test) = table.xy("train"), table.xy("test")
    n = len(y_test)
    if table.task == "regression":
        return scores("regression", y_test, np.broadcast_to(np.mean(y_train, axis=0),
                                                            np.shape(y_test)))
    if table.task == "multi_label":
        rates = np.mean(np.asarray(y_train, dtype=float), axis=0)
        return scores("multi_label", y_test, np.broadcast_to(rates, (n, len(rates))))
    classes, counts = np.unique(y_train, return_counts=True)
    if table.task == "binary":
        return scores("binary", y_test, np.full(n, counts[1] / counts.sum()), classes=classes)
    return scores("classification", y_test,
                  np.broadcast_to(counts / counts.sum(), (n, len(classes))), classes=classes)


def evaluate(table: Table) -> dict:
    """Fits the linear model and the boosting on the training file; scores them on the test file.

    Returns:
        ``{"name", "task", "rows", "columns", "floor", "linear", "boosting", "seconds"}``.
    """
    (x_train, y_train), (x_test, y_test) = table.xy("train"), table.xy("test")
    result = {"name": table.name, "task": table.task,
              "rows": [len(x_train), len(x_test)],
              "columns": {"numeric": table.numeric, "categorical": table.categorical,
                          "labels": table.labels},
              "floor": floor(table)}
    for name, make in (("linear", _linear), ("boosting", _boosting)):
        start = time.perf_counter()
        target = y_train.astype(int) if table.task == "multi_label" else y_train
        model = make(table).fit(x_train, target)
        result[name] = scores(table.task, y_test, _predict(model, table.task, x_test),
                              classes=np.unique(y_train) if table.task in
                              ("classification", "binary") else None)
        result[f"{name}_seconds"] = round(time.perf_counter() - start, 2)
    return result


def fmt(metric: str, value: float) -> str:
    """A metric as the tables show it: errors with 4 significant figures, rates with 4
    decimals."""
    return f"{value:.4g}" if metric in LOWER_IS_BETTER else f"{value:.4f}"


def main() -> None:
    """Prints the CPU, then one row per recipe and metric (or one JSON line per recipe)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recipes", nargs="*", help=f"recipe files (default: {DEFAULT_RECIPES})")
    parser.add_argument("--json", action="store_true", help="one JSON line per recipe")
    args = parser.parse_args()
    recipes = args.recipes or sorted(glob.glob(DEFAULT_RECIPES))
    print(f"CPU: {describe_cpu()}; load average {os.getloadavg()[0]:.1f}")
    results = [evaluate(Table(path)) for path in recipes]
    if args.json:
        for result in results:
            print(json.dumps(result))
        return
    print("| table | task | train / test rows | metric | floor | linear | boosting |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        for metric in METRICS[r["task"]]:
            print(f"| {r['name']} | {r['task']} | {r['rows'][0]:,} / {r['rows'][1]:,} | "
                  f"{metric} | {fmt(metric, r['floor'][metric])} | "
                  f"{fmt(metric, r['linear'][metric])} | {fmt(metric, r['boosting'][metric])} |")


if __name__ == "__main__":
    main()
