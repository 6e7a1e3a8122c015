"""What an export is asked for: formats, modes and options checked without TensorFlow, and the
folder it goes to."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
from pathlib import Path
from typing import Union

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


@dataclasses.dataclass(frozen=True)
class ExportOptions:
    """How the model is cut and encoded; the float file compared with gets the same cut and
    the same `strip`, so that sizes and accuracies compare like for like."""

    preprocessing: str = "inside"
    per_tensor: bool = False
    strip: bool = False
