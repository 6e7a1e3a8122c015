"""CLI commands that touch TensorFlow: devices, bench, export-images."""

import json
from pathlib import Path

from click.testing import CliRunner

from tfaccel.cli.main import main


def test_devices_reports_auto_choices():
    result = CliRunner().invoke(main, ["devices"])
    assert result.exit_code == 0, result.output
    assert "strategy" in result.output and "precision" in result.output
    assert "'CPU': 1" in result.output  # physical devices; tests split it into 2 logical


def test_export_images_then_validate_and_train_an_image_folder_recipe(tmp_path,
                                                                     shapes_data_dir):
    out = tmp_path / "images"
    result = CliRunner().invoke(main, ["export-images", str(out), "--limit", "40",
                                       "--data-dir", shapes_data_dir])
    assert result.exit_code == 0, result.output
    assert "Wrote 40 images" in result.output
    assert sorted(p.name for p in out.iterdir()) == ["circle", "cross", "square", "triangle"]
    assert sum(len(list(d.iterdir())) for d in out.iterdir()) == 40
    again = CliRunner().invoke(main, ["export-images", str(out), "--limit", "4",
                                      "--data-dir", shapes_data_dir])
    assert again.exit_code == 2 and "is not empty" in again.output

    # The shipped image-folder recipe, pointed at the exported folder: validate, then train.
    recipe = str(Path(__file__).resolve().parents[1] / "recipes" / "image_folder.yaml")
    sets = ["--set", f"data.path={out}", "--set", "training.epochs=1",
            "--set", "training.global_batch_size=8", "--set", "runtime.verbose=0",
            "--set", f"runtime.runs_dir={tmp_path / 'runs'}"]
    validated = CliRunner().invoke(main, ["validate", recipe, *sets])
    assert validated.exit_code == 0, validated.output
    assert "OK (image_folder data, model small_cnn, 1 epoch(s), global batch 8)" in \
        validated.output
    trained = CliRunner().invoke(main, ["train", recipe, *sets,
                                        "--run-dir", str(tmp_path / "run")])
    assert trained.exit_code == 0, trained.output
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    # validation_fraction 0.2 of 40 images: 32 trained on, 8 held out.
    assert summary["dataset"]["train_examples"] == 32
    assert summary["dataset"]["validation_examples"] == 8
    assert summary["class_names"] == ["circle", "cross", "square", "triangle"]
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["examples"] == 32


def test_bench_prints_both_contenders_and_the_ratio(tmp_path, shapes_data_dir):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"data: {{data_dir: {shapes_data_dir}, train_split: 'train[:512]'}}\n"
                      "training: {global_batch_size: 64}\n")
    result = CliRunner().invoke(main, ["bench", str(recipe), "--batches", "4", "--repeats",
                                       "1"])
    assert result.exit_code == 0, result.output
    assert "tfaccel pipeline (parallel)" in result.output
    assert "truly sequential tf.data" in result.output
    assert "speed-up" in result.output
    assert "first (cold)" in result.output


def test_bench_on_a_missing_image_folder_is_a_user_error(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("data: {source: image_folder, path: nowhere, image_size: [8, 8]}\n")
    result = CliRunner().invoke(main, ["bench", str(recipe)])
    assert result.exit_code == 2, result.output
    assert "nowhere" in result.output
    assert "Traceback" not in result.output
