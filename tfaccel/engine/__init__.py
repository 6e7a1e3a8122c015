"""Training engine: gradient accumulation, strategy, pipeline stages, precision and threads."""

import importlib

# Resolved lazily so that importing one engine module (e.g. strategy for `tfaccel devices`)
# does not also import Keras through the accumulation module.
_LAZY_ATTRIBUTES = {
    "AccumulatingModel": "tfaccel.engine.accumulation",
    "accumulate": "tfaccel.engine.accumulation",
    "auto_choices": "tfaccel.engine.strategy",
    "configure_threads": "tfaccel.engine.threads",
    "describe_strategy": "tfaccel.engine.strategy",
    "make_strategy": "tfaccel.engine.strategy",
    "patch_for_multi_worker": "tfaccel.engine.keras_compat",
    "pipeline": "tfaccel.engine.model_pipeline",
    "PipelineModel": "tfaccel.engine.model_pipeline",
    "split_model": "tfaccel.engine.model_split",
    "resolve_precision": "tfaccel.engine.precision",
    "set_precision": "tfaccel.engine.precision",
}

__all__ = sorted(_LAZY_ATTRIBUTES)


def __getattr__(name):
    if name in _LAZY_ATTRIBUTES:
        return getattr(importlib.import_module(_LAZY_ATTRIBUTES[name]), name)
    raise AttributeError(f"module 'tfaccel.engine' has no attribute {name!r}")
