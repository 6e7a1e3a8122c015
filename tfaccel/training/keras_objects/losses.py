"""Builds the loss and the metrics `compile` gets from the training section and the task."""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Optional

from tfaccel.config.keras_names import AUTO, is_callable_spec, metric_entries
from tfaccel.config.recipe import TrainingConfig
from tfaccel.errors import UserInputError
from tfaccel.training.keras_objects.arguments import call_checked, check_arguments
from tfaccel.training.keras_objects.keras_classes import live_class, recorded_class
from tfaccel.training.keras_objects.user_code import import_callable

# training.loss auto: Keras' usual loss of each task (tfaccel.reading.labels.TASKS).
TASK_LOSSES = {"classification": "sparse_categorical_crossentropy",
               "binary": "binary_crossentropy", "multi_label": "binary_crossentropy",
               "regression": "mean_squared_error"}
# training.metrics auto: what each task logs, by the names Keras logs them under (the
# Done line, compare and training.monitor read them). Regression reports the error in the
# target's own unit (mae) and the root of the loss (rmse) beside the loss itself.
TASK_METRICS = {"classification": ("accuracy",), "binary": ("accuracy", "auc"),
                "multi_label": ("binary_accuracy", "auc"), "regression": ("mae", "rmse")}
# Metrics that keep running sums (not a mean of per-batch values): left out of auto where
# the step returns per-batch values (runtime.strategy parameter_server).
_RUNNING_SUMS = ("auc", "rmse")
# A loss or metric function's leading (y_true, y_pred) are Keras' to give, not the recipe's.
_LABELS_AND_PREDICTIONS = 2


def check_loss_and_metrics(training: TrainingConfig, *, load: Optional[Callable] = None
                           ) -> None:
    """Checks the loss's and the metrics' arguments against their signatures.

    Run when training starts, before the data is built: imports each ``module:callable``.

    Args:
        training: The recipe's training section.
        load: Instead of importing, how to get a ``module:callable``'s stand-in
            (`tfaccel validate`: `python_refs.read_signature`, None where the source does
            not show it); Keras' own classes are then checked against their signatures
            recorded in `tfaccel.config.keras_signatures` (no Keras import).

    Raises:
        UserInputError: An unknown or missing argument; the message names the recipe key.
    """
    # make_loss and make_metrics with build=False check exactly these (auto is the task's,
    # known once the data is read).
    entries = [("training.loss", "training.loss_params", training.loss,
                dict(training.loss_params), "loss")]
    entries += [(f"training.metrics[{i}]", f"training.metrics[{i}].params", name, params,
                 "metric") for i, (name, params) in enumerate(metric_entries(training.metrics))]
    for key, params_key, name, params, kind in entries:
        if name != AUTO:
            _make(name, params, key=key, params_key=params_key, kind=kind, wrap=None,
                  build=False, load=load or import_callable,
                  find_class=live_class if load is None else recorded_class)


def make_loss(training: TrainingConfig, *, task: str = "classification", build: bool = True):
    """The loss `compile` gets: Keras' name as given when it has no params (Keras resolves
    it, as it always did), else the Keras class built with ``training.loss_params``.

    ``auto`` is the task's usual loss (`TASK_LOSSES`), its class built with the params when
    there are some (checked when the task is known). A ``module:callable`` class is built
    with the params; a function is the loss itself, the params bound to its keyword
    arguments.

    Args:
        training: The recipe's training section.
        task: What the labels ask for (`tfaccel.reading.labels.TASKS` but auto).
        build: False only checks (no object is made).
    """
    name = training.loss
    if name == AUTO:
        if not build:
            return None  # its class is the task's, known once the data is read
        name = TASK_LOSSES[task]
    return _make(name, dict(training.loss_params), key="training.loss",
                 params_key="training.loss_params", kind="loss", wrap=_bound_function,
                 build=build)


def make_metrics(training: TrainingConfig, *, task: str = "classification",
                 num_outputs: Optional[int] = None, per_batch: bool = False,
                 build: bool = True) -> list:
    """The metrics `compile` gets, in the recipe's order (names, or objects with params).

    ``auto`` gives the task's (`TASK_METRICS`): accuracy (classification); accuracy and
    ROC AUC (binary); per-label binary accuracy and multi-label AUC (multi_label); mean
    absolute and root mean squared error (regression). A ``module:callable`` class is built
    with its params; a function is the metric itself, with params wrapped as Keras does
    (``keras.metrics.MeanMetricWrapper``).

    Args:
        training: The recipe's training section.
        task: What the labels ask for (`tfaccel.reading.labels.TASKS` but auto).
        num_outputs: The model's output width (the labels of a multi_label AUC).
        per_batch: Leave out the auto metrics that keep running sums (AUC, RMSE): for a
            step that returns per-batch values (parameter servers).
        build: False only checks (no object is made).
    """
    if training.metrics == AUTO:
        return [] if not build else [m for m in _task_metrics(task, num_outputs)
                                     if not (per_batch and _logged_name(m) in _RUNNING_SUMS)]
    metrics = []
    for i, (name, params) in enumerate(metric_entries(training.metrics)):
        key = f"training.metrics[{i}]"
        metrics.append(_make(name, params, key=key, params_key=f"{key}.params",
                             kind="metric", wrap=_mean_metric, build=build))
    return metrics


def _task_metrics(task: str, num_outputs: Optional[int]) -> list:
    # Deferred: Keras (seconds); validate imports this module TF-free for its checks.
    import keras

    if task == "classification":
        return ["accuracy"]  # compile resolves it from the labels (sparse), as always
    if task == "binary":
        return [keras.metrics.BinaryAccuracy(name="accuracy"), keras.metrics.AUC(name="auc")]
    if task == "multi_label":
        return [keras.metrics.BinaryAccuracy(name="binary_accuracy"),
                keras.metrics.AUC(multi_label=True, num_labels=num_outputs, name="auc")]
    if task == "regression":
        return [keras.metrics.MeanAbsoluteError(name="mae"),
                keras.metrics.RootMeanSquaredError(name="rmse")]
    raise ValueError(f"unknown task {task!r}")


def logged_metric_names(training: TrainingConfig, *, task: str = "classification",
                        num_outputs: Optional[int] = None, per_batch: bool = False) -> list:
    """The names Keras logs the recipe's metrics by, in order (without ``val_``).

    A name given as text is logged as given (``accuracy``); a metric object by its own
    ``name`` (``params.name``, else its class's default), a function by ``__name__``.
    """
    return [_logged_name(entry) for entry in make_metrics(
        training, task=task, num_outputs=num_outputs, per_batch=per_batch)]


def _logged_name(entry) -> str:
    return entry if isinstance(entry, str) else getattr(entry, "name", None) \
        or entry.__name__


def _make(name: str, params: dict, *, key: str, params_key: str, kind: str, wrap,
          build: bool, load: Callable = import_callable,
          find_class: Callable = live_class) -> Any:
    if is_callable_spec(name):
        return _own(name, params, key=key, params_key=params_key, wrap=wrap, build=build,
                    load=load)
    if not params:
        return name  # Keras' own name, resolved by compile as without tfaccel
    target = find_class(kind, name)
    if target is None:
        raise UserInputError(f"{params_key}: no Keras class stands behind the {kind} "
                             f"{name!r}, so it takes no params; name its class.")
    what = f"Keras {kind} {name!r} ({target.__name__})"
    check_arguments(target, params, key=params_key, what=what, strict=True)
    return call_checked(target, params, key=params_key, what=what) if build else None


def _own(name: str, params: dict, *, key: str, params_key: str, wrap, build: bool,
         load: Callable = import_callable) -> Any:
    """A ``module:callable`` loss or metric: a class built with its params, a function with
    its params bound (checked against its signature either way)."""
    target = load(name, key=key)
    if target is None:
        return None
    what = f"{name!r}"
    if not inspect.isclass(target):
        check_arguments(target, params, key=params_key, what=what,
                        skip=_LABELS_AND_PREDICTIONS)
        return wrap(target, params) if build and params else target
    check_arguments(target, params, key=params_key, what=what)
    return call_checked(target, params, key=params_key, what=what) if build else None


def _bound_function(function, params: dict):
    # Keras names a function's loss after __name__, which a bare partial lacks.
    return functools.update_wrapper(functools.partial(function, **params), function)


def _mean_metric(function, params: dict):
    # Deferred: Keras (seconds); validate imports this module TF-free for its checks.
    import keras

    return keras.metrics.MeanMetricWrapper(function, name=function.__name__, **params)
