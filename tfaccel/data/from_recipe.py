"""Builds the train/validation datasets a recipe's data section describes."""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import os
import sys
from typing import Optional, Tuple

import numpy as np
import tensorflow as tf

from tfaccel.data import cache_files, pipeline, sharding, splits
from tfaccel.data.sources import arrays
from tfaccel.data.sources import image_folder
from tfaccel.data.sources import python as python_source
from tfaccel.data.sources import tfds as tfds_source
from tfaccel.data.sources import tfrecords
from tfaccel.config import input_paths
from tfaccel.data.service import ServiceTarget
from tfaccel.errors import DataError

BUILTIN_DEFAULT = "tfaccel_shapes"


def _common(config, *, seed: int, deterministic: bool, sequential: bool) -> dict:
    """Options of the standard tail shared by every source."""
    return {
        "sequential": sequential,
        "seed": seed,
        "deterministic": deterministic,
        "num_parallel_calls": config.num_parallel_calls or tf.data.AUTOTUNE,
        "private_threads": config.private_threads,
        "ram_budget_bytes": (config.ram_budget_mb or 0) * 2**20 or None,
    }


def _cache_prefixes(config, worker=(0, 1)) -> Tuple[Optional[str], Optional[str]]:
    """The training and validation caches: "memory", None, or each split's own file prefix.

    Each worker of a multi-worker job caches what it reads under its own prefix.
    """
    return cache_files.split_prefixes(config.cache, worker=worker)


def _train_tail(config, num_replicas: int, *, stream=None, input_context=None,
                worker=(0, 1)) -> dict:
    # The one drop rule (pipeline.drops_remainder): the same one steps_per_epoch counts with.
    tail = {"cache": _cache_prefixes(config, worker)[0],
            "augment": list(config.augment) or None,
            "drop_remainder": pipeline.drops_remainder(num_replicas)}
    if stream is not None:
        # The runner's resumable stream of passes (pipeline.EpochStream).
        tail["stream"] = stream
    if input_context is not None:
        tail["input_context"] = input_context
    target = ServiceTarget.from_config(getattr(config, "service", None))
    if target is not None:
        # Training input only: validation is read once per epoch, without augmentation,
        # and stays in this process.
        if target.job_name and stream is not None and (stream.first_pass
                                                       or stream.skip_batches):
            # A named job is joined, not rebuilt: the dispatcher may still hold the
            # interrupted run's job, and rejoining it would ignore the resume point.
            target = dataclasses.replace(target, job_name=(
                f"{target.job_name}-resume-pass{stream.first_pass}-batch"
                f"{stream.skip_batches}"))
        tail["service"] = target
    return tail


def _val_tail(config, worker=(0, 1)) -> dict:
    # Validation: same decoding and cache, never shuffled or augmented, and the last partial
    # batch kept (Keras evaluates uneven batches fine, even under a strategy).
    return {"cache": _cache_prefixes(config, worker)[1], "augment": None,
            "drop_remainder": False}


def _tfds_splits(config, name) -> Tuple[str, Optional[str]]:
    if config.validation_fraction:
        # TFDS reads record files in order and slices by example index, so the held-out
        # part is the split's tail, of exactly held_out_count examples (the one rule's
        # count; whole-percent slicing rounded it).
        base = config.train_split
        builder = tfds_source.load_builder(name, data_dir=config.data_dir,
                                           download=config.download)
        n = builder.info.splits[base].num_examples
        keep = n - splits.held_out_count(n, config.validation_fraction)
        return f"{base}[:{keep}]", f"{base}[{keep}:]"
    return config.train_split, (config.validation_split or None)


def _build_tfds(config, name, *, batch, common, train_opts, val_opts):
    train_split, val_split = _tfds_splits(config, name)
    kwargs = dict(data_dir=config.data_dir, download=config.download,
                  image_size=config.image_size, keys=(config.image_key, config.label_key),
                  **common)
    train = tfds_source.from_tfds(name, split=train_split, batch_size=batch,
                                  shuffle_buffer=config.shuffle_buffer, **kwargs, **train_opts)
    val = None
    if val_split:
        val = tfds_source.from_tfds(name, split=val_split, batch_size=batch, shuffle_buffer=0,
                                    **kwargs, **val_opts)
    info = train.info
    label = info.features[config.label_key]
    num_classes = getattr(label, "num_classes", None) or getattr(config, "num_classes", None)
    return train, val, {
        "num_classes": num_classes,
        "class_names": train.class_names,
        "train_examples": train.num_examples,
        "validation_examples": None if val is None else val.num_examples,
    }


def _build_image_folder(config, *, batch, common, train_opts, val_opts):
    # Listed (and every file's header checked) once, for both subsets.
    listing = image_folder.list_image_folder(config.path)
    kwargs = dict(image_size=config.image_size, channels=config.channels, listing=listing,
                  jpeg_dct_scaling=config.jpeg_dct_scaling, **common)
    fraction = config.validation_fraction
    train = image_folder.from_image_folder(
        config.path, batch_size=batch, validation_fraction=fraction,
        subset="training" if fraction else None,
        shuffle_buffer=config.shuffle_buffer, **kwargs, **train_opts)
    val = None
    if fraction:
        val = image_folder.from_image_folder(
            config.path, batch_size=batch, validation_fraction=fraction, subset="validation",
            shuffle_buffer=0, **kwargs, **val_opts)
    return train, val, {
        "num_classes": len(train.class_names),
        "class_names": train.class_names,
        "train_examples": len(train.file_paths),
        "validation_examples": None if val is None else len(val.file_paths),
    }


def _tfrecord_files(config, seed: int) -> Tuple[list, list]:
    """The training and validation record files, in read order."""
    files = tfrecords.list_record_files(config.path)
    if not config.validation_fraction:
        return files, []
    # Held out by whole files (the one seeded rule over files), so no record is ever read
    # by both.
    train_idx, val_idx = splits.split_indices(len(files), config.validation_fraction, seed,
                                              what="TFRecord files")
    return [files[i] for i in train_idx], [files[i] for i in val_idx]


def _build_tfrecords(config, *, batch, common, train_opts, val_opts):
    spec, _ = tfrecords.parse_feature_spec(config.features)
    input_key = config.image_key if config.image_key in spec else None
    kwargs = dict(features=config.features, label_key=config.label_key, input_key=input_key,
                  compression=config.compression, image_size=config.image_size,
                  channels=config.channels, verify=config.verify_records, **common)
    files, val_files = _tfrecord_files(config, common["seed"])
    train = tfrecords.from_tfrecords(files, batch_size=batch,
                                     shuffle_buffer=config.shuffle_buffer, **kwargs, **train_opts)
    val = None
    if val_files:
        val = tfrecords.from_tfrecords(val_files, batch_size=batch, shuffle_buffer=0,
                                       **kwargs, **val_opts)
    counts = (train.num_examples, None if val is None else val.num_examples)
    if config.verify_records or config.num_classes is None:
        # Every split's labels, not the training files' alone: a class seen only in
        # validation would otherwise crash (CPU) or give NaN (GPU) there.
        low, high = _tfrecord_label_range(files + val_files, config)
        num_classes = classes_for_labels(low, high, num_classes=config.num_classes,
                                         where=repr(config.path))
    else:
        # Nothing read up front (verify_records: false with num_classes given): the labels
        # are checked as they stream, like a python source's.
        num_classes = config.num_classes
        where = f"TFRecord files {config.path!r}"
        train = _check_labels_in_pipeline(train, num_classes, where=f"{where} (training)")
        if val is not None:
            val = _check_labels_in_pipeline(val, num_classes, where=f"{where} (validation)")
    return train, val, {
        "num_classes": num_classes,
        "class_names": None,
        "train_examples": counts[0],
        "validation_examples": counts[1],
    }


def _tfrecord_label_range(files, config):
    """One pass over the label feature only: (smallest, largest) label."""
    spec = {config.label_key: tfrecords.parse_feature_spec(config.features)[0][config.label_key]}
    records = tf.data.TFRecordDataset(files, compression_type=config.compression or "",
                                      num_parallel_reads=tf.data.AUTOTUNE)
    labels = records.batch(1024).map(lambda r: tf.io.parse_example(r, spec)[config.label_key])
    low, high = None, None
    for batch in labels.as_numpy_iterator():
        if batch.size:
            low = int(np.min(batch)) if low is None else min(low, int(np.min(batch)))
            high = int(np.max(batch)) if high is None else max(high, int(np.max(batch)))
    if high is None:
        raise DataError(f"No labels found in {config.path!r}; set data.num_classes.")
    return low, high


def classes_for_labels(low: int, high: int, *, num_classes, where: str) -> int:
    """THE label rule: labels are 0..num_classes-1 (inferred as largest + 1 if not given).

    Raises:
        DataError: A label is negative or not below the given `data.num_classes`.
    """
    if low < 0:
        raise DataError(f"{where} holds label {low}; labels must be integers from 0 to "
                        "data.num_classes - 1.")
    if num_classes is None:
        return high + 1
    if high >= num_classes:
        raise DataError(f"{where} holds label {high} but data.num_classes is {num_classes}; "
                        f"labels must be below it (set data.num_classes: {high + 1} or more, "
                        "or fix the labels).")
    return num_classes


def _build_arrays(config, *, batch, common, train_opts, val_opts):
    path = config.path
    if not os.path.exists(path):
        raise DataError(f"Arrays file {path!r} does not exist.")
    with np.load(path, allow_pickle=False) as npz:
        if "x" not in npz or "y" not in npz:
            raise DataError(f"Arrays file {path!r} must hold arrays named 'x' and 'y'; it has "
                            f"{sorted(npz.files)}.")
        x, y = npz["x"], npz["y"]
    num_classes = classes_for_labels(int(np.min(y)), int(np.max(y)),
                                     num_classes=config.num_classes, where=repr(path)) \
        if len(y) else config.num_classes
    val = None
    if config.validation_fraction:
        train_idx, val_idx = splits.split_indices(len(x), config.validation_fraction,
                                                  common["seed"])
        x, y, vx, vy = x[train_idx], y[train_idx], x[val_idx], y[val_idx]
        val = arrays.from_arrays(vx, vy, batch_size=batch, shuffle_buffer=0, **common,
                                 **val_opts)
    train = arrays.from_arrays(x, y, batch_size=batch,
                               shuffle_buffer=min(config.shuffle_buffer, len(x)), **common,
                               **train_opts)
    return train, val, {
        "num_classes": num_classes,
        "class_names": None,
        "train_examples": len(x),
        "validation_examples": None if val is None else len(val_idx),
    }


def load_python_source(spec: str):
    """Imports ``module:attribute`` (or ``path/to/file.py:attribute``) and returns the object."""
    if ":" not in spec:
        raise DataError(f"data.path for source python must be 'module:attribute', got "
                        f"{spec!r}.")
    module_name, attribute = spec.rsplit(":", 1)
    file = input_paths.python_source_file(spec)
    try:
        if file is not None:
            name = os.path.splitext(os.path.basename(file))[0]
            module_spec = importlib.util.spec_from_file_location(name, file)
            if module_spec is None or not os.path.exists(file):
                raise DataError(f"Python source file {file!r} does not exist.")
            module = importlib.util.module_from_spec(module_spec)
            sys.modules.setdefault(name, module)
            module_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
    except ImportError as err:
        raise DataError(f"Cannot import {module_name!r} for data.path {spec!r}: {err}") \
            from None
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise DataError(f"Module {module_name!r} has no attribute {attribute!r} "
                        f"(data.path {spec!r}).") from None


class _Subset:
    """A random-access view of some indices of another random-access source."""

    def __init__(self, source, indices):
        self.source, self.indices = source, indices

    def __len__(self):
        return len(self.indices)

    def __getitem__(self, i):
        return self.source[int(self.indices[i])]


def _build_python(config, *, batch, common, train_opts, val_opts):
    source = load_python_source(config.path)
    random_access = python_source.is_random_access(source)
    kwargs = dict(workers=config.workers, mode=config.worker_mode, **common)
    if cache_files.is_file_cache(config.cache):
        # The recipe names the source by data.path: its module file is what can change
        # (a subset wrapper's own code would hide it), with the split that picks examples.
        kwargs["cache_fingerprint"] = {
            "data.path": config.path, "module file": _python_module_digest(config.path),
            "validation_fraction": config.validation_fraction,
            "split seed": common["seed"] if config.validation_fraction else None}
    val_source = None
    if config.validation_fraction:
        if not random_access:
            raise DataError("data.validation_fraction needs a random-access python source "
                            "(__len__/__getitem__); a generator source cannot be split.")
        train_idx, val_idx = splits.split_indices(len(source), config.validation_fraction,
                                            common["seed"])
        source, val_source = _Subset(source, train_idx), _Subset(source, val_idx)
    # data.shuffle_buffer means the same for every source: a buffer of examples, shuffled
    # per pass (from the pass's seed in a resumable stream). The source's own per-epoch
    # permutation (`shuffle=True`) is not used here: it depends on how many epochs this
    # process has read, so a resumed run would continue in another order.
    train = python_source.from_python(
        source, batch_size=batch, shuffle=False, shuffle_buffer=config.shuffle_buffer,
        **kwargs, **train_opts)
    val = None
    if val_source is not None:
        val = python_source.from_python(val_source, batch_size=batch, **kwargs, **val_opts)
    original = source.source if isinstance(source, _Subset) else source
    num_classes = (getattr(config, "num_classes", None)
                   or getattr(original, "num_classes", None))
    class_names = getattr(original, "class_names", None)
    if num_classes is None and class_names:
        num_classes = len(class_names)
    if num_classes is None:
        raise DataError(f"Cannot tell the number of classes of python source {config.path!r}: "
                        "set data.num_classes, or give the source a num_classes attribute.")
    # A python source's labels are seen only while streaming: checked there, every split.
    where = f"python source {config.path!r}"
    train = _check_labels_in_pipeline(train, int(num_classes), where=f"{where} (training)")
    if val is not None:
        val = _check_labels_in_pipeline(val, int(num_classes), where=f"{where} (validation)")
    return train, val, {
        "num_classes": int(num_classes),
        "class_names": list(class_names) if class_names else None,
        "train_examples": len(source) if random_access else None,
        "validation_examples": None if val_source is None else len(val_source),
    }


def _python_module_digest(spec: str) -> str:
    """Names, size and modification time of the module file a ``module:attr`` comes from."""
    file = input_paths.python_source_file(spec)
    if file is not None:
        return cache_files.files_digest([file])
    found = importlib.util.find_spec(spec.rsplit(":", 1)[0])
    return cache_files.files_digest([found.origin] if found and found.origin else [])


def _check_labels_in_pipeline(dataset, num_classes: int, *, where: str):
    """Stops the pipeline with a message naming the label when one is outside 0..n-1."""
    spec = dataset.element_spec
    if not (isinstance(spec, tuple) and len(spec) >= 2 and isinstance(spec[1], tf.TensorSpec)
            and spec[1].dtype.is_integer):
        return dataset  # no integer label tensor to check (dict or float targets)

    def check(*element):
        labels = element[1]
        bad = "{} holds a label outside 0..{} (data.num_classes is {}): labels must be " \
              "integers from 0 to data.num_classes - 1.".format(where, num_classes - 1,
                                                                 num_classes)
        with tf.control_dependencies([
                tf.debugging.assert_non_negative(labels, message=bad),
                tf.debugging.assert_less(labels, tf.cast(num_classes, labels.dtype),
                                         message=bad)]):
            labels = tf.identity(labels)
        return (element[0], labels) + tuple(element[2:])

    return dataset.map(check)


_BUILDERS = {"image_folder": _build_image_folder, "tfrecords": _build_tfrecords,
             "arrays": _build_arrays, "python": _build_python}


def worker_file_shares(config, *, workers: int, global_batch_size: int,
                       seed: int) -> Optional[sharding.FileShares]:
    """Whether `workers` can each read a disjoint share of the training files in lock-step.

    For TFRecords (record counts from `verify_records`) and TFDS/builtin (TFDS's own
    per-file counts); None for the other sources, which are split by element. See
    `sharding.plan_file_shares` for the rule.

    Args:
        config: The recipe's `DataConfig`.
        workers: Workers in the job.
        global_batch_size: Examples per optimizer step over all workers.
        seed: The recipe's seed (it picks the held-out files of `validation_fraction`).

    Returns:
        The `sharding.FileShares`, or None for a source without files.
    """
    if config.source == "tfrecords":
        files, _ = _tfrecord_files(config, seed)
        counts = ([tfrecords.check_record_file(f, config.compression or None) for f in files]
                  if config.verify_records else None)
        what = "TFRecord files"
    elif config.source in ("builtin", "tfds"):
        name = config.name or (BUILTIN_DEFAULT if config.source == "builtin" else None)
        split, _ = _tfds_splits(config, name)
        builder = tfds_source.load_builder(name, data_dir=config.data_dir,
                                           download=config.download)
        counts = tfds_source.file_example_counts(builder, split)
        what = f"TFDS {name!r} {split} files"
    else:
        return None
    return sharding.plan_file_shares(counts, workers=workers,
                                     global_batch_size=global_batch_size, what=what)


def build_datasets(config, *, global_batch_size: int, num_replicas: int, seed: int,
                   deterministic: bool, sequential: bool = False, stream=None,
                   input_context: Optional[tf.distribute.InputContext] = None):
    """Builds the training and validation datasets of a recipe's data section.

    Args:
        config: The recipe's `DataConfig`.
        global_batch_size: Examples per optimizer step over all replicas.
        num_replicas: Replicas in sync; with more than one, training batches drop the
            remainder so every replica gets an equal share.
        seed: Seed of shuffling, augmentation and held-out splits.
        deterministic: Fixed tf.data order (slower).
        sequential: Build the truly sequential version of the same pipelines (the baseline
            of `tfaccel.tools.bench`).
        stream: A `pipeline.EpochStream` for the training data (counted in this
            pipeline's batches).
        input_context: This worker's context in a multi-worker job, as
            `strategy.distribute_datasets_from_function` gives it: the training files are
            divided among the workers (`worker_file_shares` must allow it) and the training
            dataset yields this worker's per-replica batches; each pass of a `stream` makes
            the same number of batches on every worker. Validation is unchanged.

    Returns:
        ``(train_ds, val_ds_or_None, info)`` where info holds ``num_classes``,
        ``input_shape``, ``class_names``, ``train_examples``, ``validation_examples``,
        ``steps_per_epoch`` (optimizer steps per pass, by `pipeline.drops_remainder`, or
        by the file shares with an `input_context`) and ``train_examples_per_pass`` (the
        examples those steps hold over all workers); the last two are None when the
        source does not declare its size; ``data_service`` (the tf.data service the
        training input is sent to, as a dict, or None); and in a multi-worker job
        ``worker_sharding``, ``"file"`` or ``"element"``.

    Raises:
        DataError: Missing or unusable data (see each source), or files that cannot be
            divided among the workers of an `input_context`.
    """
    shares = None
    if input_context is not None and input_context.num_input_pipelines > 1:
        worker = (input_context.input_pipeline_id, input_context.num_input_pipelines)
        shares = worker_file_shares(config, workers=worker[1],
                                    global_batch_size=global_batch_size, seed=seed)
        if shares is None or not shares.by_file:
            raise DataError(
                f"data.source {config.source!r} cannot be divided by file among "
                f"{worker[1]} workers ({'it has no files' if shares is None else shares.reason})"
                "; leave the split to the strategy (no input context).")
        if stream is not None and stream.batches_per_pass is None:
            local = input_context.num_replicas_in_sync // worker[1]
            stream = dataclasses.replace(stream,
                                         batches_per_pass=shares.steps_per_pass * local)
    else:
        worker = sharding.worker_in_scope()
    common = _common(config, seed=seed, deterministic=deterministic, sequential=sequential)
    kwargs = dict(batch=global_batch_size, common=common,
                  train_opts=_train_tail(config, num_replicas, stream=stream,
                                         input_context=input_context, worker=worker),
                  val_opts=_val_tail(config, worker))
    if config.source in ("builtin", "tfds"):
        name = config.name or (BUILTIN_DEFAULT if config.source == "builtin" else None)
        train, val, info = _build_tfds(config, name, **kwargs)
    elif config.source in _BUILDERS:
        train, val, info = _BUILDERS[config.source](config, **kwargs)
    else:
        raise DataError(f"data.source {config.source!r} is not one of builtin, tfds, "
                        f"{', '.join(_BUILDERS)}.")
    features_spec = train.element_spec[0] if isinstance(train.element_spec, tuple) \
        else train.element_spec
    if isinstance(features_spec, dict):
        info["input_shape"] = {k: tuple(v.shape[1:]) for k, v in features_spec.items()}
    else:
        info["input_shape"] = tuple(features_spec.shape[1:])
    # Training batches (optimizer steps) per pass and the examples they hold, by the same drop
    # rule as the batch stage; None when the source does not declare its size.
    known = info.get("train_examples")
    drop = pipeline.drops_remainder(num_replicas)
    steps = None if known is None else pipeline.batches_per_pass(
        known, global_batch_size, drop_remainder=drop)
    target = ServiceTarget.from_config(getattr(config, "service", None))
    # Where the training input was made (summary.json's dataset section shows it).
    info["data_service"] = None if target is None else {
        "dispatcher": target.dispatcher, "processing_mode": target.processing_mode,
        "job_name": target.job_name}
    info["steps_per_epoch"] = steps
    info["train_examples_per_pass"] = (None if known is None
                                       else steps * global_batch_size if drop else known)
    if shares is not None:
        # Every worker makes the same number of steps from its own files.
        info["steps_per_epoch"] = shares.steps_per_pass
        info["train_examples_per_pass"] = shares.steps_per_pass * global_batch_size
    if worker[1] > 1:
        info["worker_sharding"] = "file" if shares is not None else "element"
    return train, val, info
