"""tfaccel/training/run/summary.py: THE summary.json of every run, typed, and its one writer."""

import dataclasses
import json

from tfaccel.training.run.summary import RunSummary, write_summary

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)

COMMON = dict(
    status="completed", name="r", task="classification", metric_names=["accuracy"],
    epochs_completed=2, final_metrics={"loss": 0.5}, saved_model_epoch=2,
    saved_model_metrics={"loss": 0.5}, keep="last", monitor="val_loss", best_epoch=None,
    best_value=None, examples_per_sec=10.0, first_epoch_examples_per_sec=5.0,
    throughput={"steps_per_sec": 3.0, "input_wait_fraction": None}, cpu_cores_available=2,
    wall_seconds=1.0, fit_seconds=0.5, devices=["/cpu:0"], strategy="one_device", workers=1,
    precision="float32", plan={"replicas": 1, "global_batch_size": 8}, steps_per_epoch=4,
    jit_compile=False, steps_per_execution=1, threads={}, dataset={}, class_names=["a"],
    model=None, versions={})


def test_the_summary_spreads_the_plan_and_throughput_and_leaves_out_what_a_run_has_not():
    payload = RunSummary(**COMMON).as_dict()
    assert payload["replicas"] == 1 and payload["global_batch_size"] == 8
    assert payload["steps_per_sec"] == 3.0 and "plan" not in payload
    assert payload["input_wait_fraction"] is None  # a figure: measured or null, always there
    assert payload["best_epoch"] is None and payload["model"] is None  # always there too
    for absent in ("keep_note", "pipeline", "precision_choice", "steps_per_execution_choice",
                   "steps_completed", "parameter_servers", "failure", "checkpoint"):
        assert absent not in payload


def test_one_writer_for_every_status(tmp_path):
    summary = RunSummary(**COMMON)
    failed = dataclasses.replace(summary, status="failed", steps_completed=12,
                                 failure={"error": "TrainingError", "message": "lost"})
    written = write_summary(tmp_path, failed)
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk == written
    assert (on_disk["status"], on_disk["steps_completed"], on_disk["failure"]["message"]) == (
        "failed", 12, "lost")
    assert written["name"] == "r" and written["epochs_completed"] == 2
