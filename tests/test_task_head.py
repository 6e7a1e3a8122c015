"""Tests of THE last layer by task (models/task_head.py), through the registry."""

import pytest

from tfaccel import models
from tfaccel.errors import UserInputError

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


@pytest.mark.parametrize("task, width, activation", [
    ("classification", 3, "softmax"), ("binary", 1, "sigmoid"),
    ("multi_label", 4, "sigmoid"), ("regression", 2, "linear")])
def test_every_task_gets_its_head(task, width, activation):
    model = models.build_model("mlp", input_shape=(5,), task=task, num_outputs=width,
                        normalization="none")
    head = model.get_layer("predictions")
    assert model.output_shape == (None, width)
    assert head.activation.__name__ == activation and head.dtype == "float32"


def test_a_regression_head_of_zero_outputs_is_refused():
    with pytest.raises(UserInputError, match="num_outputs must be an integer >= 1 for task "
                                             "'regression', got 0"):
        models.build_model("mlp", input_shape=(5,), task="regression", num_outputs=0)
