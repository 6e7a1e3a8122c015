"""Recipes over sequences: `source: audio_folder` and `source: timeseries` with seq_cnn.

Train, validate, bench and doctor through the CLI: on tones of three frequencies in a WAV
folder generated here, and on the shipped recipes/timeseries.yaml's CSV series, whose label
column is the regime (period) of its signal.
"""

import json
from pathlib import Path

import audio_helpers
import numpy as np
import pytest
from click.testing import CliRunner

from tfaccel.cli.main import main
from tfaccel.config.recipe import recipe_from_dict

# 3 classes x 16 files, 0.1-0.2 s at 8 kHz; a quarter held out: 36 train, 12 validation.
PER_CLASS = 16
AUDIO_MODEL = "model: {name: seq_cnn, params: {filters: [16, 32, 32]}}\n"
# The shipped series (recipes/timeseries.yaml's): 2,000 rows, the label column is the
# regime (period) of the signal; recipes/sources/regimes.py wrote it.
SERIES = Path(__file__).resolve().parents[1] / "recipes" / "data" / "regimes.csv"
ROWS = 2000
WINDOW = "{sequence_length: 48, sequence_stride: 2, columns: [value, other], target_offset: 47}"
SERIES_MODEL = "model: {name: seq_cnn, params: {filters: [16, 32], kernel_size: 5, strides: 2}}\n"


@pytest.fixture(scope="module")
def tones(tmp_path_factory):
    return audio_helpers.tone_folder(tmp_path_factory.mktemp("audio") / "tones",
                                     per_class=PER_CLASS, frames=(800, 1600))


@pytest.fixture(scope="module")
def series():
    return SERIES


def _recipe(tmp_path, data: str, model: str, *, epochs=4, batch=12, name="r"):
    recipe = tmp_path / f"{name}.yaml"
    recipe.write_text(f"name: {name}\ndata: {data}\n{model}"
                      "optimizer: {learning_rate: 3e-3}\n"
                      f"training: {{epochs: {epochs}, global_batch_size: {batch}}}\n"
                      f"runtime: {{runs_dir: {tmp_path / 'runs'}, verbose: 0, "
                      "precision: float32}\n")
    return recipe


def _run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _trained(tmp_path, recipe, *overrides):
    """Trains `recipe` into tmp_path/run: its summary and per-epoch metrics."""
    run_dir = tmp_path / "run"
    result = _run("train", recipe, "--run-dir", run_dir,
                  *[arg for o in overrides for arg in ("--set", o)])
    assert result.exit_code == 0, result.output
    summary = json.loads((run_dir / "summary.json").read_text())
    epochs = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return summary, epochs


def _refused(result, *phrases):
    """Exit 2, one paragraph naming `phrases`, no traceback."""
    assert result.exit_code == 2, result.output
    message = result.output[result.output.index("Error: "):].strip()
    assert "\n" not in message and "Traceback" not in result.output, result.output
    for phrase in phrases:
        assert phrase in message, (phrase, message)
    return message


def _build(recipe_dict, *, batch):
    from tfaccel.data.from_recipe import build_datasets

    recipe = recipe_from_dict(recipe_dict)
    return build_datasets(recipe.data, global_batch_size=batch, num_replicas=1,
                          seed=recipe.seed, deterministic=True)


# ----------------------------------------------------------------------------- audio_folder


def test_audio_folder_recipe_learns_tones_and_counts_every_file(tmp_path, tones):
    recipe = _recipe(tmp_path, f"{{source: audio_folder, path: {tones}, "
                     "validation_fraction: 0.25}", AUDIO_MODEL)
    summary, epochs = _trained(tmp_path, recipe)
    assert summary["class_names"] == ["tone2000", "tone300", "tone900"]
    dataset = summary["dataset"]
    assert (dataset["train_examples"], dataset["validation_examples"]) == (36, 12)
    assert dataset["input_shape"] == [None, 1]  # any length, the files' one channel
    # Each validation batch is padded to its own longest waveform (0.1-0.2 s files).
    assert 0 < dataset["validation_padding_fraction"] < 0.5
    assert [e["examples"] for e in epochs] == [36] * 4  # every training file, every epoch
    # Three classes: chance is 1/3.
    assert summary["final_metrics"]["val_accuracy"] >= 0.9, epochs
    # Exported with an open length; LiteRT resizes its input to each padded batch.
    result = _run("export", tmp_path / "run", "--format", "litert", "--out", tmp_path / "lite")
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "lite" / "export.json").read_text())
    assert report["input"]["shape"] == [None, None, 1]
    assert "sequence models: raw values" in report["input"]["is"]  # not "pixels"
    assert report["validation_examples"] == 12 and report["top1_agreement"] == 1.0
    assert report["max_abs_prob_diff"] < 1e-4


def test_audio_batches_are_padded_to_their_own_longest_or_cut(tones):
    data = {"source": "audio_folder", "path": str(tones), "validation_fraction": 0.25}
    train, val, info = _build({"data": data}, batch=8)
    seen = 0
    for audio, labels in train:
        audio = audio.numpy()
        assert audio.shape[2] == 1 and labels.shape == (audio.shape[0],)
        # Noisy tones end on a non-zero sample: some waveform fills the batch, the
        # others end in padding zeros.
        assert (audio[:, -1, 0] != 0).any()
        seen += audio.shape[0]
    assert seen == info.train_examples == 36
    assert sum(int(y.shape[0]) for _, y in val) == 12
    data["audio"] = {"output_sequence_length": 1000}
    train, _, info = _build({"data": data}, batch=8)
    assert info.input_shape == (1000, 1)
    assert {tuple(a.shape[1:]) for a, _ in train} == {(1000, 1)}


def test_audio_recipe_sampling_rate_resamples_the_waveforms(tmp_path, tones):
    # The tones are at 8 kHz, 800-1600 samples: 400-800 at 4 kHz.
    data = {"source": "audio_folder", "path": str(tones), "validation_fraction": 0.25,
            "audio": {"sampling_rate": 4000}}
    train, val, info = _build({"data": data}, batch=48)
    (audio, _), = list(train)
    assert audio.shape[0] == 36 and 400 < audio.shape[1] <= 800
    data["audio"]["output_sequence_length"] = 500
    train, val, info = _build({"data": data}, batch=8)
    assert info.input_shape == (500, 1)
    assert {tuple(a.shape[1:]) for a, _ in train} == {(500, 1)}
    assert sum(int(y.shape[0]) for _, y in val) == 12
    recipe = _recipe(tmp_path, f"{{source: audio_folder, path: {tones}, "
                     "audio: {sampling_rate: 0}}", AUDIO_MODEL)
    _refused(_run("validate", recipe), "data.audio.sampling_rate", "0")


def test_audio_recipe_validate_names_a_missing_folder(tmp_path):
    recipe = _recipe(tmp_path, "{source: audio_folder, path: no_such_folder}", AUDIO_MODEL)
    _refused(_run("validate", recipe), "data.path",
             f"the audio folder {str(tmp_path / 'no_such_folder')!r} does not exist")


def test_audio_folder_of_mixed_sample_rates_is_refused(tmp_path):
    for i in range(2):
        audio_helpers.write(tmp_path / "wavs" / "a" / f"{i}.wav",
                            audio_helpers.wav(900, channels=1, rate=8000))
        audio_helpers.write(tmp_path / "wavs" / "b" / f"{i}.wav",
                            audio_helpers.wav(900, channels=1, rate=16000))
    recipe = _recipe(tmp_path, f"{{source: audio_folder, path: {tmp_path / 'wavs'}}}",
                     AUDIO_MODEL)
    _refused(_run("train", recipe), "mixed sample rates", "8000 Hz", "16000 Hz",
             "resamples one rate to `sampling_rate`")
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


# ------------------------------------------------------------------------------- timeseries


def _series_data(series, **extra):
    timeseries = {"sequence_length": 48, "sequence_stride": 2, "target_offset": 47,
                  **extra.pop("timeseries", {})}
    return {"source": "timeseries", "path": str(series), "label_key": "regime",
            "validation_fraction": 0.25, "timeseries": timeseries, **extra}


def test_shipped_timeseries_recipe_learns_the_regime_of_each_window(tmp_path):
    summary, epochs = _trained(tmp_path, SERIES.parents[1] / "timeseries.yaml",
                               "training.epochs=4", "runtime.verbose=0",
                               "runtime.precision=float32")
    dataset = summary["dataset"]
    # 2000 rows, the last 500 held out; windows of 48 rows every 2nd row, labelled by
    # their last row: (1500 - 47) / 2 -> 727 training, (500 - 47) / 2 -> 227 validation.
    assert (dataset["train_examples"], dataset["validation_examples"]) == (727, 227)
    assert dataset["input_shape"] == [48, 2] and dataset["num_classes"] == 3
    assert [e["examples"] for e in epochs] == [727] * 4
    # Three regimes: chance is about 1/3 (measured 0.80-0.83 after these 4 epochs).
    assert summary["final_metrics"]["val_accuracy"] >= 0.6, epochs


@pytest.mark.parametrize("stride, offset", [(1, 0), (3, 47), (2, 60)])
def test_timeseries_windows_and_labels_stay_on_their_side_of_the_split(series, stride,
                                                                       offset):
    regime = np.loadtxt(SERIES, delimiter=",", skiprows=1, usecols=3, dtype=int)
    assert len(regime) == ROWS
    data = _series_data(series, timeseries={"columns": ["step"], "sequence_stride": stride,
                                            "target_offset": offset},
                        shuffle_buffer=0)
    train, val, info = _build({"data": data}, batch=64)
    boundary = ROWS - int(0.25 * ROWS)
    expected = {}
    for name, first, last in (("train", 0, boundary), ("val", boundary, ROWS)):
        count = min(last - first - 48 + 1, last - first - offset)
        expected[name] = len(range(0, count, stride))
    assert (info.train_examples, info.validation_examples) == (expected["train"],
                                                                     expected["val"])
    for name, dataset, first, last in (("train", train, 0, boundary),
                                       ("val", val, boundary, ROWS)):
        steps = np.concatenate([w.numpy()[:, :, 0] for w, _ in dataset]).astype(int)
        labels = np.concatenate([y.numpy() for _, y in dataset])
        assert len(steps) == expected[name]
        # In time order (no shuffle): starts first, first + stride, ...
        np.testing.assert_array_equal(steps[:, 0], first + stride * np.arange(len(steps)))
        assert steps.min() >= first and steps.max() < last  # no window straddles
        assert (steps[:, 0] + offset).max() < last  # nor does its label row
        np.testing.assert_array_equal(labels, regime[steps[:, 0] + offset])


def test_timeseries_float_label_under_classification_is_named(tmp_path, series):
    lines = series.read_text().splitlines()
    lines[105] = lines[105].rsplit(",", 1)[0] + ",0.5"  # row 103: the label of window 56
    path = tmp_path / "float.csv"
    path.write_text("\n".join(lines) + "\n")
    recipe = _recipe(tmp_path, f"{{source: timeseries, path: {path}, label_key: regime, "
                     f"task: classification, timeseries: {WINDOW}}}", SERIES_MODEL)
    _refused(_run("train", recipe), "'regime'", "holds float values",
             "For a numeric target set data.task: regression")


def test_timeseries_missing_column_is_named(tmp_path, series):
    recipe = _recipe(tmp_path, f"{{source: timeseries, path: {series}, label_key: regime, "
                     "timeseries: {sequence_length: 8, columns: [value, pressure]}}",
                     SERIES_MODEL)
    _refused(_run("train", recipe), "'pressure'", "['step', 'value', 'other', 'regime']")
    recipe = _recipe(tmp_path, f"{{source: timeseries, path: {series}, label_key: label, "
                     "timeseries: {sequence_length: 8}}", SERIES_MODEL)
    _refused(_run("train", recipe), "'label'", "is not in")


def test_timeseries_label_inside_its_own_window_is_refused(tmp_path, series):
    recipe = _recipe(tmp_path, f"{{source: timeseries, path: {series}, label_key: regime, "
                     "timeseries: {sequence_length: 8, columns: [value, regime]}}",
                     SERIES_MODEL)
    _refused(_run("train", recipe), "the model would read its own label")


def test_timeseries_recipe_validate_checks_path_and_window(tmp_path, series):
    recipe = _recipe(tmp_path, "{source: timeseries, path: nothing.csv, "
                     "timeseries: {sequence_length: 8}}", SERIES_MODEL)
    _refused(_run("validate", recipe), "data.path", "the time series CSV file",
             "does not exist")
    recipe = _recipe(tmp_path, f"{{source: timeseries, path: {series}}}", SERIES_MODEL)
    _refused(_run("validate", recipe), "data.timeseries.sequence_length")
    recipe = _recipe(tmp_path, f"{{source: timeseries, path: {series}, augment: [flip], "
                     "timeseries: {sequence_length: 8}}", SERIES_MODEL)
    _refused(_run("validate", recipe), "data.augment flip is an image augmentation")


# ------------------------------------------------------------------------ bench and doctor


@pytest.fixture
def both_recipes(tmp_path, tones, series):
    return {
        "audio_folder": _recipe(tmp_path, f"{{source: audio_folder, path: {tones}, "
                                "validation_fraction: 0.25}", AUDIO_MODEL, name="audio"),
        "timeseries": _recipe(tmp_path, f"{{source: timeseries, path: {series}, "
                              f"label_key: regime, timeseries: {WINDOW}}}", SERIES_MODEL,
                              batch=32, name="series"),
    }


@pytest.mark.parametrize("source", ["audio_folder", "timeseries"])
def test_bench_and_doctor_run_on_sequence_sources(both_recipes, source):
    result = _run("bench", both_recipes[source], "--batches", 3, "--repeats", 1)
    assert result.exit_code == 0, result.output
    assert "truly sequential" in result.output
    # Waveforms of open length are padded per batch; fixed-length windows never are.
    assert ("Steps that are padding" in result.output) == (source == "audio_folder")
    result = _run("doctor", both_recipes[source], "--json", "--steps", 3, "--repeats", 1)
    assert result.exit_code == 0, result.output
    report = json.loads(result.output[result.output.index("{"):])
    assert report["verdict"] in ("compute-bound", "moderately-input-bound", "input-bound")
    assert report["pipeline_examples_per_sec"] > 0 and report["model_examples_per_sec"] > 0


def test_doctor_does_not_suggest_a_cache_that_a_time_series_does_not_take():
    from tfaccel.tools.doctor_advice import suggest

    report = {"input_wait_fraction": 0.6, "model_examples_per_sec": 1000.0,
              "pipeline_examples_per_sec": 200.0, "fit_examples_per_sec": 190.0,
              "framework_overhead_fraction": 0.3, "settings": {"precision": "float32"}}
    keys = {}
    for source, extra in (("audio_folder", {}),
                          ("timeseries", {"timeseries": {"sequence_length": 8}})):
        recipe = recipe_from_dict({"data": {"source": source, "path": ".", "cache": None,
                                            **extra}}, base_dir=".")
        keys[source] = [s["key"] for s in suggest(recipe, report, cpu_bf16=False, replicas=1)]
    assert keys["audio_folder"][0] == "data.cache"
    assert "data.cache" not in keys["timeseries"] and keys["timeseries"]
