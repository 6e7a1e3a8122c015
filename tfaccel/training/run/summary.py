"""What a run leaves at the end, whatever its strategy: THE summary.json (typed, one writer)
and the short text printed."""

from __future__ import annotations

import dataclasses
import platform
import time
from pathlib import Path
from typing import Optional

import keras
import tensorflow as tf

from tfaccel._version import __version__
from tfaccel.config.batching import BatchPlan
from tfaccel.training.fit_callbacks.throughput import THROUGHPUT_KEYS, available_cores
from tfaccel.training.keras_objects.losses import logged_metric_names
from tfaccel.training.model_setup.inputs import TrainData
from tfaccel.training.run.context import Decisions, RunContext
from tfaccel.training.run_dir import run_files


@dataclasses.dataclass(frozen=True)
class RunResult:
    """What a finished run leaves: its directory, its summary and per-epoch metrics."""

    run_dir: Optional[Path]
    summary: dict
    epochs: list
    # False on the other workers of a multi-worker run: the chief wrote the run directory.
    chief: bool = True

    def summary_text(self) -> str:
        """A short human summary: the kept epoch's metrics, which epoch model.keras holds
        and why, the last epoch's metrics when it is another, examples/s, wall time."""
        summary = self.summary
        kept = summary.get("saved_model_metrics") or summary.get("final_metrics", {})
        names = run_files.metric_names(summary)
        parts = [_metrics_text(kept, names) + " (" + _kept_text(summary) + ")"]
        last = summary.get("epochs_completed")
        if summary.get("saved_model_epoch") not in (None, last):
            parts.append(f"last epoch {last}: "
                         + _metrics_text(summary.get("final_metrics", {}), names))
        parts.append(f"{summary['examples_per_sec']:.0f} examples/s, "
                     f"wall {summary['wall_seconds']:.1f} s")
        text = "Done: " + "; ".join(parts)
        if not self.chief:
            where = f": {self.run_dir}" if self.run_dir is not None else ""
            return text + f"\nThe chief (worker 0) wrote the run directory{where}."
        return text + f"\nRun directory: {self.run_dir}"


def _metrics_text(metrics: dict, names: list) -> str:
    """The figures the Done line shows: each metric on validation, the first one on
    training, then the losses (classification: val_accuracy, accuracy, val_loss, loss;
    regression: val_mae, val_rmse, mae, val_loss, loss)."""
    keys = [f"val_{n}" for n in names] + names[:1] + ["val_loss", "loss"]
    return ", ".join(f"{key} {metrics[key]:.4f}" for key in keys
                     if isinstance(metrics.get(key), (int, float)))


def _kept_text(summary: dict) -> str:
    """Which epoch model.keras holds, and the best epoch by the monitor when it is another."""
    saved, last = summary.get("saved_model_epoch"), summary.get("epochs_completed")
    monitor, best = summary.get("monitor", "val_loss"), summary.get("best_epoch")
    if summary.get("keep") == "best":
        if saved == last:
            return (f"epoch {saved} of {last}, the best by {monitor} and the last, kept in "
                    "model.keras")
        return f"best by {monitor}: epoch {saved} of {last}, kept in model.keras"
    text = f"last epoch {saved} of {last}, kept in model.keras"
    if summary.get("keep_note"):
        return f"{text}: {summary['keep_note']}"
    if best is not None and best != saved:
        text += (f"; best by {monitor}: epoch {best}, {monitor} "
                 f"{summary['best_value']:.4f}")
    return text


@dataclasses.dataclass(frozen=True)
class RunSummary:
    """summary.json, typed: what every run leaves, whatever its strategy.

    Written by `write_summary` only. Fields whose value is None under "omitted when None"
    (`_OPTIONAL`) are left out of the file, as a run that has no such thing has no key;
    `plan` and `throughput` are spread into the top level (replicas, accumulation steps,
    batch sizes; steps per second, input wait, CPU use, peak memory).
    """

    status: str  # completed | failed | preempted | interrupted
    name: str
    task: Optional[str]
    metric_names: list
    epochs_completed: int
    final_metrics: dict
    saved_model_epoch: Optional[int]  # model.keras: the best epoch's weights or the last's
    saved_model_metrics: dict
    keep: str
    monitor: str
    best_epoch: Optional[int]
    best_value: Optional[float]
    examples_per_sec: float
    first_epoch_examples_per_sec: float
    throughput: dict
    cpu_cores_available: int
    wall_seconds: float
    fit_seconds: float
    devices: list
    strategy: Optional[str]
    workers: int
    precision: str
    plan: dict
    steps_per_epoch: int
    jit_compile: object
    steps_per_execution: int
    threads: dict
    dataset: dict
    class_names: list
    model: Optional[dict]  # where the model came from (model_source.json holds the same)
    versions: dict
    keep_note: Optional[str] = None
    pipeline: Optional[dict] = None
    precision_choice: Optional[dict] = None
    steps_per_execution_choice: Optional[dict] = None
    # training.micro_batch_size auto: each retry after running out of memory, in order.
    micro_batch_retries: Optional[list] = None
    # parameter_server: THE step count (closures the coordinator saw complete), Keras'
    # own counter beside it, the servers, the loop's training seconds.
    steps_completed: Optional[int] = None
    optimizer_iterations: Optional[int] = None
    parameter_servers: Optional[int] = None
    train_seconds: Optional[float] = None
    # Where the wall time went: `PhaseTimes.as_dict()` (`tfaccel train --timings`).
    timings: Optional[dict] = None
    # A run that did not complete.
    failure: Optional[dict] = None
    checkpoint: Optional[str] = None

    def as_dict(self) -> dict:
        """The JSON object of summary.json."""
        out = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name in ("plan", "throughput"):
                out.update(value)
            elif value is not None or field.name not in _OPTIONAL:
                out[field.name] = value
        return out


_OPTIONAL = frozenset(f.name for f in dataclasses.fields(RunSummary)
                      if f.default is None)


def write_summary(directory: Path, summary: RunSummary) -> dict:
    """THE writer of summary.json (atomically); its JSON object, as `RunResult` holds it."""
    payload = summary.as_dict()
    run_files.write_json(Path(directory) / run_files.SUMMARY_FILE, payload)
    return payload


def run_summary(ctx: RunContext, *, decisions: Decisions, epochs: list, plan: BatchPlan,
                data: TrainData, fit_seconds: float, best=None,
                status: str = "completed") -> RunSummary:
    """The summary of a run: what it kept and why, its metrics, speed and settings."""
    def metrics_of(record: dict) -> dict:
        return {k: v for k, v in record.items()
                if k not in ("epoch", "step", "examples", "examples_per_sec", "train_seconds",
                             "epoch_seconds", "non_finite_loss",
                             "loss_scale_skipped_steps") + THROUGHPUT_KEYS}

    final_metrics = metrics_of(epochs[-1]) if epochs else {}
    saved_epoch = len(epochs) or None
    kept_best = best is not None and best.restore_best_weights and best.best_weights is not None
    if kept_best:
        saved_epoch = best.best_epoch + 1  # Keras' epochs count from 0
    judged = best is not None and best.best is not None
    saved_metrics = next((metrics_of(e) for e in epochs if e["epoch"] == saved_epoch), {})
    # The first epoch includes tracing and compilation; report steady state when there is one.
    steady = epochs[1:] if len(epochs) > 1 else epochs
    train_seconds = sum(e["train_seconds"] for e in steady)
    examples = sum(e["examples"] for e in steady)
    recipe, session = ctx.recipe, ctx.session
    return RunSummary(
        status=status,
        name=recipe.name,
        # What the labels asked for, and the metrics logged for it beside the loss.
        task=data.info.task,
        metric_names=_metric_names(recipe.training, data.info, final_metrics),
        epochs_completed=len(epochs),
        final_metrics=final_metrics,
        saved_model_epoch=saved_epoch,
        saved_model_metrics=saved_metrics,
        keep="best" if kept_best else "last",
        keep_note=decisions.keep_note,
        monitor=recipe.training.monitor,
        best_epoch=best.best_epoch + 1 if judged else None,
        best_value=float(best.best) if judged else None,
        examples_per_sec=examples / train_seconds if train_seconds else 0.0,
        first_epoch_examples_per_sec=epochs[0]["examples_per_sec"] if epochs else 0.0,
        throughput=_throughput_summary(steady, epochs),
        cpu_cores_available=available_cores(),
        wall_seconds=time.perf_counter() - ctx.started,
        fit_seconds=fit_seconds,
        devices=session.strategy_info.get("devices", []),
        strategy=session.strategy_info.get("strategy"),
        pipeline=decisions.pipeline,
        workers=ctx.role.count,
        precision=session.precision,
        precision_choice=session.precision_choice,
        # Replicas, accumulation steps, global/per-replica/micro batch: those in force at
        # the end (micro_batch_size auto may have made the micro-batch smaller).
        plan=(decisions.plan or plan).as_dict(),
        micro_batch_retries=[dict(r) for r in decisions.micro_batch_retries] or None,
        steps_per_epoch=data.steps_per_epoch,
        jit_compile=recipe.training.jit_compile,
        # The steps per call in force at the end (`auto`'s choice, and why, beside it).
        steps_per_execution=decisions.steps_per_execution,
        steps_per_execution_choice=decisions.execution_choice.as_dict()
        if decisions.execution_choice is not None else None,
        threads=session.threads,
        dataset=data.info.summary(),
        class_names=list(data.info.class_names or []),
        model=ctx.model_source,
        versions={"tfaccel": __version__, "tensorflow": tf.__version__,
                  "keras": keras.__version__, "python": platform.python_version()},
    )


def _metric_names(training, info, final_metrics: dict) -> list:
    """The logged metrics in the recipe's (or the task's) order; Keras' logs may sort them."""
    logged = [k for k in final_metrics if k != "loss" and not k.startswith("val_")]
    ordered = logged_metric_names(training, task=info.task,
                                  num_outputs=info.num_outputs or info.num_classes)
    return [n for n in ordered if n in logged] + [n for n in logged if n not in ordered]


def _throughput_summary(steady: list, epochs: list) -> dict:
    """Steady-state throughput figures: means over the epochs after the first, peaks over all."""
    out = {}
    for key in THROUGHPUT_KEYS:
        if key.startswith("peak_"):
            values = [e[key] for e in epochs if e.get(key) is not None]
            if values:
                out[key] = max(values)
            continue
        values = [e[key] for e in steady if e.get(key) is not None]
        if key == "input_wait_fraction" or values:
            out[key] = sum(values) / len(values) if values else None
    return out
