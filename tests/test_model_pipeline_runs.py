"""runtime.strategy pipeline through `tfaccel train`: summary, saved model, exact resume."""

import json

import keras
import numpy as np
import pytest
from click.testing import CliRunner

from tfaccel.cli.main import main
from tfaccel.training.run import runner

# The small CNN on 128 built-in images (4 steps an epoch): the recipe path, not learning.
SMALL = ["data.train_split=train[:128]", "data.validation_split_name=test[:64]",
         "data.shuffle_buffer=128", "training.global_batch_size=32", "training.epochs=1",
         "runtime.precision=float32", "runtime.verbose=0", "runtime.tensorboard=false"]


def _recipe(tmp_path, shapes_data_dir, logical_cpus):
    recipe = tmp_path / "pipe.yaml"
    recipe.write_text(
        "name: pipe\n"
        "data: {source: builtin}\n"
        "model: {name: small_cnn}\n"
        "optimizer: {name: adam, learning_rate: 2e-3}\n"
        "runtime:\n"
        "  strategy: pipeline\n"
        f"  devices: [{', '.join(logical_cpus)}]\n"
        "  pipeline: {stages: 2, micro_batches: 2}\n"
        f"  runs_dir: {tmp_path / 'runs'}\n")
    return recipe, [f"data.data_dir={shapes_data_dir}", *SMALL]


def _sets(overrides):
    return [a for override in overrides for a in ("--set", override)]


def test_cli_trains_a_pipeline_recipe_and_records_the_stages(tmp_path, shapes_data_dir,
                                                             logical_cpus):
    recipe, overrides = _recipe(tmp_path, shapes_data_dir, logical_cpus)
    run_dir = tmp_path / "run"
    result = CliRunner().invoke(main, ["train", str(recipe), "--run-dir", str(run_dir),
                                       *_sets(overrides)])
    assert result.exit_code == 0, result.output
    assert "pipeline on 1 replica(s)" in result.output
    assert "pipeline: 2 stage(s), 2 micro-batch(es) in flight" in result.output
    assert f"  stage 1 on {logical_cpus[1]}: " in result.output
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["strategy"] == "pipeline" and summary["devices"] == logical_cpus
    assert summary["pipeline"]["micro_batches"] == 2
    stages = summary["pipeline"]["stages"]
    assert [s["device"] for s in stages] == logical_cpus
    saved = keras.saving.load_model(run_dir / "model.keras")
    # Every layer in exactly one stage, every parameter counted once.
    assert [n for s in stages for n in s["layers"]] == [
        layer.name for layer in saved.layers if not isinstance(layer, keras.layers.InputLayer)]
    assert sum(s["parameters"] for s in stages) == sum(
        int(np.prod(w.shape)) for w in saved.weights)
    assert type(saved).__name__ == "Functional"


def test_a_resumed_pipeline_run_equals_an_uninterrupted_one(tmp_path, shapes_data_dir,
                                                           logical_cpus):
    recipe, overrides = _recipe(tmp_path, shapes_data_dir, logical_cpus)
    exact = [*overrides, "runtime.deterministic=true", "data.augment=[flip]"]
    full = runner.train(str(recipe), [*exact, "training.epochs=2"],
                        run_dir=str(tmp_path / "full"))
    runner.train(str(recipe), exact, run_dir=str(tmp_path / "cut"))
    resumed = runner.train(resume=tmp_path / "cut", overrides=["training.epochs=2"])
    assert [e["epoch"] for e in resumed.epochs] == [1, 2]
    assert resumed.epochs[1]["loss"] == pytest.approx(full.epochs[1]["loss"], abs=1e-6)
    a = keras.saving.load_model(tmp_path / "full" / "model.keras").get_weights()
    b = keras.saving.load_model(tmp_path / "cut" / "model.keras").get_weights()
    assert max(float(np.max(np.abs(x - y))) for x, y in zip(a, b)) <= 1e-6


@pytest.mark.parametrize("text,expected", [
    ("runtime: {pipeline: {micro_batches: 4}}",
     "runtime.pipeline is set but runtime.strategy is 'auto'"),
    ("runtime: {strategy: pipeline, pipeline: {split_at: [a], stages: 2}}",
     "runtime.pipeline.split_at (['a']) and runtime.pipeline.stages (2) both"),
    ("runtime: {strategy: pipeline, pipeline: {micro_batches: 0}}",
     "runtime.pipeline.micro_batches"),
])
def test_pipeline_key_mistakes_exit_2_naming_the_key(tmp_path, text, expected):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(text + "\n")
    result = CliRunner().invoke(main, ["validate", str(recipe)])
    assert result.exit_code == 2, result.output
    assert expected in result.output and "Traceback" not in result.output


def test_a_split_at_layer_the_model_lacks_exits_2(tmp_path, shapes_data_dir, logical_cpus):
    recipe, overrides = _recipe(tmp_path, shapes_data_dir, logical_cpus)
    result = CliRunner().invoke(main, [
        "train", str(recipe), "--run-dir", str(tmp_path / "bad"),
        *_sets([*overrides, "runtime.pipeline={split_at: [nope]}"])])
    assert result.exit_code == 2, result.output
    assert "runtime.pipeline.split_at names layer 'nope'" in result.output
    assert "Traceback" not in result.output


@pytest.mark.slow
@pytest.mark.heavy  # outside the 15-minute CI budget: ~25 s; SIGTERM resume is test_resume's, the pipeline's run the quicker tests here
def test_sigterm_mid_epoch_then_resume_a_pipeline_equals_uninterrupted(tmp_path,
                                                                        shapes_data_dir):
    # The resume driver runs in a fresh process of one CPU device: both stages there, the
    # same wrapper, checkpoint and restore as on two devices.
    from test_resume import EXACT, TOLERANCE, _drive

    overrides = [f"data.data_dir={shapes_data_dir}", *EXACT, "runtime.strategy=pipeline",
                 "runtime.pipeline={stages: 2, micro_batches: 2}"]
    report, output = _drive(tmp_path, overrides, stop_at=18)
    assert report["preempted"] and report["checkpoint"] == "step-0000019"
    assert "resuming from checkpoint step-0000019: epoch 2, step 7 of 12" in output
    assert "pipeline: 2 stage(s), 2 micro-batch(es) in flight" in output
    assert report["weights_max_diff"] <= TOLERANCE
