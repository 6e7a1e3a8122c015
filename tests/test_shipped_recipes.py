"""Every recipe shipped in recipes/ validates, and the python source it names works."""

from pathlib import Path

import pytest
from click.testing import CliRunner

from tfaccel.cli.main import main

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[1]
RECIPES = sorted((ROOT / "recipes").glob("*.yaml"))
# Recipes of real data, never shipped nor downloaded by a test: the script that writes it
# (benchmarks/real_data/) into the git-ignored recipes/data/real/.
REAL_DATA = {"mnist.yaml": "prepare_mnist.py", "tweets.yaml": "prepare_tweets.py",
             "forecast.yaml": "prepare_series.py"}
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
    if recipe.name == "tweets.yaml":  # stand-ins: validate checks paths, not tweets
        for split in ("train", "test"):
            (tmp_path / f"{split}.tsv").write_text("negative\tnot for me\n")
        return [f"data.path={tmp_path / 'train.tsv'}",
                f"data.validation_path={tmp_path / 'test.tsv'}"]
    if recipe.name == "mnist.yaml":
        (tmp_path / "mnist.npz").write_bytes(b"")
        return [f"data.path={tmp_path / 'mnist.npz'}"]
    if recipe.name == "forecast.yaml":
        (tmp_path / "series.csv").write_text("value\n1.0\n")
        return [f"data.path={tmp_path / 'series.csv'}"]
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


def test_real_data_recipes_name_their_preparation_script_and_ignored_data():
    import yaml

    assert {p.name for p in RECIPES} >= set(REAL_DATA)
    assert "recipes/data/real/" in (ROOT / ".gitignore").read_text().splitlines()
    for name, script in REAL_DATA.items():
        data = yaml.safe_load((ROOT / "recipes" / name).read_text())["data"]
        assert data["prepare"] == f"python benchmarks/real_data/{script}"
        assert (ROOT / "benchmarks" / "real_data" / script).is_file()
        assert data["path"].startswith("data/real/")  # recipes/data/real/: git-ignored
        assert data.get("validation_path", "data/real/").startswith("data/real/")


@pytest.mark.parametrize("recipe", [ROOT / "recipes" / n for n in REAL_DATA],
                         ids=lambda p: p.name)
def test_a_real_data_recipe_without_its_data_says_how_to_prepare_it(recipe, tmp_path):
    missing = tmp_path / "not_prepared" / "data"
    result = CliRunner().invoke(main, ["validate", str(recipe), "--set",
                                       f"data.path={missing}"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert str(missing) in result.output and "data.path" in result.output
    assert result.output.rstrip().endswith(
        f"Prepare the data first: python benchmarks/real_data/{REAL_DATA[recipe.name]}")


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_the_mnist_recipe_model_is_the_keras_io_convnet(policy):
    import importlib.util

    import keras
    import numpy as np

    spec = importlib.util.spec_from_file_location("convnet", ROOT / "recipes" / "models" /
                                                  "convnet.py")
    convnet = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(convnet)
    keras.mixed_precision.set_global_policy(policy)
    try:
        model = convnet.build(input_shape=(28, 28, 1), num_classes=10)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert model.count_params() == 34826  # keras.io's "Simple MNIST convnet"
    assert not model.compiled
    last = model.layers[-1]
    assert last.activation is keras.activations.softmax and last.dtype_policy.name == \
        "float32"
    assert [type(layer).__name__ for layer in model.layers[1:3]] == ["Rescaling", "Conv2D"]
    assert model.get_layer(index=-2).rate == 0.5  # Dropout before the softmax
    # Raw 0-255 pixels in, float32 probabilities out.
    pixels = np.random.default_rng(0).integers(0, 256, (3, 28, 28, 1)).astype("uint8")
    probabilities = model.predict(pixels, verbose=0)
    assert probabilities.dtype == np.float32 and probabilities.shape == (3, 10)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-5)
    assert convnet.build(input_shape=(28, 28, 1), num_classes=10,
                         dropout=0.25).get_layer(index=-2).rate == 0.25


# Real tables (recipes/tables/), each prepared by benchmarks/real_data/prepare_<name>.py
# into recipes/data/real/<name>/{train,test}.csv; the test file is the validation file.
TABLE_RECIPES = sorted((ROOT / "recipes" / "tables").glob("*.yaml"))


def test_every_real_table_recipe_names_its_script_and_its_two_files():
    import yaml

    assert {p.stem for p in TABLE_RECIPES} == {"breast_cancer", "diabetes", "diamonds",
                                               "movies", "penguins", "wine"}
    for recipe in TABLE_RECIPES:
        data = yaml.safe_load(recipe.read_text())["data"]
        assert data["prepare"] == f"python benchmarks/real_data/prepare_{recipe.stem}.py"
        assert (ROOT / "benchmarks" / "real_data" / f"prepare_{recipe.stem}.py").is_file()
        # recipes/data/real/: git-ignored, relative to recipes/tables/.
        assert data["path"] == f"../data/real/{recipe.stem}/train.csv"
        assert data["validation_path"] == f"../data/real/{recipe.stem}/test.csv"
        assert data["source"] == "csv"


@pytest.mark.parametrize("recipe", TABLE_RECIPES, ids=lambda p: p.stem)
def test_a_real_table_recipe_validates_with_stand_in_files(recipe, tmp_path):
    import yaml

    data = yaml.safe_load(recipe.read_text())["data"]
    labels = data["label_key"] if isinstance(data["label_key"], list) else [data["label_key"]]
    ignored = (data.get("table") or {}).get("ignore") or []
    header = ",".join(["x"] + ignored + labels)
    row = ",".join(["1.5"] + ["a"] * len(ignored) + ["1"] * len(labels))
    for split in ("train", "test"):  # validate checks paths and keys, not rows
        (tmp_path / f"{split}.csv").write_text(f"{header}\n{row}\n")
    result = CliRunner().invoke(main, ["validate", str(recipe),
                                       "--set", f"data.path={tmp_path / 'train.csv'}",
                                       "--set", f"data.validation_path={tmp_path / 'test.csv'}"])
    assert result.exit_code == 0, result.output
    assert "OK" in result.output


@pytest.mark.parametrize("recipe", TABLE_RECIPES, ids=lambda p: p.stem)
def test_a_real_table_recipe_without_its_data_says_how_to_prepare_it(recipe, tmp_path):
    missing = tmp_path / "not_prepared" / "train.csv"
    result = CliRunner().invoke(main, ["validate", str(recipe), "--set",
                                       f"data.path={missing}"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert str(missing) in result.output and "data.path" in result.output
    assert result.output.rstrip().endswith(
        f"Prepare the data first: python benchmarks/real_data/prepare_{recipe.stem}.py")


def test_the_diabetes_recipe_trains_one_wide_and_deep_stack_for_150_epochs(policy):
    # What a diabetes run builds and for how long: chosen by the training file's CV and
    # confirmed on the test file (docs/performance.md, "The regression table"); a revert
    # to 100 epochs or a regression default of several members must be re-measured.
    from tfaccel import models
    from tfaccel.config.loading import load_recipe
    from tfaccel.data.dataset_info import DatasetInfo, TableInfo
    from tfaccel.training.model_setup.model_build import _model_params

    policy("float32")
    recipe = load_recipe(ROOT / "recipes" / "tables" / "diabetes.yaml")
    training = recipe.training
    assert (training.epochs, training.global_batch_size, training.keep) == (150, 32, "last")
    assert (recipe.optimizer.name, recipe.optimizer.learning_rate,
            recipe.optimizer.schedule) == ("adam", 3e-3, "constant")
    assert training.loss == "auto" and recipe.data.task == "regression"
    table = DatasetInfo(task="regression", table=TableInfo(
        numeric=["age"], categorical=["sex"], ignored=[], features=11))
    params = _model_params(recipe, table)
    assert params == {"hidden_units": [32, 16], "dropout": 0.1, "normalization": "none",
                      "linear_path": True, "members": 1}
    model = models.build_model("mlp", input_shape=(11,), num_classes=1, task="regression",
                               **params)
    assert [layer.name for layer in model.layers if layer.name.startswith(("deep", "wide"))] \
        == ["deep", "wide", "wide_and_deep"]
    # 11 -> 32 -> 16 -> 1 and the wide path 11 -> 1.
    assert model.count_params() == (11 * 32 + 32) + (32 * 16 + 16) + (16 + 1) + (11 + 1)
