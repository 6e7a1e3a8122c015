"""Numpy generator of short texts whose words hint at their class (no TensorFlow)."""

import numpy as np

from tfaccel.datasets.catalog import TEXT_CLASS_NAMES

# Each class has its own words; every text mixes them with words all classes share, so one
# word rarely gives the class away but a text does. Syllables make pronounceable words.
_SYLLABLES = ("ka", "lo", "mi", "ren", "tu", "sa", "vi", "do", "pe", "ra", "no", "gu", "li",
              "fe", "zo", "ta", "mu", "xi", "be", "wa")
_WORDS_PER_CLASS = 60
_SHARED_WORDS = 400
_CLASS_WORD_SHARE = 0.25  # of the words of a text, drawn from its class's own words
# Skewed lengths: most texts short, a long tail (lognormal around 30 tokens, 10 to 300).
_MEDIAN_LENGTH, _SIGMA, _MIN_LENGTH, _MAX_LENGTH = 30, 0.8, 10, 300


def _vocabulary(rng, count, taken):
    words = []
    while len(words) < count:
        word = "".join(rng.choice(_SYLLABLES, size=rng.integers(2, 4)))
        if word not in taken:
            taken.add(word)
            words.append(word)
    return words


def vocabularies(seed: int = 0):
    """``(per-class word lists, shared word list)``, the same for every split."""
    rng = np.random.default_rng(seed)
    taken = set()
    own = [_vocabulary(rng, _WORDS_PER_CLASS, taken) for _ in TEXT_CLASS_NAMES]
    return own, _vocabulary(rng, _SHARED_WORDS, taken)


def generate_texts(n: int, *, seed):
    """``(texts, labels)``: `n` texts, classes exactly balanced (n a multiple of 4), in a
    seeded order; a pure function of (n, seed)."""
    own, shared = vocabularies()
    rng = np.random.default_rng(seed)
    labels = rng.permutation(np.arange(n) % len(TEXT_CLASS_NAMES))
    lengths = np.clip(np.round(rng.lognormal(np.log(_MEDIAN_LENGTH), _SIGMA, n)),
                      _MIN_LENGTH, _MAX_LENGTH).astype(int)
    texts = []
    for label, length in zip(labels, lengths):
        from_class = rng.random(length) < _CLASS_WORD_SHARE
        words = np.where(from_class, rng.choice(own[label], length),
                         rng.choice(shared, length))
        texts.append(" ".join(words))
    return texts, labels.astype(np.int64)
