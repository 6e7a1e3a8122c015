"""Recipes over tables (`data.source: csv`): columns encoded by Keras' FeatureSpace, then a model.

The label of the generated rows is decided by a numeric and a categorical column together,
so a run learns it only when both reach the model encoded as they should (numbers
normalised, strings one-hot).
"""

import json

import numpy as np
import pytest
from click.testing import CliRunner

from tfaccel.cli.main import main

ROWS_PER_FILE = 150


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    """4 CSV files: a (float), b (noise), city (string), zone (int code), row_id, label.

    label = 1 when a > 0 in cities x and z, when a < 0 in city y; zone is label-free noise.
    """
    folder = tmp_path_factory.mktemp("table")
    rng = np.random.default_rng(0)
    for k in range(4):
        lines = ["a,b,city,zone,row_id,label"]
        for i in range(ROWS_PER_FILE):
            a, b = 3 * rng.normal() + 10, rng.normal()  # a far from 0 mean: needs normalising
            city = rng.choice(["x", "y", "z"])
            label = int((a > 10) != (city == "y"))
            lines.append(f"{a:.4f},{b:.4f},{city},{rng.integers(0, 5)},{k * 1000 + i},{label}")
        (folder / f"part-{k}.csv").write_text("\n".join(lines) + "\n")
    return folder


def _recipe(tmp_path, table, *, table_keys="", epochs=12, model="{name: mlp, params: "
            "{hidden_units: [32], dropout: 0.0}}"):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        f"name: table\ndata: {{source: csv, path: {table}/part-*.csv, label_key: label, "
        f"validation_fraction: 0.25{table_keys}}}\nmodel: {model}\n"
        "optimizer: {learning_rate: 1e-2}\n"
        f"training: {{epochs: {epochs}, global_batch_size: 32}}\n"
        f"runtime: {{runs_dir: {tmp_path / 'runs'}, verbose: 0}}\n")
    return recipe


def _run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def learned_run(tmp_path_factory, table):
    """The run directory of the table recipe (row_id ignored) trained for its 12 epochs.

    Read, never written, by the learning test, the export test and the raw-columns test:
    each checks what a finished table run holds, none needs a run of its own.
    """
    folder = tmp_path_factory.mktemp("learned")
    recipe = _recipe(folder, table, table_keys=", table: {ignore: [row_id]}")
    result = _run("train", recipe, "--run-dir", folder / "run")
    assert result.exit_code == 0, result.output
    return folder / "run"


def test_a_csv_recipe_trains_on_encoded_columns_and_learns(learned_run):
    summary = json.loads((learned_run / "summary.json").read_text())
    dataset = summary["dataset"]
    # 3 training files and 1 held out, every row counted.
    assert (dataset["train_examples"], dataset["validation_examples"]) == (450, 150)
    encoded = dataset["table"]
    assert encoded["numeric"] == ["a", "b", "zone"] and encoded["categorical"] == ["city"]
    assert encoded["ignored"] == ["row_id"]
    # a, b, zone normalised (3) + city one-hot with one out-of-vocabulary slot (3 + 1).
    assert dataset["input_shape"] == [7] == [encoded["features"]]
    # The label needs a and city together: chance is 0.5, a alone or city alone too.
    assert summary["final_metrics"]["val_accuracy"] >= 0.9, summary["final_metrics"]
    assert (learned_run / "feature_space.keras").is_file()


def test_integer_columns_can_be_categorical(tmp_path, table):
    from tfaccel.config.recipe import recipe_from_dict
    from tfaccel.data.from_recipe import build_datasets

    recipe = recipe_from_dict({"data": {
        "source": "csv", "path": f"{table}/part-*.csv", "label_key": "label",
        "validation_fraction": 0.25, "table": {"categorical": ["zone"], "ignore": ["row_id"]}}})
    train, val, info = build_datasets(recipe.data, global_batch_size=32, num_replicas=1,
                                      seed=0, deterministic=True)
    assert info.table.categorical == ["city", "zone"]
    assert info.table.numeric == ["a", "b"]
    # a, b (2) + city (3 + 1) + zone (5 codes + 1).
    assert info.input_shape == (12,)
    features, labels = next(iter(train))
    assert features.shape == (32, 12) and features.dtype.name == "float32"
    # Every row: the 10 one-hot slots of city and zone hold 0 or 1, two of them 1.
    values = features.numpy()
    assert (np.isin(values, [0.0, 1.0]).sum(axis=1) >= 10).all()
    assert info.table.features == 12
    seen = sum(int(y.shape[0]) for _, y in val)
    assert seen == 150


@pytest.mark.parametrize("keys, words", [
    (", table: {ignore: [rowid]}", ["data.table.ignore", "'rowid'", "row_id"]),
    (", table: {categorical: [label]}", ["data.table.categorical", "'label'", "label column"]),
    (", table: {categorical: [a]}", ["data.table.categorical", "'a'", "fractional numbers"]),
])
def test_table_keys_name_their_mistakes(tmp_path, table, keys, words):
    result = _run("train", _recipe(tmp_path, table, table_keys=keys, epochs=1))
    assert result.exit_code == 2, result.output
    message = result.output[result.output.index("Error: "):].strip()
    assert "Traceback" not in result.output and "\n" not in message, result.output
    for word in words:
        assert word in message, (word, message)


def test_bench_and_doctor_run_on_a_csv_recipe(tmp_path, table):
    recipe = _recipe(tmp_path, table)
    result = _run("bench", recipe, "--batches", 3, "--repeats", 1, "--no-epochs")
    assert result.exit_code == 0, result.output
    assert "truly sequential" in result.output
    result = _run("doctor", recipe, "--json", "--steps", 3, "--repeats", 1)
    assert result.exit_code == 0, result.output
    report = json.loads(result.output[result.output.index("{"):])
    assert report["pipeline_examples_per_sec"] > 0 and report["model_examples_per_sec"] > 0


def test_export_of_a_table_run_ships_its_feature_space_and_says_what_the_model_takes(
        tmp_path, learned_run):
    import keras

    result = _run("export", learned_run, "--format", "keras", "--out", tmp_path / "out")
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "out" / "export.json").read_text())
    assert "feature_space.keras" in report["input"]["is"] and "pixels" not in \
        report["input"]["is"]
    assert report["input"]["shape"] == [None, 7] and report["top1_agreement"] == 1.0
    # Raw rows -> the shipped FeatureSpace -> the exported model: the run's own predictions.
    space = keras.saving.load_model(tmp_path / "out" / "feature_space.keras")
    exported = keras.saving.load_model(tmp_path / "out" / "model.keras", compile=False)
    trained = keras.saving.load_model(learned_run / "model.keras", compile=False)
    rows = {"a": np.array([7.0, 13.0, 13.0]), "b": np.zeros(3), "city": np.array(["x", "y", "x"]),
            "zone": np.array([1, 2, 9])}
    encoded = space(rows)
    assert encoded.shape == (3, 7)
    np.testing.assert_allclose(exported.predict(encoded, verbose=0),
                               trained.predict(encoded, verbose=0), atol=1e-2)
    # One model on the raw columns as the file holds them (text, NA for a missing value).
    from tfaccel.tools.export.table_runs import model_on_raw_columns

    raw = model_on_raw_columns(learned_run)
    texts = {name: np.array(values, dtype=object) for name, values in {
        "a": ["7", "13", "NA"], "b": ["0", "0", "0"], "city": ["x", "y", "x"],
        "zone": ["1", "2", "9"]}.items()}
    predicted = raw.predict(texts, verbose=0)
    np.testing.assert_allclose(predicted[:2], trained.predict(encoded, verbose=0)[:2],
                               atol=1e-5)
    assert np.isfinite(predicted[2]).all()  # NA: the training mean, as the run imputes


def test_the_feature_space_is_adapted_without_reading_the_files_again(tmp_path, table,
                                                                      monkeypatch):
    from tfaccel.config.recipe import recipe_from_dict
    from tfaccel.data.from_recipe import build_datasets
    from tfaccel.reading import table_plan

    scanned = []
    scan_files = table_plan.scan_files
    monkeypatch.setattr(table_plan, "scan_files",
                        lambda files, **kw: scanned.append(len(files)) or scan_files(files, **kw))
    recipe = recipe_from_dict({"data": {"source": "csv", "path": f"{table}/part-*.csv",
                                        "label_key": "label", "validation_fraction": 0.25}})
    build_datasets(recipe.data, global_batch_size=32, num_replicas=1, seed=0,
                   deterministic=True)
    assert scanned == [3, 1]  # the training and the validation files, each read once


def test_a_resumed_table_run_equals_an_uninterrupted_one(tmp_path, table):
    # The FeatureSpace is adapted again on resume: on the same files in the same order it
    # must give the same statistics and vocabularies, or the weights would drift.
    import keras

    recipe = _recipe(tmp_path, table, table_keys=", table: {ignore: [row_id]}", epochs=2)
    settings = ["--set", "runtime.precision=float32", "--set", "runtime.deterministic=true"]
    whole = _run("train", recipe, "--run-dir", tmp_path / "whole", *settings)
    assert whole.exit_code == 0, whole.output
    cut = _run("train", recipe, "--run-dir", tmp_path / "cut", *settings,
               "--set", "training.epochs=1")
    assert cut.exit_code == 0, cut.output
    resumed = _run("train", "--resume", tmp_path / "cut", "--set", "training.epochs=2")
    assert resumed.exit_code == 0, resumed.output
    weights = [keras.saving.load_model(tmp_path / name / "model.keras").get_weights()
               for name in ("whole", "cut")]
    assert len(weights[0]) == len(weights[1])
    for a, b in zip(*weights):
        np.testing.assert_array_equal(a, b)


@pytest.mark.heavy  # outside the 15-minute CI budget: ~27 s; accumulation under 2 replicas is test_accumulation's, tables the quicker runs here
def test_a_table_run_on_two_replicas_with_accumulation_learns(tmp_path, table, logical_cpus):
    recipe = _recipe(tmp_path, table, table_keys=", table: {ignore: [row_id]}")
    result = _run("train", recipe, "--run-dir", tmp_path / "run",
                  "--set", "runtime.strategy=mirrored",
                  "--set", f"runtime.devices=[{', '.join(logical_cpus)}]",
                  "--set", "training.accumulation_steps=2")
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["strategy"] == "mirrored" and summary["replicas"] == 2
    # Each step: 2 replicas x 2 micro-batches of 8 rows; the last partial batch dropped.
    assert summary["dataset"]["train_examples"] == 450
    assert summary["final_metrics"]["val_accuracy"] >= 0.9, summary["final_metrics"]


def test_passes_over_the_training_split_read_every_row_under_a_strategy(tmp_path, table,
                                                                        logical_cpus):
    # Batches of a pass that adapts a FeatureSpace or a vocabulary, or finds the label
    # range, are not training batches: a strategy in scope must not drop the last partial
    # one (optimize's default under 2 replicas), or the statistics silently miss rows.
    import tensorflow as tf

    from tfaccel.config.recipe import recipe_from_dict
    from tfaccel.data.from_recipe import build_datasets, source_for
    from tfaccel.data.tail import TailOptions

    lines = tmp_path / "lines"
    lines.mkdir()
    for k in range(2):
        (lines / f"part-{k}.tsv").write_text("".join(f"{'ab'[i % 2]}\tword{i} text\n"
                                                     for i in range(45)))
    sources = {"csv": ({"path": f"{table}/part-*.csv", "label_key": "label"}, 600),
               "text_lines": ({"path": str(lines / "part-*.tsv")}, 90)}
    strategy = tf.distribute.MirroredStrategy(logical_cpus)
    for name, (keys, rows) in sources.items():
        recipe = recipe_from_dict({"data": {"source": name, **keys}})
        source = source_for(recipe.data, seed=0)
        with strategy.scope():
            built = source.build(batch_size=64, common=TailOptions(),
                                 train_options=TailOptions(), validation_options=TailOptions())
            plain = source.plain_training(built, batch_size=64)
            assert sum(int(tf.shape(tf.nest.flatten(b)[0])[0]) for b in plain) == rows, name
            # The whole recipe build (label range, adaptation) works under the strategy.
            build_datasets(recipe.data, global_batch_size=64, num_replicas=2, seed=0,
                           deterministic=True)


def test_one_model_on_the_raw_columns_gives_the_run_s_predictions(tmp_path, learned_run):
    import keras

    from tfaccel.data import table_features

    space = keras.saving.load_model(learned_run / "feature_space.keras")
    trained = keras.saving.load_model(learned_run / "model.keras", compile=False)
    combined = table_features.with_feature_space(trained, space)
    assert sorted(combined.input) == ["a", "b", "city", "zone"]  # row_id left out
    rows = {"a": np.array([7.0, 13.0, 13.0], "float32"), "b": np.zeros(3, "float32"),
            "city": np.array(["x", "y", "w"], object),  # as a pandas column holds strings
            "zone": np.array([1.0, 2.0, 9.0], "float32")}
    expected = trained.predict(space(rows), verbose=0)
    np.testing.assert_allclose(combined.predict(rows, verbose=0), expected, atol=1e-6)
    # It saves and loads as one file, no custom objects.
    combined.save(tmp_path / "combined.keras")
    loaded = keras.saving.load_model(tmp_path / "combined.keras", compile=False)
    np.testing.assert_allclose(loaded.predict(rows, verbose=0), expected, atol=1e-6)
