"""CSV tables (a file, a glob, many files read in parallel, or a DataFrame) as batched tf.data."""

from __future__ import annotations

import csv
import dataclasses
import numbers
import os
import re
from typing import Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import tensorflow as tf

from tfaccel.data import files_stage, finite_values, in_memory, table_features, tail, text_files
from tfaccel.data.sources import base
from tfaccel.errors import DataError, UserInputError, did_you_mean
from tfaccel.reading import csv_files, table_plan

# The types CsvDataset parses, in the order type inference widens a column through them:
# `tf.data.experimental.make_csv_dataset`'s own rule (int32, int64, float32, float64, string).
TYPE_ORDER = ("int32", "int64", "float32", "float64", "string")
_TYPE_NAMES = {**{name: name for name in TYPE_ORDER}, "int": "int64", "float": "float32",
               "str": "string", "bytes": "string"}
_INT_BITS = {"int32": 31, "int64": 63}
# Rows a default shuffle buffer holds: every row of most tables; a table of millions of
# rows is mixed by this buffer plus the seeded file order.
_SHUFFLE_CAP = 100_000
_COMPRESSIONS = (None, "", "GZIP")


def _type_name(value, *, argument: str, column: str) -> str:
    """A dtype's name in `TYPE_ORDER` from a name, a `tf.DType` or a NumPy type."""
    try:
        name = tf.as_dtype(value).name
    except TypeError:
        name = str(value).lower()
    if name not in _TYPE_NAMES:
        raise UserInputError(f"{argument}[{column!r}] must be one of {list(TYPE_ORDER)}, got "
                             f"{value!r}.")
    return _TYPE_NAMES[name]


def parses_as(text: str, type_name: str, *, finite: bool = True) -> bool:
    """Whether `text` is a value of `type_name` (surrounding spaces allowed, as CsvDataset).

    With `finite` (type inference, as make_csv_dataset) "inf", "nan" and floats that
    overflow are not float values; CsvDataset itself parses them.
    """
    if type_name == "string":
        return True
    try:
        if type_name in _INT_BITS:
            bits = _INT_BITS[type_name]
            return -2 ** bits <= int(text) < 2 ** bits
        with np.errstate(over="ignore"):  # float32("1e40") is inf, said below
            value = np.dtype(type_name).type(text)
        # make_csv_dataset's inference: a value that overflows float32 needs float64.
        return not finite or bool(np.abs(value) < np.inf)
    except (ValueError, OverflowError):
        return False


def widen(type_name: Optional[str], text: str) -> str:
    """The narrowest type at or after `type_name` in `TYPE_ORDER` that parses `text`."""
    start = 0 if type_name is None else TYPE_ORDER.index(type_name)
    return next(name for name in TYPE_ORDER[start:] if parses_as(text, name))


class _Format:
    """How the files are written: delimiter, quoting, header, missing marker, encoding."""

    def __init__(self, *, header: bool, field_delim: str, use_quote_delim: bool,
                 na_value: str, encoding: str, compression_type: Optional[str]):
        if not isinstance(field_delim, str) or len(field_delim) != 1:
            raise UserInputError(f"field_delim must be one character, got {field_delim!r}.")
        if compression_type not in _COMPRESSIONS:
            raise UserInputError(f"compression_type must be None or 'GZIP', got "
                                 f"{compression_type!r}.")
        self.header, self.field_delim, self.na_value = bool(header), field_delim, na_value
        self.use_quote_delim, self.encoding = bool(use_quote_delim), encoding
        self.compression_type = compression_type or None

    def rows(self, path: str):
        """Yields ``(line number, fields)`` of every record, the header included."""
        try:
            with text_files.open_text(path, encoding=self.encoding,
                                      compression=self.compression_of(path),
                                      what="CSV file") as handle:
                reader = csv.reader(handle, delimiter=self.field_delim,
                                    quoting=csv.QUOTE_MINIMAL if self.use_quote_delim
                                    else csv.QUOTE_NONE)
                for fields in reader:
                    # line_num: the physical line the record ends on (1-based).
                    yield reader.line_num, fields
        except csv.Error as err:
            raise DataError(f"CSV file {path!r} cannot be read: {err}") from None

    def compression_of(self, path: str) -> Optional[str]:
        """A file's compression: `compression_type`, else a ``.gz`` name's GZIP (the only
        one CsvDataset's callers use; `text_files` reads it)."""
        found = text_files.compression_of(path, self.compression_type)
        return found if found == "GZIP" or self.compression_type else None

    def missing(self, text: str) -> bool:
        return text == "" or text == self.na_value


def _header(path: str, fmt: _Format) -> list:
    for _, fields in fmt.rows(path):
        return fields  # a byte-order mark dropped by text_files
    raise DataError(f"CSV file {path!r} is empty: it has no header row (pass header=False "
                    "and column_names=[...] for files without one).")


def _column_names(files: Sequence[str], fmt: _Format, column_names) -> list:
    """The columns: given, or the header of the first file; every file's header must agree."""
    if fmt.header:
        first = _header(files[0], fmt)
        for path in files[1:]:
            other = _header(path, fmt)
            if other != first:
                raise DataError(f"CSV file {path!r} has the header {other} but {files[0]!r} "
                                f"has {first}: every file must have the same columns.")
        if column_names is None:
            column_names = first
        elif len(column_names) != len(first):
            raise DataError(f"column_names has {len(column_names)} names but the files have "
                            f"{len(first)} columns ({first} in {files[0]!r}).")
    elif column_names is None:
        raise UserInputError("header=False needs column_names=[...] (one name per column).")
    column_names = [str(name) for name in column_names]
    duplicated = sorted({n for n in column_names if column_names.count(n) > 1})
    if duplicated:
        raise DataError(f"The columns of {files[0]!r} repeat the name(s) {duplicated}: every "
                        "column needs its own name (or pass column_names=[...]).")
    return column_names


def _check_names(given: Optional[Mapping], columns: Sequence[str], argument: str) -> dict:
    given = dict(given or {})
    for name in given:
        if name not in columns:
            raise UserInputError(f"{argument} names the column {name!r}"
                                 f"{did_you_mean(name, columns)}, which is not among the "
                                 f"columns {list(columns)}.")
    return given


def _label_check(label_name, columns: Sequence[str], where: str) -> None:
    if label_name is not None and label_name not in columns:
        raise DataError(f"label_name {label_name!r}{did_you_mean(label_name, columns)} is not "
                        f"a column of {where}; its columns are {list(columns)}.")


def _selected(columns: list, select_columns, label_name) -> list:
    """Indices (sorted, as CsvDataset needs them) of the columns read; the label included."""
    if select_columns is None:
        return list(range(len(columns)))
    picked = set()
    for column in select_columns:
        if isinstance(column, int) and not isinstance(column, bool):
            if not 0 <= column < len(columns):
                raise UserInputError(f"select_columns holds the index {column}, but there are "
                                     f"{len(columns)} columns {columns}.")
            picked.add(column)
        elif column in columns:
            picked.add(columns.index(column))
        else:
            raise UserInputError(f"select_columns names the column {column!r}"
                                 f"{did_you_mean(column, columns)}, which is not among the "
                                 f"columns {columns}.")
    if label_name is not None:
        # The label is always read: selecting features should not drop the target.
        picked.add(columns.index(label_name))
    return sorted(picked)


def _infer_types(files, fmt: _Format, columns: list, wanted: list, *, rows: int) -> list:
    """make_csv_dataset's rule: each column's narrowest type over the first `rows` rows.

    A column with no value in those rows is a string column, as there. A NaN or infinite
    number among numbers is refused (`finite_values`), and so is a missing-value marker of
    the column plan (`csv_files.NA_VALUES`: ``NA``, ``N/A``, ``null``, ``None``, ``?``)
    that `na_value` does not name: make_csv_dataset would widen the column to strings
    (and a model would then one-hot the measurements), silently.

    Raises:
        DataError: A column of numbers holding NaN or an infinite value (file, line,
            column named).
    """
    types = [None] * len(wanted)
    non_finite = [None] * len(wanted)  # the first (path, line, text) of each column
    # ... and of a missing-value marker (csv_files.NA_VALUES: "NA", "null", "?"...), which
    # would widen a column of numbers to text: refused among numbers, text among texts.
    markers = [None] * len(wanted)
    seen = 0
    for path in files:
        records = fmt.rows(path)
        if fmt.header:
            next(records, None)
        for line, fields in records:
            if seen >= rows:
                break
            _check_width(path, line, fields, columns)
            for k, index in enumerate(wanted):
                text = fields[index]
                if fmt.missing(text):
                    continue
                if finite_values.is_non_finite_number(text):
                    non_finite[k] = non_finite[k] or (path, line, text)
                elif text.strip() in csv_files.NA_VALUES:
                    markers[k] = markers[k] or (path, line, text)
                else:
                    types[k] = widen(types[k], text)
            seen += 1
        if seen >= rows:
            break
    for k, found in enumerate(non_finite):
        if found is not None and types[k] != "string":
            path, line, text = found
            raise _non_finite(path, line, columns[wanted[k]], text)
    for k, found in enumerate(markers):
        if found is not None and types[k] not in (None, "string"):
            path, line, text = found
            column = columns[wanted[k]]
            raise DataError(
                f"CSV file {path!r}, line {line}, column {column!r}: {text!r} among numbers, "
                "a missing-value marker; make_csv_dataset would read the whole column as "
                f"text. Say it is missing and fill it: na_value={text.strip()!r}, "
                f"column_defaults={{{column!r}: ...}} (or fix the value).")
        if found is not None and types[k] is None:
            types[k] = "string"  # nothing but markers: text, as make_csv_dataset reads it
        elif found is not None:
            types[k] = widen(types[k], found[2])
    return [t or "string" for t in types]


def _non_finite(path: str, line: int, column: str, text: str) -> DataError:
    return finite_values.refusal(
        f"CSV file {path!r}, line {line}, column {column!r}", repr(text),
        fix=f"Fill the value in, or leave it empty and name a default (column_defaults="
            f"{{{column!r}: ...}}), or drop the row.")


def _is_finite(text: str, type_name: str) -> bool:
    """Whether a float column's `text` is a finite value of `type_name` (not "nan", "inf"
    or a number that overflows it, e.g. "1e40" in float32)."""
    with np.errstate(over="ignore"):
        return bool(np.isfinite(np.dtype(type_name).type(text)))


def _check_width(path: str, line: int, fields: list, columns: list) -> None:
    if len(fields) != len(columns):
        what = "is blank" if not fields else f"has {len(fields)} fields"
        raise DataError(f"CSV file {path!r}, line {line} {what}; every row needs "
                        f"{len(columns)} ({', '.join(columns)}).")


def _default_tensor(column: str, type_name: str, value) -> tf.Tensor:
    """CsvDataset's record default: ``[value]`` fills a missing field, ``[]`` refuses one."""
    dtype = tf.as_dtype(type_name)
    if value is None:
        return tf.constant([], dtype)
    fits = (isinstance(value, str) if type_name == "string"
            else isinstance(value, numbers.Real) and not isinstance(value, bool)
            and (type_name not in _INT_BITS or float(value).is_integer()))
    if not fits:
        raise UserInputError(f"column_defaults[{column!r}] is {value!r}, which is not a value "
                             f"of the column's type {type_name}.")
    return tf.constant([value], dtype)


def _tf_reason(err: tf.errors.OpError) -> str:
    """TensorFlow's message without its function-node and op decorations."""
    text = re.sub(r"\{\{[^}]*\}\}\s*", "", err.message)
    text = re.sub(r"Error in user-defined function.*?: (?=\w)", "", text)
    return re.split(r"\s*\[\[|\s*\[Op:", text)[0].strip()


class _Table:
    """The files of one table and how to parse them: columns, types, defaults."""

    def __init__(self, files, fmt: _Format, *, columns, wanted, types, defaults, inferred,
                 inference_rows):
        self.files, self.fmt, self.columns, self.wanted = files, fmt, columns, wanted
        self.names = [columns[i] for i in wanted]
        self.types, self.defaults, self.inferred = types, defaults, inferred
        self.inference_rows = inference_rows
        self.record_defaults = [_default_tensor(columns[i], t, defaults.get(columns[i]))
                                for i, t in zip(wanted, types)]

    def reader(self, path) -> tf.data.Dataset:
        """The CsvDataset of one file: one tuple of the read columns per row."""
        fmt = self.fmt
        return tf.data.experimental.CsvDataset(
            path, self.record_defaults, compression_type=fmt.compression_type or tf.where(
                tf.strings.regex_full_match(tf.strings.lower(path), r".*\.gz(ip)?"),
                "GZIP", ""),
            header=fmt.header, field_delim=fmt.field_delim,
            use_quote_delim=fmt.use_quote_delim, na_value=fmt.na_value,
            select_cols=None if len(self.wanted) == len(self.columns) else self.wanted)

    def count_rows(self) -> list:
        """Rows of each file, parsed by TensorFlow itself (every value, at C++ speed).

        Raises:
            DataError: A row TensorFlow refuses, named by file, line and column
                (`locate_problem`).
        """
        floats = [k for k, t in enumerate(self.types) if t.startswith("float")]

        def rows_of(path):
            # Batched, so the count costs one step per 8192 rows, not one per row. Float
            # columns are checked on the way (CsvDataset parses "nan" and "inf").
            def add(state, batch):
                total, finite = state
                for k in floats:
                    finite = tf.logical_and(finite, tf.reduce_all(tf.math.is_finite(batch[k])))
                return total + tf.shape(batch[0], out_type=tf.int64)[0], finite

            return self.reader(path).batch(8192).reduce(
                (tf.constant(0, tf.int64), tf.constant(True)), add)

        counts = tf.data.Dataset.from_tensor_slices(self.files).map(
            rows_of, num_parallel_calls=tail.AUTOTUNE, deterministic=True)
        try:
            counted = [(int(n), bool(finite)) for n, finite in counts.as_numpy_iterator()]
        except tf.errors.InvalidArgumentError:
            # TensorFlow says neither the file nor the record: find them.
            self.locate_problem()
            raise
        for path, (_, finite) in zip(self.files, counted):
            if not finite:
                self.scan(path)  # names the value (finite_values' rule)
        return [n for n, _ in counted]

    def locate_problem(self) -> None:
        """Raises a DataError naming the file, line and column of the first bad row."""
        for path in self.files:
            try:
                self.reader(path).batch(8192).reduce(0, lambda n, _: n)
            except tf.errors.InvalidArgumentError as err:
                self.scan(path)
                raise DataError(f"CSV file {path!r} cannot be parsed with the column types "
                                f"{dict(zip(self.names, self.types))}: TensorFlow says "
                                f"{_tf_reason(err)!r}.") from None

    def scan(self, path: str) -> None:
        """Walks `path` in Python, as CsvDataset would parse it, and names its first bad row.

        Raises:
            DataError: A row with the wrong number of fields, a missing value without a
                default, a value that is not of its column's type, or a NaN or infinite
                number (`finite_values`).
        """
        records = self.fmt.rows(path)
        if self.fmt.header:
            next(records, None)
        checks = [(i, self.columns[i], t, self.columns[i] not in self.defaults)
                  for i, t in zip(self.wanted, self.types)]
        for line, fields in records:
            _check_width(path, line, fields, self.columns)
            for index, name, type_name, required in checks:
                text = fields[index]
                if self.fmt.missing(text):
                    if required:
                        raise DataError(
                            f"CSV file {path!r}, line {line}, column {name!r}: the value is "
                            f"missing; fill it in, or name a default for the column: "
                            f"column_defaults={{{name!r}: ...}}.")
                elif not parses_as(text, type_name, finite=False):
                    raise DataError(
                        f"CSV file {path!r}, line {line}, column {name!r}: {text!r} is not "
                        f"a {type_name}, the column's type ({self._type_origin(name)}); "
                        f"fix the value or pass column_types={{{name!r}: "
                        f"{widen(type_name, text)!r}}}.")
                elif type_name.startswith("float") and not _is_finite(text, type_name):
                    raise _non_finite(path, line, name, text)

    def _type_origin(self, name: str) -> str:
        if name in self.inferred:
            return f"inferred from the first {self.inference_rows} rows"
        return "given in column_types"

    def fingerprint(self) -> dict:
        """Everything parsed rows depend on, but the files and their order."""
        fmt = self.fmt
        return {"columns": self.names, "types": self.types,
                "defaults": {k: self.defaults[k] for k in sorted(self.defaults)},
                "format": [fmt.header, fmt.field_delim, fmt.use_quote_delim, fmt.na_value,
                           fmt.compression_type]}


def _read_table(files, fmt: _Format, *, column_names, column_types, column_defaults,
                select_columns, label_name, num_rows_for_inference: int) -> _Table:
    columns = _column_names(files, fmt, column_names)
    _label_check(label_name, columns, f"{files[0]!r}")
    types = {name: _type_name(t, argument="column_types", column=name)
             for name, t in _check_names(column_types, columns, "column_types").items()}
    defaults = _check_names(column_defaults, columns, "column_defaults")
    wanted = _selected(columns, select_columns, label_name)
    unknown = [i for i in wanted if columns[i] not in types]
    if unknown:
        for index, type_name in zip(unknown, _infer_types(files, fmt, columns, unknown,
                                                          rows=num_rows_for_inference)):
            types[columns[index]] = type_name
    return _Table(files, fmt, columns=columns, wanted=wanted,
                  types=[types[columns[i]] for i in wanted], defaults=defaults,
                  inferred={columns[i] for i in unknown},
                  inference_rows=num_rows_for_inference)


def is_data_frame(source) -> bool:
    """Whether `source` is a table in memory (a pandas DataFrame or anything like it)."""
    return (hasattr(source, "columns") and hasattr(source, "__getitem__")
            and not isinstance(source, (str, bytes, os.PathLike, Mapping)))


def _frame_column(frame, key, default):
    """One column of a DataFrame as a NumPy array; missing values filled or refused."""
    name = str(key)
    values = np.asarray(frame[key])
    if values.dtype.kind in "fc":
        missing = np.isnan(values)
    elif values.dtype == object:
        missing = np.array([v is None or (isinstance(v, float) and np.isnan(v))
                            for v in values], bool)
    else:
        missing = np.zeros(len(values), bool)
    if missing.any():
        if default is None:
            row = int(np.argmax(missing))
            raise DataError(f"DataFrame column {name!r} is missing a value at row {row} "
                            f"(position, 0-based; {int(missing.sum())} missing in all); fill "
                            f"it in, or name a default: column_defaults={{{name!r}: ...}}.")
        values = values.copy()
        values[missing] = default
    if values.dtype == object:
        # Text columns: a NumPy string array (TensorFlow makes tf.string of it, and the
        # cache fingerprint can digest its bytes; an object array holds only pointers).
        values = values.astype(str)
    return values


def _from_frame(frame, *, label_name, column_defaults, select_columns, batch_size,
                shuffle_buffer, options: tail.TailOptions) -> tf.data.Dataset:
    """A DataFrame's columns through `from_arrays`' `in_memory.arrays_dataset`: what
    ``from_tensor_slices((dict(df), labels))`` gives, with the guards of `from_arrays`."""
    keys = list(frame.columns)
    columns = [str(c) for c in keys]  # feature names are strings, whatever the frame's
    _label_check(label_name, columns, "the DataFrame")
    defaults = _check_names(column_defaults, columns, "column_defaults")
    data = {columns[i]: _frame_column(frame, keys[i], defaults.get(columns[i]))
            for i in _selected(columns, select_columns, label_name)}
    label = None if label_name is None else data.pop(label_name)
    dataset = in_memory.arrays_dataset(data, label, batch_size=batch_size,
                                       shuffle_buffer=shuffle_buffer, options=options)
    dataset.files, dataset.row_counts = [], []
    dataset.num_examples = len(next(iter(data.values()))) if data else len(label)
    dataset.column_types = {name: tf.as_dtype(a.dtype).name
                            for name, a in {**data, **({} if label is None
                                                        else {label_name: label})}.items()}
    return dataset


def from_csv(source, batch_size: Optional[int], *, label_name: Optional[str] = None,
             column_names: Optional[Sequence[str]] = None,
             column_types: Optional[Mapping] = None,
             column_defaults: Optional[Mapping] = None,
             select_columns: Optional[Sequence[Union[str, int]]] = None,
             header: bool = True, field_delim: str = ",", use_quote_delim: bool = True,
             na_value: str = "", num_rows_for_inference: int = 100,
             compression_type: Optional[str] = None, encoding: str = "utf-8",
             shuffle_buffer: Optional[int] = None, seed: Optional[int] = None,
             cycle_length: Optional[int] = None, verify: bool = True,
             deterministic: Optional[bool] = None,
             rows: Optional[files_stage.RowSplit] = None,
             cache=None, augment=None, augment_on="batch", drop_remainder=None,
             num_parallel_calls=tail.AUTOTUNE, private_threads=None, ram_budget_bytes=None,
             shard_policy=None, image_dtype="float32", input_context=None, sequential=False,
             stream=None, service=None, batch_by_length=False, **unknown) -> tf.data.Dataset:
    """Builds ``(dict of column batches, label batch)`` from CSV files or a DataFrame.

    Example::

        train = tfaccel.data.from_csv("data/train-*.csv", batch_size=256,
                                      label_name="target", column_defaults={"age": 0},
                                      seed=0)
        features = train.map(lambda x, y: x)   # e.g. keras.utils.FeatureSpace.adapt

    The files are read in parallel (an interleave of ``tf.data.experimental.CsvDataset``,
    one reader per file), in one seeded order of the files when shuffling; rows are then
    cached (if asked), shuffled and batched by `tfaccel.data.optimize`. The names and
    meanings of `column_names`, `label_name`, `select_columns`, `field_delim`,
    `use_quote_delim`, `na_value`, `header`, `num_rows_for_inference`, `compression_type`
    and `encoding` are those of ``tf.data.experimental.make_csv_dataset``, and so is the
    type inference (each column the narrowest of int32, int64, float32, float64, string
    over the first rows), so the batches equal its batches. Differences: a missing value
    is refused unless `column_defaults` names the column's default (make_csv_dataset fills
    0 or "" silently); the label column is read even when `select_columns` leaves it out;
    one pass per epoch, not an endless repeat.

    With `verify` (the default) TensorFlow parses every file once before training, which
    also counts the rows; a row it refuses (wrong number of fields, a missing value
    without a default, a value that is not of its column's type) is then found in Python
    and named as a `DataError` with its file, line and column. TensorFlow's own error
    names neither. The check costs about one uncached epoch of parsing.

    `source` may also be a table in memory: a pandas DataFrame, or anything with
    ``.columns`` and ``frame[name]`` giving a column. Its columns keep their NumPy types
    (text becomes tf.string), as in ``tf.data.Dataset.from_tensor_slices((dict(df),
    labels))``, and it goes through `tfaccel.data.from_arrays` (every row shuffled each
    epoch by default, like keras.io's structured-data examples); missing values (NaN,
    None) are refused or filled from `column_defaults` as in files.

    Args:
        source: A CSV path, a glob, a list of paths or globs (each must match a file), or a
            DataFrame.
        batch_size: The GLOBAL batch size; None yields single rows.
        label_name: The column split off as the label (None: features only).
        column_names: The columns' names (needed with ``header=False``; with a header they
            replace its names).
        column_types: ``{column: type}`` (``"int32"``, ``"int64"``, ``"float32"``,
            ``"float64"``, ``"string"`` or a tf/NumPy dtype); other columns are inferred.
        column_defaults: ``{column: value}`` filling that column's missing values; a
            column not named here refuses a missing value.
        select_columns: Names or indices of the columns to read (faster); all by default.
        header: Whether each file starts with a header row of column names.
        field_delim: The one-character field separator.
        use_quote_delim: Whether double quotes quote fields (RFC 4180).
        na_value: A text that also means "missing", besides the empty field.
        num_rows_for_inference: Rows (from the first file on) the types are inferred from.
        compression_type: None (a file named ``*.gz`` is read as GZIP) or ``"GZIP"``.
        encoding: The text encoding for the header and the checks in Python.
        shuffle_buffer: Shuffle buffer in rows, 0 for no shuffling (files and rows in
            order). None: every row up to 100,000. Any size above 0 first permutes the file
            order once, seeded (`tfaccel.data.order`).
        seed: Seeds the file order, shuffling and augmentation (None: different each run).
        cycle_length: Files read at once (None: all of them, up to 16, when shuffling;
            one after the other, in order, when not).
        verify: Parse every file once up front (see above). False: nothing is parsed but
            the header and the inference rows, and a bad row stops training with
            TensorFlow's own message. Either way a compressed file is inflated once to its
            end marker: TensorFlow's reader stops silently where a stream is cut short, so
            a cut file is a `DataError` naming it.
        deterministic: Keep the row order fixed. None: fixed when a `seed` is given or
            when not shuffling.
        rows: One side of a split of the rows of these files (a recipe's
            validation_fraction with too few files for whole ones,
            `files_stage.split_files`): only that side's rows are read, before any
            shuffle or worker split; the rows are then counted even without `verify`.
        cache: None, ``"memory"`` or a file prefix: `tfaccel.data.optimize`'s `cache`.
        augment: Augmentation names or a callable (`optimize`'s `augment`).
        augment_on: Where a callable `augment` runs (`optimize`'s `augment_on`).
        drop_remainder: None: True when more than one replica is in sync.
        num_parallel_calls: Parallelism of the maps (AUTOTUNE).
        private_threads: As `optimize`'s.
        ram_budget_bytes: As `optimize`'s.
        shard_policy: As `optimize`'s.
        image_dtype: uint8 images are cast to this dtype after the cache (None: kept uint8).
        input_context: From ``distribute_datasets_from_function`` (`optimize`'s).
        sequential: The benchmarks' truly sequential pipeline (`optimize`'s).
        stream: An `EpochStream`: a resumable stream of passes (`optimize`'s).
        service: A `ServiceTarget`: run the tail on a tf.data service (`optimize`'s).
        batch_by_length: Batch texts and sequences of similar length together (`optimize`'s).
        **unknown: Refused, naming the nearest keyword (`tail.refuse_unknown`).

    Returns:
        A `tf.data.Dataset` of ``(features, label)`` batches (features alone without a
        label), features a dict of ``[B]`` tensors, with attributes ``files`` (this
        pipeline's, in read order), ``row_counts`` (rows of each of them) and
        ``num_examples`` (rows in all of them; both None without `verify`), and
        ``column_types``. Counted rows also give the dataset its
        cardinality, so Keras knows the steps of an epoch.

    Raises:
        DataError: A glob matching nothing, an empty or unreadable file, headers that
            differ, a missing label column (the columns are listed), a bad row (file,
            line and column named).
        UserInputError: A bad argument value.
    """
    tail.refuse_unknown(unknown, builder=from_csv)
    options = tail.TailOptions(
        seed=seed, deterministic=deterministic, cache=cache, augment=augment,
        augment_on=augment_on, drop_remainder=drop_remainder,
        num_parallel_calls=num_parallel_calls, private_threads=private_threads,
        ram_budget_bytes=ram_budget_bytes, shard_policy=shard_policy, image_dtype=image_dtype,
        input_context=input_context, sequential=sequential, stream=stream, service=service,
        batch_by_length=batch_by_length)
    return csv_dataset(source, batch_size, label_name=label_name, column_names=column_names,
                       column_types=column_types, column_defaults=column_defaults,
                       select_columns=select_columns, header=header, field_delim=field_delim,
                       use_quote_delim=use_quote_delim, na_value=na_value,
                       num_rows_for_inference=num_rows_for_inference,
                       compression_type=compression_type, encoding=encoding,
                       shuffle_buffer=shuffle_buffer, cycle_length=cycle_length,
                       verify=verify, rows=rows, options=options)


def csv_dataset(source, batch_size: Optional[int], *, label_name: Optional[str],
                column_names: Optional[Sequence[str]], column_types: Optional[Mapping],
                column_defaults: Optional[Mapping],
                select_columns: Optional[Sequence[Union[str, int]]], header: bool,
                field_delim: str, use_quote_delim: bool, na_value: str,
                num_rows_for_inference: int, compression_type: Optional[str],
                encoding: str, shuffle_buffer: Optional[int], cycle_length: Optional[int],
                verify: bool, rows: Optional[files_stage.RowSplit],
                options: tail.TailOptions) -> tf.data.Dataset:
    """`from_csv` with the tail's options as one `TailOptions` (``deterministic`` None or
    unset: fixed when a seed is given or when not shuffling); the arguments as
    `from_csv`'s."""
    # The caller's own order switch (None: decided here), then only what the caller chose:
    # this source decides the rest (a shard policy, DATA for a DataFrame).
    deterministic = None if options.deterministic is tail.UNSET else options.deterministic
    options = options.without(["deterministic"]).chosen()
    seed = options.resolved().seed
    if not isinstance(num_rows_for_inference, int) or num_rows_for_inference < 1:
        raise UserInputError(f"num_rows_for_inference must be a positive integer, got "
                             f"{num_rows_for_inference!r}.")
    if is_data_frame(source):
        if deterministic is not None:
            options = dataclasses.replace(options, deterministic=deterministic)
        return _from_frame(source, label_name=label_name, column_defaults=column_defaults,
                           select_columns=select_columns, batch_size=batch_size,
                           shuffle_buffer=shuffle_buffer, options=options)
    fmt = _Format(header=header, field_delim=field_delim, use_quote_delim=use_quote_delim,
                  na_value=na_value, encoding=encoding, compression_type=compression_type)
    files = files_stage.list_files(source, what="CSV")
    table = _read_table(files, fmt, column_names=column_names, column_types=column_types,
                        column_defaults=column_defaults, select_columns=select_columns,
                        label_name=label_name, num_rows_for_inference=num_rows_for_inference)
    # CsvDataset stops silently where a compressed stream is cut short on a row boundary
    # (and fails nameless inside a row): each compressed file is inflated once up front,
    # with or without `verify` (text_files; once per process and file).
    files_stage.count_each(files, lambda f: text_files.check_complete(
        f, compression=fmt.compression_of(f), what="CSV file"))
    # Rows of each file, in `files` order (a row split needs them: the hook of RowSplit).
    counts = (table.count_rows() if verify or (rows is not None and rows.counts is None)
              else None)
    if counts is not None and sum(counts) == 0:
        raise DataError(f"CSV {source!r} holds no rows, only headers ({len(files)} file(s)).")
    kept = files_stage.kept_rows(rows, files, counts, what="CSV rows")
    if kept is not None:
        counts = kept.counts(files)
    files, counts, shuffle_buffer, shuffled, deterministic = _read_plan(
        files, counts, shuffle_buffer=shuffle_buffer, seed=seed, deterministic=deterministic,
        input_context=options.resolved().input_context)
    dataset = _table_dataset(table, files, batch_size=batch_size, label_name=label_name,
                             shuffle_buffer=shuffle_buffer, shuffled=shuffled,
                             deterministic=deterministic, cycle_length=cycle_length,
                             counts=counts, kept=kept, options=options)
    dataset.kept_rows = kept  # with `rows`: the rows kept of each file
    return dataset


def _read_plan(files: list, counts: Optional[list], *, shuffle_buffer: Optional[int],
               seed: Optional[int], deterministic: Optional[bool], input_context=None):
    """``(files, counts, shuffle_buffer, shuffled, deterministic)`` of a table read: the
    default buffer (every row up to `_SHUFFLE_CAP`), the seeded file order (`read_order`)
    and determinism (kept unless shuffled without a seed), one rule for both readers."""
    if shuffle_buffer is None:
        total = None if counts is None else sum(counts)
        shuffle_buffer = min(total or _SHUFFLE_CAP, _SHUFFLE_CAP)
    shuffled = shuffle_buffer != 0  # a bad value is named by `optimize`
    files, counts = read_order(files, counts, shuffled=shuffled, seed=seed,
                               input_context=input_context)
    if deterministic is None:
        deterministic = not shuffled or seed is not None
    return files, counts, shuffle_buffer, shuffled, deterministic


def read_order(files: list, counts: Optional[list], *, shuffled: bool, seed: Optional[int],
               input_context=None):
    """THE order a table's files are read in: ``(files, their row counts or None)``
    (`files_stage.read_order`; input pipelines take every n-th file of it)."""
    return files_stage.read_order(files, counts, shuffled=shuffled, seed=seed,
                                  input_context=input_context)


def _table_dataset(table: _Table, files: list, *, batch_size, label_name, shuffle_buffer,
                   shuffled, deterministic: bool, cycle_length, counts, kept=None,
                   options: tail.TailOptions):
    """The pipeline of `files` in this order (see `from_csv`): `options` are what the
    caller chose (`TailOptions.chosen`), `deterministic` the order decided."""
    options = dataclasses.replace(options, deterministic=deterministic)
    seed = options.resolved().seed
    # The one worker split of the file sources (files_stage): by file, or by row in one
    # fixed order when there are fewer files than pipelines.
    options, (files, counts) = files_stage.split_for_workers(files, counts, options=options)
    # TensorFlow's FILE auto-sharding finds TFRecord, TextLine and fixed-length readers,
    # not CsvDataset (tensorflow/core/grappler/optimizers/data/auto_shard.cc): without an
    # input context a multi-worker strategy splits the rows (DATA) in a fixed order.
    options = files_stage.choose_shard_policy(options, num_files=len(files),
                                              file_readers=False)
    deterministic = options.deterministic
    fingerprint = files_stage.fingerprint_cache(
        cache=options.resolved().cache, builder="from_csv", files=files, seed=seed,
        shuffled=shuffled, label_name=label_name, **table.fingerprint(),
        **(kept.describe() if kept is not None else {}))
    names = table.names

    def to_example(*values):
        row = dict(zip(names, values))
        if label_name is None:
            return row
        label = row.pop(label_name)
        return row, label

    if cycle_length is None:
        # Shuffled: several files parsed at once, each by its own reader (a parallel
        # interleave). Unshuffled: one after the other, so rows come in file order (as
        # make_csv_dataset's with shuffle=False) and predictions match the files' rows.
        cycle_length = min(len(files), 16) if shuffled else 1
    rows = files_stage.interleave(tf.data.Dataset.from_tensor_slices(files),
                                  files_stage.keep_rows(table.reader, kept),
                                  num_files=len(files), cycle_length=cycle_length,
                                  options=options, deterministic=deterministic)
    if counts is not None:
        # The rows are counted: say so, so that Keras shows a real progress bar and does
        # not warn that the input "ran out of data" at the end of the first epoch.
        rows = rows.apply(tf.data.experimental.assert_cardinality(sum(counts)))
    # Rows travel as plain tuples through cache, shuffle and batch and become (dict,
    # label) once per batch, as in make_csv_dataset: a map per row costs more than parsing
    # the row (measured on 2 cores: 21,000 rows/s against 57,000). An augmentation sees
    # examples as dicts, so with one the map stays per row, before it.
    per_row = bool(options.resolved().augment)
    dataset = tail.build(rows, batch_size=batch_size, options=options,
                         source=tail.SourceStages(map_fn=to_example if per_row else None,
                                                  shuffle_buffer=shuffle_buffer,
                                                  cache_fingerprint=fingerprint))
    if not per_row:
        dataset = dataset.map(to_example)
    dataset.files = files
    dataset.num_examples = None if counts is None else sum(counts)
    dataset.row_counts = counts
    dataset.column_types = dict(zip(names, table.types))
    return dataset


class _LineTable(_Table):
    """A table read line by line: blank lines skipped (THE rule of `csv_files.is_blank`),
    each batch of lines parsed at once by ``tf.io.decode_csv``, every column a string.

    CsvDataset refuses a blank line ("Expect 2 fields but have 1"), a trailing one
    included; the recipe's table path reads through this instead, after
    `tfaccel.reading.table_plan` checked every row in Python (widths, numbers, dates), so
    no row can fail here. A quoted field spanning lines is refused by that check.
    """

    def reader(self, path) -> tf.data.Dataset:
        fmt = self.fmt
        lines = tf.data.TextLineDataset(path, compression_type=fmt.compression_type or tf.where(
            tf.strings.regex_full_match(tf.strings.lower(path), r".*\.gz(ip)?"), "GZIP", ""))
        # The header is the first non-blank line (TextLineDataset drops "\r" of CRLF).
        lines = lines.filter(lambda line: tf.strings.length(tf.strings.strip(line)) > 0).skip(1)
        defaults = [tf.constant([""], tf.string)] * len(self.columns)
        return lines.batch(1024).map(lambda batch: tuple(tf.io.decode_csv(
            batch, defaults, field_delim=fmt.field_delim, use_quote_delim=True))).unbatch()


def from_table_plan(files: Sequence[str], row_counts: Sequence[int], *, columns: Sequence[str],
                    plan, batch_size: Optional[int], shuffle_buffer: Optional[int] = None,
                    compression_type: Optional[str] = None, cycle_length=None,
                    kept: Optional[files_stage.KeptRows] = None,
                    options: tail.TailOptions = tail.TailOptions()) -> tf.data.Dataset:
    """A table's files as ``(features, targets)`` batches by its column plan.

    The rows of `files` (their counts from `table_plan.scan_files`) are read in parallel
    as texts (`_LineTable`), cached, shuffled and batched as `from_csv` does, and each
    batch is converted by `table_features.converter` (numbers, imputation and
    indicators, categories, calendar features, label ids by a hash table).

    Args:
        files: The CSV files.
        row_counts: Rows of each file.
        columns: The files' columns.
        plan: The `tfaccel.reading.table_plan.TablePlan`.
        batch_size: The global batch size.
        shuffle_buffer: As `from_csv`.
        compression_type: None (by file name) or "GZIP".
        cycle_length: As `from_csv`.
        kept: One side of a split of the rows of these files (`files_stage.kept_rows`):
            only its rows are read, before any shuffle, cache or worker split; then
            `row_counts` are the kept rows of each file.
        options: The tail's options (`seed` and `deterministic` as `from_csv`'s).

    Returns:
        The dataset, with ``files``, ``row_counts``, ``num_examples``, ``kept_rows`` and
        ``table_plan``.
    """

    fmt = _Format(header=True, field_delim=plan.delimiter, use_quote_delim=True, na_value="",
                  encoding="utf-8", compression_type=compression_type)
    table = _LineTable(list(files), fmt, columns=list(columns),
                       wanted=list(range(len(columns))), types=["string"] * len(columns),
                       defaults={name: "" for name in columns}, inferred=set(),
                       inference_rows=0)
    deterministic = None if options.deterministic is tail.UNSET else options.deterministic
    options = options.without(["deterministic"]).chosen()
    resolved = options.resolved()
    files, counts, shuffle_buffer, shuffled, deterministic = _read_plan(
        list(files), list(row_counts), shuffle_buffer=shuffle_buffer, seed=resolved.seed,
        deterministic=deterministic, input_context=resolved.input_context)
    rows = _table_dataset(table, files, batch_size=batch_size, label_name=None,
                          shuffle_buffer=shuffle_buffer, shuffled=shuffled,
                          deterministic=deterministic, cycle_length=cycle_length,
                          counts=counts, kept=kept, options=options)
    dataset = rows.map(table_features.converter(plan),
                       num_parallel_calls=tail.AUTOTUNE, deterministic=deterministic)
    dataset.files, dataset.row_counts = rows.files, rows.row_counts
    dataset.num_examples, dataset.table_plan = rows.num_examples, plan
    dataset.kept_rows = kept
    return dataset


def _keeps(kept: Optional[files_stage.KeptRows]):
    """`table_plan.scan_files`' ``keep(path, row index)`` of one side of a row split."""
    if kept is None:
        return None
    masks = dict(zip(kept.files, kept.masks))
    return lambda path, index: bool(masks[path][index])


class CsvSource(base.Source):
    """``data.source: csv``: CSV files read by the column plan, whole files or rows held out.

    It reads the keys it shares with TFRecords: `path` (a glob), `label_key` (the label
    column, or several), `task`, `shuffle_buffer`, `validation_fraction` (whole files, or
    the rows of too few files: `files_stage.split_files`), `validation_path` (validation
    files, read whole), `num_classes` and `compression` (GZIP), and data.table (delimiter,
    types, na_values, categorical, ignore). Every row of every file is read once in Python
    first (`tfaccel.reading.table_plan`): the column kinds, means and categories come from
    the training split (its rows only, with a row split), the labels are planned by
    `tfaccel.reading.labels`, and a bad row is named before any training; both splits then
    use that one plan.
    """

    names = ("csv",)

    def split(self):
        """`files_stage.split_files` of the recipe: the files (and rows) of each split."""
        config = self.config
        return files_stage.split_files(config.path, fraction=config.validation_fraction,
                                       seed=self.seed, what="CSV",
                                       validation_pattern=config.validation_path)

    def files(self) -> Tuple[list, list]:
        """The training and validation files, in listing order."""
        files, val_files, _, _ = self.split()
        return files, val_files

    def plan(self):
        """``(training files, validation files, their TableScans, the TablePlan)``, made once.

        With a split of the rows of too few files, the rows are counted first, each side's
        `files_stage.KeptRows` drawn (`_kept`), and each side scanned over its own rows:
        the means that impute missing numbers, the categories and the labels come from the
        training rows only.
        """
        if getattr(self, "_planned", None) is None:
            files, val_files, rows, val_rows = self.split()
            kept = val_kept = None
            if rows is not None:
                counts = table_plan.count_rows(files, data=self.config)
                kept = files_stage.kept_rows(rows, files, counts, what="CSV rows")
                val_kept = files_stage.kept_rows(kept.counted(val_rows), files, None,
                                                 what="CSV rows")
            train, val, plan = table_plan.plan_for(
                files, val_files, data=self.config, keep=_keeps(kept),
                validation_keep=_keeps(val_kept))
            self._kept = (kept, val_kept)
            self._planned = (files, val_files, train, val, plan)
        return self._planned

    def build(self, *, batch_size, common, train_options, validation_options) -> base.Built:
        config = self.config
        files, val_files, scan, val_scan, plan = self.plan()
        kept, val_kept = self._kept
        kwargs = dict(columns=scan.columns, plan=plan, compression_type=config.compression)
        # With a row split, the scans counted each side's kept rows of every file.
        train = from_table_plan(files, scan.row_counts, batch_size=batch_size,
                                shuffle_buffer=config.shuffle_buffer, kept=kept, **kwargs,
                                options=common.merged(train_options))
        val = None
        if val_files:
            val = from_table_plan(val_files, val_scan.row_counts, batch_size=batch_size,
                                  shuffle_buffer=0, kept=val_kept, **kwargs,
                                  options=common.merged(validation_options))
        labels = plan.labels
        return base.Built(train=train, validation=val, num_classes=labels.num_classes,
                          class_names=list(labels.class_names) if labels.class_names
                          else None, train_examples=train.num_examples,
                          validation_examples=None if val is None else val.num_examples,
                          task=labels.task, num_outputs=labels.num_outputs)

    def plain_training(self, built, *, batch_size):
        # The training files and plan `build` found and checked: no second scan.
        files, _, scan, _, plan = self.plan()
        # Not training batches: no strategy in scope may drop the last partial one.
        return from_table_plan(files, scan.row_counts, columns=scan.columns, plan=plan,
                               batch_size=batch_size, shuffle_buffer=0,
                               compression_type=self.config.compression,
                               kept=self._kept[0],
                               options=tail.TailOptions(drop_remainder=False))

    def file_counts(self):
        files, _, scan, _, _ = self.plan()
        # The (kept, with a row split) rows of each training file in the order
        # from_table_plan reads them (the runner gives worker i the files i, i + n, ... of
        # that order, as it does).
        _, counts = read_order(files, list(scan.row_counts),
                               shuffled=self.config.shuffle_buffer != 0, seed=self.seed)
        return counts, "CSV files"
