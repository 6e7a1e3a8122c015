"""The one line that says what a TensorFlow server started by tfaccel exposes (TF-free).

TensorFlow 2.21 takes no bind address for any of these servers: `DispatcherConfig`,
`WorkerConfig` (tf.data service) and `ServerDef` (the gRPC server of every multi-worker
task) carry a port only, and the C++ servers listen on ``0.0.0.0:PORT``, which gRPC opens
as the dual-stack wildcard (``ss -ltn`` shows ``*:PORT``), even when TF_CONFIG names
127.0.0.1. None of them authenticates its peers, and each runs what a peer sends (a
dataset graph, ops), so the only control is where the port can be reached from.
"""

from __future__ import annotations

from collections.abc import Sequence


def open_ports_note(*, server: str, ports: Sequence[int], runs: str) -> str:
    """One line for when `server` starts: its ports, open to all, and who must reach them.

    Args:
        server: The subject, e.g. ``"the tf.data service dispatcher"`` or ``"the workers'
            TensorFlow gRPC servers"`` (plural when `ports` has several).
        ports: The ports it listens on.
        runs: What it executes for whoever connects, e.g. ``"its workers run any pipeline
            a client sends"``.

    Returns:
        The sentence, without a prefix (the caller adds ``tfaccel:`` or ``[launch]``).
    """
    ports = [int(port) for port in ports]
    one = len(ports) == 1
    listed = ", ".join(str(port) for port in ports)
    return (f"{server} {'opens port' if one else 'open ports'} {listed} on every network "
            "interface (TensorFlow binds 0.0.0.0 and takes no other address), without "
            f"authentication; {runs}, file reads and writes included: keep "
            f"{'it' if one else 'them'} inside a trusted network or behind a firewall.")
