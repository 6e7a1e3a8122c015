"""Tests for tfaccel.engine.threads: thread-pool sizes, applied only before TF initialises."""

import pytest
import tensorflow as tf

from tfaccel.engine.threads import configure_threads
from tfaccel.errors import UserInputError

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


def test_configure_threads_after_initialisation_warns_and_reports():
    tf.constant(1.0)  # make sure the runtime is initialised
    current = configure_threads()
    assert current["intra_op"] >= 1 and current["inter_op"] >= 1 and current["cores"] >= 1
    assert current["applied"] is True
    with pytest.warns(RuntimeWarning, match="already initialised"):
        result = configure_threads(intra_op=current["intra_op"] + 7)
    assert result["applied"] is False
    assert result["intra_op"] == current["intra_op"]


@pytest.mark.parametrize("bad", [-1, 1.5, "4", True])
def test_configure_threads_rejects_bad_values(bad):
    with pytest.raises(UserInputError, match="intra_op"):
        configure_threads(intra_op=bad)
