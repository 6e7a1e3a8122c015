"""TFDS builder of ``tfaccel_shapes``; importing this module registers the dataset name."""

import tensorflow_datasets as tfds

from tfaccel.datasets import _generate
from tfaccel.datasets import catalog as _catalog
from tfaccel.datasets._prepare import prepare_once

# Fixed so every machine prepares byte-identical data; each split gets its own stream.
SEED = 20_240_917
_SPLIT_STREAM = {"train": 0, "test": 1}


class TfaccelShapes(tfds.core.GeneratorBasedBuilder):
    """Noisy coloured circles, squares, triangles and crosses on 32x32 backgrounds.

    Each image holds one shape of random size (radius 5-11 px), position (possibly clipped
    by an edge), rotation (+-15 degrees) and colour, on a random background colour with a
    linear gradient, plus uniform pixel noise (+-20). Classes are exactly balanced.
    """

    # TFDS derives the registered name from the class name: TfaccelShapes -> tfaccel_shapes.
    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "Initial release."}

    def _info(self):
        return self.dataset_info_from_configs(
            description=(
                "Procedurally generated noisy coloured shapes (circle, square, triangle, "
                "cross), 32x32 RGB, 12,000 train and 2,000 test images. Built into tfaccel; "
                "needs no download."
            ),
            features=tfds.features.FeaturesDict(
                {
                    "image": tfds.features.Image(shape=_catalog.IMAGE_SHAPE),
                    "label": tfds.features.ClassLabel(names=list(_catalog.CLASS_NAMES)),
                }
            ),
            supervised_keys=("image", "label"),
        )

    def _split_generators(self, dl_manager):
        del dl_manager  # Nothing to download.
        return {split: self._generate_examples(split) for split in _catalog.SPLIT_SIZES}

    def _generate_examples(self, split):
        # The whole split is rendered in one vectorised call (about 20 MB for train);
        # TFDS then PNG-encodes and writes the examples.
        images, labels = _generate.generate(
            _catalog.SPLIT_SIZES[split], seed=(SEED, _SPLIT_STREAM[split])
        )
        for index, (image, label) in enumerate(zip(images, labels)):
            yield index, {"image": image, "label": int(label)}


def prepare(data_dir=None):
    """Prepares the dataset once in ``data_dir`` (TFDS default when None); the builder."""
    return prepare_once(TfaccelShapes, data_dir)
