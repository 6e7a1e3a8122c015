"""`tfaccel compare`: several run directories side by side, as a table and a PNG of curves."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Optional, Sequence

import yaml

from tfaccel.config.recipe import flatten_recipe
from tfaccel.errors import UserInputError
from tfaccel.training.run_dir import data_source, model_source, run_files

SPEED_KEYS = ("examples_per_sec", "input_wait_fraction", "step_time_ms", "wall_seconds")
# Settings that say where a run was written, not how it was trained.
IGNORED_SETTINGS = ("runtime.runs_dir", "runtime.verbose", "runtime.tensorboard")
PLOT_HINT = "For a PNG of the curves: pip install 'tfaccel[plot]' (matplotlib)."


@dataclasses.dataclass(frozen=True)
class Run:
    """What a run directory holds: its name, settings, summary and per-epoch records."""

    name: str
    path: Path
    settings: dict
    summary: dict
    epochs: list


def load_run(path) -> Run:
    """Reads one run directory (recipe.yaml, summary.json, metrics.jsonl, and the model's
    and data's sources: model_source.json, data_source.json).

    Raises:
        UserInputError: It is not a run directory, or its files cannot be read.
    """
    path = Path(path)
    recipe_file = path / run_files.RECIPE_FILE
    if not recipe_file.is_file():
        raise UserInputError(f"RUN_DIR {str(path)!r} is not a tfaccel run directory (no "
                             f"{run_files.RECIPE_FILE}); give folders that `tfaccel train` "
                             "wrote.")
    try:
        raw = yaml.safe_load(recipe_file.read_text()) or {}
        if not isinstance(raw, dict):
            raise ValueError(f"{run_files.RECIPE_FILE} is not a mapping")
        settings = flatten_recipe(raw)
        summary_file = path / run_files.SUMMARY_FILE
        summary = json.loads(summary_file.read_text()) if summary_file.is_file() else {}
        metrics_file = path / run_files.METRICS_FILE
        epochs = [json.loads(line) for line in metrics_file.read_text().splitlines()
                  if line.strip()] if metrics_file.is_file() else []
    except (OSError, ValueError, yaml.YAMLError) as error:
        raise UserInputError(f"cannot read run directory {str(path)!r}: {error}") from None
    for key in ("precision", "strategy", "replicas"):
        if key in summary:
            settings[f"(resolved) {key}"] = summary[key]
    settings.update(_sources(path))
    return Run(name=path.name, path=path, settings=settings, summary=summary, epochs=epochs)


def _sources(path: Path) -> dict:
    """The code and data a run read, as rows: an own model's file and digest
    (model_source.json), each input path's fingerprint (data_source.json). The recipe's
    settings alone do not tell two runs apart whose model module or data files changed."""
    rows = {}
    model = model_source.read(path) or {}
    if model.get("sha256") or model.get("weights_sha256"):
        where = model.get("file") or model.get("path") or model.get("name")
        digest = model.get("sha256") or model.get("weights_sha256")
        rows["(model source)"] = f"{where} sha256 {digest[:12]}"
    for key, found in ((data_source.read(path) or {}).get("paths") or {}).items():
        if found.get("sha256"):
            size = (f"{found['files']} file(s), {found['bytes']:,} bytes, "
                    if "files" in found else "")
            rows[f"(data source) {key}"] = f"{size}sha256 {found['sha256'][:12]}"
    return rows


def differing_settings(runs: Sequence[Run]) -> list:
    """The setting names whose values are not the same in every run, in recipe order."""
    names = []
    for run in runs:
        names += [n for n in run.settings if n not in names]
    return [n for n in names if n not in IGNORED_SETTINGS
            and len({json.dumps(r.settings.get(n), sort_keys=True, default=str)
                     for r in runs}) > 1]


def format_table(runs: Sequence[Run]) -> str:
    """A Markdown table: differing settings, final metrics (and the kept epoch's when a run
    keeps another than the last) and throughput, one column a run."""
    header = "| | " + " | ".join(r.name for r in runs) + " |"
    lines = [header, "|---" * (len(runs) + 1) + "|"]

    def row(label, values):
        lines.append(f"| {label} | " + " | ".join(values) + " |")

    differing = differing_settings(runs)
    for name in differing:
        row(name, [_show(r.settings.get(name)) for r in runs])
    if not differing:
        row("(settings)", ["identical"] * len(runs))
    if any(r.summary.get("task") for r in runs):
        row("task", [_show(r.summary.get("task")) for r in runs])
    keys = result_keys(runs)
    for key in keys:
        values = [r.summary.get("final_metrics", {}).get(key) for r in runs]
        if any(v is not None for v in values):
            row(f"final {key}", [_number(v, 4) for v in values])
    row("epochs", [_show(r.summary.get("epochs_completed", len(r.epochs))) for r in runs])
    if any(_kept_elsewhere(r.summary) for r in runs):
        # model.keras holds another epoch than the last in some run (training.keep: best):
        # the metrics of what each run keeps, beside the final ones.
        row("model.keras holds", [run_files.kept_epoch(r.summary) or "-" for r in runs])
        for key in keys:
            values = [(r.summary.get("saved_model_metrics") or {}).get(key) for r in runs]
            if any(v is not None for v in values):
                row(f"kept {key}", [_number(v, 4) for v in values])
    for key in SPEED_KEYS:
        values = [r.summary.get(key) for r in runs]
        if any(v is not None for v in values):
            digits = 3 if key == "input_wait_fraction" else 1
            row(key, [_number(v, digits) for v in values])
    return "\n".join(lines)


def result_keys(runs: Sequence[Run]) -> list:
    """The final figures the table shows: loss and each logged metric, then their val_
    twins, over every run (a regression run's mae and rmse beside a classifier's accuracy)."""
    names = []
    for run in runs:
        names += [n for n in run_files.metric_names(run.summary) if n not in names]
    return ["loss", *names, "val_loss", *(f"val_{n}" for n in names)]


def _kept_elsewhere(summary: dict) -> bool:
    return summary.get("saved_model_epoch") not in (None, summary.get("epochs_completed"))


def _show(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, (dict, list)):
        return json.dumps(value, default=str).replace("|", "/")
    return str(value)


def _number(value, digits: int) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def plot_runs(runs: Sequence[Run], path) -> dict:
    """Writes a PNG of every run's loss, accuracy and examples/s per epoch.

    Training curves are solid, validation curves dashed, one colour a run.

    Returns:
        ``{panel title: number of curves}`` as drawn (before saving).

    Raises:
        ImportError: matplotlib is not installed (the `tfaccel[plot]` extra).
    """
    # Deferred: matplotlib (the optional plot extra), for the PNG only.
    import matplotlib

    matplotlib.use("Agg")  # no display needed; files only
    # Deferred: matplotlib (the optional plot extra), for the PNG only.
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    # The second panel: the runs' first metric (accuracy, or mae for regression runs).
    first = next((names[0] for names in map(run_files.metric_names, (r.summary for r in runs))
                  if names), "accuracy")
    panels = (("loss", ("loss", "val_loss")), (first, (first, f"val_{first}")),
              ("examples/s", ("examples_per_sec",)))
    figure, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4))
    drawn = {}
    for axis, (title, keys) in zip(axes, panels):
        for index, run in enumerate(runs):
            colour = f"C{index % 10}"
            for key in keys:
                points = [(e["epoch"], e[key]) for e in run.epochs if e.get(key) is not None]
                if not points:
                    continue
                xs, ys = zip(*points)
                axis.plot(xs, ys, color=colour, marker="o", markersize=3,
                          linestyle="--" if key.startswith("val_") else "-",
                          label=f"{run.name} {key}")
        axis.set_title(title)
        axis.set_xlabel("epoch")
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))
        axis.grid(alpha=0.3)
        if axis.lines:
            axis.legend(fontsize=7)
        drawn[title] = len(axis.lines)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return drawn


def compare(run_dirs: Sequence, *, plot_path: Optional[str] = "compare.png") -> dict:
    """Loads the runs, builds the table and (with matplotlib) the PNG.

    Returns:
        ``{"table": str, "plot": path or None, "curves": {...} or None, "note": str or None}``.
    """
    if len(run_dirs) < 1:
        raise UserInputError("compare needs at least one RUN_DIR.")
    runs = [load_run(d) for d in run_dirs]
    names = [r.name for r in runs]
    if len(set(names)) < len(names):  # same folder name under different parents
        runs = [dataclasses.replace(r, name=str(r.path)) for r in runs]
    result = {"table": format_table(runs), "plot": None, "curves": None, "note": None}
    if plot_path:
        try:
            result["curves"] = plot_runs(runs, plot_path)
            result["plot"] = str(plot_path)
        except ImportError:
            result["note"] = PLOT_HINT
    return result
