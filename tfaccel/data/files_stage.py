"""THE stage the file-glob sources (tfrecords, csv, text lines) share: listing, order, worker split, cache fingerprint, shard policy, label pass."""

from __future__ import annotations

import dataclasses
import hashlib
import os
from typing import Callable, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from tfaccel.data import cache_files, chunked, order, sharding, splits, tail
from tfaccel.errors import DataError, UserInputError
from tfaccel.reading import split_rule


def list_files(pattern, *, what: str) -> List[str]:
    """The files of `pattern` (a path, a glob, or a list of them), each glob sorted.

    Args:
        pattern: A path or glob, or a list of them; each must match at least one file.
        what: The files, for messages ("TFRecord", "CSV", "Text file").

    Raises:
        DataError: A glob that matches no file (the glob named), or a folder among the
            matches (its files must be named).
        UserInputError: An empty list.
    """
    patterns = [pattern] if isinstance(pattern, (str, os.PathLike)) else list(pattern)
    if not patterns:
        raise UserInputError(f"The {what} paths must name at least one file, got [].")
    files = []
    for glob in map(os.fspath, patterns):
        matched = sorted(tf.io.gfile.glob(glob))
        if not matched:
            raise DataError(f"{what} pattern {glob!r} matches no file.")
        folders = [m for m in matched if tf.io.gfile.isdir(m)]
        if folders:
            raise DataError(f"{what} path {folders[0]!r} is a folder; name its files "
                            f"(e.g. {os.path.join(folders[0], '*')!r}).")
        files.extend(matched)
    return files


@dataclasses.dataclass(frozen=True)
class RowSplit:
    """One side of a split of the examples (rows, records, lines) of the same files.

    The file-glob sources split examples, not files, when there are too few files for
    whole ones (`tfaccel.reading.split_rule.whole_files`): both splits read every file
    and keep the examples `splits.held_out_rows` gives their side, in the files' listing
    order, before any shuffle, cache or worker split, so every example is in exactly one
    split, the same for the same seed, and an input pipeline's share is taken of the kept
    examples.

    Attributes:
        fraction: data.validation_fraction.
        seed: The seed of the split (the recipe's).
        side: "training" or "validation".
        counts: ``(file, examples)`` of every file in listing order, when already counted
            (`KeptRows.counted` of the other split's build), else None: the builder counts.
            The split is drawn over this order, whatever order a builder is given the
            files in.
    """

    fraction: float
    seed: int
    side: str
    counts: Optional[Tuple[Tuple[str, int], ...]] = None


@dataclasses.dataclass(frozen=True)
class KeptRows:
    """Which examples of each file one split keeps (`keep_rows` reads through it)."""

    files: Tuple[str, ...]
    masks: Tuple[np.ndarray, ...]
    side: str

    def counts(self, files: Sequence[str]) -> List[int]:
        """Kept examples of each of `files` (any order of the same files)."""
        kept = {f: int(m.sum()) for f, m in zip(self.files, self.masks)}
        return [kept[f] for f in files]

    def counted(self, rows: RowSplit) -> RowSplit:
        """`rows` (another side of the same split) with these files' counts: not counted
        again."""
        return dataclasses.replace(rows, counts=tuple(
            (f, len(m)) for f, m in zip(self.files, self.masks)))

    def describe(self) -> dict:
        """What the kept examples depend on, for a cache fingerprint."""
        digest = hashlib.sha256()
        for mask in self.masks:
            digest.update(np.packbits(mask).tobytes() + len(mask).to_bytes(8, "little"))
        return {"examples kept": f"{self.side} side of a row split, {digest.hexdigest()}"}


def kept_rows(rows: Optional[RowSplit], files: Sequence[str],
              counts: Optional[Sequence[int]], *, what: str) -> Optional[KeptRows]:
    """The examples of `files` (listing order, `counts` examples each, unless `rows` holds
    the counts already) that `rows` keeps.

    Raises:
        DataError: The fraction leaves no example on a side (`splits.held_out_count`).
    """
    if rows is None:
        return None
    listed = rows.counts if rows.counts is not None else tuple(zip(files, counts))
    train, val = splits.held_out_rows([c for _, c in listed], rows.fraction, rows.seed,
                                      what=what)
    return KeptRows(tuple(f for f, _ in listed),
                    tuple(train if rows.side == "training" else val), rows.side)


def keep_rows(reader: Callable, kept: Optional[KeptRows], *, batch: int = 1024) -> Callable:
    """`reader` (``path, *rest -> dataset of one file's examples``) keeping only the
    examples of `kept`: each file's examples zipped with its mask, masked a batch at a
    time (a per-example filter would cost a function call per example)."""
    if kept is None:
        return reader
    table = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(tf.constant(list(kept.files), tf.string),
                                            tf.range(len(kept.files), dtype=tf.int64)),
        default_value=-1)
    flat = tf.constant(np.concatenate(kept.masks) if kept.masks else np.zeros(0, bool))
    bounds = tf.constant(np.cumsum([0, *map(len, kept.masks)]), tf.int64)

    def read(path, *rest):
        index = table.lookup(path)
        mask = flat[bounds[index]:bounds[index + 1]]
        both = tf.data.Dataset.zip((reader(path, *rest).batch(batch),
                                    tf.data.Dataset.from_tensor_slices(mask).batch(batch)))
        return both.map(lambda examples, keep: tf.nest.map_structure(
            lambda t: tf.boolean_mask(t, keep), examples)).unbatch()

    return read


def split_files(pattern, *, fraction: float, seed: int, what: str,
                validation_pattern=None) -> Tuple[list, list, Optional[RowSplit],
                                                  Optional[RowSplit]]:
    """THE split of a file-glob source: ``(training files, validation files, training
    rows, validation rows)``, each file list in listing order.

    - `validation_pattern` (data.validation_path): its files validate, whole; a file
      matched by both patterns is refused.
    - enough files (`split_rule.whole_files`): whole files held out (`held_out`).
    - else both splits read every file and keep their examples (the `RowSplit`s).

    Raises:
        DataError: A file in both patterns, or a glob that matches nothing.
    """

    files = list_files(pattern, what=what)
    if validation_pattern:
        val = list_files(validation_pattern, what=what)
        both = sorted(set(files) & set(val))
        if both:
            raise DataError(f"{what} file {both[0]!r} matches both data.path and "
                            "data.validation_path: an example would train and validate.")
        return files, val, None, None
    if not fraction or split_rule.whole_files(len(files), fraction):
        return (*splits.held_out_files(files, fraction, seed, what=f"{what} files"),
                None, None)
    return (files, list(files), RowSplit(fraction, seed, "training"),
            RowSplit(fraction, seed, "validation"))


def count_each(files: Sequence[str], count: Callable[[str], object]) -> list:
    """``[count(f) for f in files]``, the reads of several files overlapping (threads)."""
    # Chunks of one file: the per-file work (a whole file read) dwarfs a task's overhead.
    return chunked.map_paths(count, list(files), chunk=1)


def read_order(files: list, *columns, shuffled: bool, seed: Optional[int],
               input_context=None) -> tuple:
    """THE order a file source reads its files in: ``(files, *columns)`` permuted alike.

    Shuffled: one seeded permutation of the listing (`tfaccel.data.order`), before any
    cache and the same in every input pipeline, so files named by class or date still mix
    and pipelines can take every n-th file of the same order. Unshuffled: the listing's
    order. `columns` are per-file lists (labels, row counts) or None.
    """
    if not shuffled:
        return (files, *columns)
    chosen = order.permutation(len(files),
                               order.resolve_seed(seed, input_context=input_context))
    return ([files[i] for i in chosen],
            *(None if c is None else [c[i] for i in chosen] for c in columns))


def split_for_workers(files: list, *columns,
                      options: tail.TailOptions) -> Tuple[tail.TailOptions, tuple]:
    """This input pipeline's share, by THE one rule of the file sources.

    With an input context of n > 1 pipelines (`options.input_context`):

    - at least n files: pipeline i reads files i, i + n, ... (TensorFlow's and TFDS's
      round-robin), so no file is read twice; the tail then only batches.
    - fewer files than pipelines: every pipeline reads every file in ONE fixed order and
      keeps every n-th example (the tail shards by position); the order is made
      deterministic for it. Every example is still read by exactly one pipeline, which a
      refusal would not buy and an unequal file split could not promise.

    Args:
        files: The files in read order (`read_order`).
        *columns: Per-file lists split alike (labels, row counts), or None.
        options: The tail options of the source.

    Returns:
        ``(options, (files, *columns))``: the options the tail gets (the batch-only
        context when split by file, ``deterministic=True`` when split by example) and
        this pipeline's files and columns.
    """
    ctx = options.resolved().input_context
    if ctx is None or ctx.num_input_pipelines <= 1:
        return options, (files, *columns)
    n, i = ctx.num_input_pipelines, ctx.input_pipeline_id
    if len(files) >= n:
        return (dataclasses.replace(options, input_context=tail.batch_only_context(ctx)),
                (files[i::n], *(None if c is None else c[i::n] for c in columns)))
    return dataclasses.replace(options, deterministic=True), (files, *columns)


def choose_shard_policy(options: tail.TailOptions, *, num_files: int,
                        file_readers: bool = True) -> tail.TailOptions:
    """`options` with the auto-shard policy a multi-worker strategy applies to this pipeline.

    `file_readers`: whether TensorFlow's FILE auto-sharding can find the readers (TFRecord
    and text-line readers; not CsvDataset, whose pipelines are split by DATA with the
    fixed order it needs). An input context (the recipe's runner) decides the share
    itself: OFF. See `sharding.choose_file_policy`.
    """
    if file_readers or options.resolved().input_context is not None:
        return sharding.choose_file_policy(options, num_files=num_files)
    if options.chosen().shard_policy is tail.UNSET:
        options = dataclasses.replace(options, shard_policy="data")
    return sharding.fix_order_for_data_sharding(options)


def fingerprint_cache(*, cache, builder: str, files: Sequence[str], seed: Optional[int],
                      shuffled: bool, **settings) -> Optional[dict]:
    """The `SourceStages.cache_fingerprint` of a file source: None unless `cache` is a
    file cache.

    The fingerprint holds everything cached examples depend on: the files read (names,
    sizes, times), their order, and the builder's `settings` (parse, decode, labels).
    """
    if not cache_files.is_file_cache(cache):
        return None
    return {"builder": builder, "source files": cache_files.files_digest(files),
            "order": order.describe(files, seed=seed, shuffled=shuffled), **settings}


def shuffle_each_pass(file_ds: tf.data.Dataset, *, num_files: int, seed: Optional[int],
                      options: tail.TailOptions) -> tf.data.Dataset:
    """The file order reshuffled every pass (after the one permutation of `read_order`).

    In a resumable stream (`options.stream`) the order is the same every pass, so
    pass p does not depend on how many passes came before (the pass-seeded example
    shuffle reorders the examples). Pipelines that split examples by position must all
    draw alike: the seed is then `order.resolve_seed`'s.
    """
    resolved = options.resolved()
    if seed is None and resolved.input_context is not None:
        # Split by example (`split_for_workers`): 0 in every pipeline; else still None.
        seed = 0 if resolved.input_context.num_input_pipelines > 1 else None
    return file_ds.shuffle(num_files, seed=seed,
                           reshuffle_each_iteration=resolved.stream is None)


def interleave(file_ds: tf.data.Dataset, reader: Callable, *, num_files: int,
               cycle_length: Optional[int], options: tail.TailOptions,
               deterministic: Optional[bool] = None) -> tf.data.Dataset:
    """Several files read at once (a parallel interleave of `reader`), so one slow file
    (or a remote object store's latency) does not stall the pipeline.

    `cycle_length` None: min(files, 16). `deterministic` None: `options.deterministic`.
    """
    resolved = options.resolved()
    if deterministic is None:
        deterministic = resolved.deterministic
    return file_ds.interleave(
        reader, cycle_length=cycle_length or min(num_files, 16),
        num_parallel_calls=None if resolved.sequential else tail.AUTOTUNE,
        # None when free: the pipeline's option decides (a resumable stream fixes it).
        deterministic=deterministic or None)


def label_range(batches: Iterable[np.ndarray], *, where: str) -> Tuple[int, int]:
    """THE label pass: ``(smallest, largest)`` integer label over batches of labels.

    Raises:
        DataError: No label at all, naming `where`.
    """
    low = high = None
    for batch in batches:
        if batch.size:
            b_low, b_high = int(np.min(batch)), int(np.max(batch))
            low = b_low if low is None else min(low, b_low)
            high = b_high if high is None else max(high, b_high)
    if high is None:
        raise DataError(f"No labels found in {where}: its files hold no examples; write "
                        "examples into them or set data.num_classes.")
    return low, high
