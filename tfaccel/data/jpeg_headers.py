"""JPEG sizes read from file headers, to choose each file's DCT-scaled decode before training."""

from __future__ import annotations

import io
import os
from typing import List, Optional, Sequence, Tuple

from tfaccel.data import chunked

# The DCT scalings libjpeg offers (`tf.io.decode_jpeg(ratio=r)`); a plan's index 0 means
# "not a JPEG: the generic decoder", index i >= 1 "a JPEG decoded at 1/RATIOS[i - 1]".
RATIOS = (1, 2, 4, 8)
GENERIC = 0

# Start-of-frame markers carry the size; C4 (Huffman tables), C8 (reserved) and CC
# (arithmetic-coding conditioning) share the range but are not frames.
_SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
_NO_LENGTH_MARKERS = frozenset({0x01, *range(0xD0, 0xD9)})  # TEM, RSTn, SOI
_MAX_SEGMENTS = 256  # a header longer than this is not worth reading: decode it fully


def jpeg_size(path: str) -> Optional[Tuple[int, int]]:
    """``(height, width)`` of a JPEG from its frame header, or None if `path` is not one.

    Reads only the marker segments before the frame header (a few small reads, skipping
    EXIF and thumbnails by their lengths), never the compressed data.
    """
    try:
        with open(path, "rb") as f:
            size = _frame_size(f)
    except OSError:
        return None
    return None if size is _SHORT else size


def jpeg_size_in(head: bytes, path: str) -> Optional[Tuple[int, int]]:
    """`jpeg_size` from the first bytes of the file at `path`, read again only if needed.

    A listing reads each file's first bytes once (for its check); most headers end within
    them, and only a file whose header runs past `head` is opened again.
    """
    size = _frame_size(io.BytesIO(head))
    return jpeg_size(path) if size is _SHORT else size


_SHORT = object()  # the header ran past the bytes given


def _frame_size(f):
    """The frame size of the JPEG read from `f`, None if it is not one, `_SHORT` if cut."""
    if f.read(2) != b"\xff\xd8":
        return None
    for _ in range(_MAX_SEGMENTS):
        byte = f.read(1)
        if byte != b"\xff":  # every segment starts with a marker
            return _SHORT if not byte else None
        byte = f.read(1)
        while byte == b"\xff":  # fill bytes before the marker's code
            byte = f.read(1)
        if not byte:
            return _SHORT
        marker = byte[0]
        if marker in _NO_LENGTH_MARKERS:
            continue
        length = f.read(2)
        if len(length) < 2:
            return _SHORT
        if marker in _SOF_MARKERS:
            frame = f.read(5)  # precision, height, width
            if len(frame) < 5:
                return _SHORT
            return (int.from_bytes(frame[1:3], "big"), int.from_bytes(frame[3:5], "big"))
        f.seek(int.from_bytes(length, "big") - 2, os.SEEK_CUR)
    return None


def ratio_index(size: Optional[Tuple[int, int]], image_size: Sequence[int], *,
                crop_to_aspect_ratio: bool = False) -> int:
    """The plan index for one file: the largest scaling that still covers `image_size`.

    Args:
        size: The file's ``(height, width)``, or None when it is not a JPEG.
        image_size: The target ``(height, width)``.
        crop_to_aspect_ratio: The region kept is the largest centred crop of the target's
            aspect ratio, so only that region must cover the target.

    Returns:
        `GENERIC` (0) for a non-JPEG, else ``1 + position in RATIOS``.
    """
    if size is None:
        return GENERIC
    height, width = (int(v) for v in image_size)
    h, w = size
    if crop_to_aspect_ratio:
        h, w = min(h, w * height // width), min(w, h * width // height)
    best = 1
    for i, ratio in enumerate(RATIOS, start=1):
        if h >= ratio * height and w >= ratio * width:
            best = i
    return best


def plan(paths: Sequence[str], image_size: Sequence[int], *,
         crop_to_aspect_ratio: bool = False) -> List[int]:
    """`ratio_index` for every path, reading the headers in threads (I/O-bound)."""
    sizes = chunked.map_paths(jpeg_size, paths)
    return [ratio_index(s, image_size, crop_to_aspect_ratio=crop_to_aspect_ratio)
            for s in sizes]
