"""Where a run's wall time goes: contiguous phases, `train --timings`, summary.json's timings."""

import json
import re
import time

import numpy as np
from click.testing import CliRunner

from tfaccel.cli.main import main
from tfaccel.training.fit_callbacks.timings import PhaseTimes, process_start, timings_text

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


def test_phases_are_contiguous_and_sum_to_the_time_since_the_origin():
    clock = PhaseTimes()
    time.sleep(0.02)
    first = clock.mark("a")
    time.sleep(0.01)
    clock.mark("b")
    assert first >= 0.02
    assert [name for name, _ in clock.phases] == ["a", "b"]
    # No gap and no overlap: the sum is the origin to the last mark.
    assert abs(clock.total() - (clock._cursor - clock.origin)) < 1e-9
    recorded = clock.as_dict()
    assert [p["phase"] for p in recorded["phases"]] == ["a", "b"]
    assert recorded["seconds"] == round(clock.total(), 4)


def test_phases_timed_by_an_inner_clock_are_nested_with_their_rest():
    outer = PhaseTimes()
    outer.mark("before")
    start = time.perf_counter()
    inner = PhaseTimes(origin=start)
    time.sleep(0.01)
    inner.mark("work")
    time.sleep(0.01)
    end = time.perf_counter()
    outer.extend(inner.phases, prefix="train: ", rest="train: the rest", upto=end)
    names = [name for name, _ in outer.phases]
    assert names == ["before", "train: work", "train: the rest"]
    rest = outer.phases[-1][1]
    assert 0.01 <= rest < end - start
    assert abs(outer.total() - (end - outer.origin)) < 1e-6


def test_the_process_started_before_now():
    started = process_start()
    assert started is not None  # Linux: /proc tells
    assert 0 < time.perf_counter() - started < 24 * 3600


def test_the_text_puts_seconds_first():
    text = timings_text([["a", 1.5], ["b", 0.25]], wall=2.0, origin="the start")
    assert text.splitlines()[0].startswith("Timings: 2.00 s from the start")
    assert text.splitlines()[1:] == ["     1.50 s  a", "     0.25 s  b"]


def _blobs(path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(96, 6)).astype("float32")
    y = (x[:, 0] > 0).astype("int64")
    np.savez(path, x_train=x[:64], y_train=y[:64], x_test=x[64:], y_test=y[64:])


def test_train_timings_prints_every_phase_within_the_wall_time(tmp_path):
    _blobs(tmp_path / "blobs.npz")
    recipe = tmp_path / "r.yaml"
    recipe.write_text(json.dumps({
        "seed": 0,
        "data": {"source": "arrays", "path": str(tmp_path / "blobs.npz")},
        "model": {"name": "mlp", "params": {"hidden_units": [8]}},
        "training": {"epochs": 2, "global_batch_size": 16},
        "runtime": {"verbose": 0, "tensorboard": False, "precision": "float32"},
    }))
    run_dir = tmp_path / "run"
    result = CliRunner().invoke(main, ["train", str(recipe), "--run-dir", str(run_dir),
                                       "--timings"])
    assert result.exit_code == 0, result.output
    lines = result.output[result.output.index("Timings:"):].splitlines()
    wall = float(re.match(r"Timings: ([\d.]+) s from the process's start", lines[0]).group(1))
    phases = [re.match(r"\s+([\d.]+) s  (.+)$", line).groups() for line in lines[1:]]
    names = [name for _, name in phases]
    for expected in ("start: Python and tfaccel's command line", "read and check the recipe",
                     "import TensorFlow, Keras and tfaccel's trainer",
                     "train: build the data (listing, pipeline)",
                     "train: build and compile the model",
                     "train: epoch 1: first train call (traces and compiles the train "
                     "function)",
                     "train: epoch 1: first validation call (traces and compiles the test "
                     "function)",
                     "train: epoch 2: training", "train: epoch 2: validation",
                     "train: epoch 2: epoch-end callbacks (checkpoint, metrics.jsonl, best "
                     "epoch)",
                     "train: final save (model.keras)", "print the summary"):
        assert expected in names, (expected, names)
    # Epoch 2 trains the function epoch 1 traced (steps_per_execution auto kept 1 step per
    # call, or switched: then it says so).
    assert "train: epoch 2: first train call (traces and compiles the train function)" \
        not in names or "train: steps_per_execution auto: the choice and the input stream" \
        in names
    # Contiguous from the process's start: their sum is the time to the header line, at
    # most (each figure rounded to 0.01 s).
    total = sum(float(seconds) for seconds, _ in phases)
    assert total <= wall + 0.005 * len(phases)
    assert total >= wall - 0.05 - 0.005 * len(phases)
    # summary.json keeps the run's own phases, the same ones the CLI printed under train:.
    summary = json.loads((run_dir / "summary.json").read_text())
    recorded = summary["timings"]
    assert ["train: " + p["phase"] for p in recorded["phases"]] == [
        n for n in names if n.startswith("train: ")][:len(recorded["phases"])]
    assert abs(recorded["seconds"] - sum(p["seconds"] for p in recorded["phases"])) < 1e-3
