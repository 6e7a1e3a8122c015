"""Keras' own tests of text_dataset_from_directory, run against from_text_folder.

The test module is the one shipped in the installed keras wheel
(``keras/src/utils/text_dataset_utils_test.py``), imported at run time: nothing of it is
copied here. Each of its test methods runs with ``text_dataset_utils.
text_dataset_from_directory`` (the name the module calls) replaced by `keras_signature`,
a thin adapter that takes Keras' arguments and calls `tfaccel.data.from_text_folder`.

A test that fails for a deliberate, documented difference is listed in `DIFFERENCES`
(strict xfail: it must keep failing, so the list stays true); the same list is the table
in docs/data.md's text section (tests/keras_suite_helpers.py runs both).
"""

import importlib

import keras_suite_helpers

from tfaccel.data import from_text_folder

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)

keras_tests = importlib.import_module("keras.src.utils.text_dataset_utils_test")

# Test method name -> why it fails on purpose (xfail, strict). Empty when every test passes.
DIFFERENCES = {}


def keras_signature(directory, **kwargs):
    """`keras.utils.text_dataset_from_directory`'s arguments: ours are the same.

    Args:
        directory: The text folder (positional, as in Keras).
        **kwargs: Every other Keras argument (`format` included: "tf" is taken, the
            "grain" tests are skipped), passed as is.
    """
    return from_text_folder(directory, **kwargs)


# A Keras upgrade that renames or drops the suite fails the first; the second ties the
# docs table to DIFFERENCES; the third runs every Keras test.
(test_the_keras_suite_is_found, test_the_docs_table_lists_the_same_tests,
 test_keras_text_dataset_from_directory) = keras_suite_helpers.suite(
    keras_tests.TextDatasetFromDirectoryTest, module=keras_tests.text_dataset_utils,
    function="text_dataset_from_directory", adapter=keras_signature, differences=DIFFERENCES,
    expected="test_text_dataset_from_directory_validation_split_tf", at_least=10,
    heading="**Judged by Keras' own tests (text).**")
