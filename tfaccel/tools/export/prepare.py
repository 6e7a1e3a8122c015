"""The export's first step: the run's float model and the arrays that check it, split if asked."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any, Optional

from tfaccel.tools.export.examples import calibration_arrays, validation_arrays
from tfaccel.tools.export.keras_model import load_float32_model, run_keras, split_preprocessing
from tfaccel.tools.export.options import PREPROCESSING_FILE, ExportOptions
from tfaccel.tools.export.text_runs import is_text_run
from tfaccel.training.run_dir import model_source, run_files


@dataclasses.dataclass
class Prepared:
    """The model to convert and the arrays that check it (after any split preprocessing)."""

    model: Any
    x_val: Any
    y_val: Any
    calibration: Any
    details: dict


def prepare(staging: Path, *, directory: Path, format: str, quantize: str,
            options: ExportOptions, calibration_examples: int,
            validation_examples: Optional[int]) -> Prepared:
    """The run's float model, its validation (and calibration) arrays, split if asked."""
    # Deferred: Keras and TensorFlow (seconds); tools/export imports TF-free.
    import keras

    # Deferred: the recipe layer (yaml); tools/export imports TF-free.
    from tfaccel.config.recipe import load_recipe

    recipe = load_recipe(directory / run_files.RECIPE_FILE)
    # An own model's custom layers load once its module has run (and registered them).
    model_source.import_module_of(directory)
    model = load_float32_model(directory / run_files.MODEL_FILE)
    texts = is_text_run(directory)
    if texts:
        # Deferred: TensorFlow (seconds); tools/export imports TF-free.
        from tfaccel.data import text_vectors

        # The run's own tokenizer, vocabulary and cut in front: the export takes raw
        # strings, and is checked on the validation split's strings.
        tokenizer = text_vectors.load_vectorizer(directory,
                                                 tokenizer=recipe.data.text.tokenizer,
                                                 ngrams=recipe.data.text.ngrams,
                                                 char_ngrams=recipe.data.text.char_ngrams)
        model = text_vectors.with_vectorizer(model, tokenizer,
                                             max_length=recipe.data.text.max_length)
    x_val, y_val = validation_arrays(recipe, limit=validation_examples, texts=texts)
    calibration = None
    if quantize == "int8" and format in ("litert", "onnx"):
        calibration = calibration_arrays(recipe, count=calibration_examples)
    details = {"preprocessing": options.preprocessing, "per_tensor": options.per_tensor,
               "strip": options.strip}
    if options.preprocessing == "outside":
        prefix, model = split_preprocessing(model)
        prefix.save(staging / PREPROCESSING_FILE)
        # The checks run the file as written, as a deployment would.
        prefix = keras.saving.load_model(staging / PREPROCESSING_FILE, compile=False)
        details["preprocessing_layers"] = [
            layer.name for layer in prefix.layers
            if not isinstance(layer, keras.layers.InputLayer)]
        x_val = run_keras(prefix, x_val)
        if calibration is not None:
            calibration = run_keras(prefix, calibration)
    # Deferred: TensorFlow (seconds); tools/export imports TF-free.
    from tfaccel.data.table_features import FEATURE_SPACE_FILE

    table = (directory / FEATURE_SPACE_FILE).is_file()
    if table:
        # The model takes encoded rows; the encoding travels with it.
        shutil.copy2(directory / FEATURE_SPACE_FILE, staging / FEATURE_SPACE_FILE)
    details["input"] = _input_interface(model, preprocessing=options.preprocessing,
                                        tokenizer=recipe.data.text.tokenizer, table=table)
    return Prepared(model=model, x_val=x_val, y_val=y_val, calibration=calibration,
                     details=details)


def _input_interface(model, *, preprocessing: str,
                     tokenizer: str = "text_vectorization", table: bool = False) -> dict:
    """What the exported model takes, for export.json: shape, dtype and what it is."""
    if model.inputs[0].dtype == "string":
        interface = {"shape": list(model.inputs[0].shape), "dtype": "string",
                     "is": "raw texts, one string per example (the run's vocabulary.txt and "
                           "data.text.max_length are inside the model)"}
        if tokenizer == "wordpiece":
            # The KerasHub tokenizer runs a TensorFlow Text op, and the layer that pads its
            # ids is tfaccel's: both must be registered before the file is loaded.
            interface["load_after"] = {"saved_model": "import tensorflow_text",
                                       "keras": "import tfaccel.data.wordpiece"}
        return interface
    if preprocessing == "outside":
        what = (f"the output of {PREPROCESSING_FILE} (run it on model.keras' input first), "
                "not raw pixels")
    elif table:
        # Deferred: TensorFlow (seconds); tools/export imports TF-free.
        from tfaccel.data.table_features import FEATURE_SPACE_FILE

        what = (f"rows encoded by {FEATURE_SPACE_FILE} (copied beside the model; numbers "
                "normalised, categories one-hot): load it with keras.saving.load_model and "
                "call it on a dict of the raw columns first")
    elif len(model.inputs[0].shape) == 3:  # [batch, timesteps, channels]: a sequence model
        what = ("model.keras' input (tfaccel's sequence models: raw values, timesteps x "
                "channels, zero-padded at the end)")
    else:
        what = "model.keras' input (tfaccel's models: raw 0-255 pixels)"
    # The checks feed float32, and every format's file keeps a float32 input (LiteRT int8
    # quantizes inside the graph).
    return {"shape": list(model.inputs[0].shape), "dtype": "float32", "is": what}
