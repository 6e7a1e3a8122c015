"""Each shipped recipe reaches (in a shortened run) the accuracy its comment states."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tfaccel.cli.main import main

RECIPES = Path(__file__).resolve().parents[1] / "recipes"


def _train(tmp_path, recipe, *sets):
    args = ["train", str(RECIPES / recipe), "--run-dir", str(tmp_path / "run")]
    for value in ("runtime.verbose=0", "runtime.tensorboard=false", *sets):
        args += ["--set", value]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in
            (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_python_source_recipe_learns(tmp_path):
    # Measured: 0.84-0.85 validation accuracy after these 2 of the recipe's 5 epochs; the
    # full 5 epochs reached 0.905 (the recipe's comment).
    epochs = _train(tmp_path, "python_source.yaml", "training.epochs=2")
    assert epochs[-1]["val_accuracy"] >= 0.70, epochs


@pytest.mark.slow
def test_tfrecords_recipe_learns(tmp_path, shapes_data_dir):
    files = f"{shapes_data_dir}/tfaccel_shapes/1.0.0/tfaccel_shapes-train.tfrecord-*"
    # Measured: training accuracy 0.29 then 0.43 in these 2 of the recipe's 4 epochs
    # (chance: 0.25); the full 4 epochs reached 0.882 (the recipe's comment).
    epochs = _train(tmp_path, "tfrecords.yaml", f"data.path={files}", "training.epochs=2")
    assert epochs[-1]["accuracy"] >= 0.35 and epochs[-1]["accuracy"] > epochs[0]["accuracy"]


@pytest.mark.slow
def test_image_folder_recipe_learns(tmp_path, shapes_image_folder):
    # The recipe as its comment runs it (4,000 images, 8 epochs, tf.data's parallel order as
    # users get it): measured 0.944-0.953. At batch 64 for 6 epochs it ended mid-climb and
    # landed anywhere in 0.58-0.80, which once failed this test's former 0.60 bound.
    # shapes_image_folder: the session's export of the first 4,000 train images (read-only).
    epochs = _train(tmp_path, "image_folder.yaml", f"data.path={shapes_image_folder}")
    assert len(epochs) == 8 and epochs[-1]["val_accuracy"] >= 0.85, epochs


def test_tfds_mnist_recipe_without_the_prepared_dataset_says_how(tmp_path):
    result = CliRunner().invoke(main, ["train", str(RECIPES / "tfds_mnist.yaml"),
                                       "--set", f"data.data_dir={tmp_path / 'empty'}",
                                       "--set", f"runtime.runs_dir={tmp_path / 'runs'}"])
    assert result.exit_code == 2, result.output
    assert "TFDS dataset 'mnist' is not prepared" in result.output
    assert "tfds.builder('mnist', data_dir=" in result.output
    assert "download_and_prepare()" in result.output and "Traceback" not in result.output


@pytest.mark.slow
def test_text_recipe_learns_with_its_vocabulary_and_batches_by_length(tmp_path):
    # Measured: validation accuracy 0.988 after the first of the recipe's 3 epochs (0.992
    # after 3, 28 s on 2 cores), accumulation of 2 micro-batches, precision auto.
    epochs = _train(tmp_path, "text.yaml", "training.epochs=1",
                    f"data.data_dir={tmp_path / 'tfds'}")
    assert epochs[-1]["val_accuracy"] >= 0.9, epochs
    vocabulary = (tmp_path / "run" / "vocabulary.txt").read_text().splitlines()
    assert vocabulary[:2] == ["", "[UNK]"] and len(vocabulary) == 642  # 640 words
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    text = summary["dataset"]["text"]
    assert text["vocabulary_size"] == 642 and text["batch_by_length"] is True
    assert 0 < summary["dataset"]["validation_padding_fraction"] < 0.3


# heavy: a learning run (33 s of the suite's 15 minutes); the transformer's building,
# cutting and parameters are tested in test_text_models.py.
@pytest.mark.heavy
def test_text_recipe_learns_with_the_transformer(tmp_path):
    # A quarter of the training texts, one epoch: measured validation accuracy 0.984 (chance
    # 0.25) in about 5 s of training on 2 cores, accumulation of 2 micro-batches of padded
    # texts under precision auto (mixed_bfloat16 on this CPU).
    epochs = _train(tmp_path, "text.yaml", "model.name=text_transformer", "training.epochs=1",
                    "data.train_split=train[:25%]", f"data.data_dir={tmp_path / 'tfds'}")
    assert epochs[-1]["val_accuracy"] >= 0.8, epochs
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["dataset"]["train_examples"] == 2000 and summary["accumulation_steps"] == 2
    import keras

    model = keras.saving.load_model(tmp_path / "run" / "model.keras")  # no custom objects
    assert model.name == "text_transformer" and model.get_layer("embedding").input_dim == 642


def test_table_recipe_learns_through_its_feature_space(tmp_path):
    # The recipe's comment: 0.894-0.896 validation accuracy after 10 epochs (seeds 0-2), the
    # best possible about 0.91, always "stays" 0.64. Measured after these 4 epochs: 0.892-0.904 (seeds 0-2).
    epochs = _train(tmp_path, "table.yaml", "training.epochs=4")
    assert epochs[-1]["val_accuracy"] >= 0.80, epochs
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    table = summary["dataset"]["table"]
    assert table["categorical"] == ["plan", "region"] and table["ignored"] == ["customer_id"]
    # age, monthly_spend, support_calls + plan (3 + 1) + region (6 + 1).
    assert summary["dataset"]["input_shape"] == [14]
    assert (summary["dataset"]["train_examples"], summary["dataset"]["validation_examples"]) \
        == (1500, 500)
