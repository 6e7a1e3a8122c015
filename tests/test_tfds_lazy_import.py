"""`import tfaccel.data` leaves tensorflow_datasets unimported until TFDS is used."""

import subprocess
import sys

import pytest

# Its subprocesses check start-up itself (TensorFlow's import lines, what a call imports):
# real interpreters, not forks of the warm one (tests/warm_python.py).
pytestmark = pytest.mark.cold_python

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


def test_import_tfaccel_data_does_not_import_tfds_and_from_tfds_still_works():
    code = ("import sys, tfaccel.data as d\n"
            "print('tensorflow_datasets' in sys.modules)\n"
            "f = d.from_tfds\n"
            "print('tensorflow_datasets' in sys.modules, f.__name__, "
            "d.export_image_folder.__name__)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split("\n")
    assert out[0] == "False"
    assert out[1] == "True from_tfds export_image_folder"
