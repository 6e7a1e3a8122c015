"""Tests of data.listing_cache: saved check results, reused only for unchanged files."""

import json
import os

import pytest
import tensorflow as tf

from tfaccel.data import listing_cache
from tfaccel.data.sources import image_folder

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


@pytest.fixture
def cache(saved_listings):
    """A cache folder of the test's own (conftest's `saved_listings`)."""
    return saved_listings


class Counting:
    """A check that records which files it read."""

    def __init__(self):
        self.read = []

    def __call__(self, path):
        self.read.append(os.path.basename(path))
        with open(path, "rb") as stream:
            return not stream.read().startswith(b"bad") and f"read {len(path)}"


def _files(root, names, content=b"good"):
    root.mkdir(exist_ok=True)
    for name in names:
        (root / name).write_bytes(content)
    return [str(root / n) for n in sorted(os.listdir(root))]


def _checked(root, paths, check, name="n"):
    """`listing_cache.checked` over files grouped by their folder (as a listing walks)."""
    spans, start = [], 0
    for i in range(1, len(paths) + 1):
        if i == len(paths) or os.path.dirname(paths[i]) != os.path.dirname(paths[start]):
            spans.append((start, i))
            start = i
    return listing_cache.checked(str(root), paths, folders=spans, check=check, name=name)


def test_unchanged_files_are_not_read_again(tmp_path, cache):
    paths = _files(tmp_path / "f", ["a", "b", "c"])
    first, second = Counting(), Counting()
    results = _checked(tmp_path / "f", paths, first, "n")
    assert first.read == ["a", "b", "c"]
    assert _checked(tmp_path / "f", paths, second, "n") == results
    assert second.read == []
    assert len(os.listdir(cache)) == 1


def test_a_folder_with_a_file_added_removed_or_rewritten_is_checked_again_alone(tmp_path,
                                                                                cache):
    root = tmp_path / "f"
    root.mkdir()
    same = _files(root / "same", ["x", "y"])
    for change in ("add", "remove", "rewrite"):
        changed = _files(root / change, ["a", "b", "c"])
        _checked(root, same + changed, Counting())
    (root / "add" / "d").write_bytes(b"good")
    os.remove(root / "remove" / "a")
    stat = os.stat(root / "rewrite" / "b")
    (root / "rewrite" / "b").write_bytes(b"bad!")  # in place, same size, time set back
    os.utime(root / "rewrite" / "b", ns=(stat.st_atime_ns, stat.st_mtime_ns))
    for change, expected in (("add", ["a", "b", "c", "d"]), ("remove", ["b", "c"]),
                             ("rewrite", ["a", "b", "c"])):
        changed = [str(root / change / n) for n in sorted(os.listdir(root / change))]
        again = Counting()
        results = _checked(root, same + changed, again)
        assert again.read == expected, change  # "same" is not read again
        assert results == [Counting()(p) for p in same + changed]
    assert results[3] is False  # the rewritten file is found unusable


def test_a_file_replaced_by_another_is_checked_again(tmp_path, cache):
    root = tmp_path / "f"
    paths = _files(root, ["a", "b"])
    _checked(root, paths, Counting())
    (tmp_path / "new").write_bytes(b"bad")
    os.replace(tmp_path / "new", root / "a")  # renamed over it: another inode
    again = Counting()
    assert _checked(root, paths, again) == [False, Counting()(paths[1])]
    assert again.read == ["a", "b"]


def test_files_changed_just_before_the_listing_are_not_trusted(tmp_path, cache,
                                                               monkeypatch):
    # Within a file system's time tick a second change could keep the same times.
    monkeypatch.setattr(listing_cache, "RACY_NS", 3_000_000_000)
    root = tmp_path / "f"
    paths = _files(root, ["a", "b"])
    old = 1_000_000_000_000_000_000  # 2001: long before the listing
    os.utime(paths[0], ns=(old, old))  # (its change time is still now: not trusted)
    _checked(root, paths, Counting(), "n")
    again = Counting()
    _checked(root, paths, again, "n")
    assert again.read == ["a", "b"]


def test_another_check_a_switched_off_or_unwritable_cache_reads_every_file(
        tmp_path, cache, monkeypatch):
    root = tmp_path / "f"
    paths = _files(root, ["a", "b"])
    _checked(root, paths, Counting(), "n")
    other = Counting()
    _checked(root, paths, other, "n, v2")
    assert other.read == ["a", "b"]
    monkeypatch.setenv(listing_cache.ENV, "off")
    assert listing_cache.record_path(str(root), check="n") is None
    off = Counting()
    _checked(root, paths, off, "n")
    assert off.read == ["a", "b"]
    blocked = tmp_path / "file"
    blocked.write_text("a file where the cache folder should be")
    monkeypatch.setenv(listing_cache.ENV, str(blocked / "listings"))
    assert _checked(root, paths, Counting(), "n") == [Counting()(p) for p in paths]


def test_a_damaged_record_is_ignored(tmp_path, cache):
    root = tmp_path / "f"
    paths = _files(root, ["a", "b"])
    _checked(root, paths, Counting())
    record = listing_cache.record_path(str(root), check="n")
    with open(record, encoding="utf-8") as stream:
        saved = json.load(stream)
    (entry,) = saved["folders"].values()
    entry[1] = entry[1].split("\n")[0]  # one result for two files
    with open(record, "w", encoding="utf-8") as stream:
        json.dump(saved, stream)
    again = Counting()
    assert _checked(root, paths, again) == [Counting()(p) for p in paths]
    assert again.read == ["a", "b"]
    (key,) = saved["folders"]
    for damage in ("{half", '{"version": 1, "check": "n", "folders": [1]}',
                   json.dumps({**saved, "folders": {key: [entry[0], 7]}})):
        with open(record, "w", encoding="utf-8") as stream:
            stream.write(damage)
        assert _checked(root, paths, Counting()) == [Counting()(p) for p in paths]


def test_small_folders_are_not_saved_by_default(tmp_path, monkeypatch):
    monkeypatch.setenv(listing_cache.ENV, str(tmp_path / "listings"))
    paths = _files(tmp_path / "f", ["a", "b"])
    _checked(tmp_path / "f", paths, Counting(), "n")
    assert not (tmp_path / "listings").exists()


def _jpeg(value=100):
    return tf.io.encode_jpeg(tf.fill([6, 5, 3], tf.constant(value, tf.uint8))).numpy()


def test_an_image_corrupted_after_a_saved_listing_is_still_named(tmp_path, cache):
    # The saved listing must not hide a file that became unreadable since.
    for label in ("cat", "dog"):
        (tmp_path / "imgs" / label).mkdir(parents=True)
        for i in range(3):
            (tmp_path / "imgs" / label / f"{i}.jpg").write_bytes(_jpeg(40 * i))
    root = str(tmp_path / "imgs")
    first = image_folder.list_image_folder(root)
    assert first.skipped == [] and first.results[0] == "6x5"
    good = (tmp_path / "imgs" / "dog" / "1.jpg").read_bytes()
    (tmp_path / "imgs" / "dog" / "1.jpg").write_bytes(good[:len(good) // 2])
    again = image_folder.list_image_folder(root)
    assert again.skipped == [os.path.join(root, "dog", "1.jpg")]
    assert again.paths == first.paths and again.results[4] is False
    reused = image_folder.list_image_folder(root)  # the saved record says it too
    assert reused.skipped == again.skipped and reused.results == again.results
