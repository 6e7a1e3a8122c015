"""Recipes: strict YAML -> frozen, typed dataclasses, with `--set` overrides (no TensorFlow)."""

# The one import for callers; the work is in its parts: sections (the dataclasses), loading
# (YAML, overrides, types, paths), cross_checks (what keys allow of each other), recipe_keys
# (the key table and the dotted view) and sources (the data sources).

from __future__ import annotations

from tfaccel.config.cross_checks import SERVICE_ISSUE, check_recipe, parse_dispatcher_address
from tfaccel.config.loading import apply_overrides, load_recipe, recipe_from_dict
from tfaccel.config.recipe_keys import (
                                        describe_keys,
                                        dump_recipe,
                                        flatten_recipe,
                                        mapping_keys,
                                        recipe_to_dict,
)
from tfaccel.config.sections import (
                                        AUGMENTATIONS,
                                        DECODE_AUGMENTATIONS,
                                        DEFAULT_MODEL,
                                        PROCESSING_MODES,
                                        TOKENIZERS,
                                        AudioConfig,
                                        DataConfig,
                                        ModelConfig,
                                        OptimizerConfig,
                                        Recipe,
                                        RuntimeConfig,
                                        ServiceConfig,
                                        TableConfig,
                                        TextConfig,
                                        TimeseriesConfig,
                                        TrainingConfig,
)

__all__ = [
    "AUGMENTATIONS", "DECODE_AUGMENTATIONS", "DEFAULT_MODEL", "PROCESSING_MODES",
    "SERVICE_ISSUE", "TOKENIZERS", "AudioConfig", "DataConfig", "ModelConfig",
    "OptimizerConfig", "Recipe", "RuntimeConfig", "ServiceConfig", "TableConfig",
    "TextConfig", "TimeseriesConfig", "TrainingConfig", "apply_overrides", "check_recipe",
    "describe_keys", "dump_recipe", "flatten_recipe", "load_recipe", "mapping_keys",
    "parse_dispatcher_address", "recipe_from_dict", "recipe_to_dict",
]
