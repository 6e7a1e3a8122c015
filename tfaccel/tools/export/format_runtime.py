"""What every format module shares: the loaded-back Runtime, an artifact's size, a converter's error."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable

RUNTIME_THREADS = {"litert": 1, "onnx": 1}


@dataclasses.dataclass
class Runtime:
    """An export loaded back with its own runtime: a function of one batch of features."""

    predict: Callable  # float32 features [n, ...] -> class probabilities [n, classes]


def size_on_disk(path: Path) -> int:
    """Bytes of an export: a file's size, or the sum of a folder's files (a SavedModel)."""
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size


def first_lines(error: BaseException, limit: int = 3) -> str:
    """A converter's error in a few lines (its own message names what it rejects)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return " ".join(lines[:limit]) or type(error).__name__
