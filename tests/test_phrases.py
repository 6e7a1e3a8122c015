"""The built-in text dataset: generated locally, deterministic, skewed lengths, TFDS-readable."""

import numpy as np

from tfaccel import datasets
from tfaccel.datasets import _generate_text

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


def test_generation_is_deterministic_balanced_and_skewed_in_length():
    texts, labels = _generate_text.generate_texts(2000, seed=(7, 0))
    again, _ = _generate_text.generate_texts(2000, seed=(7, 0))
    other, _ = _generate_text.generate_texts(2000, seed=(7, 1))
    assert texts == again and texts != other
    assert np.bincount(labels).tolist() == [500] * 4
    lengths = np.array([len(t.split()) for t in texts])
    assert lengths.min() >= 10 and lengths.max() <= 300
    assert 20 <= np.median(lengths) <= 45 and (lengths > 100).mean() >= 0.03


def test_class_words_hint_at_the_class_but_shared_words_dominate():
    own, shared = _generate_text.vocabularies()
    texts, labels = _generate_text.generate_texts(400, seed=(3, 0))
    shares = []
    for text, label in zip(texts, labels):
        words = text.split()
        others = sum(w in own[k] for w in words for k in range(4) if k != label)
        assert others == 0  # never another class's own word
        shares.append(sum(w in own[label] for w in words) / len(words))
    assert 0.22 < np.mean(shares) < 0.28  # a quarter of the words, on average
    assert len(shared) == 400 and all(len(words) == 60 for words in own)


def test_prepare_writes_a_tfds_dataset_offline(tmp_path):
    import tensorflow_datasets as tfds

    assert not datasets.is_prepared(str(tmp_path), name=datasets.TEXT_NAME)
    datasets.prepare_builtin(datasets.TEXT_NAME, data_dir=str(tmp_path))
    assert datasets.is_prepared(str(tmp_path), name=datasets.TEXT_NAME)
    assert not datasets.is_prepared(str(tmp_path))  # tfaccel_shapes is not there
    test = tfds.load(datasets.TEXT_NAME, split="test", data_dir=str(tmp_path),
                     as_supervised=True)
    pairs = list(test.as_numpy_iterator())
    assert len(pairs) == datasets.TEXT_SPLIT_SIZES["test"] == 1000
    assert isinstance(pairs[0][0], bytes) and 10 <= len(pairs[0][0].split()) <= 300
