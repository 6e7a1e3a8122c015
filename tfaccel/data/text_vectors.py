"""Texts to token ids with Keras' own `TextVectorization`, adapted on the training split.

The Keras guide's recipe for training speed: vectorize in the tf.data pipeline (on the CPU,
overlapped with training by the prefetch), not inside the model; for inference the same
adapted layer goes in front of the trained model (`with_vectorizer`), so the exported model
takes raw strings. Batches are vectorized whole: `TextVectorization` pads each batch to its
own longest text, which, with batches of similar length (`data.length_batches`), is close
to the text itself. A recipe's ``data.text.tokenizer: wordpiece`` adapts a KerasHub
WordPiece tokenizer instead (`tfaccel.data.wordpiece`); the functions below take either.
"""

from __future__ import annotations

import os
from typing import Optional

import keras
import tensorflow as tf

from tfaccel.config.recipe import TOKENIZERS
from tfaccel.data import wordpiece
from tfaccel.errors import DataError, UserInputError, did_you_mean

VOCABULARY_FILE = "vocabulary.txt"


def adapt_vectorizer(texts: tf.data.Dataset, *, max_tokens: int, ngrams: int = 1,
                     char_ngrams: int = 0):
    """A `keras.layers.TextVectorization` adapted on `texts` (a dataset of string batches).

    Args:
        texts: The training split's texts (batches of scalar strings, or `(text, label)`).
        max_tokens: Vocabulary size, padding (id 0) and out-of-vocabulary (id 1) included.
        ngrams: Also make tokens of the runs of 2 to `ngrams` words (1: words only): a
            text's ids are its words', then its bigrams', and so on.
        char_ngrams: Also make tokens of the runs of 1 to `char_ngrams` characters of the
            standardised text, spaces included (0: none), after the word tokens; they
            share `max_tokens` with the words (`WordAndCharacterNgrams`).

    Raises:
        DataError: The texts hold no token at all.
    """
    layer = _text_vectorization(max_tokens=max_tokens, ngrams=ngrams,
                                char_ngrams=char_ngrams)
    just_texts = texts.map(lambda *element: element[0])
    layer.adapt(just_texts)
    if layer.vocabulary_size() <= 2:
        raise DataError("the training texts hold no word to build a vocabulary from (after "
                        "lower-casing and stripping punctuation); check data.path and "
                        "data.image_key (the text feature).")
    return layer


def _ngrams_argument(ngrams: int):
    # TextVectorization's ngrams=None is words only; an int N makes 1..N-grams.
    return None if ngrams == 1 else ngrams


def _text_vectorization(*, ngrams: int, char_ngrams: int, **kwargs):
    if not char_ngrams:
        return keras.layers.TextVectorization(output_mode="int", output_sequence_length=None,
                                              ngrams=_ngrams_argument(ngrams), **kwargs)
    return keras.layers.TextVectorization(
        output_mode="int", output_sequence_length=None, ngrams=None,
        split=WordAndCharacterNgrams(words=ngrams, characters=char_ngrams), **kwargs)


@keras.saving.register_keras_serializable(package="tfaccel")
class WordAndCharacterNgrams:
    """A `TextVectorization` split: a text's word 1..`words`-grams, then its character
    1..`characters`-grams (spaces included), each character n-gram prefixed with ``#``
    (which standardisation strips from words) so that it never collides with a word.

    The union of word and character n-grams is what TF-IDF baselines on short texts
    stack (recipes/tweets.yaml). Serialisable (`get_config`), for exported models.
    """

    def __init__(self, words: int = 1, characters: int = 5):
        self.words = int(words)
        self.characters = int(characters)

    def __call__(self, texts):
        words = tf.strings.split(texts)
        parts = [words]
        if self.words > 1:
            parts.append(tf.strings.ngrams(words, ngram_width=tuple(range(2, self.words + 1)),
                                           separator=" "))
        characters = tf.strings.unicode_split(texts, "UTF-8")
        grams = tf.strings.ngrams(characters, ngram_width=tuple(range(1, self.characters + 1)),
                                  separator="")
        parts.append(tf.strings.join(["#", grams]))
        return tf.concat(parts, axis=1)

    def get_config(self):
        return {"words": self.words, "characters": self.characters}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


def vectorize(dataset: tf.data.Dataset, layer, *, max_length: Optional[int] = None):
    """Maps string batches ``(texts, ...)`` to int32 id batches padded to each batch's longest.

    Args:
        dataset: Batches of ``(texts [B], labels...)`` or texts alone.
        layer: An adapted `TextVectorization` (`adapt_vectorizer`) or KerasHub
            `WordPieceTokenizer` (`wordpiece.adapt_wordpiece`).
        max_length: Keep at most this many tokens of each text.
    """

    def ids_of(texts):
        ids = layer(texts)
        if isinstance(ids, tf.RaggedTensor):  # WordPiece: one row per text, padded here
            ids = ids.to_tensor(default_value=0)
        ids = tf.cast(ids, tf.int32)
        return ids if max_length is None else ids[:, :max_length]

    def apply(*element):
        if len(element) == 1:
            return ids_of(element[0])
        return (ids_of(element[0]),) + tuple(element[1:])

    return dataset.map(apply, num_parallel_calls=tf.data.AUTOTUNE)


def save_vocabulary(layer, directory) -> str:
    """Writes the vocabulary of `layer` (either tokenizer), one token per line in id order,
    into `directory`; its path."""
    path = os.path.join(os.fspath(directory), VOCABULARY_FILE)
    with open(path, "w", encoding="utf-8") as stream:
        for token in layer.get_vocabulary():
            stream.write(token + "\n")
    return path


def load_vectorizer(directory, *, tokenizer: str = "text_vectorization", ngrams: int = 1,
                    char_ngrams: int = 0):
    """The tokenizer of a run directory's vocabulary (`save_vocabulary`'s file).

    The same settings as the adapted one (`adapt_vectorizer`, or
    `wordpiece.adapt_wordpiece`), so a text becomes the same ids.

    Args:
        directory: The run directory.
        tokenizer: The run's data.text.tokenizer, one of `TOKENIZERS`.
        ngrams: The run's data.text.ngrams (text_vectorization): its vocabulary holds them.
        char_ngrams: The run's data.text.char_ngrams (text_vectorization), likewise.

    Raises:
        DataError: The directory has no vocabulary file (or not a WordPiece one).
        UserInputError: An unknown `tokenizer`.
    """
    if tokenizer not in TOKENIZERS:
        raise UserInputError(f"tokenizer must be one of {', '.join(TOKENIZERS)}, got "
                             f"{tokenizer!r}{did_you_mean(str(tokenizer), TOKENIZERS)}.")
    path = os.path.join(os.fspath(directory), VOCABULARY_FILE)
    try:
        with open(path, encoding="utf-8") as stream:
            # One token a line; split on "\n" only (splitlines would also cut at other
            # Unicode line breaks a token may hold).
            tokens = stream.read().split("\n")[:-1]
    except FileNotFoundError:
        raise DataError(f"{path!r} does not exist: the run's vocabulary is needed to turn "
                        "texts into the token ids its model takes.") from None
    if tokenizer == "wordpiece":
        return wordpiece.tokenizer_of(tokens)
    return _text_vectorization(vocabulary=tokens, ngrams=ngrams, char_ngrams=char_ngrams)


def with_vectorizer(model, layer, *, max_length: Optional[int] = None):
    """A model that takes raw strings: `layer` in front of the trained `model` (for export).

    Args:
        model: A trained token model (int ids, 0 for padding).
        layer: The run's tokenizer (`load_vectorizer`): a `TextVectorization`, or a
            KerasHub `WordPieceTokenizer`, whose ragged ids a `wordpiece.PaddedTokenIds`
            pads as `vectorize` did.
        max_length: The run's data.text.max_length: keep at most this many tokens of each
            text, as `vectorize` did in training (None: whole texts).
    """
    texts = keras.Input(shape=(), dtype="string", name="text")
    if not isinstance(layer, keras.layers.TextVectorization):
        layer = wordpiece.PaddedTokenIds(layer)
    ids = layer(texts)
    if max_length is not None:
        ids = ids[:, :max_length]
    return keras.Model(texts, model(ids), name=f"{model.name}_with_vectorizer")
