"""`export(run_dir, format=..., quantize=...)`: a run's model as a deployable file, checked.

The module is not named `export`: importing `tfaccel.export` would replace the public
function `tfaccel.export` with the module of the same name.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import importlib.util
import os
import shutil
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Optional, Union

from tfaccel import atomic
from tfaccel.training import run_dir as run_files
from tfaccel.training import model_source
from tfaccel.errors import UserInputError, did_you_mean

FORMATS = ("saved_model", "litert", "onnx", "keras")
QUANTIZE_MODES = ("none", "dynamic", "float16", "int8")
# What each format's own tooling can do (no hand-written quantizers):
#   litert: TensorFlow's LiteRT converter (dynamic range, float16, full-integer int8).
#   onnx: ONNX Runtime's quantizer (dynamic, static int8 calibrated on training data).
#   keras / saved_model: Keras' in-framework `model.quantize("int8")`.
SUPPORTED = {
    "litert": ("none", "dynamic", "float16", "int8"),
    "onnx": ("none", "dynamic", "int8"),
    "keras": ("none", "int8"),
    "saved_model": ("none", "int8"),
}
ARTIFACT_NAMES = {"litert": "model.tflite", "onnx": "model.onnx", "keras": "model.keras",
                  "saved_model": "saved_model"}
# The optional packages each format needs at export and check time (extra `tfaccel[export]`).
_NEEDS = {"litert": ("ai_edge_litert",), "onnx": ("tf2onnx", "onnx", "onnxruntime")}
_DISTRIBUTIONS = {"ai_edge_litert": "ai-edge-litert", "tf2onnx": "tf2onnx", "onnx": "onnx",
                  "onnxruntime": "onnxruntime"}
REPORT_FILE = "export.json"
PREPROCESSING_FILE = "preprocessing.keras"
PREPROCESSING_MODES = ("inside", "outside")
EXPORTS_DIR = "exports"
DEFAULT_CALIBRATION_EXAMPLES = 300
# Full-integer LiteRT ops that may stay float: the input QUANTIZE and the output DEQUANTIZE.
_BOUNDARY_OPS = ("QUANTIZE", "DEQUANTIZE")
# LiteRT ops that hold a layer's weights: one left in float32 means the layer is not int8.
_WEIGHTED_OPS = frozenset({
    "CONV_2D", "CONV_3D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV", "CONV_3D_TRANSPOSE",
    "FULLY_CONNECTED", "BATCH_MATMUL", "EMBEDDING_LOOKUP", "LSTM", "SVDF",
    "UNIDIRECTIONAL_SEQUENCE_LSTM", "BIDIRECTIONAL_SEQUENCE_LSTM",
    "UNIDIRECTIONAL_SEQUENCE_RNN", "BIDIRECTIONAL_SEQUENCE_RNN"})


def check_arguments(*, format: str, quantize: str, preprocessing: str = "inside",
                    per_tensor: bool = False, strip: bool = False) -> None:
    """Checks a format, quantization mode and export options (no TensorFlow needed).

    Raises:
        UserInputError: An unknown format, mode or preprocessing placement, a pair the
            format's tooling lacks, or an option the format or mode does not have.
    """
    if format not in FORMATS:
        raise UserInputError(f"unknown export format {format!r}; choose one of "
                             f"{', '.join(FORMATS)}{did_you_mean(format, FORMATS)}.")
    if quantize not in QUANTIZE_MODES:
        raise UserInputError(f"unknown quantize mode {quantize!r}; choose one of "
                             f"{', '.join(QUANTIZE_MODES)}.")
    if quantize not in SUPPORTED[format]:
        raise UserInputError(
            f"--format {format} does not support --quantize {quantize}; it supports "
            f"{', '.join(SUPPORTED[format])}. For {quantize}, use --format litert.")
    if preprocessing not in PREPROCESSING_MODES:
        raise UserInputError(f"unknown preprocessing placement {preprocessing!r}; choose "
                             f"{' or '.join(PREPROCESSING_MODES)}.")
    if per_tensor and not (quantize == "int8" and format in ("litert", "onnx")):
        raise UserInputError(
            f"--per-tensor applies to --quantize int8 with --format litert or onnx (one "
            f"scale per weight tensor instead of per output channel); got --format {format} "
            f"--quantize {quantize}.")
    if strip and format != "litert":
        raise UserInputError(f"--strip applies to --format litert (tensor names, signatures "
                             f"and conversion metadata of the .tflite); got --format {format}.")


def default_out(run_dir: Union[str, os.PathLike], *, format: str, quantize: str = "none",
                preprocessing: str = "inside", per_tensor: bool = False,
                strip: bool = False, calibration_examples: int = 300) -> Path:
    """The folder an export goes to without ``out``: named by every option that changes it.

    ``RUN_DIR/exports/FORMAT-MODE`` then ``-outside``, ``-per-tensor``, ``-strip`` and
    ``-calibration-N`` (a calibrated int8 export read N examples, N not the default 300) as
    given, so that exports of one run with other options never clash.

    Returns:
        ``RUN_DIR/exports/<name>``, e.g. ``exports/litert-int8-per-tensor-strip``.
    """
    parts = [format, quantize]
    if preprocessing != "inside":
        parts.append(preprocessing)
    if per_tensor:
        parts.append("per-tensor")
    if strip:
        parts.append("strip")
    # Keras' model.quantize("int8") (keras, saved_model) reads no calibration data.
    if (quantize == "int8" and format in ("litert", "onnx")
            and calibration_examples != DEFAULT_CALIBRATION_EXAMPLES):
        parts.append(f"calibration-{calibration_examples}")
    return Path(run_dir) / EXPORTS_DIR / "-".join(parts)


def check_out_is_free(target: Union[str, os.PathLike]) -> None:
    """Refuses an existing export folder, before any work (no TensorFlow needed).

    Raises:
        UserInputError: `target` exists; tfaccel never overwrites an export.
    """
    if Path(target).exists():
        raise UserInputError(f"--out {str(target)!r} already exists; tfaccel never overwrites "
                             "an export. Choose a new --out or remove that one.")


def check_dependencies(format: str) -> None:
    """Raises a one-line UserInputError naming the extra when a needed package is missing."""
    missing = [name for name in _NEEDS.get(format, ())
               if importlib.util.find_spec(name) is None]
    if missing:
        names = ", ".join(_DISTRIBUTIONS[m] for m in missing)
        raise UserInputError(f"--format {format} needs {names}, which is not installed; "
                             "install the export extra: pip install 'tfaccel[export]'.")


def export(run_dir: Union[str, os.PathLike], *, format: str, quantize: str = "none",
           out: Union[str, os.PathLike, None] = None, preprocessing: str = "inside",
           per_tensor: bool = False, strip: bool = False,
           calibration_examples: int = DEFAULT_CALIBRATION_EXAMPLES,
           validation_examples: Optional[int] = None, latency_runs: int = 5,
           latency_calls: int = 50) -> dict:
    """Exports a run's model.keras, loads the export back with its own runtime and checks it.

    The exported model (and, for a quantized export, the float model exported in the same
    format) is run on the run's validation split, and the folder gets ``export.json`` with
    sizes, accuracies, top-1 agreement and single-example CPU latencies of both.

    Args:
        run_dir: A finished run directory (holds recipe.yaml and model.keras).
        format: ``saved_model``, ``litert``, ``onnx`` or ``keras``.
        quantize: ``none``, ``dynamic``, ``float16`` or ``int8`` (see `SUPPORTED`).
            ``int8`` is calibrated on training examples read through the run's recipe
            without augmentation (LiteRT and ONNX), or is Keras' ``model.quantize("int8")``
            (keras, saved_model). LiteRT ``int8`` keeps the ops before the first layer
            with weights (the input preprocessing) in float32 and quantizes the rest;
            the file takes what model.keras takes (float32 raw pixels).
        out: The folder to create for the export and its export.json; by default
            `default_out`'s, ``RUN_DIR/exports/<format>-<quantize>`` followed by the
            options that change the export (``-outside``, ``-per-tensor``, ``-strip``,
            ``-calibration-N``).
            It must not exist yet: an existing one is refused before any work.
        preprocessing: ``inside`` exports the whole model. ``outside`` exports it from the
            first layer with weights on: the leading weightless layers (tfaccel's models:
            the 1/255 rescaling and the per-image standardisation) are written as
            ``preprocessing.keras`` beside the export instead, and the checks run them in
            float before the exported model (and before the float model it is compared
            with, which leaves them out too). The exported model then takes what
            ``preprocessing.keras`` returns, not raw pixels.
        per_tensor: int8 (LiteRT, ONNX): one scale per weight tensor instead of one per
            output channel; smaller, and may cost accuracy (the report measures it).
        strip: LiteRT: leave out tensor names, signatures and the converter's metadata
            (LiteRT's ``strip_strings`` and ``exclude_conversion_metadata``), in the export
            and in the float file it is compared with. The interpreter's
            ``get_signature_runner`` then has no signature; ``get_input_details`` works.
        calibration_examples: Training examples the int8 calibration reads.
        validation_examples: Check on at most this many validation examples (None: all).
        latency_runs: Alternating timing runs of each model; the best of each is kept.
        latency_calls: Single-example calls timed per run.

    Returns:
        The report written to ``export.json`` (``out`` and ``path`` give the locations).

    Raises:
        UserInputError: A bad argument, a run directory without model.keras or recipe.yaml,
            a missing optional package, an existing or unwritable `out`, or a layer the
            converter cannot quantize. Nothing is left at `out` on any error.
    """
    check_arguments(format=format, quantize=quantize, preprocessing=preprocessing,
                    per_tensor=per_tensor, strip=strip)
    for name, value, low in (("calibration_examples", calibration_examples, 1),
                             ("latency_runs", latency_runs, 1),
                             ("latency_calls", latency_calls, 1)):
        if not isinstance(value, int) or value < low:
            raise UserInputError(f"{name} must be a positive integer, got {value!r}.")
    if validation_examples is not None and (not isinstance(validation_examples, int)
                                            or validation_examples < 1):
        raise UserInputError(f"validation_examples must be a positive integer or None, got "
                             f"{validation_examples!r}.")
    target = Path(out) if out is not None else default_out(
        run_dir, format=format, quantize=quantize, preprocessing=preprocessing,
        per_tensor=per_tensor, strip=strip, calibration_examples=calibration_examples)
    check_out_is_free(target)
    directory = _check_run_dir(run_dir)
    if is_text_run(directory):
        check_text_export(format=format, quantize=quantize, preprocessing=preprocessing,
                          tokenizer=text_tokenizer(directory))
    check_dependencies(format)
    staging = _staging_dir(target)
    try:
        report = _export_into(staging, directory=directory, format=format, quantize=quantize,
                              options=ExportOptions(preprocessing, per_tensor, strip),
                              calibration_examples=calibration_examples,
                              validation_examples=validation_examples,
                              latency_runs=latency_runs, latency_calls=latency_calls)
        report["out"] = str(target)
        # Which epoch was exported: model.keras holds the one training.keep chose.
        summary_file = directory / run_files.SUMMARY_FILE
        if summary_file.is_file():
            report["model_epoch"] = run_files.kept_epoch(json.loads(summary_file.read_text()))
        report["path"] = str(target / ARTIFACT_NAMES[format])
        if preprocessing == "outside":
            report["preprocessing_path"] = str(target / PREPROCESSING_FILE)
        run_files.write_json(staging / REPORT_FILE, report)
        try:
            # The whole folder appears at once, flushed to disk, or not at all.
            atomic.publish_folder(staging, target)
        except OSError as error:
            raise UserInputError(f"cannot create --out {str(target)!r}: "
                                 f"{error.strerror or error}.") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return report


def _check_run_dir(run_dir) -> Path:
    directory = Path(run_dir)
    if not directory.is_dir():
        raise UserInputError(f"run directory {str(directory)!r} does not exist or is not a "
                             "folder.")
    if not (directory / run_files.MODEL_FILE).is_file():
        raise UserInputError(
            f"run directory {str(directory)!r} has no {run_files.MODEL_FILE}: the run did not "
            "finish (interrupted, preempted or failed). Finish it first with "
            f"`tfaccel train --resume {directory}`, then export.")
    if not (directory / run_files.RECIPE_FILE).is_file():
        raise UserInputError(f"run directory {str(directory)!r} has no "
                             f"{run_files.RECIPE_FILE}; export reads the validation split and "
                             "the calibration data through the run's own recipe.")
    return directory


def is_text_run(directory: Path) -> bool:
    """Whether a run trained on texts: it kept the vocabulary its model's ids come from."""
    from tfaccel.data.text_vectors import VOCABULARY_FILE

    return (Path(directory) / VOCABULARY_FILE).is_file()


def text_tokenizer(directory: Path) -> str:
    """A text run's data.text.tokenizer, from its recipe.yaml.

    Raises:
        RecipeError: The recipe does not load here (a wordpiece run without KerasHub
            installed is named with how to install it).
    """
    from tfaccel.config.recipe import load_recipe

    return load_recipe(Path(directory) / run_files.RECIPE_FILE).data.text.tokenizer


# What turns a text run's strings into ids, by data.text.tokenizer (for messages).
_TOKENIZER_NAMES = {"text_vectorization": "Keras' TextVectorization",
                    "wordpiece": "a KerasHub WordPieceTokenizer"}
_TOKENIZER_OPS = {"text_vectorization": "string splitting and a vocabulary lookup table",
                  "wordpiece": "TensorFlow Text's FastWordpieceTokenizer op"}


def check_text_export(*, format: str, quantize: str, preprocessing: str,
                      tokenizer: str = "text_vectorization") -> None:
    """What the export of a text run (a model taking raw strings) supports.

    Args:
        format: The export format.
        quantize: The quantization mode.
        preprocessing: Where the preprocessing goes (``inside`` or ``outside``).
        tokenizer: The run's data.text.tokenizer (``text_vectorization`` or ``wordpiece``).

    Raises:
        UserInputError: A format, quantization or preprocessing placement it does not.
    """
    name = _TOKENIZER_NAMES.get(tokenizer)
    if name is None:
        raise UserInputError(f"tokenizer must be one of {', '.join(_TOKENIZER_NAMES)}, got "
                             f"{tokenizer!r}{did_you_mean(str(tokenizer), _TOKENIZER_NAMES)}.")
    if format in ("litert", "onnx"):
        raise UserInputError(
            f"--format {format} cannot export a text run: its exported model takes raw "
            f"strings through {name} ({_TOKENIZER_OPS[tokenizer]}), which the "
            f"{'LiteRT' if format == 'litert' else 'ONNX'} converter does not convert. Use "
            "--format saved_model or --format keras (both take raw strings).")
    if quantize != "none":
        raise UserInputError(
            f"--quantize {quantize} is not supported for a text run yet (Keras cannot "
            f"quantize the tokenizer in front of the model, {name}, and a quantized "
            "MultiHeadAttention does not load back from a .keras file); use --quantize none.")
    if preprocessing == "outside":
        raise UserInputError(
            "--preprocessing outside does not apply to a text run: its preprocessing is the "
            "vocabulary lookup (vocabulary.txt in the run directory), kept inside the export "
            "so that it takes raw strings; use --preprocessing inside.")


def _staging_dir(target: Path) -> Path:
    """A new hidden folder beside `target`, renamed to it once everything is written."""
    check_out_is_free(target)  # again: another export may have taken it meanwhile
    try:
        return atomic.new_staging_folder(target)
    except OSError as error:
        raise UserInputError(f"cannot create --out {str(target)!r}: "
                             f"{error.strerror or error} ({error.filename or target.parent!r})"
                             ".") from None


# --------------------------------------------------------------------------- the export


@dataclasses.dataclass(frozen=True)
class ExportOptions:
    """How the model is cut and encoded; the float file compared with gets the same cut and
    the same `strip`, so that sizes and accuracies compare like for like."""

    preprocessing: str = "inside"
    per_tensor: bool = False
    strip: bool = False


@dataclasses.dataclass
class _Prepared:
    """The model to convert and the arrays that check it (after any split preprocessing)."""

    model: Any
    x_val: Any
    y_val: Any
    calibration: Any
    details: dict


@dataclasses.dataclass
class _Measured:
    """What the export and its float twin did on the same validation arrays."""

    predictions: dict
    latencies: dict
    sizes: dict
    details: dict


def _export_into(staging: Path, *, directory: Path, format: str, quantize: str,
                 options: ExportOptions, calibration_examples: int,
                 validation_examples: Optional[int], latency_runs: int,
                 latency_calls: int) -> dict:
    """Exports into `staging`: prepare -> convert -> measure -> report.

    What the converters and runtimes print (LiteRT's "fully_quantize: 0 ..." and XNNPACK
    lines, ONNX Runtime's advice) is kept out of the way: shown with --verbose, or with the
    error when a step fails.
    """
    from tfaccel.tools.native_output import native_output_kept

    with native_output_kept("the converters and runtimes"):
        prepared = _prepare(staging, directory=directory, format=format, quantize=quantize,
                            options=options, calibration_examples=calibration_examples,
                            validation_examples=validation_examples)
        artifact = staging / ARTIFACT_NAMES[format]
        prepared.details.update(_convert(prepared.model, artifact, format=format,
                                         quantize=quantize, calibration=prepared.calibration,
                                         options=options))
        measured = _measure(artifact, prepared, staging=staging, format=format,
                            quantize=quantize, options=options, latency_runs=latency_runs,
                            latency_calls=latency_calls)
    return _report(prepared, measured, directory=directory, format=format,
                   quantize=quantize, latency_runs=latency_runs,
                   latency_calls=latency_calls)


def _prepare(staging: Path, *, directory: Path, format: str, quantize: str,
             options: ExportOptions, calibration_examples: int,
             validation_examples: Optional[int]) -> _Prepared:
    """The run's float model, its validation (and calibration) arrays, split if asked."""
    import keras

    from tfaccel.config.recipe import load_recipe

    recipe = load_recipe(directory / run_files.RECIPE_FILE)
    # An own model's custom layers load once its module has run (and registered them).
    model_source.import_module_of(directory)
    model = load_float32_model(directory / run_files.MODEL_FILE)
    texts = is_text_run(directory)
    if texts:
        from tfaccel.data import text_vectors

        # The run's own tokenizer, vocabulary and cut in front: the export takes raw
        # strings, and is checked on the validation split's strings.
        tokenizer = text_vectors.load_vectorizer(directory,
                                                 tokenizer=recipe.data.text.tokenizer,
                                                 ngrams=recipe.data.text.ngrams,
                                                 char_ngrams=recipe.data.text.char_ngrams)
        model = text_vectors.with_vectorizer(model, tokenizer,
                                             max_length=recipe.data.text.max_length)
    x_val, y_val = _validation_arrays(recipe, limit=validation_examples, texts=texts)
    calibration = None
    if quantize == "int8" and format in ("litert", "onnx"):
        calibration = _calibration_arrays(recipe, count=calibration_examples)
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
        x_val = _run_keras(prefix, x_val)
        if calibration is not None:
            calibration = _run_keras(prefix, calibration)
    from tfaccel.data.table_features import FEATURE_SPACE_FILE

    table = (directory / FEATURE_SPACE_FILE).is_file()
    if table:
        # The model takes encoded rows; the encoding travels with it.
        shutil.copy2(directory / FEATURE_SPACE_FILE, staging / FEATURE_SPACE_FILE)
    details["input"] = _input_interface(model, preprocessing=options.preprocessing,
                                        tokenizer=recipe.data.text.tokenizer, table=table)
    return _Prepared(model=model, x_val=x_val, y_val=y_val, calibration=calibration,
                     details=details)


def _measure(artifact: Path, prepared: _Prepared, *, staging: Path, format: str,
             quantize: str, options: ExportOptions, latency_runs: int,
             latency_calls: int) -> _Measured:
    """Predictions, latencies and sizes of the export beside a float export of the model."""
    details = {}
    with tempfile.TemporaryDirectory(prefix=".float-", dir=staging.parent) as scratch:
        contenders = {"export": load_runtime(artifact, format=format)}
        float_artifact = artifact
        if quantize != "none":
            float_artifact = Path(scratch) / ARTIFACT_NAMES[format]
            _convert(prepared.model, float_artifact, format=format, quantize="none",
                     calibration=None, options=options)
            contenders["float"] = load_runtime(float_artifact, format=format)
        predictions = {name: _predict(runtime, prepared.x_val)
                       for name, runtime in contenders.items()}
        latencies = _latencies(contenders, prepared.x_val[:1], runs=latency_runs,
                               calls=latency_calls)
        sizes = {"export": _size_on_disk(artifact), "float": _size_on_disk(float_artifact)}
        if format == "litert":
            # Where the bytes go: on a small model, fixed overhead bounds the size ratio.
            details = {"size_breakdown": litert_size_breakdown(artifact),
                       "float_size_breakdown": litert_size_breakdown(float_artifact)}
    return _Measured(predictions=predictions, latencies=latencies, sizes=sizes,
                     details=details)


def _report(prepared: _Prepared, measured: _Measured, *, directory: Path, format: str,
            quantize: str, latency_runs: int, latency_calls: int) -> dict:
    """The export's report (export.json): size, accuracy and latency against float."""
    import keras
    import numpy as np

    predictions, latencies, sizes = measured.predictions, measured.latencies, measured.sizes
    labels = _as_class_indices(prepared.y_val)
    top1 = {name: np.argmax(p, axis=-1) for name, p in predictions.items()}
    float_name = "float" if "float" in predictions else "export"
    accuracy = float(np.mean(top1["export"] == labels))
    float_accuracy = float(np.mean(top1[float_name] == labels))
    calibration = prepared.calibration
    return {
        "format": format,
        "quantize": quantize,
        "size_bytes": sizes["export"],
        "float_size_bytes": sizes["float"],
        "size_ratio": sizes["float"] / sizes["export"],
        "accuracy": accuracy,
        "float_accuracy": float_accuracy,
        "accuracy_delta": accuracy - float_accuracy,
        "top1_agreement": float(np.mean(top1["export"] == top1[float_name])),
        "max_abs_prob_diff": float(np.max(np.abs(predictions["export"]
                                                 - predictions[float_name]))),
        "latency_ms": latencies["export"],
        "float_latency_ms": latencies[float_name],
        "latency_speedup": latencies[float_name] / latencies["export"],
        "validation_examples": int(len(labels)),
        "calibration_examples": None if calibration is None else int(len(calibration)),
        "latency": {"batch": 1, "runs": latency_runs, "calls_per_run": latency_calls,
                    "statistic": "best run's mean per call, float and export alternated",
                    "threads": _RUNTIME_THREADS.get(format, "tensorflow default")},
        "runtime": _runtime_name(format),
        "run_dir": str(directory),
        "versions": {"keras": keras.__version__, **_package_versions(format)},
        **prepared.details,
        **measured.details,
    }


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


def load_float32_model(path: Path):
    """Loads model.keras for inference, in float32 even if it was trained in mixed precision.

    A mixed_bfloat16/float16 model computes in half precision, which LiteRT's and ONNX's
    CPU kernels do not run (or run slowly); its variables are float32 already, so the same
    architecture under a float32 policy with the same weights is the model to deploy.
    """
    import keras

    with warnings.catch_warnings():
        # A training run's file also holds the optimizer, which inference never needs.
        warnings.filterwarnings("ignore", message=".*Skipping variable loading for optimizer")
        model = keras.saving.load_model(path, compile=False)
    if len(model.inputs) != 1 or len(model.outputs) != 1:
        raise UserInputError(f"{path} has {len(model.inputs)} input(s) and "
                             f"{len(model.outputs)} output(s); export supports models with one "
                             "input and one class-probability output.")
    if all(layer.dtype_policy.name == "float32" for layer in model.layers):
        return model

    def as_float32(layer):
        config = layer.get_config()
        # keras.ops calls between layers (text_cnn's mask, seq_cnn's pooling) are
        # Operations: they take no dtype policy, and a Cast's "dtype" is its target.
        if isinstance(layer, keras.layers.Layer):
            config["dtype"] = "float32"
        return layer.__class__.from_config(config)

    clone = keras.models.clone_model(model, clone_function=as_float32)
    clone.set_weights(model.get_weights())
    return clone


def split_preprocessing(model):
    """Splits `model` into its leading weightless layers and the rest, two Keras models.

    The leading layers are the chain from the input up to the first layer with weights
    (each with one input, feeding only the next); for tfaccel's models, the 1/255 rescaling
    and the per-image standardisation. ``rest(prefix(x))`` equals ``model(x)``.

    Raises:
        UserInputError: The model's first layer has weights (nothing to move out).
    """
    import keras

    consumers: dict = {}
    for layer in model.layers:
        for node in layer._inbound_nodes:  # Keras' functional graph; no public accessor
            for tensor in node.input_tensors:
                consumers.setdefault(id(tensor), []).append(layer)
    cut, moved = model.inputs[0], []
    while len(consumers.get(id(cut), ())) == 1:
        layer = consumers[id(cut)][0]
        nodes = layer._inbound_nodes
        if (layer.weights or len(nodes) != 1 or len(nodes[0].input_tensors) != 1
                or len(nodes[0].output_tensors) != 1
                or nodes[0].output_tensors[0] is model.outputs[0]):
            break
        moved.append(layer)
        cut = nodes[0].output_tensors[0]
    if not moved:
        first = next((layer for layer in model.layers
                      if not isinstance(layer, keras.layers.InputLayer)), None)
        raise UserInputError(
            "--preprocessing outside: the model has no weightless layers before its first "
            f"layer with weights ({first.name if first else 'none'}: "
            f"{type(first).__name__}); there is no preprocessing to move out. Use "
            "--preprocessing inside.")
    prefix = keras.Model(model.inputs, cut, name="preprocessing")
    # Keras builds a functional model from an intermediate tensor (the cut becomes its
    # input layer); the weights are the original model's own variables.
    rest = keras.Model(cut, model.outputs, name=model.name)
    return prefix, rest


def _run_keras(model, features):
    import numpy as np

    return np.asarray(model.predict(features, batch_size=256, verbose=0), "float32")


# --------------------------------------------------------------------------- data


def _data_config(recipe):
    # No augmentation (the model is checked and calibrated on what it will see), and no
    # cache: a file cache would be written by this read-only step.
    return dataclasses.replace(recipe.data, augment=[], cache="")


def _build(recipe, *, raw_texts: bool = False):
    from tfaccel.data.from_recipe import build_datasets

    return build_datasets(_data_config(recipe), global_batch_size=min(
        recipe.training.global_batch_size, 256), num_replicas=1, seed=recipe.seed,
        deterministic=True, raw=raw_texts)


def _validation_arrays(recipe, *, limit: Optional[int], texts: bool = False):
    from tfaccel.errors import DataError

    _, validation, _ = _build(recipe, raw_texts=texts)
    if validation is None:
        raise DataError("the run's recipe has no validation data (data.validation_split or "
                        "data.validation_fraction); export checks every model on it.")
    features, labels = _take_examples(validation, limit)
    if not len(labels):
        raise DataError("the run's validation split is empty; export checks every model on "
                        "it.")
    return features, labels


def _calibration_arrays(recipe, *, count: int):
    # The training split as the recipe reads it (its own seeded shuffle, so a class-ordered
    # source still gives every class), minus augmentation.
    train, _, _ = _build(recipe)
    features, _ = _take_examples(train, count)
    return features


def _take_examples(dataset, limit: Optional[int]):
    import numpy as np
    import tensorflow as tf

    element = dataset.element_spec
    if not isinstance(element, tuple) or isinstance(element[0], dict):
        raise UserInputError("export supports datasets of (features, label) with one "
                             f"feature tensor; this one yields {element}.")
    dataset = dataset.map(lambda *e: (e[0], e[1])).unbatch()
    if limit is not None:
        dataset = dataset.take(limit)
    features, labels = [], []
    # Padded: sequences of different lengths (texts, waveforms) end in zeros, which
    # tfaccel's sequence models ignore; fixed-size examples are batched as they are.
    for batch in dataset.padded_batch(256).prefetch(tf.data.AUTOTUNE).as_numpy_iterator():
        features.append(batch[0])
        labels.append(batch[1])
    if not features:
        return np.zeros((0,), "float32"), np.zeros((0,), "int64")
    if features[0].dtype == object:  # texts stay strings (bytes objects)
        return np.concatenate(features), np.concatenate(labels)
    widest = np.max([f.shape[1:] for f in features], axis=0)
    features = [np.pad(f, [(0, 0)] + [(0, w - n) for w, n in zip(widest, f.shape[1:])])
                for f in features]
    return (np.concatenate(features).astype("float32"), np.concatenate(labels))


def _as_class_indices(labels):
    import numpy as np

    labels = np.asarray(labels)
    return np.argmax(labels, axis=-1) if labels.ndim > 1 else labels.astype("int64")


# --------------------------------------------------------------------------- converters


def _convert(model, artifact: Path, *, format: str, quantize: str, calibration,
             options: ExportOptions) -> dict:
    """Writes `artifact`; returns details of the quantization for the report."""
    if format == "litert":
        return _convert_litert(model, artifact, quantize=quantize, calibration=calibration,
                               per_tensor=options.per_tensor, strip=options.strip)
    if format == "onnx":
        return _convert_onnx(model, artifact, quantize=quantize, calibration=calibration,
                             per_tensor=options.per_tensor)
    details = {}
    if quantize == "int8":
        model, details = keras_int8(model)
    if format == "keras":
        model.save(artifact)
    else:
        model.export(str(artifact), format="tf_saved_model", verbose=False)
    return details


def keras_int8(model):
    """A copy of `model` quantized in-framework by Keras (``model.quantize("int8")``).

    Keras 3.15 quantizes Dense, EinsumDense and Embedding layers (int8 weights, activations
    quantized per call); other layers stay float.

    Raises:
        UserInputError: No layer of the model is one Keras can quantize.
    """
    import keras

    copy = keras.models.clone_model(model)
    copy.set_weights(model.get_weights())
    with warnings.catch_warnings():
        # One warning per layer without int8 support; the report lists what was quantized.
        warnings.filterwarnings("ignore", message=".*does not have a `quantize` method")
        copy.quantize("int8")
    quantized = [layer.name for layer in copy._flatten_layers()
                 if getattr(layer, "quantization_mode", None) == "int8"]
    if not quantized:
        kinds = sorted({type(layer).__name__ for layer in model.layers})
        raise UserInputError(
            "--quantize int8 with Keras: no layer of this model can be quantized (Keras "
            f"quantizes Dense, EinsumDense and Embedding layers; this model has "
            f"{', '.join(kinds)}). Use --format litert --quantize int8.")
    return copy, {"quantized_layers": quantized}


def _convert_litert(model, artifact: Path, *, quantize: str, calibration,
                    per_tensor: bool = False, strip: bool = False) -> dict:
    import tensorflow as tf

    options = {}
    if strip:
        options["exclude_conversion_metadata"] = True  # converter version and options
    if quantize != "none":
        options["optimizations"] = [tf.lite.Optimize.DEFAULT]
    if quantize == "float16":
        options["target_spec"] = {"supported_types": [tf.float16]}
    if quantize == "int8":
        def representative_dataset():
            for example in calibration:
                yield [example[None]]

        options["representative_dataset"] = representative_dataset
        # Integer kernels only; float input and output keep the model's interface.
        options["target_spec"] = {"supported_ops": [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]}
    try:
        if quantize == "int8":
            kept_float = _export_litert_int8(model, artifact, options=options,
                                             per_tensor=per_tensor)
        else:
            model.export(str(artifact), format="litert", verbose=False, **options)
    except Exception as error:  # the converter's own message names the op it rejects
        if quantize == "none":
            raise
        raise UserInputError(f"the LiteRT converter cannot apply --quantize {quantize} to "
                             f"this model: {_first_lines(error)}") from None
    details = {}
    if quantize == "int8":
        details = _check_int8_litert(artifact)  # reads tensor names: before any strip
        details["float_preprocessing_ops"] = [f"{op} ({tensor})" for op, tensor in kept_float]
    if strip:
        strip_litert_strings(artifact)
    return details


def _export_litert_int8(model, artifact: Path, *, options: dict, per_tensor: bool) -> list:
    """Writes an int8 .tflite: every layer with weights int8, the input preprocessing float32.

    The converter's own two steps, split to pass one argument between them: calibration
    (Keras' LiteRT export with the converter's ``_experimental_calibrate_only``, as LiteRT's
    QuantizationDebugger runs it), then ``mlir_quantize`` with the ops of
    `input_preprocessing_ops` denylisted (LiteRT's selective quantization).

    Returns:
        (op name, output tensor name) of each op left in float32 on purpose.
    """
    # The function the converter (and its QuantizationDebugger) quantizes with; the
    # converter has no attribute that passes a denylist to it.
    from tensorflow.lite.python.convert import mlir_quantize

    model.export(str(artifact), format="litert", verbose=False,
                 _experimental_calibrate_only=True, **options)
    calibrated = artifact.read_bytes()
    kept_float = input_preprocessing_ops(artifact)
    # Quantized, the raw pixels and the per-image standardisation cost 5.80 accuracy points
    # on the default recipe trained 3 epochs (README, Export): int8 steps of about one grey
    # level on the input, and one scale for every image's variance and 1/sqrt, erase a
    # low-contrast image. In float32 they are a few ops on one image.
    artifact.write_bytes(mlir_quantize(
        calibrated, disable_per_channel=per_tensor,
        denylisted_nodes=[tensor for _, tensor in kept_float] or None))
    return kept_float


def input_preprocessing_ops(path: Path) -> list:
    """(op name, output tensor name) of the ops of a float .tflite that precede its weights.

    These are the ops computed from the model's input alone, before any layer with weights
    (tfaccel's models: the 1/255 rescaling and the per-image standardisation, the layers
    `split_preprocessing` moves out); the rest of the graph depends on a weighted op. A
    graph whose output needs no weighted op has no such prefix: the list is empty.
    """
    interpreter = load_litert_interpreter(path)
    names = {t["index"]: t["name"] for t in interpreter.get_tensor_details()}
    operations = interpreter._get_ops_details()  # in execution (topological) order
    produced = {index for op in operations for index in op["outputs"]}
    from_input = {detail["index"] for detail in interpreter.get_input_details()}
    found = []
    for op in operations:
        # Constants are neither produced by an op nor an input; every other input must
        # come from the input through the prefix.
        computed = [index for index in op["inputs"] if index in produced or index in
                    from_input]
        if (op["op_name"] in _WEIGHTED_OPS or not computed
                or not all(index in from_input for index in computed)):
            continue
        from_input.update(op["outputs"])
        # The converter names an op by its (first) output tensor; the denylist matches that.
        found.append((op["op_name"], names[op["outputs"][0]]))
    outputs = {detail["index"] for detail in interpreter.get_output_details()}
    return [] if outputs & from_input else found


def strip_litert_strings(path: Path) -> None:
    """Rewrites a .tflite without tensor names, subgraph names and signatures.

    The LiteRT tools' ``flatbuffer_utils.strip_strings`` (what its strip_strings tool runs),
    from TensorFlow's copy of those tools, which `litert_size_breakdown` reads with too;
    operators, weights and quantization parameters are untouched.
    """
    from tensorflow.lite.tools import flatbuffer_utils

    model = flatbuffer_utils.read_model(str(path))
    flatbuffer_utils.strip_strings(model)
    flatbuffer_utils.write_model(model, str(path))


def _check_int8_litert(artifact: Path) -> dict:
    """Float ops left in a full-integer .tflite: reported, or refused if they hold weights."""
    float_ops = float_operations(artifact)
    # The converter leaves an op without an int8 kernel in float (between DEQUANTIZE and
    # QUANTIZE) without an error, even with TFLITE_BUILTINS_INT8 only. A float op without
    # weights is reported (the input preprocessing is float32 on purpose; a small float
    # island is how LiteRT runs an op it cannot quantize). A layer with weights left in
    # float32 is not an int8 model: refused.
    weighted = [(op, tensor) for op, tensor in float_ops if op in _WEIGHTED_OPS]
    if weighted:
        shown = "; ".join(f"{op} ({tensor})" for op, tensor in weighted[:5])
        raise UserInputError(
            "--quantize int8: the LiteRT converter cannot quantize these layers, which would "
            f"stay float32: {shown}. Replace those layers, or use --quantize dynamic or "
            "float16.")
    return {"integer_only": not float_ops,
            "float_ops": [f"{op} ({tensor})" for op, tensor in float_ops]}


def float_operations(path: Path) -> list:
    """(op name, output tensor name) of every op of a .tflite that computes in float.

    The model's input QUANTIZE and output DEQUANTIZE are allowed.
    """
    interpreter = load_litert_interpreter(path)
    tensors = {t["index"]: t for t in interpreter.get_tensor_details()}
    found = []
    # `_get_ops_details` is the interpreter's op listing (used by LiteRT's own analyzer
    # tools); the public API lists tensors only.
    for op in interpreter._get_ops_details():
        if op["op_name"] in _BOUNDARY_OPS:
            continue
        for index in op["outputs"]:
            tensor = tensors.get(index)
            if tensor is not None and str(tensor["dtype"].__name__).startswith("float"):
                found.append((op["op_name"], tensor["name"]))
                break
    return found


def litert_size_breakdown(path: Path) -> dict:
    """Bytes of a .tflite by kind; the values add up to the file's size.

    Keys: ``constants_<dtype>`` (weight, bias and other constant buffers, by the dtype of
    the tensor that holds them), ``metadata`` (metadata buffers, e.g. the converter's
    CONVERSION_METADATA), ``quantization_parameters`` (a float32 scale and an int64 zero
    point per tensor, or per output channel), ``tensor_names``, and ``structure``: the rest
    (the flatbuffer's tables, offsets, shapes, operators, signatures, alignment padding).
    """
    # TensorFlow's own flatbuffer reader (tensorflow/lite/tools), as the LiteRT tools use.
    from tensorflow.lite.python import schema_py_generated as schema
    from tensorflow.lite.tools import flatbuffer_utils

    model = flatbuffer_utils.read_model(str(path))
    dtypes = {value: name.lower() for name, value in vars(schema.TensorType).items()
              if not name.startswith("_")}
    counts: dict = {}
    seen = set()

    def add(key, n):
        counts[key] = counts.get(key, 0) + int(n)

    for metadata in model.metadata or ():
        seen.add(metadata.buffer)
        add("metadata", _buffer_size(model.buffers[metadata.buffer]))
    for subgraph in model.subgraphs:
        for tensor in subgraph.tensors:
            if tensor.buffer not in seen:
                seen.add(tensor.buffer)
                size = _buffer_size(model.buffers[tensor.buffer])
                if size:
                    add(f"constants_{dtypes.get(tensor.type, tensor.type)}", size)
            quantization = tensor.quantization
            if quantization is not None:
                add("quantization_parameters", sum(
                    width * (0 if values is None else len(values)) for width, values in (
                        (4, quantization.scale), (8, quantization.zeroPoint),
                        (4, quantization.min), (4, quantization.max))))
            add("tensor_names", len(tensor.name or b""))
    counts["structure"] = _size_on_disk(Path(path)) - sum(counts.values())
    return counts


def _buffer_size(buffer) -> int:
    return 0 if buffer.data is None else len(buffer.data)


def _convert_onnx(model, artifact: Path, *, quantize: str, calibration,
                  per_tensor: bool = False) -> dict:
    import numpy as np

    if not model._called:
        # Keras' ONNX exporter refuses a model that was loaded but never called
        # (keras/src/export/onnx.py); one call on zeros builds nothing new.
        shape = [1 if d is None else d for d in model.inputs[0].shape]
        model(np.zeros(shape, "float32"), training=False)
    with warnings.catch_warnings():
        # Keras' bundled tf2onnx patch probes NumPy for the removed `np.object`.
        warnings.filterwarnings("ignore", message=".*np.object", category=FutureWarning)
        if quantize == "none":
            model.export(str(artifact), format="onnx", verbose=False)
            return {}
        float_path = artifact.with_name("float-" + artifact.name)
        model.export(str(float_path), format="onnx", verbose=False)
    from onnxruntime import quantization as ortq

    try:
        if quantize == "dynamic":
            ortq.quantize_dynamic(str(float_path), str(artifact),
                                  weight_type=ortq.QuantType.QInt8)
        else:
            ortq.quantize_static(
                str(float_path), str(artifact),
                _OnnxCalibration(_onnx_input_name(float_path), calibration),
                quant_format=ortq.QuantFormat.QDQ, activation_type=ortq.QuantType.QInt8,
                weight_type=ortq.QuantType.QInt8, per_channel=not per_tensor)
    except Exception as error:
        raise UserInputError(f"ONNX Runtime cannot apply --quantize {quantize} to this model: "
                             f"{_first_lines(error)}") from None
    finally:
        float_path.unlink(missing_ok=True)
    return {}


def _onnx_input_name(path: Path) -> str:
    import onnxruntime as ort

    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]
                                ).get_inputs()[0].name


class _OnnxCalibration:
    """ONNX Runtime's CalibrationDataReader protocol over the calibration examples."""

    def __init__(self, input_name: str, examples):
        self._items = iter([{input_name: example[None]} for example in examples])

    def get_next(self):
        return next(self._items, None)

    def rewind(self):  # not needed for one pass; part of the reader protocol
        pass


def _first_lines(error: BaseException, limit: int = 3) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return " ".join(lines[:limit]) or type(error).__name__


# --------------------------------------------------------------------------- runtimes

_RUNTIME_THREADS = {"litert": 1, "onnx": 1}


@dataclasses.dataclass
class Runtime:
    """An export loaded back with its own runtime: a function of one batch of features."""

    predict: Callable  # float32 features [n, ...] -> class probabilities [n, classes]


def load_litert_interpreter(path: Path, *, num_threads: int = 1):
    """The LiteRT interpreter of the ai-edge-litert package (tf.lite's is deprecated)."""
    from ai_edge_litert.interpreter import Interpreter

    return Interpreter(model_path=str(path), num_threads=num_threads)


def load_runtime(path: Path, *, format: str) -> Runtime:
    """Loads an export with its own runtime (LiteRT, ONNX Runtime, TensorFlow, Keras)."""
    if format == "litert":
        return _litert_runtime(path)
    if format == "onnx":
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = _RUNTIME_THREADS["onnx"]
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        name = session.get_inputs()[0].name
        return Runtime(lambda x: session.run(None, {name: x})[0])
    import tensorflow as tf

    if format == "saved_model":
        loaded = tf.saved_model.load(str(path))
        serve = loaded.signatures["serving_default"]
        key = next(iter(serve.structured_input_signature[1]))
        return Runtime(lambda x: next(iter(serve(**{key: tf.constant(x)}).values())).numpy())
    import keras

    model = keras.saving.load_model(path, compile=False)
    # Compiled like a served model; eager Python overhead would swamp a small model.
    call = tf.function(lambda x: model(x, training=False), reduce_retracing=True)
    return Runtime(lambda x: call(tf.constant(x)).numpy())


def _litert_runtime(path: Path) -> Runtime:
    import numpy as np

    interpreter = load_litert_interpreter(path, num_threads=_RUNTIME_THREADS["litert"])
    source = interpreter.get_input_details()[0]
    target = interpreter.get_output_details()[0]
    state = {"shape": None}

    def predict(x):
        # The whole shape: a sequence model's length is open too (shape_signature -1).
        if state["shape"] != x.shape:
            interpreter.resize_tensor_input(source["index"], list(x.shape))
            interpreter.allocate_tensors()
            state["shape"] = x.shape
        value = x
        scale, zero_point = source["quantization"]
        if np.issubdtype(source["dtype"], np.integer) and scale:
            value = np.round(x / scale + zero_point)
        interpreter.set_tensor(source["index"], value.astype(source["dtype"]))
        interpreter.invoke()
        output = interpreter.get_tensor(target["index"])
        scale, zero_point = target["quantization"]
        if np.issubdtype(target["dtype"], np.integer) and scale:
            output = (output.astype("float32") - zero_point) * scale
        return output

    return Runtime(predict)


def _predict(runtime: Runtime, features, batch: int = 64):
    import numpy as np

    return np.concatenate([np.asarray(runtime.predict(features[i:i + batch]), "float32")
                           for i in range(0, len(features), batch)])


def _latencies(contenders: dict, example, *, runs: int, calls: int) -> dict:
    """Best mean single-example latency (ms) of each contender, alternating them per run."""
    for runtime in contenders.values():
        for _ in range(3):  # warm up: allocation, tracing, first-call caches
            runtime.predict(example)
    best = {name: float("inf") for name in contenders}
    for _ in range(runs):
        for name, runtime in contenders.items():
            started = time.perf_counter()
            for _ in range(calls):
                runtime.predict(example)
            best[name] = min(best[name], (time.perf_counter() - started) / calls * 1e3)
    return best


def _size_on_disk(path: Path) -> int:
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size


def _runtime_name(format: str) -> str:
    return {"litert": "ai_edge_litert.interpreter.Interpreter",
            "onnx": "onnxruntime.InferenceSession (CPUExecutionProvider)",
            "saved_model": "tf.saved_model.load", "keras": "keras.saving.load_model"}[format]


def _package_versions(format: str) -> dict:
    names = {"litert": ("tensorflow", "ai-edge-litert"),
             "onnx": ("tensorflow", "tf2onnx", "onnx", "onnxruntime")}.get(format,
                                                                            ("tensorflow",))
    versions = {}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def format_report(report: dict) -> str:
    """A short table of an export.json report: the export against the float model."""
    def size(n):
        return f"{n / 1024:.1f} KiB" if n < 2**20 else f"{n / 2**20:.2f} MiB"

    title = f"{report['format']} {report['quantize']}"
    rows = [
        ("", title, "float32", "ratio"),
        ("size", size(report["size_bytes"]), size(report["float_size_bytes"]),
         f"{report['size_ratio']:.2f}x smaller" if report["size_ratio"] >= 1
         else f"{1 / report['size_ratio']:.2f}x larger"),
        ("val accuracy", f"{report['accuracy']:.4f}", f"{report['float_accuracy']:.4f}",
         f"{100 * report['accuracy_delta']:+.2f} points"),
        ("top-1 agreement", f"{report['top1_agreement']:.4f}", "", ""),
        ("latency (1 example)", f"{report['latency_ms']:.3f} ms",
         f"{report['float_latency_ms']:.3f} ms", f"speed-up {report['latency_speedup']:.2f}x"),
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip()
             for row in rows]
    lines.append(f"{report['validation_examples']} validation examples; latency: best of "
                 f"{report['latency']['runs']} alternating runs on CPU.")
    kept = report.get("float_preprocessing_ops") or []
    if kept:
        lines.append(f"Kept float32: the {len(kept)} ops before the first layer with weights "
                     "(the input preprocessing; float_preprocessing_ops in export.json). "
                     "Every layer with weights is int8; the model takes model.keras' input.")
    others = [op for op in report.get("float_ops") or [] if op not in kept]
    if others:
        lines.append(f"Note: {len(others)} operation(s) without weights stay float32 (no "
                     f"int8 kernel in the converter): {', '.join(others[:3])}.")
    if report.get("preprocessing") == "outside":
        lines.append(f"Preprocessing outside: both models take what {PREPROCESSING_FILE} "
                     f"({', '.join(report['preprocessing_layers'])}) returns; run it first.")
    if report.get("strip"):
        lines.append("Stripped (both models): no tensor names, signatures or conversion "
                     "metadata; use the interpreter's get_input_details/get_output_details.")
    if report.get("model_epoch"):
        lines.append(f"Exported model.keras of {report['model_epoch']}.")
    lines.append(f"Wrote {report['path']} and {Path(report['out']) / REPORT_FILE}.")
    return "\n".join(lines)
