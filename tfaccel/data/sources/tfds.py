"""A TensorFlow Datasets dataset (prepared on disk) as a batched tf.data pipeline."""

from __future__ import annotations

import dataclasses
import os
import re
import warnings
from typing import Optional, Sequence, Tuple

import tensorflow as tf
import tensorflow_datasets as tfds

from tfaccel import datasets
from tfaccel.data import cache_files, images, sharding, splits, tail
from tfaccel.data.sources import base
from tfaccel.errors import DataError


def load_builder(name: str, *, data_dir: Optional[str] = None, download: bool = False):
    """Returns a prepared TFDS builder, preparing it only when `download` is True.

    The built-in datasets (``tfaccel_shapes``, ``tfaccel_phrases``) are the exception: they
    are generated locally in seconds, so they are prepared on first use.

    Raises:
        DataError: The name is unknown, or the dataset is not prepared in `data_dir` and
            `download` is False (the message says how to prepare it).
    """
    if name in datasets.BUILTIN:
        # Built-in: generated locally (no network) and prepared once, so always allowed.
        return datasets.prepare_builtin(name, data_dir=data_dir)
    try:
        builder = tfds.builder(name, data_dir=data_dir)
    except tfds.core.registered.DatasetNotFoundError as err:
        raise DataError(f"TFDS has no dataset named {name!r}: {str(err).splitlines()[0]}") \
            from None
    if not builder.is_prepared() and not under_mock_data():
        if not download:
            where = data_dir or "the default TFDS data dir (~/tensorflow_datasets)"
            # Not `tfds build NAME`: TFDS' command line imports apache_beam, which a plain
            # `pip install tensorflow-datasets` does not bring; the builder API needs nothing.
            where_arg = f", data_dir={data_dir!r}" if data_dir else ""
            raise DataError(
                f"TFDS dataset {name!r} is not prepared in {where}. Prepare it once on a "
                "machine with network access: `python3 -c \"import tensorflow_datasets as "
                f"tfds; tfds.builder({name!r}{where_arg}).download_and_prepare()\"` (or pass "
                "download=True / `download: true` in the recipe). tfaccel never downloads "
                "unless asked.")
        builder.download_and_prepare()
    return builder


def under_mock_data() -> bool:
    """Whether `tfds.testing.mock_data` is active: builders then read generated examples.

    TFDS's standard way to unit-test an input pipeline without downloading: nothing is
    prepared on disk, splits are not known in advance and every split yields the mock's
    `num_examples` examples. Detected by the patched `download_and_prepare` it installs.
    """
    patched = tfds.core.DatasetBuilder.download_and_prepare
    return getattr(patched, "__module__", "") == "tensorflow_datasets.testing.mocking"


def class_names(info) -> Optional[list]:
    """The label's class names (a ``ClassLabel`` feature), or None."""
    keys = info.supervised_keys
    key = keys[1] if keys and isinstance(keys[1], str) else "label"
    try:
        feature = info.features[key]
    except (KeyError, TypeError):
        return None
    names = getattr(feature, "names", None)
    return list(names) if names else None


def _check_split(builder, split: str):
    known = set(builder.info.splits.keys())
    if not known and under_mock_data():
        return  # mock data answers any split
    for part in split.split("+"):
        base = re.split(r"\[", part.strip(), maxsplit=1)[0]
        if base not in known:
            raise DataError(f"TFDS dataset {builder.info.name!r} has no split {base!r} "
                            f"(in {split!r}); it has {sorted(known)}.")


def from_tfds(name: str, *, split: str, batch_size: int, data_dir: Optional[str] = None,
              download: bool = False, as_supervised: bool = True,
              keys: Optional[Sequence[str]] = None,
              image_size: Optional[Sequence[int]] = None,
              shuffle_buffer: int = 0, seed: Optional[int] = None,
              input_context: Optional[tf.distribute.InputContext] = None,
              cache=None, augment=None, augment_on="batch", drop_remainder=None,
              deterministic=False, num_parallel_calls=tail.AUTOTUNE, private_threads=None,
              ram_budget_bytes=None, shard_policy=None, image_dtype="float32",
              sequential=False, stream=None, service=None, batch_by_length=False,
              **unknown) -> tf.data.Dataset:
    """Builds batches from a prepared TFDS dataset.

    Example::

        train = tfaccel.data.from_tfds("tfaccel_shapes", split="train[:90%]", batch_size=128,
                                       shuffle_buffer=10_000, cache="memory",
                                       augment=["flip"], seed=0)
        print(train.class_names, train.num_examples)

    TFDS's own reader is used: its parallel interleave over the record files, its shuffling
    of file order (seeded), and its input-context sharding by file under
    ``distribute_datasets_from_function``.

    Args:
        name: TFDS name, optionally with config/version (``"mnist"``, ``"tfaccel_shapes"``).
        split: A TFDS split expression (``"train"``, ``"train[:80%]"``, ``"train+test"``).
        batch_size: The GLOBAL batch size.
        data_dir: TFDS data directory (None: TFDS's default).
        download: Prepare (download/generate) the dataset if it is not there yet.
        as_supervised: Yield ``(input, label)`` from the dataset's supervised keys.
        keys: ``(input_key, label_key)`` feature names to yield instead of the supervised
            keys (for datasets without them, or to pick another input).
        image_size: Resize an image input to ``(height, width)`` (None: keep).
        shuffle_buffer: Shuffle buffer in examples, 0 for no shuffling (as
            ``data.shuffle_buffer``); the file order is shuffled too when > 0.
        seed: Seed for file order, shuffling and augmentation.
        input_context: From ``distribute_datasets_from_function``: TFDS shards by file.
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
        A `tf.data.Dataset` of batches, with attributes ``class_names`` (or None),
        ``num_examples`` and ``info`` (the `tfds.core.DatasetInfo`).

    Raises:
        DataError: Unknown dataset or split, or a dataset that is not prepared.
    """
    tail.refuse_unknown(unknown, builder=from_tfds)
    options = tail.TailOptions(
        seed=seed, input_context=input_context, cache=cache, augment=augment,
        augment_on=augment_on, drop_remainder=drop_remainder, deterministic=deterministic,
        num_parallel_calls=num_parallel_calls, private_threads=private_threads,
        ram_budget_bytes=ram_budget_bytes, shard_policy=shard_policy, image_dtype=image_dtype,
        sequential=sequential, stream=stream, service=service,
        batch_by_length=batch_by_length)
    return tfds_dataset(name, split=split, batch_size=batch_size, data_dir=data_dir,
                        download=download, as_supervised=as_supervised, keys=keys,
                        image_size=image_size, shuffle_buffer=shuffle_buffer, options=options)


def tfds_dataset(name: str, *, split: str, batch_size: int, data_dir: Optional[str],
                 download: bool, as_supervised: bool, keys: Optional[Sequence[str]],
                 image_size: Optional[Sequence[int]], shuffle_buffer: int,
                 options: tail.TailOptions) -> tf.data.Dataset:
    """`from_tfds` with the tail's options as one `TailOptions` (what the source calls);
    the arguments as `from_tfds`'."""
    options = options.chosen()  # what the caller chose; this source decides the rest
    resolved = options.resolved()
    seed, input_context = resolved.seed, resolved.input_context
    builder = load_builder(name, data_dir=data_dir, download=download)
    _check_split(builder, split)
    deterministic = resolved.deterministic
    parallel = {}
    if resolved.sequential:
        # TFDS's own interleave and decode map, made sequential too (None = no parallelism).
        parallel = {"num_parallel_calls_for_decode": None,
                    "num_parallel_calls_for_interleave_files": None,
                    "interleave_cycle_length": 1}
    read_config = tfds.ReadConfig(
        **parallel,
        input_context=input_context,
        shuffle_seed=seed,
        # In a resumable stream every pass must read the files in the same order (the
        # pass-seeded shuffle after the cache does the rest), or pass p would depend on how
        # many passes this process read before.
        shuffle_reshuffle_each_iteration=False if resolved.stream else None,
        # Our tail owns caching (after decode, before shuffle) and prefetching.
        try_autocache=False,
        skip_prefetch=True,
        options=tail.make_options(deterministic=deterministic),
    )
    if keys is not None:
        input_key, label_key = keys
        missing = [k for k in (input_key, label_key) if k not in builder.info.features.keys()]
        if missing:
            raise DataError(f"TFDS dataset {name!r} has no feature(s) {missing}; it has "
                            f"{sorted(builder.info.features.keys())}.")
        as_supervised = False
    with warnings.catch_warnings():
        # TFDS passes `deterministic` to its interleave even when we made it sequential.
        warnings.filterwarnings("ignore", message="The `deterministic` argument has no effect")
        dataset = builder.as_dataset(split=split, as_supervised=as_supervised,
                                     shuffle_files=bool(shuffle_buffer),
                                     read_config=read_config)
    num_examples = _split_size(builder, split, dataset)
    if keys is not None:
        dataset = dataset.map(lambda ex: (ex[input_key], ex[label_key]))
    fingerprint = None
    if cache_files.is_file_cache(resolved.cache):
        fingerprint = _cache_fingerprint(
            builder, split=split, keys=keys, as_supervised=as_supervised,
            image_size=image_size, seed=seed, shuffled=bool(shuffle_buffer),
            input_context=input_context)
    map_fn = None
    if image_size is not None:
        size = [int(v) for v in image_size]

        def resize(features, label=None):
            image = features if label is not None else features["image"]
            image = images.resize_to_uint8(image, size)
            if label is not None:
                return image, label
            return {**features, "image": image}

        map_fn = resize
    # One file per split (the built-in dataset) cannot be split by FILE among workers; with
    # an input context TFDS already kept this pipeline's files (OFF: not split again).
    options = sharding.choose_file_policy(options, num_files=_file_count(builder, split),
                                          sharded=input_context is not None)
    dataset = tail.build(
        dataset, batch_size=batch_size,
        source=tail.SourceStages(map_fn=map_fn, shuffle_buffer=shuffle_buffer,
                                 cache_fingerprint=fingerprint),
        options=dataclasses.replace(
            options, input_context=tail.batch_only_context(input_context)))
    dataset.class_names = class_names(builder.info)
    dataset.num_examples = num_examples
    dataset.info = builder.info
    return dataset


def _cache_fingerprint(builder, *, split, keys, as_supervised, image_size, seed, shuffled,
                       input_context) -> dict:
    """Everything a file cache of `split` depends on: the prepared files and the settings."""
    info = builder.info
    directory = str(getattr(info, "data_dir", "") or "")
    files = ([os.path.join(directory, n) for n in sorted(os.listdir(directory))]
             if directory and os.path.isdir(directory) else [])
    return {"builder": "from_tfds",
            "source files": f"{info.full_name}: {cache_files.files_digest(files)}",
            "split": split, "keys": None if keys is None else list(keys),
            "as_supervised": as_supervised,
            "image_size": None if image_size is None else [int(v) for v in image_size],
            # TFDS shuffles the file order (seeded) before the cache when shuffling.
            "order": f"files shuffled with seed {seed}" if shuffled else "file order",
            "input share": None if input_context is None else [
                input_context.input_pipeline_id, input_context.num_input_pipelines]}


def _split_size(builder, split: str, dataset) -> Optional[int]:
    """Examples in `split`: the prepared dataset's own count, or the mock's."""
    if under_mock_data():
        # The info's counts (if any) describe the real dataset, not the generated one.
        count = int(dataset.cardinality())
        return count if count >= 0 else None
    return builder.info.splits[split].num_examples


def file_example_counts(builder, split: str) -> Optional[list]:
    """Examples of each file `split` reads, in TFDS's read order (None: not known).

    TFDS gives an input context's pipeline the files i, i + n, ... of this order.
    """
    if under_mock_data():
        return None
    try:
        return [int(f.take) for f in builder.info.splits[split].file_instructions]
    except (KeyError, ValueError, AttributeError, TypeError):
        return None


def _file_count(builder, split: str) -> int:
    """Files the split reads (its shards; a sub-split such as train[:80%] reads fewer)."""
    try:
        return len(builder.info.splits[split].file_instructions)
    except (KeyError, ValueError, AttributeError, TypeError):
        return 1


BUILTIN_DEFAULT = datasets.NAME  # data.source: builtin without data.name


class TfdsSource(base.Source):
    """``data.source: tfds`` (a catalogue dataset, `data.name`) or ``builtin``."""

    names = ("builtin", "tfds")

    @property
    def dataset_name(self) -> Optional[str]:
        """The TFDS name: `data.name`, or the built-in dataset for ``builtin``."""
        config = self.config
        return config.name or (BUILTIN_DEFAULT if config.source == "builtin" else None)

    def input_key(self) -> str:
        """`data.image_key`, else the dataset's supervised input feature, else "image"."""
        if self.config.image_key:
            return self.config.image_key
        supervised = self._builder().info.supervised_keys
        first = supervised[0] if supervised else None
        return first if isinstance(first, str) else "image"

    def _builder(self):
        return load_builder(self.dataset_name, data_dir=self.config.data_dir,
                            download=self.config.download)

    def splits(self) -> Tuple[str, Optional[str]]:
        """The training and validation split expressions."""
        config = self.config
        if config.validation_fraction:
            # TFDS reads record files in order and slices by example index, so the held-out
            # part is the split's tail, of exactly held_out_count examples (the one rule's
            # count; whole-percent slicing rounded it).
            base_split = config.train_split
            n = self._builder().info.splits[base_split].num_examples
            keep = n - splits.held_out_count(n, config.validation_fraction)
            return f"{base_split}[:{keep}]", f"{base_split}[{keep}:]"
        return config.train_split, (config.validation_split_name or None)

    def build(self, *, batch_size, common, train_options, validation_options) -> base.Built:
        config, name = self.config, self.dataset_name
        train_split, val_split = self.splits()
        kwargs = dict(data_dir=config.data_dir, download=config.download, as_supervised=True,
                      image_size=config.image_size, keys=(self.input_key(), config.label_key))
        train = tfds_dataset(name, split=train_split, batch_size=batch_size,
                             shuffle_buffer=config.shuffle_buffer, **kwargs,
                             options=common.merged(train_options))
        val = None
        if val_split:
            val = tfds_dataset(name, split=val_split, batch_size=batch_size, shuffle_buffer=0,
                               **kwargs, options=common.merged(validation_options))
        label = train.info.features[config.label_key]
        num_classes = getattr(label, "num_classes", None) or getattr(config, "num_classes",
                                                                     None)
        return base.Built(train=train, validation=val, num_classes=num_classes,
                          class_names=train.class_names, train_examples=train.num_examples,
                          validation_examples=None if val is None else val.num_examples)

    def file_counts(self):
        split, _ = self.splits()
        return (file_example_counts(self._builder(), split),
                f"TFDS {self.dataset_name!r} {split} files")
