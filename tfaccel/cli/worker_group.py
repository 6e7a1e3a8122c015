"""The processes of one launch, started, watched and stopped together: their output prefixed,
a failure or a signal passed on to the others, the launch's exit code."""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Dict, List, Optional, Sequence

# After one worker fails, the others get this long to end on their own (TensorFlow's
# coordination service reports the dead peer to them), then they are killed.
DEFAULT_GRACE_SECONDS = 20.0


def describe_exit(code: int) -> str:
    """``code 1`` or ``signal SIGKILL`` for a Popen return code."""
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"code {code}"


def shell_code(code: int) -> int:
    """A Popen return code as a process exit code (killed by signal N: 128 + N)."""
    return 128 - code if code < 0 else code


class _Prefixer(threading.Thread):
    """Copies one worker's output to `out`, each line prefixed with the worker's index."""

    def __init__(self, stream: IO[str], prefix: str, out: IO[str], lock):
        super().__init__(daemon=True)
        self.stream, self.prefix, self.out, self.lock = stream, prefix, out, lock

    def run(self):
        for line in self.stream:
            with self.lock:
                self.out.write(self.prefix + line.rstrip("\n") + "\n")
                self.out.flush()
        self.stream.close()


class WorkerGroup:
    """The worker processes of one launch, started together and stopped together.

    A worker that fails makes the launch fail with its exit code: the others get
    `grace_seconds` to end on their own (TensorFlow's coordination service tells them that
    a peer is gone), then they are killed, so nothing hangs. SIGTERM or SIGINT (Ctrl-C) sent
    to the launcher reaches every worker as SIGTERM (they save a checkpoint at the same
    step and exit 143); a second one kills them.
    """

    def __init__(self, commands: Sequence[Sequence[str]], envs: Sequence[dict], *,
                 labels: Sequence[str], out: IO[str] = sys.stdout,
                 grace_seconds: float = DEFAULT_GRACE_SECONDS, servers: int = 0,
                 logs: Optional[Dict[str, Path]] = None):
        self.commands, self.envs, self.labels = list(commands), list(envs), list(labels)
        # Labels whose output goes to a file of its own instead of `out` (a local launch's
        # workers other than the chief: they print the same epochs as the chief).
        self.logs = dict(logs or {})
        # The last `servers` processes serve the others (a parameter-server cluster's ps
        # and worker tasks): their exit decides nothing (the chief tolerates a lost
        # worker and names a lost ps itself); they are stopped when the others end.
        self.servers = int(servers)
        self.out = out
        self.grace_seconds = grace_seconds
        self.processes: List[subprocess.Popen] = []
        self._threads: List[_Prefixer] = []
        self._files: List[IO[str]] = []
        # Re-entrant: the signal handler (main thread) may print while the main thread is
        # itself printing.
        self._lock = threading.RLock()
        self._signals_received = 0

    def say(self, message: str) -> None:
        """One line from the launcher itself, between the workers' lines."""
        with self._lock:
            self.out.write(f"[launch] {message}\n")
            self.out.flush()

    def run(self) -> int:
        """Starts the workers, waits for them; the launch's exit code."""
        previous = {}
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGTERM, signal.SIGINT):
                previous[signum] = signal.signal(signum, self._forward)
        try:
            for command, env, label in zip(self.commands, self.envs, self.labels):
                process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                                           stderr=subprocess.STDOUT, text=True, bufsize=1,
                                           errors="replace", start_new_session=True)
                self.processes.append(process)
                if label in self.logs:
                    log = open(self.logs[label], "a", encoding="utf-8")  # closed in `finally`
                    self._files.append(log)
                    thread = _Prefixer(process.stdout, "", log, threading.Lock())
                else:
                    thread = _Prefixer(process.stdout, f"[{label}] ", self.out, self._lock)
                thread.start()
                self._threads.append(thread)
            return self._watch()
        finally:
            self._kill_all()
            for thread in self._threads:
                thread.join(timeout=5)
            for log in self._files:
                log.close()
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def _forward(self, signum, frame):
        self._signals_received += 1
        if self._signals_received == 1:
            self.say(f"{signal.Signals(signum).name} received: SIGTERM sent to every worker "
                     "(they save a checkpoint at the same step and stop); send it again to "
                     "kill them.")
            # SIGTERM for Ctrl-C too: only SIGTERM is agreed on among the workers (TF's
            # PreemptionCheckpointHandler), a SIGINT would stop each at its own step. Not
            # to the servers: the chief reads the variables from them to save.
            self._send(signal.SIGTERM, self.processes[:len(self.processes) - self.servers])
        else:
            self._send(signal.SIGKILL)

    def _send(self, signum, processes=None) -> None:
        for process in self.processes if processes is None else processes:
            if process.poll() is None:
                try:
                    process.send_signal(signum)
                except ProcessLookupError:
                    pass

    def _kill_all(self) -> None:
        self._send(signal.SIGKILL)
        for process in self.processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass

    def _watch(self) -> int:
        first_failure = None
        failed_at = None
        reported = set()
        deciding = len(self.processes) - self.servers
        while True:
            codes = [p.poll() for p in self.processes]
            for label, code in zip(self.labels[deciding:], codes[deciding:]):
                if code is not None and label not in reported:
                    reported.add(label)
                    self.say(f"{label} exited with {describe_exit(code)}; the chief "
                             "carries on without it (a lost ps stops it with a message).")
            codes = codes[:deciding]
            if first_failure is None:
                for label, code in zip(self.labels, codes):
                    if code not in (None, 0):
                        first_failure = (label, code)
                        failed_at = time.monotonic()
                        if self._stopped_on_request(code):
                            continue  # the others are saving at the same step too
                        if any(c is None for c in codes):
                            self.say(f"{label} exited with {describe_exit(code)}"
                                     f"{self._log_note(label)}; the others stop too (killed "
                                     f"if still running after {self.grace_seconds:.0f} s).")
                        break
            if all(code is not None for code in codes):
                break
            if failed_at is not None and time.monotonic() - failed_at > self.grace_seconds:
                still = [label for label, code in zip(self.labels, codes) if code is None]
                self.say(f"killing {', '.join(still)}: still running "
                         f"{self.grace_seconds:.0f} s after {first_failure[0]} failed.")
                self._send(signal.SIGKILL, self.processes[:deciding])
                for process in self.processes[:deciding]:
                    process.wait()
                break
            time.sleep(0.2)
        self._send(signal.SIGTERM, self.processes[deciding:])
        for thread in self._threads:
            thread.join(timeout=5)
        if first_failure is None:
            return 0
        label, code = first_failure
        if self._stopped_on_request(code):
            saved = "the chief saved a checkpoint" if self.servers else \
                "every worker saved a checkpoint at the same step"
            self.say(f"stopped on request ({describe_exit(code)}); {saved}.")
        else:
            self.say(f"failed: {label} exited first with {describe_exit(code)}"
                     f"{self._log_note(label)}.")
        return shell_code(code)

    def _log_note(self, label: str) -> str:
        """Where a logged worker's output is, for a line about that worker ('' if shown)."""
        return f" (its output: {self.logs[label]})" if label in self.logs else ""

    def _stopped_on_request(self, code: int) -> bool:
        # 143/130: a worker that saved a checkpoint after the signal the launcher passed on.
        return bool(self._signals_received) and code in (128 + signal.SIGTERM,
                                                         128 + signal.SIGINT)


def worker_logs(labels: Sequence[str]) -> Dict[str, Path]:
    """A log file per label, in a new folder of the temporary directory (kept after the
    launch: a failed worker's messages are there)."""
    if not labels:
        return {}
    folder = Path(tempfile.mkdtemp(prefix="tfaccel-launch-logs-"))
    return {label: folder / f"{label}.log" for label in labels}
