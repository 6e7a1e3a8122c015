"""The sequence model seq_cnn: (timesteps, channels) of any length, padding-free results."""

import keras
from keras import ops

from tfaccel.models.masks import masked_mean, trailing_mask
from tfaccel.models.task_head import output_head


def build_seq_cnn(*, input_shape, num_classes,
                  task="classification", filters, kernel_size, strides, standardize,
                  dropout, input_mean=None, input_std=None):
    """Masked per-example standardisation, strided causal Conv1D stages, masked pooling.

    Predictions do not depend on zeros appended at the end (a padded batch): the mask
    drops them from the statistics and the pooling, and causal convolutions (padded on the
    left only, by an amount that does not depend on the length) compute every kept step
    from kept steps alone. Equal up to float rounding; tests/test_sequence_models.py.
    """
    inputs = keras.Input(shape=input_shape, name="sequence")
    x = ops.cast(inputs, "float32")
    mask = trailing_mask(x)
    level = None
    if standardize:
        # Each example, each channel, to mean 0 and variance 1 over its own steps: raw WAV
        # floats in [-1, 1] and raw time-series values (any scale) alike. Computed in
        # float32 whatever the policy, before the first layer casts to it.
        mean = masked_mean(x, mask)[:, None, :]
        var = masked_mean(ops.square(x - mean), mask)[:, None, :]
        x = (x - mean) * ops.rsqrt(var + 1e-6) * mask
        if input_mean is not None:
            # That removes the window's level and scale, which a series' classes may be
            # (a temperature binned into classes): given the training rows' statistics,
            # they return as features, standardised by them (docs/engine.md).
            level = _window_level(mean[:, 0, :], ops.sqrt(var[:, 0, :]),
                                  input_mean=input_mean, input_std=input_std)
    for width in filters:
        x = keras.layers.Conv1D(width, kernel_size, strides=strides, padding="causal",
                                activation="relu")(x)
        # Step j of a strided causal layer is computed from input steps up to j * strides:
        # it is kept when that step was.
        mask = mask[:, ::strides, :]
    # Pooled in float32: a mean over thousands of steps in bfloat16 would lose digits.
    x = ops.cast(x, "float32")
    # ReLU outputs are >= 0, so the zeroed dropped steps never win the max.
    pooled = [masked_mean(x, mask), ops.max(x * mask, axis=1)]
    x = keras.layers.Concatenate()(pooled + ([] if level is None else [level]))
    return keras.Model(inputs, output_head(x, task=task, num_outputs=num_classes,
                                           dropout=dropout), name="seq_cnn")


def _window_level(mean, std, *, input_mean, input_std):
    """A window's per-channel mean and standard deviation, standardised by the training
    rows' (`input_mean`, `input_std`, one per channel), float32: ``[batch, 2 * channels]``."""
    centre = ops.convert_to_tensor(input_mean, "float32")
    scale = ops.convert_to_tensor(input_std, "float32")
    return ops.concatenate([(mean - centre) / scale, std / scale], axis=-1)
