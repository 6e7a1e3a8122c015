"""The recipe's keys listed and flattened: the key table, the dotted view, the YAML dump."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

import yaml

from tfaccel.config.sections import Recipe
from tfaccel.errors import UserInputError


def recipe_to_dict(recipe: Recipe) -> dict:
    """The recipe as plain data, every key present, ready for `yaml.safe_dump`."""
    return dataclasses.asdict(recipe)


def dump_recipe(recipe: Recipe) -> str:
    """The resolved recipe as YAML text (every key, defaults included)."""
    return yaml.safe_dump(recipe_to_dict(recipe), sort_keys=False, default_flow_style=None)


def describe_keys() -> list[tuple[str, str, str]]:
    """Every recipe key as (dotted path, default as YAML, help), in declaration order."""
    return _describe_section(Recipe, "")


def mapping_keys() -> tuple[str, ...]:
    """The recipe keys whose value is a mapping of its own (``data.features``,
    ``model.params``): one setting each, not sections to walk into."""
    return tuple(key for key, hint in _key_hints(Recipe, "")
                 if dict in (typing.get_origin(hint), *map(typing.get_origin,
                                                           typing.get_args(hint))))


def flatten_recipe(raw: typing.Mapping, *,
                   whole: typing.Collection[str] | None = None) -> dict[str, Any]:
    """THE dotted view of a recipe: ``{"training.epochs": 10, "model.params": {...}, ...}``.

    Sections are walked into; the keys in `whole` are kept as one value each, so a
    recipe's flat keys are exactly the keys `describe_keys` lists. An empty mapping is kept
    as a value too (a key never vanishes). `tfaccel train --resume` compares recipes key by
    key with it, and `tfaccel compare` shows the keys whose values differ.

    Args:
        raw: A recipe as plain data: `recipe_to_dict`'s, or a recipe.yaml as loaded.
        whole: Dotted keys not to walk into; None means `mapping_keys()`.

    Returns:
        The settings by dotted key, in the recipe's order.
    """
    if not isinstance(raw, typing.Mapping):
        raise UserInputError(f"flatten_recipe: raw must be a mapping (a recipe as plain "
                             f"data), got {describe_value(raw)}.")
    whole = frozenset(mapping_keys() if whole is None else whole)
    flat: dict[str, Any] = {}

    def walk(mapping: typing.Mapping, prefix: str) -> None:
        for key, value in mapping.items():
            key_path = join_key(prefix, str(key))
            if isinstance(value, typing.Mapping) and value and key_path not in whole:
                walk(value, key_path)
            else:
                flat[key_path] = value

    walk(raw, "")
    return flat


def _leaf_fields(cls, prefix: str):
    """Yields ``(dotted path, field, type hint)`` of every recipe key under `cls`, in order."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        key_path = join_key(prefix, f.name)
        if dataclasses.is_dataclass(hints[f.name]):
            yield from _leaf_fields(hints[f.name], key_path)
        else:
            yield key_path, f, hints[f.name]


def _key_hints(cls, prefix: str) -> list[tuple[str, Any]]:
    """Every recipe key under `cls` as (dotted path, type hint), in declaration order."""
    return [(key_path, hint) for key_path, _, hint in _leaf_fields(cls, prefix)]


def _describe_section(cls, prefix: str) -> list[tuple[str, str, str]]:
    return [(key_path, _yaml_scalar(_default_of(f)), f.metadata.get("help", ""))
            for key_path, f, _ in _leaf_fields(cls, prefix)]


def join_key(prefix: str, key: str) -> str:
    """`key` under the dotted section `prefix` ("" at the top level)."""
    return f"{prefix}.{key}" if prefix else key


def describe_value(value: Any) -> str:
    """A value as messages show it: its type and repr, or "nothing (null)"."""
    if value is None:
        return "nothing (null)"
    return f"{type(value).__name__} {value!r}"


def _default_of(f: dataclasses.Field):
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
        return "(section)" if dataclasses.is_dataclass(value) else value
    return None


def _yaml_scalar(value: Any) -> str:
    if value == "(section)":
        return ""
    return yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()
