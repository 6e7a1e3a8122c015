"""TFRecord files (glob, feature spec, compression) as a batched tf.data pipeline."""

from __future__ import annotations

import gzip
import os
import struct
import zlib
from typing import Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import tensorflow as tf

from tfaccel.data import files_stage, images, label_ids, tail
from tfaccel.data.sources import base
from tfaccel.errors import DataError, UserInputError
from tfaccel.reading import labels as label_rule

_COMPRESSIONS = (None, "", "GZIP", "ZLIB")
_DTYPES = {"int64": tf.int64, "int": tf.int64, "float32": tf.float32, "float": tf.float32,
           "string": tf.string, "bytes": tf.string}


def parse_feature_spec(features: Mapping) -> Tuple[dict, Tuple[str, ...]]:
    """Turns a feature spec (Python or YAML form) into a ``tf.io.parse_example`` spec.

    The Python form maps names to ``tf.io.FixedLenFeature``/``VarLenFeature``/
    ``RaggedFeature`` objects. The YAML form maps names to plain dicts::

        image: {dtype: string, decode: image}    # encoded JPEG/PNG bytes (or kind: image)
        label: {dtype: int64}                    # shape [] by default
        bbox:  {dtype: float32, shape: [4]}
        tokens: {dtype: int64, kind: var}        # variable length, batched as ragged

    Returns:
        ``(spec, image_keys)``: the parse spec and the names marked ``decode: image``.

    Raises:
        UserInputError: An unknown key, dtype or kind (naming the feature).
    """
    if not isinstance(features, Mapping) or not features:
        raise UserInputError(f"features must be a non-empty dict, got {features!r}.")
    spec, image_keys = {}, []
    for name, value in features.items():
        if isinstance(value, (tf.io.FixedLenFeature, tf.io.VarLenFeature, tf.io.RaggedFeature,
                              tf.io.FixedLenSequenceFeature, tf.io.SparseFeature)):
            spec[name] = value
            continue
        if not isinstance(value, Mapping):
            raise UserInputError(f"features[{name!r}] must be a tf.io feature or a dict like "
                                 f"{{dtype: int64, shape: [], kind: fixed}}, got {value!r}.")
        unknown = set(value) - {"dtype", "shape", "kind", "default", "decode"}
        if unknown:
            raise UserInputError(f"features[{name!r}] has unknown key(s) {sorted(unknown)}.")
        if value.get("kind") == "image":
            # The recipe's shorthand: encoded image bytes to decode.
            value = {**{k: v for k, v in value.items() if k != "kind"},
                     "dtype": value.get("dtype", "string"), "decode": "image"}
        dtype_name = str(value.get("dtype", "")).lower()
        if dtype_name not in _DTYPES:
            raise UserInputError(f"features[{name!r}].dtype must be one of {sorted(_DTYPES)}, "
                                 f"got {value.get('dtype')!r}.")
        dtype = _DTYPES[dtype_name]
        kind = value.get("kind", "fixed")
        if kind == "fixed":
            shape = list(value.get("shape", []))
            spec[name] = tf.io.FixedLenFeature(shape, dtype, default_value=value.get("default"))
        elif kind == "var":
            spec[name] = tf.io.RaggedFeature(dtype)
        else:
            raise UserInputError(f"features[{name!r}].kind must be 'fixed', 'var' or "
                                 f"'image', got {kind!r}.")
        decode = value.get("decode")
        if decode not in (None, "image"):
            raise UserInputError(f"features[{name!r}].decode must be 'image' or absent, got "
                                 f"{decode!r}.")
        if decode == "image":
            if dtype != tf.string or kind != "fixed":
                raise UserInputError(f"features[{name!r}] with decode: image must be a fixed "
                                     "string feature.")
            image_keys.append(name)
    return spec, tuple(image_keys)


class _ZlibReader:
    """A minimal file-like `read(n)` over a zlib stream (TF's "ZLIB" compression)."""

    def __init__(self, raw):
        self._raw, self._inflate, self._buffer = raw, zlib.decompressobj(), b""

    def read(self, n):
        while len(self._buffer) < n:
            chunk = self._raw.read(1 << 16)
            if not chunk:
                if not self._inflate.eof:
                    raise EOFError("zlib stream ended early")
                break
            self._buffer += self._inflate.decompress(chunk)
        out, self._buffer = self._buffer[:n], self._buffer[n:]
        return out


def check_record_file(path: str, compression: Optional[str] = None) -> int:
    """Walks a TFRecord file's record headers and returns its number of records.

    Uncompressed files are checked by seeking from header to header (a few bytes read per
    record); compressed files have to be streamed through the decompressor once.

    Raises:
        DataError: The file is truncated or its framing is corrupt, naming the file and the
            record where it ends. (tf.data itself reports only an offset, and
            ``ignore_errors()`` on such a file can loop forever: tensorflow#25700.)
    """
    size = os.path.getsize(path)
    count = 0
    with open(path, "rb") as raw:
        if compression == "GZIP":
            stream = gzip.GzipFile(fileobj=raw)
        elif compression == "ZLIB":
            stream = _ZlibReader(raw)
        else:
            stream = None
        try:
            while True:
                header = (stream or raw).read(12)
                if not header:
                    return count
                if len(header) < 12:
                    break
                (length,) = struct.unpack("<Q", header[:8])
                if stream is None:
                    end = raw.tell() + length + 4
                    if end > size:
                        break
                    raw.seek(end)
                else:
                    remaining = length + 4
                    while remaining:
                        got = len(stream.read(min(remaining, 1 << 20)))
                        if not got:
                            break
                        remaining -= got
                    if remaining:
                        break
                count += 1
        except (EOFError, OSError, zlib.error, gzip.BadGzipFile) as err:
            raise DataError(f"TFRecord file {path!r} is corrupt or truncated after {count} "
                            f"record(s) ({compression or 'uncompressed'}): {err}") from None
    raise DataError(f"TFRecord file {path!r} is truncated: record {count + 1} is cut short "
                    f"({compression or 'uncompressed'}, {size} bytes). Re-write or remove it.")


def from_tfrecords(pattern: Union[str, Sequence[str]], *, features: Mapping,
                   batch_size: int, label_key: Optional[str] = "label",
                   input_key: Optional[str] = None,
                   compression: Optional[str] = None,
                   image_size: Optional[Sequence[int]] = None, channels: int = 3,
                   shuffle_buffer: int = 0, seed: Optional[int] = None,
                   cycle_length: Optional[int] = None, verify: bool = True,
                   input_context: Optional[tf.distribute.InputContext] = None,
                   rows: Optional[files_stage.RowSplit] = None,
                   cache=None, augment=None, augment_on="batch", drop_remainder=None,
                   deterministic=False, num_parallel_calls=tail.AUTOTUNE, private_threads=None,
                   ram_budget_bytes=None, shard_policy=None, image_dtype="float32",
                   sequential=False, stream=None, service=None, batch_by_length=False,
                   **unknown) -> tf.data.Dataset:
    """Builds batches from TFRecord files of ``tf.train.Example`` protos.

    Example::

        train = tfaccel.data.from_tfrecords(
            "data/train-*.tfrecord", batch_size=256, compression="GZIP",
            features={"image": {"dtype": "string", "decode": "image"},
                      "label": {"dtype": "int64"}},
            image_size=(64, 64), shuffle_buffer=10_000, seed=0)

    Args:
        pattern: A glob (or list of globs); each must match at least one file.
        features: Feature spec, Python or YAML form (see `parse_feature_spec`).
        batch_size: The GLOBAL batch size.
        label_key: The feature used as label (None: features only). If one feature remains
            it is yielded as a tensor, otherwise as a dict.
        input_key: Yield only this feature as the input (others are parsed but dropped).
        compression: None, ``"GZIP"`` or ``"ZLIB"``.
        image_size: ``(height, width)`` that ``decode: image`` features are resized to.
        channels: Channels of decoded images.
        shuffle_buffer: Shuffle buffer in examples, 0 for no shuffling (as
            ``data.shuffle_buffer``); the file order is shuffled too when > 0.
        seed: Seed for shuffling and augmentation.
        cycle_length: Files read at once by the parallel interleave (None: min(files, 16)).
        verify: Walk every file's record framing before training (see `check_record_file`).
            Without it a truncated file stops training with TensorFlow's DataLossError
            (an offset, not the file, named).
        input_context: From ``distribute_datasets_from_function``: by file, or by
            example with fewer files than pipelines (`files_stage.split_for_workers`).
        rows: One side of a split of the records of these files (a recipe's
            validation_fraction with too few files for whole ones): only that side's
            records are read, before any shuffle or worker split. The records are then
            counted even without `verify`.
        cache: None, ``"memory"`` or a file prefix: `tfaccel.data.optimize`'s `cache`.
        augment: Augmentation names or a callable (`optimize`'s `augment`).
        augment_on: Where a callable `augment` runs (`optimize`'s `augment_on`).
        drop_remainder: None: True when more than one replica is in sync.
        deterministic: Fix the element order (`optimize`'s `deterministic`).
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
        A `tf.data.Dataset` of ``(features, label)`` batches, with attributes ``files``,
        ``num_examples`` (records read, in all files; None without `verify`) and
        ``kept_rows`` (with `rows`: the records kept of each file, else None).

    Raises:
        DataError: A glob matches nothing, or a file is truncated (named).
        UserInputError: A bad feature spec, label key or compression.
    """
    tail.refuse_unknown(unknown, builder=from_tfrecords)
    options = tail.TailOptions(
        seed=seed, input_context=input_context, cache=cache, augment=augment,
        augment_on=augment_on, drop_remainder=drop_remainder, deterministic=deterministic,
        num_parallel_calls=num_parallel_calls, private_threads=private_threads,
        ram_budget_bytes=ram_budget_bytes, shard_policy=shard_policy, image_dtype=image_dtype,
        sequential=sequential, stream=stream, service=service,
        batch_by_length=batch_by_length)
    return tfrecords_dataset(pattern, features=features, batch_size=batch_size,
                             label_key=label_key, input_key=input_key,
                             compression=compression, image_size=image_size,
                             channels=channels, shuffle_buffer=shuffle_buffer,
                             cycle_length=cycle_length, verify=verify, rows=rows,
                             options=options)


def tfrecords_dataset(pattern, *, features: Mapping, batch_size: int,
                      label_key: Optional[str], input_key: Optional[str],
                      compression: Optional[str], image_size, channels: int,
                      shuffle_buffer: int, cycle_length: Optional[int], verify: bool,
                      rows: Optional[files_stage.RowSplit],
                      options: tail.TailOptions) -> tf.data.Dataset:
    """`from_tfrecords` with the tail's options as one `TailOptions` (what the source
    calls); the arguments as `from_tfrecords`'."""
    options = options.chosen()  # what the caller chose; this source decides the rest
    seed, input_context = options.resolved().seed, options.resolved().input_context
    if compression not in _COMPRESSIONS:
        raise UserInputError(f"compression must be None, 'GZIP' or 'ZLIB', got "
                             f"{compression!r}.")
    compression = compression or None
    spec, image_keys = parse_feature_spec(features)
    if label_key is not None and label_key not in spec:
        raise UserInputError(f"label_key {label_key!r} is not among the features "
                             f"{sorted(spec)}.")
    if input_key is not None and input_key not in spec:
        raise UserInputError(f"input_key {input_key!r} is not among the features "
                             f"{sorted(spec)}.")
    if image_keys and image_size is None:
        raise UserInputError(f"features {list(image_keys)} have decode: image, so image_size "
                             "(height, width) is needed to batch them.")
    files = files_stage.list_files(pattern, what="TFRecord")
    file_counts = (files_stage.count_each(files, lambda f: check_record_file(f, compression))
                   if verify or (rows is not None and rows.counts is None) else None)
    kept = files_stage.kept_rows(rows, files, file_counts, what="TFRecord records")
    num_examples = (sum(kept.counts(files)) if kept is not None
                    else None if file_counts is None else sum(file_counts))
    shuffled = bool(shuffle_buffer)
    # The one seeded file order (files named by class still mix before any cache), then
    # this pipeline's share of it (the runner plans the shares in the same order).
    (files,) = files_stage.read_order(files, shuffled=shuffled, seed=seed,
                                      input_context=input_context)
    options, (files,) = files_stage.split_for_workers(files, options=options)
    # The files this pipeline reads (names, sizes, times), their order and the parse
    # and decode settings: everything the cached examples depend on.
    fingerprint = files_stage.fingerprint_cache(
        cache=options.resolved().cache, builder="from_tfrecords", files=files,
        seed=seed, shuffled=shuffled, features={k: repr(v) for k, v in spec.items()},
        label_key=label_key, input_key=input_key, compression=compression,
        image_size=None if image_size is None else [int(v) for v in image_size],
        channels=channels, **(kept.describe() if kept is not None else {}))
    file_ds = tf.data.Dataset.from_tensor_slices(files)
    if shuffled:
        file_ds = files_stage.shuffle_each_pass(file_ds, num_files=len(files), seed=seed,
                                                options=options)
    records = files_stage.interleave(
        file_ds, files_stage.keep_rows(
            lambda f: tf.data.TFRecordDataset(f, compression_type=compression or ""), kept),
        num_files=len(files), cycle_length=cycle_length, options=options)

    decode_size = None if image_size is None else [int(v) for v in image_size]


    def parse(record):
        example = tf.io.parse_single_example(record, spec)
        for key in image_keys:
            image = images.decode_image(example[key], channels)
            if decode_size is not None:
                image = images.resize_to_uint8(image, decode_size)
            example[key] = image
        if label_key is None:
            return example if len(example) > 1 else next(iter(example.values()))
        label = example.pop(label_key)
        if input_key is not None:
            return example[input_key], label
        feats = example if len(example) > 1 else next(iter(example.values()))
        return feats, label

    # Outside a stream the files are real reader datasets, so a multi-worker strategy can
    # split them by FILE (each worker reads only its files) when there are at least as many
    # files as workers; by element (DATA) otherwise; not again (OFF) when an input context
    # already gave this pipeline its share.
    options = files_stage.choose_shard_policy(options, num_files=len(files))
    dataset = tail.build(records, batch_size=batch_size, options=options,
                         source=tail.SourceStages(map_fn=parse, shuffle_buffer=shuffle_buffer,
                                                  cache_fingerprint=fingerprint))
    dataset.files = files
    dataset.num_examples = num_examples
    dataset.kept_rows = kept
    return dataset



class TfrecordsSource(base.Source):
    """``data.source: tfrecords``: files held out whole, or their records when there are too
    few files (`files_stage.split_files`), or data.validation_path's files; labels read
    up front (`tfaccel.reading.labels`) or, with verify_records false and num_classes
    given, checked as they stream."""

    names = ("tfrecords",)

    def split(self):
        """`files_stage.split_files` of the recipe: the files (and rows) of each split."""
        config = self.config
        return files_stage.split_files(config.path, fraction=config.validation_fraction,
                                       seed=self.seed, what="TFRecord",
                                       validation_pattern=config.validation_path)

    def files(self) -> Tuple[list, list]:
        """The training and validation record files, in read order."""
        files, val_files, _, _ = self.split()
        return files, val_files

    def build(self, *, batch_size, common, train_options, validation_options) -> base.Built:
        config = self.config
        label_key = config.label_key
        if isinstance(label_key, (list, tuple)):
            raise DataError(f"data.label_key {list(label_key)!r}: a TFRecord source reads one "
                            "label feature (a var-length int feature holds several labels "
                            "per example).")
        spec, _ = parse_feature_spec(config.features)
        wanted = config.image_key or "image"  # empty: the feature named image, if any
        input_key = wanted if wanted in spec else None
        kwargs = dict(features=config.features, label_key=label_key,
                      input_key=input_key, compression=config.compression,
                      image_size=config.image_size, channels=config.channels,
                      verify=config.verify_records, cycle_length=None)
        files, val_files, rows, val_rows = self.split()
        train = tfrecords_dataset(files, batch_size=batch_size, rows=rows,
                                  shuffle_buffer=config.shuffle_buffer, **kwargs,
                                  options=common.merged(train_options))
        if val_rows is not None:
            # The same files: the counts the training split took.
            val_rows = train.kept_rows.counted(val_rows)
        val = None
        if val_files:
            val = tfrecords_dataset(val_files, batch_size=batch_size, shuffle_buffer=0,
                                    rows=val_rows, **kwargs,
                                    options=common.merged(validation_options))
        # Read now: the label check below wraps the datasets (attributes do not follow).
        counts = (train.num_examples, None if val is None else val.num_examples)
        where = f"data.label_key {label_key!r} of data.path {config.path!r}"
        if config.verify_records or config.num_classes is None:
            # Every split's labels, not the training files' alone: a class seen only in
            # validation would otherwise crash (CPU) or give NaN (GPU) there.
            plan = self._plan(self._labels(files, train), where=where, spec=spec)
            if val is not None:
                val_labels = self._labels(val_files, val)
                if config.num_classes is not None:
                    label_rule.plan_labels(val_labels, task=config.task, where=where,
                                       num_classes=config.num_classes)
                label_ids.check_known(plan, val_labels, where=(
                    f"data.label_key {label_key!r} of data.validation_path "
                    f"{config.validation_path!r}" if config.validation_path
                    else f"{where} (validation split)"))
            train = label_ids.encode_labels(train, plan)
            val = label_ids.encode_labels(val, plan)
            return base.Built(
                train=train, validation=val, num_classes=plan.num_classes,
                class_names=None if plan.class_names is None else list(plan.class_names),
                train_examples=counts[0], validation_examples=counts[1], task=plan.task,
                num_outputs=plan.num_outputs)
        # Nothing read up front (verify_records: false with num_classes given): the
        # labels are checked as they stream, like a python source's.
        num_classes = config.num_classes
        where = f"TFRecord files {config.path!r}"
        train = base.check_labels_in_pipeline(train, num_classes, where=f"{where} (training)")
        if val is not None:
            val = base.check_labels_in_pipeline(val, num_classes,
                                                where=f"{where} (validation)")
        return base.Built(train=train, validation=val, num_classes=num_classes,
                          class_names=[str(i) for i in range(num_classes)],
                          train_examples=counts[0], validation_examples=counts[1],
                          task="binary" if config.task == "binary" else "classification",
                          num_outputs=1 if config.task == "binary" else num_classes)

    def _plan(self, found, *, where: str, spec) -> label_rule.LabelPlan:
        """The label rule on the training labels; a var-length int feature (a list of
        labels per example) is multi_label over its sorted distinct values."""
        config = self.config
        if not isinstance(spec[config.label_key], tf.io.RaggedFeature):
            return label_rule.plan_labels(found, task=config.task, where=where,
                                          num_classes=config.num_classes)
        if config.task not in ("auto", "multi_label"):
            raise DataError(f"{where} is a list of labels per example (kind: var): "
                            f"data.task multi_label (or auto), not {config.task}.")
        seen = sorted({int(v) for v in found})
        values = list(range(config.num_classes)) if config.num_classes else seen
        outside = [v for v in seen if config.num_classes and not 0 <= v < config.num_classes]
        if outside or len(values) < 2:
            raise DataError(f"{where} holds the labels {seen[:10]}: a multi-label task needs "
                            "at least 2 labels" + (f", ids from 0 to data.num_classes - 1 "
                                                   f"(not {outside[0]})" if outside else "")
                            + ".")
        return label_rule.LabelPlan("multi_label", tuple(str(v) for v in values),
                                    len(values), tuple(values))

    def _labels(self, files, built) -> np.ndarray:
        """One pass over the label feature of one split's files (its records only, with a
        row split): every label, in no particular order."""
        config = self.config
        feature = parse_feature_spec(config.features)[0][config.label_key]
        listed = isinstance(feature, tf.io.RaggedFeature)
        if listed and feature.dtype != tf.int64 or not (
                listed or isinstance(feature, tf.io.FixedLenFeature)):
            raise DataError(
                f"data.label_key {config.label_key!r} is a var-length {feature.dtype.name} "
                "feature: a list of labels per example (multi_label) is read from an int64 "
                "feature (kind: var); else use a fixed label feature.")
        spec = {config.label_key: feature}
        kept = getattr(built, "kept_rows", None)
        reader = files_stage.keep_rows(
            lambda f: tf.data.TFRecordDataset(f, compression_type=config.compression or ""),
            kept)
        records = tf.data.Dataset.from_tensor_slices(files).interleave(
            reader, cycle_length=min(len(files), 16), num_parallel_calls=tf.data.AUTOTUNE)
        batches = records.batch(4096).map(
            lambda r: tf.io.parse_example(r, spec)[config.label_key])
        if listed:  # the labels of every list, flat: the distinct ones are the classes
            batches = batches.map(lambda ragged: ragged.flat_values)
        found = list(batches.as_numpy_iterator())
        if not found:
            raise DataError(f"No labels found in {config.path!r}: its files hold no examples; "
                            "write examples into them.")
        return np.concatenate(found)

    def damaged_file(self) -> Optional[str]:
        """The first training or validation file whose record framing is cut or corrupt
        (`check_record_file`), for a run that read them unchecked (verify_records false)."""
        train_files, val_files = self.files()
        for path in dict.fromkeys([*train_files, *val_files]):  # a row split: the same files
            try:
                check_record_file(path, self.config.compression)
            except DataError as error:
                return str(error)
        return None

    def file_counts(self):
        config = self.config
        files, _, rows, _ = self.split()
        counts = (files_stage.count_each(
            files, lambda f: check_record_file(f, config.compression or None))
            if config.verify_records or rows is not None else None)
        if rows is not None:  # the training records of each file, not all of them
            counts = files_stage.kept_rows(rows, files, counts,
                                           what="TFRecord records").counts(files)
        # In the order from_tfrecords reads them (worker i gets files i, i + n, ... of it).
        _, counts = files_stage.read_order(files, counts, shuffled=bool(config.shuffle_buffer),
                                           seed=self.seed)
        return counts, "TFRecord files"
