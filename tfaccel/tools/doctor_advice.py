"""`tfaccel doctor`'s advice: the verdict from the measured figures and the ranked changes to try."""

from __future__ import annotations

from typing import Optional, Sequence

from tfaccel.config.recipe import Recipe
from tfaccel.training.fit_callbacks.throughput import available_cores
from tfaccel.training.model_setup.execution import choose_from_cost

# The TensorFlow profiler's input-bound thresholds (share of step time waiting for input).
MODERATE, HIGH = 0.05, 0.20
# Augmentation is called the limit when the pipeline alone is this much faster without it.
AUGMENTATION_LIMIT = 1.25


def verdict_for(input_wait_fraction: float) -> str:
    """`compute-bound` below 5% input wait, `moderately-input-bound` to 20%, else
    `input-bound` (the TensorFlow profiler's thresholds)."""
    if input_wait_fraction >= HIGH:
        return "input-bound"
    if input_wait_fraction >= MODERATE:
        return "moderately-input-bound"
    return "compute-bound"


def augmentation_verdict(recipe: Recipe, report: dict) -> Optional[str]:
    """The line saying that augmentation makes the job input-bound, naming the keys; None
    when the job does not wait for input or the pipeline is not much faster without it."""
    without = report.get("pipeline_examples_per_sec_without_augment")
    rate = report["pipeline_examples_per_sec"]
    if not without or report["input_wait_fraction"] < MODERATE or \
            without < AUGMENTATION_LIMIT * rate:
        return None
    return (f"augmentation is the limit: the pipeline alone makes {rate:,.0f} examples/s "
            f"with data.augment={list(recipe.data.augment)} and {without:,.0f} without it "
            f"({1 - rate / without:.0%} of its time augmenting), and the model shares these "
            "cores with it; change data.augment (fewer names: brightness and contrast cost "
            "about as much again as flip and crop) or data.private_threads.")


def suggest(recipe: Recipe, report: dict, *, cpu_bf16: bool, replicas: int) -> list:
    """Concrete, ranked changes: each names the recipe key(s), the value and the effect.

    Input-side changes come first when the job waits for input, model-side ones first
    otherwise; within a side, the larger expected effect first.
    """

    data, training = recipe.data, recipe.training
    wait = report["input_wait_fraction"]
    model_rate = report["model_examples_per_sec"]
    gain = (f"up to {model_rate / max(report['fit_examples_per_sec'], 1e-9):.1f}x on fit "
            "(the model-alone rate is the ceiling)")
    cores = available_cores()
    inputs, models = [], []
    if wait >= MODERATE:
        # A time series' windows are gathered from rows in memory: no cache stage to add.
        if not data.cache and data.source != "timeseries":
            inputs.append(_s(["data.cache=memory"], "cache the decoded examples (after decode, "
                             "before shuffle and augmentation)",
                             f"from the second epoch the pipeline skips reading and "
                             f"decoding; {gain}", rank=3))
        if data.num_parallel_calls is not None and data.num_parallel_calls < cores:
            inputs.append(_s(["data.num_parallel_calls=null"],
                             f"let tf.data's autotuner choose the parallel calls (now "
                             f"{data.num_parallel_calls}, {cores} cores)",
                             "the map stages use every core", rank=2, trial="pipeline"))
        if data.private_threads is None and data.source != "python":
            inputs.append(_s([f"data.private_threads={cores}"],
                             "give tf.data a private thread pool, so the input stages do not "
                             "queue behind TensorFlow's own ops",
                             "smoother input when the model's ops and the input compete for "
                             "the shared pool", rank=1, trial="pipeline"))
        if data.source == "python":
            if data.workers < cores:
                inputs.append(_s([f"data.workers={cores}"],
                                 f"run the Python source in {cores} worker processes "
                                 f"(now {data.workers})",
                                 f"about {cores / max(data.workers, 1):.1f}x the Python "
                                 "source's rate, if it is CPU-bound", rank=3,
                                 trial="pipeline"))
            if data.worker_mode == "thread":
                inputs.append(_s(["data.worker_mode=process"],
                                 "move Python work from threads (bound by the GIL) into "
                                 "worker processes", "CPU-heavy Python scales with cores",
                                 rank=3, trial="pipeline"))
        if report.get("augmentation_verdict"):
            rate = report["pipeline_examples_per_sec"]
            without = report["pipeline_examples_per_sec_without_augment"]
            inputs.append(_s(["data.augment=[]"],
                             f"use fewer or cheaper augmentations than {list(data.augment)}: "
                             f"the pipeline alone makes {rate:,.0f} examples/s with them and "
                             f"{without:,.0f} without",
                             f"the pipeline up to {without / rate:.1f}x (measured without "
                             "augmentation)", rank=4))
        elif data.augment and report.get("pipeline_examples_per_sec_without_augment") is None:
            # Not measured yet (measured, it is in the report's figures and no suggestion).
            inputs.append(_s(["data.augment=[]"], "measure without augmentation: tfaccel's "
                             "augmentations are already vectorised per batch; if this is "
                             "much faster, use fewer or cheaper ones",
                             "shows the augmentation's share of the input time", rank=0,
                             trial="pipeline"))
    calls = report.get("steps_per_execution") or {}
    auto = calls.get("auto_choice")
    if auto and calls["recipe"] != "auto" and auto["steps"] > calls["recipe"]:
        k, before = auto["steps"], calls["recipe"]
        cost, step = auto["overhead_ms"], auto["step_ms"]
        models.append(_s([f"training.steps_per_execution={k}"],
                         f"run {k} steps per call into the compiled function (what "
                         f"steps_per_execution: auto picks here): a call costs {cost:.2f} ms "
                         f"beyond its {step:.2f} ms step",
                         f"up to {(cost / before + step) / (cost / k + step):.2f}x steps/s",
                         rank=3, trial="model"))
    if report["settings"]["precision"] == "float32":
        if cpu_bf16:
            models.append(_s(["runtime.precision=mixed_bfloat16"],
                             "compute in bfloat16 (this CPU has bf16 instructions)",
                             "about 2x on bf16 CPUs (2.4x measured on a small CNN)", rank=3,
                             trial="model"))
    # The pipeline strategy refuses jit_compile (engine/model_pipeline.py: XLA would compile its
    # stages into one cluster on one device): never suggest what the strategy refuses.
    if not training.jit_compile and replicas == 1 and recipe.runtime.strategy != "pipeline":
        models.append(_s(["training.jit_compile=true"], "compile the train step with XLA",
                         "fuses the step's ops; the measured change decides", rank=1,
                         trial="model"))
    models.append(_s([f"training.global_batch_size={training.global_batch_size * 2}"],
                     "a bigger batch per step (add training.accumulation_steps=2 to keep the "
                     "per-device memory; raise the learning rate with it)",
                     "fewer, fuller steps: higher examples/s when the step is short", rank=1,
                     trial="model"))
    first, second = (inputs, models) if wait >= MODERATE else (models, inputs)
    ranked = sorted(first, key=lambda s: -s["rank"]) + sorted(second, key=lambda s: -s["rank"])
    for suggestion in ranked:
        del suggestion["rank"]
    return ranked


def steps_per_execution(recipe: Recipe, cost: Optional[dict], *,
                         steps_per_epoch: int) -> dict:
    """The recipe's steps per call and what `auto` picks from the measured per-call cost."""

    out = {"recipe": recipe.training.steps_per_execution, "auto_choice": None}
    if cost is not None:
        out["auto_choice"] = choose_from_cost(
            cost, steps_per_epoch=steps_per_epoch,
            every_steps=recipe.training.checkpoint_every_steps, unmeasured="").as_dict()
    return out


def rank_by_measurement(suggestions: Sequence[dict], *, pipeline_rate: float,
                        model_rate: float) -> tuple:
    """Ranks the tried suggestions by their measured gain; a measured slowdown is dropped.

    `fit` runs about as fast as the slower of the pipeline alone and the model alone, so a
    tried suggestion's gain on fit is estimated as min(pipeline, model) after over before
    (a faster pipeline does not speed up a compute-bound job). The tried ones take the
    places tried ones held, in the order of that gain; the untried ones (a cache needs a
    whole pass) and those whose try failed keep their places.

    Args:
        suggestions: `suggest`'s list, tried ones carrying ``measured``.
        pipeline_rate: The input pipeline alone, examples/s.
        model_rate: The model alone, examples/s.

    Returns:
        ``(suggestions, not_suggested)``: the ranked list, and the tried suggestions that
        measured slower (ratio under 1), kept for the report. Each tried one's
        ``measured`` gets ``fit_gain``.
    """
    ranked, tried, slower = list(suggestions), [], []
    for suggestion in suggestions:
        measured = suggestion.get("measured") or {}
        if measured.get("ratio") is None:
            continue
        rates = {"pipeline": pipeline_rate, "model": model_rate}
        rates["pipeline" if measured["what"].startswith("pipeline") else "model"] = \
            measured["after"]
        before = min(pipeline_rate, model_rate)
        measured["fit_gain"] = min(rates.values()) / before if before else measured["ratio"]
        (slower if measured["ratio"] < 1 else tried).append(suggestion)
    places = [i for i, s in enumerate(ranked) if s in tried]
    for place, suggestion in zip(places, sorted(tried,
                                                key=lambda s: -s["measured"]["fit_gain"])):
        ranked[place] = suggestion
    return [s for s in ranked if s not in slower], slower


def _s(overrides: Sequence[str], why: str, expected: str, *, rank: int,
       trial: Optional[str] = None) -> dict:
    return {"key": overrides[0].split("=", 1)[0], "set": list(overrides), "why": why,
            "expected": expected, "try": trial, "rank": rank}
