"""`tfaccel doctor`'s measurements: the input pipeline alone, the model alone, both in `fit`."""

from __future__ import annotations

import warnings

import keras
import tensorflow as tf

from tfaccel.config.batching import plan_batches
from tfaccel.config.recipe import Recipe, recipe_from_dict, recipe_to_dict
from tfaccel.engine.keras_compat import build_before_fit
from tfaccel.engine.precision import cpu_has_bf16, set_precision
from tfaccel.errors import TfaccelError
from tfaccel.tools.bench import time_batches
from tfaccel.training.fit_callbacks.throughput import ThroughputMonitor
from tfaccel.training.model_setup.execution import initial_steps
from tfaccel.training.model_setup.model_build import build_model as build_run_model


class Measurements:
    """One doctor run's measurements on a `training.run.session.Session` (as `train` opens it)."""

    def __init__(self, session):
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
        run = time_batches(self.stream(data), num_batches=2 * steps,
                           keep_iterator=True)
        return {"examples_per_sec": run["steady_examples_per_s"],
                "autotune": read_autotune(run["iterator"])}

    def build_model(self, recipe: Recipe):
        trained_model, _ = build_run_model(recipe, strategy=self.strategy, plan=self.plan,
                                           data=self.data)
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
        try:
            changed = recipe_from_dict(recipe_to_dict(recipe), overrides=suggestion["set"])
            if suggestion["try"] == "pipeline":
                data = self.session.build_data(recipe=changed)
                before = report["pipeline_examples_per_sec"]
                after = self.pipeline_alone(changed, steps=steps, data=data)[
                    "examples_per_sec"]
                what = "pipeline_examples_per_sec"
            else:
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
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Your input ran out of data")
        build_before_fit(model, dataset)  # one trace: the warm-up epoch times less tracing
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
