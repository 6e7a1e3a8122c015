"""Output for people: one line per epoch off a terminal, TensorFlow's start-up lines hidden."""

import io
import re

import pytest
from click.testing import CliRunner

from tfaccel.cli.main import main
from tfaccel.quiet_import import QUIET_TF_LOG_LEVEL
from tfaccel.training.run.fit_parts import fit_verbosity

# Its subprocesses check start-up itself (TensorFlow's import lines, what a call imports):
# real interpreters, not forks of the warm one (tests/warm_python.py).
pytestmark = pytest.mark.cold_python


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_fit_verbosity_is_the_recipe_s_else_a_bar_only_on_a_terminal():
    assert fit_verbosity(None, stream=_Terminal()) == 1
    assert fit_verbosity(None, stream=io.StringIO()) == 2
    # An explicit runtime.verbose is kept as the user set it, terminal or not.
    assert [fit_verbosity(v, stream=io.StringIO()) for v in (0, 1, 2)] == [0, 1, 2]
    assert fit_verbosity(1, stream=_Terminal()) == 1


def test_train_into_a_pipe_prints_one_line_per_epoch_and_no_carriage_return(tmp_path):
    (tmp_path / "gen_source.py").write_text(
        "import numpy as np\n"
        "num_classes = 2\n"
        "def source(worker, workers):\n"
        "    for i in range(worker, 64, workers):\n"
        "        yield np.float32([i % 2, 1 - i % 2]), np.int64(i % 2)\n")
    recipe = tmp_path / "gen.yaml"
    recipe.write_text(  # no runtime.verbose: stdout decides
        "data: {source: python, path: gen_source.py:source, validation_split_name: null,\n"
        "       shuffle_buffer: 0, cache: null, workers: 1, num_classes: 2}\n"
        "model: {name: mlp, params: {normalization: none}}\n"
        "optimizer: {name: sgd, learning_rate: 0.1}\n"
        "training: {epochs: 3, global_batch_size: 16}\n"
        "runtime: {tensorboard: false, precision: float32}\n")
    result = CliRunner().invoke(main, ["train", str(recipe), "--run-dir",
                                       str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    assert "\r" not in result.output and "\x1b[" not in result.output
    # Keras' verbose=2: an "Epoch i/n" heading, then the epoch's one line of figures.
    epoch_lines = [line for line in result.output.splitlines()
                   if re.match(r"^4/4 - \d+s - .* - loss: ", line)]
    assert len(epoch_lines) == 3, result.output
    # Keras' own epoch line, nothing of tfaccel's in it; tfaccel's throughput figures follow
    # in one short line (metrics.jsonl keeps every figure).
    assert all(re.fullmatch(r"4/4 - \d+s - \d+(?:s|ms|us)/step - accuracy: [\d.]+ - loss: [\d.]+", line)
               for line in epoch_lines), epoch_lines
    lines = result.output.splitlines()
    speed = [lines[lines.index(line) + 1] for line in epoch_lines]
    assert [line.split(":")[:2] for line in speed] == [
        ["tfaccel", f" epoch {epoch}"] for epoch in (1, 2, 3)], result.output
    assert all(re.search(r": [\d,]+ examples/s, [\d.]+ ms/step, .*of \d+ cores$", line)
               for line in speed), speed
    assert max(len(line) for line in speed) < 90
    import json

    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    assert all(r["steps_per_sec"] > 0 and r["cpu_cores_used"] > 0 for r in records)
    assert [line for line in result.output.splitlines() if line.startswith("Epoch ")] == [
        "Epoch 1/3", "Epoch 2/3", "Epoch 3/3"]


@pytest.mark.parametrize("args, preset, inherited, expected", [
    ([], None, "", QUIET_TF_LOG_LEVEL),  # hidden by default
    ([], "0", "", "0"),  # the user's own setting is kept
    (["--verbose"], None, "", None),  # --verbose leaves TensorFlow's default
    (["--verbose"], "1", "", "1"),
    ([], None, "1", None),  # a worker of a verbose launch: verbose too
])
def test_the_cli_sets_tensorflow_s_log_level_unless_told(monkeypatch, args, preset,
                                                         inherited, expected):
    import os

    from tfaccel.messages import VERBOSE_ENV

    if preset is None:
        monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    else:
        monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", preset)
    monkeypatch.setenv(VERBOSE_ENV, inherited)  # put back as it was after the test
    result = CliRunner().invoke(main, [*args, "models"])
    assert result.exit_code == 0, result.output
    assert os.environ.get("TF_CPP_MIN_LOG_LEVEL") == expected
    # Verbose is passed on to the processes this one starts (launched workers).
    assert os.environ[VERBOSE_ENV] == ("1" if args or inherited else "")
    assert QUIET_TF_LOG_LEVEL == "3"


def test_start_up_noise_is_absl_s_notice_and_its_info_and_warning_lines_only():
    from tfaccel.quiet_import import is_start_up_noise

    assert is_start_up_noise("WARNING: All log messages before absl::InitializeLog() is "
                             "called are written to STDERR")
    assert is_start_up_noise("I0000 00:00:1795518530.279869   30871 cudart_stub.cc:31] "
                             "Could not find cuda drivers on your machine, GPU will not be used.")
    assert is_start_up_noise("W0000 00:00:1795518530.3   7 cpu_feature_guard.cc:227] x")
    # Errors, fatal lines, Python's own output and tfaccel's messages pass.
    assert not is_start_up_noise("E0000 00:00:1795518582.306927   32348 cuda_platform.cc:52] "
                                 "failed call to cuInit: UNKNOWN ERROR (303)")
    assert not is_start_up_noise("F0000 00:00:1.2   1 x.cc:9] Check failed")
    assert not is_start_up_noise("Traceback (most recent call last):")
    assert not is_start_up_noise("tfaccel: I0000 is a fine name for a run.")
    # By TF_CPP_MIN_LOG_LEVEL's rule: 1 hides INFO, 2 warnings too (the notice is one).
    info = "I0000 00:00:1795518530.279869   30871 port.cc:153] oneDNN custom operations"
    warning = "W0000 00:00:1795518530.3   7 cpu_feature_guard.cc:227] x"
    notice = ("WARNING: All log messages before absl::InitializeLog() is called are written "
              "to STDERR")
    assert [[is_start_up_noise(line, min_log_level=level) for line in (info, warning, notice)]
            for level in (0, 1, 2)] == [[False] * 3, [True, False, False], [True] * 3]


def test_the_filter_passes_every_other_line_in_order_and_restores_stderr():
    import subprocess
    import sys

    code = (
        "import os, sys\n"
        "from tfaccel.quiet_import import native_stderr_filtered\n"
        "with native_stderr_filtered():\n"
        "    os.write(2, b'I0000 00:00:17.5 12 cudart_stub.cc:31] dropped\\nkept 1\\n')\n"
        "    print('kept 2 (python)', file=sys.stderr)\n"
        "    os.write(2, b'E0000 00:00:17.5 12 cuda_platform.cc:52] kept 3\\npartial')\n"
        "os.write(2, b' after\\n')\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ("kept 1\nkept 2 (python)\n"
                             "E0000 00:00:17.5 12 cuda_platform.cc:52] kept 3\npartial after\n")


def _devices_stderr(*args, env_level=None):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    if env_level is not None:
        env["TF_CPP_MIN_LOG_LEVEL"] = env_level
    result = subprocess.run([sys.executable, "-m", "tfaccel.cli", *args, "devices"],
                            capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stderr
    assert "strategy" in result.stdout
    return result.stderr


@pytest.mark.heavy  # outside the 15-minute CI budget: ~55 s; test_quiet_import and test_cli_quiet cover the rule
def test_the_cli_hides_tensorflow_s_import_lines_unless_asked():
    import subprocess
    import sys

    quiet = _devices_stderr()
    assert "absl::InitializeLog" not in quiet and "cudart_stub" not in quiet, quiet
    assert not [line for line in quiet.splitlines() if re.match(r"^[IW]\d{4} ", line)], quiet
    # What a plain import prints on this machine (a GPU machine prints other lines, or none)
    # is shown again with --verbose.
    plain = subprocess.run([sys.executable, "-c", "import tensorflow"], capture_output=True,
                           text=True, timeout=120).stderr
    if "absl::InitializeLog" in plain:
        assert "absl::InitializeLog" in _devices_stderr("--verbose")
        assert "absl::InitializeLog" in _devices_stderr(env_level="0")  # the user's choice
        # Level 2 hides warnings: the lines printed before TensorFlow reads it too.
        assert "absl::InitializeLog" not in _devices_stderr(env_level="2")


def test_a_look_for_tensorflow_before_the_import_leaves_the_import_filtered():
    # TensorFlow Datasets looks TensorFlow up (importlib.util.find_spec) before importing
    # it lazily: the lines of the import that follows are filtered all the same.
    import os
    import subprocess
    import sys

    code = ("import importlib.util\n"
            "from tfaccel.quiet_import import quiet_tensorflow\n"
            "quiet_tensorflow()\n"
            "assert importlib.util.find_spec('tensorflow') is not None\n"
            "import tensorflow\n"
            "print(tensorflow.constant(2).numpy() * 21)\n")
    env = {k: v for k, v in os.environ.items()
           if k not in ("TF_CPP_MIN_LOG_LEVEL", "TFACCEL_VERBOSE")}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "42\n"
    assert "absl::InitializeLog" not in result.stderr, result.stderr
    assert not [line for line in result.stderr.splitlines()
                if re.match(r"^[IW]\d{4} ", line)], result.stderr
