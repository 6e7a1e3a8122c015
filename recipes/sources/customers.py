"""Writes recipes/data/customers/part-{0..3}.csv: a churn table of numbers and categories."""

from pathlib import Path

import numpy as np

PLANS = ("basic", "plus", "pro")
FILES, ROWS_PER_FILE = 4, 500


def rows(count, seed):
    """``(customer_id, age, monthly_spend, support_calls, plan, region, churned)`` rows.

    Churn rises with support calls and falls with spend, differently per plan ("basic"
    customers leave on fewer calls); region (an integer code 0-5) shifts it a little. Each
    label is drawn from that probability, so no model reaches 1.0.
    """
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        age = int(rng.integers(18, 80))
        spend = float(rng.gamma(2.0, 30.0))
        calls = int(rng.poisson(2.0))
        plan = PLANS[int(rng.integers(0, 3))]
        region = int(rng.integers(0, 6))
        score = (1.2 * calls - 0.04 * spend - 1.5 + {"basic": 2.0, "plus": 0.0, "pro": -1.5}[plan]
                 + (0.8 if region in (1, 4) else 0.0))
        churned = int(rng.random() < 1 / (1 + np.exp(-2.0 * score)))
        out.append((seed * 100000 + i, age, spend, calls, plan, region, churned))
    return out


if __name__ == "__main__":
    folder = Path(__file__).resolve().parents[1] / "data" / "customers"
    folder.mkdir(parents=True, exist_ok=True)
    for k in range(FILES):
        lines = ["customer_id,age,monthly_spend,support_calls,plan,region,churned"]
        lines += [f"{c},{a},{s:.2f},{n},{p},{r},{y}" for c, a, s, n, p, r, y
                  in rows(ROWS_PER_FILE, seed=k)]
        (folder / f"part-{k}.csv").write_text("\n".join(lines) + "\n")
    print(f"Wrote {FILES} files of {ROWS_PER_FILE} rows into {folder}")
