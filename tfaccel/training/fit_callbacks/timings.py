"""Where a run's wall time goes: contiguous named phases (`tfaccel train --timings`).

Each phase runs from the end of the one before it to its own mark, so the phases never
overlap and their sum is the time from the clock's origin to the last mark: nothing is
counted twice, and what no mark names shows as its own phase. stdlib only (the CLI reads
it before TensorFlow is imported).
"""

from __future__ import annotations

import os
import time
from typing import Optional


def process_start() -> Optional[float]:
    """`time.perf_counter()`'s reading when this process started, or None where unknown.

    From Linux's /proc (the process's start in clock ticks after boot, against the time
    since boot): good to a clock tick (10 ms), and it counts the interpreter's own start,
    which no code of the process can time.
    """
    try:
        with open("/proc/self/stat", encoding="ascii") as stat:
            # The command name in parentheses may hold spaces: fields count after the ")".
            fields = stat.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime", encoding="ascii") as uptime:
            since_boot = float(uptime.read().split()[0])
        started_after_boot = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22
    except (OSError, ValueError, IndexError):
        return None
    return time.perf_counter() - max(since_boot - started_after_boot, 0.0)


class PhaseTimes:
    """Contiguous phases from an origin: `mark(name)` closes the phase that ends now.

    Args:
        origin: The `time.perf_counter()` reading the first phase starts at (default: now).
    """

    def __init__(self, *, origin: Optional[float] = None):
        self.origin = time.perf_counter() if origin is None else origin
        self._cursor = self.origin
        self.phases: list = []  # [name, seconds], in order; a name may come back

    def mark(self, name: str) -> float:
        """Ends the current phase now, named `name`; returns its seconds."""
        now = time.perf_counter()
        seconds = max(now - self._cursor, 0.0)
        self.phases.append([name, seconds])
        self._cursor = now
        return seconds

    def extend(self, phases: list, *, prefix: str, rest: str, upto: float) -> None:
        """Appends phases timed by another clock inside the current phase, then `rest`.

        Args:
            phases: ``[name, seconds]`` pairs timed within the current phase (a `train`
                call's own `PhaseTimes.phases`).
            prefix: Put before each of their names.
            rest: The name of what the current phase held beyond them.
            upto: The `time.perf_counter()` reading the current phase ends at.
        """
        inner = 0.0
        for name, seconds in phases:
            self.phases.append([prefix + name, seconds])
            inner += seconds
        self.phases.append([rest, max(upto - self._cursor - inner, 0.0)])
        self._cursor = max(upto, self._cursor + inner)

    def total(self) -> float:
        """The phases' sum: the origin to the last mark."""
        return sum(seconds for _, seconds in self.phases)

    def as_dict(self) -> dict:
        """JSON-able form for summary.json: the phases in order and their sum."""
        return {"phases": [{"phase": name, "seconds": round(seconds, 4)}
                           for name, seconds in self.phases],
                "seconds": round(self.total(), 4)}


def timings_text(phases: list, *, wall: float, origin: str) -> str:
    """The phases as aligned lines, for people.

    Args:
        phases: ``[name, seconds]`` pairs, in order.
        wall: Seconds from the origin to now (at least the phases' sum).
        origin: What the times count from, e.g. "the process's start".

    Returns:
        A header line and one line per phase, seconds first.
    """
    lines = [f"Timings: {wall:.2f} s from {origin} to this line (the process's exit "
             "comes after it), by phase:"]
    lines += [f"  {seconds:7.2f} s  {name}" for name, seconds in phases]
    return "\n".join(lines)
