"""Per-file work over many paths in a few thread tasks (chunks of paths), not a task per file."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, List, Sequence, TypeVar

T = TypeVar("T")

# A Future, its lock and its condition cost ~50 us of Python per task, more than reading a
# small file's header: 100k files as 100k tasks took ~8 s of pool overhead on 2 cores
# (issue #27). Chunks of this many paths make it a few dozen tasks.
CHUNK = 2048
# Threads still overlap the reads of a cold disk (the GIL is released in each read); more
# than this only adds switching on a few cores.
WORKERS = 8


def map_paths(fn: Callable[[str], T], paths: Sequence[str], *, chunk: int = CHUNK,
              workers: int = WORKERS) -> List[T]:
    """``[fn(p) for p in paths]``, in order, computed by a few threads over chunks of paths.

    Args:
        fn: The per-file work (it must be thread-safe).
        paths: The files.
        chunk: Paths per task.
        workers: Threads at most.

    Returns:
        The results, in the order of `paths`.
    """
    chunks = [paths[i:i + chunk] for i in range(0, len(paths), chunk)]
    if len(chunks) <= 1:
        return [fn(p) for p in paths]  # no thread for a small folder
    with ThreadPoolExecutor(max_workers=min(workers, len(chunks))) as pool:
        parts = list(pool.map(lambda part: [fn(p) for p in part], chunks))
    return [result for part in parts for result in part]
