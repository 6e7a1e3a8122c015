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
# How many times a parameter-server cluster's worker task that died is started again (each
# worker its own count): enough for a few preemptions, not a crash loop.
DEFAULT_RESTARTS = 3
# Before a restart: the dead process's port is freed by the kernel at once, but a worker
# that dies at start (a port taken by another program) must not spin.
RESTART_DELAY_SECONDS = 1.0


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


class RestartPolicy:
    """Which dead serving tasks are started again: `labels`, each at most `limit` times.

    Args:
        labels: The tasks that may be restarted (a parameter-server cluster's workers: the
            coordinator takes back a worker that answers again at its address; a ps is
            never among them, the variables it held are gone with it).
        limit: Restarts allowed per task (0: none).
    """

    def __init__(self, labels: Sequence[str] = (), *, limit: int = 0):
        if limit < 0:
            raise ValueError(f"limit must be >= 0; got {limit}")
        self.labels, self.limit = set(labels), int(limit)
        self.used: Dict[str, int] = {}

    def next_restart(self, label: str) -> Optional[int]:
        """The number (1, 2, ...) of `label`'s next restart, counted as used; None when
        `label` is not restartable or has used all its restarts."""
        if label not in self.labels or self.used.get(label, 0) >= self.limit:
            return None
        self.used[label] = self.used.get(label, 0) + 1
        return self.used[label]


class WorkerGroup:
    """The worker processes of one launch, started together and stopped together.

    A worker that fails makes the launch fail with its exit code: the others get
    `grace_seconds` to end on their own (TensorFlow's coordination service tells them that
    a peer is gone), then they are killed, so nothing hangs. SIGTERM or SIGINT (Ctrl-C) sent
    to the launcher reaches every worker as SIGTERM (they save a checkpoint at the same
    step and exit 143); a second one kills them. A serving task that dies while the others
    run is started again with the same command and environment (so at the same address)
    when `restarts` allows it, said in one line naming it and `addresses[label]`.
    """

    def __init__(self, commands: Sequence[Sequence[str]], envs: Sequence[dict], *,
                 labels: Sequence[str], out: IO[str] = sys.stdout,
                 grace_seconds: float = DEFAULT_GRACE_SECONDS, servers: int = 0,
                 logs: Optional[Dict[str, Path]] = None,
                 restarts: Optional[RestartPolicy] = None,
                 addresses: Optional[Dict[str, str]] = None):
        self.commands, self.envs, self.labels = list(commands), list(envs), list(labels)
        self.restarts = restarts or RestartPolicy()
        self.addresses = dict(addresses or {})  # label -> HOST:PORT, for the lines said
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
            for position in range(len(self.commands)):
                self.processes.append(self._start(position))
            return self._watch()
        finally:
            self._kill_all()
            for thread in self._threads:
                thread.join(timeout=5)
            for log in self._files:
                log.close()
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def _start(self, position: int) -> subprocess.Popen:
        """Starts process `position` (its output copied by a thread of its own)."""
        label = self.labels[position]
        process = subprocess.Popen(self.commands[position], env=self.envs[position],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True, bufsize=1, errors="replace",
                                   start_new_session=True)
        if label in self.logs:
            log = open(self.logs[label], "a", encoding="utf-8")  # closed in `run`
            self._files.append(log)
            thread = _Prefixer(process.stdout, "", log, threading.Lock())
        else:
            thread = _Prefixer(process.stdout, f"[{label}] ", self.out, self._lock)
        thread.start()
        self._threads.append(thread)
        return process

    def _server_exited(self, position: int, code: int) -> bool:
        """Says that serving task `position` ended; restarts it when the policy allows.

        Returns:
            True when it was started again (its new process watched from now on).
        """
        label = self.labels[position]
        where = f" ({self.addresses[label]})" if label in self.addresses else ""
        restart = None if self._signals_received else self.restarts.next_restart(label)
        if restart is None:
            used = self.restarts.used.get(label, 0)
            spent = f" (its {used} restart(s) used)" if label in self.restarts.labels \
                and self.restarts.limit else ""
            self.say(f"{label}{where} exited with {describe_exit(code)}{spent}; the chief "
                     "carries on without it (a lost ps stops it with a message).")
            return False
        self.say(f"{label}{where} exited with {describe_exit(code)}; restarting it at the "
                 f"same address (restart {restart} of {self.restarts.limit}): the chief's "
                 "coordinator runs steps on it again once it answers.")
        time.sleep(RESTART_DELAY_SECONDS)
        self.processes[position] = self._start(position)
        return True

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
            for position in range(deciding, len(self.processes)):
                label, code = self.labels[position], codes[position]
                if code is None or label in reported:
                    continue
                if not any(c is None for c in codes[:deciding]):
                    continue  # the chief has ended: the servers are stopped below anyway
                if not self._server_exited(position, code):
                    reported.add(label)
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
