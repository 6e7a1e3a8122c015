"""Every recipe shipped in recipes/ validates, and the python source it names works."""

from pathlib import Path

import pytest
from click.testing import CliRunner

from tfaccel.cli.main import main

RECIPES = sorted((Path(__file__).resolve().parents[1] / "recipes").glob("*.yaml"))


def test_there_is_a_recipe_per_source():
    from tfaccel.config.recipe import load_recipe

    sources = {load_recipe(path).data.source for path in RECIPES}
    assert sources >= {"builtin", "tfds", "image_folder", "tfrecords", "python"}


def _data_for(recipe, tmp_path, shapes_data_dir):
    """--set overrides that point a recipe needing prepared data at data made here."""
    from tfaccel.config.recipe import load_recipe

    source = load_recipe(recipe).data.source
    if source == "image_folder":
        folder = tmp_path / "images" / "a"
        folder.mkdir(parents=True)
        (folder / "0.png").write_bytes(b"\x89PNG")  # validate checks paths, not pixels
        return [f"data.path={tmp_path / 'images'}"]
    if source == "tfrecords":
        return [f"data.path={shapes_data_dir}/tfaccel_shapes/*/tfaccel_shapes-train.tfrecord-*"]
    return []


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.name)
def test_shipped_recipe_validates(recipe, tmp_path, shapes_data_dir):
    args = ["validate", str(recipe)]
    for override in _data_for(recipe, tmp_path, shapes_data_dir):
        args += ["--set", override]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "OK" in result.output


@pytest.mark.parametrize("source, path, expected", [
    ("image_folder", "no_such_folder", "the image folder"),
    ("tfrecords", "no_such_*.tfrecord", "matches no file"),
    ("arrays", "missing.npz", "the arrays file"),
    ("python", "missing_source.py:source", "the python source file"),
    ("python", "no_such_module_xyz:source", "cannot be found"),
])
def test_validate_names_the_key_and_the_missing_path(tmp_path, source, path, expected):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"data: {{source: {source}, path: '{path}', image_size: [8, 8], "
                      "features: {label: {dtype: int64}}}\n")
    result = CliRunner().invoke(main, ["validate", str(recipe)])
    assert result.exit_code == 2, result.output
    assert "data.path" in result.output and expected in result.output
    assert path.split(":")[0] in result.output and "Traceback" not in result.output
