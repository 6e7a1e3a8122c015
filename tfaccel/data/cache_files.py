"""File caches (data.cache: PATH) that never serve stale data: fingerprinted, repaired, locked."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
from typing import Iterable, Optional

from tfaccel import atomic
from tfaccel.config.input_paths import is_file_cache  # the one rule, used here
from tfaccel.errors import DataError
from tfaccel.messages import say

FINGERPRINT_SUFFIX = ".tfaccel.json"
LOCK_SUFFIX = ".tfaccel.lock"
# The prefix a directory cache writes under (tf.data takes a file prefix, not a folder).
DIRECTORY_PREFIX = "tfdata_cache"

# Prefixes this process has prepared: prefix -> (lock file descriptor, fingerprint JSON).
# A run builds its datasets more than once (a counted pass, a resumed epoch); only the
# first build may repair the cache, later ones must not touch files this process writes.
_PREPARED: dict = {}




def cache_prefix(cache) -> str:
    """The file prefix tf.data writes `cache` under; a directory gets `DIRECTORY_PREFIX`."""
    path = os.fspath(cache)
    if os.path.isdir(path) or path.endswith(os.sep):
        return os.path.join(path, DIRECTORY_PREFIX)
    return path


def split_prefixes(cache, *, worker=(0, 1)):
    """The training and validation caches of one `cache` setting: each split its own files.

    "memory" (or None) serves both; a file cache gets PREFIX and PREFIX_validation. In a
    job of several workers (`worker` = (index, count)) each worker writes what it reads
    under its own prefixes, PREFIX.worker-I-of-N and PREFIX_validation.worker-I-of-N:
    workers on one machine (or one shared filesystem) would otherwise all write the same
    files, and a worker that reads only its own files caches a share no other has.
    """
    if not is_file_cache(cache):
        return (cache or None,) * 2
    prefix = cache_prefix(cache)
    index, count = worker
    suffix = f".worker-{index}-of-{count}" if count > 1 else ""
    return f"{prefix}{suffix}", f"{prefix}_validation{suffix}"


def _own_files(prefix: str) -> list:
    """The files tf.data writes for `prefix` (complete cache or an interrupted writer's)."""
    directory, base = os.path.split(os.path.abspath(prefix))
    # PREFIX.index and PREFIX.data-00000-of-00001 when complete; PREFIX_<n>.lockfile and
    # PREFIX_<n>.data-...tempstate<id> while (or after a killed process was) writing.
    # PREFIX_validation.* is another cache and does not match `_<digits>.`.
    pattern = re.compile(re.escape(base) + r"(\.index|\.data-\d+-of-\d+|_\d+\..+)$")
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(os.path.join(directory, n) for n in names if pattern.match(n))


def _read_fingerprint(prefix: str) -> Optional[dict]:
    try:
        with open(prefix + FINGERPRINT_SUFFIX, encoding="utf-8") as handle:
            return json.load(handle)
    except (FileNotFoundError, ValueError):
        return None


def _write_fingerprint(prefix: str, fingerprint: dict) -> None:
    atomic.write_file(prefix + FINGERPRINT_SUFFIX,
                      json.dumps(fingerprint, indent=1, sort_keys=True))


def _changed_keys(recorded: dict, wanted: dict) -> list:
    keys = sorted(set(recorded) | set(wanted))
    return [k for k in keys if recorded.get(k) != wanted.get(k)]


def prepare_file_cache(cache, *, fingerprint: dict, key: str = "data.cache") -> str:
    """Makes the file cache at `cache` safe to read for data described by `fingerprint`.

    tf.data's file cache trusts whatever files sit under its prefix: after the data or a
    setting before the cache changes it silently serves the old examples, and a process
    killed while writing it leaves a lockfile that fails every later run. So the cache
    records the fingerprint of what it was built from (beside it, PREFIX.tfaccel.json), and
    a cache that does not match, or was left half written, is deleted (and rebuilt by the
    first epoch that reads it), with a message saying why. A lock file tells a cache a live
    process uses from one a dead process left: another live process may read a complete
    matching cache alongside, never one it is still writing or one of other data.

    Args:
        cache: The cache path (file prefix, or a directory).
        fingerprint: A JSON-able flat mapping of everything the cached examples depend on
            (source files, settings before the cache); names are shown on a mismatch.
        key: The recipe key to name in messages.

    Returns:
        The file prefix to hand to `tf.data.Dataset.cache`.

    Raises:
        DataError: Another running process is writing this cache, or uses it for other data.
    """
    prefix = cache_prefix(cache)
    wanted = json.loads(json.dumps(fingerprint, sort_keys=True, default=str))
    held = _PREPARED.get(prefix)
    if held is not None and held[1] == wanted:
        return prefix
    os.makedirs(os.path.dirname(os.path.abspath(prefix)), exist_ok=True)
    descriptor = held[0] if held is not None else os.open(prefix + LOCK_SUFFIX,
                                                          os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        alone = True
    except BlockingIOError:
        alone = False
    recorded = _read_fingerprint(prefix)
    complete = os.path.exists(prefix + ".index")
    if not alone:
        if recorded == wanted and complete:
            fcntl.flock(descriptor, fcntl.LOCK_SH)  # read alongside the other process
            _PREPARED[prefix] = (descriptor, wanted)
            return prefix
        if held is None:
            os.close(descriptor)
        if recorded != wanted:
            raise DataError(
                f"{key} {prefix!r} is in use by another running process that caches other "
                "data or settings there; give this run its own cache path.")
        raise DataError(
            f"{key} {prefix!r} is being written by another running process (its first "
            "epoch is not finished); wait for it, or give this run its own cache path.")
    files = _own_files(prefix)
    reason = _repair_reason(files, recorded=recorded, wanted=wanted, complete=complete)
    if reason is not None:
        for path in files:
            os.remove(path)
        say(f"{key} {prefix!r} {reason}; it is deleted and rebuilt in this run's "
            "first epoch.")
    if recorded != wanted or reason is not None:
        _write_fingerprint(prefix, wanted)
    # Shared from now on: other processes may read the cache alongside this one.
    fcntl.flock(descriptor, fcntl.LOCK_SH)
    _PREPARED[prefix] = (descriptor, wanted)
    return prefix


def _repair_reason(files: Iterable[str], *, recorded: Optional[dict], wanted: dict,
                   complete: bool) -> Optional[str]:
    """Why the files under a prefix cannot be used for `wanted`, or None if they can."""
    files = list(files)
    if not files:
        return None
    if any(path.endswith(".lockfile") or ".tempstate" in path for path in files):
        return "was left half written by an interrupted run"
    if recorded is None:
        return ("holds cache files with no record of the data they were built from "
                "(another program or an older tfaccel wrote them)")
    if recorded != wanted:
        changed = ", ".join(_changed_keys(recorded, wanted))
        return f"was built from other data or settings (changed: {changed})"
    if not complete:
        return "is incomplete (no index file)"
    return None


def files_digest(paths: Iterable[str]) -> str:
    """A short digest of files' names, sizes and modification times (not their contents)."""
    digest = hashlib.sha256()
    count = 0
    for path in sorted(paths):
        try:
            stat = os.stat(path)
        except FileNotFoundError:
            continue
        digest.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
        count += 1
    return f"{count} files, {digest.hexdigest()[:16]}"


def forget_prepared() -> None:
    """Releases every cache this process prepared (tests play a new process with it)."""
    for descriptor, _ in _PREPARED.values():
        try:
            os.close(descriptor)
        except OSError:
            pass
    _PREPARED.clear()
