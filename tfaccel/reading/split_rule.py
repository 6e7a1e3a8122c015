"""THE arithmetic of validation_fraction (round(f * n), whole files or rows), and TF-free example counts.

`tfaccel.data.splits` holds the split itself (seeded, disjoint); this module only says how
many items a fraction holds out, whether a file source can hold out whole files, and how
many examples a file holds, without TensorFlow, so `tfaccel validate` can refuse an empty
split before a run starts.
"""

from __future__ import annotations

import gzip
import os
import struct
from typing import Optional

import numpy as np

from tfaccel.reading import csv_files

# The compressions read here; a file of another (or unknown) compression is not counted.
_OPENERS = {None: open, "GZIP": gzip.open}


def held_out(n: int, fraction: float) -> int:
    """How many of `n` items `fraction` holds out: round(fraction * n), at least 1 for a
    fraction > 0 (may be `n` or more: the caller refuses a split leaving no training item)."""
    n_val = int(round(fraction * n))
    return 1 if fraction > 0 and n_val == 0 else n_val


def split_order(n: int, n_val: int, seed: int):
    """THE seeded choice of `n_val` of `n` items: ``(training, held-out)`` sorted index
    arrays, the held-out ones the last `n_val` of ``numpy.random.default_rng(seed)``'s
    permutation (the same on every machine; `tfaccel.data.splits.split_indices`)."""
    order = np.random.default_rng(seed).permutation(n)
    return np.sort(order[:n - n_val]), np.sort(order[n - n_val:])


def row_masks(counts, n_val: int, seed: int):
    """``(training masks, held-out masks)``: one boolean array per file of `counts`, from
    `split_order` over every row of the files in listing order (each row in one side)."""
    counts = [int(c) for c in counts]
    _, val_idx = split_order(sum(counts), n_val, seed)
    held = np.zeros(sum(counts), bool)
    held[val_idx] = True
    bounds = np.cumsum([0, *counts])
    val_masks = [held[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
    return [~m for m in val_masks], val_masks


def whole_files(num_files: int, fraction: float) -> bool:
    """THE rule of the file-glob sources: whole files when there are enough of them.

    Whole files are held out when round(fraction * files) is at least 1 and leaves at
    least one file for training (3 files at 0.2: 1 file); otherwise (one file, or 2 files
    at 0.2, which would hold out half the data) the rows of every file are split.
    """
    n_val = int(round(fraction * num_files))
    return 1 <= n_val < num_files


def compression_of(path: str, declared: Optional[str]) -> Optional[str]:
    """A file's compression: the declared one, else its name's (``.gz`` GZIP, ``.zz``/
    ``.zlib`` ZLIB), else none."""
    if declared:
        return declared
    lower = str(path).lower()
    if lower.endswith((".gz", ".gzip")):
        return "GZIP"
    if lower.endswith((".zz", ".zlib")):
        return "ZLIB"
    return None


def count_csv_rows(path: str, *, compression: Optional[str] = None,
                   delimiter: Optional[str] = None) -> Optional[int]:
    """Rows of a CSV file with a header row, as the csv source reads them: by the shared
    reader (`tfaccel.reading.csv_files`: byte-order mark dropped, blank lines and lines of
    spaces not rows, a quoted newline inside its row); None for a ZLIB file, or a GZIP one
    whose name does not say so (the reader inflates ``.gz`` by name; the run counts it).

    Raises:
        DataError: As `csv_files.records` (a file that cannot be read, named).
    """
    kind = compression_of(path, compression)
    if kind not in _OPENERS or (kind == "GZIP" and compression_of(path, None) != "GZIP"):
        return None
    delimiter = csv_files.detect_delimiter(path, delimiter=delimiter)
    return max(sum(1 for _ in csv_files.records(path, delimiter=delimiter)) - 1, 0)


def count_lines(path: str, *, compression: Optional[str] = None) -> Optional[int]:
    """Non-empty lines of a text file (a line of only ``\\r`` is empty, as in
    TextLineDataset's split); None for a ZLIB file."""
    opener = _OPENERS.get(compression_of(path, compression), None)
    if opener is None:
        return None
    count = 0
    with opener(path, "rb") as handle:
        for line in handle:
            if line.rstrip(b"\n").rstrip(b"\r"):
                count += 1
    return count


def count_records(path: str, *, compression: Optional[str] = None) -> Optional[int]:
    """Records of an uncompressed TFRecord file, by seeking from header to header (a few
    bytes read per record); None for a compressed or cut file (left to the run's check)."""
    if compression:
        return None
    size, count = os.path.getsize(path), 0
    with open(path, "rb") as raw:
        while True:
            header = raw.read(12)
            if not header:
                return count
            if len(header) < 12:
                return None
            (length,) = struct.unpack("<Q", header[:8])
            end = raw.tell() + length + 4
            if end > size:
                return None
            raw.seek(end)
            count += 1

