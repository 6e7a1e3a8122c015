"""tfaccel/training/run/coordinator_loop.py: a parameter-server run's checkpoints are every
run's (checkpoints.py: atomic, checksummed, the newest good one picked), without a cluster."""

import json
from pathlib import Path
from types import SimpleNamespace

import keras
import numpy as np
import pytest

from tfaccel.errors import UserInputError
from tfaccel.training.run import coordinator_loop
from tfaccel.training.run_dir import checkpoints as ckpt

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


def _model_and_optimizer(seed):
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    optimizer = keras.optimizers.Adam()
    optimizer.build(model.trainable_variables)
    return model, optimizer


def _save(folder, model, optimizer, step):
    return coordinator_loop._save(folder, model=model, optimizer=optimizer, step=step,
                                  steps_per_epoch=4, records=[{"epoch": 1, "loss": 0.5}],
                                  partial=[{"loss": 0.25}], keep=2, servers=2)


def test_a_checkpoint_is_written_and_read_as_every_runs(tmp_path):
    model, optimizer = _model_and_optimizer(0)
    folder = tmp_path / "run" / "checkpoints"
    paths = [_save(folder, model, optimizer, step) for step in (4, 6, 8)]
    assert [p.name for p in paths] == ["step-0000004", "step-0000006", "step-0000008"]
    assert sorted(p.name for p in folder.iterdir()) == ["step-0000006", "step-0000008"]  # keep=2
    checkpoint, skipped = ckpt.latest_checkpoint(folder)
    assert (checkpoint.path.name, skipped) == ("step-0000008", [])
    assert (checkpoint.global_step, checkpoint.epoch, checkpoint.step_in_epoch) == (8, 2, 0)
    state = json.loads((checkpoint.path / ckpt.STATE_FILE).read_text())
    assert set(state["files"]) == {ckpt.VARIABLES_FILE}  # checksummed
    assert checkpoint.state["parameter_servers"] == 2  # how the tables were sharded


def test_resume_restores_the_variables_and_skips_a_damaged_newest(tmp_path, capsys):
    model, optimizer = _model_and_optimizer(0)
    folder = tmp_path / "run" / "checkpoints"
    _save(folder, model, optimizer, 6)
    saved = [np.array(v.numpy()) for v in model.variables]
    newest = _save(folder, model, optimizer, 8)
    (newest / ckpt.VARIABLES_FILE).write_bytes(b"cut short")
    other, other_optimizer = _model_and_optimizer(1)
    assert not np.allclose(other.variables[0].numpy(), saved[0])
    ctx = SimpleNamespace(resume_from=tmp_path / "run", directory=tmp_path / "run")
    state = coordinator_loop._restore(ctx, model=other, optimizer=other_optimizer)
    assert (state["step"], state["records"], state["partial"]) == (
        6, [{"epoch": 1, "loss": 0.5}], [{"loss": 0.25}])
    for restored, expected in zip(other.variables, saved):
        np.testing.assert_array_equal(restored.numpy(), expected)
    out = capsys.readouterr().out
    assert "checkpoint step-0000008 is skipped: variables.npz does not match its checksum" \
        in out
    assert Path(tmp_path / "run" / "metrics.jsonl").read_text() == \
        '{"epoch": 1, "loss": 0.5}\n'


def test_a_checkpoint_of_another_model_is_refused(tmp_path):
    model, optimizer = _model_and_optimizer(0)
    _save(tmp_path / "run" / "checkpoints", model, optimizer, 4)
    keras.utils.set_random_seed(0)
    bigger = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2), keras.layers.Dense(1)])
    bigger_optimizer = keras.optimizers.Adam()
    bigger_optimizer.build(bigger.trainable_variables)
    ctx = SimpleNamespace(resume_from=tmp_path / "run", directory=tmp_path / "run")
    counts = (len(coordinator_loop._variables(model, optimizer)),
              len(coordinator_loop._variables(bigger, bigger_optimizer)))
    with pytest.raises(UserInputError, match=f"holds {counts[0]} variables but the model and "
                                             f"optimizer have {counts[1]}.*same --ps N"):
        coordinator_loop._restore(ctx, model=bigger, optimizer=bigger_optimizer)
