"""`tfaccel doctor`: is the job input-bound or compute-bound, by how much, and what to change.

The measurements (doctor_measurements), the advice (doctor_advice) and the text
(doctor_report) live in modules of their own; this one runs them in train's session.
"""

from __future__ import annotations

from typing import Callable, Optional

from tfaccel.config.recipe import Recipe, recipe_from_dict, recipe_to_dict
from tfaccel.messages import say
from tfaccel.tools.doctor_advice import (
    MODERATE,
    augmentation_verdict,
    rank_by_measurement,
    steps_per_execution,
    suggest,
    verdict_for,
)
from tfaccel.tools.doctor_measurements import Measurements
from tfaccel.training.run.session import open_session


def diagnose(recipe: Recipe, *, steps: int = 20, repeats: int = 2,
             try_suggestions: bool = False,
             progress: Optional[Callable[[str], None]] = say) -> dict:
    """Measures the input pipeline alone, the model alone and both together, side by side.

    Args:
        recipe: The validated recipe.
        steps: Optimizer steps (batches) timed in each measurement, after a warm-up of as
            many (the warm-up includes tracing and the first batches' start-up).
        repeats: The model alone and `fit` are measured alternately this many times; the
            best of each is kept.
        try_suggestions: Also measure the cheap suggestions (pipeline or model alone with
            the suggested setting) and report the measured change; the suggestions are
            then ranked by their measured gain, and a measured slowdown is not suggested
            (it moves to ``not_suggested``).
        progress: Called with one line as each measurement starts (`tfaccel.messages.say`
            by default; None for none): the measurements take tens of seconds.

    Returns:
        A JSON-able dict: ``verdict``, ``input_wait_fraction``,
        ``pipeline_examples_per_sec``, ``model_examples_per_sec``, ``fit_examples_per_sec``,
        ``framework_overhead_fraction``, ``autotune`` (the stages tf.data's autotuner tuned,
        or the reason it could not be read), ``suggestions`` (ranked), ``not_suggested``
        (tried and measured slower) and the settings.
    """
    tell = progress or (lambda line: None)
    timed = f"{steps} steps after {steps} warm-up"
    tell("doctor: starting TensorFlow and building the input pipeline as train does...")
    # The same session as `train`: threads, seed, op determinism, precision, strategy and
    # batch plan set alike, the data built in the strategy's scope, all put back after.
    with open_session(recipe) as opened:
        doctor = Measurements(opened)
        tell(f"doctor: measuring the input pipeline alone ({2 * steps} batches)...")
        pipeline = doctor.pipeline_alone(recipe, steps=steps)
        tell(f"doctor: building the model; measuring it alone on batches in memory "
             f"({timed})...")
        model_rate, _ = doctor.model_alone(recipe, steps=steps)
        tell(f"doctor: measuring fit with the input pipeline ({timed})...")
        fit = doctor.fit_together(steps=steps)
        for repeat in range(2, repeats + 1):
            # Shared machines have bimodal timings: alternate the two, keep the best of each.
            tell(f"doctor: repeat {repeat} of {repeats}: the model alone, then fit...")
            again, _ = doctor.model_alone(recipe, steps=steps, build=False)
            model_rate = max(model_rate, again)
            other = doctor.fit_together(steps=steps)
            if other["examples_per_sec"] > fit["examples_per_sec"]:
                fit = other
        wait = fit["input_wait_fraction"]
        wait_source = "measured in the train step"
        if wait is None:
            # Unmeasurable in the step (jit_compile): the share of the model's own speed lost.
            wait = max(0.0, 1.0 - fit["examples_per_sec"] / model_rate) if model_rate else 0.0
            wait_source = (f"estimated from fit vs model-alone speed "
                           f"({doctor.monitor.unavailable_reason} hides the step's timestamps)")
        report = {
            "verdict": verdict_for(wait),
            "input_wait_fraction": wait,
            "input_wait_source": wait_source,
            "pipeline_examples_per_sec": pipeline["examples_per_sec"],
            "model_examples_per_sec": model_rate,
            "fit_examples_per_sec": fit["examples_per_sec"],
            "framework_overhead_fraction": fit["framework_overhead_fraction"],
            "step_time_ms": fit["step_time_ms"],
            "cpu_utilisation": fit["cpu_utilisation"],
            "steps_timed": steps,
            "repeats": repeats,
            "autotune": pipeline["autotune"],
            "settings": doctor.settings(),
            "steps_per_execution": steps_per_execution(
                recipe, fit["per_call_cost"], steps_per_epoch=doctor.data.steps_per_epoch),
        }
        if wait >= MODERATE and recipe.data.augment:
            # Waiting for an augmented pipeline: is the augmentation what holds it back?
            plain = recipe_from_dict(recipe_to_dict(recipe), overrides=["data.augment=[]"])
            tell(f"doctor: measuring the input pipeline without augmentation "
                 f"({2 * steps} batches)...")
            report["pipeline_examples_per_sec_without_augment"] = doctor.pipeline_alone(
                plain, steps=steps, data=doctor.session.build_data(recipe=plain))[
                "examples_per_sec"]
        report["augmentation_verdict"] = augmentation_verdict(recipe, report)
        report["suggestions"] = suggest(recipe, report, cpu_bf16=doctor.cpu_bf16,
                                        replicas=doctor.replicas)
        if try_suggestions:
            tried = [s for s in report["suggestions"] if s.get("try") in ("pipeline", "model")]
            for number, suggestion in enumerate(tried, 1):
                what = "pipeline" if suggestion["try"] == "pipeline" else "model"
                tell(f"doctor: trying {number} of {len(tried)}: "
                     f"{' '.join('--set ' + o for o in suggestion['set'])} (the {what} "
                     f"alone, {timed})...")
                suggestion["measured"] = doctor.try_suggestion(recipe, suggestion,
                                                                report, steps=steps)
            report["suggestions"], report["not_suggested"] = rank_by_measurement(
                report["suggestions"], pipeline_rate=report["pipeline_examples_per_sec"],
                model_rate=model_rate)
        return report
