"""Recipe loading: strict keys, types, ranges, overrides and path resolution."""

import dataclasses
from pathlib import Path

import pytest
import yaml

from tfaccel.config.recipe import (
    Recipe,
    apply_overrides,
    describe_keys,
    dump_recipe,
    flatten_recipe,
    load_recipe,
    mapping_keys,
    recipe_from_dict,
    recipe_to_dict,
)
from tfaccel.errors import RecipeError, UserInputError

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


def write(tmp_path: Path, text: str, name: str = "recipe.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def error_of(raw, overrides=()) -> str:
    with pytest.raises(RecipeError) as caught:
        recipe_from_dict(raw, overrides=overrides, source="r.yaml")
    return str(caught.value)


def test_empty_recipe_gives_every_default():
    recipe = recipe_from_dict({})
    assert recipe == Recipe()
    assert recipe.training.global_batch_size == 128
    assert recipe.data.source == "builtin"
    with pytest.raises(dataclasses.FrozenInstanceError):
        recipe.training.epochs = 3  # type: ignore[misc]


def test_unknown_key_suggests_the_close_one():
    message = error_of({"data": {"shufle_buffer": 10}})
    assert "unknown key 'data.shufle_buffer'" in message
    assert "did you mean 'shuffle_buffer'?" in message


def test_unknown_section_is_rejected_with_suggestion():
    message = error_of({"trainig": {"epochs": 1}})
    assert "unknown key 'trainig'" in message and "'training'" in message


@pytest.mark.parametrize("raw, expected", [
    ({"training": {"global_batch_size": 0}}, "training.global_batch_size must be >= 1, got 0"),
    ({"optimizer": {"learning_rate": -0.1}}, "optimizer.learning_rate must be > 0.0, got -0.1"),
    ({"training": {"epochs": "ten"}}, "training.epochs must be an integer, got str 'ten'"),
    ({"training": {"epochs": 2.5}}, "training.epochs must be an integer, got float 2.5"),
    ({"training": {"jit_compile": "yes"}}, "training.jit_compile must be true or false"),
    ({"runtime": {"precision": "fp16"}}, "runtime.precision must be one of auto, float32"),
    ({"data": {"augment": ["flip", "flop"]}}, "data.augment[1] must be one of"),
    ({"data": {"validation_fraction": 1.0}}, "data.validation_fraction must be < 1.0, got 1.0"),
    ({"data": "builtin"}, "data must be a mapping, got str 'builtin'"),
    ({"data": {"source": "image_folder", "image_size": [32, 32]}},
     "data.path is required when data.source is 'image_folder'"),
    ({"data": {"source": "tfds"}}, "data.name (a TFDS dataset name) is required"),
    # The batch plan's own message (tfaccel.config.batching is the one place it is checked).
    ({"training": {"global_batch_size": 100, "accumulation_steps": 3}},
     "the per-replica batch 100 (global batch 100 / 1 replicas) is not divisible by "
     "accumulation_steps 3"),
    ({"training": {"global_batch_size": 100, "micro_batch_size": 30}},
     "micro_batch_size 30 does not divide the per-replica batch 100"),
    ({"training": {"accumulation_steps": 2, "micro_batch_size": 16}}, "not both"),
])
def test_bad_values_name_the_key_and_the_value(raw, expected):
    message = error_of(raw)
    assert message.startswith("r.yaml: ")
    assert expected in message


def test_yaml_style_scientific_notation_is_a_number():
    # PyYAML reads `1e-3` as a string (YAML 1.1); a user means a number.
    assert recipe_from_dict({"optimizer": {"learning_rate": "1e-3"}}).optimizer.learning_rate \
        == pytest.approx(0.001)


def test_null_is_accepted_only_where_optional():
    assert recipe_from_dict({"data": {"validation_split_name": None}}
                            ).data.validation_split_name is None
    assert "training.epochs must be an integer, got nothing (null)" in error_of(
        {"training": {"epochs": None}})


def test_overrides_are_typed_and_checked_like_the_file():
    recipe = recipe_from_dict({}, overrides=["training.epochs=3", "data.augment=[flip, crop]",
                                             "optimizer.learning_rate=0.01"])
    assert recipe.training.epochs == 3
    assert recipe.data.augment == ["flip", "crop"]
    assert recipe.optimizer.learning_rate == 0.01
    assert "training.epochs must be >= 1, got 0" in error_of({}, ["training.epochs=0"])
    assert "unknown key 'training.epoch'" in error_of({}, ["training.epoch=3"])
    assert "did you mean 'epochs'" in error_of({}, ["training.epoch=3"])
    assert "expected KEY=VALUE" in error_of({}, ["training.epochs"])


def test_overrides_do_not_change_the_input_mapping():
    raw = {"training": {"epochs": 5}}
    apply_overrides(raw, ["training.epochs=1"])
    assert raw == {"training": {"epochs": 5}}


def test_relative_paths_resolve_against_the_recipe_folder(tmp_path):
    (tmp_path / "sub").mkdir()
    path = write(tmp_path / "sub", "data:\n  source: image_folder\n  path: ../images\n"
                 "  image_size: [8, 8]\n  data_dir: tfds\n")
    recipe = load_recipe(path)
    assert recipe.data.path == str((tmp_path / "images").resolve())
    assert recipe.data.data_dir == str((tmp_path / "sub" / "tfds").resolve())


def test_python_source_path_is_an_import_path_not_a_file(tmp_path):
    path = write(tmp_path, "data:\n  source: python\n  path: my_pkg.sources:make\n")
    assert load_recipe(path).data.path == "my_pkg.sources:make"
    path = write(tmp_path, "data:\n  source: python\n  path: src/make.py:build\n")
    assert load_recipe(path).data.path == f"{(tmp_path / 'src' / 'make.py').resolve()}:build"


def test_missing_file_and_malformed_yaml(tmp_path):
    with pytest.raises(RecipeError, match="does not exist"):
        load_recipe(tmp_path / "nope.yaml")
    bad = write(tmp_path, "training:\n  epochs: [1,\n")
    with pytest.raises(RecipeError, match=r"is not valid YAML at line \d+"):
        load_recipe(bad)
    top = write(tmp_path, "- 1\n- 2\n", name="list.yaml")
    with pytest.raises(RecipeError, match="top level must be a mapping"):
        load_recipe(top)


def test_unknown_model_and_model_param_are_rejected():
    # The same check (and message) as models.build_model's, at validation time.
    assert "model (name 'small_cn', params): Unknown model name 'small_cn' (did you mean " \
        "'small_cnn'?). Known models: " in error_of({"model": {"name": "small_cn"}})
    assert "Unknown parameter 'dropuot' (did you mean 'dropout'?) for model 'small_cnn'." in \
        error_of({"model": {"name": "small_cnn", "params": {"dropuot": 0.1}}})
    # Values too, which validation did not check before.
    assert "model 'small_cnn' parameter 'dropout' must be a number in [0, 1), got 1.5" in \
        error_of({"model": {"name": "small_cnn", "params": {"dropout": 1.5}}})


def test_resolved_recipe_round_trips_through_yaml(tmp_path):
    recipe = recipe_from_dict({"name": "x", "training": {"epochs": 2}})
    again = recipe_from_dict(yaml.safe_load(dump_recipe(recipe)))
    assert again == recipe


def test_every_key_is_described_and_documented_in_the_docs():
    readme = (Path(__file__).resolve().parents[1] / "docs" / "recipes.md").read_text()
    rows = describe_keys()
    assert len(rows) > 40
    for key, _default, help_text in rows:
        assert help_text, key
        assert f"`{key}`" in readme, f"docs/recipes.md does not document {key}"


def test_docs_keys_table_is_exactly_the_generated_one():
    # Names alone would let a changed default or meaning go stale in the docs.
    from click.testing import CliRunner

    from tfaccel.cli.main import main

    readme = (Path(__file__).resolve().parents[1] / "docs" / "recipes.md").read_text()
    start = readme.index("\n", readme.index("<!-- keys:start")) + 1
    table = readme[start:readme.index("<!-- keys:end -->")]
    generated = CliRunner().invoke(main, ["keys", "--markdown"]).output
    assert table == generated
    assert "| `training.keep_checkpoints` | `3` | How many step checkpoints to keep" in table


def test_json_schema_accepts_every_shipped_recipe_and_rejects_mistakes():
    import json

    import jsonschema
    from click.testing import CliRunner

    from tfaccel.cli.main import main

    result = CliRunner().invoke(main, ["keys", "--json-schema"])
    assert result.exit_code == 0
    schema = json.loads(result.output)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    recipes = sorted((Path(__file__).resolve().parents[1] / "recipes").glob("*.yaml"))
    assert len(recipes) >= 6
    for path in recipes:
        errors = list(validator.iter_errors(yaml.safe_load(path.read_text())))
        assert not errors, (path.name, [e.message for e in errors])

    def messages(recipe):
        return [e.message for e in validator.iter_errors(recipe)]

    assert any("'epochz' was unexpected" in m
               for m in messages({"training": {"epochz": 3}}))
    assert any("'three' is not valid under any of the given schemas" in m
               or "'three' is not of type 'integer'" in m
               for m in messages({"training": {"epochs": "three"}}))
    assert any("0 is less than the minimum of 1" in m
               for m in messages({"training": {"epochs": 0}}))
    assert any("'sgdd' is not valid under any of the given schemas" in m
               for m in messages({"optimizer": {"name": "sgdd"}}))
    assert messages({"optimizer": {"name": "nadam", "schedule": "ExponentialDecay"},
                     "training": {"loss": "my.losses:focal", "metrics": [
                         "accuracy", {"name": "auc", "params": {"num_thresholds": 50}}]}}) == []
    assert messages({"training": {"metrics": [{"name": "acuracy"}]}})
    assert messages({"model": {"name": "small_cnn", "params": {"dropout": 0.1}},
                     "training": {"checkpoint_every_steps": None}}) == []
    # The schema's defaults are the recipe's defaults.
    assert schema["properties"]["training"]["properties"]["keep_checkpoints"]["default"] == 3


def test_json_schema_agrees_with_validation_on_empty_sections():
    # `training:` with nothing under it is a valid recipe (every default); an editor using
    # the schema must not flag it.
    import jsonschema

    from tfaccel.config.schema import json_schema

    raw = yaml.safe_load("training:\nruntime:\n")
    assert recipe_from_dict(raw) == Recipe()
    assert [e.message for e in jsonschema.Draft202012Validator(json_schema()).iter_errors(raw)] \
        == []


def test_recipe_and_build_model_give_the_same_model_parameter_message():
    # One check (models.check_params): validation adds only the file and section in front.
    from tfaccel import models

    for params in ({"dropuot": 0.1}, {"dropout": 1.5}, {"filters": "wide"}):
        with pytest.raises(UserInputError) as direct:
            models.build_model("small_cnn", input_shape=(8, 8, 3), num_classes=3, **params)
        message = error_of({"model": {"name": "small_cnn", "params": params}})
        assert message == f"r.yaml: model (name 'small_cnn', params): {direct.value}"


def test_the_recipe_allows_exactly_the_values_each_registry_implements():
    # The recipe (TF-free, so `validate` stays fast) lists allowed values itself; each list
    # must equal what the layer that implements them accepts, or a recipe that validates
    # would fail at run time (or a new registry entry stay unreachable from recipes).
    import typing

    from tfaccel.config import recipe as recipe_lib
    from tfaccel.data import augment, service
    from tfaccel.data import from_recipe as data_config
    from tfaccel.engine import precision, strategy

    def allowed(cls, key):
        hint = typing.get_type_hints(cls)[key]
        if typing.get_origin(hint) is list:
            hint = typing.get_args(hint)[0]
        return set(typing.get_args(hint))

    from tfaccel.config import sources

    assert set(sources.names()) == {*data_config.SOURCES}
    assert allowed(recipe_lib.DataConfig, "augment") == set(
        recipe_lib.AUGMENTATIONS + recipe_lib.DECODE_AUGMENTATIONS)
    assert set(recipe_lib.AUGMENTATIONS) == set(augment.AUGMENTATIONS)
    assert recipe_lib.DECODE_AUGMENTATIONS == ("random_resized_crop",)  # from_image_folder's
    assert allowed(recipe_lib.RuntimeConfig, "strategy") == set(strategy.STRATEGY_KINDS)
    assert allowed(recipe_lib.RuntimeConfig, "precision") == set(precision.POLICIES)
    assert service.PROCESSING_MODES is recipe_lib.PROCESSING_MODES  # one list, imported


def test_flatten_recipe_gives_exactly_the_keys_describe_keys_lists():
    flat = flatten_recipe(recipe_to_dict(Recipe()))
    assert list(flat) == [key for key, _, _ in describe_keys()]
    assert flat["training.epochs"] == Recipe().training.epochs
    assert flat["data.service.dispatcher"] == Recipe().data.service.dispatcher


def test_flatten_recipe_keeps_the_mapping_valued_keys_whole():
    assert mapping_keys() == ("data.features", "data.table.types", "model.params",
                              "optimizer.params",
                              "optimizer.schedule_params", "training.loss_params")
    features = {"image": {"dtype": "uint8", "shape": [32, 32, 3], "kind": "image"}}
    raw = {"model": {"name": "mlp", "params": {"width": 64}},
           "data": {"features": features, "service": {}}}
    assert flatten_recipe(raw) == {"model.name": "mlp", "model.params": {"width": 64},
                                   "data.features": features, "data.service": {}}
    # Told to walk into everything, it does (an explicit choice, not the rule's default).
    assert flatten_recipe(raw, whole=()) == {
        "model.name": "mlp", "model.params.width": 64, "data.features.image.dtype": "uint8",
        "data.features.image.shape": [32, 32, 3], "data.features.image.kind": "image",
        "data.service": {}}


def test_flatten_recipe_names_a_value_that_is_not_a_mapping():
    with pytest.raises(UserInputError, match=r"raw must be a mapping.*list \['a'\]"):
        flatten_recipe(["a"])


def test_one_did_you_mean_hint_for_every_message():
    from tfaccel.errors import did_you_mean

    assert did_you_mean("sorce", ["seed", "source"]) == " (did you mean 'source'?)"
    assert did_you_mean(3, [1, 2, 30]) == " (did you mean '30'?)"
    assert did_you_mean("zzz", ["source"]) == ""
    # No module words its own hint (recipe, models, data, export used four wordings).
    package = Path(__file__).resolve().parents[1] / "tfaccel"
    wording = [str(path.relative_to(package)) for path in sorted(package.rglob("*.py"))
               if "did you mean {" in path.read_text(encoding="utf-8").lower()
               or "get_close_matches" in path.read_text(encoding="utf-8")]
    assert wording == ["errors.py"]


@pytest.mark.parametrize("source, extra", [
    ("image_folder", {"image_size": [8, 8]}), ("text_folder", {}), ("csv", {}),
    ("text_lines", {}), ("audio_folder", {}), ("python", {}),
    ("timeseries", {"timeseries": {"sequence_length": 4}}),
    ("tfrecords", {"features": {"image": {"dtype": "string", "kind": "image"}}}),
])
@pytest.mark.parametrize("key, value", [("validation_split_name", "val"),
                                        ("train_split", "train[:50%]")])
def test_a_named_split_is_refused_where_the_source_has_none(source, extra, key, value):
    # Only tfds (builtin) and arrays files hold named splits; every other source read
    # past data.train_split / data.validation_split_name, so a split named `val` on an
    # image folder trained without validation, silently. Their defaults stay accepted
    # (a run's resolved recipe.yaml holds every key).
    data = {"source": source, "path": "x.py:f" if source == "python" else "somewhere",
            **extra}
    recipe_from_dict({"data": data})  # the defaults: accepted
    with pytest.raises(RecipeError) as error:
        recipe_from_dict({"data": {**data, key: value}})
    message = str(error.value)
    assert f"data.{key} {value!r}" in message and f"data.source {source!r}" in message
    assert "validation_fraction" in message


@pytest.mark.parametrize("value, instead", [("test", "data.validation_split_name: test"),
                                            (None, "data.validation_split_name: null"),
                                            (0.1, "data.validation_fraction: 0.1")])
def test_the_old_validation_split_key_is_refused_with_the_key_to_use(tmp_path, value, instead):
    # data.validation_split named a split in a recipe and a fraction in Keras: the recipe's
    # key is data.validation_split_name now; the old spelling is refused, never ignored.
    expected = (f"data.validation_split (got {value!r}) is no longer a recipe key: Keras' "
                "validation_split is a held-out fraction, so a recipe names the validation "
                "split with data.validation_split_name (a TFDS split such as test, or "
                "x_test/y_test of an .npz file) and the held-out fraction with "
                f"data.validation_fraction; write {instead}.")
    assert error_of({"data": {"validation_split": value}}).endswith(expected)
    given = "null" if value is None else value
    assert error_of({}, [f"data.validation_split={given}"]) == (
        f"--set 'data.validation_split={given}': {expected}")


def test_the_old_validation_split_key_exits_2_through_the_cli(tmp_path):
    from click.testing import CliRunner

    from tfaccel.cli.main import main

    path = tmp_path / "r.yaml"
    path.write_text("data: {source: builtin, validation_split: test}\n")
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 2, result.output
    assert "write data.validation_split_name: test." in " ".join(result.output.split())
    assert "Traceback" not in result.output
