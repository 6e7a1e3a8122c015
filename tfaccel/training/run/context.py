"""What every step of a training run reads (decided once in `train`), and what it decides later."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Optional

from tfaccel.config.batching import BatchPlan
from tfaccel.config.cluster import WorkerRole
from tfaccel.config.recipe import Recipe
from tfaccel.training.fit_callbacks.timings import PhaseTimes
from tfaccel.training.model_setup.execution import Choice
from tfaccel.training.run.session import Session


@dataclasses.dataclass(frozen=True)
class RunContext:
    """What every step of a run reads: decided once in `train`, never changed after.

    What the run decides later (once its data and model exist) is a `Decisions` value,
    returned by the step that decides it and passed on, not assigned here.
    """

    recipe: Recipe
    directory: Path
    session: Session  # strategy, precision, threads and batch plan, set for the run
    started: float
    extra_callbacks: tuple
    resume_from: Optional[Path]  # the run directory whose checkpoint is continued
    role: WorkerRole
    shown_dir: Optional[Path]  # the run directory as the user knows it (the chief's)
    profile: Optional[tuple] = None
    given_model: object = None  # train(model=...): a builder or a keras.Model
    model_source: Optional[dict] = None  # what model the run trains, for the summary
    # Where the run's wall time goes (summary.json's timings, `tfaccel train --timings`):
    # a clock the steps mark, the one mutable object the frozen context holds.
    timings: PhaseTimes = dataclasses.field(default_factory=PhaseTimes)

    @property
    def resuming(self) -> bool:
        """Whether this run continues an earlier one's checkpoint."""
        return self.resume_from is not None


@dataclasses.dataclass(frozen=True)
class Decisions:
    """What a run decides once its data and model exist (summary.json reports each).

    Attributes:
        keep: What model.keras holds, ``best`` or ``last`` (`best_epoch.keep_plan`).
        keep_note: Why best became last, if it did.
        steps_per_execution: Steps per call into the train function in force: the
            recipe's, or `auto`'s choice once made.
        execution_choice: `auto`'s choice and why, once made.
        pipeline: runtime.strategy pipeline: its schedule and stages.
        plan: The batch plan in force when `micro_batch_size: auto` made the micro-batch
            smaller (the session's plan otherwise: None).
        micro_batch_retries: `auto`'s retries after running out of memory, in order:
            ``{"micro_batch_size", "retried_with", "accumulation_steps", "error"}``.
    """

    keep: str = "last"
    keep_note: Optional[str] = None
    steps_per_execution: int = 1
    execution_choice: Optional[Choice] = None
    pipeline: Optional[dict] = None
    plan: Optional[BatchPlan] = None
    micro_batch_retries: tuple = ()
