"""Writes scikit-learn's bundled wine table (178 rows, 3 classes labelled 1-3) as train/test CSVs.

The UCI wine recognition table scikit-learn ships (no download): 13 chemical measurements
under scikit-learn's column names (one has a slash: ``od280/od315_of_diluted_wines``), and
the cultivar as the original UCI file numbers it, ``class`` 1, 2 or 3 (59 / 71 / 48; the
labels 1..K of the issue, never a class 0). A stratified 80/20 split, seed 0:
``wine/train.csv`` (142) and ``wine/test.csv`` (36).

    pip install scikit-learn pandas
    python benchmarks/real_data/prepare_wine.py
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from shared import (
    count_values,
    number_text,
    scikit_learn_frame,
    stratified_split,
    table_arguments,
    write_table_split,
)

NAME = "wine"
LABEL = "class"
SHA256 = "53eb144f637e375f16d4d5c2b4584e3280a3761d09eb481023311eb8e989a4c2"


def main() -> None:
    """Reads the bundled table, numbers the classes 1-3 and writes the split."""
    args = table_arguments(__doc__, writes=f"{NAME}/train.csv and {NAME}/test.csv")
    frame, _ = scikit_learn_frame("load_wine")
    features = [c for c in frame.columns if c != "target"]
    labels = [str(int(t) + 1) for t in frame["target"]]  # the UCI file's 1, 2, 3
    rows = [[number_text(v) for v in values] + [label]
            for values, label in zip(frame[features].itertuples(index=False), labels)]
    write_table_split(header=features + [LABEL], rows=rows,
                      split=stratified_split(labels, 0.2, 0),
                      folder=os.path.join(args.out, NAME), sha256=SHA256,
                      describe=lambda idx: count_values([labels[i] for i in idx]))


if __name__ == "__main__":
    main()
