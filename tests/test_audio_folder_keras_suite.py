"""Keras' own tests of audio_dataset_from_directory, run against from_audio_folder.

The test module is the one shipped in the installed keras wheel
(``keras/src/utils/audio_dataset_utils_test.py``), imported at run time: nothing of it is
copied here. Each of its test methods runs with ``audio_dataset_utils.
audio_dataset_from_directory`` (the name the module calls) replaced by `keras_signature`,
a thin adapter that calls `tfaccel.data.from_audio_folder` with Keras' arguments.

A test that fails for a deliberate, documented difference is listed in `DIFFERENCES`
(strict xfail: it must keep failing, so the list stays true); the same list is the table
in docs/data.md's audio section (tests/keras_suite_helpers.py runs both).
"""

import importlib
import sys
import types

import keras_suite_helpers

from tfaccel.data import from_audio_folder

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)

keras_tests = importlib.import_module("keras.src.utils.audio_dataset_utils_test")

ERRORS_TEST = "test_audio_dataset_from_directory_errors"
# Test method name -> why it fails on purpose (xfail, strict). Empty when every test passes.
DIFFERENCES = {
    ERRORS_TEST: "`sampling_rate=44100` for files at 1000 Hz is resampled by tfaccel "
                 "(`tfaccel.data.resample`, in TensorFlow ops), not Keras' `ImportError` "
                 "asking for tensorflow-io; every other check of the test passes "
                 "(`test_keras_errors_test_without_its_tensorflow_io_check`)",
}


def keras_signature(directory, **kwargs):
    """`keras.utils.audio_dataset_from_directory`'s arguments: ours are the same.

    Args:
        directory: The audio folder (positional, as in Keras).
        **kwargs: Every other Keras argument, passed as is.
    """
    return from_audio_folder(directory, **kwargs)


# A Keras upgrade that renames or drops the suite fails the first; the second ties the
# docs table to DIFFERENCES; the third runs every Keras test.
(test_the_keras_suite_is_found, test_the_docs_table_lists_the_same_tests,
 test_keras_audio_dataset_from_directory) = keras_suite_helpers.suite(
    keras_tests.AudioDatasetFromDirectoryTest, module=keras_tests.audio_dataset_utils,
    function="audio_dataset_from_directory", adapter=keras_signature,
    differences=DIFFERENCES, expected="test_audio_dataset_from_directory_ragged", at_least=15,
    heading="**Judged by Keras' own tests (audio).**")


def test_keras_errors_test_without_its_tensorflow_io_check(monkeypatch):
    # Keras' errors test checks the ImportError only when `import tensorflow_io` fails; an
    # importable stand-in skips that one check, so the test's other checks (Keras' wording
    # for sampling_rate, ragged, labels, class_names, splits) run against ours and pass.
    if "tensorflow_io" not in sys.modules:
        monkeypatch.setitem(sys.modules, "tensorflow_io", types.ModuleType("tensorflow_io"))
    monkeypatch.setattr(keras_tests.audio_dataset_utils, "audio_dataset_from_directory",
                        keras_signature)
    keras_suite_helpers.run(keras_tests.AudioDatasetFromDirectoryTest, ERRORS_TEST)


def test_the_sampling_rate_difference_is_a_resampling(tmp_path):
    # What the xfail above stands for: Keras' call resamples, without tensorflow-io.
    import tensorflow as tf

    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.wav").write_bytes(tf.audio.encode_wav(tf.zeros([5, 1]), 1000).numpy())
    ds = from_audio_folder(tmp_path, ragged=False, output_sequence_length=10,
                           sampling_rate=44100, verbose=False)
    x, _ = next(iter(ds))
    assert ds.sample_rate == 44100 and x.shape == (1, 10, 1)
