"""The tail's one order of stages: `build` from the two typed inputs, and `optimize`, its public front door."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Callable, Mapping, Optional, Sequence, Union

import tensorflow as tf

from tfaccel.config.keras_names import KERAS_ARGUMENT_HINTS
from tfaccel.data import augment as augment_lib
from tfaccel.data import cache_files
from tfaccel.data import service as service_lib
from tfaccel.data.tail import counting, data_options, stages
from tfaccel.data.tail import stream as stream_lib
from tfaccel.data.tail.spec import SourceStages, TailOptions
from tfaccel.data.tail.stream import EpochStream
from tfaccel.errors import UserInputError, did_you_mean

AUTOTUNE = tf.data.AUTOTUNE

AugmentArg = Union[None, str, Sequence[str], Callable]


def build(dataset: tf.data.Dataset, *, batch_size: Optional[int], source: SourceStages,
          options: TailOptions) -> tf.data.Dataset:
    """THE tail: a dataset of examples to batches for `fit`, in the one order of `optimize`.

    Every source and `optimize` end here with the two typed inputs: `source`, what the
    source decided of its own examples (decode, where the shuffle goes, padding, the
    cache's fingerprint), and `options`, the caller's options (unset fields: `DEFAULTS`).

    Args:
        dataset: A dataset of examples (see `optimize`).
        batch_size: The GLOBAL batch size, or None for no batch stage.
        source: The source's `SourceStages`.
        options: The caller's `TailOptions`.

    Returns:
        A `tf.data.Dataset` of batches.

    Raises:
        UserInputError: An option has a bad value, or options that cannot go together.
    """
    o = options.resolved()
    if batch_size is None:
        _check_unbatched(augment=o.augment, augment_on=o.augment_on, stream=o.stream,
                         input_context=o.input_context)
        batch, drop = None, False
    else:
        batch, drop = counting.resolve_batch(batch_size, drop_remainder=o.drop_remainder,
                                             input_context=o.input_context)
    if o.augment_on not in ("batch", "example"):
        raise UserInputError(f"augment_on must be 'batch' or 'example', got {o.augment_on!r}.")
    shuffle_buffer = source.shuffle_buffer
    if not isinstance(shuffle_buffer, int) or shuffle_buffer < 0:
        raise UserInputError(f"shuffle_buffer must be an integer >= 0, got {shuffle_buffer!r}.")
    stream = o.stream
    if stream is not None and not isinstance(stream, EpochStream):
        raise UserInputError(f"stream must be a tfaccel.data.EpochStream, got {stream!r}.")
    cache = o.cache
    if stream is not None and source.source_shuffle and cache:
        # A cache inside a pass would be rebuilt every pass; the source's own reference
        # shuffle is the one that cannot sit before a cache.
        raise UserInputError("source_shuffle and cache cannot be combined in a stream; "
                             "shuffle after the cache with shuffle_buffer instead.")
    if o.sequential and stream is not None:
        raise UserInputError("sequential=True (the benchmark baseline) takes no stream.")
    if cache_files.is_file_cache(cache):
        # Before anything reads it: a stale or half-written cache is rebuilt.
        cache = stages.prepare_file_cache(cache, source.cache_fingerprint)
    service = o.service
    if service is not None:
        _check_service(service, sequential=o.sequential, stream=stream, seed=o.seed,
                       shuffle_buffer=shuffle_buffer, augment=o.augment)
    names, custom = (), None
    if callable(o.augment):
        custom = o.augment
    elif o.augment:
        names = augment_lib.check_names(o.augment)
    tf_options = data_options.make_options(
        deterministic=o.deterministic, private_threads=o.private_threads,
        ram_budget_bytes=o.ram_budget_bytes, shard_policy=o.shard_policy)
    parallel = o.num_parallel_calls
    if o.sequential:
        parallel = None
        tf_options = tf_options.merge(data_options.sequential_options())
    plan = stages.Plan(batch=batch, drop=drop, names=names, custom=custom,
                       augment_on=o.augment_on, seed=o.seed, parallel=parallel,
                       det=stages.per_op_determinism(o.deterministic, parallel=parallel,
                                                     stream=stream is not None),
                       image_dtype=o.image_dtype, sequential=o.sequential,
                       random_decode=source.random_decode, pad=source.padded_batch,
                       by_length=o.batch_by_length, culprit=source.culprit,
                       batch_map=source.batch_map_fn)

    cast_on_arrival = None
    if service is not None and stages.uint8_on_the_wire(plan):
        # Images cross the network as uint8, as they cross the in-process pipeline, and
        # are cast here, on arrival (float32 batches are 4x the bytes to serialise).
        cast_on_arrival = plan
        plan = dataclasses.replace(plan, image_dtype=None)
    input_context = o.input_context
    if input_context is not None and input_context.num_input_pipelines > 1:
        # Each input pipeline (worker) keeps a disjoint share, decided before any decoding.
        dataset = dataset.shard(input_context.num_input_pipelines,
                                input_context.input_pipeline_id)
    if stream is not None:
        dataset = stream_lib.passes(dataset, plan, stream=stream, source=source, cache=cache,
                                    salt_per_worker=service is not None
                                    and service.salts_per_worker)
        # Everything up to the last shuffle keeps its order (set per op above and here for
        # stages inside a source, e.g. TFDS's decode): the resume point depends on it.
        tf_options.deterministic = True
    else:
        if source.source_shuffle:
            dataset = dataset.shuffle(source.source_shuffle, seed=o.seed,
                                      reshuffle_each_iteration=True)
        dataset = stages.cache_examples(stages.decode(dataset, plan, source), cache)
        if shuffle_buffer:
            dataset = dataset.shuffle(shuffle_buffer, seed=o.seed, reshuffle_each_iteration=True)
        seeds = tf.data.Dataset.random(seed=o.seed, rerandomize_each_iteration=True)
        dataset = stages.after_shuffle(dataset, plan, example_seeds=seeds, batch_seeds=seeds)
    if service is not None:
        # The options travel with the graph, so the workers run with them; the batches
        # then arrive here in the order the workers finish them.
        dataset = service_lib.distribute(dataset.with_options(tf_options), service)
        tf_options = tf.data.Options()
        if cast_on_arrival is not None:
            dataset = stages.cast_images(dataset, cast_on_arrival)
    if not o.sequential:
        dataset = dataset.prefetch(stages.AUTOTUNE)
    return dataset.with_options(tf_options)


def optimize(dataset: tf.data.Dataset, *, batch_size: Optional[int],
             map_fn: Optional[Callable] = None,
             cache=None,
             shuffle_buffer: int = 0,
             augment: AugmentArg = None,
             augment_on: str = "batch",
             seed: Optional[int] = None,
             drop_remainder: Optional[bool] = None,
             deterministic: bool = False,
             num_parallel_calls: int = AUTOTUNE,
             private_threads: Optional[int] = None,
             ram_budget_bytes: Optional[int] = None,
             shard_policy: Optional[str] = None,
             image_dtype: Optional[str] = "float32",
             input_context: Optional[tf.distribute.InputContext] = None,
             source_shuffle: int = 0,
             sequential: bool = False,
             stream: Optional[EpochStream] = None,
             service=None,
             cache_fingerprint: Optional[dict] = None,
             padded_batch: bool = False,
             batch_by_length: bool = False, **unknown) -> tf.data.Dataset:
    """Applies the standard tail to a dataset of examples and returns batches for `fit`.

    The order is fixed because each step only stays correct and fast in this place:

    1. ``map_fn`` (read/decode/resize) as a parallel map: the expensive, deterministic work,
       spread over all cores.
    2. ``cache``: right after the deterministic work, so later epochs skip it, and *before*
       anything random, so random choices are not frozen into the cache.
    3. ``shuffle`` (seeded, reshuffled each epoch): after the cache, or every epoch would read
       the cached first-epoch order.
    4. random augmentation (after a source's random decode, if any: a random crop decoded
       from the cached file bytes): after cache and shuffle so it differs every epoch; named
       augmentations run vectorised on whole batches (one op per batch, not per image),
       a callable runs per example in a parallel map (``augment_on="example"``) or per batch.
       Its seeds come from ``Dataset.random(rerandomize_each_iteration=True)``: reproducible
       for a given `seed`, yet different in each epoch.
    5. ``batch`` (drop_remainder under a strategy, so every replica gets the same shape).
    6. ``prefetch(AUTOTUNE)`` last, so the next batch is prepared while the model trains.

    With `service` (a `tfaccel.data.service.ServiceTarget`) stages 1-5 run on the tf.data
    service's workers (the expensive decode and augmentation, and the batching, so whole
    batches travel) and only the prefetch runs here.

    With `stream` (an `EpochStream`) the result is instead a stream of whole passes in
    which pass p's shuffle and augmentation seeds are pure functions of (`seed`, p), and
    every stage up to the last shuffle keeps a fixed order, so that a pass can be rebuilt
    in another process and resumed at any batch (see `EpochStream`).

    Args:
        dataset: A dataset of examples: ``(features, label)`` pairs or features alone. With
            `stream` it must yield the same order on every iteration (no reshuffling of
            its own).
        batch_size: The GLOBAL batch size (all replicas together). None: no batch stage,
            the dataset yields single examples (still cast and prefetched), as Keras'
            loaders do with ``batch_size=None``; `augment` then takes only a callable
            with ``augment_on="example"``.
        map_fn: Per-example decode/resize function, run as a parallel map before the cache.
            Images it makes (the features, or their "image") must have a known height and
            width (one size: resize them) unless `padded_batch`; else a `UserInputError`
            names `map_fn` and the shape.
        cache: None, ``"memory"``, or a file path (or directory) for an on-disk cache. A
            file cache is fingerprinted and locked (`tfaccel.data.cache_files`): rebuilt,
            with a message, when `cache_fingerprint` differs from the one it was built with
            or a killed run left it half written; refused while another live process
            writes it.
        shuffle_buffer: Shuffle buffer size in examples; 0 turns shuffling off.
        augment: A list of names from ``augment.AUGMENTATIONS`` ("flip", "flip_vertical",
            "crop", "brightness", "contrast"), or a callable
            ``fn(features, label, seed) -> (features, label)`` where `seed` is a shape-[2]
            int64 tensor for ``tf.random.stateless_*``/``tf.image.stateless_random_*`` ops.
        augment_on: ``"batch"`` or ``"example"``: where a callable `augment` runs.
        seed: Seed for shuffling and augmentation; None means different every run.
        drop_remainder: None means True when more than one replica is in sync.
        deterministic: Fix the element order (see `make_options`).
        num_parallel_calls: Parallelism of the maps (default AUTOTUNE).
        private_threads: See `make_options`.
        ram_budget_bytes: See `make_options`.
        shard_policy: See `make_options`.
        image_dtype: uint8 features are cast to this dtype after caching ("float32");
            None keeps them uint8.
        input_context: From ``strategy.distribute_datasets_from_function``: shard this
            pipeline's input and produce per-replica batches.
        source_shuffle: Shuffle buffer applied before `map_fn`, for sources whose elements
            are cheap references (paths, indices): a global shuffle for a few bytes each.
        sequential: Build the truly sequential pipeline (the benchmarks' baseline).
        stream: An `EpochStream`: build a resumable stream of passes (see above).
        service: A `tfaccel.data.service.ServiceTarget`: run stages 1-5 on a tf.data
            service (see above). In ``parallel_epochs`` mode a stream's seeds are salted
            per worker, so workers make different passes instead of the same batches; the
            order in which batches arrive is never fixed.
        cache_fingerprint: A JSON-able dict of everything the cached examples depend on
            (the builders pass their files and decode settings). None: the input cannot
            be looked into; said once per cache, and the cache is reused as it is.
        padded_batch: Batch examples whose shapes are not fully known with
            `Dataset.padded_batch` (zeros up to the longest example of each batch, as
            Keras' audio loader) instead of as RaggedTensors.
        batch_by_length: For texts (string features) and sequences (a first dimension of
            unknown length): batch examples of similar length together, each batch padded
            to its own longest (`tfaccel.data.length_batches`: length-sorted windows after
            the shuffle, as many batches per pass as plain batching, seeded). Other
            examples are batched as usual.
        **unknown: Refused, naming the nearest keyword (`refuse_unknown`).

    Returns:
        A `tf.data.Dataset` of batches.

    Raises:
        UserInputError: An argument has a bad value, or is not one of these.
    """
    refuse_unknown(unknown, builder=optimize)
    source = SourceStages(
        map_fn=map_fn, source_shuffle=source_shuffle, shuffle_buffer=shuffle_buffer,
        padded_batch=padded_batch, cache_fingerprint=cache_fingerprint)
    options = TailOptions(
        cache=cache, augment=augment, augment_on=augment_on, seed=seed,
        drop_remainder=drop_remainder, deterministic=deterministic,
        num_parallel_calls=num_parallel_calls, private_threads=private_threads,
        ram_budget_bytes=ram_budget_bytes, shard_policy=shard_policy,
        image_dtype=image_dtype, input_context=input_context, sequential=sequential,
        stream=stream, service=service, batch_by_length=batch_by_length)
    return build(dataset, batch_size=batch_size, source=source, options=options)


def _check_unbatched(*, augment, augment_on: str, stream, input_context) -> None:
    """Refuses what needs batches when ``batch_size=None`` (the stages that count them)."""
    if augment and not (callable(augment) and augment_on == "example"):
        # Named augmentations draw one set of random numbers per batch (vectorised).
        raise UserInputError(
            f"batch_size=None (no batches) cannot run augment={augment!r} with "
            f"augment_on={augment_on!r}, which works on whole batches; pass a callable with "
            "augment_on='example', or a batch_size.")
    if stream is not None:
        raise UserInputError(f"batch_size=None cannot make a stream ({stream!r}): a "
                             "stream resumes at a batch; pass a batch_size.")
    if input_context is not None:
        raise UserInputError("batch_size=None cannot split a global batch among replicas "
                             f"(input_context={input_context!r}); pass a batch_size.")


def _check_service(service, *, sequential: bool, stream, seed, shuffle_buffer, augment):
    if not isinstance(service, service_lib.ServiceTarget):
        raise UserInputError(f"service must be a tfaccel.data.ServiceTarget, got {service!r}.")
    if sequential:
        raise UserInputError("sequential=True (the benchmark baseline) takes no service.")
    if (service.processing_mode == "parallel_epochs" and stream is None and seed is not None
            and (shuffle_buffer or augment)):
        # Every worker runs the same graph: with one fixed seed they all make the same
        # batches, and the reader gets each of them once per worker.
        raise UserInputError(
            f"processing_mode 'parallel_epochs' with seed={seed!r} would make every service "
            "worker produce the same shuffled/augmented batches; pass seed=None (each "
            "worker draws its own), use a stream (EpochStream: salted per worker), or use "
            "'distributed_epoch'.")


# optimize's arguments that belong to training batches only: random augmentation, the
# resumable stream, the tf.data service and the dropped last batch. A validation subset
# built beside a training one (a builder's subset="both", fit's validation_split) leaves
# them out, as a recipe's validation split does: validation measures the same images
# every epoch, every one of them.
TRAINING_ONLY = frozenset({"augment", "augment_on", "stream", "service", "drop_remainder"})


def validation_options(options: TailOptions) -> TailOptions:
    """THE options of a validation subset built beside a training one: `options` without
    `TRAINING_ONLY` (unset), and the last partial batch kept (Keras evaluates uneven
    batches)."""
    return dataclasses.replace(options.without(TRAINING_ONLY), drop_remainder=False)


def _parameters(function: Callable) -> list:
    """`function`'s named parameters, in order (no ``*args``/``**kwargs``)."""
    return [name for name, p in inspect.signature(function).parameters.items()
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def refuse_unknown(unknown: Mapping, *, builder: Callable,
                   refused: Mapping[str, str] = {}) -> None:
    """Refuses the keywords a `from_*` builder (or `optimize`) does not name, as Python's
    TypeError would, with the nearest of the builder's own keywords.

    A builder names every keyword it takes (its own, then the tail's public options) and
    gathers the rest in ``**unknown`` only to hand them here, first thing: the message
    names the builder, the argument, the nearest keyword and the keywords it takes, read
    from the builder's own signature (as Python's message would be).

    Args:
        unknown: The keywords `builder` received beyond its named ones.
        builder: The function that received them.
        refused: ``{option: why}``: tail options that mean nothing to `builder`.

    Raises:
        UserInputError: For the first unknown keyword: an argument of the Keras/tf.data
            function `builder` replaces gets what tfaccel does instead
            (`tfaccel.config.keras_names.KERAS_ARGUMENT_HINTS`), a refused one its reason,
            any other the nearest keyword.
    """
    if not unknown:
        return
    public = [name for name in _parameters(builder) if not name.startswith("_")
              and name not in refused]
    replaced, hints = KERAS_ARGUMENT_HINTS.get(builder.__name__, ("", {}))
    for name in unknown:
        if name in hints:  # the replaced function's own name: what tfaccel does instead
            raise UserInputError(f"{builder.__name__}() does not take {replaced}'s {name}="
                                 f"{unknown[name]!r}: {hints[name]}.")
        if name in refused:
            raise UserInputError(f"{builder.__name__}() does not take {name}="
                                 f"{unknown[name]!r}: {refused[name]}.")
        raise UserInputError(
            f"{builder.__name__}() got an unknown argument {name!r}"
            f"{did_you_mean(name, public)}; it takes {', '.join(public)}.")
