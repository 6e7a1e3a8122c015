"""benchmarks/real_data/shared.py: the seeded splits and the table files every comparison reads."""

import hashlib
import importlib.util
from pathlib import Path

import numpy as np
import pytest

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("shared", ROOT / "benchmarks" / "real_data" /
                                               "shared.py")
shared = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(shared)


def test_the_stratified_split_holds_out_the_fraction_of_every_class():
    labels = ["b"] * 50 + ["a"] * 30 + ["c"] * 7
    train, test = shared.stratified_split(labels, 0.2, 0)
    assert sorted(np.concatenate([train, test]).tolist()) == list(range(87))
    assert not set(train.tolist()) & set(test.tolist())
    held = [labels[i] for i in test]
    assert (held.count("b"), held.count("a"), held.count("c")) == (10, 6, 1)  # round(1.4)
    assert list(test) == sorted(test) and list(train) == sorted(train)  # table order
    again = shared.stratified_split(labels, 0.2, 0)
    assert np.array_equal(again[1], test)  # seeded: the same rows every time
    assert not np.array_equal(shared.stratified_split(labels, 0.2, 1)[1], test)


def test_the_random_split_is_seeded_disjoint_and_complete():
    train, test = shared.random_split(442, 0.2, 0)
    assert (len(train), len(test)) == (354, 88)
    assert sorted(np.concatenate([train, test]).tolist()) == list(range(442))
    assert np.array_equal(shared.random_split(442, 0.2, 0)[1], test)


@pytest.mark.parametrize("value, text", [
    (1001.0, "1001"), (0.1184, "0.1184"), (float("nan"), "NA"), (None, "NA"), (3, "3"),
    (-2.5, "-2.5"), (1e-7, "1e-07"),
])
def test_number_text_reads_back_as_the_same_number(value, text):
    assert shared.number_text(value) == text
    if text != "NA":
        assert float(text) == float(value)


def test_write_table_split_writes_both_files_and_refuses_another_table(tmp_path, capsys):
    header, rows = ["x", "name", "y"], [["1", "a,b", "NA"], ["2", "", "0"], ["3", "c", "1"]]
    text = 'x,name,y\n1,"a,b",NA\n2,,0\n3,c,1\n'
    sha = hashlib.sha256(text.encode()).hexdigest()
    shared.write_table_split(header=header, rows=rows, split=([0, 2], [1]),
                             folder=str(tmp_path / "t"), sha256=sha,
                             describe=lambda idx: f"{len(idx)} chosen")
    assert (tmp_path / "t" / "train.csv").read_text() == 'x,name,y\n1,"a,b",NA\n3,c,1\n'
    assert (tmp_path / "t" / "test.csv").read_text() == "x,name,y\n2,,0\n"
    assert "1 rows; 1 chosen" in capsys.readouterr().out
    with pytest.raises(SystemExit) as stop:
        shared.write_table_split(header=header, rows=rows[:2], split=([0], [1]),
                                 folder=str(tmp_path / "u"), sha256=sha, describe=str)
    assert "expected " + sha in str(stop.value) and not (tmp_path / "u").exists()


def test_each_table_script_names_its_folder_and_a_sha256():
    # The recipes name these folders (data/real/<name>/train.csv and test.csv).
    for name in ("breast_cancer", "wine", "diabetes", "penguins", "movies", "diamonds"):
        source = (ROOT / "benchmarks" / "real_data" / f"prepare_{name}.py").read_text()
        assert f'NAME = "{name}"' in source
        assert len(source.split('\nSHA256 = "')[1].split('"')[0]) == 64
