"""Python sources whose per-example work runs in N worker processes (or threads)."""

from __future__ import annotations

import dataclasses
import inspect
import itertools
import logging
import multiprocessing
import pickle
from typing import Callable, Optional

import numpy as np
import tensorflow as tf

from tfaccel import python_refs
from tfaccel.data import (
    cache_files,
    finite_values,
    label_ids,
    order,
    sharding,
    splits,
    tail,
)
from tfaccel.data.sources import base
from tfaccel.errors import DataError, UserInputError
from tfaccel.reading import labels, worker_pool

logger = logging.getLogger(__name__)


def _code_of(obj) -> str:
    """Where `obj`'s code lives: qualified name and its module file's size and time."""
    kind = obj if inspect.isclass(obj) or inspect.isfunction(obj) else type(obj)
    name = f"{getattr(kind, '__module__', '?')}.{getattr(kind, '__qualname__', '?')}"
    try:
        file = inspect.getsourcefile(kind)
    except TypeError:
        file = None
    return f"{name} ({cache_files.files_digest([file]) if file else 'no source file'})"


def _cache_fingerprint(source, transform, *, indices, seed, shuffled, cache,
                       given: Optional[dict]) -> dict:
    """What a file cache of a Python source can know it depends on (see `from_python`)."""
    if given is None:
        logger.warning(
            "from_python(cache=%r): the cache is rebuilt when the source's or transform's "
            "code, its length or the order changes, but tfaccel cannot see the data the "
            "source reads; pass cache_fingerprint={...} naming it (files, versions) to have "
            "the cache rebuilt when that changes.", cache)
    return {"builder": "from_python", "source": _code_of(source),
            "transform": None if transform is None else _code_of(transform),
            "examples": None if indices is None else len(indices),
            "order": None if indices is None else order.describe(indices, seed=seed,
                                                                  shuffled=shuffled),
            **(given or {})}


def is_random_access(source) -> bool:
    """Whether `source` is random-access (``__len__`` and ``__getitem__``), not a generator."""
    return hasattr(source, "__len__") and hasattr(source, "__getitem__")


def _first_example(source, transform, random_access):
    if random_access:
        if len(source) == 0:
            raise UserInputError("from_python got an empty random-access source (len 0).")
        example = source[0]
    else:
        try:
            example = next(iter(source(0, 1)))
        except StopIteration:
            raise UserInputError("from_python's source(0, 1) yielded nothing.") from None
    return example if transform is None else transform(example)


def _signature_of(example):
    def spec(value):
        array = np.asarray(value)
        if array.dtype == object or array.dtype.kind in "US":
            return tf.TensorSpec(array.shape, tf.string)
        return tf.TensorSpec(array.shape, tf.as_dtype(array.dtype))

    return tf.nest.map_structure(spec, _as_tf_structure(example))


def _as_tf_structure(example):
    # Lists are leaves to tf.nest only when they are arrays; here a list of parts means a
    # tuple, matching how the workers flatten it.
    if isinstance(example, list):
        return tuple(_as_tf_structure(e) for e in example)
    if isinstance(example, tuple):
        return tuple(_as_tf_structure(e) for e in example)
    if isinstance(example, dict):
        return {k: _as_tf_structure(v) for k, v in example.items()}
    return example


def _check_start_method(start_method, source, transform) -> None:
    """Fails early, naming the culprit, when the workers could not be started."""
    available = multiprocessing.get_all_start_methods()
    if start_method is not None and start_method not in available:
        raise UserInputError(f"start_method must be one of {available} or None, got "
                             f"{start_method!r}.")
    method = worker_pool.resolve_start_method(start_method)
    if method == "fork":
        return
    for name, value in (("source", source), ("transform", transform)):
        try:
            pickle.dumps(value)
        except Exception as err:  # pickling raises many types
            raise UserInputError(
                f"from_python(start_method={method!r}) sends the {name} to each worker "
                f"process by pickling it, and {name} {value!r} cannot be pickled "
                f"({type(err).__name__}: {err}). Define it at module level (not a lambda, "
                f"a local function or a class defined inside a function), or use "
                f"start_method='fork'.") from None


def from_python(source, *, batch_size: int, workers: int = 2, mode: str = "process",
                transform: Optional[Callable] = None,
                output_signature=None, shuffle: bool = False, seed: Optional[int] = None,
                deterministic: bool = False, chunk_size: int = 32,
                start_method: Optional[str] = None,
                cache_fingerprint: Optional[dict] = None, shuffle_buffer: int = 0,
                cache=None, augment=None, augment_on="batch", drop_remainder=None,
                num_parallel_calls=tail.AUTOTUNE, private_threads=None, ram_budget_bytes=None,
                shard_policy=None, image_dtype="float32", input_context=None, sequential=False,
                stream=None, service=None, batch_by_length=False, **unknown) -> tf.data.Dataset:
    """Builds batches from a Python source whose per-example work runs in parallel workers.

    `tf.data.Dataset.from_generator` runs Python under the GIL, so a Python-heavy
    source uses about one core however many maps follow. Here `workers` processes each run
    the source and `transform` on their share of the examples, stack them into chunks and
    hand them to the parent through shared memory; tf.data then does the standard tail.

    Example::

        class Sentences:                       # a random-access source
            def __len__(self): return len(lines)
            def __getitem__(self, i): return tokenize(lines[i]), labels[i]

        train = tfaccel.data.from_python(Sentences(), batch_size=64, workers=4,
                                         shuffle=True, seed=0)

        def shard(worker_index, num_workers):  # or a generator factory
            for path in paths[worker_index::num_workers]:
                yield load(path)

        train = tfaccel.data.from_python(shard, batch_size=64, workers=4)

    Args:
        source: Either a random-access object (``__len__`` and ``__getitem__(int)``), or a
            callable ``source(worker_index, num_workers)`` returning an iterable of that
            worker's share of the examples. An example is an array-like, or a tuple/list/
            dict of them (e.g. ``(features, label)``), with the same shapes every time.
        batch_size: The GLOBAL batch size.
        workers: Number of worker processes (or threads).
        mode: ``"process"`` (CPU-bound Python: escapes the GIL) or ``"thread"`` (I/O-bound
            sources such as network or object-store reads, which release the GIL).
        transform: Optional ``fn(example) -> example`` run in the workers.
        output_signature: The `tf.TensorSpec` structure of one example; None infers it from
            the first example (computed once in this process).
        shuffle: Random-access sources only: a new seeded permutation of all indices each
            epoch (a global shuffle, cheaper than a shuffle buffer).
        seed: Seed of that permutation, of the tail's shuffle/augmentation, and of
            NumPy's and Python's global random generators in each worker process (each
            worker its own; None: fresh entropy).
        deterministic: Fixed element order (chunk c always from worker c % N, yielded in
            order); otherwise chunks are used as soon as any worker finishes one.
        chunk_size: Examples a worker stacks into one hand-over.
        start_method: multiprocessing start method; None means "fork" where available
            (a pool starts in milliseconds and accepts lambdas; see
            `worker_pool.resolve_start_method`), else "spawn". With "spawn" or "forkserver"
            every worker imports the script's main module again (and TensorFlow with it
            when the script imports it at its top: seconds, once per dataset; the worker
            pool itself imports none), and `source` and `transform` must be picklable
            (defined at module level); a UserInputError says so at once otherwise.
        cache_fingerprint: With a file `cache`: a JSON-able dict of what the data the
            source reads depends on (files, versions), which tfaccel cannot see; a change
            rebuilds the cache (the source's code, length and order are recorded anyway).
        shuffle_buffer: Shuffle buffer in examples after the cache, 0 (default) for none
            (`optimize`'s).
        cache: None, ``"memory"`` or a file prefix: `tfaccel.data.optimize`'s `cache`.
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
        A `tf.data.Dataset` of batches. A worker's exception surfaces while iterating as a
        TensorFlow error whose message holds ``WorkerError`` and the worker's traceback.
        The workers are started here, in the calling thread, and serve every epoch of
        the dataset; they are stopped when the dataset is garbage collected or the
        interpreter exits (Ctrl-C included). `source` and `transform` are copied into
        them now: later changes to them are not seen.

    Raises:
        UserInputError: A bad argument, or an empty source.
    """
    tail.refuse_unknown(unknown, builder=from_python)
    options = tail.TailOptions(
        seed=seed, deterministic=deterministic, input_context=input_context, cache=cache,
        augment=augment, augment_on=augment_on, drop_remainder=drop_remainder,
        num_parallel_calls=num_parallel_calls, private_threads=private_threads,
        ram_budget_bytes=ram_budget_bytes, shard_policy=shard_policy, image_dtype=image_dtype,
        sequential=sequential, stream=stream, service=service,
        batch_by_length=batch_by_length)
    return python_dataset(source, batch_size=batch_size, workers=workers, mode=mode,
                          transform=transform, output_signature=output_signature,
                          shuffle=shuffle, chunk_size=chunk_size, start_method=start_method,
                          cache_fingerprint=cache_fingerprint, shuffle_buffer=shuffle_buffer,
                          options=options)


def python_dataset(source, *, batch_size: int, workers: int = 2, mode: str = "process",
                   transform: Optional[Callable] = None, output_signature=None,
                   shuffle: bool = False, chunk_size: int = 32,
                   start_method: Optional[str] = None,
                   cache_fingerprint: Optional[dict] = None, shuffle_buffer: int = 0,
                   options: tail.TailOptions) -> tf.data.Dataset:
    """`from_python` with the tail's options as one `TailOptions` (what the source calls);
    the arguments as `from_python`'s."""
    options = options.chosen()  # what the caller chose; this source decides the rest
    resolved = options.resolved()
    seed = resolved.seed
    if mode not in ("process", "thread"):
        raise UserInputError(f"mode must be 'process' or 'thread', got {mode!r}.")
    if not isinstance(workers, int) or workers < 1:
        raise UserInputError(f"workers must be a positive integer, got {workers!r}.")
    if not isinstance(chunk_size, int) or chunk_size < 1:
        raise UserInputError(f"chunk_size must be a positive integer, got {chunk_size!r}.")
    random_access = is_random_access(source)
    if not random_access and not callable(source):
        raise UserInputError(
            f"source must have __len__ and __getitem__, or be a callable "
            f"source(worker_index, num_workers) returning an iterable; got "
            f"{type(source).__name__}.")
    if shuffle and not random_access:
        raise UserInputError("shuffle=True needs a random-access source; for a generator "
                             "source use shuffle_buffer=... instead.")
    if mode == "process":
        _check_start_method(start_method, source, transform)
    if output_signature is None:
        output_signature = _signature_of(_first_example(source, transform, random_access))
    chunk_signature = tf.nest.map_structure(
        lambda s: tf.TensorSpec([None, *s.shape], s.dtype), output_signature)
    epochs = itertools.count()
    buffer = shuffle_buffer = shuffle_buffer or 0  # None: no buffer, as 0
    # A random-access source indexed in a sorted order (by class) is read in one seeded
    # permutation when a shuffle buffer smaller than it follows (data.order), so a cache
    # before that buffer holds a mixed order; `shuffle=True` permutes anew every epoch.
    fixed_order = None
    if random_access and not shuffle and 0 < buffer < len(source):
        fixed_order = order.permutation(len(source), order.resolve_seed(
            seed, input_context=resolved.input_context))
    if cache_files.is_file_cache(resolved.cache):
        cache_fingerprint = _cache_fingerprint(
            source, transform, indices=fixed_order if random_access else None,
            seed=seed, shuffled=fixed_order is not None, cache=resolved.cache,
            given=cache_fingerprint)
    ctx = resolved.input_context
    share = (0, 1)
    if ctx is not None and ctx.num_input_pipelines > 1:
        # Each input pipeline (worker machine) computes only its own share: its indices, or
        # its shards of a generator source.
        share = (ctx.input_pipeline_id, ctx.num_input_pipelines)
        ctx = tail.batch_only_context(ctx)
        if shuffle and seed is None:
            raise UserInputError("shuffle=True with several input pipelines needs a seed, so "
                                 "that all pipelines permute alike and their shares stay "
                                 "disjoint.")
    # A multi-worker strategy splits this dataset by element (below): every worker must
    # then see the same order, the workers' chunks included.
    options = sharding.fix_order_for_data_sharding(dataclasses.replace(
        options, input_context=ctx, deterministic=resolved.deterministic))
    deterministic = options.deterministic

    def epoch_order(epoch):
        indices = np.arange(len(source)) if fixed_order is None else fixed_order
        if shuffle:
            # Same permutation on every input pipeline (same seed), then disjoint shares.
            indices = np.random.default_rng(None if seed is None else [seed, epoch]) \
                .permutation(indices)
        return indices[share[0]::share[1]]

    def generate_in_process():
        # The sequential baseline: the same source and transform, one example at a time in
        # this process, as tf.data.Dataset.from_generator would run it.
        epoch = next(epochs)
        if random_access:
            examples = (source[int(i)] for i in epoch_order(epoch))
        else:
            examples = source(share[0], share[1])
        for example in examples:
            example = example if transform is None else transform(example)
            yield tf.nest.map_structure(lambda v: np.asarray(v)[None],
                                        _as_tf_structure(example))

    pool = None
    if not resolved.sequential:
        # Started here, in the caller's thread and before tf.data runs anything, never from
        # inside the pipeline: one pool serves every epoch (and every iterator) of this
        # dataset, and is closed when the dataset is collected or the interpreter exits.
        pool = worker_pool.Pool(
            source=source, transform=transform, random_access=random_access,
            workers=workers, mode=mode, start_method=start_method,
            shard=(0, 1) if random_access else share,
            seed=None if seed is None else (seed, *share))  # each pipeline's workers their own

    def generate():
        epoch = next(epochs)
        order = epoch_order(epoch) if random_access else None
        seen = 0
        for arrays in worker_pool.run_epoch(pool, random_access=random_access, order=order,
                                            chunk_size=chunk_size,
                                            deterministic=deterministic):
            if deterministic or not random_access:
                # In order, so the position names the example (in any order it still stops).
                _check_finite_chunk(arrays, first=seen, order=order)
            else:
                _check_finite_chunk(arrays, first=None, order=None)
            seen += len(arrays[0])
            yield tf.nest.pack_sequence_as(chunk_signature, arrays)

    def start_epoch():
        return worker_pool.track_epoch(generate())

    dataset = tf.data.Dataset.from_generator(
        generate_in_process if pool is None else start_epoch,
        output_signature=chunk_signature)
    if pool is not None:
        # Not the generator's lifetime: in eager mode TensorFlow keeps a generator dataset's
        # Python functions for the life of the process. Every dataset derived from this one,
        # and each of their iterators, holds this object, so it goes when they all have.
        worker_pool.close_with(dataset, pool)
    dataset = dataset.unbatch()
    if random_access:
        # The size is known: say so, so that Keras shows a real progress bar and does not
        # warn that the input "ran out of data" at the end of the first epoch.
        size = len(range(share[0], len(source), share[1]))
        dataset = dataset.apply(tf.data.experimental.assert_cardinality(size))
    # A generator cannot be split by files; a multi-worker strategy must shard by element.
    if options.shard_policy is tail.UNSET:
        options = dataclasses.replace(options, shard_policy="data")
    return tail.build(dataset, batch_size=batch_size, options=options,
                      source=tail.SourceStages(shuffle_buffer=shuffle_buffer,
                                               cache_fingerprint=cache_fingerprint))


def _check_finite_chunk(arrays, *, first, order) -> None:
    """Stops the pass at a NaN or infinite value in a chunk of examples, naming the example
    (`from_arrays` refuses the same values up front)."""
    for array in arrays:
        found = finite_values.first_non_finite(array)
        if found is None:
            continue
        (row, *_), value, _ = found
        if first is None:
            which = "an example"
        elif order is not None:
            which = f"source[{int(order[first + row])}]"
        else:
            which = f"example {first + row} of this pass (counted in this input's share)"
        raise DataError(f"python source {which} holds {value}: {finite_values.NON_FINITE_REFUSED}. "
                        "Fill or drop them in the source.")


def load_python_source(spec: str):
    """Imports ``module:attribute`` (or ``path/to/file.py:attribute``) and returns the object."""
    return python_refs.load(spec, key="data.path", error=DataError)


def _module_digest(spec: str) -> str:
    """Names, size and modification time of the module file a ``module:attr`` comes from."""
    file = python_refs.locate(spec, key="data.path", error=DataError)
    return cache_files.files_digest([file] if file else [])


class _Subset:
    """A random-access view of some indices of another random-access source."""

    def __init__(self, source, indices):
        self.source, self.indices = source, indices

    def __len__(self):
        return len(self.indices)

    def __getitem__(self, i):
        return self.source[int(self.indices[i])]


def _label_plan(original, train, *, config, where: str, train_indices,
                val_indices) -> Optional[labels.LabelPlan]:
    """The label rule's plan when the labels can be known before training, else None.

    - a ``labels`` attribute (one label per example, as Keras' loaders keep theirs): the
      training examples' labels decide the task and the classes (1..K, strings: the
      sorted distinct values); a validation label outside them is named.
    - float labels (the dataset's label spec): a numeric target, regression under
      data.task auto or regression; a clear error under a classification task.
    - else None: integer ids 0..n-1 with data.num_classes, a num_classes or class_names
      attribute, checked as they stream (the old rule).
    """
    given = getattr(original, "labels", None)
    if given is not None and config.num_classes is None and hasattr(original, "__len__"):
        return _attribute_plan(original, np.asarray(given), config=config, where=where,
                               train_indices=train_indices, val_indices=val_indices)
    spec = train.element_spec
    label_spec = spec[1] if isinstance(spec, tuple) and len(spec) >= 2 else None
    if isinstance(label_spec, tf.TensorSpec) and label_spec.dtype.is_floating:
        if config.task not in ("auto", "regression", "multi_label"):
            raise DataError(f"{where} yields {label_spec.dtype.name} labels: numeric "
                            f"targets, not classes; data.task {config.task} needs integer "
                            "or text labels. For a numeric target set data.task: regression "
                            "(or auto).")
        task = config.task if config.task != "auto" else (
            "multi_label" if label_spec.shape.rank == 2 and label_spec.shape[-1] != 1
            else "regression")
        width = label_spec.shape[-1] if label_spec.shape.rank == 2 else 1
        return labels.LabelPlan(task, None, int(width or 1))
    return None


def _attribute_plan(original, given, *, config, where, train_indices, val_indices):
    """The plan of a source's ``labels`` attribute (training labels decide)."""
    if len(given) != len(original):
        raise DataError(f"{where}: its labels attribute holds {len(given)} labels for "
                        f"{len(original)} examples; one label per example.")
    plan = labels.plan_labels(given if train_indices is None else given[train_indices],
                              task=config.task, where=f"the labels of {where}")
    if val_indices is not None:
        label_ids.check_known(plan, given[val_indices],
                              where=f"the labels of {where} (validation split)")
    return plan


class PythonSource(base.Source):
    """``data.source: python``: ``module:attr`` or ``file.py:attr`` in worker processes."""

    names = ("python",)

    def build(self, *, batch_size, common, train_options, validation_options) -> base.Built:
        config = self.config
        source = load_python_source(config.path)
        random_access = is_random_access(source)
        kwargs = dict(workers=config.workers, mode=config.worker_mode)
        if cache_files.is_file_cache(config.cache):
            # The recipe names the source by data.path: its module file is what can change
            # (a subset wrapper's own code would hide it), with the split that picks
            # examples.
            kwargs["cache_fingerprint"] = {
                "data.path": config.path, "module file": _module_digest(config.path),
                "validation_fraction": config.validation_fraction,
                "split seed": self.seed if config.validation_fraction else None}
        val_source = None
        if config.validation_fraction:
            if not random_access:
                raise DataError("data.validation_fraction needs a random-access python "
                                "source (__len__/__getitem__); a generator source cannot be "
                                "split.")
            train_idx, val_idx = splits.split_indices(len(source), config.validation_fraction,
                                                      self.seed)
            source, val_source = _Subset(source, train_idx), _Subset(source, val_idx)
        # data.shuffle_buffer means the same for every source: a buffer of examples,
        # shuffled per pass (from the pass's seed in a resumable stream). The source's own
        # per-epoch permutation (`shuffle=True`) is not used here: it depends on how many
        # epochs this process has read, so a resumed run would continue in another order.
        train = python_dataset(source, batch_size=batch_size, shuffle=False,
                               shuffle_buffer=config.shuffle_buffer, **kwargs,
                               options=common.merged(train_options))
        val = None
        if val_source is not None:
            val = python_dataset(val_source, batch_size=batch_size, **kwargs,
                                 options=common.merged(validation_options))
        original = source.source if isinstance(source, _Subset) else source
        where = f"python source {config.path!r}"
        counts = dict(train_examples=len(source) if random_access else None,
                      validation_examples=None if val_source is None else len(val_source))
        plan = _label_plan(original, train, config=config, where=where,
                           train_indices=source.indices if isinstance(source, _Subset)
                           else None, val_indices=None if val_source is None
                           else val_source.indices)
        if plan is not None:
            # The labels are known up front (a `labels` attribute, or float targets): the
            # one label rule decides the task and the classes; encoded as they stream.
            return base.Built(
                train=label_ids.encode_labels(train, plan),
                validation=label_ids.encode_labels(val, plan), num_classes=plan.num_classes,
                class_names=None if plan.class_names is None else list(plan.class_names),
                task=plan.task, num_outputs=plan.num_outputs, **counts)
        num_classes = (getattr(config, "num_classes", None)
                       or getattr(original, "num_classes", None))
        class_names = getattr(original, "class_names", None)
        if num_classes is None and class_names:
            num_classes = len(class_names)
        if num_classes is None:
            raise DataError(f"Cannot tell the number of classes of python source "
                            f"{config.path!r}: set data.num_classes, or give the source a "
                            "num_classes attribute, class_names, or labels (one label per "
                            "example: the classes are then its sorted distinct values).")
        # A python source's labels are seen only while streaming: checked there, every split.
        train = base.check_labels_in_pipeline(train, int(num_classes),
                                              where=f"{where} (training)")
        if val is not None:
            val = base.check_labels_in_pipeline(val, int(num_classes),
                                                where=f"{where} (validation)")
        binary = config.task == "binary"
        return base.Built(
            train=train, validation=val, num_classes=int(num_classes),
            class_names=list(class_names) if class_names else None,
            task="binary" if binary else "classification",
            num_outputs=1 if binary else int(num_classes), **counts)
