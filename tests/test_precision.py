"""Tests for tfaccel.engine.precision."""

import json

import keras
import pytest

from tfaccel.engine import precision
from tfaccel.errors import UserInputError

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


@pytest.fixture(autouse=True)
def _restore_policy():
    yield
    keras.mixed_precision.set_global_policy("float32")


def _cpuinfo(tmp_path, flags):
    path = tmp_path / "cpuinfo"
    path.write_text(f"processor\t: 0\nflags\t\t: fpu sse2 {flags}\n\nprocessor\t: 1\n")
    return str(path)


def test_cpu_bf16_flags(tmp_path):
    assert precision.cpu_has_bf16(_cpuinfo(tmp_path, "avx512f avx512_bf16")) is True
    assert precision.cpu_has_bf16(_cpuinfo(tmp_path, "amx_tile amx_bf16")) is True
    assert precision.cpu_has_bf16(_cpuinfo(tmp_path, "avx2 avx512f")) is False
    assert precision.cpu_has_bf16(str(tmp_path / "missing")) is False


@pytest.fixture
def cpu_only_host(monkeypatch):
    """Makes any host (a GPU one too) look like a machine without GPUs or TPUs."""
    monkeypatch.setattr(precision, "_cpu_only", lambda: True)
    import tensorflow as tf

    real = tf.config.list_physical_devices
    monkeypatch.setattr(tf.config, "list_physical_devices",
                        lambda kind=None: [] if kind in ("GPU", "TPU") else real(kind))


def test_auto_on_cpu_follows_bf16_flags(monkeypatch, cpu_only_host):
    # Both branches, whatever this machine's CPU has (AMX/avx512_bf16 or not).
    monkeypatch.setattr(precision, "cpu_has_bf16", lambda: True)
    assert precision.resolve_precision("auto") == "mixed_bfloat16"
    monkeypatch.setattr(precision, "cpu_has_bf16", lambda: False)
    assert precision.resolve_precision("auto") == "float32"


def test_auto_on_gpus_follows_compute_capability(monkeypatch):
    import tensorflow as tf

    fake_gpus = ["gpu0", "gpu1"]
    monkeypatch.setattr(
        tf.config, "list_physical_devices", lambda kind=None: fake_gpus if kind == "GPU" else []
    )
    monkeypatch.setattr(precision, "_compute_capability", lambda gpu: (8, 0))
    assert precision.resolve_precision("auto") == "mixed_float16"
    monkeypatch.setattr(precision, "_compute_capability", lambda gpu: (8, 0) if gpu == "gpu0" else (6, 1))
    assert precision.resolve_precision("auto") == "float32"


@pytest.mark.parametrize("flags,auto", [("avx512f avx512_bf16", "mixed_bfloat16"),
                                        ("amx_tile amx_bf16", "mixed_bfloat16"),
                                        ("avx2 avx512f", "float32")])
def test_every_policy_is_set_on_both_kinds_of_cpu_and_an_explicit_one_wins(
        monkeypatch, tmp_path, cpu_only_host, flags, auto):
    # The real CPU-feature probe reads a fake /proc/cpuinfo: a CPU with bfloat16
    # instructions and one without, whatever this machine has.
    monkeypatch.setattr(precision.cpu_has_bf16, "__defaults__", (_cpuinfo(tmp_path, flags),))
    compute = {"float32": "float32", "mixed_float16": "float16",
               "mixed_bfloat16": "bfloat16"}
    for asked in ("auto", "float32", "mixed_float16", "mixed_bfloat16"):
        expected = auto if asked == "auto" else asked  # an explicit name is never overridden
        keras.mixed_precision.set_global_policy("float32")
        if expected == "mixed_float16":  # the CPU-only warning (tensorflow#45441)
            with pytest.warns(RuntimeWarning, match="45441"):
                assert precision.set_precision(asked) == expected
        else:
            assert precision.set_precision(asked) == expected
        assert keras.mixed_precision.global_policy().name == expected
        layer = keras.layers.Dense(2)
        assert (layer.compute_dtype, layer.variable_dtype) == (compute[expected], "float32")
        # Setting float32 back restores plain layers (nothing of the policy lingers).
        assert precision.set_precision("float32") == "float32"
        assert keras.layers.Dense(2).compute_dtype == "float32"


def test_unknown_policy_names_value_and_choices():
    with pytest.raises(UserInputError) as info:
        precision.set_precision("fp8")
    assert "'fp8'" in str(info.value) and "mixed_bfloat16" in str(info.value)


def test_resolve_has_no_side_effect():
    keras.mixed_precision.set_global_policy("float32")
    precision.resolve_precision("mixed_bfloat16")
    assert keras.mixed_precision.global_policy().name == "float32"


def test_set_precision_sets_global_policy():
    assert precision.set_precision("mixed_bfloat16") == "mixed_bfloat16"
    assert keras.mixed_precision.global_policy().name == "mixed_bfloat16"
    layer = keras.layers.Dense(2)
    assert layer.compute_dtype == "bfloat16" and layer.variable_dtype == "float32"


def test_mixed_float16_on_cpu_warns(cpu_only_host):
    with pytest.warns(RuntimeWarning, match="45441"):
        assert precision.set_precision("mixed_float16") == "mixed_float16"
    assert keras.mixed_precision.global_policy().name == "mixed_float16"


def test_mixed_float16_with_a_gpu_does_not_warn(monkeypatch):
    import warnings

    monkeypatch.setattr(precision, "_cpu_only", lambda: False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        assert precision.set_precision("mixed_float16") == "mixed_float16"


def test_auto_on_tpu_and_on_gpus_of_unknown_capability(monkeypatch):
    import tensorflow as tf

    monkeypatch.setattr(tf.config, "list_physical_devices",
                        lambda kind=None: ["tpu0"] if kind == "TPU" else [])
    monkeypatch.setattr(precision, "cpu_has_bf16", lambda: False)
    assert precision.resolve_precision("auto") == "mixed_bfloat16"
    monkeypatch.setattr(tf.config, "list_physical_devices",
                        lambda kind=None: ["gpu0"] if kind == "GPU" else [])
    monkeypatch.setattr(precision, "_compute_capability", lambda gpu: None)
    assert precision.resolve_precision("auto") == "float32"  # unknown: no float16 gamble


def _measured(monkeypatch, tmp_path, float32_ms, bfloat16_ms):
    calls = []

    def measure(**_):
        calls.append(1)
        return float32_ms, bfloat16_ms

    monkeypatch.setenv(precision.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(precision, "measure_cpu_step", measure)
    monkeypatch.setattr(precision, "_decided", {})
    monkeypatch.setattr(precision, "cpu_has_bf16", lambda: True)
    return calls


@pytest.mark.parametrize("float32_ms, bfloat16_ms, expected", [
    (10.0, 6.0, "mixed_bfloat16"),  # bf16 1.67x faster (AMX, Zen 4)
    (10.0, 9.5, "float32"),         # 5% faster: under the 10% margin
    (10.0, 14.0, "float32"),        # bf16 slower (a CPU that emulates it)
])
def test_auto_on_a_bf16_cpu_takes_the_measured_faster_policy(monkeypatch, tmp_path,
                                                              cpu_only_host, float32_ms,
                                                              bfloat16_ms, expected):
    calls = _measured(monkeypatch, tmp_path, float32_ms, bfloat16_ms)
    choice = precision.auto_choice()
    assert choice["policy"] == expected == precision.resolve_precision("auto")
    assert (choice["float32_ms"], choice["bfloat16_ms"]) == (float32_ms, bfloat16_ms)
    assert f"{float32_ms:.2f} ms in float32" in choice["reason"]
    assert choice["measured"] is True
    assert calls == [1]  # measured once per process


def test_the_measurement_is_kept_per_cpu_model_and_reused(monkeypatch, tmp_path,
                                                          cpu_only_host):
    calls = _measured(monkeypatch, tmp_path, 10.0, 6.0)
    assert precision.cpu_choice()["policy"] == "mixed_bfloat16"
    cached = json.loads((tmp_path / "cache" / precision.CACHE_FILE).read_text())
    assert cached == {precision._cpu_key(): {"float32_ms": 10.0, "bfloat16_ms": 6.0}}
    # Another process on the same machine: the figures come from the cache, not a timing
    # (which could land on the other side this time).
    monkeypatch.setattr(precision, "_decided", {})
    monkeypatch.setattr(precision, "measure_cpu_step", lambda **_: (5.0, 9.0))
    choice = precision.cpu_choice()
    assert choice["policy"] == "mixed_bfloat16" and choice["measured"] is False
    assert calls == [1]


def test_a_cpu_without_bf16_is_not_measured(monkeypatch, tmp_path, cpu_only_host):
    calls = _measured(monkeypatch, tmp_path, 10.0, 6.0)
    monkeypatch.setattr(precision, "cpu_has_bf16", lambda: False)
    choice = precision.auto_choice()
    assert choice == {"policy": "float32", "reason": "the CPU has no bfloat16 instructions"}
    assert calls == []


def test_measure_cpu_step_times_both_policies(monkeypatch):
    monkeypatch.undo()  # the real measurement, not conftest's pinned figures
    float32_ms, bfloat16_ms = precision.measure_cpu_step(batch=4, repeats=1, steps=1)
    assert float32_ms > 0 and bfloat16_ms > 0


def test_several_workers_decide_by_the_flags_alone(monkeypatch, tmp_path, cpu_only_host):
    # Each worker would time its own machine; they must all train under one policy.
    calls = _measured(monkeypatch, tmp_path, 10.0, 14.0)
    choice = precision.auto_choice(measure=False)
    assert choice["policy"] == "mixed_bfloat16" and "several workers" in choice["reason"]
    assert calls == []
    assert precision.auto_choice()["policy"] == "float32" and calls == [1]
