"""Tests of the sequential baseline and of tfaccel.tools.bench (values, never timings)."""

import numpy as np
import pytest
import tensorflow as tf

from tfaccel import data
from tfaccel.config.recipe import DataConfig
from tfaccel.tools import bench


def _arrays():
    return np.arange(40 * 4 * 4 * 3, dtype=np.uint8).reshape(40, 4, 4, 3), np.arange(40)


def test_sequential_build_yields_the_same_batches():
    x, y = _arrays()
    kw = dict(batch_size=8, seed=1, deterministic=True, augment=["flip", "crop"])
    fast = list(data.from_arrays(x, y, **kw))
    slow_ds = data.from_arrays(x, y, sequential=True, **kw)
    slow = list(slow_ds)
    opts = slow_ds.options()
    assert opts.experimental_optimization.map_parallelization is False
    assert opts.experimental_optimization.inject_prefetch is False
    assert len(fast) == len(slow) > 0
    for (a, b), (c, d) in zip(fast, slow, strict=True):
        np.testing.assert_array_equal(a.numpy(), c.numpy())
        np.testing.assert_array_equal(b.numpy(), d.numpy())


def test_python_source_sequential_baseline_runs_in_process():
    class Source:
        def __len__(self):
            return 10

        def __getitem__(self, i):
            return np.float32(i), np.int64(i)

    ds = data.from_python(Source(), batch_size=5, sequential=True, deterministic=True)
    assert np.concatenate([b[1].numpy() for b in ds]).tolist() == list(range(10))


def test_time_batches_counts_batches_and_examples():
    ds = tf.data.Dataset.range(10).batch(3)
    run = bench.time_batches(ds)
    assert run["batches"] == 4 and run["examples"] == 10
    assert run["examples_per_s"] > 0 and run["steady_examples_per_s"] > 0
    run = bench.time_batches(ds, num_batches=2)
    assert run["batches"] == 2 and run["examples"] == 6


def test_bench_data_config_and_table(tmp_path):
    path = tmp_path / "d.npz"
    x, y = _arrays()
    np.savez(path, x=x, y=y % 4)
    config = DataConfig(source="arrays", path=str(path), cache="memory", augment=["flip"])
    result = bench.bench_data_config(config, global_batch_size=8, num_batches=3, repeats=1)
    assert result["parallel"]["batches"] == 3 and result["sequential"]["batches"] == 3
    assert result["cold_epoch"]["batches"] == 5 and result["second_epoch"]["batches"] == 5
    assert result["speedup"] > 0
    table = bench.format_table(result)
    assert "truly sequential" in table and "speed-up" in table and "cached: memory" in table


@pytest.mark.parametrize("tokenizer", ["text_vectorization", "wordpiece"])
def test_bench_of_a_text_recipe_states_the_padding_fraction(tmp_path, tokenizer):
    from tfaccel.config.recipe import DataConfig, TextConfig
    from tfaccel.tools.bench import bench_data_config, format_table

    for name, words in (("a", "x"), ("b", "y")):
        (tmp_path / name).mkdir()
        for i in range(16):
            (tmp_path / name / f"{i}.txt").write_text(" ".join([words] * (2 + 7 * (i % 4))))
    results = {}
    for by_length in (True, False):
        config = DataConfig(source="text_folder", path=str(tmp_path), validation_split_name=None,
                            cache="memory", text=TextConfig(batch_by_length=by_length,
                                                            tokenizer=tokenizer))
        results[by_length] = bench_data_config(config, global_batch_size=4, num_batches=8,
                                               epochs=False, repeats=1)
    # Lengths 2, 9, 16, 23 words, 8 texts each: sorted, every batch of 4 holds one length.
    assert results[True]["padding_fraction"] == 0.0
    assert results[False]["padding_fraction"] > 0.2
    assert "Steps that are padding" in format_table(results[True])


def test_the_headline_is_the_steady_rate_with_first_batch_latency_beside(monkeypatch):
    # The tester's image-folder figures: a slow first batch (a shuffle buffer's fill) pulls
    # the whole-time ratio to 0.86x while every later batch comes 1.51x faster.
    runs = {"parallel": {"first_batch_s": 0.80, "batches": 20, "examples": 1280,
                         "seconds": 1.80, "examples_per_s": 1280 / 1.80,
                         "steady_examples_per_s": 1510.0},
            "sequential": {"first_batch_s": 0.05, "batches": 20, "examples": 1280,
                           "seconds": 1.55, "examples_per_s": 1280 / 1.55,
                           "steady_examples_per_s": 1000.0}}
    slower_repeat = dict(runs["parallel"], steady_examples_per_s=1200.0,
                         examples_per_s=1000.0)
    measured = iter([runs["parallel"], runs["sequential"], slower_repeat, runs["sequential"]])
    monkeypatch.setattr(bench, "time_batches", lambda dataset, num_batches: next(measured))
    result = bench.bench_pipeline(lambda sequential: None, num_batches=20, epochs=False,
                                  repeats=2)
    assert result["parallel"] is runs["parallel"]  # the best steady run is kept
    assert result["speedup"] == pytest.approx(1.51)
    assert result["speedup_with_start_up"] == pytest.approx((1280 / 1.80) / (1280 / 1.55))
    table = bench.format_table(result)
    headline = [line for line in table.splitlines() if "speed-up" in line]
    assert headline == ["| **speed-up** | **1.51x** | 0.80 s vs 0.05 s | 0.86x | |"]
    assert "| tfaccel pipeline (parallel) | 1,510 | 0.80 | 711 | 20 |" in table


def test_one_batch_per_run_has_no_steady_headline(monkeypatch):
    run = {"first_batch_s": 0.5, "batches": 1, "examples": 64, "seconds": 0.5,
           "examples_per_s": 128.0, "steady_examples_per_s": 0.0}
    monkeypatch.setattr(bench, "time_batches", lambda dataset, num_batches: dict(run))
    result = bench.bench_pipeline(lambda sequential: None, num_batches=1, epochs=False,
                                  repeats=1)
    assert result["speedup"] is None and result["speedup_with_start_up"] == 1.0
    assert "**speed-up**" not in bench.format_table(result)
    assert "--batches 2 or more" in bench.format_table(result)
