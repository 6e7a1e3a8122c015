"""What `auto` picks on GPU and CPU machines (tfaccel.engine.strategy.auto_choices, the
`tfaccel devices` table), with the device list and capabilities mocked: no GPU needed."""

import pytest
import tensorflow as tf

from tfaccel.engine import precision, strategy

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


@pytest.fixture
def machine(monkeypatch):
    """``machine(gpus=[(major, minor) or None, ...], bf16=bool)``: this host as such a machine."""
    monkeypatch.delenv("TF_CONFIG", raising=False)

    def pretend(*, gpus=(), bf16=False):
        devices = [tf.config.PhysicalDevice(f"/physical_device:GPU:{i}", "GPU")
                   for i in range(len(gpus))]
        capability = dict(zip((d.name for d in devices), gpus))
        cpus = [tf.config.PhysicalDevice("/physical_device:CPU:0", "CPU")]
        monkeypatch.setattr(tf.config, "list_physical_devices",
                            lambda kind=None: {"GPU": devices, "CPU": cpus}.get(kind, []))
        monkeypatch.setattr(tf.config.experimental, "get_device_details",
                            lambda gpu: {} if capability[gpu.name] is None
                            else {"compute_capability": capability[gpu.name]})
        monkeypatch.setattr(precision, "cpu_has_bf16", lambda: bf16)
        # A CPU with bf16 decides by a measured step: pretend bf16 is the faster one.
        monkeypatch.setattr(precision, "cpu_choice",
                            lambda: {"policy": "mixed_bfloat16", "reason": "measured"})
        return strategy.auto_choices()

    return pretend


def test_one_gpu_with_tensor_cores_trains_in_mixed_float16_on_the_default_strategy(machine):
    choices = machine(gpus=[(8, 0)], bf16=True)  # the GPU decides, not the host's CPU
    assert choices["devices"]["GPU"] == 1
    assert choices["gpus"] == [{"name": "/physical_device:GPU:0",
                                "compute_capability": (8, 0)}]
    assert (choices["strategy"], choices["precision"]) == ("default", "mixed_float16")
    assert choices["xla"].startswith("off")  # Keras' own "auto" would turn it on here
    assert machine(gpus=[(7, 0)])["precision"] == "mixed_float16"  # the boundary


@pytest.mark.parametrize("capability", [(6, 1), (3, 7), None])
def test_an_older_gpu_or_one_of_unknown_capability_stays_float32(machine, capability):
    choices = machine(gpus=[capability], bf16=True)
    assert (choices["strategy"], choices["precision"]) == ("default", "float32")


def test_two_gpus_are_mirrored_and_one_older_gpu_keeps_both_in_float32(machine):
    choices = machine(gpus=[(8, 6), (8, 6)])
    assert (choices["strategy"], choices["precision"]) == ("mirrored", "mixed_float16")
    assert choices["devices"]["GPU"] == 2
    assert machine(gpus=[(8, 6), (6, 0)])["precision"] == "float32"


def test_a_cpu_machine_picks_by_its_bf16_instructions(machine):
    with_bf16 = machine(gpus=(), bf16=True)
    assert (with_bf16["strategy"], with_bf16["precision"]) == ("default", "mixed_bfloat16")
    without = machine(gpus=(), bf16=False)
    assert (without["strategy"], without["precision"]) == ("default", "float32")
    assert with_bf16["xla"] == without["xla"] == strategy.XLA_CHOICE


def test_a_tf_config_cluster_decides_before_the_gpus(machine, monkeypatch):
    monkeypatch.setenv("TF_CONFIG", '{"cluster": {"worker": ["a:1", "b:2"]}, '
                                    '"task": {"type": "worker", "index": 0}}')
    assert machine(gpus=[(8, 0), (8, 0)])["strategy"] == "multi_worker"
