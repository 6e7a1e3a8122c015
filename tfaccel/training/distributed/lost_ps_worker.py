"""A parameter-server worker the coordinator lost, said once by HOST:PORT."""

from __future__ import annotations

import logging
import re
from typing import Optional, Sequence

from tfaccel.messages import say

# What TensorFlow's ClusterCoordinator logs (an ERROR, by device only) when a worker's
# closure fails with a connection error; it then runs the closure on another worker.
_FAILED = re.compile(r"Worker /job:worker/replica:\d+/task:(\d+) failed with (\w+)")


def lost_worker_line(message: str, workers: Sequence[str]) -> Optional[tuple]:
    """``(index, line)`` for a coordinator log `message` saying a worker failed, else None.

    Args:
        message: One log message of TensorFlow's coordinator.
        workers: The cluster's workers as HOST:PORT, in task order.
    """
    found = _FAILED.search(message)
    if not found or int(found.group(1)) >= len(workers):
        return None
    index = int(found.group(1))
    return index, (f"worker {index} ({workers[index]}, /job:worker/replica:0/task:{index}) "
                   f"is unreachable (TensorFlow: {found.group(2)}): its link is down or it "
                   "stopped; its steps run on the other worker(s), each counted once, and "
                   "training carries on.")


class LostWorkers(logging.Handler):
    """Says each lost worker once, while attached to TensorFlow's logger (a `with` block).

    Args:
        workers: The cluster's workers as HOST:PORT, in task order.
    """

    def __init__(self, workers: Sequence[str]):
        super().__init__(level=logging.ERROR)
        self.workers = list(workers)
        self.said = set()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            found = lost_worker_line(record.getMessage(), self.workers)
        except Exception:  # a log line never stops training
            return
        # The coordinator logs a failure once per closure in flight: say it once.
        if found is not None and found[0] not in self.said:
            self.said.add(found[0])
            say(found[1])

    def __enter__(self) -> "LostWorkers":
        logging.getLogger("tensorflow").addHandler(self)
        return self

    def __exit__(self, *exc) -> bool:
        logging.getLogger("tensorflow").removeHandler(self)
        return False
