"""The source table (tfaccel/config/sources.py): every layer derives its source rules from it."""

import importlib
import inspect
import pkgutil

import pytest
from click.testing import CliRunner

from tfaccel.cli.main import main
from tfaccel.config import input_paths, sources
from tfaccel.config.recipe import recipe_from_dict
from tfaccel.config.schema import json_schema
from tfaccel.errors import RecipeError

FAKE_MODULE = '''
from tfaccel.data.sources import base

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


class FakeSource(base.Source):
    names = ("fake",)

    def build(self, *, batch_size, common, train_options, validation_options):
        raise NotImplementedError
'''


def test_every_entry_names_a_source_class_that_serves_it():
    from tfaccel.data import from_recipe
    from tfaccel.data.sources import base

    for entry in sources.TABLE:
        cls = from_recipe.source_class(entry.name)
        assert issubclass(cls, base.Source) and cls is not base.Source
        # The class's own list of names (kept until the source modules drop it) agrees.
        assert entry.name in cls.names, entry
    assert list(from_recipe.SOURCES) == list(sources.names())


def test_every_source_module_is_in_the_table():
    # A Source class written in tfaccel/data/sources but left out of the table would be
    # unreachable from recipes: each one is some entry's builder.
    import tfaccel.data.sources as package
    from tfaccel.data.sources import base

    builders = {entry.builder for entry in sources.TABLE}
    found = set()
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if (issubclass(cls, base.Source) and cls is not base.Source
                    and cls.__module__ == module.__name__):
                found.add(f"{module.__name__}:{name}")
    assert found == builders
    assert len(found) == 10  # tfds serves two names (builtin, tfds)


def test_the_table_records_what_each_source_does_today():
    assert sources.with_split("named") == ("builtin", "tfds", "arrays")
    # The class folders count as Keras' loaders (test_class_folder.py's
    # test_a_recipe_holds_out_keras_count_in_every_class_folder checks the behaviour).
    assert {e.name for e in sources.TABLE if e.split == "keras_int"} == {
        "image_folder", "text_folder", "audio_folder"}
    assert {e.name: e.compressions for e in sources.TABLE if e.compressions} == {
        "text_lines": ("GZIP", "ZLIB"), "csv": ("GZIP",), "tfrecords": ("GZIP", "ZLIB")}
    assert sources.COMPRESSIONS == ("GZIP", "ZLIB")
    assert {e.name for e in sources.TABLE if e.path == "none"} == {"builtin", "tfds"}
    assert [e.name for e in sources.TABLE if e.python_elements] == ["python"]
    assert [e.name for e in sources.TABLE if e.table_columns] == ["csv"]
    assert all(e.split in sources.SPLIT_RULES for e in sources.TABLE)
    # One hold-out rule per family of sources, and no rule that no source follows.
    assert {rule: sources.with_split(rule) for rule in sources.SPLIT_RULES} == {
        "named": ("builtin", "tfds", "arrays"),
        "round": ("text_lines", "csv", "tfrecords", "python"),
        "keras_int": ("image_folder", "text_folder", "audio_folder"),
        "last_rows_int": ("timeseries",)}
    assert len(set(sources.names())) == len(sources.TABLE)


def test_an_unknown_source_is_refused_naming_every_table_entry():
    with pytest.raises(RecipeError) as error:
        recipe_from_dict({"data": {"source": "image_folders", "path": "x"}})
    assert str(error.value) == (
        "recipe: data.source must be one of " + ", ".join(sources.names())
        + "; got str 'image_folders' (did you mean 'image_folder'?).")


@pytest.fixture
def fake_source(tmp_path, monkeypatch):
    """A source added as the table says one is added: one entry and one module."""
    (tmp_path / "fake_source_module.py").write_text(FAKE_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    entry = sources.SourceEntry(
        "fake", "fake_source_module:FakeSource", "glob", noun="fake pattern",
        required=(("data.features", "the fake feature spec"),), compressions=("ZLIB",),
        augment="none", split="round", classes_from="its fake labels")
    monkeypatch.setattr(sources, "TABLE", (*sources.TABLE, entry))
    return tmp_path


def _fake_recipe(folder, **data):
    text = "data:\n  source: fake\n  path: part-*.fake\n  features: {x: {dtype: float32}}\n"
    text += "".join(f"  {key}: {value}\n" for key, value in data.items())
    path = folder / "fake.yaml"
    path.write_text(text)
    return str(path)


def test_a_new_source_is_seen_by_the_recipe_validate_input_paths_and_the_registry(
        fake_source):
    runner = CliRunner()
    recipe = _fake_recipe(fake_source)
    missing = runner.invoke(main, ["validate", recipe])
    assert missing.exit_code == 2
    assert "data.path: the fake pattern" in missing.output
    assert "part-*.fake' matches no file." in missing.output
    (fake_source / "part-0.fake").write_text("1\n")
    ok = runner.invoke(main, ["validate", recipe])
    assert ok.exit_code == 0, ok.output
    assert f"{recipe}: OK (fake data" in ok.output
    # Its own rules: the compressions it reads, its required keys, no augmentation.
    zlib = runner.invoke(main, ["validate", recipe, "--set", "data.compression=ZLIB"])
    assert zlib.exit_code == 0, zlib.output
    gzip = runner.invoke(main, ["validate", recipe, "--set", "data.compression=GZIP"])
    assert gzip.exit_code == 2
    assert ("data.compression 'GZIP' is not read by data.source 'fake': it takes ZLIB (or "
            "empty).") in gzip.output
    flip = runner.invoke(main, ["validate", recipe, "--set", "data.augment=[flip]"])
    assert flip.exit_code == 2 and "not with data.source 'fake'" in flip.output
    with pytest.raises(RecipeError, match=r"data.features \(the fake feature spec\) is "
                                          "required when data.source is 'fake'"):
        recipe_from_dict({"data": {"source": "fake", "path": "x"}})
    assert "fake" in json_schema()["properties"]["data"]["properties"]["source"]["enum"]

    from tfaccel.data import from_recipe
    from tfaccel.data.sources import base

    loaded = recipe_from_dict({"data": {"source": "fake", "path": "x", "features": {"x": 1}}})
    assert from_recipe.SOURCES["fake"].__name__ == "FakeSource"
    assert "fake" in list(from_recipe.SOURCES)
    assert type(from_recipe.source_for(loaded.data, seed=0)).__name__ == "FakeSource"
    with pytest.raises(Exception, match="holds 1 class in its fake labels"):
        base.refuse_one_class(1, config=loaded.data)


def test_input_paths_checks_each_path_key_of_the_entry(tmp_path):
    # text_lines reads a second path (data.validation_path): the table's extra_paths.
    (tmp_path / "train.tsv").write_text("a\tx\n")
    loaded = recipe_from_dict({"data": {"source": "text_lines", "path": "train.tsv",
                                        "validation_path": "val-*.tsv"}}, base_dir=tmp_path)
    with pytest.raises(RecipeError) as error:
        input_paths.check_input_paths(loaded)
    assert str(error.value) == (f"recipe: data.validation_path: the text lines pattern "
                                f"{str(tmp_path / 'val-*.tsv')!r} matches no file.")
    (tmp_path / "val-0.tsv").write_text("b\ty\n")
    input_paths.check_input_paths(loaded)
    assert sources.path_keys(sources.entry("text_lines")) == (
        ("path", "glob"), ("validation_path", "glob"))
    assert sources.path_keys(sources.entry("tfds")) == ()
