"""What data a run read: its input paths' fingerprint, recorded in the run directory (no TF)."""

from __future__ import annotations

import glob
import hashlib
import json
import os
from pathlib import Path
from typing import Optional

from tfaccel import python_refs
from tfaccel.config import sources
from tfaccel.config.input_paths import is_remote
from tfaccel.training.run_dir import run_files

SOURCE_FILE = "data_source.json"
# What the digest covers, said beside it: cheap (a listing and a stat per file, the files
# are not read), so a changed, added, removed or rewritten file changes it, a copy to
# another place with the same times does not.
HOW = ("sha256 over each input file's name (relative to the folder), size and modification "
       "time; the files are not read")


def describe(data) -> dict:
    """The data section's source and a fingerprint of each input path it names.

    Args:
        data: The recipe's `DataConfig` (paths resolved against the recipe's folder).

    Returns:
        ``{"source": ..., "paths": {"data.path": {"path", "files", "bytes", "sha256"},
        ...}, "how": ...}``; a remote path (``gs://``) or a registered dataset (builtin,
        tfds) has no digest: its name and settings are the recipe's.
    """
    entry = sources.entry(data.source)
    paths = {}
    for key, kind in sources.path_keys(entry):
        value = getattr(data, key)
        if not value:
            continue
        paths[f"data.{key}"] = _fingerprint(str(value), kind)
    return {"source": data.source, "paths": paths, "how": HOW}


def _fingerprint(path: str, kind: str) -> dict:
    if is_remote(path):
        return {"path": path, "sha256": None}
    if kind == "callable":  # a python source: its module file's content
        file = python_refs.locate(path, key="data.path")
        return {"path": path, "file": file,
                "sha256": python_refs.file_sha256(file) if file else None}
    if kind == "folder":
        files = _folder_files(str(Path(path)))
    else:
        names = sorted(glob.glob(path)) if kind == "glob" else (
            [path] if os.path.isfile(path) else [])
        files = [(os.path.basename(name), os.stat(name)) for name in names]
    digest, total = hashlib.sha256(), 0
    for name, stat in files:
        total += stat.st_size
        digest.update(json.dumps([name, stat.st_size, stat.st_mtime_ns]).encode() + b"\n")
    return {"path": path, "files": len(files), "bytes": total, "sha256": digest.hexdigest()}


def _folder_files(root: str) -> list:
    """``(name relative to root, stat)`` of every file under `root`, sorted: the files
    ``sorted(p for p in Path(root).rglob("*") if p.is_file())`` lists (a symlink to a file
    counts, a symlinked folder is not entered), with one stat a file instead of two and no
    Path objects or relpath calls (6,000 PNGs: 0.43 s -> 0.23 s, a loaded 2-core CPU)."""
    prefix = len(root if root.endswith(os.sep) else root + os.sep)
    found, folders = [], [root]
    while folders:
        try:
            entries = list(os.scandir(folders.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir() and not entry.is_symlink():
                    folders.append(entry.path)
                elif entry.is_file():
                    found.append((entry.path[prefix:], entry.stat()))
            except OSError:  # gone meanwhile: rglob's is_file() said False too
                continue
    return sorted(found, key=lambda item: item[0])


def record(directory: Path, data) -> None:
    """Writes the data's description (`describe`) to the run directory's data_source.json."""
    run_files.write_json(Path(directory) / SOURCE_FILE, describe(data))


def read(directory: Path) -> Optional[dict]:
    """A run's recorded data source, or None (a run from before it was recorded)."""
    try:
        return json.loads((Path(directory) / SOURCE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
