"""Which module converts each export format and loads it back."""

from __future__ import annotations

from pathlib import Path

from tfaccel.tools.export import format_keras, format_litert, format_onnx, format_saved_model
from tfaccel.tools.export.format_runtime import Runtime
from tfaccel.tools.export.options import ExportOptions


def convert(model, artifact: Path, *, format: str, quantize: str, calibration,
            options: ExportOptions) -> dict:
    """Writes `artifact`; returns details of the quantization for the report."""
    if format == "litert":
        return format_litert.convert(model, artifact, quantize=quantize,
                                     calibration=calibration, per_tensor=options.per_tensor,
                                     strip=options.strip)
    if format == "onnx":
        return format_onnx.convert(model, artifact, quantize=quantize, calibration=calibration,
                                   per_tensor=options.per_tensor)
    if format == "keras":
        return format_keras.convert(model, artifact, quantize=quantize)
    return format_saved_model.convert(model, artifact, quantize=quantize)


def load_runtime(path: Path, *, format: str) -> Runtime:
    """Loads an export with its own runtime (LiteRT, ONNX Runtime, TensorFlow, Keras)."""
    if format == "litert":
        return format_litert.load_runtime(path)
    if format == "onnx":
        return format_onnx.load_runtime(path)
    if format == "saved_model":
        return format_saved_model.load_runtime(path)
    return format_keras.load_runtime(path)
