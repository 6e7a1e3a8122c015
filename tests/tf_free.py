"""Runs CLI calls in a fresh interpreter and returns the TensorFlow-family modules they loaded."""

import os
import subprocess
import sys

HEAVY = ("tensorflow", "keras", "tensorflow_datasets")


def heavy_modules_after(body: str) -> list:
    """Runs `body` (Python with `main` = tfaccel's CLI group and `CliRunner` imported) in a new
    interpreter (the test session has TensorFlow loaded already) and returns the sorted names
    of the TensorFlow, Keras and TFDS modules it imported."""
    code = ("import sys\nfrom click.testing import CliRunner\nfrom tfaccel.cli.main import main\n"
            + body + f"\nprint(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}))\n")
    # A real interpreter, not a fork of the suite's warm one (which has TensorFlow loaded).
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120, env=dict(os.environ, TFACCEL_TESTS_COLD="1"))
    assert result.returncode == 0, result.stdout + result.stderr
    return eval(result.stdout.strip().splitlines()[-1])  # a printed list of strings
