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

