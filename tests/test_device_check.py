"""benchmarks/device_check.py: device and precision choice (mocked devices), its table, a --quick run."""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tfaccel.tools.doctor_advice import verdict_for

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)

ROOT = Path(__file__).resolve().parent.parent
VERDICTS = {verdict_for(wait) for wait in (0.0, 0.1, 0.5)}


def _load(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check = _load("device_check")
A100 = {"name": "/physical_device:GPU:0", "device_name": "NVIDIA A100-SXM4-40GB"}


def test_gpus_are_checked_with_mixed_float16_one_gpu_against_all():
    plan = check.plan_devices(gpus=[A100, dict(A100, name="/physical_device:GPU:1")],
                              auto_precision="mixed_float16", cpu_name="any CPU")
    assert plan["kind"] == "GPU"
    assert plan["devices"] == ["/gpu:0", "/gpu:1"] and plan["one"] == "/gpu:0"
    assert plan["mixed"] == "mixed_float16"
    assert plan["name"] == "2 x NVIDIA A100-SXM4-40GB"
    assert plan["mixed_note"] == "mixed_float16, what precision auto picks here"


def test_gpus_without_tensor_cores_say_auto_keeps_float32():
    plan = check.plan_devices(gpus=[dict(A100, device_name="Tesla P100-PCIE-16GB")],
                              auto_precision="float32", cpu_name="any CPU")
    assert plan["mixed"] == "mixed_float16"
    assert plan["mixed_note"] == ("mixed_float16, though precision auto keeps float32 here: "
                                  "no tensor cores (compute capability 7.0+)")


@pytest.mark.parametrize("auto, says", [
    ("mixed_bfloat16", "mixed_bfloat16, what precision auto picks here"),
    ("float32", "mixed_bfloat16, though precision auto keeps float32 here: no bfloat16 "
                "instructions (avx512_bf16/amx_bf16): bfloat16 is emulated")])
def test_cpu_only_is_checked_on_two_logical_devices_with_bfloat16(auto, says):
    plan = check.plan_devices(gpus=[], auto_precision=auto, cpu_name="AMD EPYC, 2 cores")
    assert plan["kind"] == "CPU"
    assert plan["devices"] == ["/cpu:0", "/cpu:1"] and plan["one"] == "/cpu:0"
    # float16 is never the CPU's mixed policy: its CPU kernels are emulated, many times slower.
    assert plan["mixed"] == "mixed_bfloat16"
    assert plan["mixed_note"] == says
    assert plan["name"] == "AMD EPYC, 2 cores (as 2 logical CPU devices)"


@pytest.mark.parametrize("capability, policy", [((9, 0), "mixed_float16"), ((6, 0), "float32")])
def test_detect_devices_names_the_gpus_and_leaves_the_cpu_whole(monkeypatch, capability,
                                                                policy):
    import tensorflow as tf

    class Device:
        def __init__(self, name):
            self.name = name

    gpus = [Device("/physical_device:GPU:0"), Device("/physical_device:GPU:1")]
    monkeypatch.setattr(tf.config, "list_physical_devices",
                        lambda kind=None: gpus if kind == "GPU" else [Device("cpu")])
    monkeypatch.setattr(tf.config.experimental, "get_device_details",
                        lambda device: {"device_name": "NVIDIA H100 80GB HBM3",
                                        "compute_capability": capability})
    split = []
    monkeypatch.setattr(tf.config, "set_logical_device_configuration",
                        lambda *args: split.append(args))
    plan = check.detect_devices()
    assert plan["name"] == "2 x NVIDIA H100 80GB HBM3"
    assert plan["devices"] == ["/gpu:0", "/gpu:1"]
    # The note follows what precision auto resolves to on these GPUs (engine.precision).
    assert plan["mixed_note"].startswith(
        "mixed_float16, what" if policy == "mixed_float16" else
        "mixed_float16, though precision auto keeps float32")
    assert split == []  # GPUs are used as they are; only a CPU-only machine is split


def test_detect_devices_splits_a_cpu_only_machine_in_two(monkeypatch):
    import tensorflow as tf

    cpu = object()
    monkeypatch.setattr(tf.config, "list_physical_devices",
                        lambda kind=None: [cpu] if kind == "CPU" else [])
    split = []
    monkeypatch.setattr(tf.config, "set_logical_device_configuration",
                        lambda device, config: split.append((device, len(config))))
    plan = check.detect_devices()
    assert plan["kind"] == "CPU" and split == [(cpu, 2)]


def test_settings_scale_the_global_batch_with_the_devices_and_skip_one_device():
    two = check.plan_devices(gpus=[], auto_precision="mixed_bfloat16", cpu_name="cpu")
    runs = check.settings(two, batch=64)
    assert set(runs) == {"float32", "mixed", "xla", "all"}
    assert "runtime.precision=mixed_bfloat16" in runs["mixed"]
    assert "training.jit_compile=true" in runs["xla"]
    assert "training.global_batch_size=128" in runs["all"]
    assert "runtime.devices=[/cpu:0,/cpu:1]" in runs["all"]
    one = check.plan_devices(gpus=[A100], auto_precision="mixed_float16", cpu_name="cpu")
    assert set(check.settings(one, batch=64)) == {"float32", "mixed", "xla"}


def _report(model, fit, verdict="compute-bound", wait=0.01):
    return {"model_examples_per_sec": model, "fit_examples_per_sec": fit, "verdict": verdict,
            "input_wait_fraction": wait,
            "settings": {"precision": "float32", "replicas": 1}}


def test_table_rows_are_the_ratios_of_the_doctor_figures():
    plan = check.plan_devices(gpus=[], auto_precision="mixed_bfloat16", cpu_name="cpu")
    measured = {"runs": {"float32": _report(1000, 800), "mixed": _report(1500, 1),
                         "xla": _report(500, 1), "all": _report(1200, 1)},
                "doctor": [{"recipe": "default.yaml", "note": "",
                            "report": _report(900, 600, "input-bound", 0.25)}],
                "steps": 10, "repeats": 1, "rounds": 1}
    rows = check.table_rows(plan, measured)
    assert [row[0] for row in rows] == ["precision", "XLA", "scaling", "input efficiency",
                                        "doctor default.yaml"]
    assert [row[5] for row in rows[:4]] == ["1.50x", "0.50x", "efficiency 0.60", "0.80"]
    assert rows[4][5].startswith("input-bound (input wait 25.0%")
    table = check.format_table(plan, rows, measured=measured)
    assert table.splitlines()[0] == ("Device check (CPU): cpu (as 2 logical CPU devices); "
                                     "tfaccel doctor, 10 steps, 1 repeat(s), 1 round(s)")
    assert table.splitlines()[2] == "| " + " | ".join(check.COLUMNS) + " |"
    assert "| precision | float32 | mixed_bfloat16 | 1,000 | 1,500 | 1.50x |" in table


def test_one_device_leaves_scaling_unmeasured():
    plan = check.plan_devices(gpus=[A100], auto_precision="mixed_float16", cpu_name="cpu")
    measured = {"runs": {"float32": _report(1000, 800), "mixed": _report(3000, 1),
                         "xla": _report(1100, 1)}, "doctor": []}
    rows = check.table_rows(plan, measured)
    assert rows[2] == ("scaling", "1 device", "one device only", 1000, None, "not measured")
    table = check.format_table(plan, rows, measured={**measured, "steps": 10, "repeats": 1,
                                                     "rounds": 1})
    assert "| scaling | 1 device | one device only | 1,000 | - | not measured |" in table


def test_the_resnet_recipe_is_found_by_its_model():
    assert [p.name for p in check.resnet_recipes()] == ["mirrored_accumulate.yaml"]


def test_a_resnet_named_recipe_comes_first(tmp_path):
    (tmp_path / "other.yaml").write_text("model: {name: resnet50}\n")
    (tmp_path / "resnet_small.yaml").write_text("model: {name: resnet_small}\n")
    assert [p.name for p in check.resnet_recipes(tmp_path)] == ["resnet_small.yaml"]


@pytest.mark.slow
@pytest.mark.heavy  # outside the 15-minute CI budget: the whole benchmark script (~140 s); its pieces are tested above
def test_quick_run_prints_one_table_on_two_logical_cpus(shapes_data_dir):
    # A fresh process: the logical-device split needs TensorFlow uninitialised.
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "device_check.py"), "--quick",
         "--set", f"data.data_dir={shapes_data_dir}"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    machine = _load("machine")
    assert lines[0].startswith(f"Device check (CPU): {machine.describe_cpu()} "
                               "(as 2 logical CPU devices); tfaccel doctor, 10 steps")
    rows = [line for line in lines if line.startswith("| ")]
    assert rows[0] == "| " + " | ".join(check.COLUMNS) + " |"
    assert rows[1] == "| --- | --- | --- | ---: | ---: | --- |"
    cells = [[c.strip() for c in row.strip("|").split("|")] for row in rows[2:]]
    assert [c[0] for c in cells] == ["precision", "XLA", "scaling", "input efficiency",
                                     "doctor default.yaml", "doctor mirrored_accumulate.yaml",
                                     "out of memory"]
    assert all(len(c) == len(check.COLUMNS) for c in cells)
    assert cells[0][1:3] == ["float32", "mixed_bfloat16"]
    assert cells[2][2] == "2 devices, mirrored"
    assert cells[6][3:] == ["-", "-", "skipped on CPU: host memory has no device allocator "
                            "to run out of (tests/test_micro_batch_retry.py injects the error)"]
    cells = cells[:6]
    for c in cells:
        assert float(c[3].replace(",", "")) > 0 and float(c[4].replace(",", "")) > 0
    ratios = [float(re.search(r"[\d.]+", c[5]).group()) for c in cells[:4]]
    assert all(r > 0 for r in ratios), ratios
    for c in cells[4:]:
        assert c[5].split(" (")[0] in VERDICTS
    assert "replica(s), global batch 512 -> 128 (--quick)" in cells[5][5]


def test_a_bad_override_is_named_with_exit_code_2_and_no_traceback(monkeypatch, capsys):
    plan = check.plan_devices(gpus=[], auto_precision="mixed_bfloat16", cpu_name="cpu")
    monkeypatch.setattr(check, "detect_devices", lambda: plan)
    with pytest.raises(SystemExit) as exited:
        check.main(["--quick", "--set", "training.epochz=3"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("device_check: ") and "training.epochz" in err
    assert "Traceback" not in err


def test_the_out_of_memory_row_is_skipped_on_cpu_and_reads_a_gpu_run():
    cpu = check.plan_devices(gpus=[], auto_precision="float32", cpu_name="cpu")
    skipped = check.out_of_memory_row(check.measure_out_of_memory(cpu, extra=[]))
    assert skipped[3:5] == (None, None) and skipped[5].startswith("skipped on CPU")
    retried = {"status": "completed", "micro_batch_size": 512, "accumulation_steps": 16,
               "examples_per_sec": 900.0,
               "micro_batch_retries": [{"micro_batch_size": 8192, "retried_with": 4096}] * 4}
    assert check.out_of_memory_row(retried) == (
        "out of memory", "global batch 8192 in 256 MB", "micro_batch_size auto", None, 900.0,
        "micro-batch 8192 -> 512 (4 retries, 16 accumulation steps), completed")
    failed = {"status": "failed", "failure": {"message": "out of device memory at 1"}}
    assert check.out_of_memory_row(failed)[5] == "failed: out of device memory at 1"


def test_the_out_of_memory_overrides_make_a_valid_recipe(tmp_path):
    from tfaccel.config.recipe import load_recipe

    gpu = check.plan_devices(gpus=[A100], auto_precision="mixed_float16", cpu_name="cpu")
    recipe = load_recipe(str(check.DEFAULT_RECIPE), check.out_of_memory_overrides(
        gpu, extra=[], runs_dir=tmp_path))
    assert recipe.training.micro_batch_size == "auto"
    assert recipe.training.global_batch_size == check.OOM_GLOBAL_BATCH
    assert recipe.runtime.devices == [gpu["one"]]
