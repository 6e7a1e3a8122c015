"""What native code prints on fd 2 during an export step: hidden, shown when verbose or on failure."""

import os

import pytest

from tfaccel.errors import UserInputError
from tfaccel.messages import VERBOSE_ENV
from tfaccel.tools.native_output import ERROR_TAIL_LINES, native_output_kept

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)

# Written with os.write, as C++ writes them: below Python's sys.stderr.
XNNPACK = b"INFO: Created TensorFlow Lite XNNPACK delegate for CPU.\n"
QUANTIZE = b"fully_quantize: 0, inference_type: 6, input_inference_type: FLOAT32\n"


@pytest.fixture(autouse=True)
def quiet(monkeypatch):
    monkeypatch.setenv(VERBOSE_ENV, "")


def test_what_native_code_prints_is_hidden_and_stderr_works_after(capfd):
    with native_output_kept("the converter"):
        os.write(2, QUANTIZE)
        os.write(2, XNNPACK)
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "after\n"


def test_verbose_shows_it_as_it_comes(capfd, monkeypatch):
    monkeypatch.setenv(VERBOSE_ENV, "1")
    with native_output_kept("the converter"):
        os.write(2, XNNPACK)
    assert capfd.readouterr().err == XNNPACK.decode()


def test_a_failing_step_carries_the_end_of_the_text_in_its_message(capfd):
    lines = [f"line {i}" for i in range(ERROR_TAIL_LINES + 5)]
    with pytest.raises(UserInputError) as raised:
        with native_output_kept("the converter"):
            os.write(2, ("\n".join(lines) + "\n").encode())
            raise UserInputError("the LiteRT converter cannot apply --quantize int8.")
    expected = "\n".join(["the LiteRT converter cannot apply --quantize int8.",
                          "What the converter printed:", *lines[-ERROR_TAIL_LINES:]])
    assert str(raised.value) == expected
    assert capfd.readouterr().err == ""


def test_any_other_failure_prints_the_text_before_it_propagates(capfd):
    with pytest.raises(RuntimeError, match="boom"):
        with native_output_kept("the converter"):
            os.write(2, QUANTIZE)
            raise RuntimeError("boom")
    assert capfd.readouterr().err == QUANTIZE.decode()
