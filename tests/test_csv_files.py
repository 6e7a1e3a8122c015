"""THE CSV reader (tfaccel/reading/csv_files.py): delimiter, BOM, CRLF, quotes, header, blank lines."""

import gzip

import pytest

from tfaccel.errors import DataError
from tfaccel.reading import csv_files

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


def _file(tmp_path, text, name="t.csv", *, raw=None):
    path = tmp_path / name
    path.write_bytes(raw if raw is not None else text.encode())
    return str(path)


@pytest.mark.parametrize("delimiter", [",", ";", "\t", "|"])
def test_the_delimiter_is_detected_among_the_four(tmp_path, delimiter):
    rows = ["species,island,mass", "Adelie,Dream,3750.5", "Gentoo,Biscoe,5000",
            "Adelie,Torgersen,3400"]
    path = _file(tmp_path, "\n".join(r.replace(",", delimiter) for r in rows) + "\n")
    assert csv_files.detect_delimiter(path) == delimiter
    names, lines, values = csv_files.read_columns(path)
    assert names == ["species", "island", "mass"]
    assert lines == [2, 3, 4] and values[1] == ["Gentoo", "Biscoe", "5000"]


def test_a_decimal_comma_file_with_semicolons_is_read_as_semicolons(tmp_path):
    path = _file(tmp_path, "a;b;c\n1,5;2,25;x\n3,5;4,0;y\n")
    assert csv_files.detect_delimiter(path) == ";"


def test_a_given_delimiter_wins_and_a_wrong_one_is_named(tmp_path):
    path = _file(tmp_path, "species;island;mass\nAdelie;Dream;3750\n")
    assert csv_files.detect_delimiter(path, delimiter=";") == ";"
    with pytest.raises(DataError, match=r"reads as one column 'species;island;mass' with the "
                       r"delimiter ','.*semicolons\. Set data\.table\.delimiter: semicolon"):
        csv_files.header(path, delimiter=",")


def test_bom_crlf_quotes_spaces_and_blank_lines_are_one_rule(tmp_path):
    text = ('\ufeff name , note ,value\r\n\r\nAdelie,"Dream, north",1\r\n'
            '   \r\nGentoo,"say ""hi""",2\r\n\r\n\r\n')
    path = _file(tmp_path, text)
    assert csv_files.detect_delimiter(path) == ","
    names, lines, values = csv_files.read_columns(path)
    assert names == ["name", "note", "value"]  # BOM dropped, spaces stripped
    assert lines == [3, 5]  # blank lines (and the spaces-only one) are no rows
    assert values == [["Adelie", "Dream, north", "1"], ["Gentoo", 'say "hi"', "2"]]


def test_a_line_of_empty_fields_is_a_row_of_missing_values(tmp_path):
    path = _file(tmp_path, "a,b\n1,2\n,\n")
    assert csv_files.read_columns(path)[2] == [["1", "2"], ["", ""]]


def test_a_ragged_row_is_named_by_line(tmp_path):
    path = _file(tmp_path, "a,b\n1,2\n\n3,4,5\n")
    with pytest.raises(DataError, match=r"line 4 has 3 field\(s\) where the header has 2"):
        csv_files.read_columns(path)


def test_bytes_that_are_not_utf8_are_named_with_file_and_line(tmp_path):
    raw = "a,b\n1,x\n2,y\n".encode() + "3,caf\u00e9\n".encode("latin-1")
    path = _file(tmp_path, "", raw=raw)
    with pytest.raises(DataError, match=r"t\.csv', line 4: bytes that are not utf-8"):
        list(csv_files.rows(path, delimiter=","))


def test_a_gzip_file_reads_like_the_plain_one(tmp_path):
    path = tmp_path / "t.csv.gz"
    with gzip.open(path, "wt") as handle:
        handle.write("a;b\n1;2\n")
    assert csv_files.read_columns(str(path)) == (["a", "b"], [2], [["1", "2"]])


def test_empty_files_and_repeated_names_are_refused(tmp_path):
    with pytest.raises(DataError, match="is empty: it has no header row"):
        csv_files.read_columns(_file(tmp_path, "\n  \n"))
    with pytest.raises(DataError, match=r"repeats the name\(s\) \['a'\]"):
        csv_files.read_columns(_file(tmp_path, "a, a ,b\n1,2,3\n", "r.csv"))


def test_a_quoted_line_break_is_refused_where_rows_are_lines(tmp_path):
    path = _file(tmp_path, 'a,b\n1,"two\nlines"\n')
    assert list(csv_files.rows(path, delimiter=",")) == [(2, ["1", "two\nlines"])]
    with pytest.raises(DataError, match="lines 2-3: a quoted field spans lines"):
        list(csv_files.rows(path, delimiter=",", one_line=True))


@pytest.mark.parametrize("text, number, integer", [
    ("1", True, True), (" -2 ", True, True), ("+3.5", True, False), (".5", True, False),
    ("1e-3", True, False), ("nan", False, False), ("inf", False, False),
    ("1_000", False, False), ("12a", False, False), ("", False, False)])
def test_numbers_are_what_the_tf_conversion_parses(text, number, integer):
    assert csv_files.is_number(text) is number
    assert csv_files.is_integer(text) is integer


def test_missing_markers_and_delimiter_keys():
    assert csv_files.missing_markers(["-", " NA "])[-1] == "-"
    assert set(csv_files.NA_VALUES) <= set(csv_files.missing_markers())
    assert csv_files.delimiter_for("semicolon") == ";" and csv_files.delimiter_for(None) is None
    with pytest.raises(DataError, match="data.table.delimiter must be one of"):
        csv_files.delimiter_for("::")


def test_a_cut_gzip_file_is_named(tmp_path):
    packed = gzip.compress(b"a,b\n" + b"1,2\n" * 5000)
    path = _file(tmp_path, "", "t.csv.gz", raw=packed[:len(packed) // 2])
    with pytest.raises(DataError, match=r"t\.csv\.gz' is cut short or damaged"):
        csv_files.read_columns(path, delimiter=",")
    with pytest.raises(DataError, match=r"t\.csv\.gz' is cut short or damaged"):
        csv_files.read_columns(path)
