"""`tfaccel train --profile START:END`: a profiler trace of those steps in the run directory."""

import pytest
from click.testing import CliRunner

from tfaccel.cli.main import main

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


def _recipe(tmp_path, data_dir):
    recipe = tmp_path / "p.yaml"
    recipe.write_text(
        f"data: {{source: builtin, data_dir: {data_dir}, train_split: 'train[:256]',\n"
        "       validation_split_name: null, shuffle_buffer: 256}\n"
        "model: {name: small_cnn, params: {filters: [8], dense_units: 8}}\n"
        "training: {epochs: 2, global_batch_size: 32, checkpoints: false}\n"
        f"runtime: {{runs_dir: {tmp_path / 'runs'}, verbose: 0}}\n")
    return recipe


def test_profile_writes_a_trace_into_the_run_directory(tmp_path, shapes_data_dir):
    run_dir = tmp_path / "run"
    # Steps 7..10 span the end of epoch 1 (8 steps) and the start of epoch 2.
    result = CliRunner().invoke(main, ["train", str(_recipe(tmp_path, shapes_data_dir)),
                                       "--run-dir", str(run_dir), "--profile", "7:10"])
    assert result.exit_code == 0, result.output
    traces = list((run_dir / "tensorboard" / "plugins" / "profile").rglob("*.xplane.pb"))
    assert len(traces) == 1, traces
    assert traces[0].stat().st_size > 10_000  # a real trace, not an empty file


@pytest.mark.parametrize("value", ["5", "0:3", "4:2", "a:b", "1:2:3"])
def test_a_bad_step_range_is_a_usage_error(tmp_path, value):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("name: x\n")
    result = CliRunner().invoke(main, ["train", str(recipe), "--profile", value])
    assert result.exit_code == 2
    assert "--profile" in result.output and repr(value) in result.output


def test_a_range_after_the_last_step_is_a_user_error(tmp_path, shapes_data_dir):
    run_dir = tmp_path / "late"
    result = CliRunner().invoke(main, ["train", str(_recipe(tmp_path, shapes_data_dir)),
                                       "--run-dir", str(run_dir), "--profile", "100:120"])
    assert result.exit_code == 2, result.output
    assert "--profile 100:120 lies outside the steps this run trains (1 to 16" in result.output
    assert not run_dir.exists()  # nothing but the recipe was written: removed again
