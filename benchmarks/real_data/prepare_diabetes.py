"""Writes scikit-learn's bundled diabetes table (442 rows, a regression target) as train/test CSVs.

Efron et al.'s diabetes table scikit-learn ships (no download), in its original units
(``load_diabetes(scaled=False)``): age, sex (coded 1/2), bmi, bp and six blood serum
measurements s1-s6, and ``target``, a measure of disease progression one year later
(integers 25-346: a quantity, so a recipe declares ``data.task: regression``). A seeded
80/20 split of the rows (seed 0): ``diabetes/train.csv`` (354) and ``diabetes/test.csv`` (88).

    pip install scikit-learn pandas
    python benchmarks/real_data/prepare_diabetes.py
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from shared import number_text, random_split, scikit_learn_frame, table_arguments, write_table_split

NAME = "diabetes"
SHA256 = "3b271426c1bd56aebb217e16eb31a4b0f5a5669fe59258d6c6c65411a115cd22"


def main() -> None:
    """Reads the bundled table in its original units and writes the split."""
    args = table_arguments(__doc__, writes=f"{NAME}/train.csv and {NAME}/test.csv")
    frame, _ = scikit_learn_frame("load_diabetes")
    rows = [[number_text(v) for v in values] for values in frame.itertuples(index=False)]
    target = frame["target"].to_numpy()
    write_table_split(header=list(frame.columns), rows=rows,
                      split=random_split(len(rows), 0.2, 0),
                      folder=os.path.join(args.out, NAME), sha256=SHA256,
                      describe=lambda idx: f"target mean {target[idx].mean():.1f}, "
                                           f"sd {target[idx].std():.1f}")


if __name__ == "__main__":
    main()
