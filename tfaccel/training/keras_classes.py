"""Finds the Keras class behind a recipe's name (optimizer, loss or metric)."""

from __future__ import annotations

import inspect
import types
from typing import Optional


def _plain(name: str) -> str:
    # One key for a class and its function: SparseCategoricalCrossentropy and
    # sparse_categorical_crossentropy, KLDivergence and kl_divergence, Nadam and nadam.
    return name.replace("_", "").lower()


def keras_class(module: types.ModuleType, base: type, name: str) -> Optional[type]:
    """The class `module` exports whose name is `name`, its function's name or its alias.

    Args:
        module: A public Keras module (``keras.optimizers``, ``keras.losses``, ...).
        base: The classes looked for (``keras.losses.Loss``); the base itself is not one.
        name: A recipe's name: a class name, a function name (``mean_squared_error``) or an
            alias Keras' ``module.get`` resolves to a function (``mse``).

    Returns:
        The class, or None when no class stands behind the name.
    """
    classes = {_plain(attr): obj for attr, obj in vars(module).items()
               if inspect.isclass(obj) and issubclass(obj, base) and obj is not base}
    found = classes.get(_plain(name))
    if found is None and hasattr(module, "get"):
        try:
            function = module.get(name)  # an alias (mse) names a function (mean_squared_error)
        except (ValueError, TypeError):
            return None
        found = classes.get(_plain(getattr(function, "__name__", "")))
    return found
