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
from tfaccel.training import run_files

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
        root = Path(path)
        files = sorted(str(p) for p in root.rglob("*") if p.is_file())
    elif kind == "glob":
        root, files = None, sorted(glob.glob(path))
    else:
        root, files = None, [path] if os.path.isfile(path) else []
    digest, total = hashlib.sha256(), 0
    for file in files:
        stat = os.stat(file)
        total += stat.st_size
        name = os.path.relpath(file, root) if root is not None else os.path.basename(file)
        digest.update(json.dumps([name, stat.st_size, stat.st_mtime_ns]).encode() + b"\n")
    return {"path": path, "files": len(files), "bytes": total, "sha256": digest.hexdigest()}


def record(directory: Path, data) -> None:
    """Writes the data's description (`describe`) to the run directory's data_source.json."""
    run_files.write_json(Path(directory) / SOURCE_FILE, describe(data))


def read(directory: Path) -> Optional[dict]:
    """A run's recorded data source, or None (a run from before it was recorded)."""
    try:
        return json.loads((Path(directory) / SOURCE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
