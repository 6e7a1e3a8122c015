"""Tests of data.listing_cache: saved check results, reused only for unchanged files."""

import json
import os

import pytest
import tensorflow as tf

from tfaccel.data import listing_cache
from tfaccel.data.sources import image_folder


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A cache folder of the test's own; every folder saved, files trusted at once."""
    where = tmp_path / "listings"
    monkeypatch.setenv(listing_cache.ENV, str(where))
    monkeypatch.setattr(listing_cache, "MIN_FILES", 0)
    monkeypatch.setattr(listing_cache, "RACY_NS", 0)
    return where


class Counting:
    """A check that records which files it read."""

    def __init__(self):
        self.read = []

    def __call__(self, path):
        self.read.append(os.path.basename(path))
        with open(path, "rb") as stream:
            return stream.read() != b"bad" and len(stream.name)


def _files(root, names, content=b"good"):
    root.mkdir(exist_ok=True)
    for name in names:
        (root / name).write_bytes(content)
    return [str(root / n) for n in sorted(os.listdir(root))]


def test_unchanged_files_are_not_read_again(tmp_path, cache):
    paths = _files(tmp_path / "f", ["a", "b", "c"])
    first, second = Counting(), Counting()
    results = listing_cache.checked(str(tmp_path / "f"), paths, check=first, name="n")
    assert first.read == ["a", "b", "c"]
    assert listing_cache.checked(str(tmp_path / "f"), paths, check=second,
                                 name="n") == results
    assert second.read == []
    assert len(os.listdir(cache)) == 1


def test_an_added_removed_or_rewritten_file_is_checked_again_alone(tmp_path, cache):
    root = tmp_path / "f"
    paths = _files(root, ["a", "b", "c"])
    listing_cache.checked(str(root), paths, check=Counting(), name="n")
    (root / "d").write_bytes(b"good")  # added
    os.remove(root / "a")  # removed
    stat = os.stat(root / "b")
    (root / "b").write_bytes(b"bad!")  # rewritten in place, same size, time set back
    os.utime(root / "b", ns=(stat.st_atime_ns, stat.st_mtime_ns))
    paths = [str(root / n) for n in ("b", "c", "d")]
    again = Counting()
    results = listing_cache.checked(str(root), paths, check=again, name="n")
    assert again.read == ["b", "d"]
    assert results == [Counting()(p) for p in paths]


def test_a_file_replaced_by_another_is_checked_again(tmp_path, cache):
    root = tmp_path / "f"
    paths = _files(root, ["a", "b"])
    listing_cache.checked(str(root), paths, check=Counting(), name="n")
    (tmp_path / "new").write_bytes(b"bad")
    os.replace(tmp_path / "new", root / "a")  # renamed over it: another inode
    again = Counting()
    assert listing_cache.checked(str(root), paths, check=again, name="n") == [False,
                                                                                Counting()(paths[1])]
    assert again.read == ["a"]


def test_files_changed_just_before_the_listing_are_not_trusted(tmp_path, cache,
                                                               monkeypatch):
    # Within a file system's time tick a second change could keep the same times.
    monkeypatch.setattr(listing_cache, "RACY_NS", 3_000_000_000)
    root = tmp_path / "f"
    paths = _files(root, ["a", "b"])
    old = 1_000_000_000_000_000_000  # 2001: long before the listing
    os.utime(paths[0], ns=(old, old))  # (its change time is still now: not trusted)
    listing_cache.checked(str(root), paths, check=Counting(), name="n")
    again = Counting()
    listing_cache.checked(str(root), paths, check=again, name="n")
    assert again.read == ["a", "b"]


def test_another_check_a_switched_off_or_unwritable_cache_reads_every_file(
        tmp_path, cache, monkeypatch):
    root = tmp_path / "f"
    paths = _files(root, ["a", "b"])
    listing_cache.checked(str(root), paths, check=Counting(), name="n")
    other = Counting()
    listing_cache.checked(str(root), paths, check=other, name="n, v2")
    assert other.read == ["a", "b"]
    monkeypatch.setenv(listing_cache.ENV, "off")
    assert listing_cache.record_path(str(root), check="n") is None
    off = Counting()
    listing_cache.checked(str(root), paths, check=off, name="n")
    assert off.read == ["a", "b"]
    blocked = tmp_path / "file"
    blocked.write_text("a file where the cache folder should be")
    monkeypatch.setenv(listing_cache.ENV, str(blocked / "listings"))
    assert listing_cache.checked(str(root), paths, check=Counting(),
                                 name="n") == [Counting()(p) for p in paths]


def test_a_damaged_record_is_ignored(tmp_path, cache):
    root = tmp_path / "f"
    paths = _files(root, ["a", "b"])
    listing_cache.checked(str(root), paths, check=Counting(), name="n")
    record = listing_cache.record_path(str(root), check="n")
    with open(record, encoding="utf-8") as stream:
        saved = json.load(stream)
    saved["results"] = saved["results"][:1]  # not one result per name
    with open(record, "w", encoding="utf-8") as stream:
        json.dump(saved, stream)
    again = Counting()
    listing_cache.checked(str(root), paths, check=again, name="n")
    assert again.read == ["a", "b"]
    with open(record, "w", encoding="utf-8") as stream:
        stream.write("{half")
    assert listing_cache.checked(str(root), paths, check=Counting(),
                                 name="n") == [Counting()(p) for p in paths]


def test_small_folders_are_not_saved_by_default(tmp_path, monkeypatch):
    monkeypatch.setenv(listing_cache.ENV, str(tmp_path / "listings"))
    paths = _files(tmp_path / "f", ["a", "b"])
    listing_cache.checked(str(tmp_path / "f"), paths, check=Counting(), name="n")
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
