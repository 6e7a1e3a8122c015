"""Batches of examples of similar length, each padded only to its own longest example.

Sequences padded to the dataset's longest example waste most of a step on padding when
lengths are skewed (most texts short, a long tail). tf.data's `bucket_by_sequence_length`
groups by length but changes how many batches a pass makes (each bucket keeps its own
remainder), which a resumable stream cannot have: the batches of a pass must be a pure
function of (seed, pass) and their count fixed. So, after the shuffle, every window of
`window_batches` batches' worth of examples is sorted by length and cut into batches, and
those batches are put in a seeded random order: a pass makes exactly as many batches as
plain batching would (only the last window is short), every example once.
"""

from __future__ import annotations

from typing import Callable, Optional

import tensorflow as tf

from tfaccel.errors import UserInputError

# Batches per sorted window: more sorts more evenly (less padding), fewer keeps batches of a
# window closer to the shuffle's order. 32 is what Fairseq/T2T-style length batching uses
# as a bucket pool of the order of a few thousand examples.
WINDOW_BATCHES = 32


def sequence_length(features) -> tf.Tensor:
    """The default length of an example: the first dimension of its first tensor
    (tokens of a sequence, samples of a waveform), or its word count for a string."""
    first = tf.nest.flatten(features)[0]
    if first.dtype == tf.string and first.shape.rank == 0:
        return tf.size(tf.strings.split(first), out_type=tf.int64)
    return tf.shape(first, out_type=tf.int64)[0]


def sorted_window_batches(dataset: tf.data.Dataset, *, batch_size: int, drop_remainder: bool,
                          seeds: tf.data.Dataset, length_of: Optional[Callable] = None,
                          window_batches: int = WINDOW_BATCHES,
                          deterministic: Optional[bool] = None) -> tf.data.Dataset:
    """Batches `dataset` so that each batch holds examples of similar length.

    Args:
        dataset: Examples, ``(features, label)`` or features alone, already shuffled.
        batch_size: Examples per batch.
        drop_remainder: Drop the pass's last partial batch.
        seeds: A dataset of int64 scalars (one per window) seeding each window's batch
            order, e.g. ``Dataset.random(seed, rerandomize_each_iteration=True)``.
        length_of: ``fn(features) -> int64 scalar``; default `sequence_length`.
        window_batches: Batches per sorted window.
        deterministic: As for `Dataset.map`.

    Returns:
        Batches; features of unknown length are zero-padded to each batch's longest.
    """
    if not isinstance(window_batches, int) or window_batches < 1:
        raise UserInputError(f"window_batches must be an integer >= 1, got {window_batches!r}.")
    length_of = length_of or sequence_length
    has_label = isinstance(dataset.element_spec, tuple) and len(dataset.element_spec) == 2

    def with_length(*element):
        features = element[0] if has_label else (element[0] if len(element) == 1 else element)
        return element if len(element) > 1 else element[0], length_of(features)

    def batches_of(window, rnd):
        examples, lengths = window
        order = tf.argsort(lengths, stable=True)
        ordered = tf.nest.map_structure(lambda t: tf.gather(t, order), examples)
        size = tf.shape(lengths, out_type=tf.int64)[0]
        count = size // batch_size if drop_remainder else -(-size // batch_size)
        # A seeded order of the window's batches: not always short to long.
        picks = tf.random.experimental.stateless_shuffle(
            tf.range(count), seed=tf.stack([rnd, tf.constant(3, tf.int64)]))

        def batch(i):
            def cut(t):
                part = t[i * batch_size:(i + 1) * batch_size]
                if isinstance(part, tf.RaggedTensor):
                    part = part.to_tensor()  # zeros up to this batch's longest example
                if drop_remainder:
                    part = tf.ensure_shape(part, [batch_size] + [None] * (part.shape.rank - 1))
                return part

            return tf.nest.map_structure(cut, ordered)

        return tf.data.Dataset.from_tensor_slices(picks).map(batch)

    windows = dataset.map(with_length, num_parallel_calls=tf.data.AUTOTUNE,
                          deterministic=deterministic).ragged_batch(
        batch_size * window_batches)
    return tf.data.Dataset.zip(windows, seeds).flat_map(batches_of)


def has_open_length(input_shape) -> bool:
    """THE open-length rule: whether a model input (one example's shape, as
    `build_datasets` reports it) is a sequence whose length each batch sets (token ids,
    waveforms of no fixed length): a shape whose first dimension is None. Only those are
    padded per batch, so only their padding is measured."""
    return isinstance(input_shape, tuple) and bool(input_shape) and input_shape[0] is None


def padding_fraction(batches, *, num_batches: Optional[int] = None) -> float:
    """The share of the steps in `batches` that are padding: a batch's appended zeros.

    A step of an example is padding when it and every step after it are zero in every
    channel: token ids ``[batch, time]`` (id 0 is padding, and only padding) and waveforms or
    other sequences ``[batch, time, channels]`` alike. This is the rule the sequence models
    mask by (a recording's own trailing silence counts too: it cannot be told apart).

    Args:
        batches: Batches ``(sequences, ...)`` or sequences alone.
        num_batches: Read at most this many (None: one whole pass).

    Returns:
        Padding steps over all steps (0.0 for no steps).
    """
    padded = total = 0
    for i, element in enumerate(batches):
        if num_batches is not None and i >= num_batches:
            break
        steps = tf.not_equal(tf.nest.flatten(element)[0], 0)
        if steps.shape.rank > 2:  # any channel non-zero makes the step non-zero
            steps = tf.reduce_any(steps, axis=list(range(2, steps.shape.rank)))
        # A step is kept when a non-zero step is at or after it (reverse cumulative any).
        kept = tf.reverse(tf.cumsum(tf.cast(tf.reverse(steps, [1]), tf.int32), axis=1), [1])
        total += int(tf.size(kept))
        padded += int(tf.reduce_sum(tf.cast(tf.equal(kept, 0), tf.int64)))
    return padded / total if total else 0.0
