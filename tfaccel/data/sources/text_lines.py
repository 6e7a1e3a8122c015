"""Text files of one example per line, read in parallel, as a batched tf.data pipeline."""

from __future__ import annotations

import dataclasses
import logging
import os
import reprlib
from typing import List, NamedTuple, Optional, Sequence, Union

import numpy as np
import tensorflow as tf

from tfaccel.data import files_stage, tail, text_files
from tfaccel.data.sources import base, class_folder
from tfaccel.data.text_files import as_utf8, check_encoding
from tfaccel.errors import DataError, UserInputError
from tfaccel.reading import labels as label_rule

logger = logging.getLogger(__name__)

FIRST_FIELD = "first_field"
_COMPRESSIONS = (None, "", "GZIP", "ZLIB")
# Default shuffle buffer (lines: strings of a few hundred bytes). Files are also shuffled
# and read 16 at a time, so the buffer need not hold a whole file.
_DEFAULT_SHUFFLE = 10_000
_PARSE_BATCH = 256  # lines parsed by one call (see _examples)


class _Scan(NamedTuple):
    """What one pass over a file found: usable or not, its examples and their labels."""

    decodes: bool
    examples: int
    labels: frozenset
    bad_line: Optional[int]  # the first line without the separator (1-based), if any
    line_labels: tuple = ()  # each example's label, in order (asked for by a row split)


def list_text_files(paths) -> List[str]:
    """The files of `paths` (a path, a glob, or a list of them), each glob sorted
    (`files_stage.list_files`)."""
    return files_stage.list_files(paths, what="Text file")


def _scan(path: str, *, encoding: Optional[str], skip_header_lines: int,
          separator: Optional[str], compression: Optional[str],
          per_line: bool = False) -> _Scan:
    """Reads a file once: does it decode, how many non-empty lines, which labels.

    Raises:
        DataError: The file cannot be read, or its compressed stream is cut short or
            corrupt (`text_files`); a file that does not decode is not an error here: it
            is skipped, and named in one warning.
    """
    data = text_files.read_bytes(path, compression=text_files.compression_of(path, compression))
    try:
        text = text_files.decode(data, path=path, encoding=encoding)
    except text_files.NotText:
        return _Scan(False, 0, frozenset(), None)
    # The lines TextLineDataset yields: split on "\n", a trailing "\r" dropped, no line
    # after a final newline.
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    labels, bad_line, examples, line_labels = set(), None, 0, []
    for number, line in enumerate(lines[skip_header_lines:], start=skip_header_lines + 1):
        if not line:
            continue
        examples += 1
        if separator is not None:
            label, found, _ = line.partition(separator)
            if not found and bad_line is None:
                bad_line = number
            labels.add(label)
            if per_line:
                line_labels.append(label)
    return _Scan(True, examples, frozenset(labels), bad_line, tuple(line_labels))


def _file_labels(labels, files: List[str], class_names) -> tuple:
    """Keras-style given labels, one per file: ``(labels, class names)``."""
    if len(labels) != len(files):
        raise UserInputError(
            f"labels gives one label per file: expected {len(files)} (the files of paths, "
            f"each glob sorted), got {len(labels)}: labels={reprlib.repr(labels)}.")
    labels = class_folder.integer_labels(labels)
    names = list(class_names) if class_names is not None else [
        str(v) for v in sorted(set(labels))]  # as Keras names given labels
    if min(labels) < 0 or max(labels) >= len(names):
        raise UserInputError(f"labels must be in [0, {len(names)}) for class_names="
                             f"{names}, got labels={reprlib.repr(labels)}.")
    return labels, names


def _encode_label(index, *, label_mode: str, num_classes: int):
    """Label indices [N] in Keras' encodings (see `class_folder.labels_as`)."""
    if label_mode == "int":
        return tf.cast(index, tf.int32)
    if label_mode == "categorical":
        return tf.one_hot(index, num_classes, dtype=tf.float32)
    return tf.reshape(tf.cast(index, tf.float32), [-1, 1])  # binary


def _in_line(labels) -> bool:
    """Whether labels are read from each line (a str test: `labels` may be an array)."""
    return isinstance(labels, str) and labels == FIRST_FIELD


def _check_arguments(*, labels, label_mode, separator, encoding, compression,
                     skip_header_lines, max_length, verify, class_names):
    in_line = _in_line(labels)
    if not (labels is None or in_line or isinstance(labels, (list, tuple))):
        raise UserInputError(
            f"labels must be None (lines alone), a list of integer labels (one per file) "
            f"or {FIRST_FIELD!r} (each line is label{{separator}}text); got "
            f"labels={reprlib.repr(labels)}.")
    if label_mode not in class_folder.LABEL_MODES:
        raise UserInputError(f"`label_mode` argument must be one of "
                             f"{class_folder.LABEL_MODES}, got label_mode={label_mode!r}.")
    if in_line and (not isinstance(separator, str) or not separator
                                  or "\n" in separator):
        raise UserInputError(f"separator must be a non-empty string without a newline, "
                             f"got separator={separator!r}.")
    if in_line and not verify and class_names is None:
        raise UserInputError(
            "labels='first_field' with verify=False needs class_names (the labels are "
            "otherwise found by reading every file before training).")
    if labels is None and class_names is not None:
        raise UserInputError(f"class_names names the labels; with labels=None there are "
                             f"none; got class_names={class_names!r}.")
    if compression not in _COMPRESSIONS:
        raise UserInputError(f"compression must be None, 'GZIP' or 'ZLIB', got "
                             f"{compression!r}.")
    if encoding is not None and "\n".encode(encoding) != b"\n":
        # TextLineDataset splits bytes at b"\n": only encodings that write "\n" so work.
        raise UserInputError(
            f"encoding={encoding!r} does not write a newline as the byte 0x0A, so its lines "
            "cannot be split; re-encode the files (e.g. to UTF-8) or use from_text_folder.")
    for name, value in (("skip_header_lines", skip_header_lines),
                        ("max_length", 0 if max_length is None else max_length)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise UserInputError(f"{name} must be an integer >= 0, got {name}={value!r}.")


def from_text_lines(paths: Union[str, os.PathLike, Sequence[Union[str, os.PathLike]]], *,
                    batch_size: Optional[int] = 32,
                    labels: Union[None, str, Sequence[int]] = None, separator: str = "\t",
                    class_names: Optional[Sequence[str]] = None,
                    label_mode: Optional[str] = "int", max_length: Optional[int] = None,
                    shuffle: bool = True, shuffle_buffer: Optional[int] = None,
                    seed: Optional[int] = None, skip_header_lines: int = 0,
                    encoding: Optional[str] = "utf-8", compression: Optional[str] = None,
                    verify: bool = True, cycle_length: Optional[int] = None,
                    cache=None, deterministic: Optional[bool] = None,
                    input_context: Optional[tf.distribute.InputContext] = None,
                    rows: Optional[files_stage.RowSplit] = None,
                    augment=None, augment_on="batch", drop_remainder=None,
                    num_parallel_calls=tail.AUTOTUNE, private_threads=None,
                    ram_budget_bytes=None, shard_policy=None, image_dtype="float32",
                    sequential=False, stream=None, service=None, batch_by_length=False,
                    **unknown) -> tf.data.Dataset:
    """Builds batches from text files holding one example per line.

    Example::

        # train.tsv: "pos<TAB>a fine film" on each line
        train = tfaccel.data.from_text_lines("data/train-*.tsv", labels="first_field",
                                             batch_size=64, seed=0)
        # one file per class: every line of neg.txt is label 0, of pos.txt label 1
        train = tfaccel.data.from_text_lines(["neg.txt", "pos.txt"], labels=[0, 1],
                                             class_names=["neg", "pos"])

    Lines are read by `tf.data.TextLineDataset`, `cycle_length` files at a time in a
    parallel interleave; empty lines are skipped. When shuffling, the files are permuted
    once, seeded (`tfaccel.data.order`: the same file order for the same seed, before any
    cache) and reshuffled each epoch without a cache, and lines go through a seeded
    shuffle buffer. Texts are UTF-8 strings like `from_text_folder`'s, labels in Keras'
    encodings.

    Before training every file is read once (`verify`, through `tfaccel.data.text_files`):
    it must decode with `encoding` (a file that does not is skipped and named in ONE
    warning; a compressed file cut short or corrupt is a `DataError` naming it), a UTF-8
    byte-order mark is not part of the first line, its examples are counted
    (``ds.num_examples``), and with ``labels="first_field"`` its labels are collected
    (the class names) and a line without `separator` is a `DataError` naming the file
    and line.

    Args:
        paths: A file, a glob, or a list of them; each glob is sorted (``ds.files``).
        batch_size: The GLOBAL batch size; None yields single examples.
        labels: None (texts alone), a list of integer labels (one per file of `paths`,
            every line of a file gets its label), or ``"first_field"``: each line is
            ``label<separator>text``, the label being the text before the first separator.
        separator: Ends the label of ``labels="first_field"`` (default a tab).
        class_names: The labels' names, in label order. With ``"first_field"`` they are
            the label strings expected (None: the distinct labels found, sorted); with a
            list of labels, names for 0, 1, ... (None: the labels as strings, as Keras).
        label_mode: "int" (int32 [B]), "categorical" (one-hot float32 [B, classes]),
            "binary" (float32 [B, 1], two classes only) or None (texts alone).
        max_length: Cut every text to its first `max_length` bytes (of UTF-8).
        shuffle: Shuffle files and lines (False: the files of `paths` in order, their
            lines in file order, several files interleaved in a fixed order).
        shuffle_buffer: Lines in the shuffle buffer (None: up to 10,000).
        seed: Seeds the file order and the shuffle (None: different every run).
        skip_header_lines: Lines skipped at the start of each file.
        encoding: The files' encoding (ASCII-compatible: a newline is the byte 0x0A);
            texts are transcoded to UTF-8.
        compression: None (each file by its extension: ``.gz`` GZIP, ``.zz`` or ``.zlib``
            ZLIB, else none), "GZIP" or "ZLIB".
        verify: Read every file before training (see above). False: only compressed
            files are inflated once to their end marker (TensorFlow's reader stops
            silently where a stream is cut short), a cut one named in a `DataError`.
        cycle_length: Files read at once (None: min(files, 16)).
        cache: None, ``"memory"`` or a file path; see `tfaccel.data.optimize`
            (fingerprinted with the files, their order and every read setting).
        deterministic: Keep the element order fixed (None: when a `seed` is given or not
            shuffling).
        input_context: From ``distribute_datasets_from_function``: by file, or by
            example with fewer files than pipelines (`files_stage.split_for_workers`).
        rows: One side of a split of the examples (non-empty lines) of these files (a
            recipe's validation_fraction with too few files for whole ones,
            `files_stage.split_files`): only that side's lines are read, before any
            shuffle or worker split. The files are then read up front even without
            `verify` (to count their lines).
        augment: Augmentation names or a callable (`optimize`'s `augment`).
        augment_on: Where a callable `augment` runs (`optimize`'s `augment_on`).
        drop_remainder: None: True when more than one replica is in sync.
        num_parallel_calls: Parallelism of the maps (AUTOTUNE).
        private_threads: As `optimize`'s.
        ram_budget_bytes: As `optimize`'s.
        shard_policy: As `optimize`'s.
        image_dtype: uint8 images are cast to this dtype after the cache (None: kept uint8).
        sequential: The benchmarks' truly sequential pipeline (`optimize`'s).
        stream: An `EpochStream`: a resumable stream of passes (`optimize`'s).
        service: A `ServiceTarget`: run the tail on a tf.data service (`optimize`'s).
        batch_by_length: Batch texts and sequences of similar length together (`optimize`'s).
        **unknown: Refused, naming the nearest keyword (`tail.refuse_unknown`).

    Returns:
        A `tf.data.Dataset` of ``(texts tf.string [B], labels)`` (texts alone without
        labels) with attributes ``files`` (the usable files, in the order of `paths`),
        ``class_names``, ``num_examples`` (non-empty
        lines of the usable files; None without `verify`) and ``skipped_files``.

    Raises:
        DataError: A path that matches no file, no usable file, a compressed file cut
            short, files without a non-empty line, a line without the separator, a label
            not in `class_names`.
        UserInputError: A bad argument value.
    """
    tail.refuse_unknown(unknown, builder=from_text_lines)
    options = tail.TailOptions(
        seed=seed, cache=cache, deterministic=deterministic, input_context=input_context,
        augment=augment, augment_on=augment_on, drop_remainder=drop_remainder,
        num_parallel_calls=num_parallel_calls, private_threads=private_threads,
        ram_budget_bytes=ram_budget_bytes, shard_policy=shard_policy, image_dtype=image_dtype,
        sequential=sequential, stream=stream, service=service,
        batch_by_length=batch_by_length)
    return text_lines_dataset(
        paths, batch_size=batch_size, labels=labels, separator=separator,
        class_names=class_names, label_mode=label_mode, max_length=max_length,
        shuffle=shuffle, shuffle_buffer=shuffle_buffer, skip_header_lines=skip_header_lines,
        encoding=encoding, compression=compression, verify=verify, cycle_length=cycle_length,
        rows=rows, options=options)


def text_lines_dataset(paths, *, batch_size: Optional[int], options: tail.TailOptions,
                       labels: Union[None, str, Sequence[int]] = None, separator: str = "\t",
                       class_names: Optional[Sequence[str]] = None,
                       label_mode: Optional[str] = "int", max_length: Optional[int] = None,
                       shuffle: bool = True, shuffle_buffer: Optional[int] = None,
                       skip_header_lines: int = 0, encoding: Optional[str] = "utf-8",
                       compression: Optional[str] = None, verify: bool = True,
                       cycle_length: Optional[int] = None,
                       rows: Optional[files_stage.RowSplit] = None) -> tf.data.Dataset:
    """`from_text_lines` with the tail's options as one `TailOptions` (what the source
    calls; ``deterministic`` None or unset: fixed when a seed is given or when not
    shuffling); the other arguments and their defaults as `from_text_lines`'."""
    # The caller's own order switch (None: decided here), then only what the caller chose:
    # this source decides the rest (the shard policy).
    deterministic = None if options.deterministic is tail.UNSET else options.deterministic
    options = options.without(["deterministic"]).chosen()
    resolved = options.resolved()
    seed, cache, input_context = resolved.seed, resolved.cache, resolved.input_context
    if isinstance(labels, np.ndarray):
        labels = labels.tolist()
    if labels is None or label_mode is None:
        labels, label_mode = None, None
    _check_arguments(labels=labels, label_mode=label_mode, separator=separator,
                     encoding=encoding, compression=compression,
                     skip_header_lines=skip_header_lines, max_length=max_length,
                     verify=verify, class_names=class_names)
    encoding = check_encoding(encoding)
    shuffle_buffer = class_folder.keras_shuffle(shuffle, shuffle_buffer)
    files = list_text_files(paths)
    file_labels, names = [0] * len(files), None
    if isinstance(labels, (list, tuple)):
        file_labels, names = _file_labels(labels, files, class_names)
    in_line = _in_line(labels)
    num_examples, skipped, kept_lines = None, [], None
    # A row split counts each file's lines, unless given the counts.
    verify = verify or (rows is not None and rows.counts is None)
    if verify:
        scans = files_stage.count_each(files, lambda f: _scan(
            f, encoding=encoding, skip_header_lines=skip_header_lines,
            separator=separator if in_line else None, compression=compression,
            per_line=rows is not None))
        skipped = [f for f, s in zip(files, scans) if not s.decodes]
        for f, s in zip(files, scans):
            if s.bad_line is not None:
                raise DataError(f"Line {s.bad_line} of {f!r} has no label: with "
                                f"labels='first_field' each line is label{separator!r}text.")
        kept = [i for i, s in enumerate(scans) if s.decodes]
        if not kept:
            raise DataError(f"No usable text file in paths={reprlib.repr(paths)}: "
                            f"{len(files)} file(s), none {encoding or 'UTF-8'} text "
                            f"(e.g. {files[:class_folder.SHOW_PATHS]}); pass encoding=... "
                            "for another encoding.")
        if skipped:
            logger.warning(
                "Skipped %d text file(s) that are not %s text (pass encoding=..., e.g. "
                "encoding='latin-1', to read another encoding): %s", len(skipped),
                encoding or "UTF-8", skipped[:class_folder.SHOW_PATHS]
                + (["..."] if len(skipped) > class_folder.SHOW_PATHS else []))
        if in_line:
            found = sorted(set().union(*(scans[i].labels for i in kept)))
            if class_names is None:
                names = found
            else:
                unknown = sorted(set(found) - set(class_names))
                if unknown:
                    owner = next(files[i] for i in kept if scans[i].labels & set(unknown))
                    raise DataError(f"{owner!r} has label(s) {unknown[:5]} not in "
                                    f"class_names={list(class_names)}.")
        num_examples = sum(scans[i].examples for i in kept)
        if num_examples == 0:
            raise text_files.refuse_empty(
                files[kept[0]], what="Text file" if len(kept) == 1
                else f"Every text file of paths={reprlib.repr(paths)}, e.g.",
                needs="one non-empty line" + (f" after skip_header_lines={skip_header_lines}"
                                              if skip_header_lines else ""))
        files = [files[i] for i in kept]
        file_labels = [file_labels[i] for i in kept]
        kept_lines = files_stage.kept_rows(rows, files, [scans[i].examples for i in kept],
                                           what="text lines")
        if kept_lines is not None:
            num_examples = sum(kept_lines.counts(files))
            if in_line and class_names is None:
                # The classes of this split's lines, not of every line of its files: a
                # label seen only in the other split is not a class without examples.
                masks = dict(zip(kept_lines.files, kept_lines.masks))
                names = sorted({label for f, i in zip(files, kept)
                                for label, keep in zip(scans[i].line_labels, masks[f])
                                if keep})
    else:
        # Nothing read up front, but TensorFlow's reader stops silently where a compressed
        # stream is cut short: each compressed file is inflated once (text_files).
        files_stage.count_each(files, lambda f: text_files.check_complete(
            f, compression=text_files.compression_of(f, compression)))
        kept_lines = files_stage.kept_rows(rows, files, None, what="text lines")
        if kept_lines is not None:
            num_examples = sum(kept_lines.counts(files))
    if in_line and names is None:
        names = list(class_names)
    if label_mode == "binary" and len(names) != 2:
        raise UserInputError(f'When passing `label_mode="binary"`, there must be exactly 2 '
                             f"classes; got class_names={names}.")
    listed = files  # ds.files: the order `labels` counts in
    shuffled = shuffle_buffer != 0
    # The one seeded permutation (files_stage.read_order), the same in every worker.
    files, file_labels = files_stage.read_order(files, file_labels, shuffled=shuffled,
                                                seed=seed, input_context=input_context)
    if shuffle_buffer is None:
        shuffle_buffer = min(num_examples or _DEFAULT_SHUFFLE, _DEFAULT_SHUFFLE) or 1
    if deterministic is None:
        deterministic = not shuffled or seed is not None
    options, (files, file_labels) = files_stage.split_for_workers(
        files, file_labels, options=dataclasses.replace(options, deterministic=deterministic))
    fingerprint = files_stage.fingerprint_cache(
        cache=cache, builder="from_text_lines", files=files, seed=seed,
        shuffled=shuffled,
        labels=labels if not isinstance(labels, (list, tuple)) else file_labels,
        separator=separator, class_names=names, label_mode=label_mode,
        max_length=max_length, encoding=encoding, skip_header_lines=skip_header_lines,
        compression=compression,
        **(kept_lines.describe() if kept_lines is not None else {}))
    examples = _examples(
        _read_lines(files, file_labels if isinstance(labels, (list, tuple)) else None,
                    shuffle_files=shuffled and not cache, seed=seed,
                    skip_header_lines=skip_header_lines, compression=compression,
                    strip_bom=encoding is None, cycle_length=cycle_length,
                    options=options, kept=kept_lines),
        parse=_parser(labels=labels, names=names, separator=separator,
                      label_mode=label_mode, encoding=encoding, max_length=max_length),
        options=options)
    options = files_stage.choose_shard_policy(options, num_files=len(files))
    dataset = tail.build(examples, batch_size=batch_size, options=options,
                         source=tail.SourceStages(shuffle_buffer=shuffle_buffer,
                                                  cache_fingerprint=fingerprint))
    dataset.files = listed
    dataset.class_names = names if label_mode is not None else None
    dataset.num_examples = num_examples
    dataset.skipped_files = skipped
    dataset.kept_rows = kept_lines
    return dataset


def _read_lines(files, file_labels, *, shuffle_files: bool, seed, skip_header_lines: int,
                compression, strip_bom: bool, cycle_length, options: tail.TailOptions,
                kept=None):
    """The lines of `files` (with their file's label, given `file_labels`), several files
    read at once; with `kept` (a row split) only its examples: the non-empty lines, the
    ones it keeps (`files_stage.keep_rows`)."""
    # Each file's compression: the declared one, or its extension's (text_files).
    compressions = [text_files.compression_of(f, compression) or "" for f in files]
    columns = (tf.constant(files, tf.string), tf.constant(compressions, tf.string))
    file_ds = tf.data.Dataset.from_tensor_slices(
        columns if file_labels is None else columns + (tf.constant(file_labels, tf.int32),))
    if shuffle_files:
        file_ds = files_stage.shuffle_each_pass(file_ds, num_files=len(files), seed=seed,
                                                options=options)

    def lines_of(path, compression_type, label=None):
        lines = tf.data.TextLineDataset(path, compression_type=compression_type)
        if strip_bom:
            # A byte-order mark starts the first line only: one map on that line, not a
            # function call per line (text_files drops it in the up-front read).
            lines = lines.take(1).map(
                lambda line: tf.strings.regex_replace(line, "^\ufeff", "")).concatenate(
                    lines.skip(1))
        lines = lines.skip(skip_header_lines)
        if kept is not None:
            # A row split counts examples, the non-empty lines (as the up-front read):
            # the empty ones go before its mask, a batch at a time.
            lines = lines.batch(_PARSE_BATCH).map(
                lambda batch: tf.boolean_mask(batch, tf.strings.length(batch) > 0)).unbatch()
        if label is None:
            return lines
        # A zip, not a map: no function call per line.
        return tf.data.Dataset.zip((lines, tf.data.Dataset.from_tensors(label).repeat()))

    return files_stage.interleave(file_ds, files_stage.keep_rows(lines_of, kept),
                                  num_files=len(files),
                                  cycle_length=cycle_length, options=options)


def _examples(lines, *, parse, options: tail.TailOptions):
    """Examples from lines, parsed 256 at a time.

    Per line, a map (or a filter) is a function call of tf.data's: ~100 us on these
    machines, more than parsing a line. On batches of lines the same ops run once per
    256 (measured: 8,200 -> 100,000 lines/s on 2 cores, benchmarks/bench_data_text.py).
    """
    resolved = options.resolved()
    return lines.batch(_PARSE_BATCH).map(
        parse, num_parallel_calls=None if resolved.sequential else tail.AUTOTUNE,
        deterministic=resolved.deterministic or None).unbatch()


def _parser(*, labels, names, separator: str, label_mode, encoding, max_length):
    """``fn(lines[, file labels]) -> (texts, labels)`` (or texts alone) on a batch of lines.

    Empty lines are dropped here.
    """
    table = None
    if _in_line(labels):
        table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(tf.constant(names, tf.string),
                                                tf.range(len(names), dtype=tf.int64)),
            default_value=-1)

    def parse(lines, file_labels=None):
        keep = tf.strings.length(lines) > 0
        lines = tf.boolean_mask(lines, keep)
        index = None if file_labels is None else tf.boolean_mask(file_labels, keep)
        if table is not None:
            # [label, text] per line; a line without the separator: [label, ""].
            fields = tf.strings.split(lines, separator, maxsplit=1).to_tensor(
                default_value="", shape=[None, 2])
            index = table.lookup(fields[:, 0])
            # Checked before training with verify; without it, say which label.
            unknown = tf.boolean_mask(fields[:, 0], index < 0)
            check = tf.debugging.Assert(tf.size(unknown) == 0,
                                        ["Labels not in class_names:", unknown], summarize=5)
            with tf.control_dependencies([check]):
                index = tf.identity(index)
            lines = fields[:, 1]
        texts = as_utf8(lines, encoding=encoding, max_length=max_length)
        if label_mode is None:
            return texts
        return texts, _encode_label(index, label_mode=label_mode, num_classes=len(names))

    return parse


class TextLinesSource(base.Source):
    """``data.source: text_lines``: one example per line, ``label<TAB>text``.

    `data.path` is a file or a glob (each sorted). Each line's label is its text before the
    first tab (`from_text_lines`' ``labels="first_field"``); the class names are the labels
    found in the training files, sorted, and a validation file with another label is a
    `DataError` naming it. `data.validation_path` names the validation files, or
    `data.validation_fraction` holds out whole files, or the lines of too few files
    (`files_stage.split_files`), so no line is in both splits.
    """

    names = ("text_lines",)

    def split(self):
        """`files_stage.split_files` of the recipe: the files (and lines) of each split.

        `data.validation_path` names the validation files itself (a fixed test split, the
        same for every seed); otherwise `data.validation_fraction` holds out whole files,
        or lines when there are too few files.
        """
        config = self.config
        return files_stage.split_files(config.path, fraction=config.validation_fraction,
                                       seed=self.seed, what="Text",
                                       validation_pattern=config.validation_path)

    def files(self):
        """The training and validation files, in listing order."""
        files, val_files, _, _ = self.split()
        return files, val_files

    def build(self, *, batch_size, common, train_options, validation_options) -> base.Built:
        config = self.config
        files, val_files, rows, val_rows = self.split()

        def build(chosen, *, shuffle_buffer, options, rows, class_names=None):
            return text_lines_dataset(chosen, batch_size=batch_size, labels=FIRST_FIELD,
                                      class_names=class_names, shuffle_buffer=shuffle_buffer,
                                      compression=config.compression, rows=rows,
                                      options=common.merged(options))

        train = build(files, shuffle_buffer=config.shuffle_buffer, options=train_options,
                      rows=rows)
        # The classes: the sorted label texts of the training split (as Keras' loaders name
        # theirs), by the one label rule, which also says the task (data.task: binary).
        plan = label_rule.plan_labels(np.asarray(train.class_names), task=config.task,
                                  where=f"the label field of data.path {config.path!r}")
        val = None
        if val_files:
            # The training split's classes, in the same order: label i is the same class.
            val = build(val_files, shuffle_buffer=0, options=validation_options,
                        class_names=train.class_names, rows=val_rows)
        return base.Built(train=train, validation=val, num_classes=len(train.class_names),
                          class_names=list(train.class_names),
                          train_examples=train.num_examples,
                          validation_examples=None if val is None else val.num_examples,
                          task=plan.task, num_outputs=plan.num_outputs)

    def plain_training(self, built, *, batch_size):
        # The training files and classes `build` found: no second scan of the files.
        # Not training batches: no strategy in scope may drop the last partial one.
        kept = built.train.kept_rows  # a row split: the training lines only
        return text_lines_dataset(
            built.train.files, batch_size=batch_size, labels=FIRST_FIELD,
            class_names=built.train.class_names, verify=False, shuffle=False,
            compression=self.config.compression,
            rows=None if kept is None else kept.counted(self.split()[2]),
            options=tail.TailOptions(drop_remainder=False))
