"""`tfaccel export` of a text run: the export takes raw strings, checked on the run's texts."""

import json

import numpy as np
import pytest
import text_helpers
from click.testing import CliRunner

import tfaccel
from tfaccel.cli.main import main

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)

MAX_TOKENS_KEPT = 6  # data.text.max_length: most texts are longer


@pytest.fixture(scope="module")
def text_run(tmp_path_factory):
    """One short text run (text_lines, text_cnn, 2 epochs) shared by the module."""
    return text_helpers.train_text_run(tmp_path_factory.mktemp("text-export"),
                                       max_length=MAX_TOKENS_KEPT)


def _ids(run_dir, texts):
    """Token ids as the run's pipeline made them: its vocabulary, then its cut."""
    return text_helpers.ids_as_trained(run_dir, texts, max_length=MAX_TOKENS_KEPT)


def test_saved_model_export_takes_raw_strings_and_predicts_as_the_trained_model(
        text_run, tmp_path):
    import keras
    import tensorflow as tf

    report = tfaccel.export(text_run, format="saved_model", out=tmp_path / "sm",
                            latency_runs=1, latency_calls=2)
    assert report["input"]["dtype"] == "string" and report["input"]["shape"] == [None]
    # Checked on the 40 held-out lines, as strings: the same model, so the same answers.
    assert report["validation_examples"] == 40 and report["top1_agreement"] == 1.0
    assert report["accuracy"] == report["float_accuracy"] >= 0.9
    served = tf.saved_model.load(str(tmp_path / "sm" / "saved_model"))
    serve = served.signatures["serving_default"]
    texts = [text for _, text in text_helpers.texts(12, seed=9)] + ["", "zebra unknown words"]
    probabilities = next(iter(serve(text=tf.constant(texts)).values())).numpy()
    trained = keras.saving.load_model(text_run / "model.keras")
    ids = _ids(text_run, texts)
    assert ids.shape[1] == MAX_TOKENS_KEPT  # the cut matters: texts of up to 13 words
    np.testing.assert_allclose(probabilities, trained.predict(ids, verbose=0), atol=1e-6)


def test_keras_export_takes_raw_strings_and_loads_without_custom_objects(text_run, tmp_path):
    import keras
    import tensorflow as tf

    result = CliRunner().invoke(main, ["export", str(text_run), "--format", "keras",
                                       "--out", str(tmp_path / "k")])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "k" / "export.json").read_text())
    assert report["top1_agreement"] == 1.0 and report["max_abs_prob_diff"] == 0.0
    model = keras.saving.load_model(tmp_path / "k" / "model.keras")
    texts = ["good great day", "awful poor the a dull bad bad"]
    np.testing.assert_allclose(
        model(tf.constant(texts)).numpy(),
        keras.saving.load_model(text_run / "model.keras").predict(_ids(text_run, texts),
                                                                 verbose=0), atol=1e-6)


@pytest.mark.parametrize("args, message", [
    (["--format", "litert"], "--format litert cannot export a text run: its exported model "
                             "takes raw strings through Keras' TextVectorization"),
    (["--format", "onnx"], "--format onnx cannot export a text run"),
    (["--format", "saved_model", "--quantize", "int8"],
     "--quantize int8 is not supported for a text run yet"),
    (["--format", "keras", "--preprocessing", "outside"],
     "--preprocessing outside does not apply to a text run"),
])
def test_what_a_text_run_cannot_export_exits_2_and_leaves_nothing(text_run, tmp_path, args,
                                                                  message):
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["export", str(text_run), *args, "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split()) and "Traceback" not in result.output
    assert not out.exists()


@pytest.mark.parametrize("name", ["text_cnn", "text_transformer"])
def test_a_mixed_precision_token_model_is_exported_in_float32(tmp_path, name):
    # Their Keras ops (slice, mask, pooling) are cloned too: giving them a dtype failed.
    import keras

    from tfaccel import models
    from tfaccel.tools.export.keras_model import load_float32_model

    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        model = models.build_model(name, input_shape=(None,), num_classes=3, vocab_size=30)
        model.save(tmp_path / "model.keras")
    finally:
        keras.mixed_precision.set_global_policy("float32")
    loaded = load_float32_model(tmp_path / "model.keras")
    assert {layer.dtype_policy.name for layer in loaded.layers} == {"float32"}
    ids = np.random.default_rng(0).integers(0, 30, (4, 9)).astype("int32")
    np.testing.assert_allclose(loaded.predict(ids, verbose=0), model.predict(ids, verbose=0),
                               atol=2e-2)
