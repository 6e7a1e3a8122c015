"""training.loss and training.metrics: `auto` gives each task Keras' usual loss and metrics."""

import keras
import numpy as np
import pytest

from tfaccel.config.recipe import recipe_from_dict
from tfaccel.errors import RecipeError
from tfaccel.training.keras_objects.losses import logged_metric_names, make_loss, make_metrics

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


def _training(**keys):
    return recipe_from_dict({"training": keys}).training


@pytest.mark.parametrize("task, loss, logged", [
    ("classification", "sparse_categorical_crossentropy", ["accuracy"]),
    ("binary", "binary_crossentropy", ["accuracy", "auc"]),
    ("multi_label", "binary_crossentropy", ["binary_accuracy", "auc"]),
    ("regression", "mean_squared_error", ["mae", "rmse"]),
])
def test_auto_is_the_task_s_usual_loss_and_metrics(task, loss, logged):
    training = _training()
    assert (training.loss, training.metrics) == ("auto", "auto")  # the defaults
    assert make_loss(training, task=task) == loss
    assert logged_metric_names(training, task=task, num_outputs=3) == logged


def test_multi_label_auc_is_per_label_and_binary_accuracy_thresholds_at_one_half():
    metrics = make_metrics(_training(), task="multi_label", num_outputs=3)
    accuracy, auc = metrics
    assert isinstance(auc, keras.metrics.AUC) and auc.multi_label and auc.num_labels == 3
    accuracy.update_state(np.array([[1.0, 0.0, 1.0]]), np.array([[0.9, 0.6, 0.2]]))
    assert float(accuracy.result()) == pytest.approx(1 / 3)


def test_regression_metrics_are_the_error_in_the_target_s_unit():
    mae, rmse = make_metrics(_training(), task="regression")
    y, p = np.array([[1.0], [3.0]]), np.array([[2.0], [6.0]])
    mae.update_state(y, p)
    rmse.update_state(y, p)
    assert float(mae.result()) == pytest.approx(2.0)
    assert float(rmse.result()) == pytest.approx(np.sqrt(5.0))


def test_per_batch_leaves_out_the_metrics_that_keep_running_sums():
    # runtime.strategy parameter_server averages per-batch values: AUC and RMSE are not.
    assert logged_metric_names(_training(), task="regression", per_batch=True) == ["mae"]
    assert logged_metric_names(_training(), task="binary", per_batch=True) == ["accuracy"]


def test_explicit_names_keep_working_whatever_the_task():
    training = _training(loss="huber", metrics=["mae", {"name": "MeanSquaredError",
                                                        "params": {"name": "mse"}}])
    assert make_loss(training, task="regression") == "huber"
    assert logged_metric_names(training, task="regression") == ["mae", "mse"]
    classic = _training(loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    assert make_loss(classic, task="regression") == "sparse_categorical_crossentropy"
    assert logged_metric_names(classic, task="regression") == ["accuracy"]


def test_auto_loss_params_go_to_the_task_s_loss_class():
    training = _training(loss_params={"from_logits": True})
    assert make_loss(training, task="classification").from_logits
    binary = make_loss(training, task="binary")
    assert type(binary) is keras.losses.BinaryCrossentropy and binary.from_logits
    from tfaccel.errors import UserInputError

    with pytest.raises(UserInputError, match="training.loss_params"):
        make_loss(training, task="regression")  # MeanSquaredError takes no from_logits


def test_metrics_auto_or_a_list_and_nothing_else():
    assert _training(metrics=[]).metrics == []
    with pytest.raises(RecipeError, match="training.metrics"):
        recipe_from_dict({"training": {"metrics": "accuracy"}})
