"""benchmarks/run_all.py: the headline table assembled from canned benchmark outputs (no run)."""

import importlib.util
from pathlib import Path

import pytest

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("run_all", ROOT / "benchmarks" / "run_all.py")
run_all = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run_all)

# Printed by `bench_end_to_end.py --levers` (a loaded-machine run; progress lines kept).
END_TO_END = """\
  seed 0 run 1: Keras tutorial script: 1,352 examples/s, val_accuracy 0.3617
tfaccel: default on 1 replica(s), precision mixed_bfloat16, global batch 64.

3000 PNGs (32x32, 4 classes), 20% held out, small_cnn, batch 64, 4 epochs, AMD EPYC:

| contender | steps per call | training examples/s | vs Keras | whole fit s | val_accuracy |
|---|---:|---:|---:|---:|---:|
| Keras tutorial script | 1 | 1,352 | 1.00x | 16.2 | 0.3617 |
| tfaccel train (defaults) | 19 | 5,416 | 4.00x | 19.4 | 0.4783 |
| tfaccel, precision float32 | 19 | 3,364 | 2.49x | 19.2 | 0.3883 |
| tfaccel, steps_per_execution 1 | 1 | 3,050 | 2.26x | 15.5 | 0.4783 |
| tfaccel, float32 and 1 step per call | 1 | 1,916 | 1.42x | 13.0 | 0.3883 |
"""

# Printed by `bench_engine.py --quick` (two of its sections): the same header twice, told
# apart by the title above each table.
ENGINE = """\

### Accumulation, one device, small CNN 32x32x3, global batch 128

Goal: tfaccel k=4 <= 1.10x

| contender | ms / example | examples / s | ratio vs first row |
|---|---:|---:|---:|
| plain fit, batch 128 | 0.418 | 2,392 | 1.00x |
| tfaccel accumulate k=4 (4x32) | 0.553 | 1,808 | 1.32x |

### Precision auto vs float32, small CNN, batch 64

Goal: auto >= 2x faster (ratio <= 0.5) with bf16

| contender | ms / example | examples / s | ratio vs first row |
|---|---:|---:|---:|
| float32 | 0.500 | 2,000 | 1.00x |
| auto (mixed_bfloat16) | 0.250 | 4,000 | 0.50x |
"""

THROUGHPUT = """\
| model | plain step (ms) | monitored step (ms) | overhead |
| --- | ---: | ---: | ---: |
| small_cnn | 47.25 | 46.35 | -1.9% |
| tiny_mlp | 1.34 | 1.36 | +1.6% |
"""


def _ok(stdout):
    return {"stdout": stdout, "returncode": 0, "seconds": 1.0}


def _by_claim(rows):
    return {claim.strip(): (figure, recorded, command)
            for claim, figure, recorded, command in rows}


def test_tables_are_parsed_with_their_titles():
    tables = run_all.parse_tables(ENGINE)
    assert [t["title"] for t in tables] == [
        "### Accumulation, one device, small CNN 32x32x3, global batch 128 "
        "Goal: tfaccel k=4 <= 1.10x",
        "### Precision auto vs float32, small CNN, batch 64 "
        "Goal: auto >= 2x faster (ratio <= 0.5) with bf16"]
    assert tables[0]["header"] == ["contender", "ms / example", "examples / s",
                                   "ratio vs first row"]
    assert tables[1]["rows"][1] == ["auto (mixed_bfloat16)", "0.250", "4,000", "0.50x"]


@pytest.mark.parametrize("cell, value", [("**1.71x**", 1.71), ("16,575", 16575.0),
                                         ("-1.9%", -1.9), ("0.58x (1.74x faster)", 0.58),
                                         ("", None)])
def test_number_reads_the_first_figure_of_a_cell(cell, value):
    assert run_all.number(cell) == value


def test_headlines_come_from_the_right_rows_columns_and_tables():
    rows = run_all.assemble({"end_to_end": _ok(END_TO_END), "engine": _ok(ENGINE),
                             "throughput": _ok(THROUGHPUT)})
    found = _by_claim(rows)
    assert found["end to end vs the Keras script, PNG folder (README headline)"][:2] == (
        "4.00x", "1.71x (Zen 4)")
    # A lever alone: the defaults' rate over the rate with that lever off, same run.
    assert found["precision auto (mixed_bfloat16) alone"][0] == f"{5416 / 3364:.2f}x"
    assert found["steps_per_execution auto alone"][0] == f"{5416 / 3050:.2f}x"
    assert found["precision auto vs float32, batch 64 (engine)"][0] == "2.00x"
    assert found["gradient accumulation k=4, cost vs plain batch 128"][0] == "1.32x"
    # The replicas section was not in this output: said so, not guessed.
    assert found["MirroredStrategy on 2 logical CPUs, cost vs 1 replica"][0] == (
        "not in its output")
    assert found["throughput monitor overhead, small_cnn"][0] == "-1.9%"
    assert found["throughput monitor overhead, small_cnn"][2] == (
        "python benchmarks/bench_throughput.py --repeats 3 --steps 30")
    # Runs that were not asked for (--only) leave their claims out.
    assert not any(claim.startswith("end to end vs the Keras script, TFDS") for claim in found)
    assert found["precision auto vs float32, batch 256 (engine)"][0] == "not in its output"
    assert len(rows) == 8


def test_a_failed_run_is_named_in_its_rows_and_the_others_still_count():
    rows = run_all.assemble({"end_to_end": {"stdout": "", "returncode": 1, "seconds": 3.0},
                             "crop": {"stdout": "", "returncode": "timeout", "seconds": 9.0},
                             "throughput": _ok(THROUGHPUT)})
    found = _by_claim(rows)
    assert found["end to end vs the Keras script, PNG folder (README headline)"][0] == (
        "failed (exit 1)")
    assert found["precision auto (mixed_bfloat16) alone"][0] == "failed (exit 1)"
    assert found["random resized crop vs Keras (noisy photos)"][0] == "timed out (--timeout)"
    assert found["throughput monitor overhead, small_cnn"][0] == "-1.9%"


def test_the_table_names_the_cpu_and_the_load():
    rows = run_all.assemble({"throughput": _ok(THROUGHPUT)})
    table = run_all.format_table(rows, cpu="AMD EPYC, 2 cores: avx512_bf16 yes",
                                 loads=(1.04, 2.5), minutes=12.3)
    lines = table.splitlines()
    assert lines[0] == ("Headline ratios on AMD EPYC, 2 cores: avx512_bf16 yes; 1-minute load "
                        "average 1.0 before, 2.5 after; 12.3 minutes "
                        "(`python benchmarks/run_all.py`).")
    assert lines[2] == "| claim | this run | recorded in the docs (CPU) | command |"
    assert lines[4] == ("| throughput monitor overhead, small_cnn | -1.9% | -1.9% (no bf16) | "
                        "`python benchmarks/bench_throughput.py --repeats 3 --steps 30` |")


def test_every_headline_names_a_run_and_every_run_a_script():
    assert {h.run for h in run_all.HEADLINES} == set(run_all.RUNS)
    for script, *_ in run_all.RUNS.values():
        assert (ROOT / "benchmarks" / script).is_file(), script


def test_an_unknown_run_is_refused_by_name(capsys):
    with pytest.raises(SystemExit) as exited:
        run_all.main(["--only", "end_to_end,nope"])
    assert exited.value.code == 2
    assert "unknown run(s) nope" in capsys.readouterr().err
