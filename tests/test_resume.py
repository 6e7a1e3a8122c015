"""Resume: exact mid-epoch continuation after SIGTERM or SIGKILL, checkpoints, refusals."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import warm_python
import yaml
from click.testing import CliRunner

from tfaccel.cli.main import main
from tfaccel.errors import TrainingError, UserInputError
from tfaccel.training.run_dir import checkpoints as ckpt
from tfaccel.training.run_dir.resume import RunLock, plan_resume

HERE = Path(__file__).parent
REPO = HERE.parent
# Deterministic float32 (precision auto would pick bf16 on a CPU that has it), a subset
# small enough to run three trainings in a test (12 steps an epoch: an equality needs no
# learning), augmentation on so its seeds are tested.
EXACT = [
    "data.train_split=train[:384]", "data.validation_split_name=test[:128]",
    "data.shuffle_buffer=384", "data.augment=[flip, crop]",
    "training.epochs=3", "training.global_batch_size=32",
    "runtime.precision=float32", "runtime.deterministic=true", "runtime.verbose=0",
    "runtime.tensorboard=false",
]
TOLERANCE = 1e-6


def _env():
    """The environment of the file's `tfaccel` processes: the test process's own but for
    TFACCEL_DEBUG, so they are forks of the warm server the suite already has for it
    (tests/warm_python.py: a variable read at import time, PYTHONUNBUFFERED before, meant a
    server of this file's own, and a first process that imported TensorFlow cold). Its
    server is started with the first of them (about ten: at the second by default)."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("TFACCEL_DEBUG", None)
    warm_python.command_and_env([sys.executable], env, at_once=True)
    return env


def _drive(tmp_path, overrides, *, stop_at, recipe=REPO / "recipes" / "default.yaml",
           reference=None):
    """Runs tests/resume_driver.py (uninterrupted vs SIGTERM + resume) in a fresh process.

    `reference`: the run directory of the same recipe trained uninterrupted before (the
    driver then compares with it instead of training it again).
    """
    args = json.dumps({"workdir": str(tmp_path), "recipe": str(recipe),
                       "overrides": overrides, "stop_at": stop_at,
                       "reference": None if reference is None else str(reference)})
    done = subprocess.run([sys.executable, str(HERE / "resume_driver.py"), args],
                          capture_output=True, text=True, timeout=600, env=_env())
    result = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and result, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(result[-1][len("RESULT "):]), done.stdout


def _assert_same_epochs(full, resumed):
    assert [e["epoch"] for e in full] == [e["epoch"] for e in resumed] == [1, 2, 3]
    for a, b in zip(full, resumed):
        for key in ("loss", "accuracy", "val_loss", "val_accuracy"):
            assert abs(a[key] - b[key]) <= TOLERANCE, (key, a, b)
        assert a["examples"] == b["examples"]


def _read_only(folder):
    """Makes every file under `folder` read-only: a shared run is compared, never changed."""
    for path in Path(folder).rglob("*"):
        if path.is_file():
            path.chmod(0o444)
    return Path(folder)


def _cli(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "tfaccel.cli", *args], capture_output=True,
                          text=True, timeout=timeout, env=_env(), cwd=REPO)


def _sets(overrides):
    return [a for override in overrides for a in ("--set", override)]


@pytest.fixture(scope="module")
def exact_reference(tmp_path_factory, shapes_data_dir):
    """The default recipe with EXACT trained once uninterrupted, in a fresh process (op
    determinism is process-wide), as `tfaccel train` leaves it; read-only. The SIGTERM and
    SIGKILL resumes of the same recipe are both compared with it."""
    run = tmp_path_factory.mktemp("exact-reference") / "full"
    done = _cli("train", str(REPO / "recipes" / "default.yaml"), "--run-dir", str(run),
                *_sets([f"data.data_dir={shapes_data_dir}", *EXACT]))
    assert done.returncode == 0, done.stderr[-2000:]
    return _read_only(run)


@pytest.mark.slow
@pytest.mark.parametrize("extra", [[], ["training.accumulation_steps=2",
                                        "model.params={dropout: 0.3}"],
                                   # Nadam's state (its u_product too) and the schedule's
                                   # step (the optimizer's iterations) come back.
                                   ["optimizer.name=nadam", "optimizer.params={beta_1: 0.8}",
                                    "optimizer.schedule=ExponentialDecay",
                                    "optimizer.schedule_params={decay_steps: 20, "
                                    "decay_rate: 0.5}",
                                    "training.metrics=[accuracy, {name: "
                                    "sparse_top_k_categorical_accuracy, params: {k: 2}}]"]],
                         ids=["plain", "accumulation-dropout", "nadam-exponential-decay"])
def test_sigterm_mid_epoch_then_resume_equals_uninterrupted(tmp_path, shapes_data_dir, extra,
                                                           request):
    overrides = [f"data.data_dir={shapes_data_dir}"] + EXACT + extra
    # The plain recipe is compared with the module's uninterrupted run of it (the SIGKILL
    # test's too); the other configuration is trained uninterrupted by the driver.
    reference = request.getfixturevalue("exact_reference") if not extra else None
    # 12 steps per epoch: SIGTERM after step 18 lands in the middle of epoch 2.
    report, output = _drive(tmp_path, overrides, stop_at=18, reference=reference)
    assert report["preempted"] and report["signum"] == signal.SIGTERM
    assert report["status_after_stop"] == "preempted"
    assert report["checkpoint"] == "step-0000019"  # saved at the next step boundary
    assert report["run_dir"] == str(tmp_path / "cut")  # what the resume hint names
    assert "resuming from checkpoint step-0000019: epoch 2, step 7 of 12" in output
    assert report["weights_max_diff"] <= TOLERANCE
    _assert_same_epochs(report["epochs_full"], report["epochs_resumed"])
    # metrics.jsonl: one line per epoch, none twice, none missing.
    assert [e["epoch"] for e in report["metrics_lines"]] == [1, 2, 3]


@pytest.mark.slow
def test_image_folder_sigterm_resume_equals_uninterrupted(tmp_path, shapes_image_subset):
    images = shapes_image_subset(320)  # train[:320] as export_image_folder writes it
    recipe = tmp_path / "folder.yaml"
    recipe.write_text(yaml.safe_dump({
        "name": "folder", "seed": 3,
        "data": {"source": "image_folder", "path": str(images),
                 "image_size": [32, 32], "validation_fraction": 0.2, "cache": None,
                 "shuffle_buffer": 512, "augment": ["flip"]},
        "model": {"name": "small_cnn"},
        "training": {"epochs": 3, "global_batch_size": 32},
        "runtime": {"precision": "float32", "deterministic": True, "verbose": 0,
                    "tensorboard": False}}))
    # 256 training images: 8 steps per epoch; SIGTERM after step 10 lands in epoch 2.
    report, _ = _drive(tmp_path, [], stop_at=10, recipe=recipe)
    assert report["preempted"] and report["checkpoint"] == "step-0000011"
    assert report["weights_max_diff"] <= TOLERANCE
    _assert_same_epochs(report["epochs_full"], report["epochs_resumed"])


@pytest.mark.slow
@pytest.mark.heavy  # outside the 15-minute CI budget: ~55 s; the SIGTERM resumes below cover the same restore path
def test_sigkill_mid_epoch_then_resume_equals_uninterrupted(tmp_path, shapes_data_dir,
                                                           exact_reference):
    # Compared with the module's uninterrupted run of the same recipe without step
    # checkpoints (the SIGTERM test's reference): writing checkpoints must not change
    # training, so the killed and resumed run still equals it within TOLERANCE.
    sets = _sets([f"data.data_dir={shapes_data_dir}"] + EXACT + [
        "training.checkpoint_every_steps=4", "training.keep_checkpoints=2"])
    recipe = str(REPO / "recipes" / "default.yaml")

    cut = tmp_path / "cut"
    process = subprocess.Popen([sys.executable, "-m", "tfaccel.cli", "train", recipe,
                                "--run-dir", str(cut), *sets], env=_env(), cwd=REPO,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    # Kill as soon as the first step checkpoint of epoch 2 (steps 13-24) is complete.
    while not (cut / "checkpoints" / "step-0000016").is_dir():
        assert process.poll() is None and time.monotonic() < deadline, "no checkpoint"
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=60)
    summary = cut / "summary.json"
    assert not summary.exists()  # killed: nothing wrote a status

    resumed = _cli("train", "--resume", str(cut))
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "resuming from checkpoint step-00000" in resumed.stdout
    assert ": epoch 2, step " in resumed.stdout  # inside epoch 2, not at its start

    import keras

    a = keras.saving.load_model(exact_reference / "model.keras", compile=False)
    b = keras.saving.load_model(cut / "model.keras", compile=False)
    diff = max(float(np.max(np.abs(x - y))) for x, y in zip(a.get_weights(), b.get_weights()))
    assert diff <= TOLERANCE
    lines = [json.loads(line) for line in (cut / "metrics.jsonl").read_text().splitlines()]
    full_lines = [json.loads(line)
                  for line in (exact_reference / "metrics.jsonl").read_text().splitlines()]
    _assert_same_epochs(full_lines, lines)
    assert json.loads(summary.read_text())["status"] == "completed"
    # keep_checkpoints=2: only the two newest step checkpoints remain, epoch ones all.
    names = sorted(p.name for p in (cut / "checkpoints").iterdir())
    assert [n for n in names if n.startswith("epoch-")] == ["epoch-001", "epoch-002",
                                                             "epoch-003"]
    assert len([n for n in names if n.startswith("step-")]) == 2

    # A finished run is not resumed twice; more epochs extend it.
    again = _cli("train", "--resume", str(cut))
    assert again.returncode == 2 and "already finished" in again.stderr
    assert "Traceback" not in again.stderr


TINY = ["data.train_split=train[:256]", "data.validation_split_name=test[:64]",
        "data.shuffle_buffer=256", "training.epochs=2", "training.global_batch_size=32",
        "runtime.verbose=0", "runtime.tensorboard=false"]


def _tiny_run(tmp_path, shapes_data_dir, name="run", extra=()):
    from tfaccel.training.run import runner

    return runner.train(str(REPO / "recipes" / "default.yaml"),
                        [f"data.data_dir={shapes_data_dir}", *TINY, *extra],
                        run_dir=str(tmp_path / name))


@pytest.fixture(scope="module")
def tiny_finished(tmp_path_factory, shapes_data_dir):
    """One finished TINY run (2 epochs) for the module, read-only: (run dir, its epochs)."""
    first = _tiny_run(tmp_path_factory.mktemp("tiny-finished"), shapes_data_dir)
    return _read_only(first.run_dir), first.epochs


def _copy_of(tiny_finished, tmp_path):
    """A writable copy of the shared finished run in this test's own folder."""
    source, epochs = tiny_finished
    directory = tmp_path / "run"
    shutil.copytree(source, directory)
    for path in directory.rglob("*"):
        if path.is_file():
            path.chmod(0o644)
    return directory, epochs


def test_resume_extends_a_finished_run_and_refuses_other_changes(tmp_path, tiny_finished):
    from tfaccel.training.run import runner

    directory, first_epochs = _copy_of(tiny_finished, tmp_path)
    with pytest.raises(UserInputError, match="already finished .2 of 2 epoch"):
        runner.train(resume=directory)
    with pytest.raises(UserInputError) as caught:
        runner.train(resume=directory, overrides=["optimizer.learning_rate=0.5",
                                                  "training.global_batch_size=64"])
    message = str(caught.value)
    assert "optimizer.learning_rate: 0.002 in the run, 0.5 requested" in message
    assert "training.global_batch_size: 32 in the run, 64 requested" in message

    extended = runner.train(resume=directory, overrides=["training.epochs=3"])
    assert [e["epoch"] for e in extended.epochs] == [1, 2, 3]
    lines = (directory / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["epoch"] for line in lines] == [1, 2, 3]
    # The first two epochs are the original run's, untouched.
    assert json.loads(lines[0]) == first_epochs[0]
    assert yaml.safe_load((directory / "recipe.yaml").read_text())["training"]["epochs"] == 3
    assert extended.summary["status"] == "completed"


def test_cli_resume_with_a_changed_recipe_exits_2_with_the_differences(tmp_path,
                                                                      tiny_finished):
    directory, _ = _copy_of(tiny_finished, tmp_path)
    result = CliRunner().invoke(main, ["train", "--resume", str(directory),
                                       "--set", "seed=5"])
    assert result.exit_code == 2, result.output
    assert "seed: 0 in the run, 5 requested" in result.output
    assert "Traceback" not in result.output


def test_a_truncated_checkpoint_is_skipped_for_the_previous_one(tmp_path, tiny_finished,
                                                                capsys):
    from tfaccel.training.run import runner

    directory, _ = _copy_of(tiny_finished, tmp_path)
    newest = directory / "checkpoints" / "epoch-002"
    weights = newest / ckpt.WEIGHTS_FILE
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    capsys.readouterr()
    resumed = runner.train(resume=directory, overrides=["training.epochs=3"])
    out = capsys.readouterr().out
    assert "checkpoint epoch-002 is skipped: model.weights.h5 does not match its checksum" in out
    assert "using the previous good checkpoint epoch-001" in out
    assert "resuming from checkpoint epoch-001: epoch 2, step 0" in out
    assert [e["epoch"] for e in resumed.epochs] == [1, 2, 3]


def test_a_second_process_cannot_resume_a_run_in_use(tmp_path):
    (tmp_path / "run").mkdir()
    lock = RunLock(tmp_path / "run").acquire()
    try:
        code = ("import sys; from tfaccel.training.run_dir.resume import RunLock\n"
                "try:\n    RunLock(sys.argv[1]).acquire()\n"
                "except Exception as e:\n    print(e); sys.exit(3)\n")
        other = subprocess.run([sys.executable, "-c", code, str(tmp_path / "run")],
                               capture_output=True, text=True, timeout=60)
        assert other.returncode == 3
        assert f"in use by another tfaccel process (pid {os.getpid()})" in other.stdout
    finally:
        lock.release()
    RunLock(tmp_path / "run").acquire().release()  # free again once released


def test_plan_resume_refuses_what_is_not_a_run(tmp_path):
    with pytest.raises(UserInputError, match="no such run directory"):
        plan_resume(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserInputError, match="not a tfaccel run directory"):
        plan_resume(tmp_path / "empty")


def _fake_checkpoint(directory, name, step, payload=b"weights"):
    def write(folder):
        (folder / ckpt.WEIGHTS_FILE).write_bytes(payload)
        (folder / ckpt.EXTRA_FILE).write_bytes(b"extra")

    return ckpt.write_checkpoint(directory, name=name, write_files=write,
                                 state={"global_step": step, "epoch": 0,
                                        "step_in_epoch": step, "records": []})


def test_checkpoints_are_atomic_verified_and_pruned(tmp_path):
    directory = tmp_path / "checkpoints"
    for step in (4, 8, 12):
        _fake_checkpoint(directory, f"step-{step:07d}", step)
    _fake_checkpoint(directory, "epoch-001", 10)
    (directory / ".partial-step-0000016-123").mkdir()  # a write cut short by a kill
    found, skipped = ckpt.latest_checkpoint(directory)
    assert found.path.name == "step-0000012" and skipped == []

    (directory / "step-0000012" / ckpt.WEIGHTS_FILE).write_bytes(b"weig")  # truncated
    found, skipped = ckpt.latest_checkpoint(directory)
    assert found.path.name == "epoch-001"  # step 10, the newest that verifies
    assert skipped == ["checkpoint step-0000012 is skipped: model.weights.h5 does not "
                       "match its checksum (cut short or corrupted)"]

    removed = ckpt.prune_step_checkpoints(directory, keep=1)
    assert removed == ["step-0000008", "step-0000004"]
    assert sorted(p.name for p in directory.iterdir()) == ["epoch-001", "step-0000012"]


def test_a_full_disk_during_a_checkpoint_leaves_the_last_good_one(tmp_path):
    directory = tmp_path / "checkpoints"
    _fake_checkpoint(directory, "step-0000004", 4)

    def no_space(folder):
        (folder / ckpt.WEIGHTS_FILE).write_bytes(b"half")
        raise OSError(28, "No space left on device")

    with pytest.raises(TrainingError, match="No space left on device.*intact"):
        ckpt.write_checkpoint(directory, name="step-0000008", write_files=no_space,
                              state={"global_step": 8, "epoch": 0, "step_in_epoch": 8})
    assert sorted(p.name for p in directory.iterdir()) == ["step-0000004"]
    assert ckpt.latest_checkpoint(directory)[0].path.name == "step-0000004"


def test_a_full_disk_while_training_fails_clearly_and_keeps_the_checkpoints(
        tmp_path, shapes_data_dir, monkeypatch):
    import keras


    real_save = keras.Model.save_weights
    calls = {"n": 0}

    def save_weights(self, path, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError(28, "No space left on device")
        return real_save(self, path, *args, **kwargs)

    monkeypatch.setattr(keras.Model, "save_weights", save_weights)
    with pytest.raises(TrainingError, match="could not write checkpoint .*epoch-002.*intact"):
        _tiny_run(tmp_path, shapes_data_dir)
    names = sorted(p.name for p in (tmp_path / "run" / "checkpoints").iterdir())
    assert names == ["epoch-001"]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "failed"


def test_unwritable_runs_dir_is_a_user_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    result = CliRunner().invoke(main, ["train", str(REPO / "recipes" / "default.yaml"),
                                       "--set", f"runtime.runs_dir={blocker / 'runs'}"])
    assert result.exit_code == 2, result.output
    assert "cannot create the run directory" in result.output
    assert "Traceback" not in result.output


@pytest.mark.slow
def test_cli_sigterm_saves_a_checkpoint_and_exits_143(tmp_path, shapes_data_dir):
    sets = []
    for override in [f"data.data_dir={shapes_data_dir}", *TINY, "training.epochs=3",
                     "training.checkpoint_every_steps=2"]:
        sets += ["--set", override]
    run = tmp_path / "run"
    process = subprocess.Popen([sys.executable, "-m", "tfaccel.cli", "train",
                                str(REPO / "recipes" / "default.yaml"), "--run-dir", str(run),
                                *sets], env=_env(), cwd=REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not (run / "checkpoints" / "step-0000002").is_dir():
        assert process.poll() is None and time.monotonic() < deadline, "no checkpoint"
        time.sleep(0.01)
    sent = time.monotonic()
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 143, err[-2000:]
    assert time.monotonic() - sent < 60
    assert "stopped by signal SIGTERM" in err
    # The hint names this run's real directory, ready to paste.
    assert f"Resume with: tfaccel train --resume {run}\n" in err, err[-2000:]
    assert "Traceback" not in err
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "preempted"
    assert Path(summary["checkpoint"]).parent == run / "checkpoints"
    resumed = _cli("train", "--resume", str(run))
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [line["epoch"] for line in lines] == [1, 2, 3]


def test_recipe_differences_name_recipe_keys_and_keep_model_params_whole():
    # One difference per recipe key (flatten_recipe): a changed model.params is one entry
    # holding both whole mappings, not one entry per parameter.
    from tfaccel.config.recipe import recipe_from_dict
    from tfaccel.training.run_dir.resume import recipe_differences

    saved = recipe_from_dict({"model": {"name": "mlp", "params": {"hidden_units": [32]}}})
    requested = recipe_from_dict({"model": {"name": "mlp", "params": {"hidden_units": [64]}},
                                  "training": {"epochs": 7}, "seed": 3})
    assert recipe_differences(saved, requested) == [
        ("model.params", {"hidden_units": [32]}, {"hidden_units": [64]}),
        ("seed", 0, 3),
        ("training.epochs", saved.training.epochs, 7)]
    assert recipe_differences(saved, saved) == []


def test_a_resume_keeps_the_precision_auto_chose_when_the_run_started(tmp_path, tiny_finished,
                                                                      monkeypatch):
    from tfaccel.engine import precision
    from tfaccel.training.run import runner

    directory, _ = _copy_of(tiny_finished, tmp_path)
    started = json.loads((directory / "precision.json").read_text())
    assert started["policy"] == json.loads((directory / "summary.json").read_text())["precision"]
    # Today the measurement says the other policy: the resumed run must not switch (its
    # checkpoint continues bit-exactly only under the policy it was trained with).
    other = "float32" if started["policy"] == "mixed_bfloat16" else "mixed_bfloat16"
    monkeypatch.setattr(precision, "cpu_has_bf16", lambda: True)
    monkeypatch.setattr(precision, "_decided", {})
    monkeypatch.setenv(precision.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(precision, "measure_cpu_step",
                        lambda **_: (2.0, 3.0) if other == "float32" else (3.0, 2.0))
    assert precision.resolve_precision("auto") == other
    extended = runner.train(resume=directory, overrides=["training.epochs=3"])
    assert extended.summary["precision"] == started["policy"]
    assert extended.summary["precision_choice"]["reason"] == "chosen when the run started"
    assert json.loads((directory / "precision.json").read_text()) == started


@pytest.mark.slow
def test_one_csv_file_split_by_rows_resumes_exactly(tmp_path):
    # validation_fraction on ONE file holds out rows (files_stage.RowSplit), kept before the
    # shuffle: the resumed run reads the same training rows in the same order.
    rng = np.random.default_rng(0)
    rows = rng.normal(size=(320, 3)).round(4)
    (tmp_path / "one.csv").write_text("a,b,c,label\n" + "".join(
        f"{a},{b},{c},{int(a + b > 0)}\n" for a, b, c in rows))
    recipe = tmp_path / "rows.yaml"
    recipe.write_text(yaml.safe_dump({
        "name": "rows", "seed": 3,
        "data": {"source": "csv", "path": str(tmp_path / "one.csv"), "label_key": "label",
                 "validation_fraction": 0.2, "cache": None, "shuffle_buffer": 256},
        "model": {"name": "mlp", "params": {"hidden_units": [16]}},
        "training": {"epochs": 3, "global_batch_size": 32},
        "runtime": {"precision": "float32", "deterministic": True, "verbose": 0,
                    "tensorboard": False}}))
    # 256 training rows: 8 steps per epoch; SIGTERM after step 10 lands in epoch 2.
    report, output = _drive(tmp_path, [], stop_at=10, recipe=recipe)
    assert report["preempted"] and report["checkpoint"] == "step-0000011"
    assert "epoch 2, step 3 of 8" in output
    assert report["weights_max_diff"] <= TOLERANCE
    _assert_same_epochs(report["epochs_full"], report["epochs_resumed"])
