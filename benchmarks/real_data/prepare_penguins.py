"""Writes palmerpenguins 0.1.6's 344 penguins (species: 3 string classes, NA values) as train/test CSVs.

The table of the issue: ``penguins.csv`` from the palmerpenguins wheel (pip download, not
installed), every field as the package has it: ``species`` (Adelie 152, Chinstrap 68,
Gentoo 124: the label, a word), ``island`` and ``sex`` (words), four measurements and
``year``, with ``NA`` where a value is missing (2 rows without measurements, 11 without
sex; one falls in the first 100 rows). A stratified 80/20 split by species, seed 0:
``penguins/train.csv`` (275) and ``penguins/test.csv`` (69).

    python benchmarks/real_data/prepare_penguins.py
"""

import csv
import io
import os
import sys
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from shared import count_values, package_file, stratified_split, table_arguments, write_table_split

NAME = "penguins"
REQUIREMENT = "palmerpenguins==0.1.6"
FILENAME = "palmerpenguins-0.1.6-py3-none-any.whl"
SHA256_WHEEL = "5c3be9af84dd703a25f1aaeadeac6ac770cfd38c1620d00089f581c023129ee0"
MEMBER = "palmerpenguins/data/penguins.csv"
SHA256 = "f204db2c753b0937caac3cb35258562c14f073e4bbc76be24b4c51ce22767a93"


def main() -> None:
    """Fetches (or takes) the wheel, reads its penguins.csv and writes the split."""
    args = table_arguments(__doc__, writes=f"{NAME}/train.csv and {NAME}/test.csv",
                           package=REQUIREMENT)
    wheel = package_file(REQUIREMENT, FILENAME, SHA256_WHEEL, given=args.package)
    with zipfile.ZipFile(wheel) as archive:
        header, *rows = csv.reader(io.StringIO(archive.read(MEMBER).decode("utf-8")))
    labels = [row[header.index("species")] for row in rows]
    write_table_split(header=header, rows=rows, split=stratified_split(labels, 0.2, 0),
                      folder=os.path.join(args.out, NAME), sha256=SHA256,
                      describe=lambda idx: count_values([labels[i] for i in idx]))


if __name__ == "__main__":
    main()
