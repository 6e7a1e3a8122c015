"""Token models: padding never changes a prediction, in float32 and in mixed precision."""

import keras
import numpy as np
import pytest

from tfaccel import models
from tfaccel.errors import UserInputError


def _ids(batch=6, length=20, real=(20, 3, 11, 7, 15, 1), vocab=50):
    ids = np.random.default_rng(0).integers(2, vocab, (batch, length)).astype("int32")
    for row, n in enumerate(real):
        ids[row, n:] = 0
    return ids


TOKEN_MODELS = ("text_cnn", "text_transformer", "text_bag")


@pytest.mark.parametrize("name", TOKEN_MODELS)
@pytest.mark.parametrize("policy, atol", [("float32", 1e-6), ("mixed_bfloat16", 2e-2)])
def test_predictions_do_not_depend_on_padding(name, policy, atol):
    keras.mixed_precision.set_global_policy(policy)
    try:
        model = models.build_model(name, input_shape=(None,), num_classes=4, vocab_size=50)
        ids = _ids()
        as_is = model.predict(ids, verbose=0)
        longer = model.predict(np.pad(ids, ((0, 0), (0, 25))), verbose=0)
        assert as_is.dtype == np.float32 and as_is.shape == (6, 4)
        np.testing.assert_allclose(longer, as_is, atol=atol)
        # Each example alone, cut to its own length: the same probabilities.
        for row, n in enumerate((20, 3, 11, 7, 15, 1)):
            alone = model.predict(ids[row:row + 1, :n], verbose=0)
            np.testing.assert_allclose(alone[0], as_is[row], atol=atol)
    finally:
        keras.mixed_precision.set_global_policy("float32")


def test_text_cnn_learns_a_word_that_marks_the_class():
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 2, 256)
    ids = rng.integers(3, 40, (256, 12)).astype("int32")
    ids[np.arange(256), rng.integers(0, 12, 256)] = 40 + labels  # word 40 or 41 gives it
    model = models.build_model("text_cnn", input_shape=(None,), num_classes=2, vocab_size=42)
    model.compile(optimizer=keras.optimizers.Adam(1e-2),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    # Measured (unseeded, and seeds 0-3): 0.68-0.82 after epoch 1, then 0.996-1.000.
    history = model.fit(ids, labels, epochs=4, batch_size=32, verbose=0)
    assert history.history["accuracy"][-1] > 0.95


def test_token_models_need_a_vocabulary_size_and_check_it():
    for name in TOKEN_MODELS:
        assert name in models.model_names() and models.MODELS[name].inputs == "tokens"
        assert models.model_params(name)["vocab_size"] is None
    with pytest.raises(UserInputError, match="model 'text_cnn' needs vocab_size"):
        models.build_model("text_cnn", input_shape=(None,), num_classes=2)
    with pytest.raises(UserInputError, match="parameter 'vocab_size' must be null .* got 2"):
        models.check_params("text_cnn", {"vocab_size": 2})
    with pytest.raises(UserInputError, match="num_classes must be an integer >= 2, got 1"):
        models.build_model("text_cnn", input_shape=(None,), num_classes=1, vocab_size=9)


def test_the_vectorizer_in_front_of_a_trained_model_takes_raw_strings(tmp_path):
    import tensorflow as tf

    from tfaccel.data import text_vectors

    texts = tf.data.Dataset.from_tensor_slices(
        (["good fine day", "bad awful day", "good"], [1, 0, 1])).batch(2)
    layer = text_vectors.adapt_vectorizer(texts, max_tokens=20)
    model = models.build_model("text_cnn", input_shape=(None,), num_classes=2,
                               vocab_size=layer.vocabulary_size())
    ids = next(iter(text_vectors.vectorize(texts, layer)))[0]
    assert ids.dtype == tf.int32 and ids.shape == (2, 3)
    served = text_vectors.with_vectorizer(model, layer)
    strings = tf.constant(["good fine day", "bad awful day"])
    np.testing.assert_allclose(served(strings).numpy(), model(ids).numpy(), atol=1e-6)
    path = text_vectors.save_vocabulary(layer, tmp_path)
    assert open(path).read().splitlines() == layer.get_vocabulary()


def test_text_bag_is_the_mean_of_the_real_tokens_embeddings_then_a_softmax():
    model = models.build_model("text_bag", input_shape=(None,), num_classes=3, vocab_size=50,
                               embed_dim=8, dropout=0.0)
    assert model.count_params() == 50 * 8 + 8 * 3 + 3
    table = model.get_layer("embedding").get_weights()[0]
    kernel, bias = model.get_layer("predictions").get_weights()
    ids = _ids()
    for row, n in enumerate((20, 3, 11, 7, 15, 1)):
        logits = table[ids[row, :n]].mean(axis=0) @ kernel + bias
        expected = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
        np.testing.assert_allclose(model.predict(ids[row:row + 1], verbose=0)[0], expected,
                                   rtol=1e-5, atol=1e-6)


def test_bigrams_give_an_order_free_bag_the_word_order():
    # "x y" and "y x" are the same bag of words: only data.text.ngrams 2 tells them apart.
    import tensorflow as tf

    from tfaccel.data import text_vectors

    rng = np.random.default_rng(3)
    labels = rng.integers(0, 2, 400)
    fillers = ["w%d" % i for i in range(10)]
    texts = [" ".join([fillers[rng.integers(10)], ("x y", "y x")[label],
                       fillers[rng.integers(10)]]) for label in labels]
    accuracy = {}
    for ngrams in (1, 2):
        data = tf.data.Dataset.from_tensor_slices((texts, labels)).batch(32)
        layer = text_vectors.adapt_vectorizer(data, max_tokens=200, ngrams=ngrams)
        keras.utils.set_random_seed(0)
        model = models.build_model("text_bag", input_shape=(None,), num_classes=2,
                                   vocab_size=layer.vocabulary_size(), dropout=0.0)
        model.compile(optimizer=keras.optimizers.Adam(2e-2),
                      loss="sparse_categorical_crossentropy", metrics=["accuracy"])
        # Measured, seeds 0-2: with bigrams 1.000 from epoch 2 on; words alone level off
        # at 0.530-0.533 from epoch 5 on (after 15 epochs: the same), chance 0.50.
        history = model.fit(text_vectors.vectorize(data, layer), epochs=5, verbose=0)
        accuracy[ngrams] = history.history["accuracy"][-1]
    assert accuracy[1] < 0.65 and accuracy[2] > 0.95, accuracy
    assert "x y" in layer.get_vocabulary() and "y x" in layer.get_vocabulary()


def test_a_vocabulary_with_bigrams_loads_back_to_the_same_ids(tmp_path):
    import tensorflow as tf

    from tfaccel.data import text_vectors

    texts = tf.data.Dataset.from_tensor_slices(["good day sir", "bad day", "good day"])
    layer = text_vectors.adapt_vectorizer(texts.batch(2), max_tokens=30, ngrams=2)
    # Each text's words, then its bigrams: "good day" is 2 words and 1 bigram.
    ids = layer(tf.constant(["good day"])).numpy()[0]
    assert [layer.get_vocabulary()[i] for i in ids] == ["good", "day", "good day"]
    text_vectors.save_vocabulary(layer, tmp_path)
    loaded = text_vectors.load_vectorizer(tmp_path, ngrams=2)
    strings = tf.constant(["bad day sir good", "good day"])
    np.testing.assert_array_equal(loaded(strings).numpy(), layer(strings).numpy())


def test_the_transformer_reads_the_first_max_length_tokens_of_a_longer_text():
    model = models.build_model("text_transformer", input_shape=(None,), num_classes=3,
                               vocab_size=50, max_length=8)
    ids = np.random.default_rng(2).integers(2, 50, (4, 30)).astype("int32")
    longer = model.predict(ids, verbose=0)  # no error past the 8 position rows
    np.testing.assert_allclose(longer, model.predict(ids[:, :8], verbose=0), atol=1e-6)
    assert not np.allclose(longer, model.predict(ids[:, 1:9], verbose=0), atol=1e-3)
    with pytest.raises(UserInputError, match="'embed_dim' must be a multiple of 'num_heads', "
                                             "got embed_dim=10 and num_heads=4"):
        models.check_params("text_transformer", {"embed_dim": 10, "num_heads": 4})
    with pytest.raises(UserInputError, match="'max_length' must be an integer >= 1, got 0"):
        models.check_params("text_transformer", {"max_length": 0})


def test_a_saved_transformer_loads_back_without_custom_objects(tmp_path):
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:  # as a run under precision auto saves it
        model = models.build_model("text_transformer", input_shape=(None,), num_classes=4,
                                   vocab_size=50)
        model.save(tmp_path / "model.keras")
    finally:
        keras.mixed_precision.set_global_policy("float32")
    loaded = keras.saving.load_model(tmp_path / "model.keras")
    ids = _ids()
    np.testing.assert_allclose(loaded.predict(ids, verbose=0), model.predict(ids, verbose=0),
                               atol=1e-6)


def test_accumulating_two_micro_batches_of_padded_texts_is_exact():
    # The recipe accumulates 2 micro-batches: each half of a batch padded to the whole
    # batch's longest text. With the attention mask, that padding changes nothing, so
    # the accumulated fit equals the plain one (SGD; no dropout, to compare weights).
    from tfaccel.engine.accumulation import accumulate

    rng = np.random.default_rng(4)
    ids = _ids(batch=32, length=24, real=rng.integers(1, 25, 32).tolist())
    labels = rng.integers(0, 3, 32)
    weights = []
    for steps in (None, 2):
        keras.utils.set_random_seed(5)
        model = models.build_model("text_transformer", input_shape=(None,), num_classes=3,
                                   vocab_size=50, dropout=0.0)
        trained = accumulate(model, steps) if steps else model
        trained.compile(optimizer=keras.optimizers.SGD(0.1),
                        loss="sparse_categorical_crossentropy")
        trained.fit(ids, labels, batch_size=16, epochs=2, shuffle=False, verbose=0)
        weights.append(model.get_weights())
    assert len(weights[0]) == len(weights[1]) > 10
    for plain, accumulated in zip(*weights):
        np.testing.assert_allclose(plain, accumulated, atol=1e-5)


def test_a_recipe_sizes_the_transformer_positions_from_data_text_max_length():
    from tfaccel.config.recipe import recipe_from_dict
    from tfaccel.data.dataset_info import DatasetInfo, TextInfo
    from tfaccel.training.model_setup.model_build import _model_params

    def text(max_length):
        return DatasetInfo(text=TextInfo(tokenizer="text_vectorization", vocabulary_size=10,
                                         max_length=max_length, batch_by_length=False,
                                         ngrams=None, char_ngrams=None))

    info = text(40)

    def params(**model_params):
        recipe = recipe_from_dict({"data": {"text": {"max_length": 40}},
                                   "model": {"name": "text_transformer",
                                             "params": model_params}})
        return _model_params(recipe, info)

    assert params() == {"vocab_size": 10, "max_length": 40}
    assert params(max_length=64)["max_length"] == 64
    with pytest.raises(UserInputError, match="model.params.max_length is 20 but "
                                             "data.text.max_length keeps 40 tokens"):
        params(max_length=20)
    assert _model_params(recipe_from_dict({"model": {"name": "text_transformer"}}),
                         text(None)) == {"vocab_size": 10}


def test_character_ngrams_follow_the_words_and_load_back_to_the_same_ids(tmp_path):
    import tensorflow as tf

    from tfaccel.data import text_vectors

    texts = tf.data.Dataset.from_tensor_slices(["good day", "bad day", "a"])
    layer = text_vectors.adapt_vectorizer(texts.batch(2), max_tokens=200, ngrams=2,
                                          char_ngrams=2)
    tokens = [layer.get_vocabulary()[i] for i in layer(tf.constant(["a"])).numpy()[0]]
    # The word, then its character 1-grams (a 1-character text has no 2-gram); a
    # character n-gram is #-prefixed, so the character "a" is not the word "a".
    assert tokens == ["a", "#a"]
    tokens = [layer.get_vocabulary()[i] for i in layer(tf.constant(["Bad!"])).numpy()[0]]
    assert tokens == ["bad", "#b", "#a", "#d", "#ba", "#ad"]
    text_vectors.save_vocabulary(layer, tmp_path)
    loaded = text_vectors.load_vectorizer(tmp_path, ngrams=2, char_ngrams=2)
    strings = tf.constant(["bad day good", "good day"])
    np.testing.assert_array_equal(loaded(strings).numpy(), layer(strings).numpy())


@pytest.mark.parametrize("key, value", [("ngrams", 2), ("char_ngrams", 3)])
def test_ngrams_are_refused_with_the_wordpiece_tokenizer(tmp_path, key, value):
    from tfaccel.config.recipe import load_recipe
    from tfaccel.errors import RecipeError

    recipe = tmp_path / "r.yaml"
    recipe.write_text("data: {source: text_lines, path: x.tsv, "
                      f"text: {{tokenizer: wordpiece, {key}: {value}}}}}\n")
    with pytest.raises(RecipeError, match=f"data.text.{key} {value} is an option of "
                                          "data.text.tokenizer text_vectorization"):
        load_recipe(recipe)


def test_the_tweets_linear_model_is_a_padding_free_float32_tfidf_softmax():
    import os

    from tfaccel import python_refs

    root = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "recipes")
    build = python_refs.load(os.path.join(root, "models", "tweets_linear.py") + ":build",
                             key="model.name")
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        model = build(input_shape=(None,), num_classes=3, vocab_size=50)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    embedding = next(w for w in model.weights if len(w.shape) == 2)
    embedding.assign(np.random.default_rng(1).normal(size=(50, 3)).astype("float32"))
    ids = _ids()
    as_is = model.predict(ids, verbose=0)
    longer = model.predict(np.pad(ids, ((0, 0), (0, 25))), verbose=0)
    assert as_is.dtype == np.float32 and as_is.shape == (6, 3)
    np.testing.assert_allclose(as_is, longer, atol=1e-6)
    np.testing.assert_allclose(as_is.sum(axis=1), 1.0, atol=1e-5)
    # A bag: the order of a text's ids does not matter; repeating them all (the same
    # log1p-scaled, normalised bag up to the count) does.
    np.testing.assert_allclose(model.predict(ids[:, ::-1], verbose=0), as_is, atol=1e-5)
