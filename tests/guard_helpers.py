"""Hostile input files and a one-call `tfaccel train` of a recipe on them, for the data guards' tests."""

import yaml
from click.testing import CliRunner

from tfaccel.cli.main import main

MODELS = {
    "csv": {"name": "mlp", "params": {"hidden_units": [8]}},
    "text_lines": {"name": "text_cnn", "params": {"embed_dim": 8, "filters": [8]}},
    "text_folder": {"name": "text_cnn", "params": {"embed_dim": 8, "filters": [8]}},
    "timeseries": {"name": "seq_cnn", "params": {"filters": [8]}},
    "tfrecords": {"name": "mlp", "params": {"hidden_units": [8], "normalization": "none"}},
}


def run(tmp_path, *, command="train", **data):
    """`tfaccel <command>` on a one-epoch recipe with this data section: click's result."""
    recipe = tmp_path / "guard.yaml"
    recipe.write_text(yaml.safe_dump({
        "name": "guard", "seed": 0, "data": data, "model": MODELS[data["source"]],
        "training": {"epochs": 1, "global_batch_size": 8},
        "runtime": {"precision": "float32", "verbose": 0, "tensorboard": False,
                    "runs_dir": str(tmp_path / "runs")}}))
    args = [command, str(recipe)] + (["--run-dir", str(tmp_path / "run")]
                                     if command == "train" else [])
    return CliRunner().invoke(main, args)


def assert_refused(result, *parts):
    """Exit code 2, each of `parts` in the message, no traceback."""
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    for part in parts:
        assert part in result.output, (part, result.output)


def lines(n, *, labels=("neg", "pos")):
    """`n` ``label<TAB>text`` lines, labels cycling; each class has its own words."""
    words = {"neg": "bad dull", "pos": "good fine", "one": "same words"}
    return "".join(f"{labels[i % len(labels)]}\t{words.get(labels[i % len(labels)], 'x')} "
                   f"{i}\n" for i in range(n))


def table(n, *, header="x,y,label", classes=2, bad=None):
    """A CSV table of `n` rows (x float, y int, label int); `bad` = (row, text of x)."""
    rows = [f"{i * 0.5},{i},{i % classes}" for i in range(n)]
    if bad is not None:
        rows[bad[0]] = f"{bad[1]},{bad[0]},0"
    return header + "\n" + "\n".join(rows) + "\n"
