"""A folder of .txt files, one sub-folder per class, as a batched tf.data pipeline of strings."""

from __future__ import annotations

import functools
import logging
from typing import Optional, Sequence, Union

import tensorflow as tf

from tfaccel.data import tail, text_files
from tfaccel.data.sources import base, class_folder
from tfaccel.data.text_files import as_utf8, check_encoding
from tfaccel.errors import DataError, UserInputError

logger = logging.getLogger(__name__)

TEXT_EXTENSIONS = (".txt",)  # Keras' only format


def decodes(path: str, *, encoding: Optional[str]) -> bool:
    """Whether the whole file decodes with `encoding` (None: UTF-8), strictly (`text_files`)."""
    try:
        text_files.read_text(path, encoding=encoding)
    except DataError:
        return False
    return True


def _reader(*, encoding: Optional[str], max_length: Optional[int]):
    """``fn(path[, label]) -> (text[, label])``: a file's contents as UTF-8."""
    def read(path, label=None):
        text = as_utf8(tf.io.read_file(path), encoding=encoding, max_length=max_length)
        return text if label is None else (text, label)

    return read


def text_kind(encoding: Optional[str]) -> class_folder.Kind:
    """The files a text folder lists: .txt files that decode with `encoding`."""
    return class_folder.Kind(
        extensions=TEXT_EXTENSIONS, noun="text files", files="text files",
        folder="Text folder", usable=f".txt file ({encoding or 'UTF-8'} text)",
        check=functools.partial(decodes, encoding=encoding))


def list_text_folder(path, *, encoding: Optional[str] = None, verify: bool = True,
                     class_names: Optional[Sequence[str]] = None, follow_links: bool = False,
                     labels: Union[str, Sequence[int], None] = "inferred"
                     ) -> class_folder.Listing:
    """Lists a text folder's .txt files in Keras' order, each checked to decode.

    See `class_folder.list_class_folder` for the arguments and the result. With labels
    from the sub-folders, a class sub-folder without a usable .txt file is refused: its
    class could never be learnt, and Keras' loader would say nothing.

    Raises:
        DataError: As `list_class_folder`, and a class sub-folder without a usable file.
    """
    kind = text_kind(encoding)
    listing = class_folder.list_class_folder(
        path, kind=kind, verify=verify, class_names=class_names,
        follow_links=follow_links, labels=labels)
    class_folder.refuse_empty_classes(listing, path=path, kind=kind, labels=labels)
    return listing


def _warn_skipped(listing: class_folder.Listing, *, path, encoding: Optional[str]) -> None:
    """ONE warning for every file left out: undecodable ones named, then other endings."""
    hint = ("pass encoding=..., e.g. encoding='latin-1', to read another encoding"
            if encoding is None else "check the `encoding` argument")
    class_folder.warn_skipped(logger, listing, path=path, extension=".txt",
                              unreadable=f"not {encoding or 'UTF-8'} text ({hint})")


def from_text_folder(directory, labels: Union[str, Sequence[int], None] = "inferred", *,
                     label_mode: Optional[str] = "int",
                     class_names: Optional[Sequence[str]] = None,
                     batch_size: Optional[int] = 32, max_length: Optional[int] = None,
                     shuffle: bool = True, seed: Optional[int] = None,
                     validation_split: Optional[float] = None, subset: Optional[str] = None,
                     follow_links: bool = False, verbose: bool = True, format: str = "tf",
                     encoding: Optional[str] = "utf-8", verify: bool = True,
                     shuffle_buffer: Optional[int] = None, cache=None,
                     deterministic: Optional[bool] = None,
                     augment=None, augment_on="batch", drop_remainder=None,
                     num_parallel_calls=tail.AUTOTUNE, private_threads=None,
                     ram_budget_bytes=None, shard_policy=None, image_dtype="float32",
                     input_context=None, sequential=False, stream=None, service=None,
                     batch_by_length=False, **unknown):
    """Builds batches of ``(text, label)`` from ``directory/<class name>/<file>.txt``.

    Example::

        train, val = tfaccel.data.from_text_folder(
            "aclImdb/train", batch_size=64, validation_split=0.2, subset="both", seed=1)
        print(train.class_names)   # ['neg', 'pos']

    A drop-in for `keras.utils.text_dataset_from_directory` (Keras' own tests of it run
    against this function: tests/test_text_folder_keras_suite.py): the same arguments,
    defaults, checks and error wording (a `UserInputError` is a `ValueError`), and the same
    files, order and output. The listing is Keras' (sorted classes, sorted walk), permuted
    by Keras' seeded rule when shuffling; `validation_split` holds out the last
    ``int(validation_split * n)`` of it; the paths are shuffled before reading with Keras'
    buffer (``8 * batch_size``, 1024 unbatched) and seed, so with a `seed` the batches are
    Keras' batches, element for element. Each file is read in a parallel map (AUTOTUNE)
    and batches are prefetched.

    Differences: every file is checked before training to decode with `encoding` (one
    read of each); a file that does not is skipped and named in ONE warning, where Keras
    passes its raw bytes on. A class sub-folder without a usable .txt file is a
    `DataError` (Keras yields no example of that class and says nothing). Hidden files
    (``.name.txt``) are not listed. The validation subset of ``subset="both"`` is not
    shuffled (as in Keras).

    Args:
        directory: Root folder; each sub-folder is a class, classes sorted by name.
        labels: "inferred" (from the sub-folders), None (every .txt file below
            `directory`, without labels), or a list of integer labels, one per .txt file
            in Keras' listing order (class names: the distinct labels as strings). A file
            skipped as undecodable is left out with its label.
        label_mode: "int" (int32 [B]), "categorical" (one-hot float32 [B, classes]),
            "binary" (float32 [B, 1], two classes only) or None (texts alone).
        class_names: Use only these sub-folders, labelled in this order (only with
            ``labels="inferred"``).
        batch_size: The GLOBAL batch size; None yields single texts (unbatched).
        max_length: Cut every text to its first `max_length` bytes (of UTF-8), as Keras.
        shuffle: Shuffle the files (False: Keras' listing order, kept by the parallel read).
        seed: Seeds the listing's permutation and the shuffle (None: different every
            run). Needed with `validation_split` when shuffling, as in Keras.
        validation_split: Fraction of the files held out (Keras' rule, above).
        subset: "training", "validation", "both" (the pair, from one listing) or None.
        follow_links: Descend into symbolic links to folders (default False, as Keras).
        verbose: Print Keras' "Found N files belonging to K classes." line and, where a
            fraction is held out, its "Using N files for training." / "... for
            validation." lines.
        format: Keras' "tf" (a `tf.data.Dataset`, the only one made); "grain" is refused.
        encoding: The files' encoding; texts are transcoded from it to UTF-8
            (`tf.strings.unicode_transcode`), e.g. "latin-1" or "cp1252".
        verify: Check that every file decodes with `encoding` before training.
        shuffle_buffer: Examples in the shuffle buffer (None: Keras' size, above): over
            paths before reading without `cache`, over texts after it with one.
        cache: None, ``"memory"`` or a file path; see `tfaccel.data.optimize`. A file cache
            is fingerprinted with the files (names, sizes, times), their order and every
            read setting.
        deterministic: Keep the element order fixed (None: when a `seed` is given or not
            shuffling, as Keras' loader; otherwise texts are handed out as they are read).
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
        A `tf.data.Dataset` of ``(texts tf.string [B], labels)`` (texts alone with
        ``label_mode=None``) with attributes ``class_names``, ``file_paths`` and
        ``skipped_files``; with ``subset="both"`` a ``(training, validation)`` pair.

    Raises:
        DataError: Missing directory, no class sub-folders, a class sub-folder or the whole
            folder without a usable .txt file.
        UserInputError: A bad argument value.
    """
    class_folder.check_format(format)
    tail.refuse_unknown(unknown, builder=from_text_folder)
    options = tail.TailOptions(
        seed=seed, cache=cache, deterministic=deterministic, augment=augment,
        augment_on=augment_on, drop_remainder=drop_remainder,
        num_parallel_calls=num_parallel_calls, private_threads=private_threads,
        ram_budget_bytes=ram_budget_bytes, shard_policy=shard_policy, image_dtype=image_dtype,
        input_context=input_context, sequential=sequential, stream=stream, service=service,
        batch_by_length=batch_by_length)
    return text_folder_dataset(
        directory, labels, label_mode=label_mode, class_names=class_names,
        batch_size=batch_size, max_length=max_length, shuffle=shuffle,
        validation_split=validation_split, subset=subset, follow_links=follow_links,
        verbose=verbose, encoding=encoding, verify=verify, shuffle_buffer=shuffle_buffer,
        options=options)


def text_folder_dataset(directory, labels: Union[str, Sequence[int], None] = "inferred", *,
                        options: tail.TailOptions, label_mode: Optional[str] = "int",
                        class_names: Optional[Sequence[str]] = None,
                        batch_size: Optional[int] = 32, max_length: Optional[int] = None,
                        shuffle: bool = True, validation_split: Optional[float] = None,
                        subset: Optional[str] = None, follow_links: bool = False,
                        verbose: bool = True, encoding: Optional[str] = "utf-8",
                        verify: bool = True, shuffle_buffer: Optional[int] = None):
    """`from_text_folder` with the tail's options as one `TailOptions` (what the source
    calls; ``deterministic`` None or unset: as `from_text_folder`'s None); the other
    arguments and their defaults as `from_text_folder`'s."""
    # The caller's own order switch (None: decided per subset), then only what the caller
    # chose: the loader decides the rest (the shard policy).
    deterministic = None if options.deterministic is tail.UNSET else options.deterministic
    options = options.without(["deterministic"]).chosen()
    seed, cache = options.resolved().seed, options.resolved().cache
    label_mode, labels = class_folder.check_label_arguments(
        label_mode=label_mode, labels=labels, files="text files")
    shuffle_buffer = class_folder.keras_shuffle_buffer(
        shuffle=shuffle, shuffle_buffer=shuffle_buffer, batch_size=batch_size,
        validation_split=validation_split, subset=subset, seed=seed)
    if max_length is not None and (isinstance(max_length, bool) or not isinstance(
            max_length, int) or max_length < 0):
        raise UserInputError(f"max_length must be an integer >= 0 or None, got "
                             f"max_length={max_length!r}.")
    encoding = check_encoding(encoding)
    listing = list_text_folder(directory, encoding=encoding, verify=verify,
                               class_names=class_names, follow_links=follow_links,
                               labels=labels)
    class_folder.check_binary(listing, label_mode=label_mode, path=directory)
    _warn_skipped(listing, path=directory, encoding=encoding)
    if verbose:
        class_folder.say_found(listing)
    read = functools.partial(
        class_folder.paths_dataset, listing=listing, label_mode=label_mode,
        batch_size=batch_size, map_fn=_reader(encoding=encoding, max_length=max_length),
        fingerprint={"builder": "from_text_folder", "max_length": max_length,
                     "encoding": encoding, **class_folder.labels_fingerprint(labels, cache)},
        shuffled=shuffle_buffer != 0, deterministic=deterministic)
    # No ignore_errors stage: every file decoded in the up-front check, and that stage cost
    # a quarter of the throughput (measured, benchmarks/bench_data_text.py).
    return class_folder.keras_subsets(listing, read, subset=subset,
                                      validation_split=validation_split, seed=seed,
                                      shuffle_buffer=shuffle_buffer,
                                      noun="text files", options=options,
                                      verbose=verbose)


class TextFolderSource(base.Source):
    """``data.source: text_folder``: one ``.txt`` file per example, in class sub-folders.

    `data.validation_fraction` holds out Keras' files (`validation_split` with the recipe's
    seed); both splits come from the same listing and permutation, so they never overlap.
    """

    names = ("text_folder",)

    def build(self, *, batch_size, common, train_options, validation_options) -> base.Built:
        return class_folder.build_keras_splits(
            text_folder_dataset, self.config, batch_size=batch_size, common=common,
            train_options=train_options, validation_options=validation_options)

    def plain_training(self, built, *, batch_size):
        # The files the training split reads, checked once already by `build`; read as
        # the recipe reads them (UTF-8, whole).
        read = _reader(encoding=None, max_length=None)
        return tf.data.Dataset.from_tensor_slices(list(built.train.file_paths)).map(
            read, num_parallel_calls=tf.data.AUTOTUNE).batch(batch_size)
