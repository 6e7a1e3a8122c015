"""training/data_source.py: the fingerprint of a run's input paths (listing, sizes, times)."""

import os

from tfaccel.config.recipe import recipe_from_dict
from tfaccel.training import data_source

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
