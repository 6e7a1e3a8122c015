"""Finds the Keras class behind a recipe's name (optimizer, schedule, loss or metric), live or
from the TF-free table of their signatures it generates (config/keras_signatures.py)."""

from __future__ import annotations

import importlib
import inspect
import json
import textwrap
import types
from typing import Optional

from tfaccel.config import keras_names
from tfaccel.config import keras_signatures as table


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
        if found is None and isinstance(function, base) and type(function) in classes.values():
            found = type(function)  # keras.metrics.get("mae") is a MeanAbsoluteError object
    return found


# The kinds of Keras name a recipe gives: the public Keras module its classes are in and
# their base class (itself not one).
KINDS = {"optimizer": ("optimizers", "Optimizer"),
         "schedule": ("optimizers.schedules", "LearningRateSchedule"),
         "loss": ("losses", "Loss"),
         "metric": ("metrics", "Metric")}
# The generated module `recorded_class` reads
# (`python -m tfaccel.training.keras_objects.keras_classes`).
TABLE_MODULE = "tfaccel/config/keras_signatures.py"


def live_class(kind: str, name: str) -> Optional[type]:
    """The Keras class behind a recipe's `name` of `kind` (a `KINDS` key), from Keras itself."""

    path, base = KINDS[kind]
    module = importlib.import_module(f"keras.{path}")
    return keras_class(module, getattr(module, base), name)


def recorded_class(kind: str, name: str) -> Optional[type]:
    """What `live_class` returns, as a stand-in read from `tfaccel.config.keras_signatures`
    (no Keras import, for `tfaccel validate`): a class of the same name whose signature is
    the Keras class's (defaults shown as ``...``). It cannot be called."""

    class_name = table.CLASSES[kind][name]
    if class_name is None:
        return None
    signature = decode_parameters(table.SIGNATURES[kind][class_name])

    def __init__(self, *args, **kwargs):
        raise TypeError(f"{class_name} here is a stand-in read from "
                        "tfaccel.config.keras_signatures; it is not called")

    return type(class_name, (), {"__init__": __init__, "__signature__": signature})


def signature_table() -> dict:
    """What `tfaccel.config.keras_signatures` holds, read from the installed Keras.

    Returns:
        ``{"classes": {kind: {recipe name: class name or None}}, "signatures": {kind:
        {class name: encode_parameters(its signature)}}}`` for every name of
        `tfaccel.config.keras_names` (optimizers, Keras schedules, losses, metrics).
    """

    names = {"optimizer": keras_names.OPTIMIZERS, "schedule": keras_names.KERAS_SCHEDULES,
             "loss": keras_names.LOSSES, "metric": keras_names.METRICS}
    classes, signatures = {}, {}
    for kind in KINDS:
        found = {name: live_class(kind, name) for name in sorted(names[kind])}
        classes[kind] = {name: cls.__name__ if cls else None for name, cls in found.items()}
        signatures[kind] = {cls.__name__: encode_parameters(inspect.signature(cls))
                            for cls in sorted({c for c in found.values() if c},
                                              key=lambda c: c.__name__)}
    return {"classes": classes, "signatures": signatures}


def encode_parameters(signature: inspect.Signature) -> tuple:
    """A signature without its default values, in Python's own notation: ``("a", "b=",
    "*", "c=", "**kwargs")`` is ``(a, b=..., *, c=..., **kwargs)``."""
    P = inspect.Parameter
    parameters = list(signature.parameters.values())
    out, starred = [], False
    for i, p in enumerate(parameters):
        if p.kind is P.VAR_POSITIONAL:
            out.append(f"*{p.name}")
            starred = True
        elif p.kind is P.VAR_KEYWORD:
            out.append(f"**{p.name}")
        else:
            if p.kind is P.KEYWORD_ONLY and not starred:
                out.append("*")
                starred = True
            out.append(p.name + ("=" if p.default is not p.empty else ""))
            if p.kind is P.POSITIONAL_ONLY and (i + 1 == len(parameters)
                                                or parameters[i + 1].kind is not p.kind):
                out.append("/")
    return tuple(out)


class _Recorded:
    """The default of a recorded parameter: there is one, its value is Keras'."""

    def __repr__(self):
        return "..."


_RECORDED = _Recorded()


def decode_parameters(encoded: tuple) -> inspect.Signature:
    """The `inspect.Signature` `encode_parameters` wrote (each default ``...``)."""
    P = inspect.Parameter
    if "/" in encoded:
        cut = encoded.index("/")
        kinds = [P.POSITIONAL_ONLY] * cut + [None] + [P.POSITIONAL_OR_KEYWORD] * (
            len(encoded) - cut - 1)
    else:
        kinds = [P.POSITIONAL_OR_KEYWORD] * len(encoded)
    parameters, keyword_only = [], False
    for kind, word in zip(kinds, encoded):
        if word in ("/", "*"):
            keyword_only = keyword_only or word == "*"
            continue
        if word.startswith("**"):
            parameters.append(P(word[2:], P.VAR_KEYWORD))
        elif word.startswith("*"):
            parameters.append(P(word[1:], P.VAR_POSITIONAL))
            keyword_only = True
        else:
            name, has_default = word.rstrip("="), word.endswith("=")
            parameters.append(P(name, P.KEYWORD_ONLY if keyword_only else kind,
                                default=_RECORDED if has_default else P.empty))
    return inspect.Signature(parameters)


def render_table_module(table: dict) -> str:
    """The source of `tfaccel.config.keras_signatures` for `table` (`signature_table()`)."""

    def entries(mapping: dict, render) -> list:
        lines = []
        for kind, inner in mapping.items():
            lines.append(f"    {json.dumps(kind)}: {{")
            for name, value in inner.items():
                head = f"        {json.dumps(name)}: "
                lines += textwrap.wrap(render(value), width=99, initial_indent=head,
                                       subsequent_indent=" " * (len(head) + 1),
                                       break_long_words=False, break_on_hyphens=False)
                lines[-1] += ","
            lines.append("    },")
        return lines

    def words(value) -> str:
        inner = ", ".join(json.dumps(w) for w in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"

    classes = entries(table["classes"], lambda v: "None" if v is None else json.dumps(v))
    signatures = entries(table["signatures"], words)
    return "\n".join([
        '"""Keras\' optimizer, schedule, loss and metric classes: which class each recipe name '
        "is, and its",
        "parameters (TF-free, for `tfaccel validate`).",
        "",
        "Generated from the installed Keras by",
        "`python -m tfaccel.training.keras_objects.keras_classes`; do not edit.",
        "tests/test_keras_signatures.py regenerates it and compares, so a Keras that adds, "
        "removes or",
        "renames a parameter fails there. Parameters are written as Python writes a "
        "signature, without",
        'the default values: ``("a", "b=", "*", "c=", "**kwargs")`` is ``(a, b=..., *, '
        'c=..., **kwargs)``.',
        '"""',
        "",
        "# Each name of tfaccel.config.keras_names -> the class keras_classes.keras_class "
        "finds behind it",
        "# (None: a function with no class, which takes no params).",
        "CLASSES = {", *classes, "}",
        "",
        "SIGNATURES = {", *signatures, "}",
        ""])


if __name__ == "__main__":  # regenerate the table from the installed Keras
    from pathlib import Path

    target = Path(__file__).resolve().parents[2] / TABLE_MODULE
    target.write_text(render_table_module(signature_table()))
    print(f"wrote {target}")
