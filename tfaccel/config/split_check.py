"""TensorFlow-free check that a recipe's validation_fraction leaves examples on both sides."""

from __future__ import annotations

import glob
from typing import Optional

from tfaccel.config import input_paths, sources
from tfaccel.errors import RecipeError
from tfaccel.reading import csv_files, split_rule

# How each file-glob source's examples are counted without TensorFlow, and their name.
_COUNTS = {"csv": (split_rule.count_csv_rows, "rows"),
           "text_lines": (split_rule.count_lines, "non-empty lines"),
           "tfrecords": (split_rule.count_records, "records")}


def check_split(recipe, *, source: str = "recipe") -> Optional[str]:
    """Refuses a data.validation_fraction that leaves no training (or no validation) example.

    What it can check: csv, tfrecords and text_lines files split by rows (too few files
    for whole ones, `split_rule.whole_files`), counted here without TensorFlow (CSV
    records, non-empty text lines, TFRecord records by their headers). Whole files always
    leave one file on each side. Not checked (said in the returned note): compressed
    TFRecord files and ZLIB files (counting them means inflating them: the run counts
    them), remote paths, and the other sources (their counts need TensorFlow or the
    user's code; the run refuses an empty split with the same message).

    Args:
        recipe: A validated `Recipe` whose input paths exist (`check_input_paths`).
        source: The recipe's name for messages.

    Returns:
        None, or a one-line note of what could not be checked.

    Raises:
        RecipeError: The split leaves a side empty, naming data.validation_fraction,
            data.path, the files and the examples counted.
    """
    data = recipe.data
    fraction = data.validation_fraction
    entry = sources.entry(data.source)
    if (not fraction or data.validation_path or data.source not in _COUNTS
            or entry.split != "round"):
        return None
    if input_paths.is_remote(data.path):
        return f"data.path {data.path!r} is remote: the split is checked when the run reads it."
    files = sorted(glob.glob(data.path))
    if not files or split_rule.whole_files(len(files), fraction):
        return None
    count, what = _COUNTS[data.source]
    # A csv file is counted with the recipe's delimiter, as the run reads it.
    given = ({"delimiter": csv_files.delimiter_for(data.table.delimiter)}
             if data.source == "csv" else {})
    counts = [count(f, compression=data.compression, **given) for f in files]
    if None in counts:
        return (f"the examples of {files[counts.index(None)]!r} are not counted without "
                "TensorFlow (compressed): the split is checked when the run reads it.")
    n = sum(counts)
    held = split_rule.held_out(n, fraction)
    if n and held < n:
        return None
    raise RecipeError(
        f"{source}: data.validation_fraction {fraction} of data.path {data.path!r} "
        f"({len(files)} file(s), too few to hold out whole ones, so their {what} are split: "
        f"{n} in all) holds out {min(held, n)} and leaves {max(n - held, 0)} for training: "
        f"{'no' if n else 'no examples, so no'} training {what}. Lower "
        "data.validation_fraction, add examples to data.path, or name the validation "
        "examples with data.validation_path (and data.validation_fraction: 0).")
