"""`tfaccel.data.text_files` and the text sources that read through it: BOM, compression,
truncation, encoding and empty files named, through the library and through `tfaccel train`."""

import gzip
import json
import zlib

import numpy as np
import pytest
from guard_helpers import assert_refused, lines, run, table
from tf_free import heavy_modules_after

import tfaccel.data as data
from tfaccel.data import text_files
from tfaccel.errors import DataError

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)

BOM = "\ufeff"


def test_compression_is_the_declared_one_else_the_extension():
    assert text_files.compression_of("a.tsv.gz") == "GZIP"
    assert text_files.compression_of("a.TSV.ZZ") == "ZLIB"
    assert text_files.compression_of("a.tsv") is None
    assert text_files.compression_of("a.tsv", "ZLIB") == "ZLIB"


@pytest.mark.parametrize("compression, compress", [("GZIP", gzip.compress),
                                                   ("ZLIB", zlib.compress)])
def test_whole_streams_read_and_cut_short_ones_are_named(tmp_path, compression, compress):
    text = "".join(f"line {i}\n" for i in range(3000)).encode()
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    whole.write_bytes(compress(text))
    cut.write_bytes(compress(text)[:len(compress(text)) // 2])
    assert text_files.read_bytes(whole, compression=compression) == text
    with text_files.open_text(whole, compression=compression) as handle:
        assert sum(1 for _ in handle) == 3000
    message = f"Text file {str(cut)!r} is cut short: its {compression} stream ends before"
    with pytest.raises(DataError, match="^" + message.replace("(", r"\(")):
        text_files.read_bytes(cut, compression=compression)
    with pytest.raises(DataError, match="cut short"):
        with text_files.open_text(cut, compression=compression) as handle:
            handle.read()


def test_decode_drops_a_bom_and_names_the_undecodable_line(tmp_path):
    assert text_files.decode((BOM + "a\nb\n").encode(), path="f") == "a\nb\n"
    with pytest.raises(text_files.NotText,
                       match=r"^Text file 'f' is not utf-8 text: line 3 holds b'\\xe9'"):
        text_files.decode("a\nb\ncaf\xe9\n".encode("latin-1"), path="f")
    assert text_files.decode("caf\xe9".encode("latin-1"), path="f",
                             encoding="latin-1") == "caf\xe9"


# --- text_lines ---------------------------------------------------------------------------


def _gzip_with_bom(path, n=40):
    path.write_bytes(gzip.compress((BOM + lines(n)).encode()))
    return path


def test_text_lines_drops_a_bom_and_reads_gzip_by_its_extension(tmp_path):
    path = _gzip_with_bom(tmp_path / "a.tsv.gz")
    ds = data.from_text_lines(str(path), labels="first_field", batch_size=None,
                              shuffle=False)
    assert ds.class_names == ["neg", "pos"] and ds.num_examples == 40
    first = next(iter(ds.as_numpy_iterator()))
    assert first == (b"bad dull 0", 0)


def test_a_text_lines_recipe_reads_data_compression_and_drops_the_bom(tmp_path):
    # A valid .tsv.gz with a BOM: data.compression was ignored (refused as "not UTF-8
    # text"), and the BOM made a third class '\ufeffneg'.
    (tmp_path / "d").mkdir()
    for i in range(2):
        _gzip_with_bom(tmp_path / "d" / f"p{i}.tsv.gz")
    result = run(tmp_path, source="text_lines", path=str(tmp_path / "d" / "*.tsv.gz"),
                 compression="GZIP", validation_fraction=0.5)
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["class_names"] == ["neg", "pos"]
    assert summary["dataset"]["train_examples"] == 40
    assert summary["dataset"]["validation_examples"] == 40


def _cut_gzip(tmp_path):
    whole = gzip.compress(lines(3000).encode())
    path = tmp_path / "cut.tsv.gz"
    path.write_bytes(whole[:len(whole) // 2])
    return path


def _empty(tmp_path):
    path = tmp_path / "empty.tsv"
    path.write_text("")
    return path


@pytest.mark.parametrize("make, message", [
    (_cut_gzip, "is cut short: its GZIP stream ends before its end marker"),
    (_empty, "is empty: it needs at least one non-empty line"),
])
def test_text_lines_names_a_cut_short_or_empty_file(tmp_path, make, message):
    path = make(tmp_path)
    with pytest.raises(DataError, match=f"^Text file {str(path)!r} {message}"):
        data.from_text_lines(str(path), labels="first_field", batch_size=8)
    assert_refused(run(tmp_path, source="text_lines", path=str(path)), str(path), message)


# --- timeseries and csv ----------------------------------------------------------------------


def test_a_latin1_time_series_csv_is_named_with_its_line(tmp_path):
    path = tmp_path / "latin.csv"
    path.write_bytes((table(30)[:-1] + "\n" + "caf\xe9,1,0\n").encode("latin-1"))
    message = f"Time series CSV file {str(path)!r} is not utf-8 text: line 32 holds"
    with pytest.raises(DataError, match="^" + message):
        data.from_timeseries_csv(str(path), sequence_length=3, targets="label")
    assert_refused(run(tmp_path, source="timeseries", path=str(path),
                       timeseries={"sequence_length": 3}), message, "re-encode it as UTF-8")


def test_a_gzip_time_series_csv_with_a_bom_is_read(tmp_path):
    path = tmp_path / "s.csv.gz"
    path.write_bytes(gzip.compress((BOM + table(10)).encode()))
    windows, targets = next(iter(data.from_timeseries_csv(
        str(path), sequence_length=2, targets="label", columns="y", batch_size=3)))
    np.testing.assert_array_equal(windows, [[0, 1], [1, 2], [2, 3]])
    np.testing.assert_array_equal(targets, [0, 1, 0])


def test_validate_refuses_zlib_for_csv_without_tensorflow(tmp_path):
    (tmp_path / "t.csv").write_text(table(8))
    result = run(tmp_path, command="validate", source="csv", path=str(tmp_path / "t.csv"),
                 compression="ZLIB")
    assert_refused(result, "data.compression 'ZLIB' is not read by data.source 'csv': it "
                           "takes GZIP (or empty).")
    body = (f"r = CliRunner().invoke(main, ['validate', {str(tmp_path / 'guard.yaml')!r}])\n"
            "assert r.exit_code == 2, r.output")
    assert heavy_modules_after(body) == []


def test_csv_reads_a_gz_file_by_its_extension_and_names_a_cut_short_one(tmp_path):
    whole = gzip.compress((BOM + table(300)).encode())
    (tmp_path / "t.csv.gz").write_bytes(whole)
    ds = data.from_csv(str(tmp_path / "t.csv.gz"), batch_size=100, label_name="label",
                       shuffle_buffer=0)
    assert ds.num_examples == 300 and list(ds.column_types) == ["x", "y", "label"]
    assert [int(y[0]) for _, y in ds.as_numpy_iterator()] == [0, 0, 0]
    cut = tmp_path / "cut.csv.gz"
    cut.write_bytes(whole[:len(whole) // 2])
    for rows in (100, 1000):  # the cut met by TensorFlow's count, or by type inference
        with pytest.raises(DataError, match=f"^CSV file {str(cut)!r} is cut short"):
            data.from_csv(str(cut), batch_size=8, label_name="label",
                          num_rows_for_inference=rows)


# --- verify=False: TensorFlow's readers stop silently at a cut stream -----------------------


def _cut_at_a_line_end(text: str, keep_lines: int) -> bytes:
    """A GZIP file of `text` cut right after its first `keep_lines` lines: what is left
    inflates to whole lines, with no end marker (no reader meets a torn line)."""
    head = "".join(text.splitlines(keepends=True)[:keep_lines]).encode()
    packer = zlib.compressobj(wbits=31)  # 31: the gzip container
    return packer.compress(head) + packer.flush(zlib.Z_FULL_FLUSH)


def test_check_complete_names_a_cut_stream_and_passes_a_whole_one(tmp_path):
    whole, cut = tmp_path / "whole.gz", tmp_path / "cut.gz"
    whole.write_bytes(gzip.compress(lines(300).encode()))
    cut.write_bytes(_cut_at_a_line_end(lines(300), 100))
    text_files.check_complete(whole, compression="GZIP")
    text_files.check_complete(tmp_path / "missing-but-uncompressed", compression=None)
    with pytest.raises(DataError, match=f"^Text file {str(cut)!r} is cut short"):
        text_files.check_complete(cut, compression="GZIP")


def test_text_lines_without_verify_names_a_cut_gzip(tmp_path):
    # TextLineDataset yielded the 100 lines before the cut and said nothing.
    path = tmp_path / "cut.tsv.gz"
    path.write_bytes(_cut_at_a_line_end(lines(300), 100))
    with pytest.raises(DataError, match=f"^Text file {str(path)!r} is cut short"):
        data.from_text_lines(str(path), labels="first_field", class_names=["neg", "pos"],
                             verify=False, batch_size=8)


@pytest.mark.parametrize("verify", [True, False])
def test_csv_names_a_gzip_cut_at_a_row_boundary(tmp_path, verify):
    # CsvDataset read the 3,000 rows before the cut and said nothing, verify or not (the
    # type inference reads only the first 100 rows).
    path = tmp_path / "cut.csv.gz"
    path.write_bytes(_cut_at_a_line_end(table(6000), 3001))
    with pytest.raises(DataError, match=f"^CSV file {str(path)!r} is cut short"):
        data.from_csv(str(path), batch_size=8, label_name="label", verify=verify)
    assert_refused(run(tmp_path, source="csv", path=str(path), label_key="label",
                       verify_records=verify), str(path), "is cut short")


@pytest.mark.parametrize("content, message", [
    ("", "is empty: it has no header row"),
    ("x,y,label\n", "holds no rows, only headers"),
])
def test_csv_names_an_empty_or_header_only_file(tmp_path, content, message):
    path = tmp_path / "t.csv"
    path.write_text(content)
    with pytest.raises(DataError, match=message):
        data.from_csv(str(path), batch_size=8, label_name="label")
    assert_refused(run(tmp_path, source="csv", path=str(path), label_key="label"),
                   str(path), message)


def test_a_csv_recipe_drops_the_bom_before_its_label_column(tmp_path):
    # The label column first: with the BOM kept its name would be '\ufefflabel'.
    path = tmp_path / "t.csv"
    rows = "".join(f"{i % 2},{i * 0.5},{i}\n" for i in range(40))
    path.write_text(BOM + "label,x,y\n" + rows, encoding="utf-8")
    result = run(tmp_path, source="csv", path=str(path), label_key="label")
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["dataset"]["num_classes"] == 2
    assert summary["dataset"]["train_examples"] == 40
