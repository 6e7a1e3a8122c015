"""Loading a recipe: YAML, --set overrides, unknown keys, types and ranges, resolved paths."""

from __future__ import annotations

import copy
import dataclasses
import os
import types
import typing
from pathlib import Path
from typing import Any, Literal, Optional

import yaml

from tfaccel import python_refs
from tfaccel.config import input_paths, keras_names, sources
from tfaccel.config.cross_checks import check_recipe
from tfaccel.config.recipe_keys import describe_value, join_key
from tfaccel.config.sections import RENAMED_KEYS, DataConfig, ModelConfig, Recipe
from tfaccel.errors import RecipeError, did_you_mean


def load_recipe(path: str | os.PathLike, overrides: typing.Sequence[str] = (), *,
                own_model: bool = False) -> Recipe:
    """Loads, overrides and validates a recipe file.

    Args:
        path: The YAML recipe file.
        overrides: `key.path=value` strings; values are parsed as YAML and checked like the
            file's own values.
        own_model: The model is `tfaccel.train(model=...)`'s: model.params are its
            builder's, checked against its signature when it is called, not the registry's.

    Returns:
        The validated, frozen `Recipe`, with input paths resolved against the file's folder.

    Raises:
        RecipeError: The file is missing or malformed, or a key or value is invalid.
    """
    path = Path(path)
    if not path.is_file():
        raise RecipeError(f"recipe file {str(path)!r} does not exist or is not a file.")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        where = ""
        mark = getattr(error, "problem_mark", None)
        if mark is not None:
            where = f" at line {mark.line + 1}, column {mark.column + 1}"
        problem = getattr(error, "problem", None) or str(error)
        raise RecipeError(f"{path}: is not valid YAML{where}: {problem}.") from None
    except UnicodeDecodeError:
        raise RecipeError(f"{path}: is not a UTF-8 text file.") from None
    if raw is None:
        raw = {}
    return recipe_from_dict(raw, base_dir=path.parent.resolve(), overrides=overrides,
                            source=str(path), own_model=own_model)


def recipe_from_dict(raw: Any, *, base_dir: str | os.PathLike | None = None,
                     overrides: typing.Sequence[str] = (), source: str = "recipe",
                     own_model: bool = False) -> Recipe:
    """Validates a recipe given as a mapping (as loaded from YAML).

    Args:
        raw: The mapping.
        base_dir: Folder against which relative input paths resolve; the working directory
            when None.
        overrides: `key.path=value` strings applied before validation.
        source: Name used at the start of error messages.
        own_model: As in `load_recipe`.

    Returns:
        The validated `Recipe`.

    Raises:
        RecipeError: A key or value is invalid.
    """
    if not isinstance(raw, dict):
        raise RecipeError(f"{source}: the top level must be a mapping of sections, "
                          f"got {type(raw).__name__}: {raw!r}.")
    raw = apply_overrides(raw, overrides, source=source)
    base = Path(base_dir) if base_dir is not None else Path.cwd()
    recipe = _build(Recipe, raw, "", source=source)
    check_recipe(recipe, source=source, own_model=own_model)
    optimizer, training = keras_names.resolve_callable_files(
        recipe.optimizer, recipe.training, lambda spec: _resolve_callable(spec, base))
    recipe = dataclasses.replace(recipe, optimizer=optimizer, training=training)
    specs = [spec for _, spec in keras_names.callable_specs(recipe)]
    if _path_is_callable(recipe.data) and python_refs.is_reference(recipe.data.path):
        specs.append(recipe.data.path)
    if any(python_refs.source_file(spec) is None for spec in specs):
        # An import path `package.module:callable` is looked up in the recipe's folder and
        # the working directory too (appended: installed packages win), for every key.
        python_refs.add_search_dirs([base, Path.cwd()])
    return _resolve_paths(recipe, base)


def apply_overrides(raw: dict, overrides: typing.Sequence[str], *, source: str = "recipe") -> dict:
    """Returns a copy of `raw` with each `a.b.c=value` override set (value parsed as YAML)."""
    result = copy.deepcopy(raw)
    for override in overrides:
        if "=" not in override:
            raise RecipeError(f"--set {override!r}: expected KEY=VALUE, e.g. "
                              "training.epochs=3.")
        dotted, text = override.split("=", 1)
        keys = [k for k in dotted.strip().split(".")]
        if not dotted.strip() or any(not k for k in keys):
            raise RecipeError(f"--set {override!r}: the key {dotted!r} is not a dotted key "
                              "path such as training.epochs.")
        try:
            value = yaml.safe_load(text) if text.strip() else None
        except yaml.YAMLError:
            raise RecipeError(f"--set {override!r}: the value {text!r} is not valid YAML."
                              ) from None
        _check_override_path(keys, override, value)
        node = result
        for depth, key in enumerate(keys[:-1]):
            child = node.get(key)
            if child is None:
                child = node[key] = {}
            elif not isinstance(child, dict):
                raise RecipeError(f"--set {override!r}: {'.'.join(keys[:depth + 1])} is not a "
                                  "section.")
            node = child
        node[keys[-1]] = value
    return result


def _check_override_path(keys: list[str], override: str, value: Any) -> None:
    # Catch a misspelt key at the override itself, so the message names the --set.
    cls: Any = Recipe
    for depth, key in enumerate(keys):
        if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
            return  # inside a free-form mapping such as model.params
        names = [f.name for f in dataclasses.fields(cls)]
        renamed = RENAMED_KEYS.get(".".join(keys[:depth + 1]))
        if renamed is not None:
            raise RecipeError(f"--set {override!r}: {renamed(value)}")
        if key not in names:
            prefix = ".".join(keys[:depth])
            raise RecipeError(f"--set {override!r}: unknown key "
                              f"{join_key(prefix, key)!r}{did_you_mean(key, names)}.")
        cls = typing.get_type_hints(cls)[key]


def _misread_data_value(key_path: str, value: Any) -> Optional[str]:
    """What a data key's value says the user meant, when it belongs to another key.

    One key per meaning: Keras' ``validation_split=0.1`` is a fraction (a recipe's is
    ``data.validation_fraction``), the recipe's ``data.validation_split_name`` names a split.
    """
    if (key_path == "data.validation_split_name" and isinstance(value, (int, float))
            and not isinstance(value, bool)):
        return ("data.validation_split_name names a split (e.g. test); for a held-out "
                f"fraction use data.validation_fraction: {value}")
    return None


def _build(cls, raw: Any, prefix: str, *, source: str):
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise RecipeError(f"{source}: {prefix or 'the top level'} must be a mapping, got "
                          f"{describe_value(raw)}.")
    fields_by_name = {f.name: f for f in dataclasses.fields(cls)}
    for key in raw:
        renamed = RENAMED_KEYS.get(join_key(prefix, str(key)))
        if renamed is not None:
            raise RecipeError(f"{source}: {renamed(raw[key])}")
        if not isinstance(key, str) or key not in fields_by_name:
            raise RecipeError(f"{source}: unknown key {join_key(prefix, str(key))!r}"
                              f"{did_you_mean(str(key), list(fields_by_name))}.")
    hints = typing.get_type_hints(cls)
    values = {}
    for name, f in fields_by_name.items():
        key_path = join_key(prefix, name)
        hint = hints[name]
        if dataclasses.is_dataclass(hint):
            values[name] = _build(hint, raw.get(name), key_path, source=source)
            continue
        if name not in raw:
            continue  # the dataclass default applies
        meant = _misread_data_value(key_path, raw[name])
        if meant:
            raise RecipeError(f"{source}: {meant} (got {describe_value(raw[name])}).")
        value = _convert(raw[name], hint, key_path, source=source)
        _check_choice(value, f.metadata, key_path, source=source)
        _check_range(value, f.metadata, key_path, source=source)
        values[name] = value
    return cls(**values)


def _convert(value: Any, hint: Any, key_path: str, *, source: str):
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)

    def fail(expected: str):
        raise RecipeError(f"{source}: {key_path} must be {expected}, got {describe_value(value)}.")

    if origin in (typing.Union, types.UnionType):
        non_none = [a for a in args if a is not type(None)]
        if value is None or value == "":
            if type(None) in args:
                return None
        if len(non_none) == 1:
            return _convert(value, non_none[0], key_path, source=source)
        for option in non_none:  # the first type that takes the value (int before "auto")
            try:
                return _convert(value, option, key_path, source=source)
            except RecipeError:
                continue
        fail(" or ".join(_type_name(a) for a in non_none))
    if origin is Literal:
        if value not in args:
            choices = ", ".join(str(a) for a in args)
            hint_text = did_you_mean(str(value), [str(a) for a in args])
            raise RecipeError(f"{source}: {key_path} must be one of {choices}; got "
                              f"{describe_value(value)}{hint_text}.")
        return value
    if hint is bool:
        if not isinstance(value, bool):
            fail("true or false")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            fail("an integer")
        return value
    if hint is float:
        if isinstance(value, bool):
            fail("a number")
        if isinstance(value, (int, float)):
            return float(value)
        # PyYAML reads YAML 1.1, where `1e-3` (no dot) is a string: accept numeric text.
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        fail("a number")
    if hint is str:
        if not isinstance(value, str):
            fail("a string")
        return value
    if origin is list:
        if not isinstance(value, list):
            fail(f"a list of {_type_name(args[0])}")
        return [_convert(item, args[0], f"{key_path}[{i}]", source=source)
                for i, item in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            fail("a mapping")
        return copy.deepcopy(value)
    if hint is Any:
        return value
    raise TypeError(f"unsupported recipe type {hint!r} at {key_path}")  # a bug, not a user error


def _check_choice(value: Any, metadata: dict, key_path: str, *, source: str) -> None:
    # A key whose values are read at check time (data.source's, from the source table),
    # refused in the words a Literal's values are.
    choices = metadata.get("choices")
    if choices is None or value in choices():
        return
    allowed = [str(c) for c in choices()]
    raise RecipeError(f"{source}: {key_path} must be one of {', '.join(allowed)}; got "
                      f"{describe_value(value)}{did_you_mean(str(value), allowed)}.")


def _check_range(value: Any, metadata: dict, key_path: str, *, source: str) -> None:
    values = value if isinstance(value, list) else [value]
    for item in values:
        if isinstance(item, bool) or not isinstance(item, (int, float)):
            continue
        bounds = [
            ("minimum", lambda v, b: v >= b, ">="),
            ("maximum", lambda v, b: v <= b, "<="),
            ("exclusive_minimum", lambda v, b: v > b, ">"),
            ("exclusive_maximum", lambda v, b: v < b, "<"),
        ]
        for name, ok, symbol in bounds:
            bound = metadata.get(name)
            if bound is not None and not ok(item, bound):
                raise RecipeError(f"{source}: {key_path} must be {symbol} {bound}, got "
                                  f"{item!r}.")


def _resolve_paths(recipe: Recipe, base_dir: Path) -> Recipe:
    # Input paths are relative to the recipe file, so a recipe runs the same from any folder.
    data = recipe.data
    changes = {}
    for f in dataclasses.fields(DataConfig):
        value = getattr(data, f.name)
        if not f.metadata.get("path") or not value:
            continue
        if f.name == "path" and _path_is_callable(data):
            changes[f.name] = _resolve_callable(value, base_dir)
            continue
        changes[f.name] = _resolve_path(value, base_dir)
    return dataclasses.replace(recipe, data=dataclasses.replace(data, **changes),
                               model=_resolve_model_paths(recipe.model, base_dir))


def _path_is_callable(data: DataConfig) -> bool:
    """Whether data.path is a ``module:callable`` (its source table entry says so)."""
    return sources.entry(data.source).path == "callable"


def _resolve_model_paths(model: ModelConfig, base_dir: Path) -> ModelConfig:
    # model.name resolves as a python source's data.path does: a file against the recipe's
    # folder (an import path's search folders: recipe_from_dict).
    changes = {}
    if model.path:
        changes["path"] = _resolve_path(model.path, base_dir)
    changes["name"] = _resolve_callable(model.name, base_dir)
    return dataclasses.replace(model, **changes)


def _resolve_callable(spec, base_dir: Path):
    """THE path rule of a ``file.py:callable`` (data.path, model.name, optimizer, loss,
    metrics): its file against the recipe's folder. A registered or Keras name, or an import
    path ``package.module:callable`` (found through the search folders), is kept as is."""
    if not python_refs.is_reference(spec) or python_refs.source_file(spec) is None:
        return spec
    module, _, attribute = spec.rpartition(":")
    return f"{_resolve_path(module, base_dir)}:{attribute}"


def _resolve_path(value: str, base_dir: Path) -> str:
    if input_paths.is_remote(value):
        return value  # a remote URL such as gs://bucket/...: TensorFlow resolves it
    expanded = os.path.expanduser(value)
    if os.path.isabs(expanded):
        return expanded
    return str((base_dir / expanded).resolve())


def _type_name(hint: Any) -> str:
    if typing.get_origin(hint) is Literal:
        return "one of " + ", ".join(str(a) for a in typing.get_args(hint))
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false"}.get(
        hint, getattr(hint, "__name__", str(hint)))
