"""SIGINT/SIGTERM answered while a cluster's workers wait for each other (in Python, then in TensorFlow)."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Iterable, Iterator, Optional

from tfaccel.errors import Stopped

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
                         allowed: Iterable[str] = (), join=None) -> Iterator[None]:
    """Around a TensorFlow call that may wait for other workers forever: SIGTERM and
    Ctrl-C stop the run as they do anywhere else in it (exit 143 and 130).

    MultiWorkerMirroredStrategy waits in its constructor until every worker has joined,
    inside one call that holds Python's GIL (no Python signal handler and no other Python
    thread runs until it returns) and after TensorFlow's coordination agent has installed
    its own C handler for SIGTERM, which only records it (seen on TF 2.21: the process's
    caught-signal mask holds SIGTERM while Python's handler is SIG_DFL). A worker whose
    peer never came answered neither signal until kill -9. So:

    1. `join` (a `tfaccel.engine.cluster_join.ClusterJoin`) first waits for the other
       workers in plain Python; SIGTERM or SIGINT there raises `Stopped` (the CLI exits
       with 143 or 130) naming the workers that never came, and `train` removes the run
       directory that held nothing but the recipe.
    2. The call itself then waits only for the joined workers to start TensorFlow's
       server. Should one die in those seconds, SIGINT keeps its default action there
       (the process ends, as killed by it: 130 in a shell), and a small watchdog process
       removes the unstarted run directory if the call never returned (whatever ended the
       process: SIGINT, or the SIGKILL a scheduler sends after an unanswered SIGTERM).

    Step 2 only once `exit_when_stuck` was called (the CLI), and only in the main thread
    (where Python's handlers run); step 1 always (outside the main thread without
    handlers of its own).

    Args:
        what: What the call waits for, for the messages ("waiting for the other workers
            to join").
        directory: The run directory this process writes (None: none to clean).
        allowed: The file names a not-yet-started run directory may hold.
        join: An object whose ``wait()`` waits for the other workers and whose
            ``missing()`` names those not joined yet; None: no wait before the call.
    """
    main = threading.current_thread() is threading.main_thread()
    if join is not None:
        _join_answering_signals(join, what=what, main=main)
    if not _enabled or not main:
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


class _Signalled(BaseException):
    """Raised by the handlers below; a BaseException so that no `except Exception` in the
    wait swallows it."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _join_answering_signals(join, *, what: str, main: bool) -> None:
    if not main:
        join.wait()
        return
    received = []
    waiting = [True]

    def stop(signum, frame):
        received.append(signum)
        if waiting[0] and len(received) == 1:  # one exception, however many signals come
            raise _Signalled(signum)

    previous = {s: signal.signal(s, stop) for s in SIGNALS}
    try:
        join.wait()
        waiting[0] = False
    except _Signalled:
        waiting[0] = False
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if received:  # also a signal that came as the wait ended: the run has not started
        missing = join.missing()
        absent = f" ({', '.join(missing)} never joined)" if missing else ""
        raise Stopped(f"stopped by {signal.Signals(received[0]).name} while {what}"
                      f"{absent}; nothing was trained.", signum=received[0])
