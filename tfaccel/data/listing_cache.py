"""Each listed file's check result, saved between runs and reused while the file is unchanged."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from typing import Callable, List, Optional, Sequence

from tfaccel import atomic
from tfaccel.data import chunked

logger = logging.getLogger(__name__)

# Where the saved results live: this variable's folder, "off" for none; by default
# $XDG_CACHE_HOME/tfaccel/listings (~/.cache/tfaccel/listings).
ENV = "TFACCEL_LISTING_CACHE"
# Below this many files a listing is checked afresh: it costs milliseconds, and a saved
# file per small (often temporary) folder would only litter the cache folder.
MIN_FILES = 1000
# A file changed less than this before it was looked at is not saved: a file system keeps
# times at a coarse tick (a few ms on Linux, 2 s on FAT), so a second change within the
# same tick would leave the same times and a stale result would pass for current.
RACY_NS = 3_000_000_000
VERSION = 1


def folder() -> Optional[str]:
    """The folder saved listings live in, or None when switched off (``ENV=off``)."""
    chosen = os.environ.get(ENV)
    if chosen is not None:
        return None if chosen.strip().lower() in ("", "off", "0", "false") else chosen
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tfaccel", "listings")


def record_path(root: str, *, check: str) -> Optional[str]:
    """The file the results of `check` over the folder `root` are saved in (None: off)."""
    where = folder()
    if where is None:
        return None
    key = hashlib.sha256(f"{os.path.realpath(root)}\0{check}".encode()).hexdigest()[:24]
    return os.path.join(where, f"{key}.json")


def _signature(path: str, stamp: int) -> str:
    """What identifies a file's contents without reading them ("": unknown or too recent).

    Size, modification and change times, and inode: a file replaced by another (renamed
    over it) has another inode, one rewritten in place another modification time, and the
    change time moves even when a tool sets the modification time back.
    """
    try:
        st = os.stat(path)
    except OSError:
        return ""
    if max(st.st_mtime_ns, st.st_ctime_ns) >= stamp - RACY_NS:
        return ""
    return f"{st.st_size}.{st.st_mtime_ns}.{st.st_ctime_ns}.{st.st_ino}"


def _load(record: str, *, root: str, check: str) -> Optional[dict]:
    """A saved record of `check` over `root` (names, signatures, results), or None."""
    try:
        with open(record, encoding="utf-8") as stream:
            saved = json.load(stream)
        if (saved.get("version") != VERSION or saved.get("check") != check
                or saved.get("root") != os.path.realpath(root)
                or not len(saved["names"]) == len(saved["signatures"])
                == len(saved["results"])):
            return None
        return saved
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None  # missing, half written, or not ours: check afresh


def _reused(saved: Optional[dict], names: List[str], signatures: List[str]) -> List[int]:
    """For each name, the position of its saved result if its signature matches, else -1."""
    if saved is None:
        return [-1] * len(names)
    if saved["names"] == names:  # the folder kept its files: compare in place
        return [i if s and s == kept else -1
                for i, (s, kept) in enumerate(zip(signatures, saved["signatures"]))]
    where = {name: i for i, name in enumerate(saved["names"])}
    kept = saved["signatures"]
    return [j if s and j >= 0 and kept[j] == s else -1
            for j, s in ((where.get(name, -1), s) for name, s in zip(names, signatures))]


def checked(root: str, paths: Sequence[str], *, check: Callable[[str], object],
            name: str) -> List[object]:
    """``[check(p) for p in paths]``, reusing the result saved for each unchanged file.

    A file's result is reused only when its size, times and inode are those it had when it
    was checked (`_signature`), so a file added, removed, replaced or rewritten is checked
    again (and only that file); the new results are saved for the next run.

    Args:
        root: The listed folder; `paths` are below it.
        paths: The files.
        check: ``check(path)``: a JSON-able result (False: unusable).
        name: What `check` is, with a version: results of another check are never reused.

    Returns:
        The results, in the order of `paths`.
    """
    record = record_path(root, check=name) if len(paths) >= MIN_FILES else None
    if record is None:
        return chunked.map_paths(check, paths)
    stamp = time.time_ns()
    signatures = chunked.map_paths(lambda p: _signature(p, stamp), paths)
    saved = _load(record, root=root, check=name)
    start = len(os.path.join(root, ""))
    names = [p[start:] for p in paths]
    reused = _reused(saved, names, signatures)
    results: List[object] = [None if j < 0 else saved["results"][j] for j in reused]
    stale = [i for i, j in enumerate(reused) if j < 0]
    if stale:
        for i, result in zip(stale, chunked.map_paths(check, [paths[i] for i in stale])):
            results[i] = result
    if stale or saved is None or len(saved["names"]) != len(paths):
        _save(record, root=root, name=name, names=names, signatures=signatures,
              results=results)
    return results


def _save(record: str, *, root: str, name: str, names: List[str], signatures: List[str],
          results: List[object]) -> None:
    """Writes the record (atomically); a cache folder that cannot be written is passed over."""
    keep = [i for i, signature in enumerate(signatures) if signature]
    text = json.dumps({"version": VERSION, "check": name, "root": os.path.realpath(root),
                       "names": [names[i] for i in keep],
                       "signatures": [signatures[i] for i in keep],
                       "results": [results[i] for i in keep]}, separators=(",", ":"))
    try:
        os.makedirs(os.path.dirname(record), exist_ok=True)
        atomic.write_file(record, text)
    except OSError as error:
        # Only a speed-up: the next run checks the files again.
        logger.debug("Listing cache %s not written: %s", record, error)
