"""`export(run_dir, format=..., quantize=...)`: a run's model as a deployable file, checked.

The orchestration: the arguments checked, then prepare -> convert -> measure -> report into
a staging folder published at once. One module per format (format_keras, format_saved_model,
format_litert, format_onnx) converts and loads it back.

The package is not `tfaccel/export`: importing `tfaccel.export` would replace the public
function `tfaccel.export` with the module of the same name. The package imports without
TensorFlow (`tfaccel export` checks its arguments before TensorFlow loads, and
`import tfaccel` names `tfaccel.export` lazily): its modules import Keras, TensorFlow,
numpy and the export extras inside the functions that use them.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Optional, Union

from tfaccel import atomic
from tfaccel.errors import UserInputError
from tfaccel.tools.export.agreement import LABELS_FILE, run_labels
from tfaccel.tools.export.formats import convert
from tfaccel.tools.export.measure import measure
from tfaccel.tools.export.options import (
    ARTIFACT_NAMES,
    DEFAULT_CALIBRATION_EXAMPLES,
    FORMATS,
    PREPROCESSING_FILE,
    QUANTIZE_MODES,
    REPORT_FILE,
    SUPPORTED,
    ExportOptions,
    check_arguments,
    check_dependencies,
    check_out_is_free,
    default_out,
)
from tfaccel.tools.export.prepare import prepare
from tfaccel.tools.export.report import format_report, make_report
from tfaccel.tools.export.text_runs import check_text_export, is_text_run, text_tokenizer
from tfaccel.tools.native_output import native_output_kept
from tfaccel.training.run_dir import run_files

# The package's public face: what the CLI and `tfaccel.export` callers use.
__all__ = ["export", "check_arguments", "check_dependencies", "check_out_is_free",
           "default_out", "format_report", "FORMATS", "QUANTIZE_MODES", "SUPPORTED"]


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
        # What the outputs mean, beside the model whatever its format: the task, the class
        # names in output order (or the labels', the targets'), the output width.
        run_files.write_json(staging / LABELS_FILE, run_labels(directory))
        report["labels_path"] = str(target / LABELS_FILE)
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


def _staging_dir(target: Path) -> Path:
    """A new hidden folder beside `target`, renamed to it once everything is written."""
    check_out_is_free(target)  # again: another export may have taken it meanwhile
    try:
        return atomic.new_staging_folder(target)
    except OSError as error:
        raise UserInputError(f"cannot create --out {str(target)!r}: "
                             f"{error.strerror or error} ({error.filename or target.parent!r})"
                             ".") from None


def _export_into(staging: Path, *, directory: Path, format: str, quantize: str,
                 options: ExportOptions, calibration_examples: int,
                 validation_examples: Optional[int], latency_runs: int,
                 latency_calls: int) -> dict:
    """Exports into `staging`: prepare -> convert -> measure -> report.

    What the converters and runtimes print (LiteRT's "fully_quantize: 0 ..." and XNNPACK
    lines, ONNX Runtime's advice) is kept out of the way: shown with --verbose, or with the
    error when a step fails.
    """
    with native_output_kept("the converters and runtimes"):
        prepared = prepare(staging, directory=directory, format=format, quantize=quantize,
                           options=options, calibration_examples=calibration_examples,
                           validation_examples=validation_examples)
        artifact = staging / ARTIFACT_NAMES[format]
        prepared.details.update(convert(prepared.model, artifact, format=format,
                                        quantize=quantize, calibration=prepared.calibration,
                                        options=options))
        measured = measure(artifact, prepared, staging=staging, format=format,
                           quantize=quantize, options=options, latency_runs=latency_runs,
                           latency_calls=latency_calls)
    return make_report(prepared, measured, directory=directory, format=format,
                       quantize=quantize, latency_runs=latency_runs,
                       latency_calls=latency_calls)
