"""tfaccel: fast, correct TensorFlow/Keras training from plain Python or a YAML recipe."""

import importlib

from tfaccel._version import __version__
from tfaccel.quiet_import import quiet_tensorflow

# A script that imports tfaccel is as quiet as the CLI: TensorFlow's start-up lines (cudart,
# cuInit, oneDNN, cpu_feature_guard) hidden unless TF_CPP_MIN_LOG_LEVEL or TFACCEL_VERBOSE
# says otherwise. Cheap: nothing is imported, the filter waits for TensorFlow's import.
quiet_tensorflow()

# Public names resolve lazily so that `import tfaccel` (and the CLI's --help and
# `validate`) never pay for importing TensorFlow.
_LAZY_ATTRIBUTES = {
    "accumulate": "tfaccel.engine.accumulation",
    "AccumulatingModel": "tfaccel.engine.accumulation",
    "make_strategy": "tfaccel.engine.strategy",
    "pipeline": "tfaccel.engine.model_pipeline",
    "PipelineModel": "tfaccel.engine.model_pipeline",
    "set_precision": "tfaccel.engine.precision",
    "ShardedDense": "tfaccel.engine.sharded_dense",
    "ShardedEmbedding": "tfaccel.engine.sharded_embedding",
    "train": "tfaccel.training.run.runner",
    "export": "tfaccel.tools.export",
}
_LAZY_MODULES = ("config", "data", "datasets", "engine", "models", "tools", "training")

__all__ = ["__version__", *_LAZY_ATTRIBUTES, *_LAZY_MODULES]


def __getattr__(name):
    if name in _LAZY_ATTRIBUTES:
        module = importlib.import_module(_LAZY_ATTRIBUTES[name])
        return getattr(module, name)
    if name in _LAZY_MODULES:
        return importlib.import_module(f"tfaccel.{name}")
    raise AttributeError(f"module 'tfaccel' has no attribute {name!r}")
