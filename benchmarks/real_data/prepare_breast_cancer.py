"""Writes scikit-learn's bundled breast cancer table (569 rows, binary) as train/test CSV files.

The Wisconsin diagnostic table scikit-learn ships (no download): 30 measurements of cell
nuclei under scikit-learn's column names (with spaces: "mean radius"), and the diagnosis as
the original file has it, a word: ``malignant`` (212) or ``benign`` (357), in a last column
``diagnosis``. A stratified 80/20 split, seed 0: ``breast_cancer/train.csv`` (456) and
``breast_cancer/test.csv`` (113), the same for tfaccel and every baseline.

    pip install scikit-learn pandas
    python benchmarks/real_data/prepare_breast_cancer.py
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

NAME = "breast_cancer"
LABEL = "diagnosis"
SHA256 = "af399a019264f7999e6b395ee90576e46564867aa4c8a40797c96be87dc1be55"


def main() -> None:
    """Reads the bundled table, names the classes and writes the split."""
    args = table_arguments(__doc__, writes=f"{NAME}/train.csv and {NAME}/test.csv")
    frame, bunch = scikit_learn_frame("load_breast_cancer")
    features = [c for c in frame.columns if c != "target"]
    labels = [str(bunch.target_names[t]) for t in frame["target"]]
    rows = [[number_text(v) for v in values] + [label]
            for values, label in zip(frame[features].itertuples(index=False), labels)]
    write_table_split(header=features + [LABEL], rows=rows,
                      split=stratified_split(labels, 0.2, 0),
                      folder=os.path.join(args.out, NAME), sha256=SHA256,
                      describe=lambda idx: count_values([labels[i] for i in idx]))


if __name__ == "__main__":
    main()
