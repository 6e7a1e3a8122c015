"""tfaccel.data.table_features: any column name reaches Keras' FeatureSpace as a valid layer name."""

import json

from click.testing import CliRunner

from tfaccel.cli.main import main
from tfaccel.data import table_features

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


def test_keras_names_are_valid_unique_and_keep_safe_names_as_they_are():
    names = ["od280/od315_of_diluted_wines", "a/b c", "a_b_c", "plain", "x y", "x_y_2",
             "x/y", "é"]
    safe = table_features.keras_names(names)
    assert list(safe) == names  # every feature named, in order
    # Names Keras takes keep themselves, even when a renamed one would have collided.
    assert safe["a_b_c"] == "a_b_c" and safe["plain"] == "plain" and safe["x_y_2"] == "x_y_2"
    assert safe["od280/od315_of_diluted_wines"] == "od280_od315_of_diluted_wines"
    assert safe["a/b c"] == "a_b_c_2"
    assert safe["x y"] == "x_y" and safe["x/y"] == "x_y_3"
    assert len(set(safe.values())) == len(names)
    assert all(set(v) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                             "0123456789_.-") for v in safe.values()), safe


def test_a_column_named_with_a_slash_and_a_space_trains_and_keeps_its_name(tmp_path):
    # Keras refuses '/' in a layer name (a raw ValueError, exit 1, before this was fixed).
    lines = ["a/b c,a_b_c,label"]
    for i in range(64):
        x = (i % 8) - 3.5
        lines.append(f"{x},{(i * 7) % 5},{int(x > 0)}")
    (tmp_path / "t.csv").write_text("\n".join(lines) + "\n")
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        f"name: t\ndata: {{source: csv, path: {tmp_path / 't.csv'}, label_key: label, "
        "validation_fraction: 0.25}\nmodel: {name: mlp, params: {hidden_units: [8]}}\n"
        "training: {epochs: 1, global_batch_size: 16}\n"
        f"runtime: {{runs_dir: {tmp_path / 'runs'}, verbose: 0}}\n")
    result = CliRunner().invoke(main, ["train", str(recipe), "--run-dir",
                                       str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    table = json.loads((tmp_path / "run" / "summary.json").read_text())["dataset"]["table"]
    assert table["numeric"] == ["a/b c", "a_b_c"]  # the summary's plan keeps the user's names
    import keras

    space = keras.saving.load_model(tmp_path / "run" / "feature_space.keras")
    assert sorted(space.get_inputs()) == ["a_b_c", "a_b_c_2"]



def test_a_model_on_raw_columns_predicts_what_the_model_on_encoded_rows_predicts(tmp_path):
    # Numbers with NA (imputed + indicator), words, a date column and a name Keras refuses:
    # the raw columns as text through with_raw_columns, saved and loaded back, give the
    # outputs the model gives on the run's converted and encoded rows.
    import keras
    import numpy as np
    import tensorflow as tf

    from tfaccel.config.recipe import recipe_from_dict
    from tfaccel.data.sources.csv_tables import CsvSource

    header = ["size cm", "kind", "day", "label"]
    rows = [[("NA" if i % 5 == 0 else f"{i * 0.5}"), "abc"[i % 3],
             f"2021-{1 + i % 12:02d}-{1 + i % 28:02d}", "yn"[i % 2]] for i in range(30)]
    path = tmp_path / "t.csv"
    path.write_text("\n".join(",".join(r) for r in [header] + rows) + "\n")
    recipe = recipe_from_dict({"data": {"source": "csv", "path": str(path),
                                        "label_key": "label"}})
    _, _, _, _, plan = CsvSource(recipe.data, seed=0).plan()
    assert [c.kind for c in plan.kept] == ["numeric", "categorical", "date"]
    raw = {name: tf.constant([r[k] for r in rows]) for k, name in enumerate(header)}
    features, _ = table_features.converter(plan)(raw)
    space = table_features.adapt_feature_space(
        tf.data.Dataset.from_tensors((features, 0)), plan)
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((plan.features,)), keras.layers.Dense(4, "relu"),
                              keras.layers.Dense(1, "sigmoid")])
    expected = model(space(features)).numpy()
    combined = table_features.with_raw_columns(model, space, plan)
    combined.save(tmp_path / "m.keras")
    table_features.register_layers()
    loaded = keras.saving.load_model(tmp_path / "m.keras")
    given = {"size_cm": raw["size cm"], "kind": raw["kind"], "day": raw["day"]}
    np.testing.assert_allclose(loaded(given).numpy(), expected, atol=1e-6)
    assert abs(float(expected.std())) > 0  # the rows differ: not a constant model
