"""The command line through click's CliRunner: help, version, validate, exit codes."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from tf_free import heavy_modules_after

from tfaccel import __version__
from tfaccel.cli.main import main

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)

REPO = Path(__file__).resolve().parents[1]

COMMANDS = ["train", "validate", "devices", "keys", "models", "bench", "export-images",
            "export", "doctor", "compare", "launch", "data-service"]


@pytest.fixture
def runner():
    return CliRunner()


def test_version(runner):
    result = runner.invoke(main, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"tfaccel {__version__}"


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_documenting_every_option(runner, command):
    result = runner.invoke(main, [command, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage: main" in result.output or "Usage: tfaccel" in result.output
    params = main.commands[command].params
    for param in params:
        if isinstance(param, __import__("click").Option):
            assert param.help, f"{command} {param.opts} has no help"


def test_validate_ok_and_show(runner, tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("name: t\ntraining:\n  epochs: 2\n")
    result = runner.invoke(main, ["validate", str(recipe)])
    assert result.exit_code == 0, result.output
    assert "OK (builtin data, model small_cnn, 2 epoch(s), global batch 128)" in result.output
    shown = runner.invoke(main, ["validate", str(recipe), "--show", "--set", "seed=7"])
    assert shown.exit_code == 0
    assert "seed: 7" in shown.output and "epochs: 2" in shown.output


@pytest.mark.parametrize("text, override, expected", [
    ("training:\n  epochs: 0\n", None, "training.epochs must be >= 1, got 0"),
    ("data:\n  sorce: tfds\n", None, "did you mean 'source'?"),
    ("training: [\n", None, "is not valid YAML"),
    ("{}\n", "training.global_batch_size=abc", "must be an integer, got str 'abc'"),
])
def test_user_mistakes_exit_2_with_one_message_and_no_traceback(runner, tmp_path, text,
                                                                 override, expected):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(text)
    args = ["validate", str(recipe)] + (["--set", override] if override else [])
    result = runner.invoke(main, args)
    assert result.exit_code == 2
    assert expected in result.output
    assert result.output.startswith("Error: ")
    assert "Traceback" not in result.output


def test_train_on_a_missing_recipe_exits_2(runner, tmp_path):
    result = runner.invoke(main, ["train", str(tmp_path / "missing.yaml")])
    assert result.exit_code == 2
    assert "does not exist" in result.output


def test_keys_lists_every_recipe_key(runner):
    # Against the registry (describe_keys) and, independently, the keys a resolved default
    # recipe has: a key missing from the listing, or listed twice, or a section listed as a
    # key, fails.
    from tfaccel.config.recipe import Recipe, describe_keys, flatten_recipe, recipe_to_dict

    result = runner.invoke(main, ["keys"])
    assert result.exit_code == 0
    listed = [line.split()[0] for line in result.output.splitlines() if line.strip()]
    registry = [key for key, _, _ in describe_keys()]
    assert listed == registry
    assert listed == list(flatten_recipe(recipe_to_dict(Recipe())))
    assert len(listed) == len(set(listed)) > 50
    rows = {line.split()[0]: line for line in result.output.splitlines() if line.strip()}
    for key, default, help_text in describe_keys():
        assert rows[key].split(maxsplit=2)[1] == (default or "-").split()[0], key
        assert rows[key].endswith(help_text), key
    markdown = runner.invoke(main, ["keys", "--markdown"]).output.splitlines()
    assert [row.split("`")[1] for row in markdown[2:]] == registry


def test_models_lists_the_registry(runner):
    result = runner.invoke(main, ["models"])
    assert result.exit_code == 0
    assert "small_cnn" in result.output and "mlp" in result.output


def test_cli_help_and_validate_do_not_import_tensorflow(tmp_path):
    # A fresh interpreter: the test session itself has TensorFlow loaded already.
    recipe = tmp_path / "r.yaml"
    recipe.write_text("training:\n  epochs: 1\n")
    body = (
        "import tfaccel, tfaccel.config.recipe, tfaccel.models\n"
        "r = CliRunner()\n"
        "assert r.invoke(main, ['--help']).exit_code == 0\n"
        f"assert r.invoke(main, ['validate', {str(recipe)!r}]).exit_code == 0\n"
        "assert r.invoke(main, ['keys']).exit_code == 0\n"
        "assert r.invoke(main, ['keys', '--json-schema']).output.startswith('{')\n"
    )
    assert heavy_modules_after(body) == []


def test_console_script_reports_version():
    result = subprocess.run([sys.executable, "-m", "tfaccel.cli", "--version"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    assert result.stdout.strip() == f"tfaccel {__version__}"


@pytest.mark.parametrize("run_dir, hint", [
    ("/runs/my run", "Resume with: tfaccel train --resume '/runs/my run'\n"),
    (None, "Resume with: tfaccel train --resume RUN_DIR (the chief's run directory)\n")])
def test_a_preempted_run_names_its_real_directory_and_exits_143(runner, monkeypatch,
                                                                run_dir, hint):
    import signal

    from tfaccel.errors import Preempted
    from tfaccel.training.run import runner as runner_module

    def stopped(*args, **kwargs):
        raise Preempted("stopped by signal SIGTERM at epoch 1, step 3; checkpoint "
                        "step-0000003 saved.", signum=int(signal.SIGTERM),
                        checkpoint="/runs/x/checkpoints/step-0000003", run_dir=run_dir)

    monkeypatch.setattr(runner_module, "train", stopped)
    result = runner.invoke(main, ["train", str(REPO / "recipes" / "default.yaml")])
    assert result.exit_code == 143
    assert result.stderr.endswith(hint), result.stderr
    assert "RUN_DIR." not in result.stderr


@pytest.mark.parametrize("args", [["keys"], ["keys", "--markdown"], ["models"], ["--help"],
                                  ["validate", str(REPO / "recipes" / "default.yaml")]])
def test_a_reader_that_goes_away_ends_the_command_without_a_message(args):
    # `tfaccel keys | head -5`: head exits, the next write fails with EPIPE. A pipe whose
    # read end is closed before the command starts makes the first write fail, every time.
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run([sys.executable, "-m", "tfaccel.cli", *args],
                                stdout=write_end, stderr=subprocess.PIPE, text=True,
                                timeout=120)
    finally:
        os.close(write_end)
    assert result.stderr == ""  # was "Error: BrokenPipeError: [Errno 32] Broken pipe ..."
    assert result.returncode == 1  # click's own code for it (`tfaccel --help | head -1`)
