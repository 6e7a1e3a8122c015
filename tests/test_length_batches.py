"""Length-sorted windows: every example once, each batch padded to its own longest."""

import numpy as np
import pytest
import tensorflow as tf

from tfaccel.data import length_batches
from tfaccel.errors import UserInputError

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)

LENGTHS = np.random.default_rng(0).integers(1, 60, 103)


def _sequences():
    # Example i: ids 1..L_i shifted by 1000 * i (no zero: zero is padding); label i.
    def generate():
        for i, length in enumerate(LENGTHS):
            yield np.arange(1, length + 1) + 1000 * i, i

    return tf.data.Dataset.from_generator(generate, output_signature=(
        tf.TensorSpec([None], tf.int64), tf.TensorSpec([], tf.int64)))


def _batches(drop=False, seed=1, window_batches=4):
    return list(length_batches.sorted_window_batches(
        _sequences(), batch_size=8, drop_remainder=drop,
        seeds=tf.data.Dataset.random(seed=seed), window_batches=window_batches))


def test_every_example_once_and_as_many_batches_as_plain_batching():
    batches = _batches()
    labels = np.concatenate([y.numpy() for _, y in batches])
    assert sorted(labels.tolist()) == list(range(len(LENGTHS)))
    assert len(batches) == -(-len(LENGTHS) // 8)  # 13, like .batch(8)
    dropped = _batches(drop=True)
    assert len(dropped) == len(LENGTHS) // 8 and all(y.shape == (8,) for _, y in dropped)


def test_each_batch_is_padded_to_its_own_longest_example_and_kept_whole():
    for x, y in _batches():
        x = x.numpy()
        lengths = LENGTHS[y.numpy()]
        assert x.shape[1] == lengths.max()
        for row, i, length in zip(x, y.numpy(), lengths):
            np.testing.assert_array_equal(row[:length], np.arange(1, length + 1) + 1000 * i)
            assert not row[length:].any()


def test_padding_is_what_sorting_each_window_gives_far_below_padding_to_the_longest():
    batches = _batches()
    padded = sum(int((x.numpy() == 0).sum()) for x, _ in batches)
    total = sum(int(x.numpy().size) for x, _ in batches)
    # The same count from the lengths alone: windows of 32 in stream order, sorted, cut in 8s.
    expected_total = 0
    for start in range(0, len(LENGTHS), 32):
        window = np.sort(LENGTHS[start:start + 32], kind="stable")
        expected_total += sum(len(window[b:b + 8]) * window[b:b + 8].max()
                              for b in range(0, len(window), 8))
    assert total == expected_total and padded == expected_total - LENGTHS.sum()
    to_the_longest = len(LENGTHS) * LENGTHS.max()
    assert padded / total < 0.25 < (to_the_longest - LENGTHS.sum()) / to_the_longest


def test_batch_order_is_seeded():
    def order(seed):
        return [tuple(y.numpy()) for _, y in _batches(seed=seed)]

    assert order(1) == order(1)
    assert order(1) != order(2)
    assert sorted(order(1)) == sorted(order(2))  # the same batches, another order


def test_strings_are_sorted_by_word_count_and_not_padded():
    texts = tf.data.Dataset.from_tensor_slices(
        (["a b c", "a", "a b", "w x y z", "p q r s t u"], [0, 1, 2, 3, 4]))
    batches = list(length_batches.sorted_window_batches(
        texts, batch_size=2, drop_remainder=False, seeds=tf.data.Dataset.random(seed=0)))
    # Words 3, 1, 2, 4, 6: sorted "a", "a b" | "a b c", "w x y z" | the six-word one.
    assert sorted(tuple(y.numpy()) for _, y in batches) == [(0, 3), (1, 2), (4,)]
    assert all(x.dtype == tf.string and x.shape.rank == 1 for x, _ in batches)


def test_window_batches_must_be_a_positive_integer():
    with pytest.raises(UserInputError, match="window_batches must be an integer >= 1, got 0"):
        length_batches.sorted_window_batches(_sequences(), batch_size=2, drop_remainder=False,
                                             seeds=tf.data.Dataset.random(seed=0),
                                             window_batches=0)


def test_optimize_batches_by_length_in_a_resumable_stream():
    from tfaccel.data import tail

    texts = [" ".join(["w"] * int(n)) for n in LENGTHS]
    examples = tf.data.Dataset.from_tensor_slices((texts, np.arange(len(texts))))

    def stream(first_pass=0, skip=0):
        return list(tail.optimize(
            examples, batch_size=8, shuffle_buffer=len(texts), seed=5, batch_by_length=True,
            stream=tail.EpochStream(first_pass=first_pass, skip_batches=skip,
                                        num_passes=2)))

    whole = stream()
    per_pass = -(-len(texts) // 8)
    assert len(whole) == 2 * per_pass  # as many batches as plain batching, every pass
    for p in range(2):
        labels = np.concatenate([y.numpy() for _, y in whole[p * per_pass:(p + 1) * per_pass]])
        assert sorted(labels.tolist()) == list(range(len(texts)))  # every text once a pass
        words = [LENGTHS[y.numpy()] for _, y in whole[p * per_pass:(p + 1) * per_pass]]
        assert sum(int(w.max() - w.min()) for w in words) < sum(
            int(LENGTHS.max() - LENGTHS.min()) for _ in words) / 3  # similar lengths
    # Resumed at pass 1, batch 3: exactly the uninterrupted stream's batches from there.
    resumed = stream(first_pass=1, skip=3)
    assert [tuple(y.numpy()) for _, y in resumed] == \
        [tuple(y.numpy()) for _, y in whole[per_pass + 3:]]


def test_padding_fraction_counts_trailing_zero_steps_of_ids_and_waveforms():
    # Ids: 0 is padding. [B=2, T=4]: 1 + 3 padding positions of 8.
    ids = tf.constant([[5, 6, 7, 0], [9, 0, 0, 0]], tf.int32)
    assert length_batches.padding_fraction([(ids, tf.constant([0, 1]))]) == 4 / 8
    # Waveforms [B=2, T=5, C=2]: a step is padding when every channel is zero from it to the
    # end; the silence inside the first one (step 1) and a zero in one channel (step 2) are
    # not. Example 0 has 1 padding step, example 1 has 3: 4 of 10 steps.
    wave = np.zeros((2, 5, 2), np.float32)
    wave[0, 0] = [0.5, 0.5]
    wave[0, 2:4] = [[0.0, 0.3], [0.2, 0.1]]
    wave[1, :2] = [[0.1, 0.0], [0.4, 0.4]]
    second = np.ones((1, 3, 2), np.float32)  # a second batch, no padding: 4 of 13 steps
    batches = [(tf.constant(wave),), (tf.constant(second),)]
    assert length_batches.padding_fraction(batches) == pytest.approx(4 / 13)
    assert length_batches.padding_fraction(batches, num_batches=1) == pytest.approx(4 / 10)
    assert length_batches.padding_fraction([]) == 0.0


def test_a_resumed_stream_by_length_is_exact_when_the_decode_reorders_examples():
    # Batches by length are skipped after batching on resume, so every stage before them
    # must keep its order even without `deterministic`: a decode that hands out whichever
    # example is ready first changed which texts met in a window (ties in length are
    # broken by arrival), and the resumed pass repeated some texts and missed others.
    import time

    from tfaccel.data import tail

    lengths = np.random.default_rng(1).integers(1, 4, 240)  # many ties
    texts = [" ".join(["w"] * int(n)) for n in lengths]

    def slow_on_some(text, label):
        def wait(i):
            if int(i) % 5 == 0:
                time.sleep(0.004)  # a slow file: later examples overtake it
            return i

        label = tf.py_function(wait, [label], tf.int64)
        return text, tf.ensure_shape(label, [])

    examples = tf.data.Dataset.from_tensor_slices((texts, np.arange(len(texts))))

    def stream(skip=0):
        batches = tail.optimize(
            examples, map_fn=slow_on_some, source_shuffle=len(texts), batch_size=4,
            seed=5, batch_by_length=True, num_parallel_calls=4,
            stream=tail.EpochStream(first_pass=0, skip_batches=skip, num_passes=1))
        return [tuple(y.numpy()) for _, y in batches]

    whole = stream()
    assert sorted(sum(whole, ())) == list(range(len(texts)))
    for _ in range(3):
        assert stream(skip=7) == whole[7:]
