"""The text models over token ids (0 = padding): text_cnn, text_bag, text_transformer."""

import keras
from keras import ops

from tfaccel.models.masks import masked_mean
from tfaccel.models.task_head import output_head


def build_text_cnn(*, input_shape, num_classes,
                   task="classification", vocab_size, embed_dim, filters, kernel_size,
                   dropout):
    """Embedding, Conv1D layers, masked global max pooling: texts of any length."""
    del input_shape  # any length: each batch is as long as its own longest text
    ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
    x = keras.layers.Embedding(vocab_size, embed_dim, name="embedding")(ids)
    # Padding (id 0) must not change the result: its embeddings are zeroed, like the
    # convolutions' own zero padding at the ends, and it is left out of the pooling.
    mask = ops.expand_dims(ops.cast(ops.not_equal(ids, 0), x.dtype), -1)
    x = x * mask
    for width in filters:
        x = keras.layers.Conv1D(width, kernel_size, padding="same", activation="relu")(x)
        x = x * ops.cast(mask, x.dtype)
    # ReLU outputs are >= 0, so zeroed padding never wins the max.
    x = ops.max(x, axis=1)
    return keras.Model(ids, output_head(x, task=task, num_outputs=num_classes,
                                        dropout=dropout), name="text_cnn")


def build_text_bag(*, input_shape, num_classes,
                   task="classification", vocab_size, embed_dim, dropout):
    """fastText's classifier: the mean of the tokens' embeddings, a softmax layer.

    Order-free, so n-grams (data.text.ngrams) bring the word order it has; Joulin et al.
    2016 measured it with bigrams on par with TF-IDF and a linear classifier. Padding (id
    0) is left out of the mean.
    """
    del input_shape  # any length: each batch is as long as its own longest text
    ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
    x = keras.layers.Embedding(vocab_size, embed_dim, name="embedding")(ids)
    # The mean of up to hundreds of vectors in float32: bfloat16 sums lose digits.
    x = ops.cast(x, "float32")
    x = masked_mean(x, ops.expand_dims(ops.cast(ops.not_equal(ids, 0), x.dtype), -1))
    return keras.Model(ids, output_head(x, task=task, num_outputs=num_classes,
                                        dropout=dropout), name="text_bag")


def build_text_transformer(*, input_shape, num_classes,
                           task="classification", vocab_size, max_length, embed_dim,
                           num_heads, ff_dim, num_layers, dropout):
    """Token and learned position embeddings, Transformer encoder blocks, masked mean pooling.

    Stock Keras layers and ops only, so a saved model.keras loads without custom objects.
    Texts of any length are taken; the model reads the first `max_length` tokens of each
    (the position embedding has one row per position, and a gather past its end would be
    an error on a CPU and a silent zero on a GPU).
    """
    del input_shape  # any length: each batch is as long as its own longest text
    ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
    cut = ids[:, :max_length]
    valid = ops.not_equal(cut, 0)  # padding is id 0, at the end of each text
    # 0, 1, ..., length - 1 along each text, from the ids' own (open) length.
    positions = ops.cumsum(ops.ones_like(cut), axis=1) - 1
    x = keras.layers.Embedding(vocab_size, embed_dim, name="embedding")(cut)
    x = x + keras.layers.Embedding(max_length, embed_dim, name="position_embedding")(positions)
    if dropout:
        x = keras.layers.Dropout(dropout)(x)
    # A query attends to real tokens only; padding rows attend to them too and are then
    # left out of the pooling, so padding never reaches a real token or the result.
    attend = ops.logical_and(ops.expand_dims(valid, 1), ops.expand_dims(valid, 2))
    for block in range(num_layers):
        attended = keras.layers.MultiHeadAttention(
            num_heads, embed_dim // num_heads, dropout=dropout,
            name=f"attention_{block}")(x, x, attention_mask=attend)
        x = keras.layers.LayerNormalization(epsilon=1e-6, name=f"norm_{block}_a")(x + attended)
        hidden = keras.layers.Dense(ff_dim, activation="relu", name=f"ff_{block}_in")(x)
        hidden = keras.layers.Dense(embed_dim, name=f"ff_{block}_out")(hidden)
        if dropout:
            hidden = keras.layers.Dropout(dropout)(hidden)
        x = keras.layers.LayerNormalization(epsilon=1e-6, name=f"norm_{block}_b")(x + hidden)
    # Masked mean: the sum over real tokens over their count (at least 1: an empty text
    # pools to zeros rather than NaN).
    weights = ops.expand_dims(ops.cast(valid, x.dtype), -1)
    count = ops.maximum(ops.sum(weights, axis=1), 1.0)
    x = ops.sum(x * weights, axis=1) / count
    return keras.Model(ids, output_head(x, task=task, num_outputs=num_classes,
                                        dropout=dropout), name="text_transformer")
