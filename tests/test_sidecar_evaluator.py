"""The evaluator task's checks and its rule for when the chief's run has ended
(tfaccel.training.run.sidecar_evaluator); a whole evaluator beside a chief and a worker runs in
tests/test_platform_tasks.py."""

import json
import os
import time

import pytest

from tfaccel.errors import UserInputError
from tfaccel.training.run import sidecar_evaluator as evaluator

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)

RECIPE = {"name": "tiny", "data": {"source": "builtin"},
          "runtime": {"strategy": "multi_worker"}}


def test_an_evaluator_needs_the_chiefs_run_directory():
    with pytest.raises(UserInputError, match=r"evaluator task.*give --run-dir DIR"):
        evaluator.evaluate_alongside(RECIPE, run_dir=None)


def test_an_evaluator_takes_a_parameter_server_recipe(tmp_path):
    # Its checkpoints are evaluated too (tests/test_sidecar_evaluator_parameter_server.py);
    # here the chief's run ended before any, found at the start: nothing to wait for.
    recipe = {**RECIPE, "runtime": {"strategy": "parameter_server"}}
    (tmp_path / "checkpoints").mkdir()
    _summary(tmp_path, "completed")
    result = evaluator.evaluate_alongside(recipe, run_dir=tmp_path, poll_seconds=0.01)
    assert result.records == [] and result.run_dir == tmp_path


def _summary(directory, status):
    (directory / "summary.json").write_text(json.dumps({"status": status}))


def test_the_run_has_ended_once_the_chief_writes_its_summary(tmp_path):
    at_start = evaluator._summary_state(tmp_path)
    assert at_start is None and not evaluator._has_ended(tmp_path, at_start)
    _summary(tmp_path, "completed")
    assert evaluator._has_ended(tmp_path, at_start)


def test_a_resumed_chiefs_old_summary_does_not_end_it_a_completed_one_does(tmp_path):
    _summary(tmp_path, "preempted")  # the interrupted try's, kept until the resume ends
    at_start = evaluator._summary_state(tmp_path)
    assert not evaluator._has_ended(tmp_path, at_start)
    time.sleep(0.01)
    _summary(tmp_path, "completed")
    os.utime(tmp_path / "summary.json", ns=(time.time_ns(), time.time_ns() + 10**9))
    assert evaluator._has_ended(tmp_path, at_start)
    # Started after the chief had finished: evaluates what is there, then stops.
    assert evaluator._has_ended(tmp_path, evaluator._summary_state(tmp_path))


def test_without_a_recipe_the_evaluator_reads_the_chiefs(tmp_path):
    (tmp_path / "recipe.yaml").write_text("name: chiefs\nruntime: {strategy: auto}\n")
    recipe = evaluator._recipe(None, ["training.epochs=3"], directory=tmp_path,
                               poll_seconds=0.01, own_model=False)
    assert (recipe.name, recipe.training.epochs) == ("chiefs", 3)


def test_a_run_that_ends_before_any_checkpoint_is_said_so(tmp_path):
    (tmp_path / "checkpoints").mkdir()
    _summary(tmp_path, "completed")  # found at the start: no resume can follow
    result = evaluator._evaluate_until_done(
        evaluator._recipe(RECIPE, (), directory=tmp_path, poll_seconds=0.01,
                          own_model=False),
        directory=tmp_path, model=None, poll_seconds=0.01)
    assert result.records == []
    assert result.summary_text() == ("Evaluator: the chief's run ended before any "
                                     f"checkpoint appeared.\nThe chief wrote the run "
                                     f"directory: {tmp_path}")
