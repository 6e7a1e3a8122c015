"""TensorFlow's process-wide op determinism: read it, and set it back after a run."""

from __future__ import annotations

import tensorflow as tf

# TensorFlow 2.21 exports the setter only; the getter and the reverse live beside it.
from tensorflow.python.framework import config as tf_config


def op_determinism_enabled() -> bool:
    """Whether `tf.config.experimental.enable_op_determinism()` is in force."""
    return bool(getattr(tf_config, "is_op_determinism_enabled", lambda: False)())


def set_op_determinism(enabled: bool) -> None:
    """Turns op determinism on or off (a run puts back what it found: library users share
    the process, and deterministic kernels change both speed and error messages)."""
    if enabled:
        tf.config.experimental.enable_op_determinism()
    else:
        tf_config.disable_op_determinism()
