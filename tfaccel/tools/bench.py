"""Input-pipeline-only benchmark (in the spirit of tfds.benchmark) for datasets and recipes."""

from __future__ import annotations

import dataclasses
import time
from typing import Callable, Optional


def time_batches(dataset, *, num_batches: Optional[int] = None,
                 keep_iterator: bool = False) -> dict:
    """Iterates `dataset` once and times it, without a model.

    Args:
        dataset: A `tf.data.Dataset` of batches.
        num_batches: Stop after this many batches (None: one full pass).
        keep_iterator: Also return the iterator as ``"iterator"`` (`tfaccel doctor` reads
            tf.data's autotuning model from it).

    Returns:
        ``{"first_batch_s", "batches", "examples", "seconds", "examples_per_s",
        "steady_examples_per_s"}``: `examples_per_s` counts every example over the whole
        time from iterator creation (start-up and the fill of a shuffle buffer included,
        which is what a training epoch pays); `steady_examples_per_s` counts the batches
        after the first over the time after the first batch arrived. `examples` counts all.
    """
    # Deferred: TensorFlow (seconds); the timing helpers here stay TF-free.
    from tfaccel.data.tail.counting import examples_in

    start = time.perf_counter()
    iterator = iter(dataset)
    first_at = None
    batches = examples = first_size = 0
    for element in iterator:
        size = examples_in(element)
        if first_at is None:
            first_at, first_size = time.perf_counter(), size
        examples += size
        batches += 1
        if num_batches is not None and batches >= num_batches:
            break
    end = time.perf_counter()
    if first_at is None:
        first_at = end
    steady = end - first_at
    result = {
        "first_batch_s": first_at - start,
        "batches": batches,
        "examples": examples,
        "seconds": end - start,
        "examples_per_s": examples / (end - start) if end > start else 0.0,
        "steady_examples_per_s": ((examples - first_size) / steady
                                  if steady > 0 and batches > 1 else 0.0),
    }
    if keep_iterator:
        result["iterator"] = iterator
    return result


def bench_pipeline(make_dataset: Callable[..., object], *, num_batches: int = 50,
                   epochs: bool = True, repeats: int = 2) -> dict:
    """Benchmarks a pipeline against the truly sequential build of the same source.

    Args:
        make_dataset: ``make_dataset(sequential: bool) -> tf.data.Dataset``; it must build a
            fresh dataset on each call (the tfaccel builders do, with ``sequential=...``).
        num_batches: Batches timed per steady-state measurement.
        epochs: Also time a first (cold) and a second (cached, if the pipeline caches) full
            epoch of the parallel pipeline.
        repeats: The two contenders are run alternately this many times and the best run of
            each kept, because shared machines have bimodal timings.

    Returns:
        A dict with ``parallel``, ``sequential`` (each a `time_batches` result, the run with
        the best steady rate), ``speedup`` (the headline: parallel over sequential steady
        examples/s, after the first batch; None with fewer than 2 batches),
        ``speedup_with_start_up`` (over the whole time, first batch included) and, with
        `epochs`, ``cold_epoch`` and ``second_epoch`` (seconds and examples/s of two full
        passes of one dataset).
    """
    # The headline is the steady rate: what every batch after the first costs in training.
    # Over N batches, the first batch's latency (a shuffle buffer's fill, a cache's first
    # read, worker start-up) would weigh with a share that depends on N, not on the
    # pipeline; it is reported beside, as first_batch_s.
    best = {"parallel": None, "sequential": None}
    for _ in range(repeats):
        for name in ("parallel", "sequential"):
            run = time_batches(make_dataset(sequential=name == "sequential"),
                               num_batches=num_batches)
            if best[name] is None or _rate(run) > _rate(best[name]):
                best[name] = run
    result = {
        "parallel": best["parallel"],
        "sequential": best["sequential"],
        "speedup": _ratio(best, "steady_examples_per_s"),
        "speedup_with_start_up": _ratio(best, "examples_per_s"),
    }
    if epochs:
        dataset = make_dataset(sequential=False)
        for key in ("cold_epoch", "second_epoch"):
            run = time_batches(dataset)
            result[key] = {"seconds": run["seconds"], "batches": run["batches"],
                           "examples_per_s": run["examples_per_s"]}
    return result


def _rate(run: dict) -> tuple:
    # Steady rate first; the whole-time rate decides when a run has no steady rate.
    return run["steady_examples_per_s"], run["examples_per_s"]


def _ratio(best: dict, key: str) -> Optional[float]:
    parallel, sequential = best["parallel"][key], best["sequential"][key]
    return parallel / sequential if parallel and sequential else None


def bench_data_config(config, *, global_batch_size: int, seed: int = 0,
                      num_batches: int = 50, epochs: bool = True, repeats: int = 2) -> dict:
    """Benchmarks the training pipeline a recipe's data section builds (`tfaccel bench`).

    Args:
        config: The recipe's `DataConfig`.
        global_batch_size: The recipe's global batch size.
        seed: Seed for shuffling and augmentation.
        num_batches: Batches per steady-state measurement.
        epochs: Also time a cold and a second full epoch.
        repeats: Alternating runs of each contender; the best is kept.

    Returns:
        The `bench_pipeline` dict plus ``"source"``, ``"batch_size"`` and ``"cache"``.
    """
    # Deferred: TensorFlow (seconds); the timing helpers here stay TF-free.
    from tfaccel.data import cache_files
    from tfaccel.data.from_recipe import build_datasets

    if cache_files.is_file_cache(config.cache):
        # Timing stops iterators early; a file cache left half-written would block the next
        # run, so the benchmark caches in memory instead.
        config = dataclasses.replace(config, cache="memory")
    service = getattr(config, "service", None)
    left_out = service.dispatcher if service is not None and service.dispatcher else None
    if left_out:
        # The sequential baseline cannot run on a service, and the question here is the
        # pipeline's own speed: both contenders run in this process (the table says so).
        from tfaccel.config.recipe import ServiceConfig

        config = dataclasses.replace(config, service=ServiceConfig())

    parallel = []

    def make(sequential: bool):
        train, _, info = build_datasets(config, global_batch_size=global_batch_size,
                                        num_replicas=1, seed=seed, deterministic=False,
                                        sequential=sequential)
        if not sequential:
            parallel[:] = [(train, info)]
        return train

    result = bench_pipeline(make, num_batches=num_batches, epochs=epochs, repeats=repeats)
    result.update(source=config.source, batch_size=global_batch_size,
                  cache=config.cache or None, service_left_out=left_out)
    # Deferred: TensorFlow (seconds); the timing helpers here stay TF-free.
    from tfaccel.data.length_batches import has_open_length, padding_fraction

    # The last parallel build (bench_pipeline always makes one), read again from its start.
    train, info = parallel[0]
    if has_open_length(info.input_shape):
        # Sequences of open length (token ids, waveforms): the share of the steps the
        # model would compute on padding.
        result["padding_fraction"] = padding_fraction(train, num_batches=num_batches)
        result["batch_by_length"] = config.text.batch_by_length
    return result


def format_table(result: dict) -> str:
    """Formats a `bench_pipeline` / `bench_data_config` result as a Markdown table."""
    rows = [
        ("tfaccel pipeline (parallel)", result["parallel"]),
        ("truly sequential tf.data", result["sequential"]),
    ]
    lines = ["| pipeline | examples/s (steady) | first batch (s) | examples/s with 1st batch "
             "| batches |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for name, run in rows:
        lines.append(f"| {name} | {run['steady_examples_per_s']:,.0f} | "
                     f"{run['first_batch_s']:.2f} | {run['examples_per_s']:,.0f} "
                     f"| {run['batches']} |")
    first = (f"{result['parallel']['first_batch_s']:.2f} s vs "
             f"{result['sequential']['first_batch_s']:.2f} s")
    overall = result.get("speedup_with_start_up")
    overall = f"{overall:.2f}x" if overall else ""
    if result.get("speedup"):
        lines.append(f"| **speed-up** | **{result['speedup']:.2f}x** | {first} | {overall} | |")
    elif overall:  # one batch per run: no steady rate to compare
        lines.append(f"| speed-up (first batch included; --batches 2 or more for the "
                     f"steady rate) | | {first} | {overall} | |")
    if "padding_fraction" in result:
        how = "by length" if result["batch_by_length"] else "not by length"
        lines.append(f"\nSteps that are padding: {result['padding_fraction']:.1%} "
                     f"(sequences batched {how}; data.text.batch_by_length).")
    if result.get("service_left_out"):
        lines.append(f"\nBoth ran in this process: the recipe's tf.data service "
                     f"({result['service_left_out']}) was left out (compare with it: "
                     "benchmarks/bench_data_service.py).")
    if "cold_epoch" in result:
        cache = result.get("cache")
        lines += ["", "| epoch | seconds | examples/s |", "| --- | ---: | ---: |"]
        lines.append(f"| first (cold) | {result['cold_epoch']['seconds']:.2f} | "
                     f"{result['cold_epoch']['examples_per_s']:,.0f} |")
        label = f"second ({'cached: ' + str(cache) if cache else 'no cache'})" \
            if "cache" in result else "second"
        lines.append(f"| {label} | {result['second_epoch']['seconds']:.2f} | "
                     f"{result['second_epoch']['examples_per_s']:,.0f} |")
    return "\n".join(lines)
