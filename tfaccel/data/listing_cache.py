"""Each listed file's check result, saved between runs, reused while its folder is unchanged."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from typing import Callable, List, Optional, Sequence, Tuple

from tfaccel import atomic
from tfaccel.cache_dir import cache_dir
from tfaccel.data import chunked

logger = logging.getLogger(__name__)

# Where the saved results live: this variable's folder, "off" for none; by default
# tfaccel's cache folder's listings/ (tfaccel.cache_dir: ~/.cache/tfaccel/listings).
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
    return cache_dir("listings")


def record_path(root: str, *, check: str) -> Optional[str]:
    """The file the results of `check` over the folder `root` are saved in (None: off)."""
    where = folder()
    if where is None:
        return None
    key = hashlib.sha256(f"{os.path.realpath(root)}\0{check}".encode()).hexdigest()[:24]
    return os.path.join(where, f"{key}.json")


_THREAD_NAME = "tfaccel-listing-check"


def is_saved(root: str, *, count: int, check: str) -> bool:
    """Whether a record of `check` over `root` (`count` files listed) exists to be reused."""
    record = record_path(root, check=check) if count >= MIN_FILES else None
    return record is not None and os.path.exists(record)


def check_in_background(root: str, paths: Sequence[str], *,
                        folders: Sequence[Tuple[int, int]], check: Callable[[str], object],
                        name: str) -> Optional[threading.Thread]:
    """Runs `checked` in a daemon thread (its results saved for the next run), or None.

    None when nothing would be saved (the cache is off, or too few files). The thread's
    reads overlap the first epoch instead of delaying its first batch; a process that
    ends first leaves no record (the save is atomic) and the next run is cold again.
    """
    if len(paths) < MIN_FILES or record_path(root, check=check) is None:
        return None
    thread = threading.Thread(
        # The listing's own lists, not copies (nothing changes them): a million paths.
        target=_check_quietly, args=(root, paths),
        kwargs=dict(folders=folders, check=check, name=name),
        name=_THREAD_NAME, daemon=True)
    thread.start()
    return thread


def _check_quietly(root: str, paths: Sequence[str], **kwargs) -> None:
    """`checked` in one low-priority thread: the first epoch's work comes first.

    Measured at 100k files on 2 loaded cores: 8 checking threads beside the first batch
    made it 0.4 s -> 0.7-1.1 s (they contend for the GIL and the cores).
    """
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)  # this thread (Linux)
    except (AttributeError, OSError):
        pass  # elsewhere the thread keeps the process' priority
    checked(root, paths, workers=1, **kwargs)


def wait_for_background_checks() -> None:
    """Waits for every `check_in_background` thread of this process to save its results."""
    for thread in threading.enumerate():
        if thread.name == _THREAD_NAME:
            thread.join()


def _digest(paths: Sequence[str], *, start: int, stamp: int) -> Optional[str]:
    """What identifies one folder's listed files without reading them (None: not trusted).

    Each file's name, size, modification and change times, and inode: a file added,
    removed or renamed changes the names, one replaced by another (renamed over it) the
    inode, one rewritten in place the modification time, and the change time moves even
    when a tool sets the modification time back. A file changed less than `RACY_NS`
    before `stamp` (or gone) makes the folder untrusted.
    """
    digest = hashlib.sha256()
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            return None
        if max(st.st_mtime_ns, st.st_ctime_ns) >= stamp - RACY_NS:
            return None
        digest.update(f"{path[start:]}\0{st.st_size}.{st.st_mtime_ns}.{st.st_ctime_ns}."
                      f"{st.st_ino}\n".encode())
    return digest.hexdigest()


def _load(record: str, *, root: str, check: str) -> dict:
    """``{folder: [digest, results]}`` of a saved record of `check` over `root`, or {}."""
    try:
        with open(record, encoding="utf-8") as stream:
            saved = json.load(stream)
        if (saved.get("version") != VERSION or saved.get("check") != check
                or saved.get("root") != os.path.realpath(root)
                or not isinstance(saved.get("folders"), dict)):
            return {}
        return saved["folders"]
    except (OSError, ValueError, AttributeError):
        return {}  # missing, half written, or not ours: check afresh


# Results travel as one string per folder, a line per file (a few bytes each, and one
# object per folder to parse, not one per file).
_ENCODE = {False: "0", True: "1"}
_DECODE = {"0": False, "1": True}


def _encode(results: List[object]) -> str:
    return "\n".join(_ENCODE.get(r, r) if isinstance(r, bool) else r for r in results)


def _decode(text: str, *, count: int, known: dict) -> Optional[List[object]]:
    """The results of a folder's line, each repeated string shared (`known`), or None."""
    lines = text.split("\n") if count else []
    if len(lines) != count:
        return None
    return [_DECODE.get(line) if line in _DECODE else known.setdefault(line, line)
            for line in lines]


def checked(root: str, paths: Sequence[str], *, folders: Sequence[Tuple[int, int]],
            check: Callable[[str], object], name: str,
            workers: int = chunked.WORKERS) -> List[object]:
    """``[check(p) for p in paths]``, reusing the results saved for each unchanged folder.

    A folder's results are reused only when its files are those it had when they were
    checked (`_digest`: names, sizes, times, inodes), so a file added, removed, replaced
    or rewritten has its folder's files checked again (only that folder); the new results
    are saved for the next run.

    Args:
        root: The listed folder; `paths` are below it.
        paths: The files, folder by folder.
        folders: ``(start, end)``: the slice of `paths` each listed folder holds.
        check: ``check(path)``: False (unusable), True, or a short string without a line
            break (what the check found out, e.g. a size).
        name: What `check` is, with a version: results of another check are never reused.
        workers: Threads checking files at once.

    Returns:
        The results, in the order of `paths`.
    """
    record = record_path(root, check=name) if len(paths) >= MIN_FILES else None
    if record is None:
        return chunked.map_paths(check, paths, workers=workers)
    stamp = time.time_ns()
    start = len(os.path.join(root, ""))
    saved = _load(record, root=root, check=name)
    known: dict = {}

    def one(span):
        """``(key, digest, results, fresh)`` of one listed folder."""
        files = paths[span[0]:span[1]]
        key = os.path.dirname(files[0])[start:]
        digest = _digest(files, start=start, stamp=stamp)
        entry = saved.get(key)
        if (digest is not None and isinstance(entry, list) and len(entry) == 2
                and isinstance(entry[1], str)):
            results = entry[0] == digest and _decode(entry[1], count=len(files), known=known)
            if results:
                return key, digest, results, False
        return key, digest, [check(p) for p in files], True

    # One task per folder (a few hundred for ImageNet), threads overlapping the reads.
    outcomes = chunked.map_paths(one, list(folders), chunk=1, workers=workers)
    fresh = [(key, digest, results) for key, digest, results, new in outcomes if new]
    if fresh:
        kept = {key: entry for key, entry in saved.items() if isinstance(entry, list)}
        kept.update({key: [digest, _encode(results)] for key, digest, results in fresh
                     if digest is not None})
        _save(record, {"version": VERSION, "check": name, "root": os.path.realpath(root),
                       "folders": kept})
    return [r for _, _, results, _ in outcomes for r in results]


def _save(record: str, content: dict) -> None:
    """Writes the record (atomically); a cache folder that cannot be written is passed over."""
    try:
        os.makedirs(os.path.dirname(record), exist_ok=True)
        atomic.write_file(record, json.dumps(content, separators=(",", ":")))
    except OSError as error:
        # Only a speed-up: the next run checks the files again.
        logger.debug("Listing cache %s not written: %s", record, error)
