"""`tfaccel doctor`: is the job input-bound or compute-bound, by how much, and what to change."""

from __future__ import annotations

from typing import Callable, Optional, Sequence

from tfaccel.config.recipe import Recipe, recipe_from_dict, recipe_to_dict
from tfaccel.messages import say

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
    from tfaccel.training.run.session import open_session

    # The same session as `train`: threads, seed, op determinism, precision, strategy and
    # batch plan set alike, the data built in the strategy's scope, all put back after.
    with open_session(recipe) as opened:
        doctor = _Measurements(opened)
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
            "steps_per_execution": _steps_per_execution(
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


class _Measurements:
    """One doctor run's measurements on a `training.session.Session` (as `train` opens it)."""

    def __init__(self, session):
        from tfaccel.engine.precision import cpu_has_bf16

        self.session = session
        self.cpu_bf16 = cpu_has_bf16()
        self.strategy = session.strategy
        self.strategy_info = session.strategy_info
        self.replicas = session.replicas
        self.precision = session.precision
        self.plan = session.plan
        self.data = session.build_data()
        self.source = session.recipe.data.source
        self.model = self.monitor = self.in_memory = None

    def stream(self, data=None):
        """The training stream from step 0, built in the strategy's scope as `train` does."""
        with self.strategy.scope():  # the data layer shards by the strategy in scope
            return (data or self.data).make_stream(0)

    def settings(self) -> dict:
        return {"strategy": self.strategy_info["strategy"], "replicas": self.replicas,
                "precision": self.precision, "global_batch_size": self.plan.global_batch_size,
                "accumulation_steps": self.plan.accumulation_steps,
                "source": self.source}

    def pipeline_alone(self, recipe: Recipe, *, steps: int, data=None) -> dict:
        """Examples/s of the training pipeline with no model, and the autotuner's choices.

        `tfaccel bench`'s timing over 2 x `steps` batches; the rate counts the batches after
        the first (start-up and a shuffle buffer's fill are not the steady state `fit` sees).
        """
        from tfaccel.tools.bench import time_batches

        run = time_batches(self.stream(data), num_batches=2 * steps,
                           keep_iterator=True)
        return {"examples_per_sec": run["steady_examples_per_s"],
                "autotune": read_autotune(run["iterator"])}

    def build_model(self, recipe: Recipe):
        from tfaccel.training.model_build import build_model
        from tfaccel.training.throughput import ThroughputMonitor

        trained_model, _ = build_model(recipe, strategy=self.strategy, plan=self.plan,
                                       data=self.data)
        from tfaccel.training.execution import initial_steps

        monitor = ThroughputMonitor(
            steps_per_execution=initial_steps(recipe.training.steps_per_execution))
        monitor.attach(trained_model, strategy=self.strategy)
        return trained_model, monitor

    def model_alone(self, recipe: Recipe, *, steps: int, keep: bool = True,
                    build: bool = True) -> tuple:
        """Examples/s of the train step on batches already in memory."""
        if build:
            model, monitor = self.build_model(recipe)
            if keep:
                self.model, self.monitor = model, monitor
            # A few real batches, cached: the model never waits for the pipeline. One pass
            # first, outside the timing: the cache is complete only once `take` has ended.
            cached = self.stream().take(min(steps, 8)).cache()
            for _ in cached:
                pass
            in_memory = cached.repeat()
            if keep:
                self.in_memory = in_memory
        else:
            model, monitor, in_memory = self.model, self.monitor, self.in_memory
        figures = _timed_fit(model, monitor, in_memory, steps=steps)
        return figures["examples_per_sec"], figures

    def fit_together(self, *, steps: int) -> dict:
        """The real pipeline feeding the model, as `fit` runs them."""
        return _timed_fit(self.model, self.monitor, self.stream(), steps=steps)

    def try_suggestion(self, recipe: Recipe, suggestion: dict, report: dict, *,
                       steps: int) -> dict:
        """Measures one suggestion: the pipeline or the model alone with its setting."""
        from tfaccel.errors import TfaccelError

        try:
            changed = recipe_from_dict(recipe_to_dict(recipe), overrides=suggestion["set"])
            if suggestion["try"] == "pipeline":
                data = self.session.build_data(recipe=changed)
                before = report["pipeline_examples_per_sec"]
                after = self.pipeline_alone(changed, steps=steps, data=data)[
                    "examples_per_sec"]
                what = "pipeline_examples_per_sec"
            else:
                import keras

                from tfaccel.config.batching import plan_batches
                from tfaccel.engine.precision import set_precision

                previous = keras.mixed_precision.global_policy().name
                kept = self.plan, self.data
                set_precision(changed.runtime.precision)
                try:
                    if changed.training.global_batch_size != recipe.training.global_batch_size:
                        self.plan = plan_batches(
                            global_batch_size=changed.training.global_batch_size,
                            replicas=self.replicas,
                            accumulation_steps=changed.training.accumulation_steps,
                            micro_batch_size=changed.training.micro_batch_size)
                        self.data = self.session.build_data(recipe=changed,
                                                            plan=self.plan)
                    before = report["model_examples_per_sec"]
                    after, _ = self.model_alone(changed, steps=steps, keep=False)
                finally:
                    keras.mixed_precision.set_global_policy(previous)
                    self.plan, self.data = kept
                what = "model_examples_per_sec"
        except (TfaccelError, ValueError, RuntimeError) as error:
            return {"error": str(error).splitlines()[0]}
        return {"what": what, "before": before, "after": after,
                "ratio": after / before if before else None}


def _timed_fit(model, monitor, dataset, *, steps: int) -> dict:
    """Fits `steps` warm-up steps, then `steps` timed ones; the timed epoch's figures."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Your input ran out of data")
        history = model.fit(dataset, epochs=2, steps_per_epoch=steps, verbose=0,
                            callbacks=[monitor], shuffle=False)
    figures = {k: v[-1] for k, v in history.history.items()}
    batch = _batch_size(dataset)
    return {
        "examples_per_sec": figures["steps_per_sec"] * batch,
        "input_wait_fraction": figures.get("input_wait_fraction"),
        "framework_overhead_fraction": monitor.framework_overhead_fraction(),
        "per_call_cost": monitor.per_call_cost(),
        "step_time_ms": figures["step_time_ms"],
        "cpu_utilisation": figures["cpu_utilisation"],
    }


def _batch_size(dataset) -> int:
    import tensorflow as tf

    leaf = tf.nest.flatten(dataset.element_spec)[0]
    size = leaf.shape[0]
    if size is None:  # not drop_remainder: read one batch
        size = int(tf.shape(tf.nest.flatten(next(iter(dataset)))[0])[0])
    return int(size)


def read_autotune(iterator) -> dict:
    """What tf.data's autotuner chose for each tuned stage of an iterator's pipeline.

    Returns:
        ``{"stages": [{"stage", "parallelism"/"buffer_size", "ms_per_element",
        "buffered_elements"}...]}`` from output to source, or ``{"unavailable": reason}``.
    """
    import tensorflow as tf

    try:
        proto = tf.data.experimental.get_model_proto(iterator)
    except Exception as error:  # any failure only means "not readable here"
        return {"unavailable": f"{type(error).__name__}: {str(error).splitlines()[0]}"}
    stages, node_id, seen = [], proto.output, set()
    while node_id is not None and node_id in proto.nodes and node_id not in seen:
        seen.add(node_id)
        node = proto.nodes[node_id]
        tuned = {p.name: p.value for p in node.parameters if p.tunable}
        if tuned:
            stage = {"stage": node.name, **{k: int(v) for k, v in tuned.items()}}
            if node.num_elements:
                # processing_time is in nanoseconds, summed over the stage's elements.
                stage["ms_per_element"] = node.processing_time / node.num_elements / 1e6
            stage["buffered_elements"] = int(node.buffered_elements)
            stages.append(stage)
        node_id = node.inputs[0] if node.inputs else None
    return {"stages": stages, "cpu_budget": int(proto.optimization_params.cpu_budget)}


def suggest(recipe: Recipe, report: dict, *, cpu_bf16: bool, replicas: int) -> list:
    """Concrete, ranked changes: each names the recipe key(s), the value and the effect.

    Input-side changes come first when the job waits for input, model-side ones first
    otherwise; within a side, the larger expected effect first.
    """
    from tfaccel.training.throughput import available_cores

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


def _steps_per_execution(recipe: Recipe, cost: Optional[dict], *,
                         steps_per_epoch: int) -> dict:
    """The recipe's steps per call and what `auto` picks from the measured per-call cost."""
    from tfaccel.training.execution import choose_from_cost

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


def format_report(report: dict) -> str:
    """The report as text: verdict, figures, the autotuner's choices, suggestions."""
    lines = [f"Verdict: {report['verdict']} ({report['input_wait_fraction']:.1%} of the step "
             f"time waiting for input; {report['input_wait_source']})."]
    if report.get("augmentation_verdict"):
        lines.append(f"  {report['augmentation_verdict'][0].upper()}"
                     f"{report['augmentation_verdict'][1:]}")
    lines.append("")
    lines += [
        f"  input pipeline alone     {report['pipeline_examples_per_sec']:>10,.0f} examples/s",
        *([f"    without augmentation   "
           f"{report['pipeline_examples_per_sec_without_augment']:>10,.0f} examples/s"]
          if report.get("pipeline_examples_per_sec_without_augment") else []),
        f"  model alone (in memory)  {report['model_examples_per_sec']:>10,.0f} examples/s",
        f"  fit (both together)      {report['fit_examples_per_sec']:>10,.0f} examples/s",
        f"  step time {report['step_time_ms']:.1f} ms, CPU utilisation "
        f"{report['cpu_utilisation']:.0%}, per-call overhead "
        + (f"{report['framework_overhead_fraction']:.0%}"
           if report["framework_overhead_fraction"] is not None else "unmeasured")
        + f" ({report['steps_timed']} steps timed each, best of {report['repeats']})",
        ""]
    auto = (report.get("steps_per_execution") or {}).get("auto_choice")
    if auto is not None:
        lines[-1:-1] = [f"  steps per call: {report['steps_per_execution']['recipe']} in the "
                        f"recipe; auto picks {auto['steps']} here ({auto['reason']})"]
    autotune = report["autotune"]
    if "stages" in autotune:
        lines.append(f"tf.data autotuner (CPU budget {autotune['cpu_budget']}):")
        for stage in autotune["stages"]:
            chosen = ", ".join(f"{k} {v}" for k, v in stage.items()
                               if k not in ("stage", "ms_per_element", "buffered_elements"))
            timing = (f", {stage['ms_per_element']:.2f} ms/element"
                      if "ms_per_element" in stage else "")
            lines.append(f"  {stage['stage']:<22} {chosen}{timing}, "
                         f"{stage['buffered_elements']} buffered")
    else:
        lines.append(f"tf.data autotuner: not readable ({autotune['unavailable']}).")
    lines += ["", "Suggestions (most promising first):"]
    if not report["suggestions"]:
        lines.append("  none left to suggest.")
    for n, s in enumerate(report["suggestions"], 1):
        sets = " ".join(f"--set {o}" for o in s["set"])
        lines.append(f"  {n}. {sets}: {s['why']}; expected: {s['expected']}.")
        measured = s.get("measured")
        if measured:
            if "error" in measured:
                lines.append(f"     tried: failed ({measured['error']})")
            else:
                lines.append(f"     tried: {_tried(measured)}")
    slower = report.get("not_suggested") or []
    if slower:
        lines += ["", "Tried and measured slower here (not suggested):"]
        lines += [f"  --set {' --set '.join(s['set'])}: {_tried(s['measured'])}"
                  for s in slower]
    return "\n".join(lines)


def _tried(measured: dict) -> str:
    text = (f"{measured['what']} {measured['before']:,.0f} -> {measured['after']:,.0f} "
            f"({measured['ratio']:.2f}x")
    if measured.get("fit_gain") is not None:
        text += f"; about {measured['fit_gain']:.2f}x on fit"
    return text + ")"
