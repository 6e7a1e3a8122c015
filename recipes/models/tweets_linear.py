"""A linear softmax over a TF-IDF-like bag of token ids: logistic regression as a Keras model.

``model.name: models/tweets_linear.py:build`` (recipes/tweets.yaml). The ids (0 padding) of
a text become a bag: sublinear term frequency ``log1p(count)`` per distinct id, times an
inverse document frequency estimated from the id itself, L2-normalised per text (as
scikit-learn's TfidfVectorizer), then a softmax layer with an L2 penalty on its weights.
TextVectorization numbers its vocabulary by decreasing frequency, so an id is its token's
frequency rank r, and Zipf's law makes the document frequency about proportional to 1/r:
``idf(r) = idf_slope * ln(r) + idf_offset`` (the least-squares fit of scikit-learn's
smoothed idf on ln(r) over the tweets' training split: 1.088 and -3.264, correlation 0.983).
"""

import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="tweets_linear")
class SublinearBag(keras.layers.Layer):
    """ids [B, L] (0: padding) -> per-position weights [B, L] summing, per distinct id, to
    its L2-normalised ``log1p(count) * idf(id)``; padding gets 0."""

    def __init__(self, vocab_size, idf_slope, idf_offset, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = int(vocab_size)
        self.idf_slope = float(idf_slope)
        self.idf_offset = float(idf_offset)

    def call(self, ids):
        ids = tf.cast(ids, tf.int64)
        rows = tf.range(tf.shape(ids, out_type=tf.int64)[0])[:, None]
        keys = tf.reshape(rows * self.vocab_size + ids, [-1])
        _, where, counts = tf.unique_with_counts(keys, out_idx=tf.int64)
        count = tf.reshape(tf.cast(tf.gather(counts, where), tf.float32), tf.shape(ids))
        mask = tf.cast(ids > 0, tf.float32)
        rank = tf.cast(tf.maximum(ids, 2), tf.float32)
        idf = self.idf_slope * tf.math.log(rank) + self.idf_offset
        value = tf.math.log1p(count) * idf            # the distinct id's tf-idf
        # Each of a distinct id's `count` positions carries value / count.
        per_position = mask * value / count
        norm2 = tf.reduce_sum(mask * value * value / count, axis=1, keepdims=True)
        return per_position * tf.math.rsqrt(tf.maximum(norm2, 1e-12))

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size,
                "idf_slope": self.idf_slope, "idf_offset": self.idf_offset}


def build(*, input_shape, num_classes, vocab_size, l2=1.6e-6, idf_slope=1.088,
          idf_offset=-3.264):
    """Builds the linear model, uncompiled.

    Args:
        input_shape: ``(None,)``: token ids, 0 for padding.
        num_classes: Number of classes of the softmax.
        vocab_size: At least the vocabulary's size (data.text.max_tokens): ids below it.
        l2: The L2 coefficient of the weights; scikit-learn's C over N training texts is
            about ``1 / (2 * C * N)`` for a mean loss (1.6e-6: C = 10, N = 30,526).
        idf_slope, idf_offset: ``idf(id) = idf_slope * ln(id) + idf_offset``.

    Returns:
        A `keras.Model` from ids to class probabilities (float32).
    """
    ids = keras.Input(shape=input_shape, dtype="int32")
    weights = SublinearBag(vocab_size, idf_slope, idf_offset, dtype="float32")(ids)
    table = keras.layers.Embedding(vocab_size, num_classes, embeddings_initializer="zeros",
                                   embeddings_regularizer=keras.regularizers.L2(l2),
                                   dtype="float32")(ids)
    logits = keras.ops.einsum("bl,blk->bk", weights, table)
    logits = BiasAdd(dtype="float32")(logits)
    outputs = keras.layers.Activation("softmax", dtype="float32")(logits)
    return keras.Model(ids, outputs, name="tweets_linear")


@keras.saving.register_keras_serializable(package="tweets_linear")
class BiasAdd(keras.layers.Layer):
    """A trainable bias per class (not penalised, as scikit-learn's intercept)."""

    def build(self, input_shape):
        self.bias = self.add_weight(shape=(input_shape[-1],), initializer="zeros",
                                    name="bias")

    def call(self, x):
        return x + self.bias
