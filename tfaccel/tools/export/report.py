"""The export's report (export.json) and its short table."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

from tfaccel.tools.export.agreement import LABELS_FILE, figure_rows, figures, run_labels
from tfaccel.tools.export.format_runtime import RUNTIME_THREADS
from tfaccel.tools.export.measure import Measured
from tfaccel.tools.export.options import PREPROCESSING_FILE, REPORT_FILE
from tfaccel.tools.export.prepare import Prepared


def make_report(prepared: Prepared, measured: Measured, *, directory: Path, format: str,
                quantize: str, latency_runs: int, latency_calls: int) -> dict:
    """The export's report (export.json): size, the task's figures (`agreement.figures`:
    accuracy and top-1 agreement, or a regression's error against the float model) and
    latency against float."""
    # Deferred: Keras and TensorFlow (seconds); tools/export imports TF-free.
    import keras

    predictions, latencies, sizes = measured.predictions, measured.latencies, measured.sizes
    float_name = "float" if "float" in predictions else "export"
    labels = run_labels(directory)
    calibration = prepared.calibration
    return {
        "format": format,
        "quantize": quantize,
        "task": labels["task"],
        "size_bytes": sizes["export"],
        "float_size_bytes": sizes["float"],
        "size_ratio": sizes["float"] / sizes["export"],
        **figures(labels["task"], predictions, prepared.y_val),
        "latency_ms": latencies["export"],
        "float_latency_ms": latencies[float_name],
        "latency_speedup": latencies[float_name] / latencies["export"],
        "validation_examples": int(len(prepared.y_val)),
        "calibration_examples": None if calibration is None else int(len(calibration)),
        "latency": {"batch": 1, "runs": latency_runs, "calls_per_run": latency_calls,
                    "statistic": "best run's mean per call, float and export alternated",
                    "threads": RUNTIME_THREADS.get(format, "tensorflow default")},
        "runtime": _runtime_name(format),
        "run_dir": str(directory),
        "versions": {"keras": keras.__version__, **_package_versions(format)},
        **prepared.details,
        **measured.details,
    }


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
        *figure_rows(report),
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
    lines.append(f"Wrote {report['path']}, {Path(report['out']) / LABELS_FILE} (the task and "
                 f"its class names) and {Path(report['out']) / REPORT_FILE}.")
    return "\n".join(lines)
