"""THE arithmetic of validation_fraction (round(f * n), whole files or rows), and TF-free example counts.

`tfaccel.data.splits` holds the split itself (seeded, disjoint); this module only says how
many items a fraction holds out, whether a file source can hold out whole files, and how
many examples a file holds, without TensorFlow, so `tfaccel validate` can refuse an empty
split before a run starts.
"""

from __future__ import annotations

import csv
import gzip
import os
import struct
from typing import Optional

# The compressions read here; a file of another (or unknown) compression is not counted.
_OPENERS = {None: open, "GZIP": gzip.open}


def held_out(n: int, fraction: float) -> int:
    """How many of `n` items `fraction` holds out: round(fraction * n), at least 1 for a
    fraction > 0 (may be `n` or more: the caller refuses a split leaving no training item)."""
    n_val = int(round(fraction * n))
    return 1 if fraction > 0 and n_val == 0 else n_val


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


def count_csv_rows(path: str, *, compression: Optional[str] = None) -> Optional[int]:
    """Records of a CSV file with a header row, blank lines not counted (Python's csv
    reader: a quoted newline stays inside its record); None for a ZLIB file."""
    opener = _OPENERS.get(compression_of(path, compression), None)
    if opener is None:
        return None
    with opener(path, "rt", encoding="utf-8", errors="replace", newline="") as handle:
        records = sum(1 for fields in csv.reader(handle) if fields)
    return max(records - 1, 0)


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

