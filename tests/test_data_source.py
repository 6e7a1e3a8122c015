"""training/run_dir/data_source.py: a run's input paths' fingerprint (listing, sizes, times)."""

import os

from tfaccel.config.recipe import recipe_from_dict
from tfaccel.training.run_dir import data_source

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


def _data(path, source="image_folder"):
    return recipe_from_dict({"data": {"source": source, "path": str(path),
                                      "image_size": [8, 8]}}).data


def test_a_folder_changes_its_fingerprint_when_a_file_is_added_resized_or_touched(tmp_path):
    folder = tmp_path / "photos"
    for cls in ("cat", "dog"):
        (folder / cls).mkdir(parents=True)
        (folder / cls / "1.png").write_bytes(b"x" * 10)
    first = data_source.describe(_data(folder))["paths"]["data.path"]
    assert (first["files"], first["bytes"]) == (2, 20)
    assert data_source.describe(_data(folder))["paths"]["data.path"] == first  # stable
    (folder / "dog" / "2.png").write_bytes(b"y")
    added = data_source.describe(_data(folder))["paths"]["data.path"]
    assert (added["files"], added["bytes"]) == (3, 21) and added["sha256"] != first["sha256"]
    stat = os.stat(folder / "dog" / "2.png")
    os.utime(folder / "dog" / "2.png", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    touched = data_source.describe(_data(folder))["paths"]["data.path"]
    assert touched["files"] == 3 and touched["sha256"] != added["sha256"]


def test_a_registered_dataset_has_no_paths_and_the_record_round_trips(tmp_path):
    builtin = recipe_from_dict({}).data
    assert data_source.describe(builtin) == {"source": "builtin", "paths": {},
                                             "how": data_source.HOW}
    data_source.record(tmp_path, builtin)
    assert data_source.read(tmp_path)["source"] == "builtin"
    assert data_source.read(tmp_path / "missing") is None


def _rglob_digest(root):
    """The fingerprint's definition as first written (Path.rglob), to compare with."""
    import hashlib
    import json
    from pathlib import Path

    files = sorted(str(p) for p in Path(root).rglob("*") if p.is_file())
    digest = hashlib.sha256()
    for file in files:
        stat = os.stat(file)
        name = os.path.relpath(file, root)
        digest.update(json.dumps([name, stat.st_size, stat.st_mtime_ns]).encode() + b"\n")
    return len(files), digest.hexdigest()


def test_the_folder_walk_lists_what_rglob_lists(tmp_path, monkeypatch):
    # Kept equal to the digest of older runs (tfaccel compare reads both): nested folders,
    # a hidden file, a symlink to a file (counted), a symlinked folder (not entered), a
    # broken symlink (not a file), names that sort differently as paths and as parts.
    folder = tmp_path / "photos"
    (folder / "a" / "deep").mkdir(parents=True)
    (folder / "a-b").mkdir()
    (folder / "a" / "1.png").write_bytes(b"x")
    (folder / "a" / "deep" / "2.png").write_bytes(b"yy")
    (folder / "a-b" / "3.png").write_bytes(b"zzz")
    (folder / ".hidden").write_bytes(b"h")
    (folder / "link.png").symlink_to(folder / "a" / "1.png")
    (folder / "linked_dir").symlink_to(folder / "a", target_is_directory=True)
    (folder / "broken.png").symlink_to(tmp_path / "missing.png")
    found = data_source.describe(_data(folder))["paths"]["data.path"]
    assert (found["files"], found["sha256"]) == _rglob_digest(folder) and found["files"] == 5
    monkeypatch.chdir(folder)  # a relative path, and "."
    for relative in (".", "./", "../photos"):
        found = data_source.describe(_data(relative))["paths"]["data.path"]
        assert (found["files"], found["sha256"]) == _rglob_digest(relative), relative
