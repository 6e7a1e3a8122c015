"""Writes a TFDS dataset (by default the built-in shapes) out as a class-per-folder image tree."""

from __future__ import annotations

import os
from typing import Optional

import tensorflow as tf

from tfaccel import datasets
from tfaccel.data.sources import tfds as tfds_source
from tfaccel.errors import DataError, UserInputError

_ENCODERS = {
    "png": lambda image: tf.io.encode_png(image),
    "jpg": lambda image: tf.io.encode_jpeg(image, quality=95),
    "jpeg": lambda image: tf.io.encode_jpeg(image, quality=95),
}


def export_image_folder(out_dir, *, dataset: str = datasets.NAME, split: str = "train",
                        limit: Optional[int] = None, data_dir: Optional[str] = None,
                        image_format: str = "png", download: bool = False,
                        overwrite: bool = False) -> dict:
    """Writes ``out_dir/<class name>/<index>.<format>`` from a TFDS dataset's split.

    The result is exactly what `tfaccel.data.from_image_folder` reads, so the image-folder
    path can be tried at once::

        export_image_folder("shapes_folder", limit=2000)
        ds = tfaccel.data.from_image_folder("shapes_folder", batch_size=64,
                                            image_size=(32, 32))

    Args:
        out_dir: Folder to create (must be empty or absent unless `overwrite`).
        dataset: TFDS name with an image input and a ``ClassLabel`` label.
        split: TFDS split expression.
        limit: Write at most this many images (None: the whole split).
        data_dir: TFDS data directory.
        image_format: ``"png"`` (lossless) or ``"jpg"``.
        download: Let TFDS prepare a dataset that is not prepared yet.
        overwrite: Allow writing into a non-empty `out_dir`.

    Returns:
        ``{"out_dir", "images", "class_names", "per_class"}``.

    Raises:
        DataError: The dataset is not prepared or has no class names.
        UserInputError: A bad format or limit, or a non-empty `out_dir`.
    """
    if image_format not in _ENCODERS:
        raise UserInputError(f"image_format must be one of {sorted(_ENCODERS)}, got "
                             f"{image_format!r}.")
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        raise UserInputError(f"limit must be a positive integer or None, got {limit!r}.")
    out_dir = os.fspath(out_dir)
    if os.path.isdir(out_dir) and os.listdir(out_dir) and not overwrite:
        raise UserInputError(f"out_dir {out_dir!r} is not empty; choose another folder or "
                             "pass overwrite=True.")
    builder = tfds_source.load_builder(dataset, data_dir=data_dir, download=download)
    class_names = tfds_source.class_names(builder.info)
    if not class_names or not builder.info.supervised_keys:
        raise DataError(f"TFDS dataset {dataset!r} has no (image, ClassLabel) supervised keys "
                        "to write as class folders.")
    for name in class_names:
        os.makedirs(os.path.join(out_dir, name), exist_ok=True)
    source = builder.as_dataset(split=split, as_supervised=True, shuffle_files=False)
    if limit is not None:
        source = source.take(limit)
    encode = _ENCODERS[image_format]
    source = source.map(lambda image, label: (encode(image), label),
                        num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
    per_class = {name: 0 for name in class_names}
    count = 0
    for data, label in source.as_numpy_iterator():
        name = class_names[int(label)]
        path = os.path.join(out_dir, name, f"{count:06d}.{image_format}")
        with open(path, "wb") as f:
            f.write(data)
        per_class[name] += 1
        count += 1
    return {"out_dir": out_dir, "images": count, "class_names": class_names,
            "per_class": per_class}
