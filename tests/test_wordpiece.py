"""data.text.tokenizer: wordpiece, a KerasHub WordPieceTokenizer: recipe, ids, run, export."""

import importlib.util
import json

import numpy as np
import pytest
import text_helpers
from click.testing import CliRunner

import tfaccel
from tfaccel.cli.main import main
from tfaccel.errors import DataError

MAX_TOKENS_KEPT = 6  # data.text.max_length: most texts are longer


def _recipe(tmp_path, **text):
    import yaml

    (tmp_path / "a.tsv").write_text("neg\tbad day\npos\tgood day\n")
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump({
        "data": {"source": "text_lines", "path": str(tmp_path / "a.tsv"),
                 "validation_split_name": None, "text": text},
        "model": {"name": "text_cnn"}}))
    return recipe


def test_an_unknown_tokenizer_is_named_with_a_did_you_mean(tmp_path):
    result = CliRunner().invoke(main, ["validate", str(_recipe(tmp_path)), "--set",
                                       "data.text.tokenizer=wordpeice"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert ("data.text.tokenizer must be one of text_vectorization, wordpiece; got "
            "str 'wordpeice' (did you mean 'wordpiece'?)") in " ".join(result.output.split())


def test_wordpiece_without_keras_hub_exits_2_naming_the_key_and_how_to_install(
        tmp_path, monkeypatch):
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "keras_hub" else find_spec(name, *a))
    recipe = _recipe(tmp_path, tokenizer="wordpiece")
    for command in (["validate", str(recipe)],
                    ["train", str(recipe), "--run-dir", str(tmp_path / "run")]):
        result = CliRunner().invoke(main, command)
        assert result.exit_code == 2, result.output
        assert "Traceback" not in result.output and "\n\n" not in result.output.strip()
        said = " ".join(result.output.split())
        assert "data.text.tokenizer is 'wordpiece'" in said
        assert 'pip install "tfaccel[hub]"' in said and "pip install keras-hub" in said
    assert not (tmp_path / "run").exists()
    # Keras' own tokenizer needs nothing more.
    plain = CliRunner().invoke(main, ["validate", str(_recipe(tmp_path))])
    assert plain.exit_code == 0, plain.output


def _adapted(texts, max_tokens=200):
    import tensorflow as tf

    from tfaccel.data import wordpiece

    labels = [0] * len(texts)
    return wordpiece.adapt_wordpiece(tf.data.Dataset.from_tensor_slices((texts, labels))
                                     .batch(4), max_tokens=max_tokens)


def _vectorized(layer, texts):
    import tensorflow as tf

    from tfaccel.data import text_vectors

    return text_vectors.vectorize(tf.data.Dataset.from_tensors(tf.constant(texts)),
                                  layer).get_single_element().numpy()


def test_ids_keep_zero_for_padding_one_for_unknown_and_the_vocabulary_order():
    # KerasHub's learner keeps whole words seen at least 10 times; the rest are pieces.
    training = ["the good day", "a bad day, the worst!", "good good fine"] * 10
    tokenizer = _adapted(training)
    vocabulary = tokenizer.get_vocabulary()
    assert vocabulary[:2] == ["[PAD]", "[UNK]"] and tokenizer.vocabulary_size() <= 200
    # Lower-cased; a word whose letters were never seen is [UNK]; the special tokens'
    # text is split like any other (never id 0).
    texts = ["Good DAY", "zebra good", "[PAD] x", ""]
    ids = _vectorized(tokenizer, texts)
    good, day = vocabulary.index("good"), vocabulary.index("day")
    assert ids.shape == (4, 4) and ids.dtype == np.int32
    assert ids[0].tolist() == [good, day, 0, 0]
    assert ids[1].tolist() == [1, good, 0, 0]
    assert ids[3].tolist() == [0, 0, 0, 0]
    # Padding only after a text's last token: every real token is >= 1.
    for row, text in zip(ids, texts):
        length = int(np.count_nonzero(row))
        assert (row[:length] >= 1).all() and (row[length:] == 0).all(), text
    assert vocabulary.index("!") > 1 and vocabulary.index(",") > 1  # punctuation: tokens


def test_a_small_max_tokens_gives_sub_word_pieces_within_it():
    tokenizer = _adapted(["goodness goodly good gooey"] * 8, max_tokens=20)
    vocabulary = tokenizer.get_vocabulary()
    assert len(vocabulary) <= 20 and any(token.startswith("##") for token in vocabulary)
    assert _vectorized(tokenizer, ["good"])[0, 0] >= 2  # pieces, not [UNK]


def test_texts_without_any_token_are_a_data_error():
    with pytest.raises(DataError, match="hold no word to build a vocabulary from"):
        _adapted(["", "   ", "\t"])


@pytest.fixture(scope="module")
def wordpiece_run(tmp_path_factory):
    """One short text_lines run with data.text.tokenizer: wordpiece, shared by the module."""
    return text_helpers.train_text_run(tmp_path_factory.mktemp("wordpiece"),
                                       max_length=MAX_TOKENS_KEPT, tokenizer="wordpiece")


def test_a_wordpiece_run_learns_and_keeps_its_vocabulary(wordpiece_run):
    from tfaccel.data import text_vectors

    summary = json.loads((wordpiece_run / "summary.json").read_text())
    assert summary["final_metrics"]["val_accuracy"] >= 0.9, summary["final_metrics"]  # chance 0.5
    text = summary["dataset"]["text"]
    assert text["tokenizer"] == "wordpiece"
    assert 0 <= summary["dataset"]["validation_padding_fraction"] < 1
    lines = (wordpiece_run / "vocabulary.txt").read_text(encoding="utf-8").split("\n")[:-1]
    tokenizer = text_vectors.load_vectorizer(wordpiece_run, tokenizer="wordpiece")
    assert len(lines) == text["vocabulary_size"] == tokenizer.vocabulary_size()
    assert lines[:2] == ["[PAD]", "[UNK]"] and lines == tokenizer.get_vocabulary()


def _raw_texts():
    return [text for _, text in text_helpers.texts(12, seed=9)] + ["", "zebra unknown words",
                                                                   "GOOD, great!"]


@pytest.fixture(scope="module")
def trained_predictions(wordpiece_run):
    """What the run's model.keras predicts on the ids its pipeline makes of `_raw_texts()`
    and of their first three alone: {"all": ..., "first_three": ...}. Read by both export
    tests (the model loaded once)."""
    import keras

    model = keras.saving.load_model(wordpiece_run / "model.keras")
    texts = _raw_texts()
    return {name: model.predict(text_helpers.ids_as_trained(
                wordpiece_run, batch, max_length=MAX_TOKENS_KEPT, tokenizer="wordpiece"),
                verbose=0)
            for name, batch in (("all", texts), ("first_three", texts[:3]))}


def test_saved_model_export_takes_raw_strings_and_predicts_as_the_trained_model(
        wordpiece_run, trained_predictions, tmp_path):
    import tensorflow as tf

    report = tfaccel.export(wordpiece_run, format="saved_model", out=tmp_path / "sm",
                            latency_runs=1, latency_calls=2)
    assert report["input"]["dtype"] == "string" and report["top1_agreement"] == 1.0
    assert report["input"]["load_after"]["saved_model"] == "import tensorflow_text"
    serve = tf.saved_model.load(str(tmp_path / "sm" / "saved_model")).signatures[
        "serving_default"]
    texts = _raw_texts()
    probabilities = next(iter(serve(text=tf.constant(texts)).values())).numpy()
    np.testing.assert_allclose(probabilities, trained_predictions["all"], atol=1e-5)


def test_keras_export_takes_raw_strings_and_predicts_as_the_trained_model(
        wordpiece_run, trained_predictions, tmp_path):
    import keras
    import tensorflow as tf

    result = CliRunner().invoke(main, ["export", str(wordpiece_run), "--format", "keras",
                                       "--out", str(tmp_path / "k"), "--latency-runs", "1"])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "k" / "export.json").read_text())
    assert report["top1_agreement"] == 1.0 and report["max_abs_prob_diff"] <= 1e-5
    model = keras.saving.load_model(tmp_path / "k" / "model.keras")
    texts = _raw_texts()
    np.testing.assert_allclose(model.predict(tf.constant(texts), verbose=0),
                               trained_predictions["all"], atol=1e-5)
    # Called eagerly too (KerasHub's Python path there): the same ids, the same answers.
    np.testing.assert_allclose(model(tf.constant(texts[:3])).numpy(),
                               trained_predictions["first_three"], atol=1e-5)


@pytest.mark.parametrize("args, message", [
    (["--format", "litert"], "--format litert cannot export a text run: its exported model "
                             "takes raw strings through a KerasHub WordPieceTokenizer "
                             "(TensorFlow Text's FastWordpieceTokenizer op)"),
    (["--format", "saved_model", "--quantize", "int8"],
     "Keras cannot quantize the tokenizer in front of the model, a KerasHub "
     "WordPieceTokenizer"),
])
def test_what_a_wordpiece_run_cannot_export_exits_2_and_leaves_nothing(wordpiece_run,
                                                                       tmp_path, args,
                                                                       message):
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["export", str(wordpiece_run), *args, "--out",
                                       str(out)])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split()) and "Traceback" not in result.output
    assert not out.exists()


def test_the_tokenizer_key_takes_exactly_the_tokenizers_a_run_can_be_rebuilt_with():
    import typing

    from tfaccel.config.recipe import TOKENIZERS, TextConfig

    assert typing.get_args(typing.get_type_hints(TextConfig)["tokenizer"]) == TOKENIZERS
