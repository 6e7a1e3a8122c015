"""A multi-worker failure because a peer stopped answering, as a message naming its HOST:PORT."""

from __future__ import annotations

import re
from typing import Mapping, Optional

from tfaccel.config.cluster import task_order

# TensorFlow's coordination service (TSL) declares a task dead after this long without a
# heartbeat (its default; MultiWorkerMirroredStrategy leaves it unset).
HEARTBEAT_TIMEOUT_SECONDS = 10

# The leader's report: "The following tasks are unhealthy (stopped sending heartbeats):
# /job:worker/replica:0/task:1 ...".
_UNHEALTHY = re.compile(r"unhealthy \(stopped sending heartbeats\):\s*((?:/job:\w+/replica:\d+"
                        r"/task:\d+[\s,]*)+)")
_TASK = re.compile(r"/job:(\w+)/replica:\d+/task:(\d+)")
# A non-leader whose heartbeats to the leader time out or cannot be sent.
_HEARTBEAT_FAILED = re.compile(r"(Deadline Exceeded|DEADLINE_EXCEEDED|UNAVAILABLE|Unavailable)"
                               r"[\s\S]*RPC: /tensorflow\.CoordinationService/Heartbeat")


def unreachable_tasks(message: str, cluster: Mapping) -> list:
    """The ``(job, index)`` of the peers TensorFlow's `message` says stopped answering.

    Args:
        message: The text of a TensorFlow error (an `OpError`'s message).
        cluster: The cluster as TF_CONFIG names it, ``{"worker": ["host:port", ...]}``.

    Returns:
        The tasks the coordination service found unhealthy; or, when this worker's own
        heartbeats to the service's leader (the chief) failed, the leader; else ``[]``.
    """
    found = _UNHEALTHY.search(message)
    if found:
        return [(job, int(index)) for job, index in _TASK.findall(found.group(1))]
    order = task_order(cluster)
    if _HEARTBEAT_FAILED.search(message) and order:
        return [order[0]]
    return []


def lost_peer_message(message: str, *, cluster: Mapping, finished_epochs: int,
                      kept: str, timeout: Optional[float] = None) -> Optional[str]:
    """One paragraph naming the unreachable peer(s) and how to resume; None if not that.

    Args:
        message: The text of the TensorFlow error that stopped training.
        cluster: The cluster as TF_CONFIG names it, ``{"worker": ["host:port", ...]}``.
        finished_epochs: Epochs finished (and checkpointed) before the failure.
        kept: Where metrics and checkpoints are kept, e.g. `` in runs/x`` (leading space).
        timeout: The heartbeat timeout in seconds (`runtime.peer_timeout`); None for
            TensorFlow's default.
    """
    tasks = [t for t in unreachable_tasks(message, cluster)
             if t[1] < len(cluster.get(t[0]) or ())]
    if not tasks:
        return None
    order = task_order(cluster)
    seconds = timeout or HEARTBEAT_TIMEOUT_SECONDS
    names = ", ".join(f"{cluster[job][index]} (worker {order.index((job, index))}, "
                      f"/job:{job}/replica:0/task:{index})" for job, index in tasks)
    return (f"training failed after {finished_epochs} finished epoch(s): {names} stopped "
            f"answering TensorFlow's coordination service (no heartbeat for {seconds:g} s): "
            "its network link is down, or that host or worker stopped. Metrics and "
            f"checkpoints of the finished epochs are kept{kept}. "
            "When every host reaches the others again, resume on every host with the same "
            "`tfaccel launch --hosts ... --index I` and `-- train --resume RUN_DIR` (the "
            "chief's run directory): the run continues from its last checkpoint.")


def cluster_of(strategy) -> dict:
    """`strategy`'s cluster as ``{"worker": ["host:port", ...]}``; ``{}`` without one."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None:
        return {}
    try:
        return resolver.cluster_spec().as_dict()
    except (AttributeError, ValueError):
        return {}
