"""Every recipe shipped in recipes/ validates, and the python source it names works."""

from pathlib import Path

import pytest
from click.testing import CliRunner

from tfaccel.cli import main

RECIPES = sorted((Path(__file__).resolve().parents[1] / "recipes").glob("*.yaml"))


def test_there_is_a_recipe_per_source():
    from tfaccel.recipe import load_recipe

    sources = {load_recipe(path).data.source for path in RECIPES}
    assert sources >= {"builtin", "tfds", "image_folder", "tfrecords", "python"}


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.name)
def test_shipped_recipe_validates(recipe):
    result = CliRunner().invoke(main, ["validate", str(recipe)])
    assert result.exit_code == 0, result.output
    assert "OK" in result.output


def test_python_source_recipe_source_yields_labelled_examples():
    from tfaccel.data.config import load_python_source
    from tfaccel.recipe import load_recipe

    recipe = load_recipe(RECIPES[0].parent / "python_source.yaml")
    source = load_python_source(recipe.data.path)
    image, label = source[3]
    assert image.shape == (16, 16, 1) and 0 <= int(label) < 10
    again, same_label = source[3]
    assert (image == again).all() and label == same_label  # random access is deterministic
    assert len({int(source[i][1]) for i in range(200)}) == 10
