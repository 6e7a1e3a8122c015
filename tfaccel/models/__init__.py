"""The models recipes name (registry), THE call of a user's own builder and the checks that a
model fits the data; importable without TensorFlow (the builders import Keras when called).

Modules: registry (the table of registered models, `build_model`, `check_params`),
param_checks and defaults (their TF-free checks and shared numbers), one module per family
of builders (image_cnns, text_models, sequence_models, forecast_models, feature_models) over
task_head (THE last layer by task), pixels and masks; own_builder (a user's builder called
and checked) and model_checks (`check_model_fits`).
"""

from tfaccel.models.model_checks import check_model_fits
from tfaccel.models.own_builder import build_own_model, builder_arguments, check_builder_params
from tfaccel.models.registry import (
    MODELS,
    ModelSpec,
    build_model,
    check_params,
    model_names,
    model_params,
)

__all__ = ["MODELS", "ModelSpec", "build_model", "build_own_model", "builder_arguments",
           "check_builder_params", "check_model_fits", "check_params", "model_names",
           "model_params"]
