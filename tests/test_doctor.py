"""`tfaccel doctor`: an input-bound and a compute-bound recipe get different, right verdicts."""

import json

import pytest
from click.testing import CliRunner

from tfaccel.cli.main import main
from tfaccel.tools.doctor import suggest, verdict_for

REPORT_KEYS = {"verdict", "input_wait_fraction", "pipeline_examples_per_sec",
               "model_examples_per_sec", "fit_examples_per_sec", "suggestions", "autotune"}


def _doctor(recipe, *args):
    result = CliRunner().invoke(main, ["doctor", str(recipe), "--json", "--steps", "4",
                                       "--repeats", "1", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.output[result.output.index("{"):])


def test_verdict_thresholds_are_the_profiler_s():
    assert verdict_for(0.0) == verdict_for(0.049) == "compute-bound"
    assert verdict_for(0.05) == verdict_for(0.199) == "moderately-input-bound"
    assert verdict_for(0.2) == verdict_for(1.0) == "input-bound"


@pytest.mark.slow
def test_a_slow_python_source_with_a_tiny_model_is_input_bound(tmp_path):
    # 4 ms of Python per example in one worker: 64 ms per batch of 16, against a tiny MLP
    # step of about a millisecond.
    (tmp_path / "slow_source.py").write_text(
        "import time\n"
        "import numpy as np\n"
        "class Slow:\n"
        "    def __len__(self):\n"
        "        return 4000\n"
        "    def __getitem__(self, i):\n"
        "        time.sleep(0.004)\n"
        "        return np.float32([i % 2, 1 - i % 2, 0.5, 0.25]), np.int64(i % 2)\n"
        "source = Slow()\n")
    recipe = tmp_path / "slow.yaml"
    recipe.write_text(
        "data: {source: python, path: slow_source.py:source, workers: 1, num_classes: 2,\n"
        "       validation_split_name: null, cache: null, shuffle_buffer: 0}\n"
        "model: {name: mlp, params: {hidden_units: [8], normalization: none}}\n"
        "training: {global_batch_size: 16}\n"
        "runtime: {precision: float32}\n")
    report = _doctor(recipe, "--try")
    assert REPORT_KEYS <= set(report)
    assert report["verdict"] == "input-bound"
    assert report["input_wait_fraction"] >= 0.2
    # The model alone on batches in memory is far faster than the pipeline feeds it.
    assert report["model_examples_per_sec"] > 3 * report["pipeline_examples_per_sec"]
    keys = [s["key"] for s in report["suggestions"]]
    # Input-side changes first: the cache, more worker processes.
    assert keys[:2] == ["data.cache", "data.workers"]
    assert report["suggestions"][1]["set"] == ["data.workers=2"]
    # --try measured the pipeline with 2 workers, and the model-side ones on the model.
    # (a try that measured slower moves to not_suggested)
    measured = {s["key"]: s.get("measured")
                for s in report["suggestions"] + report["not_suggested"]}
    assert measured["data.workers"]["what"] == "pipeline_examples_per_sec"
    assert measured["data.workers"]["before"] == report["pipeline_examples_per_sec"]
    assert measured["data.workers"]["after"] > 0
    assert measured["training.global_batch_size"]["what"] == "model_examples_per_sec"
    assert measured["data.cache"] is None  # a cache needs a whole pass: not a cheap try


def test_cached_data_with_a_convolutional_model_is_compute_bound(tmp_path, shapes_data_dir):
    recipe = tmp_path / "cnn.yaml"
    recipe.write_text(
        f"data: {{source: builtin, data_dir: {shapes_data_dir}, train_split: 'train[:1024]',\n"
        "       validation_split_name: null, cache: memory, shuffle_buffer: 1024}\n"
        # Wide enough that the step clearly dominates on a fast CPU too: with [32, 64, 128]
        # an AMD EPYC Zen 5 ran a step in a few ms, and one full-suite run of five measured
        # >= 5% input wait (which stall caused it was not measured).
        "model: {name: small_cnn, params: {filters: [64, 128, 256], dense_units: 128}}\n"
        "training: {global_batch_size: 64}\n"
        "runtime: {precision: float32}\n")
    report = _doctor(recipe)
    assert report["verdict"] == "compute-bound"
    assert report["input_wait_fraction"] < 0.05
    assert report["pipeline_examples_per_sec"] > 3 * report["model_examples_per_sec"]
    keys = [s["key"] for s in report["suggestions"]]
    assert "data.cache" not in keys  # already cached; nothing input-side is suggested
    assert "training.global_batch_size" in keys
    stages = report["autotune"].get("stages")
    assert stages and any("buffer_size" in s or "parallelism" in s for s in stages)


def test_suggestions_follow_the_recipe_and_the_measurements():
    from tfaccel.config.recipe import recipe_from_dict

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


class _FakeMeasurements:
    """The doctor's measurements, canned: the tester's compute-bound job on a shared CPU."""

    cpu_bf16, replicas, monitor = False, 1, None
    tried = {"training.jit_compile": 0.10, "training.global_batch_size": 1.54}

    def __init__(self, session):
        from types import SimpleNamespace

        self.data = SimpleNamespace(steps_per_epoch=100)

    def settings(self):
        return {"strategy": "default", "replicas": 1, "precision": "float32",
                "global_batch_size": 64, "accumulation_steps": 1, "source": "builtin"}

    def pipeline_alone(self, recipe, *, steps, data=None):
        return {"examples_per_sec": 50_000.0, "autotune": {"unavailable": "canned"}}

    def model_alone(self, recipe, *, steps, keep=True, build=True):
        return 1_000.0, {}

    def fit_together(self, *, steps):
        return {"examples_per_sec": 990.0, "input_wait_fraction": 0.01,
                "framework_overhead_fraction": 0.02, "per_call_cost": None,
                "step_time_ms": 64.0, "cpu_utilisation": 0.9}

    def try_suggestion(self, recipe, suggestion, report, *, steps):
        ratio = self.tried[suggestion["key"]]
        before = report["model_examples_per_sec"]
        return {"what": "model_examples_per_sec", "before": before, "after": before * ratio,
                "ratio": ratio}


def test_tried_suggestions_rank_by_measured_gain_and_a_slowdown_is_not_suggested(
        monkeypatch):
    import contextlib

    from tfaccel.config.recipe import recipe_from_dict
    from tfaccel.tools import doctor
    from tfaccel.training import session

    monkeypatch.setattr(doctor, "_Measurements", _FakeMeasurements)
    monkeypatch.setattr(session, "open_session",
                        lambda recipe: contextlib.nullcontext(None))
    recipe = recipe_from_dict({"runtime": {"precision": "float32"}}, base_dir=".")
    untried = [s["key"] for s in suggest(recipe, {
        "input_wait_fraction": 0.01, "model_examples_per_sec": 1_000.0,
        "fit_examples_per_sec": 990.0, "settings": {"precision": "float32"}},
        cpu_bf16=False, replicas=1)]
    assert untried == ["training.jit_compile", "training.global_batch_size"]
    lines = []
    report = doctor.diagnose(recipe, steps=4, repeats=2, try_suggestions=True,
                             progress=lines.append)
    # The 1.54x bigger batch comes first; XLA measured 0.10x is not suggested at all.
    assert [s["key"] for s in report["suggestions"]] == ["training.global_batch_size"]
    assert report["suggestions"][0]["measured"]["fit_gain"] == pytest.approx(1.54)
    assert [s["key"] for s in report["not_suggested"]] == ["training.jit_compile"]
    text = doctor.format_report(report)
    suggested = text.split("Suggestions (most promising first):")[1].split(
        "Tried and measured slower")[0]
    assert "jit_compile" not in suggested
    assert "1. --set training.global_batch_size=256" in suggested
    assert ("  --set training.jit_compile=true: model_examples_per_sec 1,000 -> 100 (0.10x; "
            "about 0.10x on fit)") in text
    # One line per phase, before it starts: nothing is silent for long.
    assert lines == [
        "doctor: starting TensorFlow and building the input pipeline as train does...",
        "doctor: measuring the input pipeline alone (8 batches)...",
        "doctor: building the model; measuring it alone on batches in memory (4 steps after "
        "4 warm-up)...",
        "doctor: measuring fit with the input pipeline (4 steps after 4 warm-up)...",
        "doctor: repeat 2 of 2: the model alone, then fit...",
        "doctor: trying 1 of 2: --set training.jit_compile=true (the model alone, 4 steps "
        "after 4 warm-up)...",
        "doctor: trying 2 of 2: --set training.global_batch_size=256 (the model alone, 4 "
        "steps after 4 warm-up)..."]


def test_a_pipeline_gain_counts_on_fit_only_up_to_the_model_s_rate():
    from tfaccel.tools.doctor import rank_by_measurement

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


def test_doctor_rejects_a_bad_override_with_exit_2(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("name: x\n")
    result = CliRunner().invoke(main, ["doctor", str(recipe), "--set", "training.epochs=-1"])
    assert result.exit_code == 2
    assert "training.epochs" in result.output and "Traceback" not in result.output


def test_with_jit_compile_the_wait_is_estimated_and_says_so(tmp_path, shapes_data_dir):
    recipe = tmp_path / "jit.yaml"
    recipe.write_text(
        f"data: {{source: builtin, data_dir: {shapes_data_dir}, train_split: 'train[:512]',\n"
        "       validation_split_name: null, cache: memory, shuffle_buffer: 512}\n"
        "model: {name: small_cnn}\n"
        "training: {global_batch_size: 64, jit_compile: true}\n"
        "runtime: {precision: float32}\n")
    report = _doctor(recipe)
    assert report["input_wait_source"].startswith("estimated from fit vs model-alone speed")
    assert "jit_compile" in report["input_wait_source"]
    expected = max(0.0, 1 - report["fit_examples_per_sec"] / report["model_examples_per_sec"])
    assert report["input_wait_fraction"] == pytest.approx(expected)
    assert report["framework_overhead_fraction"] is None
    assert "training.jit_compile" not in [s["key"] for s in report["suggestions"]]


def _augmented_report(wait, without):
    from tfaccel.config.recipe import recipe_from_dict
    from tfaccel.tools.doctor import augmentation_verdict

    recipe = recipe_from_dict({"data": {"source": "builtin", "cache": "memory",
                                        "augment": ["flip", "crop"]}}, base_dir=".")
    report = {"input_wait_fraction": wait, "model_examples_per_sec": 9000.0,
              "pipeline_examples_per_sec": 6000.0, "fit_examples_per_sec": 5000.0,
              "pipeline_examples_per_sec_without_augment": without,
              "settings": {"precision": "mixed_bfloat16"}, "steps_per_execution": None}
    report["augmentation_verdict"] = augmentation_verdict(recipe, report)
    return recipe, report


def test_doctor_says_when_augmentation_makes_the_job_input_bound():
    from tfaccel.tools.doctor import format_report

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
    from tfaccel.tools.doctor import format_report

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
    from tfaccel.config.recipe import recipe_from_dict

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
