"""THE rule of writing a file or a folder atomically: all of it appears, or none of it.

A reader (or the next run after a crash or a power cut) sees either the old content or the
complete new one, never half: the new content is written under a hidden temporary name in
the same folder, flushed to disk (fsync of the data), renamed over the final name in one
step, and the folder entry is flushed too (fsync of the folder), so the rename itself
survives a power cut. On any error the temporary name is removed and the old file or
folder is left as it was.

Stdlib only, at the bottom of the layers: training (run files, checkpoints), data (the
file cache's fingerprint) and tools (export) all write through it.
"""

from __future__ import annotations

import errno
import os
import shutil
import uuid
from pathlib import Path
from typing import Callable, TypeVar, Union

T = TypeVar("T")


def write_file(path: Union[str, os.PathLike], data: Union[str, bytes]) -> None:
    """Writes `data` to `path` atomically (temporary name, fsync, rename, fsync of the folder).

    Args:
        path: The file to create or replace; its folder must exist.
        data: Text (written as UTF-8) or bytes.

    Raises:
        OSError: The write failed; `path` still holds its old content (or does not exist)
            and no temporary file is left.
    """
    path = Path(path)
    # The process id keeps two processes writing the same file (workers sharing a cache
    # folder) from writing into one temporary file.
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    mode = "w" if isinstance(data, str) else "wb"
    encoding = "utf-8" if isinstance(data, str) else None
    try:
        with open(temporary, mode, encoding=encoding) as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        _remove(temporary)
        raise
    fsync_folder(path.parent)


def write_folder(target: Union[str, os.PathLike], *, write: Callable[[Path], T],
                 staging_prefix: str = "", replace: bool = False) -> T:
    """Creates the folder `target` atomically: `write` fills a hidden folder beside it first.

    Args:
        target: The folder to create.
        write: ``fn(folder)`` writing the content into `folder` (the staging folder); its
            return value is returned.
        staging_prefix: Name prefix of the staging folder (see `new_staging_folder`).
        replace: Replace an existing `target` (the same content written again); without it
            an existing `target` is an error and is left untouched.

    Returns:
        What `write` returned.

    Raises:
        OSError: Writing or renaming failed (FileExistsError: `target` exists and
            `replace` is False); `target` is left as it was and the staging folder is
            removed. Whatever `write` raises propagates the same way.
    """
    target = Path(target)
    staging = new_staging_folder(target, prefix=staging_prefix)
    try:
        result = write(staging)
        publish_folder(staging, target, replace=replace)
    finally:
        _remove(staging)  # gone already after a successful rename
    return result


def new_staging_folder(target: Union[str, os.PathLike], *, prefix: str = "") -> Path:
    """A new, empty, hidden folder beside `target` to write its content into.

    Named ``<prefix><pid>-<random>`` (by default ``.<target name>.partial-<pid>-<random>``),
    so concurrent writers never share one; created with the ordinary permissions (umask),
    as `target` will have them. The parent folder is created when missing.

    Raises:
        OSError: The folder cannot be created (e.g. the parent is not writable).
    """
    target = Path(target)
    prefix = prefix or f".{target.name}.partial-"
    target.parent.mkdir(parents=True, exist_ok=True)
    while True:
        staging = target.parent / f"{prefix}{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            staging.mkdir()
            return staging
        except FileExistsError:  # practically never: another random suffix
            continue


def publish_folder(staging: Union[str, os.PathLike], target: Union[str, os.PathLike], *,
                   replace: bool = False) -> None:
    """Renames a fully written `staging` folder to `target` in one step, durably.

    Every file and folder under `staging` is flushed to disk first, then the rename, then
    the parent folder's entry.

    Args:
        staging: A folder beside `target` (same file system), e.g. `new_staging_folder`'s.
        target: The final name.
        replace: Replace an existing `target` (it is removed once the new one is in
            place, and put back if the new one cannot be); without it an existing
            `target` is an error (FileExistsError) and is left untouched.

    Raises:
        OSError: Flushing or renaming failed; `target` is as it was and `staging` is left
            for the caller to remove.
    """
    staging, target = Path(staging), Path(target)
    fsync_tree(staging)
    if not target.exists():
        # os.rename, not os.replace: a folder cannot replace another one in one step.
        os.rename(staging, target)
        fsync_folder(target.parent)
        return
    if not replace:
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(target))
    # The old folder steps aside (under the staging folder's name, so whatever cleans up
    # staging folders after a crash finds it too) and comes back if the new one cannot
    # take its place: a failure never loses it.
    old = staging.with_name(staging.name + ".replaced")
    os.rename(target, old)
    try:
        os.rename(staging, target)
    except BaseException:
        os.rename(old, target)
        raise
    fsync_folder(target.parent)
    shutil.rmtree(old, ignore_errors=True)


def fsync_tree(folder: Union[str, os.PathLike]) -> None:
    """Flushes every file under `folder` to disk, then every folder's entries, innermost first."""
    for root, _, files in os.walk(folder, topdown=False):
        for name in files:
            with open(os.path.join(root, name), "rb") as stream:
                os.fsync(stream.fileno())
        fsync_folder(root)


def fsync_folder(folder: Union[str, os.PathLike]) -> None:
    """Flushes a folder's entries (a rename or new file in it) to disk.

    A no-op where folders cannot be opened (Windows): there a rename is flushed by the
    file system itself.
    """
    try:
        fd = os.open(folder, os.O_RDONLY)
    except (PermissionError, IsADirectoryError):
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            path.unlink()
        except FileNotFoundError:
            pass
