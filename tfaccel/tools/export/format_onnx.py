"""ONNX (.onnx): Keras' ONNX export, ONNX Runtime's quantizers, and the ONNX Runtime session."""

from __future__ import annotations

import warnings
from pathlib import Path

from tfaccel.errors import UserInputError
from tfaccel.tools.export.format_runtime import RUNTIME_THREADS, Runtime, first_lines


def convert(model, artifact: Path, *, quantize: str, calibration,
            per_tensor: bool = False) -> dict:
    """Writes `model` as a .onnx with Keras, quantized by ONNX Runtime if asked."""
    # Deferred: numpy (~0.1 s); tools/export imports TF-free.
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
    # Deferred: onnxruntime (the export extra); tools/export imports TF-free.
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
                             f"{first_lines(error)}") from None
    finally:
        float_path.unlink(missing_ok=True)
    return {}


def _onnx_input_name(path: Path) -> str:
    # Deferred: onnxruntime (the export extra); tools/export imports TF-free.
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


def load_runtime(path: Path) -> Runtime:
    """Loads a .onnx file with an ONNX Runtime session on the CPU."""
    # Deferred: onnxruntime (the export extra); tools/export imports TF-free.
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = RUNTIME_THREADS["onnx"]
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    return Runtime(lambda x: session.run(None, {name: x})[0])
