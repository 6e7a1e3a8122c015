"""Every command, run as a user runs it, prints no TensorFlow, absl, TFDS or converter noise."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from launch_helpers import worker_logs

from tfaccel.messages import VERBOSE_ENV

# Its subprocesses check start-up itself (TensorFlow's import lines, what a call imports):
# real interpreters, not forks of the warm one (tests/warm_python.py).
pytestmark = pytest.mark.cold_python

REPO = Path(__file__).resolve().parents[1]
RECIPE = REPO / "recipes" / "default.yaml"
TIMEOUT_SECONDS = 600

# The noise, by where it comes from. A line of any command's output that matches one of
# these fails the test.
NOISE = [
    # absl's C++ log lines (TensorFlow, XLA, gRPC, LiteRT), any level.
    re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d+\.\d+ +\d+ [\w.]+:\d+\] "),
    re.compile(r"absl::InitializeLog"),
    # Python's default logging format from TensorFlow's, absl's and the converters' loggers.
    re.compile(r"^(DEBUG|INFO|WARNING|ERROR):(absl|tensorflow|root|tf2onnx|onnx\w*):"),
    re.compile(r"oneDNN|cudart|cuInit|XNNPACK|fully_quantize|onnxruntime", re.IGNORECASE),
    # TFDS' own lines when it prepares the built-in dataset (tfaccel says it in one line).
    re.compile(r"^Downloading and preparing dataset|downloaded and prepared to"
               r"|has no dataset_info\.json"),
]
# Real lines this machine printed before the filter covered them (a launched worker's are
# prefixed [w0]); each must be caught, or the test could pass on noise.
SAMPLE_NOISE = [
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "[w1] I0000 00:00:1795702601.735050   22521 port.cc:153] oneDNN custom operations are on. "
    "You may see slightly different numerical results due to floating-point round-off errors",
    "I0000 00:00:1795702601.735333   22521 cudart_stub.cc:31] Could not find cuda drivers on "
    "your machine, GPU will not be used.",
    "E0000 00:00:1795703598.840195    5226 cuda_platform.cc:52] failed call to cuInit: "
    "INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)",
    "I0000 00:00:1795703601.409333    6201 tf_record_dataset_op.cc:396] The default buffer "
    "size is 262144, which is overridden by the user specified `buffer_size` of 8388608",
    "WARNING:absl:Variant folder /tmp/qt/tfds/tfaccel_shapes/1.0.0 has no dataset_info.json",
    "Downloading and preparing dataset Unknown size (download: Unknown size, generated: "
    "Unknown size, total: Unknown size) to /tmp/qt/tfds/tfaccel_shapes/1.0.0...",
    "Dataset tfaccel_shapes downloaded and prepared to /tmp/qt/tfds/tfaccel_shapes/1.0.0. "
    "Subsequent calls will reuse this data.",
    "fully_quantize: 0, inference_type: 6, input_inference_type: FLOAT32, "
    "output_inference_type: FLOAT32",
    "INFO: Created TensorFlow Lite XNNPACK delegate for CPU.",
    "WARNING:root:Please consider to run pre-processing before quantization. Refer to "
    "example: https://github.com/microsoft/onnxruntime-inference-examples/blob/main/",
]
# tfaccel's and Keras' own lines pass.
SAMPLE_OUTPUT = [
    "tfaccel: preparing the built-in dataset tfaccel_shapes in /tmp/t/tfaccel_shapes/1.0.0 "
    "(once; no download)...",
    "tfaccel: default on 1 replica(s), precision mixed_bfloat16, global batch 64 = 1 "
    "replica(s) x 1 accumulation step(s) x micro-batch 64.",
    "4/4 - 1s - 272ms/step - accuracy: 0.2148 - loss: 1.4263 - val_accuracy: 0.2031",
    "[w0] Run directory: /tmp/runs/shapes-default-20261126-141640",
    "[launch] 2 worker(s) on 127.0.0.1:50879, 127.0.0.1:42733; worker 0 (chief) writes run",
    "latency (1 example)  0.026 ms     0.284 ms   speed-up 11.09x",
]
# A tiny run of the default recipe: 256 training images, one epoch.
TINY = ["training.epochs=1", "data.train_split=train[:256]",
        "data.validation_split_name=test[:128]", "data.shuffle_buffer=256"]


def noise_in(text: str) -> list:
    """The lines of `text` that are noise (a launched worker's [wN] prefix set aside)."""
    found = []
    for line in text.splitlines():
        bare = re.sub(r"^\[w\d+\] ", "", line)
        if any(pattern.search(bare) for pattern in NOISE):
            found.append(line)
    return found


def test_the_noise_patterns_catch_the_real_noise_and_pass_tfaccel_s_lines():
    assert [line for line in SAMPLE_NOISE if not noise_in(line)] == []
    assert noise_in("\n".join(SAMPLE_OUTPUT)) == []


def _user_env(tmp_path: Path) -> dict:
    """A user's shell: no TF_CPP_MIN_LOG_LEVEL (tests/conftest.py sets one), not verbose."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("TF_CPP_MIN_LOG_LEVEL", VERBOSE_ENV)}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [
        p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env["CUDA_VISIBLE_DEVICES"] = ""
    env["TMPDIR"] = str(tmp_path)
    return env


def tfaccel(*args, tmp_path: Path) -> subprocess.CompletedProcess:
    """``tfaccel ARGS`` in a fresh process; asserts exit 0 and no noise on either stream."""
    done = subprocess.run([sys.executable, "-m", "tfaccel.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=TIMEOUT_SECONDS,
                          env=_user_env(tmp_path), cwd=tmp_path)
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    # Launched workers' stderr is merged into the launcher's stdout: both streams count.
    assert noise_in(done.stderr) == [], done.stderr[-3000:]
    assert noise_in(done.stdout) == [], done.stdout[-3000:]
    return done


def _sets(overrides):
    return [a for override in overrides for a in ("--set", override)]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The tiny recipe's overrides, with a TFDS data folder of the module's own."""
    folder = tmp_path_factory.mktemp("quiet")
    return folder, [f"data.data_dir={folder / 'tfds'}", f"runtime.runs_dir={folder / 'runs'}",
                    *TINY]


@pytest.fixture(scope="module")
def trained(tiny):
    """One tiny training run through the CLI, the first in its data folder: it prepares
    the built-in dataset (TFDS' own lines and its absl warning came from there)."""
    folder, overrides = tiny
    done = tfaccel("train", RECIPE, *_sets(overrides), "--run-dir", folder / "run",
                   tmp_path=folder)
    return folder / "run", done


def test_train_preparing_the_built_in_dataset_is_quiet(trained):
    run, done = trained
    assert "tfaccel: preparing the built-in dataset tfaccel_shapes" in done.stdout
    assert (run / "model.keras").is_file()
    assert done.stderr == ""


def test_validate_and_keys_are_quiet(tiny):
    folder, overrides = tiny
    done = tfaccel("validate", RECIPE, *_sets(overrides), tmp_path=folder)
    assert done.stdout.startswith(f"{RECIPE}: OK")
    assert "training.epochs" in tfaccel("keys", tmp_path=folder).stdout


def test_compare_is_quiet(trained):
    run, _ = trained
    done = tfaccel("compare", run, run, "--no-plot", tmp_path=run.parent)
    assert "val_accuracy" in done.stdout and done.stderr == ""


@pytest.mark.parametrize("export_format, quantize", [
    ("litert", "int8"),  # the converter's and the interpreter's C++ lines
    pytest.param("onnx", "int8", marks=pytest.mark.slow),  # tf2onnx, ONNX Runtime's advice
    pytest.param("saved_model", "none", marks=pytest.mark.slow),
    pytest.param("keras", "none", marks=pytest.mark.slow)])
def test_export_is_quiet(trained, export_format, quantize):
    from tfaccel.tools.export import check_dependencies

    try:
        check_dependencies(export_format)
    except Exception as missing:  # the export extra is not installed here
        pytest.skip(str(missing))
    run, _ = trained
    out = run.parent / f"export-{export_format}"
    done = tfaccel("export", run, "--format", export_format, "--quantize", quantize,
                   "--out", out, "--latency-runs", "1", tmp_path=run.parent)
    assert f"Wrote {out}" in done.stdout and (out / "export.json").is_file()
    assert done.stderr == ""


@pytest.mark.slow
@pytest.mark.heavy  # outside the 15-minute CI budget: the doctor's JSON is tested in test_doctor; quiet rule: train above
def test_doctor_is_quiet_and_its_json_stdout_is_the_json(trained, tiny):
    folder, overrides = tiny
    done = tfaccel("doctor", RECIPE, *_sets(overrides), "--steps", "2", "--repeats", "1",
                   "--json", tmp_path=folder)
    report = json.loads(done.stdout)  # nothing but the JSON on stdout
    assert report["steps_timed"] == 2
    # The progress went to stderr, one tfaccel line per phase.
    assert done.stderr.splitlines()[1] == \
        "tfaccel: doctor: measuring the input pipeline alone (4 batches)..."
    assert all(line.startswith("tfaccel: ") for line in done.stderr.splitlines())


@pytest.mark.slow
@pytest.mark.heavy  # outside the 15-minute CI budget: the quiet rule is train's above; bench's output in test_bench
def test_bench_is_quiet(trained, tiny):
    folder, overrides = tiny
    done = tfaccel("bench", RECIPE, *_sets(overrides), "--batches", "3", "--repeats", "1",
                   "--no-epochs", tmp_path=folder)
    assert "**speed-up**" in done.stdout and done.stderr == ""


@pytest.mark.slow
@pytest.mark.multiworker
@pytest.mark.heavy  # outside the 15-minute CI budget: ~40 s; train's quiet run above covers the rule
def test_launch_of_two_workers_preparing_the_dataset_is_quiet(tmp_path):
    # A data folder of its own: the launcher prepares the dataset in a child first.
    overrides = [f"data.data_dir={tmp_path / 'tfds'}", f"runtime.runs_dir={tmp_path / 'runs'}",
                 *TINY]
    done = tfaccel("launch", "--workers", "2", "--", "train", RECIPE, *_sets(overrides),
                   tmp_path=tmp_path)
    assert "tfaccel: preparing the built-in dataset tfaccel_shapes" in done.stdout
    assert "[w0] Run directory: " in done.stdout and "[w1] " not in done.stdout
    # The other worker's lines are in its log file (named once), quiet too.
    (log,) = worker_logs(done.stdout).values()
    assert "Done: " in log and noise_in(log) == [], log[-3000:]
