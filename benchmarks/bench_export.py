"""Exports a finished run in every quantized format and prints size, accuracy and latency.

Each row is one `tfaccel.export` call: the export and the float model exported in the same
format, both loaded back with their own runtime, run on the run's validation split, and
timed side by side on single examples (alternating, best of --runs). Usage::

    tfaccel train recipes/default.yaml --run-dir runs/default
    python benchmarks/bench_export.py runs/default

A case is FORMAT:MODE, optionally :OPTION+OPTION with the options `outside`
(--preprocessing outside), `per-tensor` and `strip`.
"""

from __future__ import annotations

import argparse
import os
import tempfile

from machine import describe_cpu  # benchmarks/machine.py

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

CASES = ("litert:int8", "litert:int8:per-tensor+strip", "litert:int8:outside",
         "litert:int8:outside+per-tensor+strip", "litert:dynamic", "litert:float16",
         "onnx:int8", "onnx:dynamic", "keras:int8")
OPTIONS = {"outside": ("preprocessing", "outside"), "per-tensor": ("per_tensor", True),
           "strip": ("strip", True)}


def _parse_case(case: str):
    """'litert:int8:outside+strip' -> ('litert', 'int8', {'preprocessing': 'outside', ...})."""
    fmt, mode, *rest = case.split(":")
    names = rest[0].split("+") if rest and rest[0] else []
    unknown = [n for n in names if n not in OPTIONS]
    if unknown or len(rest) > 1:
        raise SystemExit(f"bad case {case!r}: options are {', '.join(OPTIONS)}")
    return fmt, mode, dict(OPTIONS[n] for n in names)


def _litert_weight_bytes(path: str) -> int:
    """Bytes of constant buffers (weights, biases) in a .tflite, the rest being overhead."""
    from tensorflow.lite.tools import flatbuffer_utils

    model = flatbuffer_utils.read_model(path)
    return sum(len(b.data) for b in model.buffers if b.data is not None)


def _kernel_table(float_path: str, int8_path: str, *, runs: int, calls: int) -> list:
    """Single-example latency of both .tflite files with XNNPACK and with LiteRT's builtin
    kernels (no delegate), the four contenders alternated, best of `runs`."""
    import time

    import numpy as np
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    contenders = {}
    for label, path in (("float32", float_path), ("int8", int8_path)):
        for kernels, resolver in (("XNNPACK", OpResolverType.AUTO),
                                  ("builtin", OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)):
            interpreter = Interpreter(model_path=path, num_threads=1,
                                      experimental_op_resolver_type=resolver)
            interpreter.allocate_tensors()
            contenders[(label, kernels)] = interpreter
    example = None
    best = {key: float("inf") for key in contenders}
    for _ in range(runs):
        for key, interpreter in contenders.items():
            source = interpreter.get_input_details()[0]
            if example is None:
                example = np.random.default_rng(0).uniform(
                    0, 255, source["shape"]).astype("float32")
            started = time.perf_counter()
            for _ in range(calls):
                interpreter.set_tensor(source["index"], example)
                interpreter.invoke()
            best[key] = min(best[key], (time.perf_counter() - started) / calls * 1e3)
    return [(kernels, f"{best[('float32', kernels)]:.3f}", f"{best[('int8', kernels)]:.3f}",
             f"{best[('float32', kernels)] / best[('int8', kernels)]:.2f}x")
            for kernels in ("XNNPACK", "builtin")]


def _breakdown_table(report: dict) -> tuple:
    """(rows of where a LiteRT export's bytes go, float32 against the export; the bound).

    The bound is the largest size ratio any int8 encoding of the same graph could reach:
    the export's constants and metadata plus the float file's names and structure (as if
    quantization parameters were free and the int8 graph needed no extra tensors or ops).
    """
    export, floats = report["size_breakdown"], report["float_size_breakdown"]
    keys = sorted(set(export) | set(floats), key=lambda k: (k == "structure", k))
    rows = [(key, str(floats.get(key, 0)), str(export.get(key, 0))) for key in keys]
    rows.append(("total", str(report["float_size_bytes"]), str(report["size_bytes"])))
    constants = sum(v for k, v in export.items() if k.startswith("constants_"))
    least = constants + export.get("metadata", 0) + floats["tensor_names"] + floats["structure"]
    bound = f"{report['float_size_bytes'] / least:.2f}x ({least} bytes)"
    return rows, bound


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("--runs", type=int, default=7, help="alternating latency runs")
    parser.add_argument("--calls", type=int, default=100, help="calls per latency run")
    parser.add_argument("--cases", default=",".join(CASES),
                        help="comma-separated format:quantize[:option+option] cases")
    args = parser.parse_args()

    import tfaccel

    rows, kernels, breakdowns = [], None, []
    with tempfile.TemporaryDirectory() as scratch:
        for number, case in enumerate(args.cases.split(",")):
            fmt, mode, options = _parse_case(case)
            label = case.replace(":", " ", 1).replace(":", ", ").replace("+", ", ")
            report = tfaccel.export(args.run_dir, format=fmt, quantize=mode,
                                    out=os.path.join(scratch, f"{number}-{fmt}-{mode}"),
                                    latency_runs=args.runs, latency_calls=args.calls,
                                    **options)
            weights = ""
            if fmt == "litert":
                weights = f"{_litert_weight_bytes(report['path']) / 1024:.1f}"
            rows.append((label, f"{report['size_bytes'] / 1024:.1f}",
                         f"{report['float_size_bytes'] / 1024:.1f}",
                         f"{report['size_ratio']:.2f}x", weights,
                         f"{report['accuracy']:.4f}", f"{report['float_accuracy']:.4f}",
                         f"{100 * report['accuracy_delta']:+.2f}",
                         f"{report['top1_agreement']:.4f}",
                         f"{report['latency_ms']:.3f}", f"{report['float_latency_ms']:.3f}",
                         f"{report['latency_speedup']:.2f}x"))
            if (fmt, mode) == ("litert", "int8"):
                breakdowns.append((label, _breakdown_table(report)))
            if (fmt, mode) == ("litert", "int8") and not options:
                floats = tfaccel.export(args.run_dir, format="litert",
                                        out=os.path.join(scratch, "litert-none"),
                                        latency_runs=1, latency_calls=1)
                kernels = _kernel_table(floats["path"], report["path"], runs=args.runs,
                                        calls=args.calls)
    header = ("export", "KiB", "float KiB", "smaller", "weights KiB", "val acc",
              "float acc", "delta pts", "top-1 agree", "ms/example", "float ms",
              "speed-up")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print(f"\n{report['validation_examples']} validation examples; latency: one example, "
          f"best of {args.runs} alternating runs of {args.calls} calls, CPU "
          "(LiteRT and ONNX Runtime on one thread).")
    # Latency ratios depend on the CPU's int8 instructions: every table names the CPU.
    print(f"CPU: {describe_cpu()}.")
    for label, breakdown in breakdowns:
        print(f"\n{label}: bytes against its float32 file "
              "(tfaccel.tools.export.format_litert.litert_size_breakdown):\n")
        print("| bytes | float32 | int8 |\n|---|---|---|")
        for row in breakdown[0]:
            print("| " + " | ".join(row) + " |")
        print(f"\nUpper bound on int8's size ratio for this graph: {breakdown[1]}.")
    if kernels:
        print(f"\nLiteRT kernels, one example, one thread ({describe_cpu()}):\n")
        print("| kernels | float32 ms | int8 ms | int8 speed-up |\n|---|---|---|---|")
        for row in kernels:
            print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
