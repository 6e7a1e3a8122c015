"""Writes recipes/data/regimes.csv: a signal whose label column is its regime (period)."""

from pathlib import Path

import numpy as np

PERIODS = (8, 20, 45)  # rows per cycle of regimes 0, 1 and 2
ROWS = 2000


def rows(count=ROWS, seed=0):
    """``(step, value, other, regime)`` rows: regimes of 60-160 rows, each its own period."""
    rng = np.random.default_rng(seed)
    step, out = 0, []
    while step < count:
        regime = int(rng.integers(0, len(PERIODS)))
        for _ in range(int(rng.integers(60, 160))):
            phase = 2 * np.pi * step / PERIODS[regime]
            out.append((step, 100 + 10 * np.sin(phase) + rng.normal(0, 2),
                        5 * np.cos(phase) + rng.normal(0, 1), regime))
            step += 1
    return out[:count]


if __name__ == "__main__":
    path = Path(__file__).resolve().parents[1] / "data" / "regimes.csv"
    path.write_text("step,value,other,regime\n" + "".join(
        f"{s},{v:.3f},{o:.3f},{r}\n" for s, v, o, r in rows()))
    print(f"Wrote {path}")
