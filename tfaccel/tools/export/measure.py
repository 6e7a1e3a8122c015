"""The export against its float twin: predictions, latencies and sizes on the same examples."""

from __future__ import annotations

import dataclasses
import tempfile
import time
from pathlib import Path

from tfaccel.tools.export.format_litert import litert_size_breakdown
from tfaccel.tools.export.format_runtime import Runtime, size_on_disk
from tfaccel.tools.export.formats import convert, load_runtime
from tfaccel.tools.export.options import ARTIFACT_NAMES, ExportOptions
from tfaccel.tools.export.prepare import Prepared


@dataclasses.dataclass
class Measured:
    """What the export and its float twin did on the same validation arrays."""

    predictions: dict
    latencies: dict
    sizes: dict
    details: dict


def measure(artifact: Path, prepared: Prepared, *, staging: Path, format: str,
            quantize: str, options: ExportOptions, latency_runs: int,
            latency_calls: int) -> Measured:
    """Predictions, latencies and sizes of the export beside a float export of the model."""
    details = {}
    with tempfile.TemporaryDirectory(prefix=".float-", dir=staging.parent) as scratch:
        contenders = {"export": load_runtime(artifact, format=format)}
        float_artifact = artifact
        if quantize != "none":
            float_artifact = Path(scratch) / ARTIFACT_NAMES[format]
            convert(prepared.model, float_artifact, format=format, quantize="none",
                     calibration=None, options=options)
            contenders["float"] = load_runtime(float_artifact, format=format)
        predictions = {name: _predict(runtime, prepared.x_val)
                       for name, runtime in contenders.items()}
        latencies = _latencies(contenders, prepared.x_val[:1], runs=latency_runs,
                               calls=latency_calls)
        sizes = {"export": size_on_disk(artifact), "float": size_on_disk(float_artifact)}
        if format == "litert":
            # Where the bytes go: on a small model, fixed overhead bounds the size ratio.
            details = {"size_breakdown": litert_size_breakdown(artifact),
                       "float_size_breakdown": litert_size_breakdown(float_artifact)}
    return Measured(predictions=predictions, latencies=latencies, sizes=sizes,
                     details=details)


def _predict(runtime: Runtime, features, batch: int = 64):
    # Deferred: numpy (~0.1 s); tools/export imports TF-free.
    import numpy as np

    return np.concatenate([np.asarray(runtime.predict(features[i:i + batch]), "float32")
                           for i in range(0, len(features), batch)])


def _latencies(contenders: dict, example, *, runs: int, calls: int) -> dict:
    """Best mean single-example latency (ms) of each contender, alternating them per run."""
    for runtime in contenders.values():
        for _ in range(3):  # warm up: allocation, tracing, first-call caches
            runtime.predict(example)
    best = {name: float("inf") for name in contenders}
    for _ in range(runs):
        for name, runtime in contenders.items():
            started = time.perf_counter()
            for _ in range(calls):
                runtime.predict(example)
            best[name] = min(best[name], (time.perf_counter() - started) / calls * 1e3)
    return best
