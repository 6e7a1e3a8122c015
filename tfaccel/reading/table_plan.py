"""THE column plan of a table: each column's kind from its WHOLE column (or as declared), TF-free.

One pass over the rows (`scan_files`) counts, per column, the missing values (`csv_files`'
markers plus data.table.na_values), the numbers, the words, the distinct values and the
date formats every value fits; `plan_table` then decides, on the training files only:

- numeric: every present value is a number. Missing numbers are imputed with the training
  split's mean and get a 0/1 ``<column>_missing`` feature (scikit-learn's
  ``SimpleImputer(strategy="mean", add_indicator=True)``). The mean, not the median: it
  is computed in the same streaming pass, and after normalisation an imputed value is
  exactly 0, "average", with the indicator saying it was missing.
- a numeric column holding a few words (more numbers than words) is refused, naming the
  column, the line and the value, never silently made a category of every number;
  ``data.table.types: {column: string}`` makes it text on purpose.
- date: every present value is a date (or date and time) in one of `DATE_FORMATS`; it
  becomes calendar features, never one category per day: the year (normalised) and the
  month, day of week and day of year (and hour, when there are times) each as a sine and
  a cosine, so December sits next to January with 2 features where one-hot would need 12
  (TensorFlow's time series tutorial encodes time of day and year the same way).
- categorical: text (missing text is its own category), and integer codes named in
  data.table.categorical; one-hot with one out-of-vocabulary slot.
- ignored: declared (data.table.ignore, or ``types: ignore``), a column with no value,
  and an id-like text column (distinct values >= 0.9 x rows and > 50): one-hot of it
  would be one feature per row, so it is left out, said in one line; declaring it
  ``string`` keeps it as a category.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from tfaccel.errors import DataError, did_you_mean
from tfaccel.reading import csv_files, labels

# data.table.types' values.
TYPES = ("int", "float", "string", "date", "ignore")
# Distinct values kept per column while scanning (the id-like rule needs no more).
_DISTINCT_CAP = 200_000
# An id-like text column: at least this share of its values distinct, and more than _ID_MIN.
ID_SHARE, _ID_MIN = 0.9, 50
MISSING_CATEGORY = "[missing]"
_FLOAT32_MAX = 3.4028234e38
# Optional time after a date: T or a space, hours:minutes[:seconds[.fraction]][zone].
_TIME = r"(?:[T ](\d{1,2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
# (name, date pattern with three groups, what the groups are). Tried in this order: a
# column whose days are all <= 12 reads month first, as said in the plan line.
DATE_FORMATS = (
    ("YYYY-MM-DD", r"(\d{4})-(\d{1,2})-(\d{1,2})", ("year", "month", "day")),
    ("YYYY/MM/DD", r"(\d{4})/(\d{1,2})/(\d{1,2})", ("year", "month", "day")),
    ("MM/DD/YYYY", r"(\d{1,2})/(\d{1,2})/(\d{4})", ("month", "day", "year")),
    ("DD/MM/YYYY", r"(\d{1,2})/(\d{1,2})/(\d{4})", ("day", "month", "year")),
    ("DD.MM.YYYY", r"(\d{1,2})\.(\d{1,2})\.(\d{4})", ("day", "month", "year")),
)
_DATE_RES = {name: re.compile(pattern + _TIME) for name, pattern, _ in DATE_FORMATS}
_ORDERS = {name: order for name, _, order in DATE_FORMATS}
# The calendar features of a date column, each a sine and a cosine of its cycle.
CYCLES = (("month", 12), ("weekday", 7), ("yearday", 366))


def date_pattern(name: str) -> str:
    """The full regular expression (date, optional time) of the `DATE_FORMATS` entry."""
    return _DATE_RES[name].pattern


def date_order(name: str) -> Tuple[str, str, str]:
    """What the three date groups of format `name` are (e.g. day, month, year)."""
    return _ORDERS[name]


def parse_date(text: str, name: str) -> Optional[Tuple[int, int, int, int]]:
    """``(year, month, day, hour)`` of `text` in format `name`, or None if it is not one."""
    found = _DATE_RES[name].fullmatch(text)
    if found is None:
        return None
    parts = dict(zip(_ORDERS[name], (int(g) for g in found.groups()[:3])))
    hour = int(found.group(4) or 0)
    try:
        datetime.date(parts["year"], parts["month"], parts["day"])
    except ValueError:
        return None
    if hour > 23 or int(found.group(5) or 0) > 59:
        return None
    return parts["year"], parts["month"], parts["day"], hour


class ColumnScan:
    """What one pass saw of one column (counts, first missing value, first word, dates)."""

    def __init__(self, name: str, *, keep_values: bool = False):
        self.name = name
        self.present = self.missing = self.numbers = self.integers = 0
        self.total = 0.0
        self.first_missing = None  # (path, line)
        self.words = 0
        self.first_word = None  # (path, line, value)
        self.distinct = set()
        self.dates = None  # the formats every present value fits (None: none seen yet)
        self.not_date = None  # (path, line, value) that fitted no format left
        self.has_time = False
        self.year_total = 0
        self.values = [] if keep_values else None  # label columns: every value, in order
        self.lines = [] if keep_values else None

    def add(self, text: str, *, missing: bool, where: Tuple[str, int]) -> None:
        """Counts one value (`text` stripped) of the row at `where` ``(path, line)``."""
        if self.values is not None:
            self.values.append(None if missing else text)
            self.lines.append(where)
        if missing:
            self.missing += 1
            self.first_missing = self.first_missing or where
            if len(self.distinct) < _DISTINCT_CAP:
                self.distinct.add(MISSING_CATEGORY)
            return
        self.present += 1
        if len(self.distinct) < _DISTINCT_CAP:
            self.distinct.add(text)
        # A number beyond float32 would be inf in the model's input: not a number here.
        if csv_files.is_number(text) and abs(float(text)) <= _FLOAT32_MAX:
            self.numbers += 1
            self.integers += csv_files.is_integer(text)
            self.total += float(text)
            return
        self.words += 1
        if self.first_word is None:
            self.first_word = (*where, text)
        self._add_date(text, where)

    def _add_date(self, text: str, where) -> None:
        candidates = [name for name, _, _ in DATE_FORMATS] if self.dates is None \
            else self.dates
        if not candidates:
            return
        fitting, parsed = [], None
        for name in candidates:
            got = parse_date(text, name)
            if got is not None:
                fitting.append(name)
                parsed = parsed or got
        if not fitting and self.not_date is None:
            self.not_date = (*where, text)
        self.dates = fitting
        if parsed is not None:
            self.year_total += parsed[0]
            self.has_time = self.has_time or ":" in text

    def merge(self, other: "ColumnScan") -> None:
        """Adds `other`'s counts (the same column of another file)."""
        self.present += other.present
        self.missing += other.missing
        self.numbers += other.numbers
        self.integers += other.integers
        self.total += other.total
        self.words += other.words
        self.first_missing = self.first_missing or other.first_missing
        self.first_word = self.first_word or other.first_word
        self.distinct |= other.distinct
        if other.dates is not None:
            self.dates = other.dates if self.dates is None \
                else [d for d in self.dates if d in other.dates]
        self.not_date = self.not_date or other.not_date
        self.has_time = self.has_time or other.has_time
        self.year_total += other.year_total
        if self.values is not None:
            self.values += other.values
            self.lines += other.lines

    @property
    def date_format(self) -> Optional[str]:
        """The format every present value fits (the first of `DATE_FORMATS`), or None."""
        if self.words == 0 or self.numbers or not self.dates or self.not_date:
            return None
        return self.dates[0]


@dataclasses.dataclass
class TableScan:
    """One pass over a table's files: the columns, the rows of each file, each column's scan."""

    columns: List[str]
    delimiter: str
    row_counts: List[int]
    scans: Dict[str, ColumnScan]

    @property
    def rows(self) -> int:
        """Rows in all files."""
        return sum(self.row_counts)


def scan_files(files: Sequence[str], *, delimiter: Optional[str] = None,
               na_values: Sequence[str] = (), label: Sequence[str] = (),
               encoding: str = "utf-8",
               keep: Optional[Callable[[str, int], bool]] = None) -> TableScan:
    """Reads every row of `files` once and counts what each column holds.

    Args:
        files: The CSV files (one table: the same header in each).
        delimiter: The field separator (None: detected on the first file).
        na_values: More missing-value markers (data.table.na_values).
        label: The label column(s), whose every value is kept.
        encoding: The files' text encoding.
        keep: ``keep(path, row index)``: whether a row (0-based, after the header, blank
            lines not counted) belongs to this split (a split of the rows of one file);
            None: every row. Other rows are still checked for their width, not counted.

    Raises:
        DataError: A file's header differs from the first file's, or `csv_files`' errors
            (file and line named).
    """
    delimiter = csv_files.detect_delimiter(files[0], delimiter=delimiter, encoding=encoding)
    columns = csv_files.header(files[0], delimiter=delimiter, encoding=encoding)
    markers = frozenset(csv_files.missing_markers(na_values))
    total = {name: ColumnScan(name, keep_values=name in label) for name in columns}
    counts = []
    for path in files:
        names = csv_files.header(path, delimiter=delimiter, encoding=encoding)
        if names != columns:
            raise DataError(f"CSV file {path!r} has the columns {names} but {files[0]!r} has "
                            f"{columns}: every file must have the same columns.")
        scans = [ColumnScan(name, keep_values=name in label) for name in columns]
        count = 0
        for index, (line, fields) in enumerate(csv_files.rows(
                path, delimiter=delimiter, encoding=encoding, width=len(columns),
                one_line=True)):
            if keep is not None and not keep(path, index):
                continue
            where = (path, line)
            for scan, text in zip(scans, fields):
                text = text.strip()
                scan.add(text, missing=text in markers, where=where)
            count += 1
        counts.append(count)
        for scan in scans:
            total[scan.name].merge(scan)
    return TableScan(columns=columns, delimiter=delimiter, row_counts=counts, scans=total)


@dataclasses.dataclass(frozen=True)
class Column:
    """One feature column of the plan.

    Attributes:
        name: The column.
        kind: ``numeric``, ``categorical``, ``date`` or ``ignored``.
        mean: numeric: the training mean (what a missing value becomes); date: the mean year.
        missing: Missing values in the training split.
        categories: categorical: distinct values in the training split (missing included).
        date_format: date: the `DATE_FORMATS` name.
        has_time: date: whether the values hold times (an hour feature).
        reason: ignored: why (declared, no value, id-like).
    """

    name: str
    kind: str
    mean: Optional[float] = None
    missing: int = 0
    categories: int = 0
    date_format: Optional[str] = None
    has_time: bool = False
    reason: Optional[str] = None

    @property
    def features(self) -> List[Tuple[str, str]]:
        """``(feature name, how)`` of the features this column makes; how is
        ``normalized`` (mean 0, variance 1), ``passthrough`` (0/1, sine, cosine) or
        ``category``."""
        if self.kind == "numeric":
            made = [(self.name, "normalized")]
        elif self.kind == "categorical":
            return [(self.name, "category")]
        elif self.kind == "date":
            made = [(f"{self.name}_year", "normalized")]
            cycles = CYCLES + ((("hour", 24),) if self.has_time else ())
            for cycle, _ in cycles:
                made += [(f"{self.name}_{cycle}_sin", "passthrough"),
                         (f"{self.name}_{cycle}_cos", "passthrough")]
        else:
            return []
        if self.missing:
            made.append((f"{self.name}_missing", "passthrough"))
        return made

    @property
    def width(self) -> int:
        """Length of this column's part of the feature vector (one-hot: categories + 1
        out-of-vocabulary slot)."""
        if self.kind == "categorical":
            return self.categories + 1
        return len(self.features)


@dataclasses.dataclass(frozen=True)
class TablePlan:
    """Which columns become which features, and what the labels are.

    Attributes:
        columns: Every feature column's `Column`, in table order (ignored ones included).
        label: The label column names (one, or several: multi_label or regression).
        labels: The label plan (`tfaccel.reading.labels.LabelPlan`).
        label_keys: ``{label text: encoded id}`` of a classification (every text seen in
            any split); None for multi_label and regression.
        delimiter: The field separator read.
        markers: The missing-value markers.
        notes: One-line remarks said at train time (dates, id-like columns).
    """

    columns: Tuple[Column, ...]
    label: Tuple[str, ...]
    labels: labels.LabelPlan
    label_keys: Optional[Dict[str, int]]
    delimiter: str
    markers: Tuple[str, ...]
    notes: Tuple[str, ...] = ()

    def named(self, kind: str) -> List[str]:
        """The columns of `kind`, in table order."""
        return [c.name for c in self.columns if c.kind == kind]

    @property
    def kept(self) -> List[Column]:
        """The columns that make features."""
        return [c for c in self.columns if c.kind != "ignored"]

    @property
    def features(self) -> int:
        """Length of the feature vector (as Keras' FeatureSpace makes it)."""
        return sum(c.width for c in self.kept)

    def summary(self) -> dict:
        """summary.json's ``dataset.table`` (and ``tfaccel validate --show``)."""
        return {"numeric": self.named("numeric"), "categorical": self.named("categorical"),
                "date": self.named("date"), "ignored": self.named("ignored"),
                "imputed": {c.name: round(c.mean, 6) for c in self.columns
                            if c.kind == "numeric" and c.missing},
                "features": self.features}

    def line(self) -> str:
        """The plan in one short line."""
        imputed = len(self.summary()["imputed"])
        parts = [f"{len(self.named('numeric'))} numeric"
                 + (f" ({imputed} imputed, with missing indicators)" if imputed else ""),
                 f"{len(self.named('categorical'))} categorical"]
        if self.named("date"):
            parts.append(f"{len(self.named('date'))} date")
        ignored = self.named("ignored")
        return (f"table: {', '.join(parts)} column(s) as {self.features} features"
                + (f"; ignored: {', '.join(ignored)}" if ignored else "") + ".")


def _declared(types: Optional[dict], columns: Sequence[str]) -> Dict[str, str]:
    types = dict(types or {})
    for name, kind in types.items():
        if name not in columns:
            raise DataError(f"data.table.types names {name!r}, which is not a column"
                            f"{did_you_mean(str(name), list(columns))}; the columns: "
                            f"{', '.join(columns)}.")
        if kind not in TYPES:
            raise DataError(f"data.table.types[{name!r}] must be one of {list(TYPES)}, got "
                            f"{kind!r}.")
    return types


def _stray_word(scan: ColumnScan, *, declared: bool) -> DataError:
    path, line, value = scan.first_word
    how = "declared int/float in data.table.types" if declared else \
        f"{scan.numbers} of its {scan.present} present values are numbers"
    return DataError(
        f"CSV file {path!r}, line {line}, column {scan.name!r}: {value!r} is not a finite "
        "number (float32), "
        f"but the column is numeric ({how}; {scan.words} value(s) are not). Fix the value, "
        f"or list it as a missing-value marker (data.table.na_values: [{value!r}]), or "
        f"declare the column text (data.table.types: {{{scan.name}: string}}).")


def _column(scan: ColumnScan, *, declared: Optional[str], categorical: bool, rows: int,
            notes: List[str]) -> Column:
    name = scan.name
    if declared == "ignore":
        return Column(name, "ignored", reason="declared")
    if declared == "string":
        return Column(name, "categorical", missing=scan.missing,
                      categories=len(scan.distinct))
    if declared == "date" or (declared is None and scan.date_format):
        if not scan.date_format:
            path, line, value = scan.not_date or scan.first_word or (None, None, None)
            shown = f"{value!r} (CSV file {path!r}, line {line})" if value is not None \
                else "numbers"
            raise DataError(f"data.table.types declares {name!r} a date, but it holds "
                            f"{shown}, not a date in one format of "
                            f"{[f for f, _, _ in DATE_FORMATS]}.")
        fmt = scan.date_format
        notes.append(f"date column {name!r} ({fmt}{' hh:mm' if scan.has_time else ''}) as "
                     "calendar features: year, month, weekday and day of year (sine and "
                     "cosine); data.table.types: {" + name + ": ignore} leaves it out.")
        return Column(name, "date", mean=scan.year_total / max(scan.present, 1),
                      missing=scan.missing, date_format=fmt, has_time=scan.has_time)
    if declared in ("int", "float") or (declared is None and scan.words == 0
                                        and scan.present):
        if scan.words:
            raise _stray_word(scan, declared=True)
        if categorical:
            if scan.integers != scan.present:
                raise DataError(f"data.table.categorical names {name!r}, a column of "
                                "fractional numbers: only integer codes can be categories; "
                                "leave it out to normalise it as a number.")
            distinct = len(scan.distinct - {MISSING_CATEGORY})
            if distinct >= ID_SHARE * scan.present and distinct > _ID_MIN:
                raise DataError(f"data.table.categorical names {name!r}, which looks like an "
                                f"id ({distinct} distinct values in {scan.present} rows): "
                                "one-hot it would be one feature per row. Leave it out "
                                f"(data.table.ignore: [{name}]) or keep it as a number.")
            return Column(name, "categorical", missing=scan.missing,
                          categories=len(scan.distinct))
        return Column(name, "numeric", mean=scan.total / max(scan.numbers, 1),
                      missing=scan.missing)
    if scan.present == 0:
        notes.append(f"column {name!r} holds no value (all {scan.missing} missing): ignored.")
        return Column(name, "ignored", reason="no value")
    if scan.numbers > scan.words:
        raise _stray_word(scan, declared=False)
    distinct = len(scan.distinct - {MISSING_CATEGORY})
    if not categorical and distinct >= ID_SHARE * scan.present and distinct > _ID_MIN:
        notes.append(f"column {name!r} looks like an id ({distinct} distinct values in "
                     f"{scan.present} rows): ignored, as one-hot it would be one feature per "
                     f"row; data.table.types: {{{name}: string}} keeps it as a category.")
        return Column(name, "ignored", reason="id-like")
    return Column(name, "categorical", missing=scan.missing, categories=len(scan.distinct))


def _label_values(scans: Sequence[ColumnScan], *, where: str):
    """The label column(s) as one NumPy array: ints, floats or strings."""
    for scan in scans:
        if scan.missing:
            path, line = scan.first_missing
            raise DataError(
                f"CSV file {path!r}, line {line}: the label column {scan.name!r} is missing "
                f"there ({scan.missing} row(s) in all without a label). Fill the labels in "
                "or delete those rows: a row without a label cannot be trained on.")
    columns = []
    for scan in scans:
        texts = scan.values
        if scan.numbers == scan.present and scan.integers == scan.present:
            columns.append(np.array([int(t) for t in texts], np.int64))
        elif scan.numbers == scan.present:
            columns.append(np.array([float(t) for t in texts], np.float64))
        else:
            columns.append(np.array(texts, dtype=object).astype(str))
    if len(columns) == 1:
        return columns[0]
    if any(c.dtype.kind == "U" for c in columns):
        return np.stack([c.astype(str) for c in columns], axis=1)
    return np.stack([c.astype(np.float64) for c in columns], axis=1)


def plan_table(train: TableScan, *, label: Sequence[str], task: str = "auto",
               num_classes: Optional[int] = None, types: Optional[dict] = None,
               categorical: Sequence[str] = (), ignore: Sequence[str] = (),
               na_values: Sequence[str] = (), others: Sequence[TableScan] = (),
               where: str = "data.path") -> TablePlan:
    """The column plan of a table from its training files' scan.

    Args:
        train: `scan_files` of the training files (labels kept).
        label: The label column(s) (data.label_key).
        task: data.task.
        num_classes: data.num_classes.
        types: data.table.types, ``{column: int|float|string|date|ignore}``.
        categorical: data.table.categorical (integer codes one-hot).
        ignore: data.table.ignore.
        na_values: data.table.na_values.
        others: Scans of the other splits (labels kept): their labels are checked and
            keyed, and a word in a numeric column or a non-date in a date column refused.
        where: How the messages name the files.

    Raises:
        DataError: A named column that is not there, a stray word in a numeric column, a
            label the task cannot take (`labels.plan_labels`), a missing label.
    """
    columns = train.columns
    for name in label:
        if name not in columns:
            raise DataError(f"data.label_key {name!r}{did_you_mean(name, columns)} is not a "
                            f"column of {where}; its columns are {columns} (read as "
                            f"{csv_files.DELIMITER_NAMES.get(train.delimiter)}-separated).")
    declared = _declared(types, columns)
    for key, names in (("ignore", ignore), ("categorical", categorical)):
        for name in names or ():
            if name in label:
                raise DataError(f"data.table.{key} names {name!r}, the label column "
                                "(data.label_key): the label is never a feature.")
            if name not in columns:
                raise DataError(f"data.table.{key} names {name!r}, which is not a column of "
                                f"the table{did_you_mean(str(name), columns)}; its columns: "
                                f"{', '.join(columns)}.")
    notes: List[str] = []
    plan_columns = []
    for name in columns:
        if name in label:
            continue
        kind = declared.get(name, "ignore" if name in (ignore or ()) else None)
        plan_columns.append(_column(train.scans[name], declared=kind,
                                    categorical=name in (categorical or ()),
                                    rows=train.rows, notes=notes))
    for other in others:
        for column in plan_columns:
            scan = other.scans[column.name]
            if column.kind == "numeric" and scan.words:
                raise _stray_word(scan, declared=column.name in declared)
            if column.kind == "date" and scan.present and column.date_format not in (
                    scan.dates or ()):
                path, line, value = scan.not_date or scan.first_word
                raise DataError(f"CSV file {path!r}, line {line}, column {column.name!r}: "
                                f"{value!r} is not a date of the column's format "
                                f"{column.date_format}.")
    if not any(c.kind != "ignored" for c in plan_columns):
        raise DataError(f"{where} leaves no feature column: {', '.join(columns)} are the "
                        f"label or ignored.")
    label_where = f"data.label_key {label[0] if len(label) == 1 else list(label)!r} of {where}"
    values = _label_values([train.scans[n] for n in label], where=label_where)
    label_plan = labels.plan_labels(values, task=task, where=label_where,
                                    names=list(label) if len(label) > 1 else None,
                                    num_classes=num_classes)
    keys = None
    if label_plan.task in ("classification", "binary"):
        keys = {}
        for scan_set in (train, *others):
            texts = scan_set.scans[label[0]]
            _label_values([texts], where=label_where)  # a missing label in that split
            distinct = sorted(set(texts.values))
            typed = _typed(distinct, values.dtype)
            if label_plan.identity:  # encode passes ids through unchecked
                known = {str(v) for v in label_plan.values}
                unknown = [t for t, v in zip(distinct, typed) if str(v) not in known]
                if unknown:
                    raise DataError(f"{label_where} holds the label {unknown[0]!r}, not one "
                                    "of the classes seen in the training split "
                                    f"({', '.join(label_plan.class_names[:10])}).")
            encoded = label_plan.encode(typed)
            keys.update({text: int(i) for text, i in zip(distinct, encoded)})
    else:
        for other in others:
            _label_values([other.scans[n] for n in label], where=label_where)
    return TablePlan(columns=tuple(plan_columns), label=tuple(label), labels=label_plan,
                     label_keys=keys, delimiter=train.delimiter,
                     markers=csv_files.missing_markers(na_values), notes=tuple(notes))


def _typed(texts: List[str], dtype) -> np.ndarray:
    """Label texts of another split as the training labels' kind (ints, floats, strings)."""
    if dtype.kind in "iu":
        if not all(csv_files.is_integer(t) for t in texts):
            return np.array(texts)  # encode names the text it has no class for
        return np.array([int(t) for t in texts], np.int64)
    if dtype.kind == "f":
        return np.array([float(t) if csv_files.is_number(t) else np.nan for t in texts])
    return np.array(texts)


def label_columns(label_key) -> List[str]:
    """data.label_key as a list of column names (one, or several)."""
    if label_key is None:
        return []
    return [label_key] if isinstance(label_key, str) else list(label_key)


def _delimiter_key(data) -> Optional[str]:
    """data.table.delimiter as `scan_files` takes it (None: detected)."""
    key = data.table.delimiter
    return csv_files.delimiter_for(None if key == "auto" else key)


def count_rows(files: Sequence[str], *, data) -> List[int]:
    """Rows of each of `files` (blank lines not counted), by the recipe's delimiter: what a
    split of the rows of one file is drawn over (`tfaccel.data.splits.held_out_rows`).

    Raises:
        DataError: As `scan_files`.
    """
    delimiter = csv_files.detect_delimiter(files[0], delimiter=_delimiter_key(data))
    width = len(csv_files.header(files[0], delimiter=delimiter))
    return [sum(1 for _ in csv_files.rows(path, delimiter=delimiter, width=width,
                                          one_line=True)) for path in files]


def plan_for(files: Sequence[str], validation_files: Sequence[str] = (), *, data,
             keep: Optional[Callable[[str, int], bool]] = None,
             validation_keep: Optional[Callable[[str, int], bool]] = None,
             ) -> Tuple[TableScan, Optional[TableScan], TablePlan]:
    """A recipe's table: both splits scanned and the plan made, by its data section.

    Args:
        files: The training files.
        validation_files: The held-out files (may be empty).
        data: The recipe's data section (label_key, task, num_classes, path, table).
        keep: With a split of the rows of the same files, the training rows
            (`scan_files`' `keep`): the means, categories and labels of the plan come
            from them only.
        validation_keep: The validation rows of such a split.

    Returns:
        ``(training scan, validation scan or None, plan)``.

    Raises:
        DataError: As `scan_files` and `plan_table`; no data.label_key.
    """
    table = data.table
    label = label_columns(data.label_key)
    if not label:
        raise DataError("data.source csv needs data.label_key: the label column(s).")
    na_values = table.na_values or ()
    train = scan_files(files, delimiter=_delimiter_key(data), na_values=na_values, label=label,
                       keep=keep)
    if not train.rows:
        raise DataError(f"CSV {data.path!r} holds no rows, only headers ({len(files)} "
                        "training file(s)).")
    val = None
    if validation_files:
        val = scan_files(validation_files, delimiter=train.delimiter, na_values=na_values,
                         label=label, keep=validation_keep)
        if val.columns != train.columns:
            raise DataError(f"CSV file {validation_files[0]!r} has the columns {val.columns} "
                            f"but {files[0]!r} has {train.columns}: every file must have "
                            "the same columns.")
    plan = plan_table(train, label=label, task=data.task, num_classes=data.num_classes,
                      types=table.types, categorical=table.categorical or (),
                      ignore=table.ignore or (), na_values=na_values,
                      others=[val] if val is not None else [],
                      where=f"data.path {data.path!r}")
    return train, val, plan


def show(plan: TablePlan, *, rows: int) -> List[str]:
    """The plan as `tfaccel validate --show` prints it: the line, the notes, each column."""
    lines = [f"{plan.line()} ({rows} rows, "
             f"{csv_files.DELIMITER_NAMES.get(plan.delimiter, plan.delimiter)}-separated)"]
    lines += list(plan.notes)
    for column in plan.columns:
        if column.kind == "numeric":
            detail = f"mean {column.mean:.6g}" + (
                f", {column.missing} missing: imputed + indicator" if column.missing else "")
        elif column.kind == "categorical":
            detail = f"{column.categories} categories"
        elif column.kind == "date":
            detail = column.date_format
        else:
            detail = column.reason
        lines.append(f"  {column.name}: {column.kind} ({detail})")
    label = plan.labels
    names = ", ".join(label.class_names[:10]) if label.class_names else ""
    lines.append(f"  label {', '.join(plan.label)}: {label.task}, {label.num_outputs} "
                 f"output(s){': ' + names if names else ''}")
    return lines
