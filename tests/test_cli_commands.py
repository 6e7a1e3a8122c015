"""CLI commands that touch TensorFlow: devices, bench, export-images."""

import pytest
from click.testing import CliRunner

from tfaccel.cli import main


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
