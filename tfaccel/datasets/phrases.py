"""TFDS builder of ``tfaccel_phrases``; importing this module registers the dataset name."""

import tensorflow_datasets as tfds

from tfaccel.datasets import _generate_text
from tfaccel.datasets import catalog as _catalog
from tfaccel.datasets._prepare import prepare_once

# Fixed so every machine prepares identical data; each split gets its own stream.
SEED = 20_261_124
_SPLIT_STREAM = {"train": 0, "test": 1}


class TfaccelPhrases(tfds.core.GeneratorBasedBuilder):
    """Texts of 10 to 300 made-up words whose words hint at one of four topics.

    A quarter of a text's words come from its topic's own 60 words, the rest from 400 words
    every topic shares; lengths are lognormal around 30 words (a long tail to 300), the
    skew that makes batching by length pay. Classes are exactly balanced.
    """

    # TFDS derives the registered name from the class name: TfaccelPhrases -> tfaccel_phrases.
    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "Initial release."}

    def _info(self):
        return self.dataset_info_from_configs(
            description=("Procedurally generated texts of four topics (sports, weather, "
                         "cooking, travel), 8,000 train and 1,000 test texts of 10 to 300 "
                         "words. Built into tfaccel; needs no download."),
            features=tfds.features.FeaturesDict({
                "text": tfds.features.Text(),
                "label": tfds.features.ClassLabel(names=list(_catalog.TEXT_CLASS_NAMES)),
            }),
            supervised_keys=("text", "label"),
        )

    def _split_generators(self, dl_manager):
        del dl_manager  # Nothing to download.
        return {split: self._generate_examples(split) for split in _catalog.TEXT_SPLIT_SIZES}

    def _generate_examples(self, split):
        texts, labels = _generate_text.generate_texts(
            _catalog.TEXT_SPLIT_SIZES[split], seed=(SEED, _SPLIT_STREAM[split]))
        for index, (text, label) in enumerate(zip(texts, labels)):
            yield index, {"text": text, "label": int(label)}


def prepare(data_dir=None):
    """Prepares the dataset once in ``data_dir`` (TFDS default when None); the builder."""
    return prepare_once(TfaccelPhrases, data_dir)
