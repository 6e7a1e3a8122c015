"""Which timesteps of a padded batch are real, and means over them alone."""

from keras import ops


def trailing_mask(x):
    """1.0 up to each example's last non-zero timestep, 0.0 after it: ``[batch, time, 1]``.

    A padded batch appends zeros, so the zeros after the last non-zero step are taken as
    padding (a recording's own trailing silence too: it cannot be told from padding).
    """
    nonzero = ops.cast(ops.any(ops.not_equal(x, 0), axis=-1, keepdims=True), "float32")
    # Reverse cumulative sum: > 0 wherever a non-zero step is at or after this one.
    later = ops.flip(ops.cumsum(ops.flip(nonzero, axis=1), axis=1), axis=1)
    return ops.cast(ops.greater(later, 0), "float32")


def masked_mean(x, mask):
    """Mean over time of the steps `mask` keeps (0 for an example with none)."""
    count = ops.maximum(ops.sum(mask, axis=1), 1.0)
    return ops.sum(x * mask, axis=1) / count
