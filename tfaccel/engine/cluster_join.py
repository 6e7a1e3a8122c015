"""The workers of a TF_CONFIG cluster wait for each other in Python before TensorFlow's own wait.

MultiWorkerMirroredStrategy's constructor waits until every worker has joined inside one
TensorFlow call that holds Python's GIL, after TensorFlow installed its own SIGTERM handler:
a worker whose peer never comes answered neither Ctrl-C nor SIGTERM there. Waiting here
first, in plain Python, leaves that call only the seconds the other workers need to start
TensorFlow's server once all of them are known to be up.

The rendezvous uses each task's own TF_CONFIG port before TensorFlow's server takes it:
each worker listens on its port, greets every other worker on theirs, and is done when it
has greeted every other worker and been greeted by every one. A worker closes its port
only when everyone has greeted it, so no one still needs it; a port that answers with
anything but this greeting belongs to a worker already inside TensorFlow (started again
after the others), which counts as joined and is left to TensorFlow's own checks. Stdlib
only (no TensorFlow).
"""

from __future__ import annotations

import hashlib
import socket
import threading
import time
from typing import List, Optional, Sequence, Set, Tuple

_GREETING = "tfaccel-join/1"
_LINE_LIMIT = 256


class ClusterJoin:
    """One worker's side of the rendezvous.

    Args:
        tasks: ``(name, "host:port")`` of every training task, in TF_CONFIG's order
            (`tfaccel.config.cluster.training_addresses`).
        index: This worker's position in `tasks`.
        poll_seconds: How often an absent worker is tried again.
        reply_seconds: How long a greeted worker may take to answer.
    """

    def __init__(self, tasks: Sequence[Tuple[str, str]], index: int, *,
                 poll_seconds: float = 0.2, reply_seconds: float = 5.0):
        self.tasks = [(str(name), str(address)) for name, address in tasks]
        self.index = int(index)
        self.poll_seconds = poll_seconds
        self.reply_seconds = reply_seconds
        # Greetings name the cluster: a worker of another cluster on a reused port is not one.
        self._cluster = hashlib.sha256(
            "\n".join(a for _, a in self.tasks).encode()).hexdigest()[:16]
        self._peers = {i for i in range(len(self.tasks)) if i != self.index}
        self._reached: Set[int] = set()  # we greeted them and they answered
        self._heard: Set[int] = set()  # they greeted us
        self._lock = threading.Lock()

    def missing(self) -> List[str]:
        """The workers not joined yet, as ``"worker 1 at host:port"``."""
        with self._lock:
            absent = sorted(self._peers - (self._reached & self._heard))
        return [f"{self.tasks[i][0]} at {self.tasks[i][1]}" for i in absent]

    def done(self) -> bool:
        """Whether every other worker has joined."""
        with self._lock:
            return self._peers <= (self._reached & self._heard)

    def wait(self) -> None:
        """Returns once every other worker has joined; waits as long as that takes.

        Signals are answered as anywhere in Python (the caller decides how). When this
        worker's port cannot be taken, returns at once: TensorFlow then says why.
        """
        if self.done():
            return
        listener = self._listen()
        if listener is None:
            return
        stop = threading.Event()
        server = threading.Thread(target=self._serve, args=(listener, stop), daemon=True,
                                  name="tfaccel-cluster-join")
        server.start()
        try:
            while not self.done():
                for peer in sorted(self._peers - self._reached):
                    self._greet(peer)
                if not self.done():
                    time.sleep(self.poll_seconds)
        finally:
            stop.set()
            listener.close()
            server.join()

    def _listen(self) -> Optional[socket.socket]:
        port = int(_split(self.tasks[self.index][1])[1])
        try:
            if socket.has_dualstack_ipv6():
                listener = socket.create_server(("", port), family=socket.AF_INET6,
                                                dualstack_ipv6=True, reuse_port=False)
            else:
                listener = socket.create_server(("", port))
        except OSError:
            return None
        listener.settimeout(self.poll_seconds)
        return listener

    def _serve(self, listener: socket.socket, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except (socket.timeout, OSError):
                continue
            with connection:
                connection.settimeout(self.reply_seconds)
                try:
                    words = _read_line(connection).split()
                    if len(words) == 3 and words[0] == _GREETING:
                        ours = words[1] == self._cluster and int(words[2]) in self._peers
                        connection.sendall(b"ok\n" if ours else b"other\n")
                        if ours:
                            with self._lock:
                                self._heard.add(int(words[2]))
                        # The greeting worker closes first (its side keeps TIME_WAIT, not
                        # the port TensorFlow's server binds next).
                        connection.recv(1)
                except (OSError, ValueError):
                    pass

    def _greet(self, peer: int) -> None:
        host, port = _split(self.tasks[peer][1])
        try:
            with socket.create_connection((host, int(port)),
                                          timeout=min(1.0, self.reply_seconds)) as connection:
                connection.settimeout(self.reply_seconds)
                connection.sendall(f"{_GREETING} {self._cluster} {self.index}\n".encode())
                answer = _read_line(connection)
        except (OSError, ValueError):
            return  # not listening yet (or slow): tried again
        if answer == "ok":
            with self._lock:
                self._reached.add(peer)
        elif answer != "other":  # not this rendezvous: its worker is in TensorFlow already
            with self._lock:
                self._reached.add(peer)
                self._heard.add(peer)


def _split(address: str) -> Tuple[str, str]:
    """``"host:port"`` or ``"[v6]:port"`` -> (host, port)."""
    host, _, port = address.rpartition(":")
    return host.strip("[]"), port


def _read_line(connection: socket.socket) -> str:
    data = b""
    while not data.endswith(b"\n") and len(data) < _LINE_LIMIT:
        chunk = connection.recv(_LINE_LIMIT)
        if not chunk:
            break
        data += chunk
    return data.decode("ascii", "replace").strip()
