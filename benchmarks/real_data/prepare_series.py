"""Writes real series bundled in installed packages as one-column CSV files for `source: timeseries`.

Needs `pip install vega_datasets statsmodels` (measurement only; not tfaccel dependencies):
- seattle_temps.csv: vega_datasets 0.9.0's hourly temperatures of Seattle in 2010 (8,759
  rows, degrees Fahrenheit; the package's own file, no download);
- co2.csv: statsmodels' weekly Mauna Loa CO2 (2,284 weeks, 1958-2001; its 59 missing weeks
  filled by linear interpolation between their neighbours);
- sunspots.csv: statsmodels' yearly sunspot numbers (309 years, 1700-2008).
Each file has a header ``value`` and one row per timestep in time order; the row count
is checked.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from shared import DEFAULT_OUT, wrote

ROWS = {"seattle_temps": 8759, "co2": 2284, "sunspots": 309}


def load(name: str) -> np.ndarray:
    """The series `name` of `ROWS`, float64, in time order, no missing value.

    Args:
        name: seattle_temps, co2 or sunspots.

    Returns:
        The values, one per timestep.
    """
    if name == "seattle_temps":
        from vega_datasets import local_data

        frame = local_data.seattle_temps()
        values = frame.sort_values("date")["temp"].to_numpy(np.float64)
    elif name == "co2":
        import statsmodels.api as sm

        values = sm.datasets.co2.load_pandas().data["co2"].interpolate().to_numpy(np.float64)
    else:
        import statsmodels.api as sm

        values = sm.datasets.sunspots.load_pandas().data["SUNACTIVITY"].to_numpy(np.float64)
    if len(values) != ROWS[name] or not np.isfinite(values).all():
        sys.exit(f"{name}: {len(values)} rows ({int((~np.isfinite(values)).sum())} not "
                 f"finite), expected {ROWS[name]} finite values")
    return values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default=os.path.join(DEFAULT_OUT, "series"),
                        help="folder to write the CSV files into (default: %(default)s)")
    out = parser.parse_args().out
    os.makedirs(out, exist_ok=True)
    for name in ROWS:
        values = load(name)
        path = os.path.join(out, f"{name}.csv")
        with open(path, "w") as handle:
            handle.write("value\n")
            handle.writelines(f"{v:.6g}\n" for v in values)
        wrote(path, f"{len(values)} rows of {name}")


if __name__ == "__main__":
    main()
