"""Keras' own tests of image_dataset_from_directory, run against from_image_folder.

The test module is the one shipped in the installed keras wheel
(``keras/src/utils/image_dataset_utils_test.py``), imported at run time: nothing of it is
copied here. Each of its test methods runs with ``image_dataset_utils.
image_dataset_from_directory`` (the name the module calls) replaced by `keras_signature`,
a thin adapter that takes Keras' arguments and calls `tfaccel.data.from_image_folder`.

A test that fails for a deliberate, documented difference is listed in `DIFFERENCES`
(strict xfail: it must keep failing, so the list stays true); the same list is the table
in docs/data.md's "Coming from Keras" section (tests/keras_suite_helpers.py runs both).
"""

import importlib

import keras
import keras_suite_helpers

from tfaccel.data import from_image_folder

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)

keras_tests = importlib.import_module("keras.src.utils.image_dataset_utils_test")

# Test method name -> why it fails on purpose (xfail, strict). Empty when every test passes.
DIFFERENCES = {}


def keras_signature(directory, *, data_format=None, **kwargs):
    """`keras.utils.image_dataset_from_directory`'s arguments, mapped onto ours.

    Args:
        directory: The image folder (positional, as in Keras).
        data_format: Only channels-last (Keras' default) exists in tfaccel.
        **kwargs: Every other Keras argument (`verbose` and `format` included: "tf" is
            taken, the "grain" tests are skipped), passed as is.
    """
    if (data_format or keras.config.image_data_format()) != "channels_last":
        raise AssertionError(f"from_image_folder yields channels-last images only; "
                             f"got data_format={data_format!r}.")
    return from_image_folder(directory, **kwargs)


# A Keras upgrade that renames or drops the suite fails the first; the second ties the
# docs table to DIFFERENCES; the third runs every Keras test.
(test_the_keras_suite_is_found, test_the_docs_table_lists_the_same_tests,
 test_keras_image_dataset_from_directory) = keras_suite_helpers.suite(
    keras_tests.ImageDatasetFromDirectoryTest, module=keras_tests.image_dataset_utils,
    function="image_dataset_from_directory", adapter=keras_signature, differences=DIFFERENCES,
    expected="test_image_dataset_from_directory_shuffle_tf", at_least=15,
    heading="**Judged by Keras' own tests.**")
