"""benchmarks/real_data/paired.py: paired row and fold comparisons of two models' errors."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "paired", ROOT / "benchmarks" / "real_data" / "paired.py")
paired = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(paired)


def test_a_constant_gap_on_every_row_has_an_interval_of_that_gap_alone():
    theirs = np.linspace(1.0, 20.0, 40)
    result = paired.paired_rows(theirs + 0.5, theirs, resamples=500)
    assert result["difference"] == pytest.approx(0.5)
    assert result["interval"] == pytest.approx([0.5, 0.5])
    assert (result["lower"], result["higher"], result["rows"]) == (0, 40, 40)
    assert result["wilcoxon_p"] < 1e-6  # 40 rows, all one way


def test_the_rows_are_resampled_in_pairs_so_shared_noise_cancels():
    # Two models whose per-row errors share a large common part: unpaired spreads would
    # overlap widely, the paired interval sees only the small, one-sided gap.
    shared = np.random.default_rng(1).gamma(2.0, 20.0, size=88)
    gap = np.random.default_rng(2).normal(0.3, 0.1, size=88)
    result = paired.paired_rows(shared + gap, shared, resamples=2000, seed=3)
    low, high = result["interval"]
    assert 0.2 < low < result["difference"] < high < 0.4
    assert result["difference"] == pytest.approx(np.mean(gap))
    # Seeded: the same call gives the same interval; another seed another one.
    assert paired.paired_rows(shared + gap, shared, resamples=2000, seed=3) == result
    assert paired.paired_rows(shared + gap, shared, resamples=2000, seed=4)["interval"] != \
        result["interval"]


def test_root_compares_root_mean_squares():
    ours, theirs = np.array([1.0, 4.0, 9.0, 16.0]), np.array([4.0, 4.0, 4.0, 4.0])
    result = paired.paired_rows(ours, theirs, root=True, resamples=200)
    assert result["ours"] == pytest.approx(np.sqrt(7.5))
    assert result["difference"] == pytest.approx(np.sqrt(7.5) - 2.0)
    assert (result["lower"], result["higher"]) == (1, 2)  # the 4 vs 4 row is a tie


def test_identical_losses_differ_by_nothing_with_p_one():
    losses = np.array([3.0, 1.0, 2.0])
    result = paired.paired_rows(losses, losses, resamples=100)
    assert result["difference"] == 0.0 and result["interval"] == [0.0, 0.0]
    assert result["wilcoxon_p"] == 1.0


def test_rows_of_different_lengths_are_refused_naming_both_shapes():
    with pytest.raises(ValueError, match=r"\(3,\) and \(2,\)"):
        paired.paired_rows(np.ones(3), np.ones(2))


def test_folds_use_the_corrected_resampled_t_variance():
    # Differences 1, -1, 2, 0: mean 0.5, sd sqrt(5/3); 10-fold: test share 1/9, so the
    # variance is (1/4 + 1/9) * 5/3 = 65/108 (the plain t test's would be 5/12).
    result = paired.paired_folds([11.0, 9.0, 12.0, 10.0], [10.0, 10.0, 10.0, 10.0],
                                 test_share=1 / 9)
    assert result["difference"] == pytest.approx(0.5)
    assert result["sd"] == pytest.approx(np.sqrt(5 / 3))
    assert (result["folds"], result["lower"], result["higher"]) == (4, 1, 2)
    half = 3.182446305284263 * np.sqrt(65 / 108)  # t(0.975, 3 degrees of freedom)
    assert result["interval"] == pytest.approx([0.5 - half, 0.5 + half])
    assert result["p"] == pytest.approx(0.5651, abs=1e-3)  # t = 0.6445 on 3 df
    # The correction widens the interval: with no test share it is the plain paired t.
    plain = paired.paired_folds([11.0, 9.0, 12.0, 10.0], [10.0] * 4, test_share=0.0)
    assert plain["interval"][1] - plain["interval"][0] < half * 2


def test_one_fold_is_refused():
    with pytest.raises(ValueError, match="at least 2"):
        paired.paired_folds([1.0], [2.0], test_share=0.25)
