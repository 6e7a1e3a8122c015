"""Check this machine's devices in one table: precision, XLA, scaling, input efficiency, doctor.

Run:  python benchmarks/device_check.py [--quick] [--set KEY=VALUE ...] [--json PATH]

On a machine with GPUs it measures on the GPUs (1 GPU vs all GPUs with MirroredStrategy,
float32 vs mixed_float16); on a CPU-only machine the same checks run on 2 logical CPU
devices, with mixed_bfloat16 as the mixed policy (float16 kernels are emulated on CPU and
many times slower, tensorflow/tensorflow#45441; without avx512_bf16/amx_bf16 bfloat16 is
emulated too, and the table says so). Every figure is `tfaccel doctor`'s (tools/doctor.py:
the model alone on batches in memory, and `fit` on the recipe's pipeline, timed by
training/fit_callbacks/throughput.py's monitor) on recipes/default.yaml with one setting changed:

- precision: model-alone examples/s, mixed policy over float32 (1 device);
- XLA: model-alone examples/s, jit_compile on over off (1 device, float32);
- scaling: model-alone examples/s on N devices over N x one device (the per-device batch
  kept, so the global batch is N x the recipe's);
- input efficiency: fit on the pipeline over fit on the same batches in memory;
- doctor: the verdict on recipes/default.yaml and on the resnet recipe, as shipped (on a
  CPU-only machine or with --quick a global batch over 128 is cut to 128, and the row
  says so);
- out of memory (GPU only): recipes/default.yaml trained at a global batch that does not
  fit in a GPU capped at OOM_MEMORY_MB, with training.micro_batch_size auto: the real
  ResourceExhaustedError, the micro-batch halved until a step fits, the run completed
  (in a process of its own: the cap is set before TensorFlow starts). Skipped on a
  CPU-only machine, and the row says so (tests/test_micro_batch_retry.py injects the
  error there).

--quick (CI; about 1.5 minutes on 2 idle cores) times 10 steps once; the default 20 steps, the
doctor's 2 repeats, and 2 rounds of the settings in turn, best of each kept (shared
machines have bimodal timings).
"""

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from machine import describe_cpu  # benchmarks/machine.py

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_RECIPE = ROOT / "recipes" / "default.yaml"
LOGICAL_CPUS = 2
MAX_CUT_BATCH = 128
# The out-of-memory row: a GPU capped at this much memory, a batch far above what fits.
OOM_MEMORY_MB = 256
OOM_GLOBAL_BATCH = 8192
COLUMNS = ("check", "baseline", "variant", "baseline ex/s", "variant ex/s", "result")


def plan_devices(*, gpus, auto_precision: str, cpu_name: str) -> dict:
    """Which devices and which mixed policy the check uses (no TensorFlow needed).

    Args:
        gpus: One dict per physical GPU: ``name`` (TensorFlow's device name) and
            ``device_name`` (the product, from get_device_details).
        auto_precision: What `runtime.precision: auto` resolves to here
            (tfaccel.engine.precision.resolve_precision), named beside the mixed policy.
        cpu_name: The CPU (benchmarks/machine.py's describe_cpu), named when there is no
            GPU.

    Returns:
        ``{"kind": "GPU" | "CPU", "devices": [names], "one": the single device,
        "mixed": policy, "mixed_note": why that policy, "name": the device named}``.
    """
    if gpus:
        kind, count, mixed = "GPU", len(gpus), "mixed_float16"
        products = sorted({gpu.get("device_name") or "unknown GPU" for gpu in gpus})
        name = f"{count} x {' / '.join(products)}"
        lacking = "tensor cores (compute capability 7.0+)"
    else:
        # float16 is never the CPU's mixed policy: its kernels are emulated, many times
        # slower (tensorflow#45441); bfloat16 has instructions on recent CPUs.
        kind, count, mixed = "CPU", LOGICAL_CPUS, "mixed_bfloat16"
        name = f"{cpu_name} (as {LOGICAL_CPUS} logical CPU devices)"
        lacking = "bfloat16 instructions (avx512_bf16/amx_bf16): bfloat16 is emulated"
    note = (f"{mixed}, what precision auto picks here" if auto_precision == mixed else
            f"{mixed}, though precision auto keeps {auto_precision} here: no {lacking}")
    names = [f"/{kind.lower()}:{n}" for n in range(count)]
    return {"kind": kind, "devices": names, "one": names[0], "mixed": mixed,
            "mixed_note": note, "name": name}


def detect_devices() -> dict:
    """`plan_devices` for this machine; on a CPU-only one, splits the CPU into 2 logical
    devices (call before TensorFlow initialises its runtime)."""
    import tensorflow as tf

    from tfaccel.engine.precision import resolve_precision

    gpus = [{"name": gpu.name,
             "device_name": tf.config.experimental.get_device_details(gpu).get("device_name")}
            for gpu in tf.config.list_physical_devices("GPU")]
    plan = plan_devices(gpus=gpus, auto_precision=resolve_precision("auto"),
                        cpu_name=describe_cpu())
    if plan["kind"] == "CPU":
        cpus = tf.config.list_physical_devices("CPU")
        tf.config.set_logical_device_configuration(
            cpus[0], [tf.config.LogicalDeviceConfiguration()] * LOGICAL_CPUS)
    return plan


def settings(plan: dict, *, batch: int) -> dict:
    """The doctor runs of the checks: name -> overrides of recipes/default.yaml."""
    one = ["runtime.strategy=one_device", f"runtime.devices=[{plan['one']}]",
           "training.jit_compile=false"]
    runs = {
        "float32": one + ["runtime.precision=float32"],
        "mixed": one + [f"runtime.precision={plan['mixed']}"],
        "xla": one + ["runtime.precision=float32", "training.jit_compile=true"],
    }
    if len(plan["devices"]) > 1:
        runs["all"] = ["runtime.strategy=mirrored",
                       f"runtime.devices=[{','.join(plan['devices'])}]",
                       "runtime.precision=float32", "training.jit_compile=false",
                       f"training.global_batch_size={batch * len(plan['devices'])}"]
    return runs


def resnet_recipes(folder: Path = ROOT / "recipes") -> list:
    """The shipped recipes whose model is a ResNet (resnet*.yaml first, then by model.name)."""
    import yaml

    named = sorted(folder.glob("resnet*.yaml"))
    if named:
        return named
    found = []
    for path in sorted(folder.glob("*.yaml")):
        model = (yaml.safe_load(path.read_text()) or {}).get("model") or {}
        if "resnet" in str(model.get("name", "")):
            found.append(path)
    return found


def _diagnose(path, overrides, *, steps, repeats):
    from tfaccel.config.recipe import load_recipe
    from tfaccel.tools.doctor import diagnose

    # The doctor's progress lines go to stderr: stdout holds the one table.
    return diagnose(load_recipe(str(path), list(overrides)), steps=steps, repeats=repeats,
                    progress=lambda line: print(line, file=sys.stderr, flush=True))


def measure(plan: dict, *, recipes, extra, quick: bool) -> dict:
    """Runs the doctor for every setting and recipe; returns ``{"runs", "doctor", ...}``."""
    from tfaccel.config.recipe import load_recipe

    steps, repeats, rounds = (10, 1, 1) if quick else (20, 2, 2)
    batch = load_recipe(str(DEFAULT_RECIPE), list(extra)).training.global_batch_size
    runs = {}
    for _ in range(rounds):
        for name, overrides in settings(plan, batch=batch).items():
            report = _diagnose(DEFAULT_RECIPE, [*extra, *overrides], steps=steps,
                               repeats=repeats)
            kept = runs.get(name)
            if kept is None or report["model_examples_per_sec"] > kept["model_examples_per_sec"]:
                runs[name] = report
    doctor = []
    # A GPU recipe's big batch takes minutes a step on a CPU: cut there and with --quick.
    cut = "--quick" if quick else ("CPU" if plan["kind"] == "CPU" else None)
    for path in recipes:
        overrides, note = list(extra), ""
        shipped = load_recipe(str(path), overrides).training.global_batch_size
        if cut and shipped > MAX_CUT_BATCH:
            overrides.append(f"training.global_batch_size={MAX_CUT_BATCH}")
            note = f", global batch {shipped} -> {MAX_CUT_BATCH} ({cut})"
        report = _diagnose(path, overrides, steps=steps, repeats=repeats)
        doctor.append({"recipe": Path(path).name, "note": note, "report": report})
    return {"runs": runs, "doctor": doctor, "steps": steps, "repeats": repeats,
            "rounds": rounds, "oom": measure_out_of_memory(plan, extra=extra)}


# Run in a process of its own: the memory cap must be set before TensorFlow uses the GPU.
_OOM_SCRIPT = """
import json, sys
import tensorflow as tf
gpu = tf.config.list_physical_devices("GPU")[0]
tf.config.set_logical_device_configuration(
    gpu, [tf.config.LogicalDeviceConfiguration(memory_limit=int(sys.argv[1]))])
import tfaccel
try:
    summary = tfaccel.train(sys.argv[2], overrides=json.loads(sys.argv[3])).summary
except tfaccel.errors.TfaccelError as error:
    summary = {"status": "failed", "failure": {"message": str(error)}}
print("OOM-CHECK " + json.dumps(summary, default=str))
"""


def out_of_memory_overrides(plan: dict, *, extra, runs_dir) -> list:
    """The overrides of recipes/default.yaml for the out-of-memory row."""
    return [*extra, "runtime.strategy=one_device", f"runtime.devices=[{plan['one']}]",
            "runtime.precision=float32", f"runtime.runs_dir={runs_dir}",
            f"training.global_batch_size={OOM_GLOBAL_BATCH}", "training.micro_batch_size=auto",
            "training.epochs=1", "training.steps_per_epoch=1", "training.validation_steps=1"]


def measure_out_of_memory(plan: dict, *, extra) -> dict:
    """The out-of-memory check: a run's summary on a GPU, or why it was skipped."""
    if plan["kind"] != "GPU":
        return {"skipped": "skipped on CPU: host memory has no device allocator to run out "
                           "of (tests/test_micro_batch_retry.py injects the error)"}
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as runs_dir:
        overrides = out_of_memory_overrides(plan, extra=extra, runs_dir=runs_dir)
        done = subprocess.run([sys.executable, "-c", _OOM_SCRIPT, str(OOM_MEMORY_MB),
                               str(DEFAULT_RECIPE), json.dumps(overrides)],
                              capture_output=True, text=True)
    for line in done.stdout.splitlines():
        if line.startswith("OOM-CHECK "):
            return json.loads(line[len("OOM-CHECK "):])
    return {"status": "failed", "failure": {"message": (done.stderr.strip().splitlines()
                                                        or ["no output"])[-1]}}


def out_of_memory_row(summary: dict) -> tuple:
    """The table's row for `measure_out_of_memory`'s result."""
    what = (f"global batch {OOM_GLOBAL_BATCH} in {OOM_MEMORY_MB} MB", "micro_batch_size auto")
    if "skipped" in summary:
        return ("out of memory", *what, None, None, summary["skipped"])
    retries = summary.get("micro_batch_retries") or []
    if summary.get("status") != "completed":
        return ("out of memory", *what, None, None,
                f"failed: {summary.get('failure', {}).get('message', '?')}")
    if not retries:
        return ("out of memory", *what, None, summary.get("examples_per_sec"),
                f"not reached: micro-batch {summary['micro_batch_size']} fit (raise "
                "OOM_GLOBAL_BATCH)")
    return ("out of memory", *what, None, summary.get("examples_per_sec"),
            f"micro-batch {retries[0]['micro_batch_size']} -> {summary['micro_batch_size']} "
            f"({len(retries)} retries, {summary['accumulation_steps']} accumulation steps), "
            "completed")


def table_rows(plan: dict, measured: dict) -> list:
    """The table's rows (tuples in COLUMNS order) from `measure`'s reports."""
    runs = measured["runs"]
    model = {name: report["model_examples_per_sec"] for name, report in runs.items()}
    base = runs["float32"]
    rows = [
        ("precision", "float32", plan["mixed"], model["float32"], model["mixed"],
         f"{model['mixed'] / model['float32']:.2f}x"),
        ("XLA", "jit_compile off", "jit_compile on", model["float32"], model["xla"],
         f"{model['xla'] / model['float32']:.2f}x"),
    ]
    count = len(plan["devices"])
    if "all" in model:
        rows.append(("scaling", "1 device", f"{count} devices, mirrored", model["float32"],
                     model["all"],
                     f"efficiency {model['all'] / (count * model['float32']):.2f}"))
    else:
        rows.append(("scaling", "1 device", "one device only", model["float32"],
                     None, "not measured"))
    rows.append(("input efficiency", "in memory", "pipeline", base["model_examples_per_sec"],
                 base["fit_examples_per_sec"],
                 f"{base['fit_examples_per_sec'] / base['model_examples_per_sec']:.2f}"))
    for entry in measured["doctor"]:
        report = entry["report"]
        rows.append((f"doctor {entry['recipe']}", "model alone", "fit",
                     report["model_examples_per_sec"], report["fit_examples_per_sec"],
                     f"{report['verdict']} (input wait {report['input_wait_fraction']:.1%}, "
                     f"{report['settings']['precision']}, "
                     f"{report['settings']['replicas']} replica(s){entry['note']})"))
    if "oom" in measured:
        rows.append(out_of_memory_row(measured["oom"]))
    return rows


def format_table(plan: dict, rows, *, measured: dict) -> str:
    """The one Markdown table, its device named above it and the policy's reason below."""
    lines = [f"Device check ({plan['kind']}): {plan['name']}; tfaccel doctor, "
             f"{measured['steps']} steps, {measured['repeats']} repeat(s), "
             f"{measured['rounds']} round(s)", "",
             "| " + " | ".join(COLUMNS) + " |",
             "| --- | --- | --- | ---: | ---: | --- |"]
    for check, baseline, variant, rate_a, rate_b, result in rows:
        lines.append(f"| {check} | {baseline} | {variant} | "
                     f"{'-' if rate_a is None else format(rate_a, ',.0f')} | "
                     f"{'-' if rate_b is None else format(rate_b, ',.0f')} | {result} |")
    lines += ["", f"precision: {plan['mixed_note']}."]
    if plan["kind"] == "CPU":
        lines.append(f"scaling: the {LOGICAL_CPUS} logical CPU devices share the same cores, "
                     "so an efficiency near 1/2 is expected here; GPUs should come near 1.")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="10 steps, one round (CI: about 1.5 minutes on 2 idle CPU cores).")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE",
                        help="Override every recipe (e.g. data.data_dir=/tmp/tfds).")
    parser.add_argument("--recipe", dest="recipes", action="append", default=None,
                        help="Recipes for the doctor rows (default: recipes/default.yaml "
                             "and the resnet recipe).")
    parser.add_argument("--json", dest="json_path", help="Also write the figures as JSON.")
    args = parser.parse_args(argv)
    plan = detect_devices()
    recipes = args.recipes or [DEFAULT_RECIPE, *resnet_recipes()]
    from tfaccel.errors import UserInputError

    try:
        measured = measure(plan, recipes=recipes, extra=args.overrides, quick=args.quick)
    except UserInputError as error:  # a bad --set or --recipe: its message, no traceback
        print(f"device_check: {error}", file=sys.stderr)
        sys.exit(2)
    rows = table_rows(plan, measured)
    print(format_table(plan, rows, measured=measured))
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(
            {"device": plan, "columns": COLUMNS, "rows": rows}, indent=2, default=str))


if __name__ == "__main__":
    main()
