"""The checks of a registered model's parameters, input shape and class count, without TensorFlow."""

import math

from tfaccel.errors import UserInputError, did_you_mean
from tfaccel.models.defaults import APPLICATION_MIN_SIZE

# String-valued parameters and the values they accept.
_CHOICES = {"normalization": ("per_image", "rescale", "none")}
# Integer parameters where 0 is meaningful ("leave this part out"); others start at 1.
_INT_MINIMUM = {"dense_units": 0}


# Per-channel or per-output statistics of the training split (source timeseries sets them).
_STATISTICS = ("input_mean", "input_std", "target_mean", "target_std")


def _check_statistics(where, key, value):
    if value is None:
        return None
    numbers = value if isinstance(value, (list, tuple)) else None
    if not numbers or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                              and math.isfinite(v) for v in numbers) \
            or (key.endswith("_std") and min(numbers) <= 0):
        kind = "positive numbers" if key.endswith("_std") else "finite numbers"
        raise UserInputError(f"{where} must be null (set from the training data) or a "
                             f"non-empty list of {kind}, got {value!r}.")
    return tuple(float(v) for v in numbers)


def is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def check_param(model, key, value, default):
    """Returns `value` converted to the default's kind, or raises naming the parameter."""
    where = f"model {model!r} parameter {key!r}"
    if isinstance(default, tuple):
        if (not isinstance(value, (list, tuple)) or not value
                or not all(is_int(v) and v > 0 for v in value)):
            raise UserInputError(
                f"{where} must be a non-empty list of positive integers, got {value!r}."
            )
        return tuple(value)
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise UserInputError(f"{where} must be true or false, got {value!r}.")
        return value
    if key in _CHOICES:
        if value not in _CHOICES[key]:
            raise UserInputError(
                f"{where} must be one of {', '.join(map(repr, _CHOICES[key]))}, got {value!r}"
                f"{did_you_mean(value, _CHOICES[key])}."
            )
        return value
    if key == "l2":
        if not (isinstance(value, (int, float)) and not isinstance(value, bool)
                and 0 <= value < math.inf):
            raise UserInputError(f"{where} must be a number >= 0, got {value!r}.")
        return float(value)
    if key in ("dropout", "bn_momentum"):  # a rate and a momentum: both in [0, 1)
        if not (isinstance(value, (int, float)) and not isinstance(value, bool)
                and 0 <= value < 1):
            raise UserInputError(f"{where} must be a number in [0, 1), got {value!r}.")
        return float(value)
    if key == "vocab_size":
        if value is not None and not (is_int(value) and value >= 3):
            raise UserInputError(f"{where} must be null (the adapted vocabulary's size) or an "
                                 f"integer >= 3, got {value!r}.")
        return value
    if key in _STATISTICS:
        return _check_statistics(where, key, value)
    if key == "anchor":
        if value is not None and not (isinstance(value, (list, tuple)) and value
                                      and all(is_int(v) and v >= 0 for v in value)):
            raise UserInputError(f"{where} must be null or a non-empty list of input channel "
                                 f"indices (integers >= 0), got {value!r}.")
        return None if value is None else tuple(value)
    if key == "image_size":
        if value is not None and not (is_int(value) and value >= APPLICATION_MIN_SIZE):
            raise UserInputError(
                f"{where} must be null (input size, at least {APPLICATION_MIN_SIZE}) or an "
                f"integer >= {APPLICATION_MIN_SIZE}, got {value!r}."
            )
        return value
    if isinstance(default, float):
        if not (isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0):
            raise UserInputError(f"{where} must be a positive number, got {value!r}.")
        return float(value)
    if is_int(default):
        minimum = _INT_MINIMUM.get(key, 1)
        if not (is_int(value) and value >= minimum):
            raise UserInputError(f"{where} must be an integer >= {minimum}, got {value!r}.")
        return value
    return value


_EXPECTED_SHAPES = {"images": "(height, width, channels)", "features": "a shape",
                    "sequences": "(timesteps, channels), timesteps None for any length"}


def check_shape(input_shape, *, inputs="images"):
    shape = tuple(input_shape) if isinstance(input_shape, (list, tuple)) else None
    rank = {"images": 3, "sequences": 2}.get(inputs)
    rank_ok = shape is not None and (len(shape) == rank if rank else len(shape) >= 1)
    # Only a sequence's length may be open (each batch as long as its own longest).
    sizes = shape[1:] if rank_ok and inputs == "sequences" and shape[0] is None else shape
    if not rank_ok or not all(is_int(d) and d > 0 for d in sizes):
        expected = _EXPECTED_SHAPES[inputs]
        fix = ""
        if inputs == "images" and shape is not None and len(shape) == 2:
            # Keras' grey-scale datasets (MNIST) are (N, H, W): the usual way to get here.
            fix = (f": grey-scale images need a channel axis, {(*shape, 1)!r} (data.source "
                   "arrays adds it to integer (N, H, W) arrays; give float ones as "
                   "x[..., None])")
        raise UserInputError(
            f"input_shape must be {expected} of positive integers, got {input_shape!r}"
            f"{fix}."
        )
    return shape


def check_classes(num_classes, task="classification"):
    if task == "classification":
        if not (is_int(num_classes) and num_classes >= 2):
            raise UserInputError(f"num_classes must be an integer >= 2, got {num_classes!r}.")
    elif not (is_int(num_classes) and num_classes >= 1):
        raise UserInputError(f"num_outputs must be an integer >= 1 for task {task!r}, got "
                             f"{num_classes!r}.")
