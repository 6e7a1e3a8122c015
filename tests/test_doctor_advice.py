"""`tfaccel doctor`'s advice (tools/doctor_advice.py): the verdict's thresholds, the suggestions
by recipe and measurement, their ranking by measured gain, the augmentation verdict."""

import pytest

from tfaccel.config.recipe import recipe_from_dict
from tfaccel.tools.doctor_advice import (
    augmentation_verdict,
    rank_by_measurement,
    suggest,
    verdict_for,
)
from tfaccel.tools.doctor_report import format_report

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


def test_verdict_thresholds_are_the_profiler_s():
    assert verdict_for(0.0) == verdict_for(0.049) == "compute-bound"
    assert verdict_for(0.05) == verdict_for(0.199) == "moderately-input-bound"
    assert verdict_for(0.2) == verdict_for(1.0) == "input-bound"


def test_suggestions_follow_the_recipe_and_the_measurements():
    recipe = recipe_from_dict({"data": {"source": "image_folder", "path": ".",
                                        "image_size": [32, 32], "cache": None,
                                        "num_parallel_calls": 1},
                               "training": {"steps_per_execution": 1}},
                              base_dir=".")
    auto = {"steps": 5, "reason": "measured", "overhead_ms": 0.5, "step_ms": 5.0}
    report = {"input_wait_fraction": 0.6, "model_examples_per_sec": 1000.0,
              "pipeline_examples_per_sec": 200.0, "fit_examples_per_sec": 190.0,
              "framework_overhead_fraction": 0.3, "settings": {"precision": "float32"},
              "steps_per_execution": {"recipe": 1, "auto_choice": auto}}
    ranked = suggest(recipe, report, cpu_bf16=True, replicas=1)
    keys = [s["key"] for s in ranked]
    assert keys[:3] == ["data.cache", "data.num_parallel_calls", "data.private_threads"]
    assert "up to 5.3x" in ranked[0]["expected"]  # 1000 / 190: the model-alone ceiling
    assert keys.index("training.steps_per_execution") < keys.index("training.jit_compile")
    calls = next(s for s in ranked if s["key"] == "training.steps_per_execution")
    # What auto picks, and the gain of a 0.5 ms call cost spread over 5 steps of 5 ms.
    assert calls["set"] == ["training.steps_per_execution=5"]
    assert "up to 1.08x" in calls["expected"]
    # A recipe on auto already gets it.
    on_auto = dict(report, steps_per_execution={"recipe": "auto", "auto_choice": auto})
    assert "training.steps_per_execution" not in [
        s["key"] for s in suggest(recipe, on_auto, cpu_bf16=True, replicas=1)]
    assert "runtime.precision" in keys
    compute_bound = dict(report, input_wait_fraction=0.01)
    keys = [s["key"] for s in suggest(recipe, compute_bound, cpu_bf16=False, replicas=2)]
    assert keys[0] == "training.steps_per_execution"
    assert "data.cache" not in keys and "runtime.precision" not in keys
    assert "training.jit_compile" not in keys  # XLA is suggested on one device only


def test_a_pipeline_gain_counts_on_fit_only_up_to_the_model_s_rate():
    def tried(key, what, before, after):
        return {"key": key, "set": [f"{key}=x"], "measured": {
            "what": what, "before": before, "after": after, "ratio": after / before}}

    # Compute-bound: the pipeline alone (5,000/s) is far faster than the model (1,000/s).
    threads = tried("data.private_threads", "pipeline_examples_per_sec", 5_000, 10_000)
    batch = tried("training.global_batch_size", "model_examples_per_sec", 1_000, 1_300)
    steps = tried("training.steps_per_execution", "model_examples_per_sec", 1_000, 1_010)
    slower = tried("training.jit_compile", "model_examples_per_sec", 1_000, 990)
    untried = {"key": "data.cache", "set": ["data.cache=memory"]}
    failed = {"key": "data.workers", "set": ["data.workers=2"],
              "measured": {"error": "boom"}}
    ranked, dropped = rank_by_measurement([threads, untried, slower, steps, failed, batch],
                                          pipeline_rate=5_000, model_rate=1_000)
    # The tried ones swap places by gain on fit (2x on the pipeline is 1.0x on fit, after
    # 1.01x on the model); the untried and the failed keep theirs.
    assert [s["key"] for s in ranked] == ["training.global_batch_size", "data.cache",
                                          "training.steps_per_execution", "data.workers",
                                          "data.private_threads"]
    assert threads["measured"]["fit_gain"] == 1.0
    assert batch["measured"]["fit_gain"] == pytest.approx(1.3)
    assert dropped == [slower]  # 0.99x is a measured slowdown, however small
    # Input-bound: the same pipeline gain is most of fit's gain.
    ranked, _ = rank_by_measurement([batch, threads], pipeline_rate=500, model_rate=1_000)
    assert [s["key"] for s in ranked] == ["data.private_threads",
                                          "training.global_batch_size"]


def _augmented_report(wait, without):
    recipe = recipe_from_dict({"data": {"source": "builtin", "cache": "memory",
                                        "augment": ["flip", "crop"]}}, base_dir=".")
    report = {"input_wait_fraction": wait, "model_examples_per_sec": 9000.0,
              "pipeline_examples_per_sec": 6000.0, "fit_examples_per_sec": 5000.0,
              "pipeline_examples_per_sec_without_augment": without,
              "settings": {"precision": "mixed_bfloat16"}, "steps_per_execution": None}
    report["augmentation_verdict"] = augmentation_verdict(recipe, report)
    return recipe, report


def test_doctor_says_when_augmentation_makes_the_job_input_bound():
    recipe, report = _augmented_report(0.25, 24000.0)
    line = report["augmentation_verdict"]
    assert line.startswith("augmentation is the limit: the pipeline alone makes 6,000 "
                           "examples/s with data.augment=['flip', 'crop'] and 24,000 without")
    assert "(75% of its time augmenting)" in line and "data.private_threads" in line
    first = suggest(recipe, report, cpu_bf16=True, replicas=1)[0]
    assert first["set"] == ["data.augment=[]"]
    assert "up to 4.0x" in first["expected"]
    text = format_report({**report, "verdict": "input-bound", "input_wait_source": "measured",
                          "framework_overhead_fraction": None, "step_time_ms": 1.0,
                          "cpu_utilisation": 1.0, "steps_timed": 4, "repeats": 1,
                          "autotune": {"unavailable": "no"},
                          "suggestions": [first]})
    assert text.splitlines()[1] == "  A" + line[1:]


@pytest.mark.parametrize("wait, without", [(0.25, 7000.0),  # augmentation barely costs
                                           (0.01, 24000.0),  # the job does not wait
                                           (0.25, None)])  # not measured
def test_doctor_does_not_blame_augmentation_otherwise(wait, without):
    recipe, report = _augmented_report(wait, without)
    assert report["augmentation_verdict"] is None
    suggestions = suggest(recipe, report, cpu_bf16=True, replicas=1)
    augment = [s for s in suggestions if s["key"] == "data.augment"]
    # To measure without augmentation is suggested only where doctor did not: measured,
    # the figure is in the report instead.
    assert [s["try"] for s in augment] == (["pipeline"] if wait >= 0.05 and without is None
                                           else [])
    if without is not None:
        text = format_report({**report, "verdict": "compute-bound", "step_time_ms": 1.0,
                              "input_wait_source": "measured", "cpu_utilisation": 1.0,
                              "framework_overhead_fraction": None, "steps_timed": 4,
                              "repeats": 1, "autotune": {"unavailable": "no"},
                              "suggestions": suggestions})
        assert "  input pipeline alone          6,000 examples/s\n" \
               f"    without augmentation   {without:>10,.0f} examples/s\n" in text, text


def test_xla_is_not_suggested_under_the_pipeline_strategy_which_refuses_it():
    report = {"input_wait_fraction": 0.01, "model_examples_per_sec": 1000.0,
              "pipeline_examples_per_sec": 5000.0, "fit_examples_per_sec": 990.0,
              "framework_overhead_fraction": 0.1, "settings": {"precision": "float32"},
              "steps_per_execution": {"recipe": "auto", "auto_choice": None}}
    keys = {}
    for strategy in ("one_device", "pipeline"):
        recipe = recipe_from_dict({"runtime": {"strategy": strategy}}, base_dir=".")
        keys[strategy] = [s["key"] for s in suggest(recipe, report, cpu_bf16=False,
                                                    replicas=1)]
    assert "training.jit_compile" in keys["one_device"]  # the same report, one device
    assert "training.jit_compile" not in keys["pipeline"]
    assert "training.global_batch_size" in keys["pipeline"]  # the others stay
