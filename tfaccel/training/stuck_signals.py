"""SIGINT/SIGTERM answered while TensorFlow waits for other workers inside a call that holds the GIL."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Iterable, Iterator, Optional

SIGNALS = (signal.SIGINT, signal.SIGTERM)

_enabled = False

# The watchdog: a stdlib-only Python process that outlives its parent by a moment. It
# ignores the signals (Ctrl-C reaches the whole process group), reads its stdin until the
# parent says "done" or dies (end of file), and in the second case removes the run
# directory when it holds nothing but what a run writes before it trains.
_WATCHDOG = r'''
import os, shutil, signal, sys
for s in (signal.SIGINT, signal.SIGTERM):
    signal.signal(s, signal.SIG_IGN)
directory, allowed, what = sys.argv[1], set(sys.argv[2].split(",")), sys.argv[3]
said = sys.stdin.buffer.read()
if said == b"done":
    sys.exit(0)
if directory and os.path.isdir(directory) and set(os.listdir(directory)) <= allowed:
    shutil.rmtree(directory, ignore_errors=True)
    left = f"the run directory {directory} held nothing yet and was removed"
else:
    left = "nothing was trained"
sys.stderr.write(f"tfaccel: stopped while {what}; {left}.\n")
'''


def exit_when_stuck(enabled: bool = True) -> None:
    """Lets a run end at once on SIGINT/SIGTERM while TensorFlow waits for the other
    workers (the CLI turns it on; a notebook's kernel is not ended from under its user)."""
    global _enabled
    _enabled = bool(enabled)


@contextlib.contextmanager
def signals_end_the_wait(*, what: str, directory: Optional[Path] = None,
                         allowed: Iterable[str] = ()) -> Iterator[None]:
    """Around a TensorFlow call that may wait for other workers forever: Ctrl-C and SIGTERM
    end the process (exit 130 and 143 as a shell sees them).

    MultiWorkerMirroredStrategy (and a parameter-server cluster) wait in their constructor
    until every worker has joined, inside one call that holds Python's GIL: no Python
    signal handler and no other Python thread runs until it returns, so a worker that
    never comes made Ctrl-C go unanswered until kill -9. Here SIGINT keeps its default
    action for the call's duration (the process ends, as killed by it: 130 in a shell),
    and a small watchdog process removes the run directory if the call never returned
    (whatever ended the process: SIGINT, or SIGKILL) and the directory holds only what a
    run writes before it trains. SIGTERM is TensorFlow's during that call: its
    coordination agent installs a C handler that only records it (seen on TF 2.21: the
    process's caught-signal mask holds SIGTERM while Python's handler is SIG_DFL), so the
    worker waits on until a scheduler's SIGKILL, after which the watchdog cleans up.

    Does nothing unless `exit_when_stuck` was called, or outside the main thread.

    Args:
        what: What the call waits for, for the watchdog's message ("waiting for the other
            workers to join").
        directory: The run directory this process writes (None: none to clean).
        allowed: The file names a not-yet-started run directory may hold.
    """
    if not _enabled or threading.current_thread() is not threading.main_thread():
        yield
        return
    watchdog = subprocess.Popen(
        [sys.executable, "-c", _WATCHDOG, str(directory or ""), ",".join(allowed), what],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, start_new_session=True)
    previous = {s: signal.signal(s, signal.SIG_DFL) for s in SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        try:
            watchdog.communicate(b"done", timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            watchdog.kill()
