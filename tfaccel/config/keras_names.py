"""Keras' optimizer, schedule, loss and metric names, and their TF-free recipe checks."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from tfaccel import python_refs
from tfaccel.errors import RecipeError, did_you_mean

# Copies of Keras' own names, so `tfaccel validate` names a misspelt one without importing
# Keras; tests/test_keras_names.py fails when Keras adds or removes one. Optimizers: the
# optimizer classes keras.optimizers exports, lower-cased as keras.optimizers.get takes them
# (lamb included, which Keras 3.15 exports but its get does not know). Schedules: the
# classes keras.optimizers.schedules exports. Losses and metrics: the names keras.losses.get
# and keras.metrics.get take (a function's or a class's). Left out: base classes and
# wrappers (Optimizer, LossScaleOptimizer, MultiOptimizer, Loss, Metric, MeanMetricWrapper).
OPTIMIZERS = ("adadelta", "adafactor", "adagrad", "adam", "adamax", "adamw", "ftrl", "lamb",
              "lion", "muon", "nadam", "rmsprop", "schedulefreeadamw", "sgd")
# Keras' class names exactly (the one spelling `keras.optimizers.schedules` exports).
KERAS_SCHEDULES = ("CosineDecay", "CosineDecayRestarts", "ExponentialDecay",
                   "InverseTimeDecay", "PiecewiseConstantDecay", "PolynomialDecay")
# tfaccel's own schedules: warm-up and decay given in epochs of the run.
OWN_SCHEDULES = ("constant", "cosine")
LOSSES = (
    "BCE", "BinaryCrossentropy", "BinaryFocalCrossentropy", "CTC", "CategoricalCrossentropy",
    "CategoricalFocalCrossentropy", "CategoricalHinge", "Circle", "CosineSimilarity", "Dice",
    "Hinge", "Huber", "KLD", "KLDivergence", "LogCosh", "MAE", "MAPE", "MSE", "MSLE",
    "MeanAbsoluteError", "MeanAbsolutePercentageError", "MeanSquaredError",
    "MeanSquaredLogarithmicError", "Poisson", "SparseCategoricalCrossentropy", "SquaredHinge",
    "Tversky", "bce", "binary_crossentropy", "binary_focal_crossentropy",
    "categorical_crossentropy", "categorical_focal_crossentropy", "categorical_hinge",
    "circle", "cosine_similarity", "ctc", "dice", "hinge", "huber", "kl_divergence", "kld",
    "log_cosh", "mae", "mape", "mean_absolute_error", "mean_absolute_percentage_error",
    "mean_squared_error", "mean_squared_logarithmic_error", "mse", "msle", "poisson",
    "sparse_categorical_crossentropy", "squared_hinge", "tversky")
METRICS = (
    "AUC", "Accuracy", "BCE", "BinaryAccuracy", "BinaryCrossentropy", "BinaryIoU",
    "CategoricalAccuracy", "CategoricalCrossentropy", "CategoricalHinge",
    "ConcordanceCorrelation", "CosineSimilarity", "F1Score", "FBetaScore", "FalseNegatives",
    "FalsePositives", "Hinge", "IoU", "KLDivergence", "LogCoshError", "MAE", "MAPE", "MSE",
    "MSLE", "Mean", "MeanAbsoluteError", "MeanAbsolutePercentageError", "MeanIoU",
    "MeanSquaredError", "MeanSquaredLogarithmicError", "OneHotIoU", "OneHotMeanIoU",
    "PearsonCorrelation", "Poisson", "Precision", "PrecisionAtRecall", "R2Score", "Recall",
    "RecallAtPrecision", "RootMeanSquaredError", "SensitivityAtSpecificity",
    "SparseCategoricalAccuracy", "SparseCategoricalCrossentropy",
    "SparseTopKCategoricalAccuracy", "SpecificityAtSensitivity", "SquaredHinge", "Sum",
    "TopKCategoricalAccuracy", "TrueNegatives", "TruePositives", "accuracy", "auc", "bce",
    "binary_accuracy", "binary_crossentropy", "binary_io_u", "categorical_accuracy",
    "categorical_crossentropy", "categorical_hinge", "concordance_correlation",
    "cosine_similarity", "f1_score", "f_beta_score", "false_negatives", "false_positives",
    "hinge", "io_u", "kl_divergence", "log_cosh_error", "mae", "mape", "mean",
    "mean_absolute_error", "mean_absolute_percentage_error", "mean_io_u",
    "mean_squared_error", "mean_squared_logarithmic_error", "mse", "msle",
    "one_hot_io_u", "one_hot_mean_io_u", "pearson_correlation", "poisson", "precision",
    "precision_at_recall", "r2_score", "recall", "recall_at_precision",
    "root_mean_squared_error", "sensitivity_at_specificity", "sparse_categorical_accuracy",
    "sparse_categorical_crossentropy", "sparse_top_k_categorical_accuracy",
    "specificity_at_sensitivity", "squared_hinge", "sum", "top_k_categorical_accuracy",
    "true_negatives", "true_positives")
# Names Keras' compile() resolves itself from the labels' and predictions' shapes (binary,
# categorical or sparse): no one class stands behind them, so they take no params. Only
# "accuracy" is in Keras' metric registry too (as the Accuracy class compile does not use).
COMPILE_LOSSES = ("crossentropy", "ce")
COMPILE_METRICS = ("accuracy", "acc")
_METRIC_NAMES = METRICS + tuple(m for m in COMPILE_METRICS if m not in METRICS)
# The optimizer section's own keys that set an optimizer argument: each setting has one
# place, so optimizer.params may not hold them. Keras' gradient_accumulation_steps would
# accumulate a second time, inexactly under tf.distribute: training.accumulation_steps does.
OPTIMIZER_SHORTCUTS = ("learning_rate", "momentum", "weight_decay", "clipnorm")
OWN_OPTIMIZER_ARGUMENTS = {"gradient_accumulation_steps": "training.accumulation_steps"}
# Why an optimizer's `use_ema` is refused, wherever it comes from (recipe or module:callable):
# Keras' fit validates each epoch with the raw weights and swaps the average in after the
# last one.
EMA_REFUSED_BECAUSE = (
    "Keras swaps the averaged weights in only after the last epoch's validation: with "
    "training.keep: last the saved model would not be the one the logged validation figures "
    "describe, with keep: best the average would be dropped for the best epoch's raw weights.")
METRIC_MAPPING_KEYS = ("name", "params")
# training.loss and training.metrics: the task's own
# (tfaccel.training.keras_objects.losses.TASK_LOSSES).
AUTO = "auto"
# `is_callable_spec` as a JSON Schema pattern (for editors).
CALLABLE_PATTERN = ":"


def name_schemas() -> dict[str, dict]:
    """JSON Schemas of the keys that take a Keras name or a ``module:callable``, by key.

    For `tfaccel.config.schema`: an editor then completes Keras' names and flags a
    misspelt one, as `tfaccel validate` does.
    """
    def name(choices: tuple) -> dict:
        return {"anyOf": [{"enum": list(choices)},
                          {"type": "string", "pattern": CALLABLE_PATTERN}]}

    metric = name(_METRIC_NAMES)
    mapping = {"type": "object", "required": ["name"], "additionalProperties": False,
               "properties": {"name": metric, "params": {"type": ["object", "null"]}}}
    return {"optimizer.name": name(OPTIMIZERS),
            "optimizer.schedule": name(OWN_SCHEDULES + KERAS_SCHEDULES),
            "training.loss": name((AUTO,) + LOSSES + COMPILE_LOSSES),
            "training.metrics": {"anyOf": [
                {"const": AUTO},
                {"type": "array", "items": {"anyOf": metric["anyOf"] + [mapping]}}]}}


# The arguments of the Keras/tf.data function a `from_*` builder replaces that the builder
# does not take under the same name, by builder: (the function replaced, {argument: what
# tfaccel does instead}). `tfaccel.data.tail.assemble.refuse_unknown` answers them with
# this sentence rather than a did-you-mean, which would point at a look-alike with another
# meaning (make_csv_dataset's shuffle_seed is not tfaccel's shuffle_buffer); a test keeps
# each table equal to the function's signature minus the builder's own arguments.
KERAS_ARGUMENT_HINTS: dict[str, tuple[str, dict[str, str]]] = {
    "from_csv": ("tf.data.experimental.make_csv_dataset", {
        "num_epochs": "from_csv yields one pass over the rows per epoch, with a known length, "
                      "and Keras' fit repeats it: pass epochs= to fit",
        "shuffle": "shuffling is on by default (the files permuted once, seeded, then the rows "
                   "in a buffer); shuffle_buffer=0 reads files and rows in order",
        "shuffle_buffer_size": "use shuffle_buffer= (rows; None: every row up to 100,000)",
        "shuffle_seed": "use seed= (it seeds the file order, the row shuffle and augmentation)",
        "prefetch_buffer_size": "every tfaccel pipeline ends with prefetch(AUTOTUNE) "
                                "(tfaccel.data.optimize), so there is no size to set",
        "num_parallel_reads": "use cycle_length= (files read at once)",
        "sloppy": "use deterministic=False to let rows arrive out of order (sloppy=True)",
        "ignore_errors": "from_csv skips no row: with verify=True (the default) a bad row is "
                         "named with its file, line and column; fix it, or give "
                         "column_defaults= for missing values",
    }),
    "from_image_folder": ("keras.utils.image_dataset_from_directory", {
        "data_format": "from_image_folder yields channels_last images ([batch, height, width, "
                       "channels], Keras' default); leave data_format out, or transpose in "
                       "the model (keras.layers.Permute((3, 1, 2)))",
    }),
    "from_timeseries": ("keras.utils.timeseries_dataset_from_array", {
        "format": "from_timeseries builds a tf.data.Dataset (Keras' format='tf'); leave "
                  "format out",
    }),
}


# A ``module:callable`` (or ``file.py:callable``) rather than a Keras name: the one rule of
# `tfaccel.python_refs`, as for an own model.name.
is_callable_spec = python_refs.is_reference


def metric_entries(metrics: list) -> list[tuple[str, dict]]:
    """``training.metrics`` as ``(name, params)`` pairs: a plain entry has no params.

    Args:
        metrics: The validated list (strings and ``{name, params}`` mappings), or ``auto``
            (the task's metrics, none of them named in the recipe: no entries).
    """
    if metrics == AUTO:
        return []
    return [(m, {}) if isinstance(m, str) else (m["name"], dict(m.get("params") or {}))
            for m in metrics]


def check_keras_names(optimizer, training, *, source: str) -> None:
    """Checks the optimizer, schedule, loss and metric names and the keys around them.

    TF-free: names against the copies of Keras' names above, and the rules between keys (a
    shortcut key set twice, params for a name that takes none). Keyword arguments are checked against the real signatures when
    training starts (`tfaccel.training.keras_objects.optimizers`,
    `tfaccel.training.keras_objects.losses`), where each
    ``module:callable`` is imported too.

    Args:
        optimizer: The recipe's `OptimizerConfig`.
        training: The recipe's `TrainingConfig`.
        source: The recipe's name for messages (its file path).

    Raises:
        RecipeError: The message names the key and the value received.
    """
    _check_name(optimizer.name, OPTIMIZERS, key="optimizer.name", kind="a Keras optimizer",
                source=source)
    _check_optimizer_params(optimizer, source=source)
    _check_schedule(optimizer, source=source)
    _check_name(training.loss, (AUTO,) + LOSSES + COMPILE_LOSSES, key="training.loss",
                kind="a Keras loss", source=source)
    if training.loss in COMPILE_LOSSES and training.loss_params:
        raise RecipeError(
            f"{source}: training.loss_params: Keras picks the loss behind "
            f"{training.loss!r} from the labels' shape, so it takes no params; name the "
            "loss itself (e.g. sparse_categorical_crossentropy) to give it params.")
    for i, entry in enumerate([] if training.metrics == AUTO else training.metrics):
        _check_metric(entry, key=f"training.metrics[{i}]", source=source)


def callable_specs(recipe) -> list[tuple[str, str]]:
    """Every ``module:callable`` a recipe names outside its data, as ``(key, spec)``:
    model.name, the optimizer, its schedule, the loss and each metric."""
    optimizer, training = recipe.optimizer, recipe.training
    specs = [("model.name", recipe.model.name), ("optimizer.name", optimizer.name),
             ("optimizer.schedule", optimizer.schedule), ("training.loss", training.loss)]
    specs += [(f"training.metrics[{i}]", name)
              for i, (name, _) in enumerate(metric_entries(training.metrics))]
    return [(key, spec) for key, spec in specs if is_callable_spec(spec)]


def resolve_callable_files(optimizer, training, resolve: Callable[[str], str]):
    """The optimizer and training sections with each ``file.py:callable`` file resolved.

    Args:
        optimizer: The recipe's `OptimizerConfig`.
        training: The recipe's `TrainingConfig`.
        resolve: The recipe's rule for one name or ``module:callable`` (a file's callable
            against the recipe's folder; anything else unchanged).

    Returns:
        ``(optimizer, training)``, changed where a name is a file's callable.
    """
    metrics = training.metrics if training.metrics == AUTO else [
        resolve(m) if isinstance(m, str) else {**m, "name": resolve(m["name"])}
        for m in training.metrics]
    return (dataclasses.replace(optimizer, name=resolve(optimizer.name),
                                schedule=resolve(optimizer.schedule)),
            dataclasses.replace(training, loss=resolve(training.loss), metrics=metrics))


def _check_name(value: str, names: tuple, *, key: str, kind: str, source: str) -> None:
    if value in names or is_callable_spec(value):
        return
    # The short lists are worth reading in full; the long ones (losses, metrics) are not.
    listed = f"; one of: {', '.join(names)}" if len(names) <= 20 else ""
    raise RecipeError(
        f"{source}: {key} must be {kind} name or a module:callable, got {value!r}"
        f"{did_you_mean(value, names)}{listed}.")


def _check_optimizer_params(optimizer, *, source: str) -> None:
    for name in optimizer.params:
        if name in OPTIMIZER_SHORTCUTS:
            raise RecipeError(
                f"{source}: optimizer.params.{name} sets what optimizer.{name} sets; give it "
                f"once, as optimizer.{name}.")
        if name in OWN_OPTIMIZER_ARGUMENTS:
            raise RecipeError(
                f"{source}: optimizer.params.{name}: use {OWN_OPTIMIZER_ARGUMENTS[name]} "
                "(tfaccel's exact accumulation, under every strategy) instead of the "
                "optimizer's own.")
        if name == "use_ema" and optimizer.params[name]:
            raise RecipeError(
                f"{source}: optimizer.params.use_ema is {optimizer.params[name]!r}, but "
                f"{EMA_REFUSED_BECAUSE} Leave optimizer.params.use_ema (and ema_momentum) "
                "out; weight averaging is not supported by tfaccel runs.")


def _check_schedule(optimizer, *, source: str) -> None:
    schedule = optimizer.schedule
    _check_name(schedule, OWN_SCHEDULES + KERAS_SCHEDULES, key="optimizer.schedule",
                kind="constant, cosine, a Keras schedule", source=source)
    if schedule in OWN_SCHEDULES and optimizer.schedule_params:
        raise RecipeError(
            f"{source}: optimizer.schedule_params is for a Keras schedule or a "
            f"module:callable; optimizer.schedule {schedule!r} takes none (got "
            f"{', '.join(map(str, optimizer.schedule_params))}).")
    if optimizer.warmup_epochs and schedule != "cosine":
        raise RecipeError(
            f"{source}: optimizer.warmup_epochs ({optimizer.warmup_epochs}) warms up the "
            f"cosine schedule only; optimizer.schedule is {schedule!r} (CosineDecay takes "
            "warmup_steps in optimizer.schedule_params).")
    if "initial_learning_rate" in optimizer.schedule_params:
        raise RecipeError(
            f"{source}: optimizer.schedule_params.initial_learning_rate sets what "
            "optimizer.learning_rate sets (the schedule starts from it); give it once, as "
            "optimizer.learning_rate.")
    default_rate = next(f.default for f in dataclasses.fields(optimizer)
                        if f.name == "learning_rate")
    if schedule == "PiecewiseConstantDecay" and optimizer.learning_rate != default_rate:
        raise RecipeError(
            f"{source}: optimizer.learning_rate ({optimizer.learning_rate}) is not used by "
            "PiecewiseConstantDecay: its optimizer.schedule_params.values are the rates; "
            "leave optimizer.learning_rate out.")


def _check_metric(entry: Any, *, key: str, source: str) -> None:
    if isinstance(entry, dict):
        unknown = [k for k in entry if k not in METRIC_MAPPING_KEYS]
        if unknown or not isinstance(entry.get("name"), str):
            raise RecipeError(
                f"{source}: {key} must be a metric name or a mapping {{name: ..., params: "
                f"{{...}}}}, got {entry!r}"
                f"{did_you_mean(str(unknown[0]), METRIC_MAPPING_KEYS) if unknown else ''}.")
        params = entry.get("params") or {}
        if not isinstance(params, dict):
            raise RecipeError(f"{source}: {key}.params must be a mapping of the metric's "
                              f"arguments, got {params!r}.")
        name = entry["name"]
        if name in COMPILE_METRICS and params:
            raise RecipeError(
                f"{source}: {key}.params: Keras picks the metric behind {name!r} from the "
                "labels' shape, so it takes no params; name the metric itself (e.g. "
                "sparse_categorical_accuracy) to give it params.")
    else:
        name = entry
    _check_name(name, _METRIC_NAMES, key=key, kind="a Keras metric",
                source=source)
