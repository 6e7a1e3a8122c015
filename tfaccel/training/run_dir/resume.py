"""Resuming a run in place: which recipe, which checkpoint, one process at a time (no TF)."""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
from pathlib import Path
from typing import Optional, Sequence

from tfaccel.config.recipe import Recipe, flatten_recipe, load_recipe, recipe_to_dict
from tfaccel.errors import UserInputError
from tfaccel.messages import say
from tfaccel.training.run_dir import checkpoints as ckpt
from tfaccel.training.run_dir import run_files

# The one key a resume may change: more epochs extend a run. Anything else would make the
# continued run a different experiment than the one its checkpoints belong to.
EXTENSIBLE_KEYS = ("training.epochs",)
# How the run shows its progress is no part of the experiment (runs before it could be
# left empty saved `verbose: 1`).
PRESENTATION_KEYS = ("runtime.verbose",)
LOCK_FILE = ".lock"


class RunLock:
    """An exclusive lock on a run directory, held while a process trains in it.

    Uses `fcntl.flock`, so the lock disappears with the process however it ends (kill -9
    included): a stale lock file never blocks a resume.
    """

    def __init__(self, directory: Path):
        self.path = Path(directory) / LOCK_FILE
        self._fd: Optional[int] = None

    def acquire(self) -> "RunLock":
        """Takes the lock or raises UserInputError naming the process that holds it."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise UserInputError(
                f"run directory {str(self.path.parent)!r} is in use by another tfaccel "
                f"process (pid {holder}); wait for it to finish or stop it first.") from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd
        return self

    def release(self) -> None:
        """Releases the lock (also released by the OS when the process exits)."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def recipe_differences(saved: Recipe, requested: Recipe) -> list:
    """``[(key, saved value, requested value)]`` for every key that differs."""
    old = flatten_recipe(recipe_to_dict(saved))
    new = flatten_recipe(recipe_to_dict(requested))
    return [(key, old.get(key), new.get(key)) for key in sorted(set(old) | set(new))
            if old.get(key) != new.get(key)]


@dataclasses.dataclass(frozen=True)
class ResumeRequest:
    """What `plan_resume` decided: the recipe to continue with and the run's folder."""

    directory: Path
    recipe: Recipe
    extended_from: Optional[int]  # the saved epoch count when the resume adds epochs


def plan_resume(directory, *, requested: Optional[Recipe] = None,
                overrides: Sequence[str] = (), own_model: bool = False) -> ResumeRequest:
    """Checks that a run directory can be resumed with the requested recipe.

    Args:
        directory: The run directory to continue in place.
        requested: The recipe the user named, overrides applied (it must equal the saved
            one but for ``training.epochs``); None continues with the saved recipe.
        overrides: ``key=value`` overrides of the saved recipe, when `requested` is None.
        own_model: The run trains `tfaccel.train(model=...)`'s model (see `load_recipe`).

    Returns:
        The `ResumeRequest`.

    Raises:
        UserInputError: Not a run directory, a changed recipe (the message lists every
            difference), or a run that already finished all its epochs.
    """
    directory = Path(directory)
    recipe_file = directory / run_files.RECIPE_FILE
    if not directory.is_dir():
        raise UserInputError(f"--resume {str(directory)!r}: no such run directory.")
    if not recipe_file.is_file():
        raise UserInputError(f"--resume {str(directory)!r} is not a tfaccel run directory "
                             f"(it has no {run_files.RECIPE_FILE}).")
    saved = load_recipe(recipe_file, own_model=own_model)
    if requested is None:
        requested = load_recipe(recipe_file, overrides, own_model=own_model)
    changed = [d for d in recipe_differences(saved, requested) if d[0] not in EXTENSIBLE_KEYS + PRESENTATION_KEYS]
    if changed:
        lines = "; ".join(f"{key}: {old!r} in the run, {new!r} requested"
                          for key, old, new in changed)
        raise UserInputError(
            f"cannot resume {str(directory)!r} with a different recipe ({lines}). Only "
            f"{', '.join(EXTENSIBLE_KEYS)} may change on resume (--set training.epochs=N "
            "extends a run); start a new run for anything else.")
    if requested.training.epochs < saved.training.epochs:
        raise UserInputError(
            f"cannot resume {str(directory)!r} with training.epochs={requested.training.epochs}"
            f": the run was started for {saved.training.epochs} epochs; epochs can only grow.")
    summary = _read_summary(directory)
    finished = summary.get("epochs_completed")
    if summary.get("status") == "completed" and requested.training.epochs <= saved.training.epochs:
        raise UserInputError(
            f"run {str(directory)!r} already finished ({finished} of "
            f"{saved.training.epochs} epoch(s), status completed); nothing to resume. To "
            f"train it further, ask for more epochs: --set training.epochs="
            f"{saved.training.epochs + 1} (or more).")
    extended = saved.training.epochs if requested.training.epochs > saved.training.epochs \
        else None
    return ResumeRequest(directory=directory, recipe=requested, extended_from=extended)


def checkpoint_to_resume(resume_from: Path, *, directory: Path) -> Optional[ckpt.Checkpoint]:
    """The newest good checkpoint of the run being resumed, every strategy's (said, with
    each newer one skipped); None when there is none: the run then starts over in the same
    directory, so its metrics and summary of the first try are removed.

    Args:
        resume_from: The run directory being resumed (its checkpoints are read).
        directory: Where this process writes (the run directory, or a worker's scratch).
    """
    checkpoint, skipped = ckpt.latest_checkpoint(Path(resume_from) / run_files.CHECKPOINTS_DIR)
    for message in skipped:
        say(f"{message}.")
    if checkpoint is None:
        say(f"{directory} has no usable checkpoint yet; the run starts over from the "
            "beginning in the same directory.")
        for name in (run_files.METRICS_FILE, run_files.SUMMARY_FILE):
            (Path(directory) / name).unlink(missing_ok=True)
    elif skipped:
        say(f"using the previous good checkpoint {checkpoint.path.name}.")
    return checkpoint


def _read_summary(directory: Path) -> dict:
    try:
        return json.loads((directory / run_files.SUMMARY_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
