"""The run directory: one new folder per run, never clobbering an existing one."""

from __future__ import annotations

import datetime
import json
import os
import re
from pathlib import Path
from typing import Any, Optional

from tfaccel import atomic
from tfaccel.errors import UserInputError

RECIPE_FILE = "recipe.yaml"
METRICS_FILE = "metrics.jsonl"
SUMMARY_FILE = "summary.json"
MODEL_FILE = "model.keras"
CHECKPOINTS_DIR = "checkpoints"
TENSORBOARD_DIR = "tensorboard"
# The policy `runtime.precision: auto` chose and why, written when the run starts: a resume
# keeps it (a measured choice could differ another day, and the resume must stay exact).
PRECISION_FILE = "precision.json"


def create_run_dir(*, name: str, runs_dir: str, run_dir: Optional[str] = None) -> Path:
    """Creates the folder for a new run.

    Args:
        name: The recipe's name; prefixes the generated folder name.
        runs_dir: Parent folder of generated run directories.
        run_dir: An explicit folder; it must not exist yet, or be empty.

    Returns:
        The created, empty run directory.

    Raises:
        UserInputError: `run_dir` exists and is not an empty folder.
    """
    if run_dir is not None:
        path = Path(run_dir)
        if path.exists() and (not path.is_dir() or any(path.iterdir())):
            raise UserInputError(
                f"--run-dir {str(path)!r} already exists and is not an empty folder; tfaccel "
                "never overwrites a run. Choose a new folder or remove that one.")
        path.mkdir(parents=True, exist_ok=True)
        return path
    safe_name = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "run"
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    parent = Path(runs_dir)
    parent.mkdir(parents=True, exist_ok=True)
    for attempt in range(1000):
        suffix = "" if attempt == 0 else f"-{attempt}"
        path = parent / f"{safe_name}-{stamp}{suffix}"
        try:
            path.mkdir()  # atomic: two runs started in the same second get different folders
            return path
        except FileExistsError:
            continue
    raise UserInputError(f"could not create a new run directory under {str(parent)!r}.")


def write_text(path: Path, text: str) -> None:
    """Writes a file atomically (`tfaccel.atomic.write_file`): a reader never sees half."""
    atomic.write_file(path, text)


def write_json(path: Path, payload: Any) -> None:
    """Writes JSON atomically (see `write_text`)."""
    write_text(path, json.dumps(payload, indent=2, sort_keys=False, default=str) + "\n")


def write_jsonl(path: Path, records) -> None:
    """Writes metrics.jsonl anew, atomically: one JSON object per line (a resume rewrites
    it to what its checkpoint knew, so an epoch trained again is not listed twice)."""
    write_text(path, "".join(json.dumps(r, default=float) + "\n" for r in records))


def append_jsonl(path: Path, record: dict) -> None:
    """Appends one JSON object as a line and flushes it, so a crash loses no epoch."""
    with path.open("a", encoding="utf-8") as stream:
        stream.write(json.dumps(record, default=float) + "\n")
        stream.flush()
        os.fsync(stream.fileno())


def check_resume_target(*, run_dir, resume) -> None:
    """THE rule of where a run writes: a resumed run continues in its own directory.

    `tfaccel train`, `tfaccel launch -- train` and `tfaccel.train` all ask here.

    Raises:
        UserInputError: Both a run directory and a run to resume were given.
    """
    if resume is not None and run_dir is not None:
        raise UserInputError(
            f"--resume ({str(resume)!r}) continues a run in its own directory; --run-dir "
            f"({str(run_dir)!r}) cannot be combined with it.")


def kept_epoch(summary: dict) -> Optional[str]:
    """Which epoch a run's model.keras holds, as its summary.json says, or None if unknown.

    ``"epoch 6 of 10 (best by val_loss)"`` or ``"epoch 10 of 10 (last)"``; a run written
    before `training.keep` that holds another epoch than the last held early stopping's
    best by val_loss.
    """
    saved, last = summary.get("saved_model_epoch"), summary.get("epochs_completed")
    if saved is None:
        return None
    best = summary.get("keep") == "best" or saved != last
    why = f"best by {summary.get('monitor', 'val_loss')}" if best else "last"
    return f"epoch {saved} of {last} ({why})"


def recorded_precision(directory: Path) -> Optional[str]:
    """The policy `precision.json` in a run directory names, or None (no file, unreadable:
    a run from before it was written)."""

    try:
        policy = json.loads((Path(directory) / PRECISION_FILE).read_text()).get("policy")
    except (OSError, ValueError, AttributeError):
        return None
    return policy if isinstance(policy, str) else None


def metric_names(summary: dict) -> list:
    """The metrics a run logged beside its loss, in the recipe's order (without ``val_``): its
    task's (accuracy; accuracy and auc; binary_accuracy and auc; mae and rmse) or the
    recipe's. summary.json records them; an older summary's are read from its figures."""
    if summary.get("metric_names") is not None:
        return list(summary["metric_names"])
    final = summary.get("final_metrics") or {}
    return [k for k in final if k != "loss" and not k.startswith("val_")]
