"""The resumable stream of passes: pass p's order and seeds a pure function of (seed, p)."""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np
import tensorflow as tf

from tfaccel.data import service as service_lib
from tfaccel.data.tail import stages
from tfaccel.data.tail.spec import SourceStages
from tfaccel.errors import UserInputError


@dataclasses.dataclass(frozen=True)
class EpochStream:
    """Asks the tail (`optimize`) for a stream of whole passes whose order depends only on (seed, pass).

    Each pass p (0-based) shuffles with a seed derived from (`seed`, p) and seeds its
    augmentations from (`seed`, p, batch index), so pass p is the same in every process that
    builds the pipeline: a run resumed at (pass, batch) continues exactly where it stopped,
    without replaying or skipping an example. Keras' `fit` then reads the stream with a
    fixed `steps_per_epoch`.

    Attributes:
        first_pass: The pass the stream starts in.
        skip_batches: Batches of `first_pass` already trained on (skipped before decoding
            where the order allows, otherwise read and dropped without being trained on).
        num_passes: Passes in the stream counted from pass 0 (None: endless).
        batches_per_pass: Batches each pass yields (None: every full batch). The batches
            after it are still made and dropped, so a cache before the stream is always
            read to its end. Workers that split the files among them each make this many
            batches per pass, so they stay in step across passes.
    """

    first_pass: int = 0
    skip_batches: int = 0
    num_passes: Optional[int] = None
    batches_per_pass: Optional[int] = None

    def __post_init__(self):
        for name in ("first_pass", "skip_batches"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise UserInputError(f"EpochStream.{name} must be an integer >= 0, got "
                                     f"{value!r}.")
        limit = self.batches_per_pass
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)
                                  or limit <= self.skip_batches):
            raise UserInputError(f"EpochStream.batches_per_pass must be an integer above "
                                 f"skip_batches ({self.skip_batches}), got {limit!r}.")
        if self.num_passes is not None and self.num_passes <= self.first_pass:
            raise UserInputError(f"EpochStream.num_passes ({self.num_passes}) must be more "
                                 f"than first_pass ({self.first_pass}).")



_STREAM_GRAPH_SEED = 20_241_122


def _pass_seed(seed: int, pass_index, salt: int):
    """A per-pass int64 seed: a pure function of (seed, pass, salt), different for each."""
    pass_index = tf.cast(pass_index, tf.int64)
    mixed = tf.random.experimental.stateless_split(
        tf.stack([tf.cast(seed, tf.int64), pass_index * 4 + salt]), num=1)[0]
    # Shuffle seeds must be non-negative; keep 62 bits.
    return tf.bitwise.bitwise_and(mixed[0] ^ mixed[1], tf.constant(2**62 - 1, tf.int64))



def in_order_before_the_skip(plan: stages.Plan) -> stages.Plan:
    """The plan of a stream whose resumed pass is rebuilt whole and its first batches
    skipped (batches by length): every stage before the skip keeps its order. A decode
    handing out whichever example was ready first changed which examples met in a length
    window (ties in length go by arrival), and the resumed pass repeated some examples and
    missed others."""
    return plan if plan.parallel is None else dataclasses.replace(plan, det=True)


def passes(dataset, plan: stages.Plan, *, stream: EpochStream, source: SourceStages, cache,
           salt_per_worker: bool = False):
    """The resumable stream: a fixed-order base, then per pass: shuffle, skip, tail."""
    map_fn, source_shuffle = source.map_fn, source.source_shuffle
    shuffle_buffer = source.shuffle_buffer
    seed = plan.seed
    if seed is None:
        # No seed asked for: still one fixed seed for this pipeline's passes.
        seed = int(np.random.SeedSequence().generate_state(1)[0])
    skip_examples = stream.skip_batches * plan.batch
    base_seed = seed
    # A resume point is skipped before the tail (whole examples) unless batches are formed
    # by length, decided on the decoded examples (the cached bytes of a random crop look
    # like texts here: skipping after batching is exact either way, only slower).
    decoded = dataset if map_fn is None or not plan.by_length else dataset.map(map_fn)
    after_batching = stages.batches_by_length(decoded.element_spec, plan)
    if after_batching:
        plan = in_order_before_the_skip(plan)
    if not source_shuffle:
        # Decode and cache once, in a fixed order: the order every pass shuffles from.
        dataset = stages.cache_examples(stages.decode(dataset, plan, source, det=True), cache)

    @tf.autograph.experimental.do_not_convert
    def one_pass(pass_index):
        # Plain TensorFlow: autograph's conversion of this function and of every pipeline
        # function it calls cost about 0.5 s of CPU at each start (measured on the PNG
        # folder of benchmarks/bench_end_to_end.py). The maps made inside it are converted
        # as usual (a user's augmentation may branch on tensors in Python).
        from tensorflow.python.autograph.core import ag_ctx

        with ag_ctx.ControlStatusCtx(status=ag_ctx.Status.UNSPECIFIED):
            return _one_pass(pass_index)

    def _one_pass(pass_index):
        # The shuffle seeds below are tensors (they depend on the pass). TF combines an op
        # seed with the graph-level seed and fails on a tensor op seed when the graph seed
        # is 0 (`tf.random.set_seed(0)`, the default recipe seed); this sets the seed of this
        # function's own graph only (we are tracing), so the user's global seed is untouched.
        tf.compat.v1.set_random_seed(_STREAM_GRAPH_SEED)
        seed = base_seed
        if salt_per_worker:
            # tf.data service, parallel_epochs: every worker runs this graph; a salt drawn
            # there, when the pass starts, gives each worker passes of its own instead of
            # the same batches (such passes are not reproducible).
            seed = tf.bitwise.bitwise_xor(tf.constant(base_seed, tf.int64),
                                          service_lib.worker_salt())
        skip = tf.where(tf.equal(pass_index, stream.first_pass),
                        tf.constant(skip_examples, tf.int64), tf.constant(0, tf.int64))
        skip_batches = skip // plan.batch
        if after_batching:
            # Batches by length are not consecutive runs of the shuffled examples: the pass
            # is rebuilt whole and its first batches skipped (exact, at the cost of making
            # them again).
            skip = tf.constant(0, tf.int64)
        examples = dataset
        if source_shuffle:
            # Shuffle cheap references, skip what was trained on, then decode the rest.
            examples = examples.shuffle(source_shuffle, seed=_pass_seed(seed, pass_index, 0),
                                        reshuffle_each_iteration=False).skip(skip)
            examples = stages.decode(examples, plan, source)
            if shuffle_buffer:
                examples = examples.shuffle(shuffle_buffer,
                                            seed=_pass_seed(seed, pass_index, 1),
                                            reshuffle_each_iteration=False)
        else:
            if shuffle_buffer:
                examples = examples.shuffle(shuffle_buffer,
                                            seed=_pass_seed(seed, pass_index, 1),
                                            reshuffle_each_iteration=False)
            examples = examples.skip(skip)
        # Augmentation seeds: (pass seed, position in the pass), the same after a resume.
        salt = _pass_seed(seed, pass_index, 2)
        example_seeds = tf.data.Dataset.range(skip, 2**62).map(lambda i: salt ^ i)
        batch_seeds = tf.data.Dataset.range(skip // plan.batch, 2**62).map(
            lambda i: salt ^ (i + 2**40))
        batches = stages.after_shuffle(examples, plan, example_seeds=example_seeds,
                                       batch_seeds=batch_seeds)
        if after_batching:
            batches = batches.skip(skip_batches)
        if stream.batches_per_pass is not None:
            # A filter, not take(): the pass is still read to its end, so a cache before
            # the stream is completed (a cache left unfinished is discarded and refilled).
            limit = tf.constant(stream.batches_per_pass, tf.int64)
            batches = batches.enumerate(start=skip_batches).filter(
                lambda index, _: index < limit).map(lambda _, batch: batch)
        return batches

    passes = tf.data.Dataset.range(stream.first_pass,
                                   stream.num_passes if stream.num_passes is not None
                                   else 2**62)
    return passes.flat_map(one_pass)
