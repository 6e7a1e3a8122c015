"""What the class-per-sub-folder loaders share: Keras' listing, labels, splits and shuffle rules."""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import operator
import os
import reprlib
from collections import Counter
from typing import Callable, Dict, FrozenSet, List, NamedTuple, Optional, Sequence, Tuple, Union

import tensorflow as tf

from tfaccel.data import cache_files, chunked, listing_cache, order, sharding, splits, tail
from tfaccel.data.sources import base
from tfaccel.errors import DataError, UserInputError
from tfaccel.messages import say

SHOW_PATHS = 5  # how many skipped paths the one warning names
LABEL_MODES = ("int", "categorical", "binary", None)


class Kind(NamedTuple):
    """The files a folder loader lists, and how its messages name them.

    Attributes:
        extensions: Lower-case file endings that are listed (Keras' `formats`).
        noun: The files in messages, e.g. "images".
        files: The same, said as files, e.g. "image files".
        folder: The folder in messages, e.g. "Image folder".
        usable: What a usable file is, e.g. "jpg/png image".
        check: ``check(path)``: False when a listed file is unusable, else True or what
            the check found out about it as a short string (read before training; a file
            that fails is skipped and named).
        saved_as: The name (with a version) under which each file's check result is saved
            between runs and reused while the file is unchanged (`data.listing_cache`);
            None: every file is checked afresh (a check that keeps state of its own).
    """

    extensions: Tuple[str, ...]
    noun: str
    files: str
    folder: str
    usable: str
    check: Callable[[str], object]
    saved_as: Optional[str] = None


class Listing(NamedTuple):
    """A listed class folder.

    Attributes:
        paths: Every file with a listed extension, in Keras' listing order (classes in
            order, then sorted folders and names), usable or not: the order both split
            rules and the permutation count positions in.
        labels: The integer label of each path.
        class_names: The class of each label (None: listed without labels).
        skipped: Files skipped: without a listed extension, or failing the check.
        unreadable: The listed paths that failed the check (left out of every subset).
        folders: The class sub-folders walked, in label order ([""]: the root alone).
        results: The check's result for each path (None: not checked).
        deferred: The check was left to the decode (a cold listing of a big folder, see
            `list_class_folder`'s `defer_from`): nothing is known unreadable yet.
    """

    paths: List[str]
    labels: List[int]
    class_names: Optional[List[str]]
    skipped: List[str]
    unreadable: FrozenSet[str]
    folders: List[str]
    results: Optional[list] = None
    deferred: bool = False


def given_labels(labels: Sequence[int], *, path: str, found: int, class_names,
                 files: str) -> Tuple[List[int], List[str]]:
    """Checks Keras' ``labels=[...]`` (one per listed file) and names its classes."""
    if class_names is not None:
        raise UserInputError(
            'You can only pass `class_names` if `labels="inferred"` (given labels name '
            f"their own classes); got labels={reprlib.repr(labels)} and "
            f"class_names={class_names!r}.")
    if len(labels) != found:
        raise UserInputError(
            f"Expected the lengths of `labels` to match the number of files in {path!r}: "
            f"len(labels) is {len(labels)} while {found} {files} were found (sorted "
            f"by path); got labels={reprlib.repr(labels)}.")
    labels = integer_labels(labels)
    return labels, [str(v) for v in sorted(set(labels))]  # as Keras names them


def integer_labels(labels: Sequence[int]) -> List[int]:
    """Given labels as Python ints (numpy integers too), or a `UserInputError`."""
    try:
        return [operator.index(v) for v in labels]
    except TypeError:
        raise UserInputError(f"labels must be integers, got labels="
                             f"{reprlib.repr(labels)}.") from None


def _class_folders(path: str, *, kind: Kind, class_names, labels) -> Tuple[list, list]:
    """``(folders walked, class names)`` of Keras' listing (folders [""]: the root)."""
    if not os.path.exists(path):
        raise DataError(f"{kind.folder} path {path!r} does not exist.")
    if not os.path.isdir(path):
        raise DataError(f"{kind.folder} path {path!r} is not a folder.")
    if labels is None and class_names is not None:
        raise UserInputError(f"When `labels=None` (no labels), argument `class_names` "
                             f"cannot be specified; got class_names={class_names!r}.")
    found = sorted(d for d in os.listdir(path)
                   if not d.startswith(".") and os.path.isdir(os.path.join(path, d)))
    if labels != "inferred":
        return [""], class_names  # Keras indexes every file below the root then
    if class_names is not None:
        class_names = list(class_names)
        missing = [c for c in class_names if c not in found]
        if missing or len(set(class_names)) != len(class_names):
            raise UserInputError(
                f"The `class_names` passed did not match the sub-folders of {path!r}: they "
                f"must name distinct sub-folders; got class_names={class_names!r}"
                + (f", and {missing} are not among its sub-folders {found}" if missing else "")
                + ".")
        return class_names, class_names
    if not found:
        example = os.path.join(path, "class_a", "001" + kind.extensions[0])
        raise DataError(
            f"{kind.folder} {path!r} has no class sub-folders: put each class's "
            f"{kind.noun} in its own sub-folder, e.g. {example!r}.")
    return found, found


def list_class_folder(path, *, kind: Kind, verify: bool = True,
                      class_names: Optional[Sequence[str]] = None, follow_links: bool = True,
                      labels: Union[str, Sequence[int], None] = "inferred",
                      defer_from: Optional[int] = None) -> Listing:
    """Lists the files of a class-per-sub-folder tree in Keras' order, checking each one.

    Args:
        path: The root folder; each sub-folder (sorted by name) is one class.
        kind: Which files are listed and how each is checked.
        verify: Run `kind.check` on every listed file (threads over chunks of files: the
            reads overlap), or reuse its saved result for an unchanged file (`kind.saved_as`).
        class_names: Only these sub-folders, labelled in this order (as Keras' loaders).
        follow_links: Descend into symbolic links to folders below each class folder.
        labels: As Keras' loaders: ``"inferred"`` (from the class sub-folders), None (every
            listed file below `path`, sub-folders or not, without labels), or a list of
            integer labels, one per listed file below `path` in Keras' listing order (the
            classes are then the distinct labels, as strings).
        defer_from: From this many listed files, a folder without saved check results
            (a cold run) is not checked before training: the check runs in a background
            thread and is saved for the next run, and the decoder must check each file
            itself and name a bad one (``Listing.deferred``). None: always check first.

    Returns:
        A `Listing`.

    Raises:
        DataError: `path` is missing or not a folder, has no class sub-folders, or holds no
            usable file.
        UserInputError: `class_names` are not sub-folders, or given with `labels` other
            than "inferred"; a `labels` list of another length than the listed files.
    """
    path = os.fspath(path)
    folders, class_names = _class_folders(path, kind=kind, class_names=class_names,
                                          labels=labels)
    paths: List[str] = []
    inferred: List[int] = []
    skipped: List[str] = []
    folder_spans: List[Tuple[int, int]] = []  # where each walked folder's files are
    for label, name in enumerate(folders):
        # Keras' order: the walk's folders sorted by path, names sorted in each folder.
        walk = sorted(os.walk(os.path.join(path, name) if name else path,
                              followlinks=follow_links),
                      key=lambda entry: entry[0])
        for root, _, files in walk:
            first = len(paths)
            prefix = os.path.join(root, "")  # os.path.join(root, file) without a call per file
            for file in sorted(files):
                if file.startswith("."):
                    continue
                full = prefix + file
                if file.lower().endswith(kind.extensions):
                    paths.append(full)
                    inferred.append(label)
                else:
                    skipped.append(full)
            if len(paths) > first:
                folder_spans.append((first, len(paths)))
    if labels is None:
        class_names = None
    elif labels != "inferred":
        # One label per listed file, unreadable ones included (as Keras counts them); an
        # unreadable file is left out of a subset later with its own label.
        inferred, class_names = given_labels(labels, path=path, found=len(paths),
                                             class_names=class_names, files=kind.files)
    unreadable = frozenset()
    results = None
    if (verify and kind.saved_as is not None and defer_from is not None
            and len(paths) >= defer_from
            and not listing_cache.is_saved(path, count=len(paths), check=kind.saved_as)):
        # Opening every file before the first batch is what made a cold run slower than
        # Keras' (which only lists): the decode checks each file it reads instead.
        listing_cache.check_in_background(path, paths, folders=folder_spans,
                                          check=kind.check, name=kind.saved_as)
        return Listing(paths, inferred, class_names, skipped, frozenset(), folders, None,
                       deferred=True)
    if verify and paths:
        if kind.saved_as is None:
            results = chunked.map_paths(kind.check, paths)
        else:
            results = listing_cache.checked(path, paths, folders=folder_spans,
                                            check=kind.check, name=kind.saved_as)
        bad = [p for p, result in zip(paths, results) if result is False]
        unreadable = frozenset(bad)
        skipped.extend(bad)
    if len(unreadable) == len(paths):
        raise DataError(
            f"No {kind.noun} found in {kind.folder.lower()} {path!r}: "
            + (f"its class sub-folders {folders} hold" if folders != [""] else "it holds")
            + f" no usable {kind.usable}"
            + (f" ({len(skipped)} file(s) skipped, e.g. {skipped[:SHOW_PATHS]})."
               if skipped else "."))
    return Listing(paths, inferred, class_names, skipped, unreadable, folders, results)


def refuse_empty_classes(listing: Listing, *, path, kind: Kind, labels) -> None:
    """With labels from the sub-folders, a class sub-folder without a usable file is refused.

    Its class could never be learnt, and Keras' loaders would say nothing.

    Raises:
        DataError: Naming the empty class sub-folders.
    """
    if labels != "inferred":
        return
    usable = Counter(label for p, label in zip(listing.paths, listing.labels)
                     if p not in listing.unreadable)
    empty = [name for i, name in enumerate(listing.folders) if not usable[i]]
    if empty:
        raise DataError(
            f"Class sub-folder(s) {[os.path.join(os.fspath(path), e) for e in empty]} "
            f"of {kind.folder.lower()} {os.fspath(path)!r} hold no usable {kind.usable}: "
            f"put that class's {kind.noun} there, or leave the folder out with "
            "class_names=[...].")


def warn_skipped(logger: logging.Logger, listing: Listing, *, path, unreadable: str,
                 extension: str, reasons: Optional[Dict[str, str]] = None) -> None:
    """ONE warning for every file left out: the unreadable ones named, then other endings.

    Args:
        logger: The loader's logger.
        listing: The listed folder.
        path: The folder, as the user gave it.
        unreadable: What the unreadable files are, with a hint, e.g. "not UTF-8 text
            (pass encoding=...)"; each is named (up to `SHOW_PATHS`).
        extension: The listed ending, e.g. ".txt".
        reasons: Why each unreadable file is, shown after its path (if known).
    """
    if not listing.skipped:
        return
    bad = [p for p in listing.skipped if p in listing.unreadable]
    other = [p for p in listing.skipped if p not in listing.unreadable]
    parts = []
    if bad:
        reasons = reasons or {}
        shown = [f"{p} ({reasons[p]})" if p in reasons else p for p in bad[:SHOW_PATHS]]
        parts.append(f"{len(bad)} {unreadable}: {shown}"
                     + (" ..." if len(bad) > SHOW_PATHS else ""))
    if other:
        parts.append(f"{len(other)} without a {extension} ending, e.g. {other[:SHOW_PATHS]}")
    logger.warning("Skipped %d file(s) in %s: %s.", len(listing.skipped), os.fspath(path),
                   "; ".join(parts))


def check_format(format) -> None:
    """Keras' ``format="tf"`` is taken (a `tf.data.Dataset`); anything else is refused.

    Raises:
        UserInputError: ``format="grain"`` (Keras 3.15's Grain dataset) or another value.
    """
    if format != "tf":
        raise UserInputError(
            f"format={format!r} is not taken: tfaccel's folder loaders return a "
            "tf.data.Dataset (Keras' format=\"tf\"), not a Grain dataset.")


def say_found(listing: Listing) -> None:
    """Keras' ``verbose`` line: "Found N files belonging to K classes." (usable files)."""
    usable = len(listing.paths) - len(listing.unreadable)
    say(f"Found {usable} files." if listing.class_names is None else
        f"Found {usable} files belonging to {len(listing.class_names)} classes.")


def check_label_arguments(*, label_mode, labels, files: str):
    """Keras' checks (and wording) of `labels` and `label_mode`: ``(label_mode, labels)``."""
    if not (labels in ("inferred", None) or isinstance(labels, (list, tuple))):
        raise UserInputError(
            f"`labels` argument should be a list/tuple of integer labels, one per {files[:-1]} "
            'in sorted path order, "inferred" (from the sub-folders) or None (no labels); '
            f"got labels={reprlib.repr(labels)}.")
    if label_mode not in LABEL_MODES:
        raise UserInputError(f"`label_mode` argument must be one of {LABEL_MODES}, got "
                             f"label_mode={label_mode!r}.")
    if labels is None or label_mode is None:
        return None, None  # either means: files only (as Keras)
    return label_mode, labels


def keras_shuffle(shuffle: Optional[bool], shuffle_buffer: Optional[int]) -> Optional[int]:
    """Keras' switch `shuffle` onto a shuffle buffer: False is 0, True (or None) keeps it."""
    if shuffle is None or shuffle is True:
        return shuffle_buffer
    if shuffle is False:
        return 0
    raise UserInputError(f"shuffle must be True or False, got {shuffle!r}.")


def check_binary(listing: Listing, *, label_mode, path) -> None:
    """Keras' rule: ``label_mode="binary"`` needs exactly two classes."""
    if label_mode == "binary" and len(listing.class_names) != 2:
        raise UserInputError(f'When passing `label_mode="binary"`, there must be exactly 2 '
                             f"classes; {path!r} has {len(listing.class_names)}: "
                             f"class_names={listing.class_names}.")


def labels_as(labels: List[int], *, label_mode: Optional[str], num_classes: int):
    """Labels in Keras' encodings: int32, one-hot float32, float32 [1] for two classes."""
    if label_mode == "int":
        return tf.constant(labels, tf.int32)
    if label_mode == "categorical":
        return tf.one_hot(tf.constant(labels, tf.int32), num_classes, dtype=tf.float32)
    return tf.reshape(tf.constant(labels, tf.float32), [-1, 1])  # binary


def labels_fingerprint(labels, cache) -> dict:
    """Given labels (Keras' ``labels=[...]``) as a part of a file cache's fingerprint ({}
    for inferred labels, or without a file cache).

    They are cached with the examples; inferred ones follow from the files and class
    names, which the cache records already.
    """
    if isinstance(labels, (list, tuple)) and cache_files.is_file_cache(cache):
        return {"labels": hashlib.sha256(repr(list(labels)).encode()).hexdigest()[:16]}
    return {}


def check_split_arguments(*, validation_split, validation_fraction: Optional[float], subset,
                          shuffled: bool, seed) -> None:
    """Keras' rules (and wording) for `validation_split`, `subset` and `seed`.

    They hold when the caller uses Keras' name `validation_split`; with tfaccel's
    `validation_fraction` a missing seed still means 0 (both subsets agree). A builder
    without `validation_fraction` passes None.
    """
    if subset not in (None, "training", "validation", "both"):
        raise UserInputError('`subset` must be either "training", "validation" or "both" '
                             f"(or None: every file); got subset={subset!r}.")
    if validation_split is None and validation_fraction is None:  # Keras' name only
        if subset is not None:
            raise UserInputError(f"If `subset` is set, `validation_split` must be set; got "
                                 f"subset={subset!r} and validation_split=None.")
        return
    if validation_split is None:
        if not 0.0 <= validation_fraction < 1.0:
            raise UserInputError(
                f"validation_fraction must be in [0, 1), got {validation_fraction!r}.")
        if subset is not None and not validation_fraction:
            raise UserInputError(
                "If `subset` is set, `validation_split` (or tfaccel's `validation_fraction`) "
                f"must be set; got subset={subset!r} and validation_fraction="
                f"{validation_fraction!r}.")
        return
    if validation_split and not 0 < validation_split < 1:
        raise UserInputError("`validation_split` must be between 0 and 1, got "
                             f"validation_split={validation_split!r}.")
    if validation_fraction and validation_fraction != validation_split:
        raise UserInputError(
            f"validation_split ({validation_split!r}) is Keras' name for "
            f"validation_fraction ({validation_fraction!r}); give one of them.")
    if bool(validation_split) != (subset is not None):
        raise UserInputError("If `subset` is set, `validation_split` must be set, and "
                             f"inversely; got subset={subset!r} and validation_split="
                             f"{validation_split!r}.")
    if validation_split and shuffled and seed is None:
        raise UserInputError(
            "validation_split with shuffling needs a seed (got seed=None): you must provide "
            "a `seed` argument, so that the training and validation subsets do not overlap "
            "(as Keras' loader requires).")


def choose_files(listing: Listing, *, subset: Optional[str], validation_fraction: float,
                 keras_split: bool, shuffled: bool, seed: Optional[int], noun: str,
                 input_context=None):
    """The ``(paths, labels)`` of `subset`, in the order they are read and cached.

    Two held-out choices, one count (`splits.keras_held_out_count`), one permutation
    (`data.order`):
    - Keras' names (`keras_split`): Keras' own files. The whole listing is permuted with
      Keras' seeded rule (when shuffling), the last ``int(validation_split * n)`` are held
      out, and only then are unreadable files left out, so a folder with a corrupt file
      still splits exactly as Keras splits it.
    - `validation_fraction`: the usable files are permuted with the seed (None: 0) whether
      or not the subset is shuffled, so two calls (training shuffled, validation not) with
      the same seed get complementary, disjoint subsets; then the subset is permuted (when
      shuffling).
    Either way a shuffled subset reaches the cache in a seeded random order, so a shuffle
    buffer of any size after the cache sees every class.
    """
    paths, labels = list(listing.paths), list(listing.labels)

    def usable(paths, labels):
        keep = [i for i, p in enumerate(paths) if p not in listing.unreadable]
        return [paths[i] for i in keep], [labels[i] for i in keep]

    def permuted(paths, labels):
        if not shuffled:
            return paths, labels
        chosen = order.permutation(len(paths),
                                   order.resolve_seed(seed, input_context=input_context))
        return [paths[i] for i in chosen], [labels[i] for i in chosen]

    def held_out(paths, labels, permutation):
        cut = len(paths) - splits.keras_held_out_count(
            len(paths), validation_fraction, what=noun,
            argument="validation_split" if keras_split else "validation_fraction")
        chosen = permutation[cut:] if subset == "validation" else permutation[:cut]
        if not keras_split:
            chosen = sorted(chosen)  # file order; permuted below when shuffling
        return [paths[i] for i in chosen], [labels[i] for i in chosen]

    if keras_split:
        paths, labels = permuted(paths, labels)
        if subset is not None:
            paths, labels = held_out(paths, labels, range(len(paths)))
        return usable(paths, labels)
    paths, labels = usable(paths, labels)
    if subset is not None:
        paths, labels = held_out(paths, labels,
                                 order.permutation(len(paths), 0 if seed is None else seed))
    return permuted(paths, labels)


def reference_pipeline_options(paths: List[str], *, shuffle_buffer: int, shuffled: bool,
                               deterministic: Optional[bool], fingerprint: dict,
                               options: tail.TailOptions
                               ) -> Tuple[tail.TailOptions, int, int, Optional[dict]]:
    """The tail settings of a dataset of file paths read by a parallel map.

    Decides where the shuffle goes and the element order, fingerprints a file cache with
    `fingerprint` (plus the files and their order: `shuffled` says whether `paths` were
    permuted), and sets the sharding policy.

    Args:
        options: What the caller chose (`TailOptions.chosen`), the cache and seed among them.

    Returns:
        ``(options, source_shuffle, shuffle_buffer, cache_fingerprint)``: the tail options
        with the order and the shard policy decided, and the rest of its `tail.SourceStages`.
    """
    cache, seed = options.resolved().cache, options.resolved().seed
    if deterministic is None:
        # Unshuffled, examples come in the order of `file_paths` (as Keras' loaders with
        # shuffle=False), so predictions can be matched to their files; with a seed, the
        # same seed gives the same order, as a Keras user expects. Otherwise parallel
        # stages hand out whichever example is ready first (faster).
        deterministic = shuffle_buffer == 0 or seed is not None
    options = dataclasses.replace(options, deterministic=deterministic)
    source_shuffle, cache_fingerprint = 0, None
    if not cache:
        # Without a cache the buffer holds paths, not contents: shuffling N paths before
        # reading is the same N-example buffer for a few bytes per file.
        source_shuffle, shuffle_buffer = shuffle_buffer, 0
    elif cache_files.is_file_cache(cache):
        # Everything the cached examples depend on: the files (names, sizes, times), the
        # order they were permuted into, and every setting of the read before the cache.
        cache_fingerprint = {
            "source files": cache_files.files_digest(paths),
            "order": order.describe(paths, seed=seed, shuffled=shuffled), **fingerprint}
    # Paths are in memory (no reader dataset for FILE sharding to find), so a multi-worker
    # strategy shards by element; distribute_datasets_from_function (input_context) shards
    # the path list before reading, which is cheaper.
    if options.shard_policy is tail.UNSET:
        options = dataclasses.replace(options, shard_policy="data")
    options = sharding.fix_order_for_data_sharding(options)  # DATA needs a fixed order
    return options, source_shuffle, shuffle_buffer, cache_fingerprint


def keras_shuffle_buffer(*, shuffle, shuffle_buffer: Optional[int], batch_size: Optional[int],
                         validation_split, subset, seed) -> int:
    """Keras' shuffle buffer of the file loaders, with Keras' split checks: the buffer.

    Keras' text and audio loaders shuffle the paths with ``8 * batch_size`` (1024
    unbatched) and the seed: the same buffer here gives Keras' order for a seed.
    """
    if shuffle_buffer is None and shuffle:
        shuffle_buffer = 1024 if batch_size is None else 8 * batch_size
    shuffle_buffer = keras_shuffle(shuffle, shuffle_buffer)
    check_split_arguments(validation_split=validation_split, validation_fraction=None,
                          subset=subset, shuffled=shuffle_buffer != 0, seed=seed)
    return shuffle_buffer


def keras_subsets(listing: Listing, make: Callable, *, subset: Optional[str],
                  validation_split: Optional[float], seed, shuffle_buffer: Optional[int],
                  noun: str, options: tail.TailOptions,
                  validation_fraction: Optional[float] = None,
                  validation_only: Optional[dict] = None, verbose: bool = False):
    """The dataset of `subset`, or Keras' ``(training, validation)`` pair.

    Args:
        listing: The listed folder.
        make: ``make(paths, labels, *, shuffle_buffer, options)``: the dataset of one
            subset's chosen files, with the tail's `options`.
        subset: None, "training", "validation" or "both".
        validation_split: Keras' held-out fraction: Keras' files (None: see
            `validation_fraction`).
        seed: The listing's permutation seed.
        shuffle_buffer: The shuffle buffer (0: files in listing order).
        noun: The files in messages, e.g. "audio files".
        options: The tail's options of the dataset; "both" caches each subset into its
            own files, and its validation subset takes `tail.validation_options`.
        validation_fraction: tfaccel's held-out fraction, when `validation_split` is None
            (`choose_files`; None: every file).
        validation_only: Keywords of `make` of its own (not the tail's) for the
            validation subset of "both" (e.g. no random crop).
        verbose: Print Keras' "Using N files for training." / "Using M files for
            validation." line of each subset returned ("both": the two), as Keras'
            `get_training_or_validation_split` does whenever a fraction is held out.
    """
    keras_split = validation_split is not None
    choose = dict(validation_fraction=(validation_split if keras_split
                                       else validation_fraction) or 0.0,
                  keras_split=keras_split, shuffled=shuffle_buffer != 0,
                  seed=seed, noun=noun, input_context=options.resolved().input_context)
    def chosen(name):
        paths, labels = choose_files(listing, subset=name, **choose)
        if verbose and name is not None and choose["validation_fraction"]:
            say(f"Using {len(paths)} files for {name}.")  # Keras' line, its wording
        return paths, labels

    if subset != "both":
        return make(*chosen(subset), shuffle_buffer=shuffle_buffer, options=options)
    # Keras' pair, from one listing; the validation subset is neither shuffled nor augmented
    # (tail.validation_options), but its files are chosen from the same permuted listing.
    train_cache, validation_cache = cache_files.split_prefixes(options.resolved().cache)
    return (make(*chosen("training"), shuffle_buffer=shuffle_buffer,
                 options=dataclasses.replace(options, cache=train_cache)),
            make(*chosen("validation"), shuffle_buffer=0,
                 options=dataclasses.replace(tail.validation_options(options),
                                             cache=validation_cache),
                 **(validation_only or {})))


def paths_dataset(paths: List[str], labels: List[int], *, listing: Listing, label_mode,
                  batch_size: Optional[int], map_fn: Callable, fingerprint: dict,
                  shuffled: bool, deterministic: Optional[bool], shuffle_buffer: int,
                  options: tail.TailOptions, per_file: Optional[Dict[str, list]] = None,
                  random_decode: Optional[Callable] = None, ignore_decode_errors: bool = False,
                  padded_batch: bool = False,
                  batch_map_fn: Optional[Callable] = None) -> tf.data.Dataset:
    """One subset's chosen files (and Keras' labels) read by `map_fn`, then the standard tail.

    `fingerprint` names the builder and its read settings for a file cache; the label mode
    and class names are added here. With `per_file` (integer columns, one value per path,
    e.g. where a file's samples start) `map_fn` gets ``{"path": ..., **per_file}`` instead
    of the path. The dataset gets Keras' ``class_names`` and tfaccel's ``file_paths`` and
    ``skipped_files``. `random_decode`, `ignore_decode_errors` and `padded_batch` are the
    builder's own stages (`tail.SourceStages`), as is `batch_map_fn`; `options` what the
    caller chose of the tail (`TailOptions.chosen`: the cache and the seed among them).
    """
    class_names = listing.class_names
    elements = tf.constant(paths, tf.string)
    if per_file:
        elements = {"path": elements,
                    **{key: tf.constant(values, tf.int64) for key, values in per_file.items()}}
    if label_mode is not None:
        elements = (elements, labels_as(labels, label_mode=label_mode,
                                        num_classes=len(class_names)))
    options, source_shuffle, shuffle_buffer, cache_fingerprint = reference_pipeline_options(
        paths, shuffle_buffer=shuffle_buffer, shuffled=shuffled,
        deterministic=deterministic, options=options, fingerprint={
            "label_mode": label_mode,
            "class_names": None if class_names is None else list(class_names),
            **fingerprint})
    stages = tail.SourceStages(
        map_fn=map_fn, source_shuffle=source_shuffle, shuffle_buffer=shuffle_buffer,
        ignore_decode_errors=ignore_decode_errors, random_decode=random_decode,
        padded_batch=padded_batch, cache_fingerprint=cache_fingerprint,
        batch_map_fn=batch_map_fn)
    dataset = tail.build(tf.data.Dataset.from_tensor_slices(elements), batch_size=batch_size,
                         source=stages, options=options)
    dataset.class_names = class_names if label_mode is not None else None  # as Keras
    dataset.file_paths = paths
    dataset.skipped_files = listing.skipped
    return dataset


def build_keras_splits(builder: Callable, config, *, batch_size: int,
                       common: tail.TailOptions, train_options: tail.TailOptions,
                       validation_options: tail.TailOptions, **kwargs):
    """A recipe's two splits of a class folder through `builder`, the function under its
    Keras drop-in.

    THE recipe rule of the class-folder sources: `data.validation_fraction` holds out
    Keras' files (``validation_split`` with the recipe's seed, ``subset="both"``), so the
    splits come from one listing and permutation and never overlap; the validation split
    is not shuffled.

    Args:
        builder: The loader's internal builder (`text_folder_dataset`, ...: its Keras
            drop-in's arguments, the tail's as one `TailOptions`).
        config: The recipe's `DataConfig` (path, validation_fraction, shuffle_buffer).
        batch_size: The global batch size.
        common: The tail options both splits take.
        train_options: The training split's tail options.
        validation_options: The validation split's tail options.
        **kwargs: The builder's own arguments.

    Returns:
        A `base.Built`: the builder's datasets, the class names and the files of each split.
    """
    fraction = config.validation_fraction or None
    split = dict(validation_split=fraction, subset="both") if fraction else {}

    def build(options, which):
        # The same shuffle_buffer in both calls: it decides whether the listing is
        # permuted before the split, so the validation call must hold out the same files
        # (with 0 here it held out the unpermuted tail, files the training call kept);
        # the validation subset of "both" is never shuffled itself.
        built = builder(config.path, batch_size=batch_size,
                        shuffle_buffer=config.shuffle_buffer,
                        verbose=False, **split, **kwargs, options=common.merged(options))
        return built[which] if fraction else built

    train = build(train_options, 0)
    val = build(validation_options, 1) if fraction else None
    return base.Built(train=train, validation=val, num_classes=len(train.class_names),
                      class_names=list(train.class_names),
                      train_examples=len(train.file_paths),
                      validation_examples=None if val is None else len(val.file_paths))
