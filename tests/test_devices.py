"""engine/devices.py: runtime.devices this machine lacks are refused before a strategy is built."""

from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import tfaccel
from tfaccel.engine.devices import check_devices, local_devices
from tfaccel.errors import RecipeError, UserInputError

ROOT = Path(__file__).resolve().parents[1]


def _no_gpus(monkeypatch):
    real = tf.config.get_visible_devices
    monkeypatch.setattr(tf.config, "get_visible_devices",
                        lambda kind=None: [] if kind in ("GPU", "TPU") else real(kind))


def test_the_local_devices_are_the_logical_cpus_of_the_split(monkeypatch):
    _no_gpus(monkeypatch)
    # tests/conftest.py splits the CPU in two logical devices.
    assert local_devices() == ["/cpu:0", "/cpu:1"]


def test_present_devices_pass_in_every_spelling(logical_cpus):
    check_devices(["/cpu:0", "/CPU:1", "cpu:1", "/device:CPU:0", logical_cpus[1]],
                  key="runtime.devices")
    check_devices(None)
    # Another job's devices are on another machine: not checked here.
    check_devices(["/job:worker/replica:0/task:1/device:GPU:3"])


def test_absent_gpus_are_refused_naming_the_key_the_missing_and_the_present(monkeypatch):
    _no_gpus(monkeypatch)
    with pytest.raises(UserInputError) as caught:
        check_devices(["/gpu:0", "/gpu:1"], key="runtime.devices")
    assert str(caught.value) == (
        "runtime.devices names /gpu:0, /gpu:1, which this machine does not have (TensorFlow "
        "sees no GPU here); the devices here are /cpu:0, /cpu:1. Name devices from that "
        "list, or leave runtime.devices empty to use every device of the strategy's kind "
        "(`tfaccel devices` lists them).")
    with pytest.raises(UserInputError, match=r"^devices names /cpu:2, which this machine "
                                             r"does not have; the devices here are /cpu:0, "):
        check_devices(["/cpu:0", "/cpu:2"])
    with pytest.raises(UserInputError, match=r"^devices: 'xpu:0' is not a device name"):
        check_devices(["xpu:0"])


@pytest.mark.parametrize("kind", ["mirrored", "one_device"])
def test_make_strategy_refuses_absent_devices(monkeypatch, kind):
    _no_gpus(monkeypatch)
    with pytest.raises(UserInputError, match="^devices names /gpu:1, which this machine"):
        tfaccel.make_strategy(kind, devices=["/gpu:1"])


def test_a_pipeline_refuses_absent_devices(monkeypatch):
    from tfaccel.engine.model_split import pipeline_devices

    _no_gpus(monkeypatch)
    with pytest.raises(UserInputError, match="^devices names /gpu:0, which this machine"):
        pipeline_devices(["/gpu:0", "/cpu:0"])
    assert pipeline_devices(["/cpu:1", "/cpu:0"]) == ["/cpu:1", "/cpu:0"]


def _tiny_recipe(tmp_path: Path, **runtime) -> dict:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 4)).astype("float32")
    np.savez(tmp_path / "blobs.npz", x_train=x, y_train=(x[:, 0] > 0).astype("int64"))
    return {"data": {"source": "arrays", "path": str(tmp_path / "blobs.npz"),
                     "validation_split_name": None},
            "model": {"name": "mlp", "params": {"hidden_units": [4]}},
            "training": {"epochs": 1, "global_batch_size": 8},
            "runtime": {"precision": "float32", "tensorboard": False,
                        "runs_dir": str(tmp_path / "runs"), **runtime}}


@pytest.mark.parametrize("strategy", ["mirrored", "pipeline", "one_device"])
def test_train_refuses_absent_devices_and_leaves_no_run_directory(tmp_path, monkeypatch,
                                                                   strategy):
    # Mirrored on absent GPUs used to hang in its first step (SIGINT and SIGTERM unanswered);
    # pipeline said "stage 0 on /gpu:0" and trained on the CPU.
    _no_gpus(monkeypatch)
    devices = ["/gpu:0"] if strategy == "one_device" else ["/gpu:0", "/gpu:1"]
    with pytest.raises(UserInputError, match=r"^runtime.devices names /gpu:0"):
        tfaccel.train(_tiny_recipe(tmp_path, strategy=strategy, devices=devices))
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


@pytest.mark.parametrize("strategy", ["auto", "multi_worker", "parameter_server"])
def test_strategies_that_choose_their_own_devices_refuse_the_key_without_tensorflow(
        tmp_path, strategy):
    from tfaccel.config.recipe import recipe_from_dict

    raw = _tiny_recipe(tmp_path, strategy=strategy, devices=["/gpu:0"])
    with pytest.raises(RecipeError, match=r"runtime.devices \(/gpu:0\) is read by "
                                          r"runtime.strategy one_device, mirrored or "
                                          f"pipeline only, not '{strategy}'"):
        recipe_from_dict(raw)


def test_one_device_with_two_devices_is_a_recipe_error(tmp_path):
    from tfaccel.config.recipe import recipe_from_dict

    raw = _tiny_recipe(tmp_path, strategy="one_device", devices=["/cpu:0", "/cpu:1"])
    with pytest.raises(RecipeError, match="one_device takes exactly one device"):
        recipe_from_dict(raw)


def test_the_cli_refuses_absent_gpus_with_exit_2_and_no_traceback(tmp_path):
    import yaml
    from launch_helpers import run_tfaccel

    recipe = _tiny_recipe(tmp_path)
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(recipe))
    # CUDA_VISIBLE_DEVICES is empty in run_tfaccel's environment: no GPU on any machine.
    code, output = run_tfaccel(["train", "tiny.yaml", "--set", "runtime.strategy=mirrored",
                                "--set", "runtime.devices=[/gpu:0,/gpu:1]"],
                               tmp_path=tmp_path, timeout=240)
    assert code == 2, output
    assert ("Error: runtime.devices names /gpu:0, /gpu:1, which this machine does not have "
            "(TensorFlow sees no GPU here); the devices here are /cpu:0.") in output
    assert "Traceback" not in output and "replica(s)" not in output
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
