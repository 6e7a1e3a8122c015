"""Hides the lines TensorFlow's native code prints on stderr while it is imported.

`TF_CPP_MIN_LOG_LEVEL` silences TensorFlow's C++ logging once absl logging is set up, but
not what its shared libraries print before that, during `import tensorflow` itself (on a
machine without a GPU: "WARNING: All log messages before absl::InitializeLog() is called
are written to STDERR", the oneDNN notice and "cudart_stub.cc ... Could not find cuda
drivers", twice). Those lines go straight to file descriptor 2, below Python's
`sys.stderr`, so the only way to drop them is to read that descriptor through a pipe for
the length of the import and pass on every line but them, by the same level rule as
`TF_CPP_MIN_LOG_LEVEL`. `quiet_tensorflow` is the whole rule: `import tfaccel` applies it
(a user's script is as quiet as the CLI), and so does every process the CLI starts
(every command, launched workers, the dataset preparation before them).
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import os
import re
import sys
import threading
from typing import Iterator

from tfaccel.messages import VERBOSE_ENV, verbose

# TensorFlow's C++ log level while tfaccel runs, unless the user set TF_CPP_MIN_LOG_LEVEL or
# asked for --verbose: 3 hides its start-up chatter (oneDNN, CPU features, "failed call to
# cuInit" on a machine without a GPU, an error-level line) that buries the useful output;
# tfaccel's own errors reach the user as exceptions and messages either way.
QUIET_TF_LOG_LEVEL = "3"

# What is dropped: absl's notice that it is not initialised yet, and absl-format lines of
# INFO (I) or WARNING (W) level: "I0000 00:00:1795518530.279869   30871 cudart_stub.cc:31]",
# each only when TF_CPP_MIN_LOG_LEVEL hides its level (I: 1 or more, W and the notice: 2
# or more). ERROR (E) and FATAL (F) lines, and anything not in absl's format, are passed on.
_ABSL_NOTICE = "WARNING: All log messages before absl::InitializeLog() is called are " \
               "written to STDERR"
_ABSL_LINE = re.compile(r"^([IW])\d{4} \d\d:\d\d:\d+\.\d+ +\d+ [\w.]+:\d+\] ")
_LEVELS = {"I": 0, "W": 1}


def tensorflow_log_level() -> int:
    """TF_CPP_MIN_LOG_LEVEL as TensorFlow reads it (0 when unset or not a number)."""
    try:
        return int(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0"))
    except ValueError:
        return 0


def is_start_up_noise(line: str, *, min_log_level: int = int(QUIET_TF_LOG_LEVEL)) -> bool:
    """Whether `line` (without its newline) is a start-up line `min_log_level` hides."""
    if line.strip() == _ABSL_NOTICE:
        return min_log_level > _LEVELS["W"]
    match = _ABSL_LINE.match(line)
    return bool(match) and min_log_level > _LEVELS[match.group(1)]


def quiet_tensorflow(*, verbose_flag: bool = False) -> None:
    """THE rule for TensorFlow's own output: applied by `import tfaccel` and at the start of
    every process the CLI starts.

    Verbose (``--verbose`` or `VERBOSE_ENV` inherited from a verbose launcher): nothing is
    hidden, and `VERBOSE_ENV` is set so that the processes this one starts show it too.
    Otherwise TF_CPP_MIN_LOG_LEVEL is `QUIET_TF_LOG_LEVEL` unless the user set it, and the
    start-up lines it does not reach are filtered by the same level during the import.
    """
    global _level_set_here
    if verbose_flag or verbose():
        os.environ[VERBOSE_ENV] = "1"
        # `import tfaccel` applied the quiet rule before the CLI read --verbose: undo it.
        if _level_set_here and os.environ.get("TF_CPP_MIN_LOG_LEVEL") == QUIET_TF_LOG_LEVEL:
            del os.environ["TF_CPP_MIN_LOG_LEVEL"]
        _level_set_here = False
        sys.meta_path[:] = [f for f in sys.meta_path
                            if not isinstance(f, _QuietTensorFlowFinder)]
        return
    # Read by TensorFlow when it is imported: tfaccel imports it lazily, after this.
    if "TF_CPP_MIN_LOG_LEVEL" not in os.environ:
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = QUIET_TF_LOG_LEVEL
        _level_set_here = True
    hide_tensorflow_import_lines()


# Whether `quiet_tensorflow` set TF_CPP_MIN_LOG_LEVEL (then --verbose may take it back).
_level_set_here = False


@contextlib.contextmanager
def native_stderr_filtered() -> Iterator[None]:
    """Passes what is written to file descriptor 2 on, less `is_start_up_noise` lines
    (at the TF_CPP_MIN_LOG_LEVEL of the moment).

    Everything written meanwhile (by Python or native code) reaches the real stderr when
    the block ends at the latest, in order; partial last lines included.
    """
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no stderr at all (closed by a daemon manager): nothing to filter
        yield
        return
    read_end, write_end = os.pipe()
    out_fd = os.dup(saved)  # the reader's own copy: `saved` is closed when the block ends
    os.dup2(write_end, 2)
    os.close(write_end)

    level = tensorflow_log_level()

    def forward():
        with os.fdopen(read_end, "rb") as pipe, os.fdopen(out_fd, "wb") as out:
            for raw in pipe:  # ends when the last write end (fd 2 here) is closed
                if not is_start_up_noise(raw.decode("utf-8", "replace").rstrip("\r\n"),
                                         min_log_level=level):
                    out.write(raw)
                    out.flush()

    reader = threading.Thread(target=forward, name="tfaccel-stderr-filter", daemon=True)
    reader.start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)  # closes the pipe's last write end: the reader sees its end
        os.close(saved)
        reader.join(timeout=10)


class _QuietLoader(importlib.abc.Loader):
    """Runs the wrapped loader of the `tensorflow` package inside the filter."""

    def __init__(self, inner):
        self.inner = inner

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        # The one import happens now: the finder's work is done.
        sys.meta_path[:] = [f for f in sys.meta_path
                            if not isinstance(f, _QuietTensorFlowFinder)]
        # TensorFlow sees its own loader, as after a plain import.
        module.__loader__ = module.__spec__.loader = self.inner
        with native_stderr_filtered():
            self.inner.exec_module(module)


class _QuietTensorFlowFinder(importlib.abc.MetaPathFinder):
    """Finds `tensorflow` as usual and wraps its loader in `_QuietLoader`.

    It stays in place until the import itself runs: a library may look for TensorFlow
    first without importing it (`importlib.util.find_spec`; TensorFlow Datasets does, then
    imports it lazily), and the import that follows must be filtered too.
    """

    def find_spec(self, name, path=None, target=None):
        if name != "tensorflow":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _QuietLoader(spec.loader)
        return spec


def hide_tensorflow_import_lines() -> None:
    """Filters stderr during the first `import tensorflow` of this process (lazy, cheap).

    Nothing is imported here: the CLI's commands import TensorFlow only when they need
    it (`tfaccel --help` and recipe validation stay fast). No-op when TensorFlow is loaded.
    """
    if "tensorflow" in sys.modules or any(isinstance(f, _QuietTensorFlowFinder)
                                          for f in sys.meta_path):
        return
    sys.meta_path.insert(0, _QuietTensorFlowFinder())
