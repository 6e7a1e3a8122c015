"""What every step of a training run reads, decided once in `train`."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Optional

from tfaccel.config.cluster import WorkerRole
from tfaccel.config.recipe import Recipe
from tfaccel.training.execution import Choice
from tfaccel.training.session import Session
from tfaccel.training.timings import PhaseTimes


@dataclasses.dataclass
class RunContext:
    """What every step of a run reads: decided once in `train`."""

    recipe: Recipe
    directory: Path
    session: Session  # strategy, precision, threads and batch plan, set for the run
    started: float
    extra_callbacks: list
    resume_from: Optional[Path]  # the run directory whose checkpoint is continued
    role: WorkerRole
    shown_dir: Optional[Path]  # the run directory as the user knows it (the chief's)
    profile: Optional[tuple] = None
    # Steps per call into the train function: the recipe's, or `auto`'s choice once made.
    steps_per_execution: int = 1
    execution_choice: Optional[Choice] = None
    # What model.keras holds (`best_epoch.keep_plan`) and why best became last, if it did.
    keep: str = "last"
    keep_note: Optional[str] = None
    given_model: object = None  # train(model=...): a builder or a keras.Model
    model_source: Optional[dict] = None  # what model the run trains, for the summary
    pipeline: Optional[dict] = None  # runtime.strategy pipeline: its schedule and stages
    # Where the run's wall time goes (summary.json's timings, `tfaccel train --timings`).
    timings: PhaseTimes = dataclasses.field(default_factory=PhaseTimes)

    @property
    def resuming(self) -> bool:
        """Whether this run continues an earlier one's checkpoint."""
        return self.resume_from is not None
