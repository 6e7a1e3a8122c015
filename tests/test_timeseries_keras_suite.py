"""Keras' own tests of timeseries_dataset_from_array, run against from_timeseries.

The test module is the one shipped in the installed keras wheel
(``keras/src/utils/timeseries_dataset_utils_test.py``), imported at run time: nothing of it
is copied here. Each of its test methods runs with ``timeseries_dataset_utils.
timeseries_dataset_from_array`` (the name the module calls) replaced by `keras_signature`,
a thin adapter that takes Keras' arguments and calls `tfaccel.data.from_timeseries`.

A test that fails for a deliberate, documented difference is listed in `DIFFERENCES`
(strict xfail: it must keep failing, so the list stays true); the same list is the table
in docs/data.md's time series section (tests/keras_suite_helpers.py runs it).
"""

import importlib

import keras_suite_helpers

from tfaccel.data import from_timeseries

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)

keras_tests = importlib.import_module("keras.src.utils.timeseries_dataset_utils_test")

# Test method name -> why it fails on purpose (xfail, strict). Empty when every test passes.
DIFFERENCES = {}


def keras_signature(data, targets, sequence_length, *, format="tf", **kwargs):
    """`keras.utils.timeseries_dataset_from_array`'s arguments, mapped onto ours.

    Args:
        data: The time series (positional, as in Keras).
        targets: Its targets, or None (positional, as in Keras).
        sequence_length: Timesteps per window (positional, as in Keras' own tests).
        format: Only "tf" (a `tf.data.Dataset`); the "grain" tests are skipped. Any other
            value is refused with Keras' wording (Keras' test of that checks it).
        **kwargs: Every other Keras argument, passed as is.
    """
    if format not in ("tf", "grain"):
        raise ValueError(f'`format` should be either "tf" or "grain". Received: '
                         f"format={format}")
    keras_suite_helpers.tf_format_only(format, builder="from_timeseries")
    return from_timeseries(data, targets, sequence_length, **kwargs)


# A Keras upgrade that renames or drops the suite fails the first; the second ties the
# docs table to DIFFERENCES; the third runs every Keras test.
(test_the_keras_suite_is_found, test_the_docs_table_lists_the_same_tests,
 test_keras_timeseries_dataset_from_array) = keras_suite_helpers.suite(
    keras_tests.TimeseriesDatasetTest, module=keras_tests.timeseries_dataset_utils,
    function="timeseries_dataset_from_array", adapter=keras_signature,
    differences=DIFFERENCES, expected="test_shuffle_tf", at_least=10,
    heading="**Judged by Keras' own tests: time series.**")
