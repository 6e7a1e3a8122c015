"""Texts to sub-word ids with a KerasHub `WordPieceTokenizer` learnt on the training split.

KerasHub's own `compute_word_piece_vocabulary` learns the vocabulary and its
`WordPieceTokenizer` splits the texts; tfaccel keeps its id convention (0 padding, 1
out-of-vocabulary: ``[PAD]`` and ``[UNK]`` lead the vocabulary), so the masking token models
and `length_batches.padding_fraction` work as with `TextVectorization`. One setting for every
run, so a run directory's vocabulary is enough to rebuild its tokenizer: texts are
lower-cased (as `TextVectorization` does), accents are kept (``café`` is not ``cafe``), and
they are split on whitespace and punctuation, each punctuation mark a token of its own.
KerasHub is imported only when a function here runs (`pip install "tfaccel[hub]"`).
"""

from __future__ import annotations

import keras
import tensorflow as tf

from tfaccel.errors import DataError, UserInputError

PADDING, OUT_OF_VOCABULARY = "[PAD]", "[UNK]"
# The tokenizer's settings, the same at adaptation and when a run's vocabulary is loaded
# (the run directory keeps only the vocabulary).
SETTINGS = {"lowercase": True, "strip_accents": False, "split": True, "split_on_cjk": True,
            "suffix_indicator": "##"}


def adapt_wordpiece(texts: tf.data.Dataset, *, max_tokens: int):
    """A `keras_hub.tokenizers.WordPieceTokenizer` whose vocabulary is learnt on `texts`.

    The vocabulary is KerasHub's `compute_word_piece_vocabulary` (at most `max_tokens`
    entries: ``[PAD]`` (id 0), ``[UNK]`` (id 1), then whole words, characters and
    ``##``-suffix pieces). Texts are lower-cased, accents kept, split on whitespace and
    punctuation (see `SETTINGS`); a word that no sequence of pieces spells is id 1.

    Args:
        texts: The training split's texts (batches of scalar strings, or `(text, label)`).
        max_tokens: Vocabulary size, padding and out-of-vocabulary included (>= 3).

    Raises:
        DataError: The texts hold no token at all.
        UserInputError: `max_tokens` is below 3.
    """
    # Deferred: keras_hub (the hub extra, ~9 s beside TF): only a wordpiece run needs it.
    from keras_hub.tokenizers import compute_word_piece_vocabulary

    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 3:
        raise UserInputError(f"max_tokens must be an integer >= 3 (padding, "
                             f"out-of-vocabulary and one token), got {max_tokens!r}.")
    just_texts = texts.map(lambda *element: element[0])
    try:
        vocabulary = compute_word_piece_vocabulary(
            just_texts, max_tokens, reserved_tokens=[PADDING, OUT_OF_VOCABULARY], **SETTINGS)
    except StopIteration:
        # TensorFlow Text's learner reads its first word with next(): none at all ends it so.
        vocabulary = []
    if len(vocabulary) <= 2:
        raise DataError("the training texts hold no word to build a vocabulary from (after "
                        "lower-casing and splitting on whitespace and punctuation); check "
                        "data.path and data.image_key (the text feature).")
    return tokenizer_of(vocabulary)


def tokenizer_of(vocabulary):
    """The `WordPieceTokenizer` of a vocabulary (a list of tokens in id order), with
    `SETTINGS`.

    Raises:
        DataError: The vocabulary does not start with ``[PAD]`` and ``[UNK]``.
    """
    # Deferred: keras_hub (the hub extra, ~9 s beside TF): only a wordpiece run needs it.
    from keras_hub.tokenizers import WordPieceTokenizer

    vocabulary = list(vocabulary)
    if vocabulary[:2] != [PADDING, OUT_OF_VOCABULARY]:
        raise DataError(f"a WordPiece vocabulary must start with {PADDING} and "
                        f"{OUT_OF_VOCABULARY} (ids 0 and 1), got {vocabulary[:2]!r}.")
    return WordPieceTokenizer(vocabulary=vocabulary, oov_token=OUT_OF_VOCABULARY,
                              dtype="int32", **SETTINGS)


@keras.saving.register_keras_serializable(package="tfaccel")
class PaddedTokenIds(keras.layers.Layer):
    """A KerasHub tokenizer's ids for a batch of strings, padded with 0 to the longest.

    KerasHub tokenizers give ragged ids (or, called eagerly, Python lists); token models
    take a dense ``[batch, length]`` tensor, as `TextVectorization` gives it. Loading a
    `.keras` file that holds this layer needs it registered: import
    `tfaccel.data.wordpiece` first.

    Args:
        tokenizer: A KerasHub tokenizer with integer output (or its serialized config).
    """

    def __init__(self, tokenizer, **kwargs):
        super().__init__(**kwargs)
        if isinstance(tokenizer, dict):
            tokenizer = keras.saving.deserialize_keras_object(tokenizer)
        self.tokenizer = tokenizer

    def build(self, input_shape):
        # No weights of its own; the tokenizer's vocabulary is set when it is made.
        self.built = True

    def call(self, texts):
        ids = self.tokenizer(texts)
        if isinstance(ids, list):  # KerasHub's eager path gives Python lists
            ids = tf.ragged.constant(ids, dtype=tf.int32, ragged_rank=1)
        if isinstance(ids, tf.RaggedTensor):
            ids = ids.to_tensor(default_value=0)
        return tf.cast(ids, tf.int32)

    def compute_output_spec(self, texts):
        return keras.KerasTensor((texts.shape[0], None), dtype="int32")

    def get_config(self):
        return {**super().get_config(),
                "tokenizer": keras.saving.serialize_keras_object(self.tokenizer)}
