"""Forecasting baselines on the windows `source: timeseries` makes: last value, seasonal naive, ridge.

The same split as a recipe (the last ``int(fraction * rows)`` rows held out, no window
across the boundary) and the same windows (``sequence_length`` rows, the next ``horizon``
rows as the target vector); the MAE over every target value of the validation windows.
Ridge (scikit-learn, not a tfaccel dependency) reads the same lags as the model, its
alpha chosen on the last 20% of the training windows (never on validation).

    python benchmarks/real_data/baseline_series.py recipes/data/real/series/seattle_temps.csv \
        --length 48 --horizon 24 --season 24
"""

import argparse

import numpy as np


def windows(series: np.ndarray, *, first: int, last: int, length: int, horizon: int):
    """Windows of rows ``first..last-1`` and their next `horizon` values, in time order.

    Args:
        series: The values, one per row.
        first: First row of the split.
        last: One past its last row.
        length: Rows in a window.
        horizon: Rows forecast after each window.

    Returns:
        ``(inputs [n, length], targets [n, horizon])``.
    """
    span = series[first:last]
    count = len(span) - length - horizon + 1
    starts = np.arange(count)
    inputs = span[starts[:, None] + np.arange(length)]
    targets = span[starts[:, None] + length + np.arange(horizon)]
    return inputs, targets


def baselines(series: np.ndarray, *, fraction: float, length: int, horizon: int,
              season: int) -> dict:
    """MAE of last value, seasonal naive and ridge on the validation windows.

    Args:
        series: The values.
        fraction: The held-out fraction (the last rows).
        length: Rows in a window.
        horizon: Rows forecast.
        season: The season in rows (24 for hourly data: "same hour yesterday").

    Returns:
        ``{name: MAE}`` and the window counts.
    """
    from sklearn.linear_model import Ridge

    rows = len(series)
    boundary = rows - int(fraction * rows)
    train_x, train_y = windows(series, first=0, last=boundary, length=length, horizon=horizon)
    val_x, val_y = windows(series, first=boundary, last=rows, length=length, horizon=horizon)
    if season > length:
        raise SystemExit(f"--season {season} needs windows of at least that many rows")
    # Step h of the forecast (1..horizon) repeats the value `season` rows before it, or
    # k seasons before when horizon > season.
    steps = np.arange(1, horizon + 1)
    back = season * np.ceil(steps / season).astype(int) - steps  # rows before the window end
    seasonal = val_x[:, length - 1 - back]
    fit_count = int(0.8 * len(train_x))
    best = None
    for alpha in (1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0):
        model = Ridge(alpha=alpha).fit(train_x[:fit_count], train_y[:fit_count])
        error = np.abs(model.predict(train_x[fit_count:]) - train_y[fit_count:]).mean()
        if best is None or error < best[0]:
            best = (error, alpha)
    ridge = Ridge(alpha=best[1]).fit(train_x, train_y)
    return {
        "train_windows": len(train_x), "validation_windows": len(val_x),
        "last_value": float(np.abs(val_y - val_x[:, -1:]).mean()),
        "seasonal_naive": float(np.abs(val_y - seasonal).mean()),
        "ridge": float(np.abs(val_y - ridge.predict(val_x)).mean()), "ridge_alpha": best[1],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("csv", help="a file written by prepare_series.py (column value)")
    parser.add_argument("--length", type=int, required=True, help="rows in a window")
    parser.add_argument("--horizon", type=int, required=True, help="rows forecast")
    parser.add_argument("--season", type=int, required=True, help="the season in rows")
    parser.add_argument("--fraction", type=float, default=0.2, help="held-out fraction")
    args = parser.parse_args()
    series = np.loadtxt(args.csv, delimiter=",", skiprows=1, ndmin=1)
    found = baselines(series, fraction=args.fraction, length=args.length,
                      horizon=args.horizon, season=args.season)
    for key, value in found.items():
        print(f"{key}: {value:.4f}" if isinstance(value, float) else f"{key}: {value}")


if __name__ == "__main__":
    main()
