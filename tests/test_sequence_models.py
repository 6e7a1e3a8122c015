"""Sequence models (seq_cnn): any length, trailing zeros never change a prediction, any scale."""

import keras
import numpy as np
import pytest
from click.testing import CliRunner

from tfaccel import models
from tfaccel.cli.main import main
from tfaccel.errors import UserInputError

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)

LENGTHS = (1000, 300, 777, 1, 64)


def _padded(channels=1, scale=1.0, offset=0.0):
    """Five sequences in one batch, zero after their own length (a padded batch)."""
    x = np.random.default_rng(0).uniform(-1, 1, (len(LENGTHS), 1000, channels))
    x = (x * scale + offset).astype("float32")
    for row, n in enumerate(LENGTHS):
        x[row, n:] = 0
    return x


@pytest.mark.parametrize("precision, atol", [("float32", 1e-5), ("mixed_bfloat16", 2e-3)])
def test_seq_cnn_predictions_do_not_depend_on_trailing_zeros(policy, precision, atol):
    policy(precision)
    model = models.build_model("seq_cnn", input_shape=(None, 2), num_classes=3)
    x = _padded(channels=2)
    as_is = model.predict(x, verbose=0)
    assert as_is.dtype == np.float32 and as_is.shape == (5, 3)
    np.testing.assert_allclose(as_is.sum(axis=1), 1.0, atol=1e-5)
    # More padding at the end: the same probabilities (up to float rounding).
    longer = model.predict(np.pad(x, ((0, 0), (0, 555), (0, 0))), verbose=0)
    np.testing.assert_allclose(longer, as_is, atol=atol)
    # Each example alone at its own length, as an unpadded batch of one.
    for row, n in enumerate(LENGTHS):
        np.testing.assert_allclose(model.predict(x[row:row + 1, :n], verbose=0)[0],
                                   as_is[row], atol=atol)
    # Not a constant model: the examples get different predictions.
    assert np.ptp(as_is, axis=0).max() > 1e-3


def test_seq_cnn_standardises_each_example_so_scale_and_level_do_not_matter():
    model = models.build_model("seq_cnn", input_shape=(None, 1), num_classes=2)
    wav = _padded()                                   # WAV floats in [-1, 1]
    raw = _padded(scale=250.0, offset=1000.0)         # a raw series: level 1000, spread 250
    raw[wav == 0] = 0                                 # the same padding
    np.testing.assert_allclose(model.predict(raw, verbose=0), model.predict(wav, verbose=0),
                               atol=1e-4)
    plain = models.build_model("seq_cnn", input_shape=(None, 1), num_classes=2,
                               standardize=False)
    assert not np.allclose(plain.predict(raw, verbose=0), plain.predict(wav, verbose=0),
                           atol=1e-4)


def test_seq_cnn_strides_shorten_the_sequence_and_a_fixed_length_works(tmp_path):
    model = models.build_model("seq_cnn", input_shape=(48, 3), num_classes=4,
                               filters=[8, 16], kernel_size=5, strides=2, dropout=0.0)
    convs = [layer for layer in model.layers if isinstance(layer, keras.layers.Conv1D)]
    assert [c.filters for c in convs] == [8, 16]
    assert [tuple(c.strides) for c in convs] == [(2,), (2,)]
    assert convs[-1].output.shape[1] == 12  # 48 / 2 / 2
    x = np.random.default_rng(1).normal(size=(2, 48, 3)).astype("float32")
    # Saved and loaded back with stock layers and ops only: no custom objects.
    model.save(tmp_path / "m.keras")
    again = keras.models.load_model(tmp_path / "m.keras")
    np.testing.assert_allclose(again.predict(x, verbose=0), model.predict(x, verbose=0),
                               atol=1e-6)


def test_seq_cnn_learns_tones_of_different_frequencies():
    rng = np.random.default_rng(2)
    labels = rng.integers(0, 2, 192)
    t = np.arange(400) / 8000
    phase = rng.uniform(0, 6.3, (192, 1))
    x = np.sin(2 * np.pi * np.where(labels[:, None], 1500, 400) * t + phase)
    x = (x + rng.normal(0, 0.1, x.shape))[..., None].astype("float32")
    model = models.build_model("seq_cnn", input_shape=(None, 1), num_classes=2)
    model.compile(optimizer=keras.optimizers.Adam(3e-3),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    history = model.fit(x, labels, epochs=4, batch_size=32, verbose=0)
    assert history.history["accuracy"][-1] > 0.95


def test_seq_cnn_is_registered_and_its_params_and_shapes_are_checked():
    assert models.MODELS["seq_cnn"].inputs == "sequences"
    assert models.model_params("seq_cnn") == {"filters": (32, 64, 128), "kernel_size": 9,
                                              "strides": 4, "standardize": True,
                                              "dropout": 0.1, "input_mean": None,
                                              "input_std": None}
    with pytest.raises(UserInputError, match="parameter 'strides' must be an integer >= 1, "
                                             "got 0"):
        models.check_params("seq_cnn", {"strides": 0})
    with pytest.raises(UserInputError, match="parameter 'standardize' must be true or false"):
        models.check_params("seq_cnn", {"standardize": "yes"})
    with pytest.raises(UserInputError, match=r"Unknown parameter 'stride' \(did you mean "
                                             r"'strides'\?\)"):
        models.check_params("seq_cnn", {"stride": 2})
    with pytest.raises(UserInputError, match=r"input_shape must be \(timesteps, channels\).* "
                                             r"got \(None, None\)"):
        models.build_model("seq_cnn", input_shape=(None, None), num_classes=2)
    # `tfaccel models` in this process (its listing is the subject, not a process start).
    result = CliRunner().invoke(main, ["models"])
    assert result.exit_code == 0, result.output
    listed = result.output
    assert any(line.startswith("seq_cnn ") and "strides=4" in line
               for line in listed.splitlines())


def test_seq_cnn_with_training_statistics_sees_the_level_of_a_window():
    """Per-window standardisation removes the level; given the training rows' statistics,
    the window's mean and spread come back as features: two windows of one shape at two
    levels then get different predictions."""
    shape = np.sin(np.arange(32) / 3.0)[None, :, None].astype("float32")
    low, high = shape + 10.0, shape + 20.0
    keras.utils.set_random_seed(0)
    plain = models.build_model("seq_cnn", input_shape=(32, 1), num_classes=3)
    np.testing.assert_allclose(plain.predict(low, verbose=0), plain.predict(high, verbose=0),
                               atol=1e-5)
    keras.utils.set_random_seed(0)
    level = models.build_model("seq_cnn", input_shape=(32, 1), num_classes=3,
                               input_mean=[15.0], input_std=[5.0])
    assert np.abs(level.predict(low, verbose=0) - level.predict(high, verbose=0)).max() > 1e-3


