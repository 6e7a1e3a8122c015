"""Choose and set the Keras mixed-precision policy for the hardware present."""

import warnings

POLICIES = ("auto", "float32", "mixed_float16", "mixed_bfloat16")

# CPU flags (as in /proc/cpuinfo) that mean bfloat16 matmuls/convolutions run natively.
_BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")


def resolve_precision(policy="auto"):
    """Name the policy `set_precision(policy)` would set, without setting it.

    "auto" resolves to mixed_float16 on GPUs of compute capability 7.0 or more,
    mixed_bfloat16 on TPUs and on CPUs with bfloat16 instructions (avx512_bf16 or
    amx_bf16), and float32 otherwise.

    Args:
        policy: One of "auto", "float32", "mixed_float16", "mixed_bfloat16".

    Returns:
        The resolved policy name (never "auto").

    Raises:
        UserInputError: unknown `policy`.
    """
    _check(policy)
    if policy != "auto":
        return policy
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        capabilities = [_compute_capability(gpu) for gpu in gpus]
        # Tensor cores (7.0+) make float16 fast; older GPUs gain little and risk more.
        if all(cap is not None and cap >= (7, 0) for cap in capabilities):
            return "mixed_float16"
        return "float32"
    if tf.config.list_physical_devices("TPU"):
        return "mixed_bfloat16"
    if cpu_has_bf16():
        return "mixed_bfloat16"
    return "float32"


def set_precision(policy="auto"):
    """Set Keras' global dtype policy and return its name.

    Call it before building the model: layers read the global policy when created.
    Keep the model's last layer (or a final `Activation`) in float32
    (`dtype="float32"`) so that softmax and the loss are computed in full precision.

    Args:
        policy: One of "auto", "float32", "mixed_float16", "mixed_bfloat16".

    Returns:
        The resolved policy name that is now the global policy.

    Raises:
        UserInputError: unknown `policy`.
    """
    resolved = resolve_precision(policy)
    if resolved == "mixed_float16" and _cpu_only():
        # tensorflow/tensorflow#45441: float16 kernels on CPU are emulated and many
        # times slower than float32 (seen here: under 4 img/s vs 268 for float32).
        warnings.warn(
            "precision 'mixed_float16' on a machine without a GPU is many times slower "
            "than float32 (tensorflow/tensorflow#45441); use 'auto', 'mixed_bfloat16' or "
            "'float32' on CPU",
            RuntimeWarning,
            stacklevel=2,
        )
    import keras

    keras.mixed_precision.set_global_policy(resolved)
    return resolved


def cpu_has_bf16(cpuinfo_path="/proc/cpuinfo"):
    """Whether the CPU advertises bfloat16 instructions (Linux /proc/cpuinfo flags).

    Args:
        cpuinfo_path: File to read; returns False when it does not exist (non-Linux).

    Returns:
        True when any of avx512_bf16 / amx_bf16 is among the CPU flags.
    """
    try:
        with open(cpuinfo_path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.startswith("flags"):
                    flags = set(line.partition(":")[2].split())
                    return any(flag in flags for flag in _BF16_CPU_FLAGS)
    except OSError:
        return False
    return False


def _check(policy):
    if policy not in POLICIES:
        from tfaccel.errors import UserInputError

        raise UserInputError(f"precision must be one of {', '.join(POLICIES)}; got {policy!r}")


def _compute_capability(gpu):
    import tensorflow as tf

    capability = tf.config.experimental.get_device_details(gpu).get("compute_capability")
    return tuple(capability) if capability else None


def _cpu_only():
    import tensorflow as tf

    return not tf.config.list_physical_devices("GPU") and not tf.config.list_physical_devices("TPU")
