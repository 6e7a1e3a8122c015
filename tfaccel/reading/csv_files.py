"""THE reading of a CSV file, TensorFlow-free: delimiter, BOM, CRLF, quotes, header, blank lines.

Every CSV source (`csv`, `timeseries`) and `tfaccel validate` read files through here, so a
file means one thing everywhere:

- the delimiter is one of ``,`` ``;`` TAB ``|``, detected by `csv.Sniffer` over the first
  64 KB (`detect_delimiter`) unless given (``data.table.delimiter``);
- a UTF-8 byte-order mark is dropped, CRLF and LF line ends are alike, double quotes
  quote fields (a quoted delimiter is part of the value), as RFC 4180;
- header names lose their surrounding spaces;
- a blank line (nothing but spaces) is no row, wherever it stands (`is_blank`); a line of
  empty fields (``,,``) is a row of missing values;
- a byte that is not of the encoding is named with the file and line.

Numbers and missing-value markers (`NA_VALUES`) are recognised here too (`is_number`,
`is_missing`), so the column plan (`table_plan`) and the tf.data conversion agree.
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import io
import os
import re
import zlib
from typing import Iterator, List, Optional, Sequence, Tuple

from tfaccel.errors import DataError

# The markers read as a missing value, besides any of data.table.na_values (pandas' default
# list, shortened to the ones real tables use).
NA_VALUES = ("", "NA", "N/A", "nan", "NaN", "null", "None", "?")
DELIMITERS = (",", ";", "\t", "|")
DELIMITER_NAMES = {",": "comma", ";": "semicolon", "\t": "tab", "|": "pipe"}
# data.table.delimiter's values: auto detects; the names stand for the characters.
DELIMITER_KEYS = {"auto": None, ",": ",", ";": ";", "\t": "\t", "|": "|", "comma": ",",
                  "semicolon": ";", "tab": "\t", "pipe": "|"}
SNIFF_BYTES = 64 * 1024
# A number as the tf.data conversion parses it (tf.strings.to_number after a strip): no
# "inf", "nan" (a marker) or "1_000", which Python's float() would take.
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_INTEGER = re.compile(r"[+-]?\d+")


def is_number(text: str) -> bool:
    """Whether `text` (spaces stripped) is a finite decimal number."""
    return _NUMBER.fullmatch(text.strip()) is not None


def is_integer(text: str) -> bool:
    """Whether `text` (spaces stripped) is an integer."""
    return _INTEGER.fullmatch(text.strip()) is not None


def missing_markers(na_values: Optional[Sequence[str]] = None) -> Tuple[str, ...]:
    """`NA_VALUES` plus ``data.table.na_values``, each stripped, without repeats."""
    extra = [str(v).strip() for v in (na_values or ())]
    return tuple(dict.fromkeys(list(NA_VALUES) + extra))


def is_blank(fields: Sequence[str]) -> bool:
    """THE blank-line rule: a line with nothing but spaces is no row."""
    return not fields or (len(fields) == 1 and not fields[0].strip())


def delimiter_for(key: Optional[str]) -> Optional[str]:
    """The delimiter ``data.table.delimiter`` names (None: detect it).

    Raises:
        DataError: A value that is none of `DELIMITER_KEYS`.
    """
    if key is None or key in DELIMITER_KEYS:
        return DELIMITER_KEYS.get(key)
    raise DataError(f"data.table.delimiter must be one of {sorted(DELIMITER_KEYS)}, got "
                    f"{key!r}.")


def _is_gzip(path: str) -> bool:
    return path.lower().endswith((".gz", ".gzip"))


@contextlib.contextmanager
def open_text(path: str, *, encoding: str = "utf-8"):
    """`path` as text (``.gz`` inflated), a BOM dropped, newlines left to the csv module.

    Raises:
        DataError: The file does not exist or is a folder.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise DataError(f"CSV file {path!r} does not exist"
                        + (" (it is a folder)." if os.path.isdir(path) else "."))
    # utf-8-sig reads a file with or without a byte-order mark.
    encoding = "utf-8-sig" if encoding.lower().replace("_", "-") in ("utf-8", "utf8") \
        else encoding
    raw = gzip.open(path, "rb") if _is_gzip(path) else open(path, "rb")
    with raw, io.TextIOWrapper(raw, encoding=encoding, newline="") as handle:
        yield handle


def detect_delimiter(path: str, *, delimiter: Optional[str] = None,
                     encoding: str = "utf-8") -> str:
    """The delimiter of `path`: `delimiter` if given, else csv.Sniffer's choice among
    `DELIMITERS` over the first 64 KB (a comma when the file has one column).

    Raises:
        DataError: The file cannot be read (named), or is empty.
    """
    if delimiter is not None:
        return delimiter
    with open_text(path, encoding=encoding) as handle:
        try:
            sample = handle.read(SNIFF_BYTES + 1)
        except UnicodeDecodeError as err:
            raise _decode_error(path, err, line=_undecodable_line(path, encoding)) from None
        except (EOFError, OSError, zlib.error) as err:
            raise _cut(path, err) from None
    if not sample.strip():
        raise DataError(f"CSV file {path!r} is empty: it has no header row naming its "
                        "columns (then one line per row).")
    return sniff(sample)


def _decode_error(path: str, err: UnicodeDecodeError, *, line: Optional[int]) -> DataError:
    where = f"line {line}" if line else "its first 64 KB"
    if err.encoding.replace("-", "") == "utf8sig":
        err.encoding = "utf-8"
    return DataError(f"CSV file {path!r}, {where}: bytes that are not {err.encoding} "
                     f"({err.reason}: {err.object[err.start:err.end]!r}). Save the file as "
                     "UTF-8, or pass its encoding.")


def records(path: str, *, delimiter: str, encoding: str = "utf-8", one_line: bool = False
            ) -> Iterator[Tuple[int, List[str]]]:
    """``(line number, fields)`` of every non-blank record of `path`, the header included.

    The line number is the record's first physical line (1-based). With `one_line` a
    quoted field spanning lines is refused (a reader of lines would split it).

    Raises:
        DataError: A byte that is not of `encoding` (file and line), or a quoting error.
    """
    try:
        with open_text(path, encoding=encoding) as handle:
            yield from _records(handle, path=path, delimiter=delimiter, one_line=one_line)
    except UnicodeDecodeError as err:
        # Text is decoded in chunks, ahead of the rows: find the line of the bad bytes.
        raise _decode_error(path, err, line=_undecodable_line(path, encoding)) from None
    except (EOFError, OSError, zlib.error) as err:  # gzip.BadGzipFile is an OSError
        raise _cut(path, err) from None


def _cut(path: str, err: Exception) -> DataError:
    return DataError(f"CSV file {path!r} is cut short or damaged, it cannot be read to its "
                     f"end: {err} (or it is not compressed as its name says).")


def _undecodable_line(path: str, encoding: str) -> Optional[int]:
    raw = gzip.open(path, "rb") if _is_gzip(path) else open(path, "rb")
    with raw:
        for number, line in enumerate(raw, 1):
            try:
                line.decode(encoding)
            except UnicodeDecodeError:
                return number
    return None


def text_records(text: str, *, path: str, delimiter: str
                 ) -> Iterator[Tuple[int, List[str]]]:
    """`records` of a file already read into `text` (decompressed and decoded by the
    caller; a leading byte-order mark is dropped here)."""
    return _records(io.StringIO(text.lstrip("\ufeff"), newline=""), path=path,
                    delimiter=delimiter, one_line=False)


def _records(handle, *, path: str, delimiter: str, one_line: bool):
    reader = csv.reader(handle, delimiter=delimiter)
    line = 0
    try:
        for fields in reader:
            start, line = line + 1, reader.line_num
            if one_line and line > start:
                raise DataError(f"CSV file {path!r}, lines {start}-{line}: a quoted field "
                                "spans lines; tables are read one row per line. Remove "
                                "the line breaks inside quotes.")
            if not is_blank(fields):
                yield start, fields
    except csv.Error as err:
        raise DataError(f"CSV file {path!r}, line {line + 1} cannot be read: {err}.") from None


def names_of(fields: Sequence[str], *, path: str, delimiter: str) -> List[str]:
    """A header record's column names, surrounding spaces stripped (`header`'s checks)."""
    names = [name.strip() for name in fields]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise DataError(f"The header of {path!r} repeats the name(s) {duplicated}: every "
                        "column needs its own name.")
    if len(names) == 1:
        others = [d for d in DELIMITERS if d != delimiter and d in names[0]]
        if others:
            raise DataError(
                f"CSV file {path!r} reads as one column {names[0]!r} with the delimiter "
                f"{delimiter!r} ({DELIMITER_NAMES.get(delimiter, delimiter)}); its header "
                f"holds {DELIMITER_NAMES[others[0]]}s. Set data.table.delimiter: "
                f"{DELIMITER_NAMES[others[0]]} (or leave it auto).")
    return names


def sniff(text: str) -> str:
    """The delimiter of a file's first KBs `text` (`detect_delimiter`'s rule)."""
    lines = [line for line in text[:SNIFF_BYTES].splitlines() if line.strip()]
    if len(text) > SNIFF_BYTES and len(lines) > 1:
        lines = lines[:-1]  # whole lines only: a cut one may hold half a quoted field
    if not lines:
        return ","
    try:
        return csv.Sniffer().sniff("\n".join(lines[:200]), delimiters="".join(DELIMITERS)
                                   ).delimiter
    except csv.Error:
        # No delimiter repeats the same way on every line: one column, or a ragged file
        # that the row check names. The most frequent candidate in the header, else ",".
        counts = {d: lines[0].count(d) for d in DELIMITERS}
        best = max(counts, key=counts.get)
        return best if counts[best] else ","


def header(path: str, *, delimiter: str, encoding: str = "utf-8") -> List[str]:
    """The column names of `path` (its first non-blank line), surrounding spaces stripped.

    Raises:
        DataError: An empty file, an empty or repeated name, or a header that looks like
            it used another delimiter (said, with the delimiter to set).
    """
    for _, fields in records(path, delimiter=delimiter, encoding=encoding):
        return names_of(fields, path=path, delimiter=delimiter)
    raise DataError(f"CSV file {path!r} is empty: it has no header row naming its "
                    "columns (then one line per row).")


def rows(path: str, *, delimiter: str, encoding: str = "utf-8", width: Optional[int] = None,
         one_line: bool = False) -> Iterator[Tuple[int, List[str]]]:
    """``(line number, fields)`` of every row after the header, each of `width` fields.

    Raises:
        DataError: A row with another number of fields than the header (file, line and
            counts named), besides `records`' errors.
    """
    it = records(path, delimiter=delimiter, encoding=encoding, one_line=one_line)
    first = next(it, None)
    if first is None:
        return
    width = len(first[1]) if width is None else width
    for line, fields in it:
        if len(fields) != width:
            raise DataError(f"CSV file {path!r}, line {line} has {len(fields)} field(s) where "
                            f"the header has {width} ({DELIMITER_NAMES.get(delimiter, delimiter)}"
                            "-separated); quote a value that holds the delimiter.")
        yield line, fields


def read_columns(path: str, *, delimiter: Optional[str] = None, encoding: str = "utf-8"
                 ) -> Tuple[List[str], List[int], List[List[str]]]:
    """The whole file in memory: ``(header, line numbers, rows of fields)``.

    Raises:
        DataError: As `header` and `rows`.
    """
    delimiter = detect_delimiter(path, delimiter=delimiter, encoding=encoding)
    names = header(path, delimiter=delimiter, encoding=encoding)
    lines, values = [], []
    for line, fields in rows(path, delimiter=delimiter, encoding=encoding, width=len(names)):
        lines.append(line)
        values.append(fields)
    return names, lines, values
