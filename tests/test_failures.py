"""tfaccel/training/run/failures.py: a failed run's TensorFlow error as one clear user error."""

import types
from pathlib import Path

import tensorflow as tf

from tfaccel.errors import DataError, TrainingError
from tfaccel.training.run.failures import as_training_error, data_error_in, non_finite_loss_error

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


def _op_error(message: str) -> tf.errors.OpError:
    return tf.errors.InvalidArgumentError(None, None, message)


def _outputs(finished_epochs: int):
    # What as_training_error reads of the run's callbacks: the finished epochs' records.
    return types.SimpleNamespace(logger=types.SimpleNamespace(
        records=[{"epoch": i + 1} for i in range(finished_epochs)]))


def test_a_non_finite_loss_names_the_loss_the_epoch_the_batch_and_the_run_directory():
    error = non_finite_loss_error({"loss": "nan", "epoch": 3, "batch": 17},
                                  directory=Path("runs/x"))
    assert isinstance(error, TrainingError)
    assert str(error).startswith("the training loss became nan at epoch 3, batch 17; ")
    assert "kept in runs/x. Lower optimizer.learning_rate" in str(error)


def test_a_data_error_raised_inside_tf_data_is_found_in_the_op_error():
    graph_check = _op_error("assertion failed: [DataError: a.csv line 4: column x is nan]"
                            "\n\t [[{{node Assert}}]]")
    assert data_error_in(graph_check) == "a.csv line 4: column x is nan"
    python_source = _op_error("Traceback ...\nDataError: b.txt is not UTF-8 text.\n\t [[x]]")
    assert data_error_in(python_source) == "b.txt is not UTF-8 text."
    assert data_error_in(_op_error("Received a label value of 7")) is None
    assert data_error_in(ValueError("DataError: not an OpError")) is None


def test_an_op_error_becomes_a_data_error_when_the_data_is_at_fault_else_a_training_error():
    bad_data = as_training_error(_op_error("DataError: c.wav is empty."),
                                 outputs=_outputs(2), directory=Path("runs/y"))
    assert type(bad_data) is DataError
    assert str(bad_data) == ("c.wav is empty. Metrics and checkpoints of the 2 finished "
                             "epoch(s) are kept in runs/y.")
    failed = as_training_error(_op_error("Received a label value of 7"),
                               outputs=_outputs(0), directory=None)
    assert type(failed) is TrainingError
    assert str(failed).startswith("training failed after 0 finished epoch(s): Received a label "
                                  "value of 7\n")
    assert str(failed).endswith("kept by the chief (worker 0).")
    other = KeyboardInterrupt()
    assert as_training_error(other, outputs=_outputs(1), directory=None) is other
