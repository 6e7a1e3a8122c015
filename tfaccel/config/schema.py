"""The recipe's JSON Schema, generated from the same dataclasses that validate recipes (no TF).

Editors read it to complete and check recipes as they are typed (the YAML language server:
a first line ``# yaml-language-server: $schema=tfaccel-recipe.schema.json``). The recipe
dataclasses in `tfaccel.config.sections` stay the one source of types, ranges, defaults and help
text; this module only translates them.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Literal

from tfaccel.config.keras_names import name_schemas
from tfaccel.config.recipe import Recipe

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
_SCALARS = {bool: "boolean", int: "integer", float: "number", str: "string"}
_BOUNDS = ("minimum", "maximum", "exclusive_minimum", "exclusive_maximum")
_NUMBER_TEXT = r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$"


def _type_schema(hint: Any) -> dict:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        options = [_type_schema(a) for a in args if a is not type(None)]
        schema = options[0] if len(options) == 1 else {"anyOf": options}
        if type(None) in args:
            # An empty YAML value means null: "empty for none" in the keys table.
            return {"anyOf": [schema, {"type": "null"}]}
        return schema
    if origin is Literal:
        return {"enum": list(args)}
    if origin is list:
        return {"type": "array", "items": _type_schema(args[0])}
    if origin is dict:
        return {"type": "object"}  # free-form (model.params, data.features)
    if hint is float:
        # tfaccel reads YAML 1.1 (PyYAML), where `2e-3` is a string, and accepts numeric
        # text for numbers; YAML 1.2 editors read it as a number. Both are valid.
        return {"anyOf": [{"type": "number"}, {"type": "string", "pattern": _NUMBER_TEXT}]}
    if hint in _SCALARS:
        return {"type": _SCALARS[hint]}
    if hint is Any:
        return {}
    raise TypeError(f"no JSON Schema for recipe type {hint!r}")  # a bug, not a user error


def _bounds(metadata: dict, schema: dict) -> dict:
    bounds = {name.replace("_m", "M"): metadata[name] for name in _BOUNDS
              if metadata.get(name) is not None}
    if not bounds:
        return schema
    target = schema
    while "anyOf" in target:  # Optional[...] and numeric text: bound the number itself
        target = target["anyOf"][0]
    if target.get("type") == "array":
        target = target["items"]
        while "anyOf" in target:
            target = target["anyOf"][0]
    target.update(bounds)
    return schema


def _section(cls, prefix: str = "") -> dict:
    properties = {}
    hints = typing.get_type_hints(cls)
    names = name_schemas()
    for field in dataclasses.fields(cls):
        hint = hints[field.name]
        key = f"{prefix}.{field.name}" if prefix else field.name
        if dataclasses.is_dataclass(hint):
            schema = _section(hint, key)
            # `training:` with nothing under it reads as null: every default, as in tfaccel.
            schema["type"] = ["object", "null"]
        else:
            # A Keras name or a module:callable: the type hint says only "a string".
            schema = dict(names[key]) if key in names else _bounds(field.metadata,
                                                                   _type_schema(hint))
            if field.metadata.get("choices"):
                schema["enum"] = list(field.metadata["choices"]())  # data.source: the table's
            default = field.default
            if default is dataclasses.MISSING and field.default_factory is not dataclasses.MISSING:
                default = field.default_factory()
            schema["default"] = default
        schema["description"] = field.metadata.get("help", "") or (cls.__doc__ or "")
        properties[field.name] = schema
    return {"type": "object", "properties": properties, "additionalProperties": False,
            "description": (cls.__doc__ or "").strip().splitlines()[0]}


def json_schema() -> dict:
    """The JSON Schema (draft 2020-12) of a tfaccel recipe, every key with its default."""
    schema = _section(Recipe)
    return {"$schema": SCHEMA_DIALECT, "title": "tfaccel recipe", **schema}
