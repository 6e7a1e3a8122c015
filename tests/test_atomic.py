"""tfaccel.atomic: a file or folder is replaced whole or not at all, with no temporary left."""

import os
import stat

import pytest

from tfaccel import atomic

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


class _Boom(OSError):
    pass


def test_write_file_replaces_the_content_and_leaves_only_the_file(tmp_path):
    path = tmp_path / "summary.json"
    atomic.write_file(path, "old\n")
    atomic.write_file(path, "new\n")
    atomic.write_file(tmp_path / "blob.bin", b"\x00\x01")
    assert path.read_text(encoding="utf-8") == "new\n"
    assert (tmp_path / "blob.bin").read_bytes() == b"\x00\x01"
    assert sorted(os.listdir(tmp_path)) == ["blob.bin", "summary.json"]


def test_a_failing_file_write_keeps_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "summary.json"
    path.write_text("old\n", encoding="utf-8")

    def full_disk(fd):
        raise _Boom(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "fsync", full_disk)
    with pytest.raises(_Boom):
        atomic.write_file(path, "new\n")
    assert path.read_text(encoding="utf-8") == "old\n"
    assert os.listdir(tmp_path) == ["summary.json"]


def test_a_failing_rename_keeps_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "f.txt"
    path.write_text("old", encoding="utf-8")
    monkeypatch.setattr(atomic.os, "replace", lambda a, b: (_ for _ in ()).throw(_Boom(5, "EIO")))
    with pytest.raises(_Boom):
        atomic.write_file(path, "new")
    assert path.read_text(encoding="utf-8") == "old"
    assert os.listdir(tmp_path) == ["f.txt"]


def test_write_file_flushes_the_data_and_the_folder_entry(tmp_path, monkeypatch):
    flushed = []
    real = os.fsync

    def record(fd):
        flushed.append(stat.S_ISDIR(os.fstat(fd).st_mode))
        real(fd)

    monkeypatch.setattr(atomic.os, "fsync", record)
    atomic.write_file(tmp_path / "f.txt", "x")
    assert flushed == [False, True]  # the file's data, then the folder's entry


def _fill(folder, text):
    (folder / "a.txt").write_text(text, encoding="utf-8")
    (folder / "sub").mkdir()
    (folder / "sub" / "b.txt").write_text(text * 2, encoding="utf-8")
    return text


def test_write_folder_publishes_everything_and_returns_what_write_returned(tmp_path):
    target = tmp_path / "out" / "export"
    assert atomic.write_folder(target, write=lambda f: _fill(f, "x")) == "x"
    assert (target / "a.txt").read_text(encoding="utf-8") == "x"
    assert (target / "sub" / "b.txt").read_text(encoding="utf-8") == "xx"
    assert os.listdir(tmp_path / "out") == ["export"]
    # Ordinary permissions (the umask's), like every other folder a run writes.
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o777 & ~umask


def test_write_folder_refuses_an_existing_target_unless_told_to_replace(tmp_path):
    target = tmp_path / "epoch-001"
    atomic.write_folder(target, write=lambda f: _fill(f, "old"))
    with pytest.raises(FileExistsError):
        atomic.write_folder(target, write=lambda f: _fill(f, "new"))
    assert (target / "a.txt").read_text(encoding="utf-8") == "old"
    atomic.write_folder(target, write=lambda f: _fill(f, "new"), replace=True)
    assert (target / "a.txt").read_text(encoding="utf-8") == "new"
    assert os.listdir(tmp_path) == ["epoch-001"]


@pytest.mark.parametrize("fails_in", ["write", "fsync", "rename"])
def test_a_failing_folder_write_keeps_the_old_folder_and_no_staging(tmp_path, monkeypatch,
                                                                     fails_in):
    target = tmp_path / "epoch-001"
    atomic.write_folder(target, write=lambda f: _fill(f, "old"))

    def write(folder):
        _fill(folder, "new")
        if fails_in == "write":
            raise _Boom(28, "No space left on device")

    def boom(*args):
        raise _Boom(5, "Input/output error")

    if fails_in == "fsync":
        monkeypatch.setattr(atomic.os, "fsync", boom)
    elif fails_in == "rename":
        real = os.rename

        def rename(source, destination):
            # The old folder steps aside, then the new one cannot take its place.
            if os.path.basename(source).startswith(".partial-") \
                    and not str(source).endswith(".replaced"):
                boom()
            real(source, destination)

        monkeypatch.setattr(atomic.os, "rename", rename)
    with pytest.raises(_Boom):
        atomic.write_folder(target, write=write, staging_prefix=".partial-epoch-001-",
                            replace=True)
    assert (target / "a.txt").read_text(encoding="utf-8") == "old"
    assert (target / "sub" / "b.txt").read_text(encoding="utf-8") == "oldold"
    assert os.listdir(tmp_path) == ["epoch-001"]


def test_staging_folders_are_hidden_beside_the_target_and_never_shared(tmp_path):
    target = tmp_path / "exports" / "litert-none"
    first = atomic.new_staging_folder(target)
    second = atomic.new_staging_folder(target)
    assert first != second and first.parent == second.parent == target.parent
    assert first.name.startswith(".litert-none.partial-")
    assert atomic.new_staging_folder(target, prefix=".partial-step-7-").name.startswith(
        ".partial-step-7-")
