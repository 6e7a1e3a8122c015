"""Builds the loss and the metrics `compile` gets from the training section."""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Optional

from tfaccel.config.keras_names import is_callable_spec, metric_entries
from tfaccel.config.recipe import TrainingConfig
from tfaccel.errors import UserInputError
from tfaccel.training.arguments import call_checked, check_arguments
from tfaccel.training.keras_classes import keras_class
from tfaccel.training.user_code import import_callable

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
            not show it); then only ``module:callable`` names are checked (Keras' own
            classes need Keras).

    Raises:
        UserInputError: An unknown or missing argument; the message names the recipe key.
    """
    if load is None:
        make_loss(training, build=False)
        make_metrics(training, build=False)
        return
    entries = [("training.loss", "training.loss_params", training.loss,
                dict(training.loss_params))]
    entries += [(f"training.metrics[{i}]", f"training.metrics[{i}].params", name, params)
                for i, (name, params) in enumerate(metric_entries(training.metrics))]
    for key, params_key, name, params in entries:
        if is_callable_spec(name):
            _own(name, params, key=key, params_key=params_key, wrap=None, build=False,
                 load=load)


def make_loss(training: TrainingConfig, *, build: bool = True):
    """The loss `compile` gets: Keras' name as given when it has no params (Keras resolves
    it, as it always did), else the Keras class built with ``training.loss_params``.

    A ``module:callable`` class is built with the params; a function is the loss itself,
    the params bound to its keyword arguments.

    Args:
        training: The recipe's training section.
        build: False only checks (no object is made).
    """
    import keras

    return _make(training.loss, dict(training.loss_params), key="training.loss",
                 params_key="training.loss_params", module=keras.losses,
                 base=keras.losses.Loss, wrap=_bound_function, build=build)


def make_metrics(training: TrainingConfig, *, build: bool = True) -> list:
    """The metrics `compile` gets, in the recipe's order (names, or objects with params).

    A ``module:callable`` class is built with its params; a function is the metric itself,
    with params wrapped as Keras does (``keras.metrics.MeanMetricWrapper``).

    Args:
        training: The recipe's training section.
        build: False only checks (no object is made).
    """
    import keras

    metrics = []
    for i, (name, params) in enumerate(metric_entries(training.metrics)):
        key = f"training.metrics[{i}]"
        metrics.append(_make(name, params, key=key, params_key=f"{key}.params",
                             module=keras.metrics, base=keras.metrics.Metric,
                             wrap=_mean_metric, build=build))
    return metrics


def logged_metric_names(training: TrainingConfig) -> list:
    """The names Keras logs the recipe's metrics by, in order (without ``val_``).

    A name given as text is logged as given (``accuracy``); a metric object by its own
    ``name`` (``params.name``, else its class's default), a function by ``__name__``.
    """
    return [entry if isinstance(entry, str) else getattr(entry, "name", None)
            or entry.__name__ for entry in make_metrics(training)]


def _make(name: str, params: dict, *, key: str, params_key: str, module, base, wrap,
          build: bool) -> Any:
    if is_callable_spec(name):
        return _own(name, params, key=key, params_key=params_key, wrap=wrap, build=build)
    if not params:
        return name  # Keras' own name, resolved by compile as without tfaccel
    target = keras_class(module, base, name)
    kind = "loss" if module.__name__.endswith("losses") else "metric"
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
    import keras

    return keras.metrics.MeanMetricWrapper(function, name=function.__name__, **params)
