"""Choose and set the Keras mixed-precision policy for the hardware present."""

import json
import os
import time
import warnings

import keras
import tensorflow as tf

from tfaccel.atomic import write_file
from tfaccel.cache_dir import ENV as cache_dir_env
from tfaccel.cache_dir import cache_dir
from tfaccel.errors import UserInputError

POLICIES = ("auto", "float32", "mixed_float16", "mixed_bfloat16")

# CPU flags (as in /proc/cpuinfo) that mean bfloat16 matmuls/convolutions run natively.
_BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")

# On a CPU with bfloat16 instructions `auto` takes mixed_bfloat16 only when a training step
# measured in it is at least this much shorter than in float32: bf16 wins on some CPUs
# (AMX) and not on others, and a near tie is not worth bf16's lower precision. The margin
# also keeps a noisy timing near a tie from deciding.
BF16_MARGIN = 0.10
# Where the measurement is kept, per CPU model and TensorFlow version, so that one machine
# decides the same way every time (and measures once): in tfaccel's cache folder
# (tfaccel.cache_dir: $TFACCEL_CACHE_DIR, else ~/.cache/tfaccel).
CACHE_ENV = cache_dir_env
CACHE_FILE = "precision.json"
_decided = {}  # this process's decision by cache key: the file is read once


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
    return auto_choice()["policy"]


def auto_choice(*, measure: bool = True) -> dict:
    """What "auto" resolves to on this machine, and why: ``{"policy", "reason"}`` (on a CPU
    with bfloat16 instructions, `cpu_choice`'s figures beside them).

    Args:
        measure: Time a step on a CPU with bfloat16 instructions (`cpu_choice`). False
            decides by the flags alone (mixed_bfloat16): what several workers must do, as
            each would time its own machine and they must all train under one policy.
    """
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        capabilities = [_compute_capability(gpu) for gpu in gpus]
        # Tensor cores (7.0+) make float16 fast; older GPUs gain little and risk more.
        if all(cap is not None and cap >= (7, 0) for cap in capabilities):
            return {"policy": "mixed_float16", "reason": "GPUs of compute capability 7.0+"}
        return {"policy": "float32", "reason": "a GPU below compute capability 7.0"}
    if tf.config.list_physical_devices("TPU"):
        return {"policy": "mixed_bfloat16", "reason": "TPU"}
    if cpu_has_bf16():
        if not measure:
            return {"policy": "mixed_bfloat16",
                    "reason": "the CPU has bfloat16 instructions (several workers: unmeasured)"}
        return cpu_choice()
    return {"policy": "float32", "reason": "the CPU has no bfloat16 instructions"}


def cpu_choice() -> dict:
    """float32 or mixed_bfloat16 on this CPU, by a measured step, cached per CPU model.

    The first call on a machine times `measure_cpu_step` (about a second) and keeps the
    figures in the cache file (see `CACHE_ENV`); later calls, in any process, reuse them,
    so the same machine decides the same way each time.

    Returns:
        ``{"policy", "reason", "cpu", "float32_ms", "bfloat16_ms", "measured"}``:
        `measured` is False when the figures came from the cache.
    """
    key = _cpu_key()
    if key not in _decided:
        path = _cache_path()
        cache = _read_json(path)
        figures, measured = cache.get(key), False
        if not _valid(figures):
            float32_ms, bfloat16_ms = measure_cpu_step()
            figures = {"float32_ms": round(float32_ms, 4),
                       "bfloat16_ms": round(bfloat16_ms, 4)}
            measured = True
            _write_cache(path, {**cache, key: figures})
        _decided[key] = (figures, measured)
    figures, measured = _decided[key]
    _decided[key] = (figures, False)  # measured once per process
    faster = figures["bfloat16_ms"] <= (1.0 - BF16_MARGIN) * figures["float32_ms"]
    policy = "mixed_bfloat16" if faster else "float32"
    ratio = figures["float32_ms"] / max(figures["bfloat16_ms"], 1e-9)
    reason = (f"a measured step took {figures['float32_ms']:.2f} ms in float32 and "
              f"{figures['bfloat16_ms']:.2f} ms in bfloat16 ({ratio:.2f}x"
              f"{'' if faster else f': bfloat16 not at least {BF16_MARGIN:.0%} faster'})")
    return {"policy": policy, "reason": reason, "cpu": key, "measured": measured,
            **figures}


def measure_cpu_step(*, batch=32, repeats=3, steps=3):
    """Milliseconds of one training step of a small CNN in float32 and in bfloat16.

    The step (two 3x3 convolutions, pooling, a dense layer, its gradients) stands in for
    the vision models' kernels; bfloat16 computes as Keras' mixed_bfloat16 does (float32
    weights cast to bfloat16, float32 updates). The two are timed in turns, the shortest
    of `repeats` rounds of `steps` steps kept. Inputs are stateless random draws: no global
    random state is used.

    Returns:
        ``(float32_ms, bfloat16_ms)``.
    """
    def draw(shape, salt):
        return tf.random.stateless_normal(shape, seed=[salt, 0]) * 0.1

    weights = [tf.Variable(draw(shape, i)) for i, shape in enumerate(
        [(3, 3, 3, 16), (3, 3, 16, 32), (32, 10)])]
    images = draw((batch, 32, 32, 3), 7)
    labels = tf.zeros([batch], tf.int32)

    def make_step(dtype):
        @tf.function
        def step():
            with tf.GradientTape() as tape:
                w = [tf.cast(v, dtype) for v in weights]
                x = tf.nn.relu(tf.nn.conv2d(tf.cast(images, dtype), w[0], 1, "SAME"))
                x = tf.nn.relu(tf.nn.conv2d(x, w[1], 1, "SAME"))
                logits = tf.matmul(tf.reduce_mean(x, axis=[1, 2]), w[2])
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                    labels, tf.cast(logits, tf.float32)))
            for variable, gradient in zip(weights, tape.gradient(loss, weights)):
                variable.assign_sub(0.01 * tf.cast(gradient, tf.float32))
            return loss

        return step

    runs = {"float32": make_step(tf.float32), "bfloat16": make_step(tf.bfloat16)}
    best = dict.fromkeys(runs, float("inf"))
    for name, step in runs.items():
        step().numpy()  # trace
    for _ in range(repeats):
        for name, step in runs.items():
            start = time.perf_counter()
            for _ in range(steps):
                loss = step()
            loss.numpy()
            best[name] = min(best[name], (time.perf_counter() - start) / steps)
    return best["float32"] * 1e3, best["bfloat16"] * 1e3


def _cpu_key(cpuinfo_path="/proc/cpuinfo"):
    """The cache key: the CPU's model name and TensorFlow's version (its kernels decide)."""
    name = "unknown CPU"
    try:
        with open(cpuinfo_path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.startswith("model name"):
                    name = line.partition(":")[2].strip()
                    break
    except OSError:
        pass
    return f"{name} | tensorflow {tf.__version__}"


def _cache_path():
    return cache_dir(CACHE_FILE)


def _read_json(path) -> dict:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _valid(figures) -> bool:
    return isinstance(figures, dict) and all(
        isinstance(figures.get(k), (int, float)) and figures[k] > 0
        for k in ("float32_ms", "bfloat16_ms"))


def _write_cache(path, data) -> None:
    # A cache that cannot be written (read-only home) only costs a measurement next time.
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_file(path, json.dumps(data, indent=1, sort_keys=True))
    except OSError:
        pass


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
        raise UserInputError(f"precision must be one of {', '.join(POLICIES)}; got {policy!r}")


def _compute_capability(gpu):
    capability = tf.config.experimental.get_device_details(gpu).get("compute_capability")
    return tuple(capability) if capability else None


def _cpu_only():
    return not tf.config.list_physical_devices("GPU") and not tf.config.list_physical_devices("TPU")
