"""Regenerate the headline ratios on this machine: the benchmarks, reduced, in one Markdown table.

Run:  python benchmarks/run_all.py [--out FILE] [--only NAME,...] [--timeout SECONDS]

Runs the benchmark scripts behind README's "How fast" and docs/performance.md's tables as
subprocesses, one after another, with reduced but meaningful sizes (about 10-15 minutes on
2 cores), reads the ratios from the Markdown tables they print, and prints one table: each
headline's ratio in this run beside the figure recorded in the docs, and the command that
measured it. The CPU (benchmarks/machine.py) and the 1-minute load average before and after
are named above the table: a ratio from a loaded machine is not a claim. A benchmark that
fails, or whose table no longer has the row, shows as such in its row; the others still
count.
"""

import argparse
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from machine import describe_cpu  # benchmarks/machine.py

HERE = Path(__file__).resolve().parent

# The benchmark runs, reduced: name -> the script and its arguments.
RUNS = {
    "end_to_end": ["bench_end_to_end.py", "--levers", "--epochs", "4", "--repeats", "1",
                   "--images", "3000"],
    "end_to_end_tfds": ["bench_end_to_end.py", "--tfds", "--epochs", "4", "--repeats", "1"],
    "data_image": ["bench_data_image.py", "--quick"],
    "jpeg_scaling": ["bench_data_jpeg_scaling.py", "--photos", "smooth", "--images", "300",
                     "--repeats", "3"],
    "crop": ["bench_data_crop.py", "--photos", "noisy", "--images", "300", "--repeats", "3"],
    "data_fit": ["bench_data_fit.py", "--quick"],
    "text_bucketing": ["bench_text_bucketing.py", "--epochs", "2", "--repeats", "1"],
    "data_python": ["bench_data_python.py", "--quick"],
    "engine": ["bench_engine.py", "--quick"],
    "throughput": ["bench_throughput.py", "--repeats", "3", "--steps", "30"],
}


@dataclass(frozen=True)
class Headline:
    """One claimed ratio and where a benchmark's printed tables hold it.

    The figure is the cell of `column` in the row whose first cell contains `row` (case
    ignored; `table`, if given, must be in the title line printed above the table). With
    `over`, the figure is that cell divided by the same column of the row containing `over`
    (a ratio of two rates the script printed, e.g. one lever alone).
    """

    claim: str
    run: str
    row: str
    column: str
    recorded: str
    table: str = ""
    over: Optional[str] = None


HEADLINES = (
    Headline("end to end vs the Keras script, PNG folder (README headline)", "end_to_end",
             "tfaccel train (defaults)", "vs keras", "1.71x (Zen 4)"),
    Headline("  precision auto (mixed_bfloat16) alone", "end_to_end",
             "tfaccel train (defaults)", "training examples/s", "1.35x (Zen 4)",
             over="tfaccel, precision float32"),
    Headline("  steps_per_execution auto alone", "end_to_end", "tfaccel train (defaults)",
             "training examples/s", "1.20x (Zen 4)", over="tfaccel, steps_per_execution 1"),
    Headline("end to end vs the Keras script, TFDS", "end_to_end_tfds",
             "tfaccel train (defaults)", "vs keras", "1.52x (Zen 4)"),
    Headline("image folder vs Keras image_dataset_from_directory, uncached", "data_image",
             "tfaccel from_image_folder", "vs keras", "0.87x-0.89x (Zen 4)"),
    Headline("JPEG DCT-scaled decode vs Keras (smooth photos)", "jpeg_scaling",
             "(default)", "vs keras", "1.21x (AVX2)"),
    Headline("random resized crop vs Keras (noisy photos)", "crop", "(default)", "vs keras",
             "1.28x-2.11x (Zen 4)"),
    Headline("fit input efficiency, default recipe (pipeline / in memory)", "data_fit",
             "default recipe", "input efficiency", "1.04 (Zen 4)"),
    Headline("text batches by length vs padded", "text_bucketing", "by length",
             "vs padded", "5.83x (AVX2)"),
    Headline("from_python workers vs from_generator", "data_python", "from_python",
             "vs from_generator", "3.04x (Zen 4)"),
    Headline("precision auto vs float32, batch 64 (engine)", "engine", "auto",
             "examples / s", "1.74x (Zen 4)", table="batch 64", over="float32"),
    Headline("precision auto vs float32, batch 256 (engine)", "engine", "auto",
             "examples / s", "2.37x (Zen 4)", table="batch 256", over="float32"),
    Headline("gradient accumulation k=4, cost vs plain batch 128", "engine",
             "tfaccel accumulate",
             "ratio vs first row", "1.32x (Zen 4)", table="accumulation"),
    Headline("MirroredStrategy on 2 logical CPUs, cost vs 1 replica", "engine", "mirrored",
             "ratio vs first row", "1.72x (Zen 4)", table="replicas"),
    Headline("throughput monitor overhead, small_cnn", "throughput", "small_cnn",
             "overhead", "-1.9% (no bf16)"),
)


def parse_tables(text: str) -> list:
    """Every Markdown table in a script's output: ``{"title", "header", "rows"}``.

    The title is the text printed between the table before and this one (a `###` heading,
    a goal, the sentence naming the workload), its lines joined by spaces.
    """
    tables, above, current = [], [], None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("|") and stripped.endswith("|"):
            cells = [cell.strip() for cell in stripped[1:-1].split("|")]
            if current is None:
                current = {"title": " ".join(above), "header": cells, "rows": []}
                tables.append(current)
                above = []
            elif not all(re.fullmatch(r":?-{3,}:?", cell) for cell in cells):
                current["rows"].append(cells)
            continue
        current = None
        if stripped:
            above.append(stripped)
    return tables


def number(cell: str) -> Optional[float]:
    """The first number of a cell (``**1.71x**``, ``16,575``, ``-1.9%``, ``0.58x (...)``)."""
    match = re.search(r"-?\d[\d,]*(?:\.\d+)?", cell.replace("**", ""))
    return float(match.group().replace(",", "")) if match else None


def find(tables, headline: Headline) -> Optional[float]:
    """The headline's figure in the parsed tables, or None when a row or column is missing."""
    for table in tables:
        if headline.table.lower() not in table["title"].lower():
            continue
        header = [cell.lower() for cell in table["header"]]
        column = next((i for i, cell in enumerate(header) if headline.column.lower() in cell),
                      None)
        if column is None:
            continue
        value = _cell(table, headline.row, column)
        if value is None:
            continue
        if headline.over is None:
            return value
        base = _cell(table, headline.over, column)
        return value / base if base else None
    return None


def _cell(table, row: str, column: int) -> Optional[float]:
    for cells in table["rows"]:
        if row.lower() in cells[0].lower() and column < len(cells):
            return number(cells[column])
    return None


def assemble(outputs: dict, headlines=HEADLINES) -> list:
    """Rows ``(claim, this run, recorded, command)`` from the runs' outputs.

    Args:
        outputs: Run name -> ``{"stdout", "returncode", "seconds"}`` (a run left out, e.g.
            by --only, is absent).
        headlines: The claims to fill in.
    """
    rows = []
    for headline in headlines:
        result = outputs.get(headline.run)
        if result is None:
            continue
        command = "python benchmarks/" + " ".join(RUNS[headline.run])
        if result["returncode"] == "timeout":
            figure = "timed out (--timeout)"
        elif result["returncode"] != 0:
            figure = f"failed (exit {result['returncode']})"
        else:
            value = find(parse_tables(result["stdout"]), headline)
            figure = "not in its output" if value is None else _format(value, headline)
        rows.append((headline.claim, figure, headline.recorded, command))
    return rows


def _format(value: float, headline: Headline) -> str:
    recorded = headline.recorded.split(" (")[0]
    if recorded.endswith("%"):
        return f"{value:+.1f}%"
    if recorded.endswith("x"):
        return f"{value:.2f}x"
    return f"{value:.2f}"


def format_table(rows, *, cpu: str, loads: tuple, minutes: float) -> str:
    """The one Markdown table, the CPU and the load averages named above it."""
    lines = [f"Headline ratios on {cpu}; 1-minute load average {loads[0]:.1f} before, "
             f"{loads[1]:.1f} after; {minutes:.1f} minutes (`python benchmarks/run_all.py`).",
             "", "| claim | this run | recorded in the docs (CPU) | command |",
             "| --- | ---: | ---: | --- |"]
    lines += [f"| {claim} | {figure} | {recorded} | `{command}` |"
              for claim, figure, recorded, command in rows]
    return "\n".join(lines)


def run(name: str, *, timeout: float) -> dict:
    """One benchmark run as a subprocess: its stdout, exit code and wall seconds."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE.parent),
                                                      env.get("PYTHONPATH")]))
    started = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, str(HERE / RUNS[name][0]), *RUNS[name][1:]],
                              capture_output=True, text=True, timeout=timeout, env=env,
                              cwd=HERE.parent)
        result = {"stdout": done.stdout, "returncode": done.returncode}
        if done.returncode:
            print(f"{name} failed:\n{done.stderr[-2000:]}", file=sys.stderr)
    except subprocess.TimeoutExpired as expired:
        out = expired.stdout or ""
        result = {"stdout": out if isinstance(out, str) else out.decode(), "returncode": "timeout"}
    result["seconds"] = time.perf_counter() - started
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="Also write the table to this file.")
    parser.add_argument("--only", default=",".join(RUNS),
                        help=f"Comma-separated runs (default all: {', '.join(RUNS)}).")
    parser.add_argument("--timeout", type=float, default=600,
                        help="Seconds allowed to each benchmark run.")
    args = parser.parse_args(argv)
    names = args.only.split(",")
    unknown = [name for name in names if name not in RUNS]
    if unknown:
        parser.error(f"--only: unknown run(s) {', '.join(unknown)}; choose from "
                     f"{', '.join(RUNS)}")
    started, before = time.perf_counter(), os.getloadavg()[0]
    outputs = {}
    for name in names:
        outputs[name] = run(name, timeout=args.timeout)
        print(f"{name}: {outputs[name]['seconds']:.0f} s, exit {outputs[name]['returncode']}",
              file=sys.stderr, flush=True)
    table = format_table(assemble(outputs), cpu=describe_cpu(),
                         loads=(before, os.getloadavg()[0]),
                         minutes=(time.perf_counter() - started) / 60)
    print(table)
    if args.out:
        Path(args.out).write_text(table + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
