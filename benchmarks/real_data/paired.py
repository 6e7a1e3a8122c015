"""Paired comparisons of two models' errors: on the same rows (bootstrap, Wilcoxon) or the same folds.

Two models scored on the same test rows, or on the same cross-validation folds, differ
less than their two spreads suggest: most of each row's (each fold's) error is shared. So
the comparisons here look at the differences, row by row or fold by fold:

* `paired_rows`: per-row losses of two models on one test set; the difference of their
  means (MAE from absolute errors, or of the roots: RMSE from squared errors), a paired
  bootstrap interval (the same resampled rows for both models) and the Wilcoxon
  signed-rank test of the per-row differences;
* `paired_folds`: per-fold scores of two models on the same folds; the mean difference,
  its standard deviation, on how many folds the first was lower, and Nadeau and Bengio's
  corrected resampled t interval (the folds' training sets overlap, so the plain t test's
  variance is too small; Machine Learning 52, 2003).

NumPy and SciPy only; measurement tools, not tfaccel dependencies.
"""

import numpy as np
from scipy import stats


def paired_rows(ours, theirs, *, root=False, resamples=10_000, seed=0, level=0.95) -> dict:
    """Compares two models' per-row losses on the same rows.

    Args:
        ours: Per-row losses of the first model (absolute errors, or squared errors with
            ``root=True``), shape (n,).
        theirs: The second model's on the same rows, in the same order.
        root: Compare the roots of the mean losses (RMSE from squared errors), not the
            means.
        resamples: Bootstrap resamples of the rows (with replacement, the same rows for
            both models in each).
        seed: The bootstrap's seed.
        level: The interval's coverage (percentile interval).

    Returns:
        ``{"rows", "ours", "theirs", "difference", "interval": [low, high], "wilcoxon_p",
        "lower", "higher"}``: the two figures (mean loss, or its root), ours minus theirs,
        its bootstrap interval, the two-sided Wilcoxon signed-rank p-value of the per-row
        differences (rows with no difference dropped), and on how many rows ours was
        lower / higher.
    """
    ours, theirs = np.asarray(ours, dtype=float), np.asarray(theirs, dtype=float)
    if ours.shape != theirs.shape or ours.ndim != 1 or not len(ours):
        raise ValueError(f"paired_rows needs two equal, non-empty 1-D arrays of losses; got "
                         f"shapes {ours.shape} and {theirs.shape}")
    figure = (lambda losses, axis=None: np.sqrt(np.mean(losses, axis=axis))) if root \
        else (lambda losses, axis=None: np.mean(losses, axis=axis))
    rows = np.random.default_rng(seed).integers(0, len(ours), size=(resamples, len(ours)))
    differences = figure(ours[rows], axis=1) - figure(theirs[rows], axis=1)
    low, high = np.quantile(differences, [(1 - level) / 2, (1 + level) / 2])
    per_row = ours - theirs
    wilcoxon_p = float(stats.wilcoxon(per_row).pvalue) if np.any(per_row) else 1.0
    return {"rows": len(ours), "ours": float(figure(ours)), "theirs": float(figure(theirs)),
            "difference": float(figure(ours) - figure(theirs)),
            "interval": [float(low), float(high)], "wilcoxon_p": wilcoxon_p,
            "lower": int(np.sum(per_row < 0)), "higher": int(np.sum(per_row > 0))}


def paired_folds(ours, theirs, *, test_share, level=0.95) -> dict:
    """Compares two models' scores on the same cross-validation folds.

    Args:
        ours: The first model's score on each fold (e.g. its MAE), shape (n,), n >= 2.
        theirs: The second model's on the same folds, in the same order.
        test_share: A fold's held-out rows over its training rows (1 / (K - 1) for K-fold),
            the correction's n2 / n1.
        level: The interval's coverage.

    Returns:
        ``{"folds", "difference", "sd", "lower", "higher", "interval": [low, high], "p"}``:
        the mean per-fold difference (ours minus theirs), its standard deviation over the
        folds, on how many folds ours was lower / higher, and the corrected resampled t
        interval and two-sided p-value (variance ``(1/n + test_share) * sd**2``, n - 1
        degrees of freedom).
    """
    ours, theirs = np.asarray(ours, dtype=float), np.asarray(theirs, dtype=float)
    if ours.shape != theirs.shape or ours.ndim != 1 or len(ours) < 2:
        raise ValueError(f"paired_folds needs two equal 1-D arrays of at least 2 fold scores;"
                         f" got shapes {ours.shape} and {theirs.shape}")
    differences = ours - theirs
    n, mean, sd = len(differences), float(np.mean(differences)), float(np.std(differences,
                                                                               ddof=1))
    error = float(np.sqrt((1 / n + test_share) * sd ** 2))
    quantile = float(stats.t.ppf((1 + level) / 2, n - 1))
    p = float(2 * stats.t.sf(abs(mean) / error, n - 1)) if error else float(mean == 0)
    return {"folds": n, "difference": mean, "sd": sd, "lower": int(np.sum(differences < 0)),
            "higher": int(np.sum(differences > 0)),
            "interval": [mean - quantile * error, mean + quantile * error], "p": p}
