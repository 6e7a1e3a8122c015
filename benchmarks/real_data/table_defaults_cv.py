"""Cross-validation on the TRAINING file only, to choose the small-table MLP's defaults.

For each recipe named (default: the two small tables where the recipe missed the linear
bar, breast_cancer and diabetes), the training file (``data.path``) is split into K folds
(stratified for classification, seeded, repeated R times); each candidate is fitted on
K-1 folds and scored on the held-out fold. The test file (``data.validation_path``) is
never read. The rows are encoded as the linear baseline encodes them (median imputation
with missing indicators, standard scaling, one-hot words: what tfaccel's FeatureSpace
does, up to mean vs median imputation); the models are tfaccel's own ``mlp`` builder
(`tfaccel.models.build_model`) with the recipe's optimizer, epochs and batch, so a
candidate here is a setting a recipe can take. Prints the mean and standard deviation of
each candidate's fold metrics and the linear baseline's on the same folds, then each
candidate paired fold by fold with the linear baseline and with the first candidate named
(`paired.paired_folds`: mean difference, sd, folds lower, corrected resampled t interval).

    python benchmarks/real_data/table_defaults_cv.py [RECIPE ...] [--folds 5] [--repeats 2]
"""

import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from paired import paired_folds
from table_baselines import REPO, Table, _linear, describe_cpu, scores

sys.path.insert(0, REPO)

SMALL = [os.path.join(REPO, "recipes", "tables", f"{n}.yaml")
         for n in ("breast_cancer", "diabetes")]

# name -> (mlp params, fit settings). "recipe" takes the recipe's own params.
CANDIDATES = {
    "recipe": ({}, {}),
    "l2_1e-3": ({"l2": 1e-3}, {}),
    "l2_1e-2": ({"l2": 1e-2}, {}),
    "linear_path": ({"linear_path": True}, {}),
    "early_stop_inner": ({}, {"early_stop": True}),
    "linear_path_l2_1e-2": ({"linear_path": True, "l2": 1e-2}, {}),
    # Session 17: each beside the linear path (the default they would join).
    "members_3": ({"linear_path": True, "members": 3}, {}),
    "members_5": ({"linear_path": True, "members": 5}, {}),
    "members_10": ({"linear_path": True, "members": 10}, {}),
    "linear_path_cosine": ({"linear_path": True}, {"schedule": "cosine"}),
    "linear_path_lr_third": ({"linear_path": True}, {"lr_factor": 1 / 3}),
    "linear_path_smooth_0.1": ({"linear_path": True}, {"label_smoothing": 0.1}),
    "members_5_cosine": ({"linear_path": True, "members": 5}, {"schedule": "cosine"}),
    # Session 17, regression (diabetes): the deep path held back, or the start moved.
    "deep_zero": ({"linear_path": True}, {"deep_zero": True}),
    "bias_mean": ({"linear_path": True}, {"bias_mean": True}),
    "bias_mean_deep_zero": ({"linear_path": True}, {"bias_mean": True, "deep_zero": True}),
    "dropout_0.3": ({"linear_path": True, "dropout": 0.3}, {}),
    "hidden_16": ({"linear_path": True, "hidden_units": [16]}, {}),
    "hidden_8": ({"linear_path": True, "hidden_units": [8]}, {}),
    "l2_1": ({"linear_path": True, "l2": 1.0}, {}),
    "epochs_x2_plateau": ({"linear_path": True}, {"epochs_factor": 2, "plateau": True}),
    "dropout_0.2": ({"linear_path": True, "dropout": 0.2}, {}),
    "dropout_0.5": ({"linear_path": True, "dropout": 0.5}, {}),
    "dropout_0.3_deep_zero": ({"linear_path": True, "dropout": 0.3}, {"deep_zero": True}),
    "l2_10": ({"linear_path": True, "l2": 10.0}, {}),
    "hidden_64_32": ({"linear_path": True, "hidden_units": [64, 32]}, {}),
    # Session 18, regression (diabetes): averaged weights and a loss nearer the MAE judged.
    # ema_M: Adam's use_ema (Keras swaps the average in at the end of fit); swa_F: the
    # plain mean of the weights at the end of each of the last F of the epochs.
    "ema_0.99": ({"linear_path": True}, {"ema": 0.99}),
    "ema_0.995": ({"linear_path": True}, {"ema": 0.995}),
    "ema_0.999": ({"linear_path": True}, {"ema": 0.999}),
    "swa_0.25": ({"linear_path": True}, {"swa": 0.25}),
    "swa_0.5": ({"linear_path": True}, {"swa": 0.5}),
    "loss_mae": ({"linear_path": True}, {"loss": "mae"}),
    "loss_huber_std": ({"linear_path": True}, {"loss": "huber_std"}),
    "loss_mae_ema_0.99": ({"linear_path": True}, {"loss": "mae", "ema": 0.99}),
    # The step: its size (rate, batch) and how many (epochs).
    "lr_x3_epochs_0.6": ({"linear_path": True}, {"lr_factor": 10 / 3, "epochs_factor": 0.6}),
    "batch_16": ({"linear_path": True}, {"batch_factor": 0.5}),
    "batch_64": ({"linear_path": True}, {"batch_factor": 2}),
    "epochs_x1.5": ({"linear_path": True}, {"epochs_factor": 1.5}),
    "epochs_x0.7": ({"linear_path": True}, {"epochs_factor": 0.7}),
    # Session 19, regression (diabetes, the recipe at 150 epochs): more of what helped
    # (the training loss still falls at the last epoch), and the last steps' noise damped
    # without a lagging average: the rate a tenth for the last 20% of the epochs (a
    # warm-up-stable-decay shape; a recipe says it with PiecewiseConstantDecay).
    "epochs_x4/3": ({"linear_path": True}, {"epochs_factor": 4 / 3}),
    "decay_last_0.2": ({"linear_path": True}, {"decay_last": 0.2}),
}


def encoder(table):
    """The linear baseline's column transformer (its model step dropped)."""
    return _linear(table).steps[0][1]


def fit_score(table, recipe, *, x_tr, y_tr, x_va, y_va, params, settings, seed):
    """Fits one tfaccel mlp on (x_tr, y_tr); its metrics on (x_va, y_va)."""
    import keras

    from tfaccel import models

    keras.utils.set_random_seed(seed)
    model_params = {**recipe["model"].get("params", {}), "normalization": "none", **params}
    task = table.task
    outputs = 1 if task in ("binary", "regression") else len(np.unique(y_tr))
    model = models.build_model("mlp", input_shape=(x_tr.shape[1],), task=task,
                               num_classes=outputs, **model_params)
    loss = {"binary": "binary_crossentropy", "regression": "mse",
            "classification": "sparse_categorical_crossentropy"}[task]
    if settings.get("loss") == "mae":
        loss = "mae"
    elif settings.get("loss") == "huber_std":
        # Quadratic within one standard deviation of the training labels, linear beyond.
        loss = keras.losses.Huber(delta=float(np.std(y_tr)))
    if settings.get("label_smoothing") and task == "binary":
        loss = keras.losses.BinaryCrossentropy(label_smoothing=settings["label_smoothing"])
    epochs = round(recipe["training"]["epochs"] * settings.get("epochs_factor", 1))
    if settings.get("deep_zero"):
        # The deep path's output layer starts at zero: the model starts as the linear one.
        deep = model.get_layer("deep")
        deep.kernel.assign(np.zeros(deep.kernel.shape, "float32"))
    if settings.get("bias_mean"):
        # The head starts at the training rows' mean label (regression) instead of 0.
        model.get_layer("wide").bias.assign(np.full((outputs,), y_tr.mean(), "float32"))
    batch = round(recipe["training"]["global_batch_size"] * settings.get("batch_factor", 1))
    rate = float(recipe["optimizer"]["learning_rate"]) * settings.get("lr_factor", 1.0)
    if settings.get("schedule") == "cosine":
        # To zero over the run's steps, as the recipe key optimizer.schedule: cosine does.
        steps = epochs * -(-len(x_tr) // batch)
        rate = keras.optimizers.schedules.CosineDecay(rate, decay_steps=steps)
    if settings.get("decay_last"):
        # The rate divided by 10 from the step where the last `decay_last` of the epochs
        # starts (Keras' PiecewiseConstantDecay, as optimizer.schedule can name it).
        steps = epochs * -(-len(x_tr) // batch)
        rate = keras.optimizers.schedules.PiecewiseConstantDecay(
            [round(steps * (1 - settings["decay_last"]))], [rate, rate / 10])
    averaging = ({"use_ema": True, "ema_momentum": settings["ema"]}
                 if settings.get("ema") else {})
    model.compile(optimizer=keras.optimizers.Adam(rate, **averaging), loss=loss)
    if settings.get("early_stop"):
        # An inner 20% of this fold's training rows judges the epochs; the best restored.
        order = np.random.RandomState(seed).permutation(len(x_tr))
        cut = int(0.8 * len(x_tr))
        inner, held = order[:cut], order[cut:]
        stop = keras.callbacks.EarlyStopping(patience=max(10, epochs // 5),
                                             restore_best_weights=True)
        model.fit(x_tr[inner], y_tr[inner], validation_data=(x_tr[held], y_tr[held]),
                  epochs=epochs * 3, batch_size=batch, verbose=0, callbacks=[stop])
    else:
        # Reduce-on-plateau watches the training loss (no held-out rows to spare).
        callbacks = ([keras.callbacks.ReduceLROnPlateau(monitor="loss", factor=0.5,
                                                        patience=10, min_lr=1e-5)]
                     if settings.get("plateau") else [])
        if settings.get("swa"):
            callbacks.append(_WeightMean(first=epochs - round(settings["swa"] * epochs)))
        model.fit(x_tr, y_tr, epochs=epochs, batch_size=batch, verbose=0,
                  callbacks=callbacks)
    predicted = model.predict(x_va, verbose=0, batch_size=1024)
    if task in ("binary", "regression"):
        predicted = predicted[:, 0]
    return with_log_loss(task, y_va, predicted, scores(task, y_va, predicted))


def _WeightMean(*, first):
    """A callback: the mean of the weights at the end of epochs first.. set at the end."""
    import keras

    class WeightMean(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.total, self.count = None, 0

        def on_epoch_end(self, epoch, logs=None):
            if epoch < first:
                return
            weights = self.model.get_weights()
            self.total = (weights if self.total is None
                          else [t + w for t, w in zip(self.total, weights)])
            self.count += 1

        def on_train_end(self, logs=None):
            self.model.set_weights([t / self.count for t in self.total])

    return WeightMean()


def with_log_loss(task, truth, predicted, metrics):
    """`metrics` with the binary log loss (more sensitive than AUC near 1: overconfidence)."""
    if task == "binary":
        from sklearn.metrics import log_loss

        metrics["log_loss"] = float(log_loss(truth, np.clip(predicted, 1e-7, 1 - 1e-7),
                                             labels=[0, 1]))
    return metrics


def main() -> None:
    """Every candidate on every fold of every named recipe's training file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recipes", nargs="*")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--first-repeat", type=int, default=0,
                        help="start at this repeat (another run did the earlier ones)")
    parser.add_argument("--candidates", nargs="+", default=list(CANDIDATES))
    parser.add_argument("--reference", default=None,
                        help="the candidate the others are paired with besides the linear "
                             "baseline (default: the first named)")
    parser.add_argument("--from-logs", nargs="+", default=None, metavar="LOG",
                        help="train nothing: the summary and the paired comparisons of "
                             "earlier runs' outputs on the same folds (their candidates "
                             "together; the linear baseline must agree fold by fold)")
    args = parser.parse_args()
    print(f"CPU: {describe_cpu()}; load average {os.getloadavg()[0]:.1f}", flush=True)
    for path in args.recipes or SMALL:
        table = Table(path)
        if args.from_logs:
            results, done = logged_folds(args.from_logs, table=table.name)
            first = args.reference or next(n for n in results if n != "linear")
        else:
            results, done = cross_validate(path, table, args)
            first = args.reference or args.candidates[0]
        repeats = sorted({repeat for repeat, _ in done})
        folds = 1 + max(fold for _, fold in done)  # K (--folds, or the logs' K)
        print(f"\n{table.name} ({table.task}), {folds}-fold, repeats "
              f"{repeats[0]}-{repeats[-1]}, on the training file ({len(table.train)} rows):")
        for name, runs in results.items():
            cells = [f"{m} {np.mean([r[m] for r in runs]):.4f} ± "
                     f"{np.std([r[m] for r in runs]):.4f}" for m in runs[0]]
            print(f"  {name:18s} " + "; ".join(cells), flush=True)
        print_paired(results, folds=folds, first=first)


def cross_validate(path: str, table, args) -> tuple:
    """Every candidate and the linear baseline on every fold of `table`'s training file.

    Returns:
        ``({name: [{metric: value} per fold]}, [(repeat, fold) in order])``; one JSON
        line printed per fold.
    """
    import yaml
    from sklearn.model_selection import KFold, StratifiedKFold

    with open(path, encoding="utf-8") as handle:
        recipe = yaml.safe_load(handle)
    x_all, y_all = table.xy("train")
    if table.task == "binary":
        classes = sorted(np.unique(y_all))
        y_all = (y_all == classes[1]).astype("float32")
    results = {name: [] for name in ["linear"] + args.candidates}
    done = []
    for repeat in range(args.first_repeat, args.repeats):
        split = (StratifiedKFold if table.task != "regression" else KFold)(
            args.folds, shuffle=True, random_state=repeat)
        for fold, (tr, va) in enumerate(split.split(x_all, y_all)):
            columns = encoder(table).fit(x_all.iloc[tr])
            x_tr = np.asarray(columns.transform(x_all.iloc[tr]), "float32")
            x_va = np.asarray(columns.transform(x_all.iloc[va]), "float32")
            y_tr, y_va = y_all[tr], y_all[va]
            linear = _linear(table).fit(x_all.iloc[tr], y_tr)
            predicted = (linear.predict_proba(x_all.iloc[va])[:, 1]
                         if table.task == "binary" else linear.predict(x_all.iloc[va]))
            results["linear"].append(with_log_loss(table.task, y_va, predicted,
                                                   scores(table.task, y_va, predicted)))
            for name in args.candidates:
                params, settings = CANDIDATES[name]
                results[name].append(fit_score(
                    table, recipe, x_tr=x_tr, y_tr=y_tr, x_va=x_va, y_va=y_va,
                    params=params, settings=settings, seed=100 * repeat + fold))
            done.append((repeat, fold))
            print(json.dumps({"table": table.name, "repeat": repeat, "fold": fold,
                              **{n: r[-1] for n, r in results.items()}}), flush=True)
    return results, done


def logged_folds(logs: list, *, table: str) -> tuple:
    """The fold results of earlier runs of this script on the same folds, put together.

    Args:
        logs: Their outputs (one JSON line per fold); each must hold the same folds in
            the same order, and the same linear baseline on each (it is deterministic: a
            different figure means different folds).
        table: The table's name (other tables' lines are left out).

    Returns:
        As `cross_validate`: every candidate of every log (the first log's if a name
        repeats), "linear" first.
    """
    results, done = {}, None
    for log in logs:
        with open(log, encoding="utf-8") as handle:
            lines = [json.loads(line) for line in handle if line.startswith("{")]
        lines = [line for line in lines if line.get("table") == table]
        folds = [(line["repeat"], line["fold"]) for line in lines]
        metric = next(iter(lines[0]["linear"])) if lines else None
        if done is not None and (folds != done or not np.allclose(
                [line["linear"][metric] for line in lines],
                [r[metric] for r in results["linear"]])):
            sys.exit(f"--from-logs {log}: its {len(folds)} folds of {table} are not the {len(done)} of "
                     f"{logs[0]}")
        done = folds
        for name in lines[0] if lines else ():
            if name not in ("table", "repeat", "fold") and name not in results:
                results[name] = [line[name] for line in lines]
    if not done:
        sys.exit(f"--from-logs: no folds of {table} in {logs}")
    return results, done


def print_paired(results: dict, *, folds: int, first: str) -> None:
    """Each candidate against the linear baseline and against the first candidate, fold by
    fold on the same folds (`paired.paired_folds`).

    Args:
        results: ``{name: [{metric: value} per fold]}``, "linear" among them, the same
            folds in the same order for every name.
        folds: K of the K-fold split (a fold holds out 1/K: the correction's 1/(K-1)).
        first: The candidate the others are compared with besides "linear"
            (``--reference``, or the first named).
    """
    print(f"\n  paired, fold by fold (ours minus the reference; sd over the folds; lower: "
          f"folds where ours was lower; corrected resampled t, 95%, test share 1/{folds - 1}):")
    for reference in dict.fromkeys(["linear", first]):
        for name, runs in results.items():
            if name in ("linear", reference):
                continue
            cells = []
            for metric in runs[0]:
                paired = paired_folds([r[metric] for r in runs],
                                      [r[metric] for r in results[reference]],
                                      test_share=1 / (folds - 1))
                cells.append(f"{metric} {paired['difference']:+.4f} ± {paired['sd']:.4f}, "
                             f"lower on {paired['lower']} of {paired['folds']}, "
                             f"[{paired['interval'][0]:+.4f}, {paired['interval'][1]:+.4f}]"
                             f" p {paired['p']:.3f}")
            print(f"  {name} vs {reference}: " + "; ".join(cells), flush=True)


if __name__ == "__main__":
    main()
