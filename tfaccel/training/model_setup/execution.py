"""Steps per call into the compiled train function: the `auto` choice.

Which values fit an epoch is `tfaccel.config.batching.check_steps_per_execution`.
`auto` removes the per-call cost (Python's fit loop, the callbacks, the function
dispatch: about 0.4 ms a call measured on a 2-core CPU, 8% of a 5 ms step) where it
matters: the first epoch runs one step per call and measures that cost against the step's
own compute; the rest of the run takes the smallest divisor of the epoch that brings the
cost under `TARGET_OVERHEAD`, within `MAX_STEPS` and `MAX_CALL_SECONDS` per call (so
Ctrl-C, a preemption signal or a NaN loss is acted on within about a second).

A new steps per call retraces and recompiles the train and test functions (Keras bakes the
count into them), so the run switches only when the rest of it repays that: the per-call
cost saved over the remaining steps must exceed the retrace, estimated by what the first
calls spent tracing and compiling. A short job keeps one step per call and traces once.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

from tfaccel.config.batching import MAX_STEPS_PER_EXECUTION as MAX_STEPS
from tfaccel.config.batching import divisors

# Per-call cost allowed, as a fraction of a step's compute.
TARGET_OVERHEAD = 0.02
# A call that runs longer delays every per-call reaction: progress, signals, the NaN
# guard, checkpoints by the clock.
MAX_CALL_SECONDS = 1.0


@dataclasses.dataclass(frozen=True)
class Choice:
    """The steps per call `auto` chose, and why (for the log line and summary.json)."""

    steps: int
    reason: str
    overhead_ms: Optional[float] = None
    step_ms: Optional[float] = None
    # Where the retrace was weighed: what the switch would save over the rest of the run,
    # and what the retrace was estimated to cost, in seconds.
    saving_seconds: Optional[float] = None
    retrace_seconds: Optional[float] = None

    def as_dict(self) -> dict:
        """JSON-able form for summary.json."""
        return dataclasses.asdict(self)


def initial_steps(value) -> int:
    """Steps per call to compile with: the recipe's number, or 1 while `auto` measures."""
    return 1 if value == "auto" else int(value)


def choose_steps_per_execution(*, overhead_seconds: float, step_seconds: float,
                               steps_per_epoch: int,
                               every_steps: Optional[int] = None) -> Choice:
    """The smallest steps per call that brings the per-call cost under the target.

    Args:
        overhead_seconds: Measured cost of one call beyond its step (fit loop, callbacks,
            dispatch), in seconds.
        step_seconds: Measured compute of one step, in seconds.
        steps_per_epoch: Optimizer steps of one epoch (the choice divides it).
        every_steps: `training.checkpoint_every_steps` (the choice divides it too), or None.

    Returns:
        A `Choice`: a divisor of the epoch (and of `every_steps`) of at most `MAX_STEPS`
        steps and `MAX_CALL_SECONDS` per call; the largest such one when none reaches the
        target, 1 when the cost is already under it.
    """
    overhead_ms, step_ms = overhead_seconds * 1e3, step_seconds * 1e3
    measured = dict(overhead_ms=round(overhead_ms, 4), step_ms=round(step_ms, 4))
    fraction = overhead_seconds / max(overhead_seconds + step_seconds, 1e-12)
    if overhead_seconds <= TARGET_OVERHEAD * step_seconds:
        return Choice(1, f"per-call cost {overhead_ms:.2f} ms is {fraction:.1%} of a step: "
                      "one step per call", **measured)
    # A step too short for the timer to see (0 s) asks for the most steps per call.
    needed = math.ceil(overhead_seconds / (TARGET_OVERHEAD * max(step_seconds, 1e-12)) - 1e-9)
    limit = min(MAX_STEPS, max(1, int(MAX_CALL_SECONDS / max(step_seconds, 1e-12))))
    period = math.gcd(steps_per_epoch, every_steps) if every_steps else steps_per_epoch
    fitting = [d for d in divisors(period) if d <= limit]
    steps = next((d for d in fitting if d >= needed), fitting[-1])
    if steps == 1:
        return Choice(1, f"per-call cost {overhead_ms:.2f} ms is {fraction:.1%} of a step, but "
                      f"no divisor of {period} steps between 2 and {limit} fits: one step "
                      "per call", **measured)
    return Choice(steps, f"per-call cost {overhead_ms:.2f} ms was {fraction:.1%} of a "
                  f"{step_ms:.2f} ms step; {steps} steps per call bring it to "
                  f"{overhead_seconds / steps / (overhead_seconds / steps + step_seconds):.1%}",
                  **measured)


def choose_from_cost(cost: Optional[dict], *, steps_per_epoch: int,
                     every_steps: Optional[int] = None, unmeasured: str,
                     remaining_steps: Optional[int] = None,
                     retrace_seconds: Optional[float] = None) -> Choice:
    """`choose_steps_per_execution` on `ThroughputMonitor.per_call_cost`'s figures.

    Args:
        cost: ``{"overhead_seconds", "step_seconds", ...}``, or None when unmeasured.
        steps_per_epoch: Optimizer steps of one epoch.
        every_steps: `training.checkpoint_every_steps`, or None.
        unmeasured: Why there is no measurement (said when `cost` is None).
        remaining_steps: Optimizer steps the run has left to train after the switch, or
            None for the choice of a run of any length (`tfaccel doctor`'s).
        retrace_seconds: The estimated cost of retracing with another steps per call.

    Returns:
        The `Choice`; one step per call, with the reason, when `cost` is None or when
        the per-call cost saved over `remaining_steps` would not repay `retrace_seconds`.
    """
    if cost is None:
        return Choice(1, f"per-call cost unmeasured ({unmeasured}): one step per call")
    choice = choose_steps_per_execution(
        overhead_seconds=cost["overhead_seconds"], step_seconds=cost["step_seconds"],
        steps_per_epoch=steps_per_epoch, every_steps=every_steps)
    if choice.steps == 1 or remaining_steps is None or retrace_seconds is None:
        return choice
    return weigh_retrace(choice, overhead_seconds=cost["overhead_seconds"],
                         remaining_steps=remaining_steps, retrace_seconds=retrace_seconds)


def weigh_retrace(choice: Choice, *, overhead_seconds: float, remaining_steps: int,
                  retrace_seconds: float) -> Choice:
    """`choice`, or one step per call when the rest of the run would not repay the retrace.

    Args:
        choice: The steps per call the measured costs ask for (more than 1).
        overhead_seconds: The measured per-call cost, in seconds.
        remaining_steps: Optimizer steps left to train after the switch.
        retrace_seconds: The estimated cost of retracing the train and test functions.

    Returns:
        `choice` with the weighed figures, or a `Choice` of 1 that says why not.
    """
    saving = overhead_seconds * remaining_steps * (1 - 1 / choice.steps)
    weighed = dict(saving_seconds=round(saving, 4), retrace_seconds=round(retrace_seconds, 4))
    if saving > retrace_seconds:
        return dataclasses.replace(
            choice, reason=f"{choice.reason}; it saves about {saving:.2f} s over the "
            f"{remaining_steps} remaining steps, more than the retrace costs (about "
            f"{retrace_seconds:.2f} s)", **weighed)
    return Choice(1, f"per-call cost {overhead_seconds * 1e3:.2f} ms a call; {choice.steps} steps "
                  f"per call would save about {saving:.2f} s over the {remaining_steps} "
                  f"remaining steps, less than retracing the train and test functions costs "
                  f"(about {retrace_seconds:.2f} s, what their first calls spent tracing and "
                  "compiling): one step per call, traced once",
                  overhead_ms=choice.overhead_ms, step_ms=choice.step_ms, **weighed)
