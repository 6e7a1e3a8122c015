"""THE stage the file-glob sources (tfrecords, csv, text lines) share: listing, order, worker split, cache fingerprint, shard policy, label pass."""

from __future__ import annotations

import os
from typing import Callable, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from tfaccel.data import cache_files, chunked, order, pipeline, sharding, splits
from tfaccel.errors import DataError, UserInputError


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


def held_out(pattern, fraction: float, seed: int, *, what: str) -> Tuple[list, list]:
    """``(training files, validation files)`` of a recipe's `data.path`: whole files held
    out by the seeded rule of `tfaccel.data.splits`, each list in listing order."""
    return splits.held_out_files(list_files(pattern, what=what), fraction, seed,
                                 what=f"{what} files")


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


def split_for_workers(files: list, *columns, options: dict) -> tuple:
    """This input pipeline's share, by THE one rule of the file sources.

    With an input context of n > 1 pipelines (``options["input_context"]``):

    - at least n files: pipeline i reads files i, i + n, ... (TensorFlow's and TFDS's
      round-robin), so no file is read twice; `optimize` then only batches.
    - fewer files than pipelines: every pipeline reads every file in ONE fixed order and
      keeps every n-th example (`optimize` shards by position); the order is made
      deterministic for it. Every example is still read by exactly one pipeline, which a
      refusal would not buy and an unequal file split could not promise.

    Args:
        files: The files in read order (`read_order`).
        *columns: Per-file lists split alike (labels, row counts), or None.
        options: The keyword options for `pipeline.optimize` (changed in place: the
            context `optimize` gets, and ``deterministic`` when split by example).

    Returns:
        ``(files, *columns)`` of this pipeline.
    """
    ctx = options.get("input_context")
    if ctx is None or ctx.num_input_pipelines <= 1:
        return (files, *columns)
    n, i = ctx.num_input_pipelines, ctx.input_pipeline_id
    if len(files) >= n:
        options["input_context"] = pipeline.batch_only_context(ctx)
        return (files[i::n], *(None if c is None else c[i::n] for c in columns))
    options["deterministic"] = True
    return (files, *columns)


def choose_shard_policy(options: dict, *, num_files: int, file_readers: bool = True) -> None:
    """The auto-shard policy a multi-worker strategy applies to this pipeline.

    `file_readers`: whether TensorFlow's FILE auto-sharding can find the readers (TFRecord
    and text-line readers; not CsvDataset, whose pipelines are split by DATA with the
    fixed order it needs). An input context (the recipe's runner) decides the share
    itself: OFF. See `sharding.choose_file_policy`.
    """
    if file_readers or options.get("input_context") is not None:
        sharding.choose_file_policy(options, num_files=num_files)
        return
    options.setdefault("shard_policy", "data")
    sharding.fix_order_for_data_sharding(options)


def fingerprint_cache(options: dict, *, cache, builder: str, files: Sequence[str],
                      seed: Optional[int], shuffled: bool, **settings) -> None:
    """Sets ``options["cache_fingerprint"]`` when `cache` is a file cache.

    The fingerprint holds everything cached examples depend on: the files read (names,
    sizes, times), their order, and the builder's `settings` (parse, decode, labels).
    """
    if not cache_files.is_file_cache(cache):
        return
    options["cache_fingerprint"] = {
        "builder": builder, "source files": cache_files.files_digest(files),
        "order": order.describe(files, seed=seed, shuffled=shuffled), **settings,
        **options.get("cache_fingerprint", {})}


def shuffle_each_pass(file_ds: tf.data.Dataset, *, num_files: int, seed: Optional[int],
                      options: dict) -> tf.data.Dataset:
    """The file order reshuffled every pass (after the one permutation of `read_order`).

    In a resumable stream (``options["stream"]``) the order is the same every pass, so
    pass p does not depend on how many passes came before (the pass-seeded example
    shuffle reorders the examples). Pipelines that split examples by position must all
    draw alike: the seed is then `order.resolve_seed`'s.
    """
    if seed is None and options.get("input_context") is not None:
        # Split by example (`split_for_workers`): 0 in every pipeline; else still None.
        ctx = options["input_context"]
        seed = 0 if ctx.num_input_pipelines > 1 else None
    return file_ds.shuffle(num_files, seed=seed,
                           reshuffle_each_iteration=options.get("stream") is None)


def interleave(file_ds: tf.data.Dataset, reader: Callable, *, num_files: int,
               cycle_length: Optional[int], options: dict,
               deterministic: Optional[bool] = None) -> tf.data.Dataset:
    """Several files read at once (a parallel interleave of `reader`), so one slow file
    (or a remote object store's latency) does not stall the pipeline.

    `cycle_length` None: min(files, 16). `deterministic` None: ``options["deterministic"]``.
    """
    if deterministic is None:
        deterministic = options.get("deterministic")
    return file_ds.interleave(
        reader, cycle_length=cycle_length or min(num_files, 16),
        num_parallel_calls=None if options.get("sequential") else pipeline.AUTOTUNE,
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
