"""THE table of data sources: each `data.source` declared once, for every layer to derive from."""

from __future__ import annotations

import dataclasses
from typing import Literal, Optional, Tuple

# How data.path names a source's data (input_paths checks it, loading resolves it).
PathKind = Literal["folder", "glob", "file", "callable", "none"]
# Which augmentations a source takes: none (refused), image (data.augment's decoded-image
# ones) or decode (those and random_resized_crop, made while a file is decoded).
AugmentKind = Literal["none", "image", "decode"]
# How a source holds out data.validation_fraction: one rule per family of sources. The
# count is tfaccel's round(f * n) (tfaccel.data.splits.held_out_count) unless a rule says
# why not; each rule below exists for the reason in its comment.
SplitRule = Literal["named", "round", "keras_int", "last_rows_int"]
SPLIT_RULES = {
    # Sources that hold named splits (TFDS, Keras' .npz layout): the name chooses, and a
    # fraction is round(f * n) examples of data.train_split. TFDS takes its tail (TFDS
    # reads its record files in order and slices by index: a seeded choice would read
    # every file), .npz x/y a seeded choice (in memory, any order is free).
    "named": "named splits (data.train_split, data.validation_split_name); a fraction is "
             "round(f * n) examples of data.train_split: its tail (TFDS) or a seeded "
             "choice (x/y of an .npz file)",
    # tfaccel's own readers (file globs, Python sources): a seeded round(f * n); whole
    # files where there are enough (tfaccel.reading.split_rule.whole_files decides), so a
    # file is read by one side only.
    "round": "a seeded round(f * n): of the files when that is at least one file and leaves "
             "one for training, else of the examples of all the files (one file or a Python "
             "source: its examples); or data.validation_path's files, whole",
    # Keras' drop-ins: exactly Keras' files, judged by Keras' own tests
    # (get_training_or_validation_split), so Keras' int(f * n) and its permutation.
    "keras_int": "Keras' int(f * n) files (validation_split, subset='both', the recipe's seed)",
    # A series: a random choice of overlapping windows would validate on the training
    # rows' future, so the last rows, in time order; int(f * n) as Keras' loaders count
    # (round would move the boundary of existing recipes' series by a row).
    "last_rows_int": "the last int(f * n) rows, in time order",
}

# What a recipe that sets another source's own key (`SourceEntry.own_keys`) does instead.
OWN_KEY_INSTEAD = {"validation_path": "use data.validation_fraction"}
# The file-glob sources' own keys: a validation file or glob, read whole.
_VALIDATION_FILES = dict(own_keys=("validation_path",),
                         extra_paths=(("validation_path", "glob"),))


@dataclasses.dataclass(frozen=True)
class SourceEntry:
    """One `data.source`: where its data is, what it needs and reads, and its builder.

    Attributes:
        name: The `data.source` value.
        builder: The data layer's `base.Source` class as ``module:Class`` (a string, so this
            layer stays TensorFlow-free; `tfaccel.data.from_recipe` resolves it).
        path: What data.path is: a folder, a file glob, one file, a ``module:callable``, or
            none (the data is found by data.name).
        noun: What data.path names, for messages ("image folder", "TFRecord pattern").
        summary: Its words in data.source's help ("" for none).
        required: ``(data key, what it holds)`` of each key this source cannot do without
            (data.path besides, unless `path` is none).
        own_keys: The data keys only some sources read, that this one reads (a recipe
            setting one for another source is refused).
        extra_paths: ``(data key, path kind)`` of its other input paths, checked as
            data.path is.
        compressions: The data.compression values it reads (empty: none).
        augment: Which data.augment values it takes.
        split: How data.validation_fraction holds out data (a `SPLIT_RULES` key).
        reading: How its files are read (encoding, compression, header).
        classes_from: Where its classes come from, for the one-class message ("": from
            data.label_key's column or feature).
        python_elements: Its elements come from Python code in this process
            (from_generator, py_function): a tf.data service cannot run it.
        table_columns: Its examples are rows of named columns, made one vector by Keras'
            FeatureSpace (data.table).
    """

    name: str
    builder: str
    path: PathKind
    noun: str = ""
    summary: str = ""
    required: Tuple[Tuple[str, str], ...] = ()
    own_keys: Tuple[str, ...] = ()
    extra_paths: Tuple[Tuple[str, PathKind], ...] = ()
    compressions: Tuple[str, ...] = ()
    augment: AugmentKind = "image"
    split: SplitRule = "round"
    reading: str = ""
    classes_from: str = ""
    python_elements: bool = False
    table_columns: bool = False


_SOURCES = "tfaccel.data.sources."
_FOLDER_CLASSES = "its class sub-folders"

# The order is data.source's help and its error messages' order.
TABLE: Tuple[SourceEntry, ...] = (
    SourceEntry("builtin", _SOURCES + "tfds:TfdsSource", "none",
                summary="generated, no network", split="named",
                reading="the built-in TFDS dataset data.name (default tfaccel_shapes)"),
    SourceEntry("tfds", _SOURCES + "tfds:TfdsSource", "none", split="named",
                required=(("data.name", "a TFDS dataset name"),),
                reading="a prepared TFDS dataset (data.download lets TFDS prepare it)"),
    SourceEntry("image_folder", _SOURCES + "image_folder:ImageFolderSource", "folder",
                noun="image folder", augment="decode", split="keras_int",
                required=(("data.image_size", "[height, width]"),),
                reading="JPEG, PNG, BMP, GIF files in class sub-folders, decoded to "
                        "data.channels", classes_from=_FOLDER_CLASSES),
    SourceEntry("text_folder", _SOURCES + "text_folder:TextFolderSource", "folder",
                noun="text folder", summary="a .txt file per example in class sub-folders",
                split="keras_int", reading="UTF-8 .txt files, as Keras' text_dataset_from_"
                "directory", classes_from=_FOLDER_CLASSES),
    SourceEntry("text_lines", _SOURCES + "text_lines:TextLinesSource", "glob",
                noun="text lines pattern",
                summary="text files of one label<TAB>text example per line",
                **_VALIDATION_FILES, compressions=("GZIP", "ZLIB"), reading="UTF-8 lines; compression by data.compression, "
                "else by each file's extension (.gz, .zz)",
                classes_from="the label field of its lines (the text before the first tab)"),
    SourceEntry("csv", _SOURCES + "csv_tables:CsvSource", "glob", noun="CSV pattern",
                summary="CSV files with a header; label_key names the label column",
                compressions=("GZIP",), table_columns=True, **_VALIDATION_FILES,
                reading="UTF-8 CSV with a header row, by tfaccel's one CSV reader "
                        "(delimiter detected, BOM, CRLF, quotes, blank lines skipped); "
                        "GZIP by data.compression or a .gz name"),
    SourceEntry("tfrecords", _SOURCES + "tfrecords:TfrecordsSource", "glob",
                noun="TFRecord pattern", compressions=("GZIP", "ZLIB"), **_VALIDATION_FILES,
                required=(("data.features", "the TFRecord feature spec"),),
                reading="tf.train.Example records parsed by data.features; every file read "
                        "once first unless data.verify_records is false"),
    SourceEntry("arrays", _SOURCES + "arrays:ArraysSource", "file", noun="arrays file",
                summary=".npz of x/y, or Keras' x_train/y_train/x_test/y_test",
                split="named", reading="one .npz file (numpy)",
                classes_from="its labels (y)"),
    SourceEntry("python", _SOURCES + "python:PythonSource", "callable", noun="python source",
                summary="a `module:callable` source run in worker processes",
                split="round", python_elements=True,
                reading="the callable's examples, made in "
                "data.workers processes or threads"),
    SourceEntry("audio_folder", _SOURCES + "audio_folder:AudioFolderSource", "folder",
                noun="audio folder", summary="a .wav file per example in class sub-folders",
                augment="none", split="keras_int", reading="16-bit PCM or float .wav files, "
                "as Keras' audio_dataset_from_directory", classes_from=_FOLDER_CLASSES),
    SourceEntry("timeseries", _SOURCES + "timeseries:TimeseriesSource", "file",
                noun="time series CSV file",
                summary="windows of the rows of one CSV file; label_key names the label "
                        "column(s), or the forecast series with timeseries.horizon",
                required=(("data.timeseries.sequence_length", "rows in each window"),),
                augment="none", split="last_rows_int",
                reading="one UTF-8 CSV file with a header row, rows in time order"),
)


def names() -> Tuple[str, ...]:
    """The allowed `data.source` values, in the table's order."""
    return tuple(e.name for e in TABLE)


def entry(name: str) -> Optional[SourceEntry]:
    """The table's entry of `data.source` `name`, or None when no source has that name."""
    return next((e for e in TABLE if e.name == name), None)


def with_split(rule: str) -> Tuple[str, ...]:
    """The sources whose data.validation_fraction follows `rule` (e.g. "named")."""
    return tuple(e.name for e in TABLE if e.split == rule)


def own_key_readers(key: str) -> Tuple[str, ...]:
    """The sources that read `key`, one of the data keys only some sources read."""
    return tuple(e.name for e in TABLE if key in e.own_keys)




def path_keys(source: SourceEntry) -> Tuple[Tuple[str, PathKind], ...]:
    """``(data key, path kind)`` of each input path of `source`: data.path, then its own."""
    own = tuple(source.extra_paths)
    return own if source.path == "none" else (("path", source.path), *own)


def help_text() -> str:
    """data.source's help: every source, with its words where it has some."""
    parts = [f"{e.name} ({e.summary})" if e.summary else e.name for e in TABLE]
    return ", ".join(parts[:-1]) + " or " + parts[-1] + "."


def compression_help() -> str:
    """Which sources read which data.compression values, for its help."""
    readers: dict = {}
    for e in TABLE:
        if e.compressions:
            readers.setdefault(e.compressions, []).append(e.name)
    return ", ".join(f"{' or '.join(c)} ({', '.join(n)})" for c, n in readers.items())


# Every data.compression value some source reads: data.compression's allowed values.
COMPRESSIONS = tuple(sorted({c for e in TABLE for c in e.compressions}))
