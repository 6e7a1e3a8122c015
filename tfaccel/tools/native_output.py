"""Keeps what native libraries print on stderr during a step, to show it only when asked."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from typing import Iterator

from tfaccel.errors import TfaccelError
from tfaccel.messages import verbose

# How much of the captured text an error message carries: the end, where the cause is.
ERROR_TAIL_LINES = 20


@contextlib.contextmanager
def native_output_kept(who: str) -> Iterator[None]:
    """Captures file descriptor 2 for the block: shown with --verbose or when it fails.

    The LiteRT converter and interpreter, ONNX Runtime and tf2onnx print from C++ straight
    to file descriptor 2 ("fully_quantize: 0, inference_type: 6 ...", "INFO: Created
    TensorFlow Lite XNNPACK delegate for CPU.") and through Python's root logger ("Please
    consider to run pre-processing before quantization"); `sys.stderr` cannot catch the
    former, so the descriptor itself is pointed at a temporary file. Python's handlers
    keep their stream (they write to fd 2 through it), so nothing is left pointing at the
    file afterwards. When the block raises, a tfaccel error gets the text's last
    `ERROR_TAIL_LINES` lines appended to its message; any other error has it printed
    before it propagates. Verbose (`tfaccel.messages.verbose`): nothing is captured.

    Args:
        who: What printed it, for the error message ("the converters and runtimes").
    """
    if verbose():
        yield
        return
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no stderr at all: nothing to keep quiet
        yield
        return
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)

        def restore() -> str:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            return sink.read().decode("utf-8", "replace")

        try:
            yield
        except BaseException as error:
            text = restore()
            if text.strip() and isinstance(error, TfaccelError) and error.args:
                tail = "\n".join(text.rstrip().splitlines()[-ERROR_TAIL_LINES:])
                error.args = (f"{error.args[0]}\nWhat {who} printed:\n{tail}",
                              *error.args[1:])
            elif text.strip():
                sys.stderr.write(text)
                sys.stderr.flush()
            raise
        restore()
