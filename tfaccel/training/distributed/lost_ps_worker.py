"""A parameter-server worker the coordinator lost, said once by HOST:PORT, and said again when
it is back and runs steps."""

from __future__ import annotations

import logging
import re
from typing import Callable, Dict, Iterable, Optional, Sequence

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


def rejoined_line(index: int, workers: Sequence[str]) -> str:
    """What the chief says once a worker it lost runs steps again."""
    return (f"worker {index} ({workers[index]}, /job:worker/replica:0/task:{index}) is back: "
            "TensorFlow's coordinator took it again at its address and ran step(s) on it "
            "(its share of the stream continues where its steps left it).")


class LostWorkers(logging.Handler):
    """Says each lost worker once, while attached to TensorFlow's logger (a `with` block),
    and again when it is back (`ran`).

    Args:
        workers: The cluster's workers as HOST:PORT, in task order.
        on_back: Called with a worker's index once it is back (after the line is said).
    """

    def __init__(self, workers: Sequence[str], *,
                 on_back: Optional[Callable[[int], None]] = None):
        super().__init__(level=logging.ERROR)
        self.workers = list(workers)
        self.on_back = on_back
        self.said = set()
        self.lost_in: Dict[int, int] = {}  # worker index -> the batch it was said lost in
        self.batch = 0  # of steps scheduled together (`begin_batch`)
        self.steps: Dict[int, int] = {}  # steps each worker ran, by its index

    def emit(self, record: logging.LogRecord) -> None:
        try:
            found = lost_worker_line(record.getMessage(), self.workers)
        except Exception:  # a log line never stops training
            return
        # The coordinator logs a failure once per closure in flight: say it once.
        if found is not None and found[0] not in self.said:
            self.said.add(found[0])
            self.lost_in[found[0]] = self.batch
            say(found[1])

    def begin_batch(self) -> int:
        """Before scheduling a batch of steps: its number, for `ran`."""
        self.batch += 1
        return self.batch

    def ran(self, batch: int, workers: Iterable[int]) -> None:
        """Counts the steps of `batch` by the worker that ran each (its index); a worker
        said lost before `batch` was scheduled is back: said once, and may be lost again.

        While lost, a worker's thread in the coordinator waits for it to answer, so a step
        scheduled after the loss and run by that worker ran after it came back.
        """
        for index in workers:
            self.steps[index] = self.steps.get(index, 0) + 1
        for index in sorted(set(workers)):
            lost = self.lost_in.get(index)
            if lost is not None and lost < batch and index < len(self.workers):
                del self.lost_in[index]
                self.said.discard(index)
                say(rejoined_line(index, self.workers))
                if self.on_back is not None:
                    self.on_back(index)

    def steps_line(self) -> str:
        """The steps each worker ran, as the chief's closing line says them."""
        return "steps run by each worker: " + ", ".join(
            f"worker {i} ({host}) {self.steps.get(i, 0)}" for i, host in enumerate(self.workers))

    def __enter__(self) -> "LostWorkers":
        logging.getLogger("tensorflow").addHandler(self)
        return self

    def __exit__(self, *exc) -> bool:
        logging.getLogger("tensorflow").removeHandler(self)
        return False
