"""How close an export is to its float model, and to the labels, by the run's task."""

from __future__ import annotations

import json
from pathlib import Path

from tfaccel.training.run_dir import run_files

# Written beside every export: what the model's outputs mean (task, classes or names).
LABELS_FILE = "labels.json"
# Each output of a task's model, for the labels file.
_OUTPUTS = {
    "classification": "one probability per class, in the order of class_names",
    "binary": "one probability: of the second class of class_names",
    "multi_label": "one probability per label, in the order of class_names",
    "regression": "one value per target, in the order of class_names (target names) when "
                  "given",
}


def run_labels(directory: Path) -> dict:
    """The run's task, output width and class names as its summary.json recorded them.

    A run written before tasks (no ``task``) is a classification run.
    """
    path = directory / run_files.SUMMARY_FILE
    summary = json.loads(path.read_text()) if path.is_file() else {}
    task = summary.get("task") or "classification"
    names = summary.get("class_names") or None
    outputs = (summary.get("dataset") or {}).get("num_outputs")
    return {"task": task, "num_outputs": outputs, "class_names": names,
            "outputs": _OUTPUTS.get(task, _OUTPUTS["classification"])}


def figures(task: str, predictions: dict, labels) -> dict:
    """The export against the labels and against the float model (``predictions["float"]``,
    or the export itself for an unquantized export), by task.

    classification: accuracy and top-1 agreement; binary: accuracy at 0.5 and decision
    agreement; multi_label: per-label (binary) accuracy and per-label agreement; regression:
    the mean absolute error and the largest and mean differences from the float model,
    also relative to the targets' scale (their standard deviation), since a difference
    means nothing without the unit of the targets.
    """
    # Deferred: numpy (~0.1 s); tools/export imports TF-free.
    import numpy as np

    export = predictions["export"]
    reference = predictions["float" if "float" in predictions else "export"]
    labels = np.asarray(labels)
    difference = np.abs(export - reference)
    if task == "regression":
        targets = labels.reshape(export.shape).astype("float64")
        scale = float(np.std(targets)) or 1.0
        mae = float(np.mean(np.abs(export - targets)))
        float_mae = float(np.mean(np.abs(reference - targets)))
        return {"mae": mae, "float_mae": float_mae, "mae_delta": mae - float_mae,
                "max_abs_diff": float(np.max(difference)),
                "mean_abs_diff": float(np.mean(difference)), "target_scale": scale,
                "relative_max_abs_diff": float(np.max(difference)) / scale,
                "relative_mean_abs_diff": float(np.mean(difference)) / scale}
    if task in ("binary", "multi_label"):
        truth = labels.reshape(export.shape) >= 0.5
        decided, float_decided = export >= 0.5, reference >= 0.5
        accuracy = float(np.mean(decided == truth))
        float_accuracy = float(np.mean(float_decided == truth))
        key = "accuracy" if task == "binary" else "binary_accuracy"
        out = {key: accuracy, f"float_{key}": float_accuracy,
               f"{key}_delta": accuracy - float_accuracy,
               "agreement": float(np.mean(decided == float_decided)),
               "max_abs_prob_diff": float(np.max(difference))}
        if task == "multi_label":
            out["per_label_agreement"] = [float(a) for a in
                                          np.mean(decided == float_decided, axis=0)]
        return out
    classes = np.argmax(labels, axis=-1) if labels.ndim > 1 else labels.astype("int64")
    top1 = np.argmax(export, axis=-1)
    float_top1 = np.argmax(reference, axis=-1)
    accuracy = float(np.mean(top1 == classes))
    float_accuracy = float(np.mean(float_top1 == classes))
    return {"accuracy": accuracy, "float_accuracy": float_accuracy,
            "accuracy_delta": accuracy - float_accuracy,
            "top1_agreement": float(np.mean(top1 == float_top1)),
            "max_abs_prob_diff": float(np.max(difference))}


def figure_rows(report: dict) -> list:
    """The report table's rows of the task's figures: (name, export, float, change)."""
    task = report.get("task", "classification")
    if task == "regression":
        scale = report["target_scale"]
        return [("val MAE", f"{report['mae']:.4g}", f"{report['float_mae']:.4g}",
                 f"{report['mae_delta']:+.3g}"),
                ("max |export - float|", f"{report['max_abs_diff']:.3g}", "",
                 f"{100 * report['relative_max_abs_diff']:.3f}% of the targets' std "
                 f"{scale:.3g}")]
    if task in ("binary", "multi_label"):
        key = "accuracy" if task == "binary" else "binary_accuracy"
        label = "val accuracy" if task == "binary" else "val per-label accuracy"
        return [(label, f"{report[key]:.4f}", f"{report['float_' + key]:.4f}",
                 f"{100 * report[key + '_delta']:+.2f} points"),
                ("decision agreement", f"{report['agreement']:.4f}", "", "")]
    return [("val accuracy", f"{report['accuracy']:.4f}", f"{report['float_accuracy']:.4f}",
             f"{100 * report['accuracy_delta']:+.2f} points"),
            ("top-1 agreement", f"{report['top1_agreement']:.4f}", "", "")]
