"""Output for people: one line per epoch off a terminal, TensorFlow's start-up lines hidden."""

import io
import re

import pytest
from click.testing import CliRunner

from tfaccel.cli.main import QUIET_TF_LOG_LEVEL, main
from tfaccel.training.run import fit_verbosity


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
        "data: {source: python, path: gen_source.py:source, validation_split: null,\n"
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
    assert [line for line in result.output.splitlines() if line.startswith("Epoch ")] == [
        "Epoch 1/3", "Epoch 2/3", "Epoch 3/3"]


@pytest.mark.parametrize("args, preset, expected", [
    ([], None, QUIET_TF_LOG_LEVEL),  # hidden by default
    ([], "0", "0"),  # the user's own setting is kept
    (["--verbose"], None, None),  # --verbose leaves TensorFlow's default
    (["--verbose"], "1", "1"),
])
def test_the_cli_sets_tensorflow_s_log_level_unless_told(monkeypatch, args, preset, expected):
    import os

    if preset is None:
        monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    else:
        monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", preset)
    result = CliRunner().invoke(main, [*args, "models"])
    assert result.exit_code == 0, result.output
    assert os.environ.get("TF_CPP_MIN_LOG_LEVEL") == expected
    assert QUIET_TF_LOG_LEVEL == "3"
