"""`tfaccel compare`: the table of differing settings and results, and the PNG of curves."""

import json
import sys

import pytest
import yaml
from click.testing import CliRunner

from tfaccel.cli.main import main
from tfaccel.errors import UserInputError
from tfaccel.tools.compare import compare, differing_settings, load_run

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


def _fake_run(path, *, lr, batch, losses, speed):
    """A run directory as `tfaccel train` writes it (recipe, summary, per-epoch metrics)."""
    path.mkdir(parents=True)
    recipe = {"name": "shapes", "seed": 0, "data": {"source": "builtin", "cache": "memory"},
              "model": {"name": "small_cnn", "params": {}},
              "optimizer": {"name": "adam", "learning_rate": lr},
              "training": {"epochs": len(losses), "global_batch_size": batch},
              "runtime": {"runs_dir": str(path.parent), "precision": "auto"}}
    (path / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    epochs = [{"epoch": i + 1, "loss": loss, "accuracy": 1 - loss / 2, "val_loss": loss + 0.1,
               "val_accuracy": 0.9 - loss / 2, "examples_per_sec": speed + 10 * i,
               "input_wait_fraction": 0.01}
              for i, loss in enumerate(losses)]
    (path / "metrics.jsonl").write_text("".join(json.dumps(e) + "\n" for e in epochs))
    final = {k: v for k, v in epochs[-1].items()
             if k in ("loss", "accuracy", "val_loss", "val_accuracy")}
    (path / "summary.json").write_text(json.dumps({
        "status": "completed", "epochs_completed": len(epochs), "final_metrics": final,
        "examples_per_sec": speed, "input_wait_fraction": 0.012, "wall_seconds": 30.0,
        "precision": "float32", "strategy": "one_device", "replicas": 1}))
    return path


@pytest.fixture
def two_runs(tmp_path):
    return [_fake_run(tmp_path / "a", lr=0.001, batch=64, losses=[1.2, 0.6, 0.3], speed=500),
            _fake_run(tmp_path / "b", lr=0.003, batch=128, losses=[1.0, 0.4], speed=800)]


def test_table_lists_only_the_settings_that_differ(two_runs):
    runs = [load_run(p) for p in two_runs]
    # runs_dir differs too (each run's own parent), but says nothing about training.
    assert differing_settings(runs) == ["optimizer.learning_rate", "training.epochs",
                                        "training.global_batch_size"]
    table = compare(two_runs, plot_path=None)["table"]
    lines = table.splitlines()
    assert lines[0] == "| | a | b |"
    assert "| optimizer.learning_rate | 0.001 | 0.003 |" in lines
    assert "| training.global_batch_size | 64 | 128 |" in lines
    assert "| final val_accuracy | 0.7500 | 0.7000 |" in lines
    assert "| examples_per_sec | 500.0 | 800.0 |" in lines
    assert "| input_wait_fraction | 0.012 | 0.012 |" in lines
    assert not any("model.name" in line or "runs_dir" in line for line in lines)


def test_table_shows_the_kept_epoch_when_a_run_keeps_another_than_the_last(two_runs):
    summary_file = two_runs[0] / "summary.json"
    summary = json.loads(summary_file.read_text())
    summary.update(saved_model_epoch=2, keep="best", monitor="val_loss",
                   saved_model_metrics={"val_loss": 0.35, "val_accuracy": 0.61})
    summary_file.write_text(json.dumps(summary))
    second = json.loads((two_runs[1] / "summary.json").read_text())
    (two_runs[1] / "summary.json").write_text(json.dumps({**second, "saved_model_epoch": 2}))
    lines = compare(two_runs, plot_path=None)["table"].splitlines()
    assert ("| model.keras holds | epoch 2 of 3 (best by val_loss) | epoch 2 of 2 (last) |"
            in lines)
    assert "| kept val_accuracy | 0.6100 | - |" in lines
    assert "| final val_accuracy | 0.7500 | 0.7000 |" in lines


def test_table_without_a_kept_epoch_other_than_the_last_has_no_kept_rows(two_runs):
    table = compare(two_runs, plot_path=None)["table"]
    assert "kept" not in table and "model.keras" not in table


def test_png_has_every_run_s_curves(two_runs, tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "cmp.png"
    result = CliRunner().invoke(main, ["compare", *map(str, two_runs), "--plot", str(png)])
    assert result.exit_code == 0, result.output
    # Two runs: a train and a validation curve each for loss and accuracy, one speed curve.
    assert "(loss 4, accuracy 4, examples/s 2 curves)" in result.output
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


def test_without_matplotlib_the_table_is_printed_with_how_to_get_the_plot(two_runs, tmp_path,
                                                                       monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails as if not installed
    png = tmp_path / "none.png"
    result = CliRunner().invoke(main, ["compare", *map(str, two_runs), "--plot", str(png)])
    assert result.exit_code == 0, result.output
    assert "| training.global_batch_size | 64 | 128 |" in result.output
    assert "pip install 'tfaccel[plot]'" in result.output
    assert not png.exists()


def test_a_folder_that_is_not_a_run_exits_2_naming_it(tmp_path, two_runs):
    stray = tmp_path / "stray"
    stray.mkdir()
    result = CliRunner().invoke(main, ["compare", str(two_runs[0]), str(stray), "--no-plot"])
    assert result.exit_code == 2
    assert str(stray) in result.output and "not a tfaccel run directory" in result.output


def test_a_mapping_valued_key_is_one_row_like_every_recipe_key(tmp_path):
    # The rows are recipe keys (flatten_recipe, as resume compares): data.features and
    # model.params are one setting each, shown whole.
    runs = [_fake_run(tmp_path / name, lr=0.001, batch=64, losses=[1.0], speed=500)
            for name in ("a", "b")]
    for run, shape in zip(runs, ([32, 32, 3], [28, 28, 1])):
        recipe = yaml.safe_load((run / "recipe.yaml").read_text())
        recipe["data"]["features"] = {"image": {"dtype": "uint8", "shape": shape}}
        recipe["model"]["params"] = {"dropout": 0.1 if shape[0] == 32 else 0.2}
        (run / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    loaded = [load_run(p) for p in runs]
    assert differing_settings(loaded) == ["data.features", "model.params"]
    table = compare(runs, plot_path=None)["table"].splitlines()
    assert ('| data.features | {"image": {"dtype": "uint8", "shape": [32, 32, 3]}} | '
            '{"image": {"dtype": "uint8", "shape": [28, 28, 1]}} |') in table


def test_a_recipe_that_is_not_a_mapping_exits_2(tmp_path):
    run = _fake_run(tmp_path / "a", lr=0.001, batch=64, losses=[1.0], speed=500)
    (run / "recipe.yaml").write_text("- just\n- a list\n")
    with pytest.raises(UserInputError, match="recipe.yaml is not a mapping"):
        load_run(run)


MODULE = '''
import keras


def build(*, input_shape, num_classes, width=4):
    inputs = keras.Input(input_shape)
    x = keras.layers.Dense(width, activation="{activation}")(inputs)
    return keras.Model(inputs, keras.layers.Dense(num_classes, activation="softmax")(x))
'''


def test_a_changed_model_module_or_data_file_is_listed_among_the_differences(tmp_path,
                                                                             monkeypatch):
    # The recipe is the same in all three runs: only the model module's code (relu -> tanh)
    # or the data file's content changed. compare listed them as identical before.
    import numpy as np

    import tfaccel

    monkeypatch.chdir(tmp_path)

    def write_data(seed):
        x = np.random.default_rng(seed).normal(size=(32, 3)).astype("float32")
        np.savez(tmp_path / "blobs.npz", x_train=x, y_train=(x[:, 0] > 0).astype("int64"))

    recipe = {"data": {"source": "arrays", "path": "blobs.npz", "validation_split_name": None},
              "model": {"name": "mymodel.py:build"},
              "training": {"epochs": 1, "global_batch_size": 8},
              "runtime": {"precision": "float32", "tensorboard": False, "runs_dir": "runs",
                          "verbose": 0}}
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    runs = []
    write_data(0)
    for activation, seed, name in (("relu", 0, "a"), ("tanh", 0, "b"), ("tanh", 1, "c")):
        (tmp_path / "mymodel.py").write_text(MODULE.format(activation=activation))
        if name == "c":
            write_data(seed)  # other examples, the same file name and size
        runs.append(tfaccel.train("recipe.yaml", run_dir=str(tmp_path / name)).run_dir)
    loaded = [load_run(p) for p in runs]
    digests = [json.loads((p / "model_source.json").read_text())["sha256"][:12]
               for p in map(__import__("pathlib").Path, runs)]
    assert digests[0] != digests[1] == digests[2]
    assert differing_settings(loaded[:2]) == ["(model source)"]
    assert differing_settings(loaded[1:]) == ["(data source) data.path"]
    lines = compare(runs, plot_path=None)["table"].splitlines()
    module = str(tmp_path / "mymodel.py")
    assert (f"| (model source) | {module} sha256 {digests[0]} | {module} sha256 {digests[1]} "
            f"| {module} sha256 {digests[2]} |") in lines
    row = next(line for line in lines if line.startswith("| (data source) data.path |"))
    cells = [c.strip() for c in row.split("|")[2:-1]]
    assert cells[0] == cells[1] != cells[2]
    assert cells[0].startswith("1 file(s), ") and " bytes, sha256 " in cells[0]
