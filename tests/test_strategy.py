"""Tests for tfaccel.engine.strategy."""

import json

import pytest
import tensorflow as tf

from tfaccel.engine.strategy import auto_choices, describe_strategy, make_strategy
from tfaccel.errors import UserInputError

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


def test_unknown_kind_names_value_and_choices():
    with pytest.raises(UserInputError) as info:
        make_strategy("tpu_pod")
    assert "'tpu_pod'" in str(info.value)
    assert "mirrored" in str(info.value) and "one_device" in str(info.value)


def test_devices_rejected_for_auto_and_wrong_count():
    with pytest.raises(UserInputError, match="devices"):
        make_strategy("auto", devices=["/cpu:0"])
    with pytest.raises(UserInputError, match="exactly one device"):
        make_strategy("one_device", devices=["/cpu:0", "/cpu:1"])
    with pytest.raises(UserInputError, match="non-empty"):
        make_strategy("mirrored", devices=[])


def test_auto_without_cluster_or_gpus_is_default(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    gpus = tf.config.list_physical_devices("GPU")
    strategy = make_strategy("auto")
    if len(gpus) > 1:  # a host with several GPUs: auto must pick MirroredStrategy there
        assert describe_strategy(strategy)["strategy"] == "mirrored"
        assert describe_strategy(strategy)["replicas"] == len(gpus)
        # ...and the default strategy only when the GPUs are not seen:
        monkeypatch.setattr(tf.config, "list_physical_devices",
                            lambda kind=None: [] if kind == "GPU" else gpus)
        strategy = make_strategy("auto")
    assert strategy is tf.distribute.get_strategy()
    described = describe_strategy(strategy)
    assert described["strategy"] == "default" and described["replicas"] == 1
    # Keras' own placement: GPU:0 where there is one, the CPU otherwise.
    assert described["devices"] == ["/device:GPU:0" if gpus else "/device:CPU:0"]


def test_mirrored_on_logical_cpus_reduces_through_one_device(logical_cpus):
    strategy = make_strategy("mirrored", devices=logical_cpus)
    assert isinstance(strategy.extended._cross_device_ops, tf.distribute.ReductionToOneDevice)
    described = describe_strategy(strategy)
    assert described["strategy"] == "mirrored"
    assert described["replicas"] == 2
    assert [d.split("/")[-1] for d in described["devices"]] == ["device:CPU:0", "device:CPU:1"]
    # A real all-reduce across the two replicas works with this cross-device op.
    total = strategy.reduce(
        tf.distribute.ReduceOp.SUM,
        strategy.run(lambda: tf.constant(1.0)),
        axis=None,
    )
    assert float(total) == 2.0


def test_mirrored_default_devices_are_all_gpus_else_all_logical_cpus(logical_cpus):
    gpus = tf.config.list_logical_devices("GPU")
    assert describe_strategy(make_strategy("mirrored"))["replicas"] == (
        len(gpus) or len(logical_cpus))


def test_one_device_on_chosen_device(logical_cpus):
    described = describe_strategy(make_strategy("one_device", devices=[logical_cpus[1]]))
    assert described["strategy"] == "one_device"
    assert described["replicas"] == 1
    assert described["devices"][0].endswith("CPU:1")


def test_auto_choices_reads_tf_config(monkeypatch):
    cluster = {"cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"]}, "task": {"type": "worker", "index": 0}}
    monkeypatch.setenv("TF_CONFIG", json.dumps(cluster))
    choices = auto_choices()
    assert choices["strategy"] == "multi_worker"
    assert choices["tf_config_tasks"] == 2
    assert choices["devices"]["CPU"] >= 1
    assert choices["precision"] in ("float32", "mixed_bfloat16", "mixed_float16")
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["127.0.0.1:1"]}}))
    assert auto_choices()["strategy"] == "default"


def test_bad_tf_config_is_a_user_error(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", "{not json")
    with pytest.raises(UserInputError, match="TF_CONFIG"):
        auto_choices()


def test_auto_picks_mirrored_when_several_gpus_are_seen_on_any_host(monkeypatch):
    # The several-GPU branch, exercised on a CPU host too: the device probe is faked and
    # the strategy constructor recorded (no GPU is needed to check the choice).
    from tfaccel.engine import strategy as strategy_module

    monkeypatch.delenv("TF_CONFIG", raising=False)
    real = tf.config.list_physical_devices
    monkeypatch.setattr(tf.config, "list_physical_devices",
                        lambda kind=None: ["gpu0", "gpu1"] if kind == "GPU" else real(kind))
    built = []
    monkeypatch.setattr(strategy_module, "_mirrored", lambda devices: built.append(devices) or "M")
    assert make_strategy("auto") == "M"
    assert built == [None]  # all GPUs, chosen by _mirrored
    monkeypatch.setattr(tf.config, "list_physical_devices",
                        lambda kind=None: ["gpu0"] if kind == "GPU" else real(kind))
    assert make_strategy("auto") is tf.distribute.get_strategy()  # one GPU: default


def test_mirrored_on_gpu_devices_leaves_the_cross_device_op_to_tensorflow(monkeypatch):
    from tfaccel.engine import strategy as strategy_module

    seen = {}

    def fake_mirrored(devices, cross_device_ops):
        seen.update(devices=devices, cross_device_ops=cross_device_ops)
        return "M"

    monkeypatch.setattr(tf.distribute, "MirroredStrategy", fake_mirrored)
    assert strategy_module._mirrored(["/gpu:0", "/gpu:1"]) == "M"
    assert seen == {"devices": ["/gpu:0", "/gpu:1"], "cross_device_ops": None}  # NCCL where present
    strategy_module._mirrored(["/cpu:0", "/cpu:1"])
    assert isinstance(seen["cross_device_ops"], tf.distribute.ReductionToOneDevice)


def _collective_strategy(cluster_spec, *, task_type="worker", task_id=0):
    """A MultiWorkerMirroredStrategy as the rule sees it (class and cluster resolver),
    without starting TensorFlow's collectives in the test process."""
    import types

    import tensorflow as tf

    strategy = object.__new__(tf.distribute.MultiWorkerMirroredStrategy)
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(cluster_spec), task_type=task_type, task_id=task_id)
    strategy._extended = types.SimpleNamespace(_cluster_resolver=resolver)
    return strategy


def test_one_multi_worker_rule_for_data_engine_and_training(logical_cpus, monkeypatch):
    # config.cluster.strategy_role is THE rule; sharding (data), keras_compat (engine) and
    # the throughput monitor (training) all follow it.
    import tensorflow as tf

    from tfaccel.config import cluster
    from tfaccel.data import sharding
    from tfaccel.engine import keras_compat
    from tfaccel.training.fit_callbacks.throughput import ThroughputMonitor

    workers = {"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2", "127.0.0.1:3"]}
    cases = [
        (tf.distribute.get_strategy(), (0, 1)),
        (tf.distribute.MirroredStrategy(logical_cpus), (0, 1)),
        (_collective_strategy({}), (0, 1)),  # no TF_CONFIG: one worker
        (_collective_strategy({"worker": ["127.0.0.1:2"]}), (0, 1)),
        (_collective_strategy(workers, task_type="chief"), (0, 3)),
        (_collective_strategy(workers, task_type="worker", task_id=1), (2, 3)),
    ]
    for strategy, (index, count) in cases:
        role = cluster.strategy_role(strategy)
        assert (role.index, role.count) == (index, count), strategy
        assert cluster.is_multi_worker(strategy) is (count > 1)
        assert sharding.worker_of(strategy) == (index, count)

    class Model:  # what keras_compat and the monitor read of a model
        jit_compile = False

    for strategy, (_, count) in cases[2:]:
        model = Model()
        model.distribute_strategy = strategy
        for name in ("_maybe_symbolic_build", "train_step", "test_step"):
            setattr(model, name, lambda *a, **k: None)
        before = model.train_step
        keras_compat.patch_for_multi_worker(model)
        assert (model.train_step is not before) is (count > 1)
        if count > 1:
            monitor = ThroughputMonitor()
            monitor.attach(model, strategy=strategy)
            assert monitor.unavailable_reason == "MultiWorkerMirroredStrategy"
    monkeypatch.setattr(tf.distribute, "has_strategy", lambda: True)
    for strategy, (_, count) in cases:
        monkeypatch.setattr(tf.distribute, "get_strategy", lambda s=strategy: s)
        assert sharding.multi_worker_in_scope() is (count > 1)
        assert sharding.worker_in_scope()[1] == count
