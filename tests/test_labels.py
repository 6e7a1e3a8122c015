"""The label rule (tfaccel.reading.labels): labels read, never counted; the task inferred or declared."""

import numpy as np
import pytest

from tfaccel.errors import DataError
from tfaccel.reading.labels import plan_labels

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


def test_labels_one_to_k_are_k_classes_not_k_plus_one():
    plan = plan_labels(np.array([1, 2, 3, 3, 1]), where="y")
    assert (plan.task, plan.num_outputs, plan.class_names) == ("classification", 3,
                                                               ("1", "2", "3"))
    assert plan.encode(np.array([3, 1, 2])).tolist() == [2, 0, 1]


def test_string_labels_are_the_sorted_distinct_values():
    plan = plan_labels(np.array(["Gentoo", "Adelie", "Chinstrap", "Adelie"]), where="species")
    assert plan.class_names == ("Adelie", "Chinstrap", "Gentoo")
    assert plan.encode(np.array([b"Gentoo", b"Adelie"])).tolist() == [2, 0]  # bytes too


def test_labels_zero_to_k_minus_one_keep_their_ids():
    plan = plan_labels(np.array([0, 2, 1, 2]), where="y")
    assert plan.identity and plan.encode([2, 0]).tolist() == [2, 0]


def test_minus_one_and_one_as_binary_or_two_classes():
    assert plan_labels(np.array([-1, 1, 1]), where="y").num_outputs == 2
    plan = plan_labels(np.array([-1, 1, 1]), task="binary", where="y")
    assert (plan.task, plan.num_outputs, plan.num_classes) == ("binary", 1, 2)
    assert plan.encode(np.array([1, -1])).tolist() == [1, 0]


def test_fractional_floats_are_regression_under_auto_and_refused_for_classification():
    plan = plan_labels(np.array([0.5, 1.25, 3.0]), where="data.label_key 'price'")
    assert (plan.task, plan.num_outputs, plan.num_classes) == ("regression", 1, None)
    with pytest.raises(DataError, match=r"data.label_key 'price' holds float values .*"
                                        r"data.task: regression"):
        plan_labels(np.array([0.5, 1.25]), task="classification",
                    where="data.label_key 'price'")


def test_integral_floats_are_classes():
    plan = plan_labels(np.array([1.0, 2.0, 1.0]), where="y")
    assert plan.class_names == ("1", "2") and plan.encode(np.array([2.0])).tolist() == [1]


def test_several_zero_one_columns_are_multi_label_and_floats_regression():
    plan = plan_labels(np.array([[0, 1], [1, 1]]), where="y", names=["a", "b"])
    assert (plan.task, plan.num_outputs, plan.class_names) == ("multi_label", 2, ("a", "b"))
    plan = plan_labels(np.array([[0.5, 1.0], [2.0, 3.0]]), where="y")
    assert (plan.task, plan.num_outputs) == ("regression", 2)
    with pytest.raises(DataError, match="other than 0 and 1"):
        plan_labels(np.array([[0, 2], [1, 1]]), task="multi_label", where="y")


def test_one_class_and_many_integer_values_are_refused_with_the_key_that_decides():
    with pytest.raises(DataError, match="one class"):
        plan_labels(np.array(["a", "a"]), where="y")
    with pytest.raises(DataError, match="data.task: regression"):
        plan_labels(np.arange(500) % 300, where="y")
    with pytest.raises(DataError, match="exactly 2"):
        plan_labels(np.array([0, 1, 2]), task="binary", where="y")


def test_a_label_unseen_in_training_is_named():
    plan = plan_labels(np.array(["a", "b"]), where="y")
    with pytest.raises(DataError, match="label c is not one of the classes"):
        plan.encode(np.array(["c"]))
    plan = plan_labels(np.array([1, 3]), where="y")
    with pytest.raises(DataError, match="label 2 is not one of the classes"):
        plan.encode(np.array([2]))


def test_declared_num_classes_keeps_ids_and_checks_the_range():
    plan = plan_labels(np.array([0, 1]), where="y", num_classes=4)
    assert plan.num_outputs == 4 and plan.identity
    with pytest.raises(DataError, match="holds label 4 but data.num_classes is 4"):
        plan_labels(np.array([0, 4]), where="y", num_classes=4)
